"""The synchronous_commit study on real clusters: levels in effect, parameters, cleanup, analysis."""

from __future__ import annotations

import filecmp
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, postgres_pids, refused_with_key, workspaces
from pglab.analysis import claims
from pglab.errors import PreflightError
from pglab.hosts.inventory import Inventory
from pglab.nodes import topology
from pglab.runs.session import session
from pglab.studies.synchronous_commit import analyze, collect
from pglab.studies.synchronous_commit.params import LEVELS
from pglab.workloads import pgbench
from verdicts import mismatches

pytestmark = pytest.mark.servers
SMOKE = yaml.safe_load((REPO / "params/synchronous_commit.yaml").read_text())["profiles"]["smoke"]


def tiny(**kw: object) -> dict:
    """Smaller than smoke: the tests check behaviour, not numbers."""
    return {**SMOKE, "levels": ["on", "off"], "clients": [2], "seconds": 2, "warmup_s": 1, "blocks": 1,
            "standby_read_blocks": 1, "standby_read_seconds": 2, "fsync_test_seconds": 0, **kw}


@pytest.mark.slow
@pytest.mark.parametrize("placed", ["local", "ssh", "lab"], indirect=True)
def test_every_level_is_in_effect_in_the_benchmark_session(placed: tuple[Inventory, tuple[str, str, str]]) -> None:
    """Lab: primary on lab1, synchronous standby on lab2, the client on lab3 (TCP to lab1's address)."""
    inventory, (where, standby_host, client_host) = placed
    with session(inventory) as s:
        topo = topology.streaming(s.deploy, where, [("sb1", standby_host)], method="FIRST", count=1)
        primary = topo.primary
        client = s.deploy.client(client_host) if client_host != where else topology.Client.on_node_host(primary)
        primary.query(f"create database {collect.DB}")
        for level in LEVELS:
            facts = collect.set_level(primary, level, "sb1")
            assert facts == {"synchronous_commit_in_effect": level, "sync_state": "sync"}
            # the very session settings pgbench gets (same env, same binaries, same client host)
            res = client.host.run([client.bin("psql"), "-XAtc", "show synchronous_commit", collect.DB],
                                  env=pgbench.session_env(primary, client=client))
            assert res.stdout.strip() == level
            state = primary.query("select sync_state from pg_stat_replication where application_name='sb1'")
            assert state == [("sync",)]


def test_bad_parameters_name_the_key_and_start_nothing(tmp_path: Path) -> None:
    before = workspaces()
    cases = {
        "levels.1": tiny(levels=["on", "sometimes"]),
        "clients.0": tiny(clients=[0]),
        "bogus": tiny(bogus=1),
        "seconds": tiny(seconds="many"),
        "baseline": tiny(baseline="local"),
        "server_settings": tiny(server_settings={"synchronous_commit": "off"}),
    }
    refused_with_key(collect.collect, cases, tmp_path)
    with pytest.raises(PreflightError, match="nowhere"):
        collect.collect(tiny(primary_host="nowhere", standby_host="nowhere"), data_root=tmp_path, progress=False)
    with pytest.raises(PreflightError, match="max_connections"):
        collect.collect(tiny(clients=[50], server_settings={"max_connections": 20}), data_root=tmp_path,
                        progress=False)
    assert workspaces() == before  # no server folder was even created
    assert not (tmp_path / "raw").exists() and not (tmp_path / "runs").exists()  # nothing started, nothing written


def test_cli_rejects_bad_params_file(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(yaml.safe_dump({"profile": "smoke", "profiles": {"smoke": tiny(clients=[-1])}}))
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "collect", "synchronous_commit", "--params", str(bad),
                          "--data-root", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 2 and "clients.0" in res.stderr and "Traceback" not in res.stderr


PASSWORDS: list[str] = []  # every password the smoke run generated (see smoke_run)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small run; the passwords its workspaces generated are kept so tests can search for them."""
    import secrets

    real = secrets.token_urlsafe

    def recording(n: int | None = None) -> str:
        value = real(n)
        PASSWORDS.append(value)
        return value

    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(secrets, "token_urlsafe", recording)
        return collect.collect(tiny(levels=["on", "remote_write", "local", "off"], clients=[1, 2],
                                    fsync_test_seconds=1), data_root=data, profile="test", progress=False)


def files_containing(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.slow
def test_collect_writes_raw_first(smoke_run: Path) -> None:
    manifest = json.loads((smoke_run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["points"]["failed"] == 0
    assert manifest["points"]["ok"] == manifest["points"]["total"] == 2 * (4 + 1) + 3  # A/A: on twice a block
    assert manifest["points"]["total"] == len(manifest["plan"]["points"])
    for name in ("git_revision", "packages", "hosts", "tools", "nodes", "parameters", "plan"):
        assert manifest[name], name
    point = smoke_run / "write-b01-c002-on"
    for f in ("meta.json", "command.txt", "stdout.txt", "stderr.txt", "exit_code", "settings.json", "waits.csv"):
        assert (point / f).exists(), f
    assert "tps = " in (point / "stdout.txt").read_text()
    assert "progress: " in (point / "stderr.txt").read_text()  # -P 1: the window is cut from it
    kept = sorted(p.name for p in (point / "txlog").iterdir())  # -l, fetched and thinned (txlog_thin)
    assert kept == ["latency_histogram.json", "sample_1in100.pgbench_log.gz"]
    meta = json.loads((point / "meta.json").read_text())
    assert {"block", "config", "copy", "steal", "cpu", "load1"} <= set(meta)
    assert (smoke_run / "write-b01-c002-on-aa").exists()
    loaded = next(smoke_run.glob("read-*-loaded"))
    assert (loaded / "primary_stdout.txt").exists()  # the primary's load, measured beside the reads
    assert (smoke_run / "logs" / "primary.log").exists()


def test_the_password_is_in_no_file_of_the_run(smoke_run: Path, tmp_path: Path) -> None:
    assert PASSWORDS, "the run generated no password?"
    analyze.analyze(smoke_run, tmp_path / "derived", tmp_path / "figures", REPO / "data/reference")
    for pw in PASSWORDS:
        assert not files_containing(smoke_run, pw), "password in the raw run"
        assert not files_containing(tmp_path, pw), "password in derived tables or figures"


def test_a_second_run_keeps_the_first(smoke_run: Path) -> None:
    """Runs are archived side by side; publishing the new one replaces only the pipeline's copy."""
    from pglab.runs.reading import pipeline_dir
    from pglab.runs.store import publish

    data = smoke_run.parents[2]
    before = {p: p.read_bytes() for p in smoke_run.rglob("*") if p.is_file()}
    publish(smoke_run, pipeline_dir(data, "synchronous_commit"))
    second = collect.collect(tiny(levels=["on"], clients=[1], standby_read_blocks=0), data_root=data,
                             profile="test", progress=False)
    publish(second, pipeline_dir(data, "synchronous_commit"))
    assert second.parent == smoke_run.parent and second != smoke_run
    assert {p: p.read_bytes() for p in smoke_run.rglob("*") if p.is_file()} == before  # untouched, byte for byte
    published = json.loads((pipeline_dir(data, "synchronous_commit") / "manifest.json").read_text())
    assert published["run_id"] == second.name


def test_analyze_is_deterministic(smoke_run: Path, tmp_path: Path) -> None:
    outs = []
    for i in (1, 2):
        a = analyze.analyze(smoke_run, tmp_path / f"d{i}", tmp_path / f"f{i}", REPO / "data/reference")
        outs.append(a)
    for name in ("points.csv", "summary.csv", "ratios.csv", "comparison.csv", "waits.csv", "latency.csv",
                 "details.json", "metrics.json"):
        assert filecmp.cmp(tmp_path / "d1" / name, tmp_path / "d2" / name, shallow=False), name
    figs = sorted(p.name for p in (tmp_path / "f1").iterdir())
    assert {"tps_by_clients.png", "tps_by_clients.svg", "ratio_to_on.png", "standby_reads.png",
            "published_vs_reproduced.png"} <= set(figs)
    for name in figs:
        assert filecmp.cmp(tmp_path / "f1" / name, tmp_path / "f2" / name, shallow=False), name
    a = outs[0]
    assert set(a.points.config) == {"on", "remote_write", "local", "off", "idle", "loaded"}
    assert (a.points.tps > 0).all()
    assert list(a.comparison.columns[:8]) == claims.COMPARISON_COLUMNS
    assert set(a.comparison.verdict) <= set(claims.VERDICTS)
    assert mismatches(a.comparison) == []  # each verdict follows from its interval under its stated rule
    assert a.metrics["ratio_to_on"]["off"] > 0 and a.metrics["fdatasync_ops_s"] > 0
    assert len(a.latency) and (a.latency.p99_ms >= a.latency.p50_ms).all()
    assert len(a.waits) and set(a.waits.config) >= {"on", "off"}  # the primary's backends were sampled


def test_failed_point_is_kept_and_excluded(smoke_run: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / smoke_run.name
    shutil.copytree(smoke_run, run)
    meta = json.loads((run / "write-b01-c001-on" / "meta.json").read_text())
    meta.update(status="failed", error="injected")
    (run / "write-b01-c001-on" / "meta.json").write_text(json.dumps(meta))
    a = analyze.analyze(run, tmp_path / "d", tmp_path / "f", REPO / "data/reference")
    assert list(a.failed.point) == ["write-b01-c001-on"]
    assert "write-b01-c001-on" not in set(a.points.point)
    # its block lost one baseline copy: the other divides alone, and that block has no A/A
    lost = a.ratios[(a.ratios.block == 1) & (a.ratios.clients == 1)]
    copy2 = a.points[a.points.point == "write-b01-c001-on-aa"].tps.iloc[0]
    assert len(lost) and "A/A" not in set(lost.config)
    assert list(lost.baseline) == pytest.approx([copy2] * len(lost))  # exp(log(x)): equal to rounding


STUDY_SCRIPT = """
import sys, yaml
from pglab.studies.synchronous_commit import collect
p = yaml.safe_load(open(sys.argv[1]))
collect.collect(p, data_root=sys.argv[2], profile="test", progress=False)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_no_server_left_after_a_signal(tmp_path: Path, sig: int) -> None:
    """Interrupt a running study at a point where servers are up: all of them are stopped."""
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump(tiny(seconds=30, clients=[4], blocks=3)))
    proc = subprocess.Popen([sys.executable, "-c", STUDY_SCRIPT, str(pfile), str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp_path.glob("runs/*/*/write-*")):
        time.sleep(0.2)  # wait until a measurement is running
    ws = json.loads(next(tmp_path.glob("runs/*/*/manifest.json")).read_text())["workspaces"]["local"]
    assert len(postgres_pids(ws)) == 2, "primary and standby should be running by now"
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert not postgres_pids(ws), err
    subprocess.run(["rm", "-rf", ws])
    manifest = json.loads(next(tmp_path.glob("runs/*/*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted"
    assert "raw files kept" in err


def test_cleanup_command_after_sigkill(tmp_path: Path) -> None:
    """A SIGKILLed run cannot clean up; `pglab cleanup` stops what its manifest lists."""
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump(tiny(seconds=30, clients=[4], blocks=3)))
    proc = subprocess.Popen([sys.executable, "-c", STUDY_SCRIPT, str(pfile), str(tmp_path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp_path.glob("runs/*/*/write-*")):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ws = json.loads(next(tmp_path.glob("runs/*/*/manifest.json")).read_text())["workspaces"]["local"]
    assert len(postgres_pids(ws)) == 2
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "cleanup", "--data-root", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0 and "stopped node primary" in res.stdout, res.stdout + res.stderr
    time.sleep(0.5)
    assert not postgres_pids(ws)
    manifest = json.loads(next(tmp_path.glob("runs/*/*/manifest.json")).read_text())
    assert manifest["status"] == "killed"
    for base in manifest["workspaces"].values():
        subprocess.run(["rm", "-rf", base])
