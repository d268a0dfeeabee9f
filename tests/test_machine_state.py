"""The machine as a run finds it: probed before and after, a busy machine refused (or, asked, measured and marked).

The busy machine here is real: a CPU-bound process at the lowest priority (``nice -n 19``), as the one that shared
the CPU with 16 shipped runs, started by the test and stopped by its PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pglab.hosts import machine_state, run_account
from pglab.hosts.local import LocalHost
from pglab.views.where_ran import machine_html
from pglab.workloads import cpu

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def hog() -> Iterator[subprocess.Popen[bytes]]:
    """A busy loop at nice 19 on each core, stopped by PID whatever the test does."""
    procs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)]
    try:
        yield procs[0]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_probe_says_what_the_verdicts_rest_on() -> None:
    s = machine_state.probe(LocalHost(), "/tmp")
    assert {"at", "boot_id", "cores", "load1", "others", "nice", "steal", "cpu_loop_ms", "flush_ops_s"} <= set(s)
    assert s["cores"] >= 1 and 0 <= s["others"] <= 1 and s["cpu_loop_ms"] and s["cpu_loop_ms"] > 0
    assert len(s["boot_id"]) == 36


def test_others_show_in_the_probe(hog: subprocess.Popen[bytes]) -> None:
    """The hog takes the idle CPU (or, in a busy suite, the other tests do): others over the gate either way."""
    s = machine_state.probe(LocalHost(), "/tmp")
    assert s["others"] > machine_state.OTHERS_MAX
    assert machine_state.busy(s) and "other processes took" in machine_state.busy(s)[0]


def test_busy_and_drift_rules() -> None:
    idle = {"others": 0.02, "load1": 0.5, "cores": 2, "cpu_loop_ms": 40.0, "flush_ops_s": 10000.0, "boot_id": "a"}
    assert machine_state.busy(idle) == []
    assert machine_state.busy({**idle, "load1": 2.5}) == ["the load is 2.5 on 2 cores"]
    assert machine_state.drift(idle, {**idle, "cpu_loop_ms": 45.0}) == []
    assert machine_state.drift(idle, {**idle, "cpu_loop_ms": 70.0, "flush_ops_s": 7000.0}) == []  # this VM's swings
    assert len(machine_state.drift(idle, {**idle, "cpu_loop_ms": 19.0, "flush_ops_s": 6500.0})) == 2
    moved = machine_state.drift(idle, {**idle, "cpu_loop_ms": 120.0, "flush_ops_s": 500.0, "boot_id": "b"})
    assert len(moved) == 3 and "rebooted" in moved[0] and "+200%" in moved[1] and "-95%" in moved[2]


def collect(tmp_path: Path, *extra: str, busy_ok: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PGLAB_BUSY_OK"} | {"PGLAB_BUSY_WAIT_S": "4"}
    if busy_ok:
        extra = (*extra, "--busy-ok")
    return subprocess.run([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", "--profile",
                           "smoke", "--data-root", str(tmp_path / "data"), "--publish-root", str(tmp_path / "pub"),
                           "--quiet", *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.servers
def test_a_busy_machine_is_refused_before_a_run_folder(tmp_path: Path, hog: subprocess.Popen[bytes]) -> None:
    res = collect(tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "the machine is busy" in lines[0] and "--busy-ok" in lines[0], res.stderr
    assert "other processes took" in lines[0] and "still after 4 s" in lines[0]  # waited out first, then refused
    assert not (tmp_path / "data").exists()


@pytest.mark.servers
def test_asked_a_busy_machine_is_measured_and_the_run_marked(tmp_path: Path, hog: subprocess.Popen[bytes]) -> None:
    res = collect(tmp_path, busy_ok=True)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "pub" / "raw" / "synchronous_commit" / "manifest.json").read_text())
    m = manifest["machine"]
    assert m["busy_ok"] and m["marked"] and m["before"]["local"]["others"] > machine_state.OTHERS_MAX
    assert m["after"]["local"]["cpu_loop_ms"] > 0 and "drift" in m
    st = m["statement_us"]  # a real statement on each node, before the first point and after the last
    assert st["before"].keys() == st["after"].keys() and "primary" in st["before"], st
    assert all(0 < v < 100_000 for v in [*st["before"].values(), *st["after"].values()]), st
    shown = machine_html(manifest)
    assert f"primary {st['before']['primary']:,.0f} us before the first point" in shown
    assert "Marked: this run is no run of a machine sitting still" in shown and "other processes took" in shown
    metas = [json.loads(p.read_text()) for p in (tmp_path / "pub" / "raw" / "synchronous_commit").glob("*/meta.json")]
    assert metas and all("busy" in x and "busy_flag" in x for x in metas if x.get("status") == "ok" and "cpu" in x)


def test_marks_are_recomputed_by_todays_rule_and_the_env_keeps_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drift recorded by an older, tighter rule is no mark today; busy at the start always is."""
    from pglab.runs import marks as machine

    probe = {"cpu_loop_ms": 30.0, "flush_ops_s": 5000.0, "boot_id": "a"}
    old = {"machine": {"before": {"local": probe}, "after": {"local": {**probe, "cpu_loop_ms": 48.0}},
                       "marked": ["host local: the CPU probe's time moved from 30 to 48 (+60%; at most ±25%)"],
                       "busy_at_start": []}}
    busy = {"machine": {"before": {"local": probe}, "after": {"local": probe}, "busy_at_start": ["host local: x"]}}
    moved = {"machine": {"before": {"local": probe}, "after": {"local": {**probe, "flush_ops_s": 3000.0}}}}
    assert machine.marks(old) == [] and machine.marks({}) == [] and machine.marks(busy) == ["host local: x"]
    assert "flush rate moved" in machine.marks(moved)[0]
    ended_busy = {"machine": {"before": {"local": probe}, "after": {"local": {**probe, "others": 0.45, "load1": 1.5}}}}
    assert machine.marks(ended_busy) == ["host local: at its end, other processes took 45% of the CPU (at most 10%)"]
    assert machine.marks({"machine": {"before": {"local": probe}, "after": {"local": {**probe, "load1": 3.0}}}}) == []
    statements = {"before": {"primary": 60.0, "standby": 61.0}, "after": {"primary": 80.0, "standby": 200.0}}
    slowed = {"machine": {"before": {"local": probe}, "after": {"local": probe}, "statement_us": statements}}
    assert machine.marks(slowed) == ["node standby: a statement's time moved from 61 to 200 us (+228%; at most a "
                                     "factor of 2.5 either way)"]  # 60 -> 80 is within the rule
    monkeypatch.delenv(machine.WITH_MARKED, raising=False)
    assert machine.left_out({"a": old, "b": busy, "c": moved}).keys() == {"b", "c"}
    monkeypatch.setenv(machine.WITH_MARKED, "1")
    assert machine.left_out({"b": busy}) == {}


_ACCOUNT = """
import json, subprocess, sys, time
from pglab.hosts import run_account
from pglab.hosts.local import LocalHost
from pglab.workloads import cpu
from pglab.workloads import cpu
loop = [sys.executable, "-c", "while True: pass"]
outside = subprocess.Popen(loop)  # started before the run's group: another load
name = run_account.join()
inside = subprocess.Popen(loop)  # started by the run: its own, whoever it is reparented to
time.sleep(0.3)
host = LocalHost()
b, o0 = cpu.sample(host), run_account.usage_ns()
time.sleep(2)
a, o1 = cpu.sample(host), run_account.usage_ns()
total = sum(a[k] - b[k] for k in cpu.FIELDS)
own = (o1 - o0) / 1e9 * cpu.CLK_TCK / total
others = cpu.others(b, a, o1 - o0)
for p in (outside, inside):
    p.kill(); p.wait()
left = run_account.leave(name)
print(json.dumps({"name": name, "own": own, "others": others, "left": left,
                  "gone": not (run_account.ROOT / name).exists()}))
"""


@pytest.mark.skipif(not run_account.available(), reason="needs cgroup v1's cpuacct on its own, writable (root)")
def test_the_runs_own_cpu_is_counted_apart_from_others() -> None:
    """Two busy loops of the same priority: the one the run started counts as its own (the cpuacct group it
    inherits), the one started before counts as others; the group is gone once the run left it."""
    res = subprocess.run([sys.executable, "-c", _ACCOUNT], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["name"].startswith(run_account.PREFIX) and got["left"] and got["gone"], got
    # each loop has one core of two at idle (about 0.5 each); a busy suite shares them out, never to nothing
    assert got["own"] > 0.08 and got["others"] > 0.08, got
    assert cpu.others({}, {"idle": 1}, 0) is None and cpu.others({"idle": 0}, {"idle": 1}, None) is None


def test_a_point_measured_beside_a_load_is_measured_again_and_a_second_is_kept_and_marks_the_run(
        tmp_path: Path) -> None:
    """The sweep's rule, with the flag a real point would carry (``pglab.workloads.cpu.during``): the first
    flagged attempt is set aside and measured again at once; a second flagged one is kept, and marks the run."""
    from pglab.runs import machine, marks, sweep
    from pglab.runs.reading import point_metas
    from pglab.runs.store import RunStore

    store = RunStore(tmp_path, "study", "test", {})
    points = sweep.plan_blocks(["a", "b"], "a", [sweep.Group("c001", {"clients": 1})], 1, seed=1)
    flags = {"b01-c001-a": [True, False], "b01-c001-b": [True, True]}  # a blip, then a load that stays

    def measure(planned: sweep.Planned, point) -> None:  # noqa: ANN001
        point.meta["busy_flag"] = (flags.get(planned.id) or [False]).pop(0)
        point.meta["others"] = 0.4 if point.meta["busy_flag"] else 0.01

    counts = sweep.run(store, points, measure, desc="t", progress=False)
    assert counts["ok"] == len(points) and counts["total"] == len(points)
    aside = sorted(p.name for p in (store.dir / sweep.BESIDE_A_LOAD).iterdir())
    assert aside == ["b01-c001-a.1", "b01-c001-b.1"]
    assert sorted(store.manifest["remeasured_beside_a_load"]) == ["b01-c001-a", "b01-c001-b"]
    kept = {m["point"]: m for _, m in point_metas(store.dir, store.manifest)}
    assert set(kept) == {p.id for p in points} and kept["b01-c001-b"]["busy_flag"] and not kept["b01-c001-a"][
        "busy_flag"]
    store.manifest["machine"] = {"before": {}, "busy_at_start": [], "marked": []}
    m = store.manifest["machine"]
    m["busy_points"] = [i for i, x in kept.items() if x.get("busy_flag")]
    assert marks.marks(store.manifest) == marks.beside_a_load(m) == [
        "1 point(s) measured twice while other processes took more than 10% of the CPU (b01-c001-b)"]
    assert "measured twice" in machine_html({"machine": {**m, "marked": marks.marks(store.manifest)}})
    assert machine.busy_ok.__module__ == "pglab.machine_rules"


@pytest.mark.skipif(not run_account.available(), reason="needs cgroup v1's cpuacct on its own, writable (root)")
def test_others_are_judged_only_where_every_host_of_the_point_is_local(inventory) -> None:  # noqa: ANN001
    """An SSH host's processes (a lab host's, on this very machine) run outside the run's group: a point that uses
    one is not judged for others (only its niced share is), where a local one is."""
    import types

    name = run_account.join()
    local, ssh = inventory.connect("local"), inventory.connect("ssh")
    try:
        for hosts, judged in (([local], True), ([local, ssh], False)):
            point = types.SimpleNamespace(meta={})
            with cpu.during(hosts, point):
                time.sleep(0.3)
            assert ("others" in point.meta) is judged and "busy_flag" in point.meta, point.meta
    finally:
        ssh.close()
        assert run_account.leave(name)
