"""The article's machine imitated (pglab.nodes.emulation): the flush library's fidelity and cost, a real server
under it and pinned to a core, what refuses it before a run, and verdicts made under it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pglab.analysis import hardware
from pglab.errors import ParameterError
from pglab.hosts.inventory import Inventory
from pglab.hosts.local import LocalHost
from pglab.nodes import emulation
from pglab.runs.params import validate
from pglab.runs.session import session
from pglab.studies.fdw_overhead.params import Params as FdwParams
from pglab.studies.synchronous_commit import analyze as sc_analyze
from pglab.studies.synchronous_commit.params import Params as ScParams
from pglab.workloads import pgbench

LOCAL = LocalHost()
SC = {"levels": ["on", "off"], "clients": [4]}


def flushes(ctl: Path, seconds: float, path: Path, dsync: bool = False) -> subprocess.Popen:
    """A Python process flushing 8 kB over and over under the library (O_DSYNC writes with ``dsync``)."""
    code = ("import os, sys, time\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT | {'os.O_DSYNC' if dsync else '0'}, 0o600)\n"
            "n, start = 0, time.monotonic()\n"
            "end = start + float(sys.argv[1])\n"
            "while time.monotonic() < end:\n"
            "    os.pwrite(fd, b'x' * 8192, 0)\n"
            f"    {'' if dsync else 'os.fdatasync(fd)'}\n"
            "    n += 1\n"
            "print(n, start, time.monotonic())\n")  # the monotonic clock is the machine's: windows compare
    env = {**os.environ, "LD_PRELOAD": emulation.LIBRARY, "PGLAB_FLUSH_CTL": str(ctl)}
    return subprocess.Popen([sys.executable, "-c", code, str(seconds)], env=env, stdout=subprocess.PIPE, text=True)


def test_the_library_flushes_at_the_preset_rate_one_at_a_time(tmp_path: Path) -> None:
    """hdd_7200 names 120 flushes a second: the probe gets it within 10%, at a CPU cost it reports; two processes
    on one emulated disk share it (one flush at a time), and O_DSYNC writes wait as fdatasync does."""
    disk = emulation.Disk(LOCAL, str(tmp_path / "disk.ctl"), os.environ.get("USER") or "root")
    (tmp_path / "disk.ctl").write_text("0")
    disk.owner = LOCAL.login_user
    got = disk.measure(["hdd_7200", "own"], str(tmp_path / "probe"))
    hdd, own = got["hdd_7200 (8.33 ms)"], got["own disk"]
    # never faster than the disk it names; slower only by the scheduler's wake-up under load (the suite runs 4
    # workers on 2 cores): within 10% on a quiet machine is bench/flush_emulation.py's goal, and each run's record
    assert 60 <= hdd["measured_ops_s"] <= 121, hdd
    assert hdd["faithful"] == (abs(hdd["measured_ops_s"] - 120) <= 12)
    assert own["measured_ops_s"] > 200 and own["faithful"] is None  # the real disk (slower under the suite's load)
    assert 0 <= hdd["cpu_us_per_flush"] < 1000  # what the emulation itself costs a flush, measured
    assert "measured 1" in emulation.said(got)
    disk.set("hdd_7200")
    two = [flushes(tmp_path / "disk.ctl", 1.0, tmp_path / f"f{i}") for i in range(2)]
    dsync = flushes(tmp_path / "disk.ctl", 1.0, tmp_path / "d", dsync=True)
    told = [p.communicate(timeout=30)[0].split() for p in [*two, dsync]]
    counts = [int(t[0]) for t in told]
    # three writers share 120 flushes a second, not 120 each: at most 120 a second over the span from the first's
    # start to the last's end (under the suite's load the three start up to a few tenths apart), one in flight each
    span = max(float(t[2]) for t in told) - min(float(t[1]) for t in told)
    assert 50 <= sum(counts) <= 120 * span + 3, (counts, span)
    assert min(counts) >= 1, counts  # each flushed (flock is not fair: under load one may get few)
    disk.set(0)  # back to the real disk without restarting anything
    assert int(flushes(tmp_path / "disk.ctl", 0.3, tmp_path / "g").communicate(timeout=30)[0].split()[0]) > 120


def test_levels_and_refusals() -> None:
    assert emulation.latency_ms("hdd_7200") == pytest.approx(8.333, abs=0.001)
    assert emulation.latency_ms(2) == 2.0 and emulation.label("own") == "own disk"
    for bad, words in [({"flush_latency_ms": ["hdd_9000"]}, "not a preset"),
                       ({"flush_latency_ms": [-1]}, "outside 0-1000"),
                       ({"flush_latency_ms": ["own", "own"]}, "duplicates"),
                       ({"flushes": True}, "flushes")]:
        with pytest.raises(ParameterError, match=words):
            validate(ScParams, {**SC, "emulate": bad}, "sc")
    # one level a run where the study has no ladder (fdw); a ladder is no place for a first look
    with pytest.raises(ParameterError, match="one flush level a run"):
        validate(FdwParams, {"targets": ["local", "FDW_local"], "emulate": {"flush_latency_ms": ["own", 4]}}, "f")
    with pytest.raises(ParameterError, match="first look judges one flush level"):
        validate(ScParams, {**SC, "max_blocks": 8, "emulate": {"flush_latency_ms": ["own", 4]}}, "sc")
    p = validate(ScParams, {**SC, "emulate": {"flush_latency_ms": ["own", "hdd_7200"], "core_per_node": True}}, "sc")
    assert p.judged_flush() == "hdd_7200" and p.emulation().core_per_node


def test_a_host_without_the_library_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(emulation, "LIBRARY", str(tmp_path / "none.so"))
    problems = emulation.problems(emulation.Emulation(("hdd_7200",)), [LOCAL])
    assert len(problems) == 1 and "none.so" in problems[0] and "make setup" in problems[0]
    assert emulation.problems(emulation.Emulation(core_per_node=True), [LOCAL]) == []
    assert emulation.problems(None, [LOCAL]) == []


@pytest.mark.servers
def test_a_server_under_the_emulated_disk_on_a_core_of_its_own(inventory: Inventory) -> None:
    """The server inherits the library and the CPU set; the flush level changes with no restart."""
    emulated = emulation.Emulation(("hdd_7200", "own"), core_per_node=True)
    with session(inventory, emulation=emulated) as s:
        node = s.deploy.node("primary", "local")
        node.start()
        assert node.cpus == "0" and node.cpus_allowed == "0"
        backends = node.host.run(["pgrep", "-P", str(node.postmaster_pid())]).stdout.split()
        assert backends and all(emulation.cpus_allowed(node.host, int(b)) == "0" for b in backends)
        node.query("create database b")
        init = [node.bin("pgbench"), "-i", "-s", "1", "-q", "b"]
        assert node.host.run(init, env=pgbench.session_env(node)).exit_code == 0

        def tps() -> float:
            argv = pgbench.pinned(node, None, [node.bin("pgbench"), "-c", "2", "-T", "1", "-n", "b"])
            assert argv[:3] == ["taskset", "-c", "0"]
            out = node.host.run(argv, env=pgbench.session_env(node)).stdout
            return float(out.split("tps = ")[1].split()[0])

        slow = tps()
        with s.deploy.flushing(0):  # how a study's set-up runs: at the disk's own speed
            fast = tps()
        assert slow <= 140 < 3 * slow < fast, (slow, fast)  # a commit waits a flush: about 120 a second at most
        disk = s.deploy.disks["primary"]  # and afterwards the emulated flush again, in the control file too
        assert disk.level == "hdd_7200" and node.host.run(["cat", disk.ctl]).stdout.strip() == "8333"
        s.deploy.set_flush("own")
        assert disk.level == "own"
        record = s.deploy.emulated()
        assert record["cores"]["primary"]["cpus_allowed"] == "0"
        assert record["disks"]["primary"]["levels"]["hdd_7200 (8.33 ms)"]["measured_ops_s"] <= 121
        assert "1 core per node" in record["said"]
        t0 = time.monotonic()
        with pytest.raises(Exception, match="core_per_node"):  # a node more than the host has cores
            for i in range(emulation.host_cores(node.host)):
                s.deploy.node(f"extra{i}", "local")
        assert time.monotonic() - t0 < 60


def manifest(flush: bool = True, cores: bool = True) -> dict:
    m: dict = {"emulation": {"flush_levels": ["own disk", "hdd_7200 (8.33 ms)"], "disks": {}, "cores": {}}}
    if flush:
        m["emulation"]["disks"]["primary"] = {"nodes": ["primary"], "levels": {"hdd_7200 (8.33 ms)": {
            "latency_ms": 8.333, "measured_ops_s": 116.0, "cpu_us_per_flush": 80.0, "faithful": True}}}
    if cores:
        m["emulation"]["cores"] = {"primary": {"cpus_allowed": "0"}, "standby1": {"cpus_allowed": "1"}}
    return m


def test_verdicts_say_the_property_they_were_made_under() -> None:
    words = hardware.emulated_flush(manifest())
    assert words.startswith("emulated flush hdd_7200 (8.33 ms) on primary, probe 116/s")
    assert hardware.emulated_flush(manifest(), "own disk") == "" and hardware.emulated_flush({}) == ""
    disk = hardware.disk_flush({"fdatasync_ops_s": 114.0}, words)
    assert not disk.differs and disk.emulated == words and "114 fdatasync/s" in disk.here
    assert hardware.disk_flush({"fdatasync_ops_s": 9000.0}).differs  # this machine's own disk
    assert hardware.pinned_cores(manifest(), ["primary", "standby1"]).startswith("1 core per node")
    assert hardware.pinned_cores(manifest(cores=False), ["primary", "standby1"]) == ""
    joint = hardware.joint(hardware.instances("one host", False),
                           hardware.commit_cost(4.6, 4.6, "1 client", words))
    assert joint.emulated == words and not joint.differs


def test_the_ladder_judges_the_last_level_and_shows_every_one() -> None:
    rng = np.random.default_rng(1)
    rows = []
    for flush, ms, off in (("own disk", 0.0, 2.0), ("hdd_7200 (8.33 ms)", 8.333, 50.0)):
        for block in (1, 2, 3):
            for config, copy, tps in (("on", 1, 100), ("on", 2, 100), ("off", 1, 100 * off)):
                rows.append({"point": f"p{flush}{block}{config}{copy}", "kind": "write", "block": block,
                             "group": f"c004-f{int(ms > 0)}", "config": config, "copy": copy, "clients": 4,
                             "tps": tps * rng.uniform(0.98, 1.02), "flush": flush, "flush_ms": ms})
    writes = pd.DataFrame(rows)
    par = validate(ScParams, {**SC, "emulate": {"flush_latency_ms": ["own", "hdd_7200"]}}, "sc")
    judged, ladder = sc_analyze.judged_writes(writes, "on", par)
    assert set(judged.flush_ms) == {8.333}
    off = ladder[ladder.level == "off"].set_index("flush")["median"]
    assert off["own disk"] == pytest.approx(2.0, rel=0.05) and off["hdd_7200 (8.33 ms)"] == pytest.approx(50, rel=0.05)
    plain = validate(ScParams, SC, "sc")
    same, none = sc_analyze.judged_writes(writes.drop(columns=["flush", "flush_ms"]), "on", plain)
    assert len(same) == len(writes) and none.empty


def test_pglab_emulation_measures_each_level_and_names_a_bad_one() -> None:
    cli = [sys.executable, "-m", "pglab.app.cli", "emulation"]
    bad = subprocess.run([*cli, "hdd_9000"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "hdd_9000" in bad.stderr and "not a preset" in bad.stderr
    ok = subprocess.run([*cli, "4"], capture_output=True, text=True, timeout=60)
    assert ok.returncode in (0, 1), ok.stderr  # 1: not within 10% (under the suite's load), said so
    row = next(line for line in ok.stdout.splitlines() if line.startswith("4 ms"))
    assert float(row.split()[2]) == 250.0 and 0 < float(row.split()[3]) <= 252  # names 250/s; never faster
    assert "within 10% of the rate each level names" in ok.stdout
