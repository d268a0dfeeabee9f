"""The fdw_overhead study: real instances, real postgres_fdw, real pgbench (the lab case is in test_lab_deploy)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, refused_with_key, workspaces
from pglab.errors import PreflightError
from pglab.runs.params import validate
from pglab.runs.sweep import AA_SUFFIX
from pglab.studies.fdw_overhead import analyze, collect

pytestmark = pytest.mark.servers
SMOKE = yaml.safe_load((REPO / "params/fdw_overhead.yaml").read_text())["profiles"]["smoke"]
ALL = ["local", "FDW_local", "FDW_external", "FDW_ext_ro"]


def tiny(**kw: object) -> dict:
    """Smaller than smoke: the tests check behaviour, not numbers."""
    return {**SMOKE, "seconds": 2, "warmup_s": 1, "blocks": 1, "round_trip_transactions": 20, **kw}


def test_bad_parameters_name_the_problem_and_start_nothing(tmp_path: Path) -> None:
    before = workspaces()
    cases = {
        "targets.1": tiny(targets=["local", "FDW_remote"]),
        "ro_clients.0": tiny(ro_clients=[0]),
        "rw_clients.0": tiny(rw_clients=[-1]),
        "baseline": tiny(baseline="FDW_local", targets=["local", "FDW_external"]),
        "refuses writes": tiny(baseline="FDW_ext_ro"),
        "both empty": tiny(rw_clients=[], ro_clients=[]),
        "protocols.0": tiny(protocols=["binary"]),
        "shared_preload_libraries": tiny(server_settings={"shared_preload_libraries": "auto_explain"}),
    }
    refused_with_key(collect.collect, cases, tmp_path)
    with pytest.raises(PreflightError, match="elsewhere"):
        collect.collect(tiny(external_host="elsewhere"), data_root=tmp_path, progress=False)
    assert workspaces() == before  # no server folder was even created
    assert not (tmp_path / "raw").exists() and not (tmp_path / "runs").exists()


def test_plan_leaves_the_read_only_target_out_of_rw_and_runs_local_twice() -> None:
    p = validate(collect.Params, tiny(blocks=2, ro_clients=[1, 5]), "test")
    points = collect.plan(p)
    by_group: dict[tuple[int, str], list[str]] = {}
    for pl in points:
        by_group.setdefault((pl.block, pl.group.name), []).append(pl.id.rsplit("-", 1)[-1] if pl.copy > 1 else
                                                                   pl.config)
    assert set(by_group) == {(b, g) for b in (1, 2) for g in ("rw-c001", "ro-c001", "ro-c005")}
    for (_, g), configs in by_group.items():
        want = ALL if g.startswith("ro") else ["local", "FDW_local", "FDW_external"]
        assert sorted(configs) == sorted([*want, AA_SUFFIX])
    assert [pl.id for pl in collect.plan(p)] == [pl.id for pl in points]  # seeded


def test_variants_are_groups_only_when_swept() -> None:
    p = validate(collect.Params, tiny(protocols=["simple", "prepared"], fetch_sizes=[None, 1000]), "test")
    names = sorted({g.name for g in collect.groups(p)})
    assert "rw-c001-Msimple-fsdefault" in names and "ro-c001-Mprepared-fs1000" in names and len(names) == 8
    assert {g.name for g in collect.groups(validate(collect.Params, tiny(), "t"))} == {"rw-c001", "ro-c001"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every target, RW at 1 and 3 clients (3 clients under REPEATABLE READ collide: retries), RO at 1."""
    data = tmp_path_factory.mktemp("data")
    return collect.collect(tiny(rw_clients=[1, 3], fetch_sizes=[None, 50]), data_root=data, profile="test",
                           progress=False)


@pytest.mark.slow
def test_every_target_reaches_the_same_rows_and_ext_ro_refuses_writes(run: Path) -> None:
    checks = json.loads((run / "checks" / "checks.json").read_text())
    assert checks["consistent"] is True and checks["problems"] == []
    rows = checks["rows"]
    assert set(rows) == set(ALL) and len({tuple(v) for v in rows.values()}) == 1
    assert rows["local"][0] == "100000"  # scale 1: the checksum covers real rows
    assert checks["ext_ro_update"]["refused"] is True
    assert "does not allow updates" in checks["ext_ro_update"]["error"]
    assert checks["isolation"] == dict.fromkeys(ALL, "repeatable read")


@pytest.mark.slow
def test_every_point_ran_under_repeatable_read_with_retries_counted(run: Path, tmp_path: Path) -> None:
    a = analyze.analyze(run, tmp_path / "d", tmp_path / "f", REPO / "data" / "reference")
    assert a.failed.empty, a.failed
    assert set(a.points.transaction_isolation) == {"repeatable read"}
    assert set(a.points.config) == set(ALL)
    assert not (a.points[a.points.kind == "RW"].config == "FDW_ext_ro").any()
    # three RW clients updating one branch row through REPEATABLE READ: serialization failures, retried
    rw3 = a.points[(a.points.clients == 3) & (a.points.config != "local")]
    assert pd.to_numeric(rw3.retries).sum() > 0, rw3[["point", "retries", "failed"]]
    assert (a.points.tps_including > 0).all() and (a.points.tps_excluding > 0).all()
    # the swept fetch_size was in effect: the groups carry it, every target has a factor in each
    assert set(a.points.fetch_size.fillna(0)) == {0, 50}
    f = a.summary[a.summary.target.isin(["FDW_local", "FDW_external"])].dropna(subset=["factor"])
    assert len(f) == 2 * 2 * 3  # 2 targets x 2 fetch sizes x (RW c1, RW c3, RO c1)
    assert list(a.comparison.claim)[0].startswith("RW through postgres_fdw")
    for name in ("why/round_trips.csv", "why/remote_sql.csv", "latency.csv", "comparison.csv", "stalls.csv"):
        assert (tmp_path / "d" / name).exists()


def test_remote_sql_and_round_trips_explain_the_cost(run: Path) -> None:
    ex = json.loads((run / "explain" / "explain.json").read_text())
    rw = {}
    for s in ex["targets"]["FDW_external"]["RW"]:  # the first statement of each kind
        rw.setdefault(s["statement"].split()[0], s)
    assert rw["UPDATE"]["remote_sql"][0].startswith("UPDATE public.pgbench_accounts SET abalance")
    assert rw["INSERT"]["remote_sql"][0].startswith("INSERT INTO public.pgbench_history")
    assert "does not allow" in ex["targets"]["FDW_ext_ro"]["RW"][0]["error"]
    rt = analyze.round_trips_table(run)
    per = rt[rt.statement == "all"].set_index(["workload", "target"]).per_transaction
    # pgbench's own statements for local; postgres_fdw's (transaction, cursor, fetch, close) through FDW
    assert per[("RW", "local")] == pytest.approx(7) and per[("RO", "local")] == pytest.approx(1)
    for t in ("FDW_local", "FDW_external"):
        assert per[("RW", t)] == pytest.approx(9) and per[("RO", t)] == pytest.approx(5)
    kinds = set(rt[(rt.target == "FDW_local") & (rt.workload == "RO")].statement)
    assert {"START TRANSACTION", "DECLARE CURSOR", "FETCH", "CLOSE", "COMMIT"} <= kinds


def test_no_password_in_the_run(run: Path) -> None:
    setup = json.loads((run / "init" / "fdw_setup.json").read_text())
    text = json.dumps(setup)
    assert "USER MAPPING" in text and "password" not in text.lower()
    assert not list(run.rglob("pgpass*"))
