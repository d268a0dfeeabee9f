"""The ledger (pglab.ledger): adding is idempotent, merging is order-free, SQLite and PostgreSQL answer alike.

Built from the shipped pipeline runs (``data/raw/<study>`` and ``data/derived/<study>``; a fresh clone pulls
them first) and from "second machine" runs: a copy of a shipped run folder under another run id, with the
hosts of another machine in its manifest. The PostgreSQL ledger lives on a real PostgreSQL 15 server this
module starts as the ``postgres`` user on a free port, reached by a passfile (the URL holds no password).
"""

from __future__ import annotations

import contextlib
import copy
import filecmp
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
import pytest
from conftest import REPO, pulled_analyses
from pglab.errors import UserError
from pglab.hosts.local import LocalHost
from pglab.ledger import book, queries, rows, shipped
from pglab.ledger.backend import Ledger
from pglab.ledger.schema import SCHEMA_VERSION, TABLES
from pglab.runs import campaign
from pglab.runs.record import ManifestError
from pglab.studies import STUDIES

BIN = "/usr/lib/postgresql/15/bin"
RAW = REPO / "data" / "raw"  # run folders (only `pglab collect` writes them)
DATA, DERIVED = REPO / "data", REPO / "data" / "derived"  # replaced by a snapshot (_snapshot)
T1, T2, T3 = "2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z", "2026-12-03T10:00:00Z"
PAST, FUTURE = "2001-01-01T00:00:00Z", "2999-01-01T00:00:00Z"  # older and newer than an analysis made now
OTHER_MACHINE = {"cores": 8, "cpu_model": "Intel Xeon Gold 6338", "mem_total_kb": 65842104, "hostname": "db2",
                 "kernel": "Linux 6.1.0-28-cloud-amd64 x86_64", "machine_id": "9" * 32,
                 "disk_tmp": "1031987124 KiB total, 901234567 KiB free, on /dev/nvme0n1"}


@pytest.fixture(scope="module", autouse=True)
def _snapshot(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The pipeline's analyses (and run manifests) as they are now, copied: ``dvc repro`` in the checkout
    rewrites data/derived (the same bytes) while these tests read it. Copied again until a copy is whole:
    every file equal to its source after the copy, each analysis of its run."""
    global DATA, DERIVED
    pulled_analyses(*STUDIES)
    for _ in range(240):  # up to two minutes: a stage's outputs are missing while it runs
        root = tmp_path_factory.mktemp("data")
        try:
            for study in STUDIES:
                (root / "raw" / study).mkdir(parents=True)
                shutil.copy(RAW / study / "manifest.json", root / "raw" / study / "manifest.json")
                shutil.copytree(REPO / "data" / "derived" / study, root / "derived" / study)
            time.sleep(0.5)
            whole = all(filecmp.cmp(f, REPO / "data" / f.relative_to(root), shallow=False)
                        for f in root.rglob("*") if f.is_file())
            whole = whole and all(json.loads((root / "derived" / s / "details.json").read_text())["run_id"]
                                  == manifest_of(s)["run_id"] for s in STUDIES)
        except (OSError, shutil.Error, ValueError, KeyError):
            whole = False
        if whole:
            DATA, DERIVED = root, root / "derived"
            return
        shutil.rmtree(root, ignore_errors=True)
    pytest.fail("data/derived kept changing while it was copied")


# -- helpers ------------------------------------------------------------------------------------------------


def open_sqlite(path: Path) -> Ledger:
    return Ledger(str(path))


def dump(ledger: Ledger) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in key order: two ledgers with equal dumps hold the same thing."""
    out = {}
    for table, (cols, key) in TABLES.items():
        out[table] = ledger.query(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {', '.join(key)}")
    return out


def counts(ledger: Ledger) -> dict[str, int]:
    return {t: ledger.query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES}


def manifest_of(study: str) -> dict[str, Any]:
    return json.loads((RAW / study / "manifest.json").read_text())


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def second_machine_run(where: Path, study: str, run_id: str, host: dict[str, Any] | None = None,
                       postgres: str | None = None) -> Path:
    """A copy of the shipped ``study`` run as ``run_id`` (folder and manifest), made on another machine:
    every host's facts replaced by ``host`` (default OTHER_MACHINE), and optionally another server build."""
    dest = where / run_id
    shutil.copytree(RAW / study, dest, copy_function=_link_or_copy)
    m = json.loads((dest / "manifest.json").read_text())
    (dest / "manifest.json").unlink()  # a link to the shipped run's: replaced, never written through
    m["run_id"] = run_id
    for h in m["hosts"].values():
        h.update(host if host is not None else OTHER_MACHINE)
    if postgres:
        m["tools"]["postgres"] = postgres
    (dest / "manifest.json").write_text(json.dumps(m, indent=1))
    return dest


def other_analysis(where: Path, study: str, factor: float = 1.05, verdict: str = "held") -> Path:
    """A copy of the shipped analysis of ``study`` that says something else: every reproduced value and
    interval scaled by ``factor``, every verdict ``verdict``, every tps scaled too."""
    dest = where / f"derived-{study}-{factor}-{verdict.replace(' ', '_')}"
    shutil.copytree(DERIVED / study, dest)
    c = pd.read_csv(dest / "comparison.csv")
    for col in ("reproduced", "ci_low", "ci_high"):
        c[col] = c[col] * factor
    c["verdict"] = verdict
    c.to_csv(dest / "comparison.csv", index=False)
    p = pd.read_csv(dest / "points.csv")
    p["tps"] = p["tps"] * factor
    p.to_csv(dest / "points.csv", index=False)
    return dest


def pipeline(ledger: Ledger) -> list[dict[str, Any]]:
    return shipped.add_pipeline(ledger, DATA, REPO / "dvc.lock")


# -- idempotence --------------------------------------------------------------------------------------------


def test_adding_the_pipeline_runs_twice_changes_nothing(tmp_path: Path) -> None:
    with open_sqlite(tmp_path / "ledger.sqlite") as L:
        first = pipeline(L)
        own = {str(json.loads((run / "manifest.json").read_text())["run_id"]): derived for s in STUDIES
               for run, derived in campaign.own_analyses(DATA / "raw" / s, DERIVED / s)}  # a campaign: every run
        assert set(a["study"] for a in first) == set(STUDIES) and {a["run_id"] for a in first} == set(own)
        assert all(a["new"] and a["analysis"] == "added" for a in first), first
        before, n_before = dump(L), counts(L)
        assert n_before["runs"] == len(own) and n_before["analyses"] == len(own) and n_before["machines"] == 1
        # every point and claim of each run's own analysis is there, one row each (never a campaign's verdicts)
        for a in first:
            assert len(book.points(L, a["run_id"])) == len(pd.read_csv(own[a["run_id"]] / "points.csv"))
        assert n_before["claims"] == sum(len(pd.read_csv(d / "comparison.csv")) for d in own.values())

        second = pipeline(L)
        assert [(a["run_id"], a["new"], a["analysis"]) for a in second] == \
            [(a["run_id"], False, "same") for a in first]
        assert counts(L) == n_before
        assert dump(L) == before

        # the same run and analysis added by hand, at another time, by another code revision: still nothing
        study = STUDIES[0]
        again = book.add(L, RAW / study, DERIVED / study, analysed_at=T3, code_revision="f" * 40)
        assert (again["new"], again["analysis"]) == (False, "same")
        assert dump(L) == before


def test_a_run_without_its_analysis_then_with_it(tmp_path: Path) -> None:
    """A run added alone has no analysis; adding its analysis later adds it; a DVC hash is learnt once."""
    study = "cloud_providers"
    with open_sqlite(tmp_path / "ledger.sqlite") as L:
        got = book.add(L, RAW / study)
        assert got["new"] and got["analysis"] is None
        r = book.runs(L)
        assert len(r) == 1 and not r["analysed"].iloc[0] and r["dvc_hash"].iloc[0] is None
        got = book.add(L, RAW / study, DERIVED / study, dvc_hash="abc.dir")
        assert (got["new"], got["analysis"]) == (False, "added")
        got = book.add(L, RAW / study, DERIVED / study, dvc_hash="other.dir")
        assert (got["new"], got["analysis"]) == (False, "same")
        r = book.runs(L)
        assert r["dvc_hash"].tolist() == ["abc.dir"] and bool(r["analysed"].iloc[0])
        assert book.find(L, got["run_id"].split("-")[1]) == got["run_id"]


# -- merging ------------------------------------------------------------------------------------------------


@pytest.fixture
def three_ledgers(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    """Three ledger files from different subsets of the runs (two of them from a second machine); two pipeline
    runs analysed twice: an older analysis of synchronous_commit in the second ledger, a newer one of
    fdw_overhead in the third."""
    x = second_machine_run(tmp_path, "cloud_providers", "20261201T090000Z-aaaa01")
    y = second_machine_run(tmp_path, "synchronous_commit", "20261201T100000Z-bbbb02",
                           postgres="postgres (PostgreSQL) 16.4")
    newer = other_analysis(tmp_path, "fdw_overhead")
    paths = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "c.sqlite"
    with open_sqlite(paths[0]) as a:
        pipeline(a)  # all five, analysed now
    with open_sqlite(paths[1]) as b:
        # an older analysis of a pipeline run (the first ledger's, made now, wins), a pipeline run alone
        book.add(b, RAW / "synchronous_commit", other_analysis(tmp_path, "synchronous_commit", 0.95), analysed_at=PAST)
        book.add(b, RAW / "cloud_providers")
        book.add(b, x, DERIVED / "cloud_providers", analysed_at=T1)
    with open_sqlite(paths[2]) as c:
        book.add(c, y, other_analysis(tmp_path, "synchronous_commit", 0.9, "did not hold"), analysed_at=T2)
        got = book.add(c, RAW / "fdw_overhead", newer, analysed_at=FUTURE)
        assert got["analysis"] == "added"
    return (*paths, {"x": x, "y": y, "fdw": got["run_id"], "newer": newer})


def merged(into: Path, *others: Path) -> dict[str, list[tuple[Any, ...]]]:
    with open_sqlite(into) as L:
        for o in others:
            with open_sqlite(o) as other:
                book.merge(L, other)
        return dump(L)


def test_merging_in_any_order_gives_the_same_ledger(tmp_path: Path, three_ledgers: tuple) -> None:
    a, b, c, made = three_ledgers
    one = merged(tmp_path / "abc.sqlite", a, b, c)
    two = merged(tmp_path / "cab.sqlite", c, b, a)
    three = merged(tmp_path / "bca.sqlite", b, c, a)
    assert one == two == three
    run_ids = [r[0] for r in one["runs"]]
    assert len(run_ids) == 7 and made["x"].name in run_ids and made["y"].name in run_ids
    assert len(one["machines"]) == 2 and len(one["analyses"]) == 7

    # merging again changes nothing, whichever way
    with open_sqlite(tmp_path / "abc.sqlite") as L:
        for o in (a, b, c, tmp_path / "cab.sqlite"):
            with open_sqlite(o) as other:
                assert book.merge(L, other) == {"runs": 0, "analyses": 0}
        assert dump(L) == one

    # the newer analysis of the fdw run won in every order: its digest, its claims, its tps; the older one of
    # the synchronous_commit run lost
    with open_sqlite(tmp_path / "cab.sqlite") as L, open_sqlite(a) as first:
        sync = manifest_of("synchronous_commit")["run_id"]
        assert L.query("SELECT * FROM analyses WHERE run_id = ?", (sync,)) == \
            first.query("SELECT * FROM analyses WHERE run_id = ?", (sync,))
        pd.testing.assert_frame_equal(book.points(L, sync), book.points(first, sync))
        analysis = L.query("SELECT analysed_at FROM analyses WHERE run_id = ?", (made["fdw"],))
        assert analysis == [(FUTURE,)]
        assert set(book.claims(L)[lambda d: d["run_id"] == made["fdw"]]["verdict"]) == {"held"}
        newer_tps = pd.read_csv(made["newer"] / "points.csv")["tps"].sum()
        assert book.points(L, made["fdw"])["tps"].sum() == pytest.approx(newer_tps)
        # the second machine's runs are on their own machine, with their own server build
        r = book.runs(L).set_index("run_id")
        assert r.loc[made["x"].name, "machine_key"] != r.loc[manifest_of("cloud_providers")["run_id"], "machine_key"]
        assert r.loc[made["x"].name, "machine"].startswith("8 cores, Intel Xeon Gold 6338, 63 GiB")
        assert (r.loc[made["y"].name, "pg_version"], r.loc[made["y"].name, "pg_family"]) == ("16.4", "other")


def test_a_newer_analysis_wins_whatever_the_merge_order(tmp_path: Path) -> None:
    study = "streaming_scale_out"
    newer = other_analysis(tmp_path, study, 1.2, "did not hold")
    old_path, new_path = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    with open_sqlite(old_path) as L:
        assert book.add(L, RAW / study, DERIVED / study, analysed_at=T1, code_revision="1" * 40)["analysis"] == "added"
    with open_sqlite(new_path) as L:
        assert book.add(L, RAW / study, newer, analysed_at=T2, code_revision="2" * 40)["analysis"] == "added"
        want = dump(L)
    results = []
    for name, (first, second) in {"old-then-new": (old_path, new_path), "new-then-old": (new_path, old_path)}.items():
        shutil.copy(first, tmp_path / f"{name}.sqlite")
        with open_sqlite(tmp_path / f"{name}.sqlite") as L, open_sqlite(second) as other:
            assert book.merge(L, other) == {"runs": 0, "analyses": int(name == "old-then-new")}
            results.append(dump(L))
    assert results[0] == results[1] == want
    assert [r[2] for r in want["analyses"]] == [T2]
    assert {r[8] for r in want["claims"]} == {"did not hold"}

    # in a single ledger: the older analysis added after the newer is refused, the newer one again is "same"
    with open_sqlite(new_path) as L:
        assert book.add(L, RAW / study, DERIVED / study, analysed_at=T1)["analysis"] == "older"
        assert book.add(L, RAW / study, newer, analysed_at=T3)["analysis"] == "same"
        assert dump(L) == want
        # an analysis newer still (another digest) replaces it, points and claims alike
        assert book.add(L, RAW / study, DERIVED / study, analysed_at=T3)["analysis"] == "added"
        assert {r[8] for r in dump(L)["claims"]} == set(pd.read_csv(DERIVED / study / "comparison.csv")["verdict"])
        assert len(dump(L)["points"]) == len(pd.read_csv(DERIVED / study / "points.csv"))


def test_an_equal_analysis_merged_is_same(tmp_path: Path) -> None:
    study = "logical_replication"
    for name in ("p", "q"):
        with open_sqlite(tmp_path / f"{name}.sqlite") as L:
            book.add(L, RAW / study, DERIVED / study, analysed_at=T1)
    with open_sqlite(tmp_path / "p.sqlite") as L, open_sqlite(tmp_path / "q.sqlite") as other:
        before = dump(L)
        assert book.merge(L, other) == {"runs": 0, "analyses": 0}
        assert dump(L) == before


def _two_clones(tmp_path: Path) -> tuple[Path, Path]:
    """Two clones of the repository, each adding the shipped run to its own ledger at its own time."""
    study = "synchronous_commit"
    paths = tmp_path / "clone1.sqlite", tmp_path / "clone2.sqlite"
    for path, at in zip(paths, (T1, T2), strict=True):
        with open_sqlite(path) as L:
            assert book.add(L, RAW / study, DERIVED / study, analysed_at=at)["new"]
    return paths


def test_two_clones_adding_the_same_run_merge_into_one_run_and_one_analysis(tmp_path: Path) -> None:
    one, two = _two_clones(tmp_path)
    with open_sqlite(one) as L, open_sqlite(two) as other:
        assert book.merge(L, other) == {"runs": 0, "analyses": 0}
        c = counts(L)
        assert (c["runs"], c["analyses"], c["machines"]) == (1, 1, 1)
        assert c["claims"] == len(pd.read_csv(DERIVED / "synchronous_commit" / "comparison.csv"))
        assert c["points"] == len(pd.read_csv(DERIVED / "synchronous_commit" / "points.csv"))


def test_two_clones_merged_either_way_give_one_ledger(tmp_path: Path) -> None:
    one, two = _two_clones(tmp_path)
    shutil.copy(one, tmp_path / "one-into.sqlite")
    shutil.copy(two, tmp_path / "two-into.sqlite")
    assert merged(tmp_path / "one-into.sqlite", two) == merged(tmp_path / "two-into.sqlite", one)


# -- SQLite and PostgreSQL alike ----------------------------------------------------------------------------


@dataclass
class Server:
    port: int
    base: Path
    passfile: Path

    def database(self, name: str) -> str:
        """A new database owned by the ledger role, and its URL (no password: the passfile holds it)."""
        with psycopg.connect(host=str(self.base / "s"), port=self.port, user="admin", dbname="postgres",
                             autocommit=True) as c:
            c.execute(f"create database {name} owner ledger")
        return f"postgresql://ledger@127.0.0.1:{self.port}/{name}"


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    """A PostgreSQL 15 server as the ``postgres`` user on a free port: the ledger role has a password, which
    only the passfile holds (scram-sha-256 over TCP on 127.0.0.1); stopped and removed at the end."""
    base = Path(tempfile.mkdtemp(prefix="ledger-pg-", dir="/tmp"))
    base.chmod(0o755)
    port = LocalHost().free_port(30000, 60000)
    assert port != 5432
    password = "lg-" + secrets.token_hex(12)
    data, sock, log = base / "data", base / "s", base / "server.log"
    _sh("install", "-d", "-o", "postgres", "-m", "700", str(data))
    _sh("install", "-d", "-o", "postgres", "-m", "700", str(sock))
    log.touch()
    shutil.chown(log, "postgres")
    _sh("runuser", "-u", "postgres", "--", f"{BIN}/initdb", "-D", str(data), "-U", "admin", "-A", "reject",
        "-E", "UTF8", "--locale=C", "--no-sync")
    (data / "pg_hba.conf").write_text("local all admin trust\nhost all ledger 127.0.0.1/32 scram-sha-256\n")
    with (data / "postgresql.conf").open("a") as f:
        f.write(f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{sock}'\n"
                "password_encryption = 'scram-sha-256'\nfsync = off\nsynchronous_commit = off\n")
    _sh("runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", str(data), "-l", str(log), "-w", "start")
    try:
        with psycopg.connect(host=str(sock), port=port, user="admin", dbname="postgres", autocommit=True) as c:
            assert c.execute("show server_version_num").fetchone()[0].startswith("15")
            c.execute(f"create role ledger login password '{password}'")
        passfile = base / "pgpass"
        passfile.write_text(f"127.0.0.1:{port}:*:ledger:{password}\n")
        passfile.chmod(0o600)
        yield Server(port, base, passfile)
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", str(data), "-m", "fast", "-w",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _fill(L: Ledger, where: Path) -> None:
    """The five pipeline runs, one of them analysed twice, and two second-machine runs (one unanalysed)."""
    pipeline(L)
    x = where / "20261201T090000Z-aaaa01"
    y = where / "20261201T100000Z-bbbb02"
    book.add(L, x, where / "derived-synchronous_commit-0.9-did_not_hold", analysed_at=T2, code_revision="c" * 40)
    book.add(L, y, None, dvc_hash="0123456789abcdef0123456789abcdef.dir")
    book.add(L, RAW / "fdw_overhead", where / "derived-fdw_overhead-1.05-held", analysed_at=FUTURE)


def _sorted(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return frame.sort_values(by).reset_index(drop=True)


@pytest.mark.servers
def test_sqlite_and_postgresql_answer_alike(postgres: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSFILE", str(postgres.passfile))
    monkeypatch.setattr(book, "_now", lambda: T1)  # the pipeline's analyses are stamped alike in both ledgers
    second_machine_run(tmp_path, "synchronous_commit", "20261201T090000Z-aaaa01", postgres="postgres (PostgreSQL) "
                       "16.4 (Ubuntu 16.4-1.pgdg22.04+1)")
    second_machine_run(tmp_path, "cloud_providers", "20261201T100000Z-bbbb02")
    other_analysis(tmp_path, "synchronous_commit", 0.9, "did not hold")
    other_analysis(tmp_path, "fdw_overhead")
    url = postgres.database("parity")
    with monkeypatch.context() as m:  # the passfile is what lets the ledger in: without it, one clear line
        m.setenv("PGPASSFILE", "/dev/null")
        with pytest.raises(UserError, match="cannot connect"):
            Ledger(url)
    with open_sqlite(tmp_path / "ledger.sqlite") as lite, Ledger(url) as pg:
        assert (lite.kind, pg.kind) == ("sqlite", "postgresql")
        for L in (lite, pg):
            _fill(L, tmp_path)
        assert counts(lite) == counts(pg)
        assert counts(pg)["runs"] == 7 and counts(pg)["machines"] == 2
        for name in queries.QUERIES:
            assert queries.answer(lite, name) == queries.answer(pg, name), name
            assert queries.answer(pg, name), f"{name}: no rows, nothing compared"
        # ``analysed`` is 1/0 in SQLite and True/False in PostgreSQL: the same answer, another type (see
        # test_runs_analysed_is_one_type_in_both_engines below); every other column is equal as it is
        pd.testing.assert_frame_equal(_sorted(book.runs(lite), ["run_id"]).astype({"analysed": bool}),
                                      _sorted(book.runs(pg), ["run_id"]).astype({"analysed": bool}))
        pd.testing.assert_frame_equal(_sorted(book.claims(lite), ["run_id", "claim"]),
                                      _sorted(book.claims(pg), ["run_id", "claim"]))
        for run_id in book.runs(lite)["run_id"]:
            pd.testing.assert_frame_equal(book.points(lite, run_id), book.points(pg, run_id))
        assert dump(lite) == dump(pg)

        # the PostgreSQL ledger merges into a SQLite one and back, as between two SQLite files
        with open_sqlite(tmp_path / "copy.sqlite") as copy_:
            assert book.merge(copy_, pg) == {"runs": 7, "analyses": 6}
            assert dump(copy_) == dump(lite)
            assert book.merge(pg, copy_) == {"runs": 0, "analyses": 0}
        # a second connection sees the schema there and changes nothing
        with Ledger(url) as again:
            assert dump(again) == dump(lite)


@pytest.mark.servers
def test_runs_analysed_is_one_type_in_both_engines(postgres: Server, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSFILE", str(postgres.passfile))
    with open_sqlite(tmp_path / "ledger.sqlite") as lite, Ledger(postgres.database("analysed")) as pg:
        for L in (lite, pg):
            book.add(L, RAW / "cloud_providers", DERIVED / "cloud_providers", analysed_at=T1)
        assert book.runs(lite)["analysed"].dtype == book.runs(pg)["analysed"].dtype


# -- refusals -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["postgresql://ledger:Sup3rSecret@127.0.0.1:5999/ledger",
                                 "postgres://ledger:Sup3rSecret@db.example.org/ledger",
                                 "postgresql://:Sup3rSecret@127.0.0.1/ledger"])
def test_a_postgresql_url_with_a_password_is_refused_without_showing_it(url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGLAB_LEDGER", raising=False)
    with pytest.raises(UserError) as exc:
        Ledger(url)
    assert "Sup3rSecret" not in str(exc.value) and "password" in str(exc.value)
    monkeypatch.setenv("PGLAB_LEDGER", url)  # the same from the environment
    with pytest.raises(UserError) as exc:
        Ledger()
    assert "Sup3rSecret" not in str(exc.value)


def test_a_ledger_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with open_sqlite(path) as L:
        pipeline(L)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    raw.close()
    with pytest.raises(UserError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        open_sqlite(path)
    with sqlite3.connect(path) as raw:  # refused, and left as it was
        assert raw.execute("SELECT value FROM meta").fetchall() == [(str(SCHEMA_VERSION + 1),)]
        assert raw.execute("SELECT COUNT(*) FROM runs").fetchone() == (5,)
    raw.close()


def test_a_folder_is_refused_as_a_sqlite_ledger(tmp_path: Path) -> None:
    for url in (str(tmp_path), f"sqlite:///{tmp_path}", f"sqlite:{tmp_path}"):
        with pytest.raises(UserError, match="is a folder"):
            Ledger(url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("manifest", ["[]", '{"status": "complete"}', "{not json",
                                      '{"status": "complete", "study": "../x", "run_id": "r"}'])
def test_a_folder_that_is_no_run_is_refused(tmp_path: Path, manifest: str) -> None:
    run = tmp_path / "20261201T000000Z-cccc03"
    run.mkdir()
    (run / "manifest.json").write_text(manifest)
    with open_sqlite(tmp_path / "ledger.sqlite") as L:
        with pytest.raises(ManifestError):
            book.add(L, run, DERIVED / "cloud_providers")
        with pytest.raises(ManifestError, match="no such file"):
            book.add(L, tmp_path / "nothing-here")
        assert counts(L)["runs"] == 0 and counts(L)["points"] == 0


def test_a_run_id_that_is_not_its_folders_name_is_refused(tmp_path: Path) -> None:
    run = second_machine_run(tmp_path, "cloud_providers", "20261201T000000Z-dddd04")
    run.rename(tmp_path / "20261201T000000Z-eeee05")
    with open_sqlite(tmp_path / "ledger.sqlite") as L, pytest.raises(ManifestError, match="is not the name"):
        book.add(L, tmp_path / "20261201T000000Z-eeee05")


# -- rows ---------------------------------------------------------------------------------------------------


def test_the_machine_key_ignores_what_moves_between_boots() -> None:
    m = manifest_of("cloud_providers")
    base = rows.machine(m)
    moved = copy.deepcopy(m)
    for h in moved["hosts"].values():
        h["mem_total_kb"] += 3  # a few KiB between boots
        h["disk_tmp"] = h["disk_tmp"].replace(h["disk_tmp"].split(" KiB free")[0].split(", ")[-1], "12345")
        h["kernel"] = h["kernel"].replace("-fc-v669", "-fc-v701")  # another build of the same release
        h["machine_id"], h["boot_id"], h["hostname"] = "1" * 32, "another boot", "vm2"
    assert moved["hosts"] != m["hosts"]
    assert rows.machine(moved) == base
    assert rows.run(moved)["machine_key"] == rows.run(m)["machine_key"] == base["machine_key"]
    assert base["label"] == "2 cores, AMD EPYC, 24 GiB, Linux 6.18.44 x86_64"

    for change in ({"cores": 4}, {"cpu_model": "Intel Xeon"}, {"mem_total_kb": 2 * 24684084},
                   {"kernel": "Linux 6.19.2-fc-v669 x86_64"}, {"os": "Debian GNU/Linux 13 (trixie)"},
                   {"disk_tmp": "528424168 KiB total, 74900352 KiB free, on /dev/vda"}):
        other = copy.deepcopy(m)
        for h in other["hosts"].values():
            h.update(change)
        assert rows.machine(other)["machine_key"] != base["machine_key"], change

    # one more host: another machine class, even with the same facts
    two = copy.deepcopy(m)
    two["hosts"]["h2"] = copy.deepcopy(m["hosts"]["local"])
    assert rows.machine(two)["machine_key"] != base["machine_key"] and rows.machine(two)["hosts"] == 2


@pytest.mark.parametrize(("version", "want"), [
    ("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", ("15.18", "Debian")),
    ("postgres (PostgreSQL) 18.4", ("18.4", "other")),
    ("postgres (PostgreSQL) 16.4 (Ubuntu 16.4-1.pgdg22.04+1)", ("16.4", "Ubuntu")),
    ("", (None, None)),
])
def test_postgres_build(version: str, want: tuple[str | None, str | None]) -> None:
    assert rows.postgres_build({"tools": {"postgres": version}}) == want


def test_postgres_build_without_tools() -> None:
    assert rows.postgres_build({}) == (None, None)
    assert rows.postgres_build({"tools": None}) == (None, None)


# -- what the first version got wrong -----------------------------------------------------------------------


def test_a_password_in_the_query_string_is_refused_too() -> None:
    with pytest.raises(UserError) as exc:
        Ledger("postgresql://ledger@127.0.0.1:1/ledger?password=Sup3rSecret")
    assert "Sup3rSecret" not in str(exc.value)


def test_one_machine_class_under_two_host_names_merges_in_any_order(tmp_path: Path) -> None:
    other = second_machine_run(tmp_path, "cloud_providers", "20261201T000000Z-ffff06",
                               host=manifest_of("cloud_providers")["hosts"]["local"])
    m = json.loads((other / "manifest.json").read_text())
    m["hosts"] = {"db1": m["hosts"]["local"]}  # the same machine, called db1 in that run's inventory
    (other / "manifest.json").write_text(json.dumps(m))
    for name, run in (("p", RAW / "cloud_providers"), ("q", other)):
        with open_sqlite(tmp_path / f"{name}.sqlite") as L:
            book.add(L, run)
    shutil.copy(tmp_path / "p.sqlite", tmp_path / "p-into.sqlite")
    shutil.copy(tmp_path / "q.sqlite", tmp_path / "q-into.sqlite")
    one, two = merged(tmp_path / "p-into.sqlite", tmp_path / "q.sqlite"), merged(tmp_path / "q-into.sqlite",
                                                                                tmp_path / "p.sqlite")
    assert len(one["machines"]) == 1
    assert one == two


def test_a_few_kib_of_memory_at_a_rounding_edge_is_one_machine() -> None:
    m = manifest_of("cloud_providers")
    keys = set()
    for kb in (7995390, 7995394):
        moved = copy.deepcopy(m)
        for h in moved["hosts"].values():
            h["mem_total_kb"] = kb
        keys.add(rows.machine(moved)["machine_key"])
    assert len(keys) == 1


def test_a_missing_analysis_folder_does_not_wipe_the_analysis(tmp_path: Path) -> None:
    with open_sqlite(tmp_path / "ledger.sqlite") as L:
        book.add(L, RAW / "cloud_providers", DERIVED / "cloud_providers", analysed_at=T1)
        before = dump(L)
        with contextlib.suppress(UserError, OSError, ValueError):
            book.add(L, RAW / "cloud_providers", tmp_path / "no-such-folder", analysed_at=T2)
        assert dump(L) == before


def test_rebuild_makes_the_same_ledger_from_the_run_folders(tmp_path: Path) -> None:
    """``pglab ledger rebuild``: archived runs (one analysed by hand, one not) give the ledger that adding them
    one by one gave, the unanalysed one analysed now; the old file is replaced only when the new one is whole."""
    from pglab.app.cli import main

    data = tmp_path / "data"
    run = data / "runs" / "cloud_providers" / manifest_of("cloud_providers")["run_id"]
    shutil.copytree(RAW / "cloud_providers", run)
    target = tmp_path / "team.sqlite"
    with open_sqlite(target) as L:
        book.add(L, run, REPO / "data" / "derived" / "cloud_providers")
        before = {t: dump(L)[t] for t in ("runs", "machines", "claims", "points")}
    assert main(["ledger", "rebuild", "--ledger", str(target), "--data-root", str(data),
                 "--no-remote"]) == 0
    with open_sqlite(target) as L:
        after = dump(L)
    assert {t: after[t] for t in before} == before  # today's analysis of the run is the shipped one
    assert not list(tmp_path.glob("*.rebuilding"))


def test_a_resumed_run_replaces_its_interrupted_record_in_any_order(tmp_path: Path) -> None:
    """A run interrupted, added, then resumed and added again: the ledger keeps the later record (its status and
    end), whichever ledger saw which first; its DVC hash, once known, stays."""
    done = manifest_of("cloud_providers")
    cut = {**copy.deepcopy(done), "status": "interrupted", "end": "2000-01-01T00:00:00+00:00"}
    for order, name in (((cut, done), "a"), ((done, cut), "b")):
        with open_sqlite(tmp_path / f"{name}.sqlite") as L:
            with L.transaction():
                book.add_run(L, order[0], dvc_hash="abc.dir" if order[0] is cut else None)
                assert book.add_run(L, order[1]) is False
            row = book.runs(L).iloc[0]
            assert (row["status"], row["ended"], row["dvc_hash"]) == ("complete", done["end"], "abc.dir" if
                                                                       name == "a" else None)
    with open_sqlite(tmp_path / "c.sqlite") as L:
        with L.transaction():
            book.add_run(L, cut, dvc_hash="abc.dir")
        with open_sqlite(tmp_path / "b.sqlite") as other:
            book.merge(L, other)
        row = book.runs(L).iloc[0]
        assert (row["status"], row["dvc_hash"]) == ("complete", "abc.dir")


def test_a_ledger_of_schema_1_gains_the_columns_of_schema_2_when_opened(tmp_path: Path) -> None:
    """A ledger written before verdicts over runs (claims without the rule's region) opens, gains the columns empty,
    and says schema 2; its rows are kept as they were."""
    from pglab.ledger.backend import Ledger
    from pglab.ledger.schema import ADDED, SCHEMA_VERSION, TABLES

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    for table, (cols, key) in TABLES.items():
        old = [c for c in cols if not any(c in ADDED[v].get(table, ()) for v in ADDED)]
        con.execute(f"CREATE TABLE {table} ({', '.join(old)}, PRIMARY KEY ({', '.join(key)}))")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO claims (run_id, claim, reproduced, verdict) VALUES ('r', 'c', 1.5, 'held')")
    con.commit()
    con.close()
    with Ledger(path) as ledger:
        assert ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert ledger.query("SELECT reproduced, verdict, bound_low, here_verdict, emulated FROM claims") == [
            (1.5, "held", None, None, None)]
    with Ledger(path) as ledger:  # opened again: nothing added twice
        assert ledger.query("SELECT count(*) FROM claims") == [(1,)]


def test_a_campaign_is_kept_with_its_verdicts_over_its_runs(tmp_path: Path) -> None:
    """The pipeline's campaigns go in as campaigns: their verdicts over the runs (what the report says), their runs
    oldest first, a run's campaign found from any of its runs; adding again or merging either way changes nothing;
    a ledger of schema 4 (no campaign tables) gains them when it is opened to be written."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with open_sqlite(a) as L:
        shipped.add_pipeline(L, REPO / "data", REPO / "dvc.lock")
        k = book.campaigns(L)
        tops = [s for s in STUDIES if campaign.read(RAW / s) is not None]
        assert tops and set(k.study) == set(tops)
        for s in tops:
            mine, run_id = k[k.study == s], manifest_of(s)["run_id"]
            comparison = pd.read_csv(REPO / "data" / "derived" / s / "comparison.csv")
            assert set(mine.campaign_id) == {run_id}
            assert dict(zip(mine.claim, mine.verdict, strict=True)) == \
                dict(zip(comparison.claim, comparison.verdict, strict=True))
            ids = json.loads(mine.run_ids.iloc[0])
            assert ids[-1] == run_id and len(ids) == len(campaign.members(RAW / s))
            assert book.campaign_of(L, ids[0]) == run_id and book.campaign_of(L, "no-such-run") is None
        before = dump(L)
        shipped.add_pipeline(L, REPO / "data", REPO / "dvc.lock")
        assert dump(L) == before
    with open_sqlite(b) as B, Ledger(str(a), readonly=True) as A:
        book.merge(B, A)
        book.merge(B, A)
        assert dump(B)["campaigns"] == before["campaigns"]
        assert dump(B)["campaign_claims"] == before["campaign_claims"]
    with sqlite3.connect(b) as raw:  # schema 4, as a ledger written before campaigns were kept
        raw.execute("DROP TABLE campaign_claims")
        raw.execute("DROP TABLE campaigns")
        raw.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(UserError, match="schema version 4 is older"):
        Ledger(str(b), readonly=True)
    with open_sqlite(b) as B:
        assert book.campaigns(B).empty
        shipped.add_pipeline(B, REPO / "data", REPO / "dvc.lock")
        assert dump(B)["campaign_claims"] == before["campaign_claims"]
    with sqlite3.connect(b) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    raw.close()


def test_a_campaign_added_by_hand_with_its_analysis_is_kept_as_the_pipeline_keeps_it(tmp_path: Path) -> None:
    """`pglab ledger add RUN --derived DIR` of a campaign (as a majors sweep or a by-hand collect leaves one) adds its
    runs and its verdicts over them, the same rows the pipeline's own add gives."""
    from pglab.app import cli

    tops = [s for s in STUDIES if campaign.read(RAW / s) is not None]
    assert tops
    with open_sqlite(tmp_path / "pipeline.sqlite") as L:
        shipped.add_pipeline(L, REPO / "data", REPO / "dvc.lock")
        want = book.campaigns(L).drop(columns=["analysed_at", "code_revision"], errors="ignore")
    by_hand = tmp_path / "hand.sqlite"
    for s in tops:
        assert cli.main(["ledger", "add", str(RAW / s), "--derived", str(REPO / "data" / "derived" / s),
                         "--ledger", str(by_hand)]) == 0
    with Ledger(str(by_hand), readonly=True) as L:
        got = book.campaigns(L).drop(columns=["analysed_at", "code_revision"], errors="ignore")
        assert len(book.runs(L)) == sum(len(campaign.members(RAW / s)) for s in tops)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
