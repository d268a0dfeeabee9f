"""Servers of other PostgreSQL majors (registry builds, pglab.hosts.builds) as nodes: a primary and a synchronous
standby on 13 and on 18, locally and across two lab hosts, the copy that replaces pg_basebackup, and what a run
records and refuses."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import postgres_pids
from pglab.analysis import build_family, comparable
from pglab.app import build_aa, majors
from pglab.errors import ParameterError
from pglab.hosts import build_copy, builds
from pglab.hosts.inventory import Inventory
from pglab.ledger import rows
from pglab.nodes.standby_copy import backup_sql
from pglab.runs import preflight
from pglab.runs.params import StudyParams, validate
from pglab.runs.session import session
from pglab.studies.cloud_providers.params import Params as CloudParams

pytestmark = pytest.mark.servers
REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("major, where", [("13", "local"), ("18", "local"), ("18", "lab")])
def test_a_synchronous_standby_on_another_major(major: str, where: str, inventory: Inventory,
                                                request: pytest.FixtureRequest) -> None:
    """The standby is a copy taken between pg_backup_start and stop, kept by a reserved slot; its WAL streams
    through the slot, the walreceiver connects as pglab wrote it, and every server program is the build's
    while pgbench stays Debian's."""
    if where == "lab":
        inventory = request.getfixturevalue("lab_inventory")
    primary_host, standby_host = ("local", "local") if where == "local" else ("lab1", "lab2")
    build = builds.resolve(major)
    builds.fetch(build, progress=False)
    with session(inventory, build=build) as s:
        s.deploy.open([primary_host, standby_host])
        primary = s.deploy.node("primary", primary_host)
        primary.start()
        primary.query("create table t (x int primary key)")
        primary.query("insert into t select generate_series(1, 1000)")  # before the copy: in the copied files
        standby = s.deploy.standby(primary, "sb1", standby_host)
        standby.start()
        primary.configure({"synchronous_standby_names": "FIRST 1 (sb1)"}, reload=True)
        assert primary.wait_for_sync_state("sb1") == "sync"
        primary.query("insert into t select generate_series(1001, 2000)")  # after: streamed, committed in sync
        primary.wait_for_replay(standby)
        assert standby.query("select count(*), max(x) from t") == [(2000, 2000)]
        for node in (primary, standby):
            assert node.query("show server_version")[0][0] == build.version
            assert node.bin("postgres").startswith(builds.bindir(build))
            assert node.bin("pgbench").startswith("/usr/lib/postgresql/15/")
            assert node.describe()["build"] == build.id
        assert primary.query("select slot_name, active from pg_replication_slots") == [("pglab_sb1", True)]
        assert standby.query("select pg_is_in_recovery()") == [(True,)]
        bases = [primary.ws.base, standby.ws.base]
    for base in bases:
        assert not postgres_pids(base)


def test_the_backup_functions_by_major() -> None:
    """pg_start_backup and pg_stop_backup were renamed in 15 (and the exclusive mode removed)."""
    assert "pg_start_backup" in backup_sql(13)[0] and "pg_stop_backup" in backup_sql(14)[1]
    assert "pg_backup_start" in backup_sql(15)[0] and "pg_backup_stop" in backup_sql(18)[1]


def test_a_profile_names_a_build_by_major_or_id() -> None:
    """The model checks the name's shape (the analysis reads it without the host layer); which builds exist is
    checked before anything starts, each named field set to its build's id, as the manifest records it."""
    p = validate(StudyParams, {"postgres": "18"}, "t")
    assert preflight.builds_named(p)["postgres"].id == "embedded-18" and p.postgres == "embedded-18"
    p = validate(StudyParams, {"postgres": 15}, "t")
    assert preflight.builds_named(p)["postgres"].family == "debian" and p.postgres == "debian-15"
    assert preflight.builds_named(validate(StudyParams, {}, "t")) == {}
    with pytest.raises(ParameterError, match=r"postgres: Value error, a PostgreSQL major such as 18"):
        validate(StudyParams, {"postgres": "18; drop"}, "t")
    with pytest.raises(ParameterError, match=r"in t: postgres: '12' is no PostgreSQL build \(known: debian-15"):
        preflight.builds_named(validate(StudyParams, {"postgres": "12"}, "t"), "t")
    # cloud_providers keeps its own model (its targets are given): the same field, the same rules
    smoke = yaml.safe_load((REPO / "params/cloud_providers.yaml").read_text())["profiles"]["smoke"]
    p = validate(CloudParams, {**smoke, "postgres": 13}, "t")
    assert preflight.builds_named(p)["postgres"].id == "embedded-13" and p.postgres == "embedded-13"
    with pytest.raises(ParameterError, match=r"postgres: Value error, a PostgreSQL major such as 18"):
        validate(CloudParams, {**smoke, "postgres": "13 -c x"}, "t")


def test_a_study_on_another_major_records_its_build_and_is_never_pooled_with_debians(tmp_path: Path) -> None:
    """``pglab collect --postgres 18``: the build in the manifest and the ledger, the systems Debian packages for
    its 15 only set aside with why, streaming's standby copied, and the run refused beside one on Debian's 15."""
    res = subprocess.run([sys.executable, "-m", "pglab.app.collect", "logical_replication", "--profile", "smoke",
                          "--postgres", "18", "--data-root", str(tmp_path), "--quiet"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((tmp_path / "raw/logical_replication/manifest.json").read_text())
    assert manifest["postgres_build"] == {"id": "embedded-18", "family": "embedded", "major": 18, "version": "18.4"}
    assert manifest["parameters"]["postgres"] == "embedded-18"
    assert manifest["tools"]["postgres"] == "postgres (PostgreSQL) 18.4"
    assert manifest["tools"]["pgbench"].startswith("pgbench (PostgreSQL) 15.")  # the host's client drives it
    systems = manifest["systems"]
    assert systems["streaming"]["status"] == systems["builtin"]["status"] == "measured"
    assert "not available on PostgreSQL embedded-18" in systems["pglogical"]["reason"]
    assert rows.postgres_build(manifest) == ("18.4", "embedded")
    debian = {**manifest, "parameters": {**manifest["parameters"], "postgres": None},
              "tools": {**manifest["tools"], "postgres": "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"}}
    debian.pop("postgres_build")
    refused = {d.field for d in comparable.refused(comparable.differences(manifest, debian))}
    assert {"postgres_build", "tools.postgres"} <= refused


def smoke_variant(tmp_path: Path, study: str, **overrides: object) -> dict:
    """``study``'s smoke profile with ``overrides`` in a params file of its own, collected; the published manifest."""
    data = yaml.safe_load((REPO / f"params/{study}.yaml").read_text())
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "smoke", "inventory": "params/hosts.yaml",
                                      "profiles": {"smoke": {**data["profiles"]["smoke"], **overrides}}}))
    res = subprocess.run([sys.executable, "-m", "pglab.app.collect", study, "--params", str(params),
                          "--data-root", str(tmp_path / "data"), "--quiet"], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads((tmp_path / f"data/raw/{study}/manifest.json").read_text())


def test_built_in_logical_replication_from_13_to_18(tmp_path: Path) -> None:
    """A subscriber of another major (``subscriber_postgres``), as an upgrade runs it: built-in logical replication
    measured and checked consistent, the systems that cannot cross two builds set aside with why."""
    manifest = smoke_variant(tmp_path, "logical_replication", postgres=13, subscriber_postgres=18, baseline="builtin",
                             systems=["builtin", "streaming"])
    assert {f: b["id"] for f, b in manifest["postgres_builds"].items()} == {"postgres": "embedded-13",
                                                                           "subscriber_postgres": "embedded-18"}
    assert manifest["tools"]["postgres"] == "postgres (PostgreSQL) 13.23"
    assert manifest["tools"]["postgres (subscriber)"] == "postgres (PostgreSQL) 18.4"
    builtin, streaming = manifest["systems"]["builtin"], manifest["systems"]["streaming"]
    assert builtin["status"] == "measured" and builtin["closing_check"]["consistent"] is True
    assert streaming["status"] == "skipped" and "across two builds (embedded-13 -> embedded-18)" in streaming["reason"]


def test_the_build_family_a_a_runs_both_builds_in_every_block(tmp_path: Path, inventory: Inventory) -> None:
    """``pglab builds aa``: Debian's 15.18 and the registry's 15.18 in each block, raw output kept per point, the
    ratio's interval judged against the stated margin."""
    r = build_aa.measure(inventory, tmp_path, blocks=2, seconds=1, scale=1, progress=False)
    run = tmp_path / "runs/build_aa" / r["run"]
    assert json.loads((run / "aa.json").read_text()) == r
    assert r["builds"] == ["debian-15", "embedded-15"] and len(r["ratios"]) == 2
    assert r["low"] <= r["ratio"] <= r["high"] and r["verdict"] == build_aa.verdict(r["low"], r["high"], 0.05)
    assert r["coverage"] == 0.5  # two blocks: their range covers the median half the time, and says so
    for block in (1, 2):
        for family in ("debian", "embedded"):
            assert "number of transactions actually processed" in (run / f"b0{block}-{family}/stdout.txt").read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["aa"]["verdict"] == r["verdict"]
    assert manifest["tools"]["postgres (embedded)"] == "postgres (PostgreSQL) 15.18"
    assert "Debian" in manifest["tools"]["postgres (debian)"]
    assert "interval" in build_aa.words(r)
    assert build_family.latest(tmp_path / "runs/build_aa") == r  # what a report of another build cites


def test_the_a_a_verdict_and_its_refusals() -> None:
    assert build_aa.verdict(0.97, 1.04, 0.05) == "same"
    assert build_aa.verdict(0.60, 0.66, 0.05) == build_aa.verdict(1.06, 1.2, 0.05) == "differs"
    assert build_aa.verdict(0.93, 1.01, 0.05) == "open"
    with pytest.raises(ParameterError, match="no debian-13 in the catalogue; both families exist for 15"):
        build_aa.pair(13)


@pytest.mark.slow
def test_pglab_majors_runs_a_study_on_each_major_and_draws_the_claims_by_major(tmp_path: Path) -> None:
    """``pglab majors``: each major's run archived and analysed in its own folder, then the page: a column per
    major (with its version), a row per claim, the figure inline."""
    import shutil

    for name in ("lib", "notebooks", "params", "pyproject.toml"):
        (tmp_path / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "data/reference", tmp_path / "data/reference")
    res = subprocess.run([sys.executable, "-m", "pglab.app.majors", "logical_replication", "--profile", "smoke",
                          "--majors", "13", "18"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "== PostgreSQL 13 (1 of 2)" in res.stdout and "== PostgreSQL 18 (2 of 2)" in res.stdout
    m = majors.matrix("logical_replication", tmp_path / "yours/majors")
    assert sorted(set(m.major)) == [13, 18] and set(m.version) == {"13.23", "18.4"}
    assert set(m.claim) and m.verdict.notna().all()
    page = (tmp_path / "yours/reports/majors_logical_replication.html").read_text()
    assert "<th>13 (13.23)</th><th>18 (18.4)</th>" in page
    assert all(html.escape(c) in page for c in m.claim)
    # one smoke block gives no value: the figure's place says so (a quick profile draws each claim's values)
    assert ("data:image/png;base64," in page) == m.reproduced.notna().any()
    assert ("No claim has a value" in page) != m.reproduced.notna().any()
    for major in (13, 18):  # each run archived in its own folder, with its build
        manifest = json.loads((tmp_path / f"yours/majors/pg{major}/data/raw/logical_replication/manifest.json")
                              .read_text())
        assert manifest["postgres_build"]["id"] == f"embedded-{major}"


def test_postgres_fdw_from_18_to_13(tmp_path: Path) -> None:
    """fdw_overhead's foreign server on another major (``external_postgres``): a source of 18 querying 13 through
    postgres_fdw, each target checked to reach the same rows, both servers' versions recorded."""
    manifest = smoke_variant(tmp_path, "fdw_overhead", postgres=18, external_postgres=13,
                             targets=["local", "FDW_external"])
    assert manifest["status"] == "complete"
    assert manifest["tools"]["postgres"] == "postgres (PostgreSQL) 18.4"
    assert manifest["tools"]["postgres (external)"] == "postgres (PostgreSQL) 13.23"
    assert manifest["topology"]["external"]["build"] == "embedded-13"


def test_a_build_pushed_to_an_ssh_host_runs_a_server_there(sshd_server) -> None:  # noqa: ANN001
    """`pglab builds push HOST BUILD`: before it the run is refused with that command; after it the host's
    builds_dir holds the verified tree (a second push copies nothing) and a node there runs the build from it."""
    from conftest import ssh_entry

    build = builds.resolve("13")
    where = f"{sshd_server.workdir}/builds-{os.getpid()}"  # another folder than this machine's: a host of its own
    entry = ssh_entry(sshd_server).model_copy(update={"builds_dir": where})
    inventory = Inventory(hosts={"local": Inventory().entry("local"), "ssh": entry})
    before = preflight.build_problems(build, inventory, ["ssh"])
    assert len(before) == 1 and f"`pglab builds push ssh {build.id}`" in before[0] and where in before[0]
    try:
        with inventory.connect("ssh") as host:
            assert build_copy.push(host, entry, build, progress=False) == (f"{where}/{build.id}/bin", True)
            assert build_copy.push(host, entry, build, progress=False) == (f"{where}/{build.id}/bin", False)
            assert not host.run(["sh", "-c", f"ls -a {where}"]).stdout.count(".push-")  # no staging left
        assert preflight.build_problems(build, inventory, ["ssh"]) == []
        with session(inventory, build=build) as s:
            s.deploy.open(["ssh"])
            node = s.deploy.node("n13", "ssh")
            node.start()
            assert node.bin("postgres").startswith(f"{where}/{build.id}/bin")
            assert node.query("show server_version")[0][0] == build.version
            base = node.ws.base
        assert not postgres_pids(base)
    finally:
        with inventory.connect("ssh") as host:
            host.remove_tree(where)
