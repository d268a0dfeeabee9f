"""The streaming_scale_out study on real servers: modes in effect, the same rows and results on every node,
a standby lost during a synchronous load, TimescaleDB detection, bad parameters refused before anything."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, processes_mentioning
from pglab.errors import ParameterError
from pglab.hosts.inventory import Inventory
from pglab.hosts.local import LocalHost
from pglab.runs.params import validate
from pglab.runs.reading import load_manifest
from pglab.studies.streaming_scale_out import analyze, collect, reads
from pglab.studies.streaming_scale_out.params import LEVEL, Params

SMOKE = yaml.safe_load((REPO / "params/streaming_scale_out.yaml").read_text())["profiles"]["smoke"]


def _params(**kw: Any) -> dict[str, Any]:
    return {**SMOKE, **kw}


# -- parameters --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("change", "words"), [
    ({"standbys": 5}, "standbys"),
    ({"read_nodes": [1, 6]}, "at most 5 nodes"),
    ({"modes": ["none", "semi_sync"]}, "modes.1"),
    ({"batch": 0}, "batch"),
    ({"standby_hosts": ["local", "local", "local"]}, "only 2 standbys"),
    ({"sync_count": 3}, "sync_count=3"),
    ({"read_nodes": [3, 5]}, "must include 1"),
    ({"modes": ["none", "async"], "standbys": 0}, "standbys=0"),
    ({"server_settings": {"synchronous_commit": "off"}}, "set by the study"),
    ({"devices": 1, "duration_s": 20, "batch": 1000}, "more rows than the whole load"),
])
def test_bad_parameters_are_refused_before_anything_starts(tmp_path: Path, change: dict[str, Any],
                                                           words: str) -> None:
    with pytest.raises(ParameterError) as err:
        collect.collect(_params(**change), data_root=tmp_path, progress=False)
    assert words in str(err.value)
    assert not (tmp_path / "runs").exists()  # nothing started, no run folder


def test_plan_blocks_modes_and_node_counts() -> None:
    p = validate(Params, _params(blocks=2, read_blocks=2), "t")
    points = collect.plan(p)
    inserts = [x for x in points if x.group.factors["kind"] == "insert"]
    reads = [x for x in points if x.group.factors["kind"] == "read"]
    assert len(inserts) == 2 * (len(p.modes) + 1)  # every mode once per block, none twice
    assert {x.config for x in inserts} == set(p.modes)
    assert len(reads) == 2 * len(p.query_types) * 3  # n1 twice, n3 once
    assert points.index(reads[0]) > points.index(inserts[-1])  # reads after every insert block
    assert collect.plan(p) == points  # seeded


def test_timescaledb_detection_both_ways(tmp_path: Path) -> None:
    """Absent here for real (not in Debian's archive); present: a control file as TimescaleDB installs it."""
    host = LocalHost()
    assert collect.timescale_installed(host, "/usr/lib/postgresql/15/bin") is None
    assert collect.control_version("comment = 'x'\ndefault_version = '2.14.2'\nmodule_pathname = '$libdir/t'\n") \
        == "2.14.2"
    assert collect.control_version("") is None
    p = validate(Params, _params(), "t")
    assert {x.group.factors["layout"] for x in collect.plan(p, "2.14.2")} == {"plain", "hypertable"}
    assert {x.group.factors["layout"] for x in collect.plan(p, None)} == {"plain"}
    assert collect.plan(validate(Params, _params(timescale=False), "t"), "2.14.2") == collect.plan(p, None)
    found = collect.examine(p, Inventory())
    assert collect.check(p, Inventory()) is None  # `pglab check` reads a dict as systems to skip
    assert found["available"] is False and "not installed on local" in found["note"]
    assert "native partitions" in found["note"]


def test_spread_round_robin() -> None:
    class N:
        def __init__(self, name: str):
            self.name = name

    nodes = [N("primary"), N("sb1"), N("sb2")]
    assert reads.spread(8, nodes) == {"primary": 3, "sb1": 3, "sb2": 2}  # type: ignore[arg-type]
    assert reads.spread(2, nodes) == {"primary": 1, "sb1": 1}  # type: ignore[arg-type]


# -- one real run, shared -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, analyze.Analysis]:
    root = tmp_path_factory.mktemp("sso")
    params = _params(modes=["none", "async", "sync_write", "remote_write", "sync_apply", "per_transaction"],
                     layouts=["plain", "partitioned"], chunk_interval_s=300, sync_method="ANY", sync_count=1)
    run = collect.collect(params, data_root=root, profile="smoke", progress=False)
    a = analyze.analyze(run, root / "derived", root / "figures", REPO / "data/reference")
    return run, a


@pytest.mark.slow
@pytest.mark.servers
def test_every_mode_is_in_effect(smoke_run: tuple[Path, analyze.Analysis]) -> None:
    run, a = smoke_run
    m = load_manifest(run)
    assert m["status"] == "complete" and m["points"]["failed"] == 0, m["points"]
    seen = set()
    for meta_file in run.glob("insert-*/meta.json"):
        meta = json.loads(meta_file.read_text())
        mode = meta["mode"]
        seen.add(mode)
        assert meta["synchronous_commit_in_effect"] == LEVEL[mode]
        if mode == "none":
            assert meta["sync_state"] == {} and meta["standbys_streaming"] == []
        elif mode == "async":
            assert meta["sync_state"] == {"sb1": "async", "sb2": "async"}
        else:  # ANY 1 (sb1, sb2): both quorum standbys
            assert meta["sync_state"] == {"sb1": "quorum", "sb2": "quorum"}
            assert meta["synchronous_standby_names"] == "ANY 1 (sb1, sb2)"
        if mode == "per_transaction":
            cmd = (meta_file.parent / "load_command.txt").read_text()
            assert "--set-local synchronous_commit=local" in cmd
            assert meta["in_transaction_after_set_local"] == "local"
    assert seen == {"none", "async", "sync_write", "remote_write", "sync_apply", "per_transaction"}


@pytest.mark.servers
def test_same_rows_on_every_node_and_same_query_results(smoke_run: tuple[Path, analyze.Analysis]) -> None:
    run, a = smoke_run
    rows = 20 * 600 // 10
    for counts_file in run.glob("insert-*/counts.json"):
        counts = json.loads(counts_file.read_text())
        assert len({json.dumps(v) for v in counts.values()}) == 1, counts
        assert int(counts["primary"][0]) == rows
        meta = json.loads((counts_file.parent / "meta.json").read_text())
        assert set(counts) == {"primary", *meta["standbys_streaming"]}
    checks = load_manifest(run)["read_checks"]
    assert set(checks) == {"plain", "partitioned"}
    for chk in checks.values():
        assert chk["nodes"] == ["primary", "sb1", "sb2"]
        assert set(chk["same_on_every_node"]) == set(SMOKE["query_types"])
        assert all(chk["same_on_every_node"].values())
    assert a.metrics["counts_equal_on_every_node"] is True
    assert a.metrics["read_results_equal_on_every_node"] is True


@pytest.mark.servers
def test_analysis_rates_ratios_and_verdicts(smoke_run: tuple[Path, analyze.Analysis]) -> None:
    run, a = smoke_run
    ins = a.points[a.points.kind == "insert"]
    assert (ins.rows_per_s > 0).all() and (ins.rows == 20 * 60).all()
    rd = a.points[a.points.kind == "read"]
    assert (rd.qps > 0).all() and set(rd.nodes) == {1, 3}
    assert set(a.reads.query_type) == set(SMOKE["query_types"]) and a.reads.p99_ms.notna().all()
    assert len(a.comparison) == 5
    scale = a.comparison[a.comparison.claim.str.contains("scale out")]
    assert set(scale.verdict) == {"not measurable here"}  # every node on this machine
    assert scale.note.str.contains("share its cores").any()
    assert set(a.lag["mode"]) >= {"async", "sync_apply"} and (a.lag.samples > 0).all()
    assert {"rows_by_mode", "lag_during_load", "reads_by_nodes", "published_vs_reproduced"} <= set(a.figures)


# -- a standby lost during a synchronous load ---------------------------------------------------------
def _postmaster_pid(data_dir: str) -> int:
    return int(Path(data_dir, "postmaster.pid").read_text().split()[0])


def _alive(pid: int, wait_s: float = 5.0) -> bool:
    """Whether ``pid`` still runs after up to ``wait_s`` (a zombie waiting for its reaper does not count)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z" or time.monotonic() > deadline:
            return state != "Z"
        time.sleep(0.1)


@pytest.mark.servers
def test_standby_killed_during_a_sync_load_fails_the_point_and_leaves_nothing(tmp_path: Path) -> None:
    params = _params(modes=["none", "sync_apply"], standbys=1, read_nodes=[], devices=400, duration_s=3600,
                     batch=100, clients=2, standby_loss_s=1.0, seed=3)
    killed: dict[str, Any] = {}

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for d in tmp_path.glob("runs/streaming_scale_out/*/insert-*sync_apply*"):
                if (d / "lag.csv").exists():
                    m = json.loads((d.parent / "manifest.json").read_text())
                    sb = next(n for n in m["nodes"] if n["name"] == "sb1")
                    pid = _postmaster_pid(sb["data_dir"])
                    workspace = str(Path(sb["data_dir"]).parent)
                    os.kill(pid, signal.SIGKILL)  # this run's standby, by its PID
                    killed.update(pid=pid, point=d, workspace=workspace, running=processes_mentioning(workspace))
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    with pytest.raises(Exception, match="standby sb1 stopped streaming during a sync_apply load"):
        collect.collect(params, data_root=tmp_path, progress=False)
    t.join()
    assert killed, "the sync_apply load never started"
    meta = json.loads((killed["point"] / "meta.json").read_text())
    assert meta["status"] == "failed" and "every commit waits for it" in meta["error"]
    m = load_manifest(killed["point"].parent)
    assert m["status"] == "failed" and not m.get("leftovers")
    assert killed["running"], "the workspace's servers were seen running at the kill"
    assert processes_mentioning(killed["workspace"]) == {}  # nothing left: servers, loader
    for pid in killed["running"]:
        assert not _alive(pid)
    for proc in m.get("processes", []):
        assert not _alive(int(proc["pid"])), proc


@pytest.mark.servers
def test_sigterm_during_a_load_leaves_nothing_running(tmp_path: Path) -> None:
    """`pglab collect` stopped by SIGTERM while the loader runs: the run says interrupted, nothing is left."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pglab", "collect", "streaming_scale_out", "--profile", "smoke",
                             "--data-root", str(tmp_path), "--quiet"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    workspace, seen = None, {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and workspace is None:
        if list(tmp_path.glob("runs/streaming_scale_out/*/insert-*/lag.csv")):
            m = json.loads(next(tmp_path.glob("runs/streaming_scale_out/*/manifest.json")).read_text())
            workspace = str(Path(m["nodes"][0]["data_dir"]).parent)
            seen = processes_mentioning(workspace)
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert workspace, out
    assert any("pglab.workloads.tsbs load" in c for c in seen.values()), seen  # stopped mid-load
    assert proc.returncode != 0 and "interrupted" in out
    assert processes_mentioning(workspace) == {}
    m = load_manifest(next(tmp_path.glob("runs/streaming_scale_out/*")))
    assert m["status"] == "interrupted" and not m.get("leftovers")
