"""The logical_replication study on real clusters: broken subscribers, skipped systems, cleanup of
servers and daemons after an exception and after SIGTERM, and the analysis of what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, postgres_pids, processes_mentioning
from pglab.errors import ParameterError
from pglab.hosts.inventory import HostEntry, Inventory
from pglab.replication.base import System
from pglab.replication.builtin import SUBSCRIPTION
from pglab.studies.logical_replication import analyze, collect
from pglab.studies.logical_replication.collect import Planned

pytestmark = pytest.mark.servers
SMOKE = yaml.safe_load((REPO / "params/logical_replication.yaml").read_text())["profiles"]["smoke"]
REFERENCE = REPO / "data" / "reference"


def tiny(**kw: object) -> dict:
    """Smaller than smoke: the tests check behaviour, not numbers."""
    return {**SMOKE, "clients": [2], "run_seconds": 2, "blocks": 1, "catchup_timeout_s": 30,
            "lag_interval_s": 0.2, **kw}


def metas(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in run.glob("*/meta.json")}


@pytest.mark.slow
def test_broken_subscriber_is_caught_and_the_sweep_goes_on(tmp_path: Path, inventory: Inventory) -> None:
    """Replication stopped mid-run -> failed (not caught up); a row lost on the subscriber -> inconsistent.

    Neither is reported as a number; the pair is rebuilt and the next point measures normally.
    """
    calls: list[str] = []
    on_disk: dict[str, bool] = {}

    def on_run(system: System, planned: Planned) -> None:
        calls.append(planned.id)
        time.sleep(0.5)
        if len(calls) == 3:  # two broken pairs so far: only the later one keeps its data dirs
            base = Path(system.provider.ws.base)
            on_disk.update({d.name: True for d in base.iterdir() if d.name.startswith("builtin_")})
        if len(calls) == 1:
            system.subscriber.query(f"alter subscription {SUBSCRIPTION} disable", dbname="bench")
        elif len(calls) == 2:  # an account this run updates: the point's own check (touched rows) sees it
            time.sleep(0.5)
            system.subscriber.query("delete from pgbench_accounts where aid = (select min(aid) from pgbench_history)",
                                    dbname="bench")
        elif len(calls) == 4:  # a row no run touches: only the whole-table check when the pair closes sees it
            system.subscriber.query("insert into pgbench_accounts values (999999999, 1, 0, '')", dbname="bench")

    # one system: it is its own baseline, so a block is builtin twice (A/A); two blocks, four points
    run = collect.collect(tiny(systems=["builtin"], blocks=2, catchup_timeout_s=4), data_root=tmp_path,
                          profile="test", inventory=inventory, progress=False, on_run=on_run)
    m, points = json.loads((run / "manifest.json").read_text()), metas(run)
    stopped, lost, fine, fine2 = (points[c] for c in calls)
    assert stopped["status"] == "failed" and stopped["error"].startswith("not caught up"), stopped
    assert stopped["consistent"] is False and "pgbench_history" in stopped["mismatched"]
    assert stopped["timing"]["caught_up"] is False and stopped["timing"]["catchup_s"] is None
    assert "timeout" in (run / calls[0] / "lag.csv").read_text()
    assert lost["status"] == "inconsistent" and lost["timing"]["caught_up"] is True
    assert "pgbench_accounts" in lost["mismatched"]
    assert fine["status"] == "ok" and fine["consistent"] is True and fine["generation"] == 3
    assert fine2["status"] == "ok" and fine2["generation"] == 3  # the pair is kept across blocks
    # every point was tried, two were not measured: partial, never complete, and the manifest says which
    assert m["status"] == "partial" and m["systems"]["builtin"]["generations"] == 3
    assert m["points"] == {"total": 4, "ok": 2, "failed": 1, "inconsistent": 1}
    assert m["failed_points"] == calls[:2]
    assert m["plan"]["kept_across_blocks"] == ["builtin provider/subscriber pair"]
    assert 0 < m["measurement_share"] < 1 and m["measured_s"] > 0
    assert m["systems"]["builtin"]["closing_check"]["consistent"] is False
    assert m["systems"]["builtin"]["closing_check"]["mismatched"] == ["pgbench_accounts"]
    assert not postgres_pids(m["workspaces"]["local"])
    kept = [Path(d["data_dir"]).name for d in m["evidence"]["kept_data_dirs"]]
    removed = [Path(d["data_dir"]).name for d in m["evidence"]["removed_data_dirs"]]
    assert kept == ["builtin_provider_2", "builtin_subscriber_2"]
    assert removed == ["builtin_provider", "builtin_subscriber"]
    assert {"builtin_provider_2", "builtin_subscriber_2", "builtin_provider_3"} <= set(on_disk)
    assert "builtin_provider" not in on_disk and "builtin_subscriber" not in on_disk

    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REFERENCE)
    assert set(a.points.point) == set(calls[2:])  # only the good points are numbers
    assert sorted(a.failed.status) == ["failed", "inconsistent"]
    row = a.systems.set_index("system").loc["builtin"]
    assert row.consistency == ("INCONSISTENT when the pair closed: pgbench_accounts differ; and in 1 of 4 points")
    assert row.not_caught_up == 1 and row.rebuilds == 2


@pytest.fixture
def bindir_without_extensions() -> Path:
    """PostgreSQL's programs, but a pg_config that points at empty share/lib dirs and no Slony next to it."""
    real = Path("/usr/lib/postgresql/15/bin")
    base = Path(tempfile.mkdtemp(prefix="pglab-fakebin-"))
    os.chmod(base, 0o755)
    (base / "bin").mkdir(mode=0o755)
    (base / "empty").mkdir(mode=0o755)
    for prog in real.iterdir():
        if prog.name != "pg_config":
            (base / "bin" / prog.name).symlink_to(prog)
    script = base / "bin" / "pg_config"
    script.write_text(f"#!/bin/sh\necho {base}/empty\necho {base}/empty\n")
    script.chmod(0o755)
    yield base / "bin"
    subprocess.run(["rm", "-rf", str(base)], check=True)


def test_missing_system_is_skipped_with_its_reason(tmp_path: Path, bindir_without_extensions: Path) -> None:
    inv = Inventory(hosts={"local": HostEntry(bindir=str(bindir_without_extensions))})
    run = collect.collect(tiny(systems=["streaming", "pglogical", "slony"]), data_root=tmp_path, profile="test",
                          inventory=inv, progress=False)
    m = json.loads((run / "manifest.json").read_text())
    assert m["systems"]["pglogical"]["status"] == "skipped"
    assert "pglogical.control is missing" in m["systems"]["pglogical"]["reason"]
    assert "slony1_funcs" in m["systems"]["slony"]["reason"]
    assert m["systems"]["streaming"]["status"] == "measured" and m["points"]["ok"] == 2  # with its A/A
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REFERENCE)
    assert list(a.systems.system) == ["streaming", "pglogical", "slony"]
    assert list(a.systems.status) == ["measured", "skipped", "skipped"]
    rows = a.comparison.set_index("claim")
    close = rows.loc["pglogical is close to streaming up to 8 clients"]
    assert close.verdict == "not measurable here" and close.here_verdict == ""  # nothing to keep apart: not run
    assert close.note.startswith("needs streaming (the baseline) and pglogical")


def test_bad_parameters_name_the_key_and_start_nothing(tmp_path: Path, inventory: Inventory) -> None:
    with pytest.raises(ParameterError) as exc:
        collect.collect(tiny(systems=["streaming", "bucardo"], catchup_poll_s=0.5, server_settings={"wal_level": 1}),
                        data_root=tmp_path, inventory=inventory, progress=False)
    text = str(exc.value)
    assert "systems.1" in text and "catchup_poll_s" in text and "wal_level" in text
    assert not (tmp_path / "raw").exists() and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_exception_mid_run_stops_servers_and_daemons(tmp_path: Path, inventory: Inventory) -> None:
    """An unexpected error while Londiste runs: workers, pgqd, copy processes and both servers are stopped."""
    seen: dict[str, object] = {}

    def on_run(system: System, planned: Planned) -> None:
        seen["ws"] = system.provider.ws.base
        seen["daemons"] = processes_mentioning(system.provider.ws.base)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        collect.collect(tiny(systems=["londiste"]), data_root=tmp_path, profile="test", inventory=inventory,
                        progress=False, on_run=on_run)
    ws = str(seen["ws"])
    assert any("pgqd" in c for c in seen["daemons"].values())  # they were running
    assert any("londiste" in c and "worker" in c for c in seen["daemons"].values())
    assert not processes_mentioning(ws), processes_mentioning(ws)
    m = json.loads(next(tmp_path.glob("runs/*/*/manifest.json")).read_text())
    daemons = [e for e in m["processes"] if "pgbench" not in e["command"]]
    assert m["status"] == "failed" and len(daemons) == 3  # pgqd, root and leaf workers
    assert any("pgbench" in e["command"] for e in m["processes"])  # the workload too, listed when it started
    subprocess.run(["rm", "-rf", ws])


STUDY_SCRIPT = """
import sys, yaml
from pglab.studies.logical_replication import collect
p = yaml.safe_load(open(sys.argv[1]))
collect.collect(p, data_root=sys.argv[2], profile="test", progress=False)
"""


def test_sigterm_mid_run_stops_servers_and_daemons(tmp_path: Path) -> None:
    """SIGTERM while Slony replicates a run: both slons and both servers are gone, the run says interrupted."""
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump(tiny(systems=["slony"], run_seconds=20, blocks=2)))
    proc = subprocess.Popen([sys.executable, "-c", STUDY_SCRIPT, str(pfile), str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list(tmp_path.glob("runs/*/*/b01-c*-slony*")):
        time.sleep(0.2)  # wait until a measurement is running
    manifest_path = next(tmp_path.glob("runs/*/*/manifest.json"))
    while time.monotonic() < deadline and not any(  # the workload is listed as soon as it has started
            "pgbench" in e["command"] for e in json.loads(manifest_path.read_text())["processes"]):
        time.sleep(0.1)
    time.sleep(1)
    ws = json.loads(manifest_path.read_text())["workspaces"]["local"]
    running = processes_mentioning(ws)
    assert len(postgres_pids(ws)) == 2 and sum("slon -s" in c for c in running.values()) >= 2, running
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert not processes_mentioning(ws), err
    manifest = json.loads(manifest_path.read_text())
    daemons = [e for e in manifest["processes"] if "pgbench" not in e["command"]]
    assert manifest["status"] == "interrupted" and len(daemons) == 2  # both slons
    assert any("pgbench" in e["command"] for e in manifest["processes"])
    subprocess.run(["rm", "-rf", ws])


@pytest.mark.slow
def test_daemons_and_servers_are_gone_after_a_complete_study(tmp_path: Path, inventory: Inventory) -> None:
    """Also: the pairs are set up at the same time (in threads), and each is closed after its closing check."""
    run = collect.collect(tiny(systems=["slony", "builtin"], clients=[1], run_seconds=1), data_root=tmp_path,
                          profile="test", inventory=inventory, progress=False)
    m, points = json.loads((run / "manifest.json").read_text()), metas(run)
    assert m["status"] == "complete" and m["points"]["ok"] == 3  # slony twice (A/A), builtin
    assert len(m["processes"]) == 5 and all(p["stopped"] for p in m["processes"])  # both slons, three pgbench
    assert not processes_mentioning(m["workspaces"]["local"])
    assert not Path(m["workspaces"]["local"]).exists()  # removed on success; server logs copied first
    assert {p.name for p in (run / "logs").iterdir()} == {f"{name}_{role}.log" for name in ("slony", "builtin")
                                                          for role in ("provider", "subscriber")}
    measured = [meta for meta in points.values() if "block" in meta]  # the warm-up its analysis cuts is recorded
    assert {meta["warmup_s"] for meta in measured} == {float(SMOKE.get("warmup_s", 1.0))}
    assert {meta["format_version"] for meta in points.values()} == {m["format_version"]} == {2}
    setups = [meta for meta in points.values() if meta["kind"] == "setup"]
    assert [meta["status"] for meta in setups] == ["ok", "ok"]
    assert max(meta["start"] for meta in setups) < min(meta["end"] for meta in setups)  # at the same time
    for name in ("slony", "builtin"):
        assert m["systems"][name]["closing_check"]["consistent"] is True
