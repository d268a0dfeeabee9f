"""The ledger's inputs are untrusted (issue 47, part 2): a location typed wrong, a file that is no ledger, a
colleague's ledger of another schema, with bad values or ids, a DVC remote whose listings point elsewhere.

Each refusal is exit 2 and one line on stderr (no traceback, no password), and leaves every file as it was and no
new file or folder behind; what a ledger holds is printed with its control characters escaped. Real SQLite
files, real gzip, the real CLI (``pglab.app.cli.main``); the PostgreSQL URL forms are refused before any
connection, so no server is needed.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO
from pglab.app.cli import main
from pglab.ledger import shipped
from pglab.ledger.schema import ADDED, TABLES

REFERENCE = REPO / "data" / "ledger" / "reference.sqlite.gz"
REMOTE = REPO / "data" / "dvc-remote"
SECRET = "s3cret"
ESC = "\x1b]0;pwned\x07\x1b[2J"
FIRST_RUN = "run_id = (SELECT MIN(run_id) FROM runs)"  # the tables are WITHOUT ROWID: one row by its key
FIRST_CLAIM = ("run_id = (SELECT MIN(run_id) FROM claims) AND claim = (SELECT MIN(claim) FROM claims WHERE run_id = "
               "(SELECT MIN(run_id) FROM claims))")


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file and folder under ``root``: its bytes and mtime (a folder: None)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder of its own (a relative path a refusal might create lands in it), no $PGLAB_LEDGER."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGLAB_LEDGER", raising=False)
    return tmp_path


@pytest.fixture
def good(here: Path) -> Path:
    """A real ledger: the shipped reference, unpacked."""
    path = here / "good.sqlite"
    path.write_bytes(gzip.decompress(REFERENCE.read_bytes()))
    return path


def refused(args: list[str], capsys: pytest.CaptureFixture[str], root: Path, says: str = "") -> str:
    """``pglab ledger ARGS``: exit 2, one line on stderr, nothing under ``root`` written, made or removed."""
    before = snapshot(root)
    code = main(["ledger", *args])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and err.startswith("pglab: "), err
    assert "Traceback" not in err and SECRET not in err and "\x1b" not in err
    assert says in err, err
    assert snapshot(root) == before
    return err


def doctored(src: Path, dest: Path, *sql: str) -> Path:
    shutil.copyfile(src, dest)
    con = sqlite3.connect(dest)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return dest


def schema_1(path: Path) -> Path:
    """A ledger pglab wrote before schema 2: the tables without the columns added since, version 1."""
    con = sqlite3.connect(path)
    for table, (cols, key) in TABLES.items():
        old = [c for c in cols if not any(c in ADDED[v].get(table, ()) for v in ADDED)]
        con.execute(f"CREATE TABLE {table} ({', '.join(old)}, PRIMARY KEY ({', '.join(key)}))")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO runs (run_id, study) VALUES ('20260101T000000Z-aaaaaa', 'cloud_providers')")
    con.commit()
    con.close()
    return path


# -- locations ------------------------------------------------------------------------------------------------

BAD_LOCATIONS = [
    (f"POSTGRESQL://bob:{SECRET}@host/db", "password"),
    (f"postgresql:/bob:{SECRET}@host/db", "password"),
    (f"Postgres://:{SECRET}@host/db", "password"),
    (f"postgresql://bob@host/db?password={SECRET}", "password"),
    (f"data/bob:{SECRET}@host/db", "password"),
    ("postgresql://[::1/db", "not a PostgreSQL URL"),
    ("postgresql://host:notaport/db", "not a PostgreSQL URL"),
    ("postgresql:/x", "must be followed by //"),
    ("postgres:x", "must be followed by //"),
    ("POSTGRES:x", "must be followed by //"),
    ("http://example.org/ledger.sqlite", "not a ledger's scheme"),
    ("mysql:ledger", "not a ledger's scheme"),
    ("sqlite://host/x.sqlite", "names a host"),
    ("sqlite:postgresql://bob@host/db", "looks like a URL"),
    ("x/postgresql://bob@host/db", "looks like a URL"),
    ("led\nger.sqlite", "control character"),
]


@pytest.mark.parametrize(("url", "says"), BAD_LOCATIONS)
@pytest.mark.parametrize("command", [["list"], ["add"], ["merge", "good.sqlite"], ["rebuild", "--no-remote"],
                                     ["history", "--out", "h.html"]])
def test_a_bad_location_is_refused_before_anything(url: str, says: str, command: list[str], good: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    refused([*command, "--ledger", url], capsys, good.parent, says)


@pytest.mark.parametrize(("url", "says"), BAD_LOCATIONS[:8])
def test_a_bad_location_to_merge_or_in_the_environment_is_refused(url: str, says: str, good: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    refused(["merge", url, "--ledger", "mine/new.sqlite"], capsys, good.parent, says)
    monkeypatch.setenv("PGLAB_LEDGER", url)
    refused(["list"], capsys, good.parent, says)
    refused(["merge", str(good)], capsys, good.parent, says)


@pytest.mark.parametrize("url", ["POSTGRESQL://bob@127.0.0.1:1/pglab", "Postgres://127.0.0.1:1/pglab"])
def test_a_scheme_in_capitals_is_postgresql_not_a_file(url: str, here: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Taken as PostgreSQL (a connection tried: nothing listens on port 1), never as a file path."""
    refused(["list", "--ledger", url], capsys, here, "cannot connect")
    refused(["merge", url, "--ledger", "mine.sqlite"], capsys, here, "cannot connect")


# -- files that are no ledger ---------------------------------------------------------------------------------


def _text(here: Path) -> dict[str, Path]:
    plain = here / "notes.sqlite"
    plain.write_text("a colleague's notes, not a ledger\n" * 20)
    packed = here / "notes.sqlite.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    fake = here / "fake.sqlite.gz"
    fake.write_text("not even gzip\n")
    other = here / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    return {"plain": plain, "packed": packed, "fake": fake, "other": other}


@pytest.mark.parametrize("which", ["plain", "packed", "fake", "other"])
def test_a_file_that_is_no_ledger_is_refused_and_left_alone(which: str, here: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_text(here)[which])
    says = {"plain": "not a SQLite file", "packed": "not a SQLite file", "fake": "cannot be unpacked",
            "other": "not a pglab ledger"}[which]
    for args in (["list", "--ledger", path], ["add", "--ledger", path], ["merge", path, "--ledger", "new/l.sqlite"],
                 ["history", "--ledger", path, "--out", "h.html"], ["rebuild", "--no-remote", "--ledger", path]):
        refused(args, capsys, here, says)


def test_merge_never_creates_its_input(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(["merge", "theirs/deep/l.sqlite", "--ledger", "mine.sqlite"], capsys, here, "no such file")
    refused(["merge", "theirs.sqlite.gz", "--ledger", "mine.sqlite"], capsys, here, "no such file")
    assert list(here.iterdir()) == []


def test_reading_a_ledger_that_is_not_there_creates_nothing(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["list"], ["show", "abc123"], ["compare", "fdw_overhead"]):
        refused([*args, "--ledger", "no/such/l.sqlite"], capsys, here, "no such file")
    assert list(here.iterdir()) == []


def test_a_refused_add_leaves_no_new_ledger(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "notarun").mkdir()
    refused(["add", "notarun", "--ledger", "new/dir/l.sqlite"], capsys, here)
    assert sorted(p.name for p in here.iterdir()) == ["notarun"]


# -- a colleague's ledger: schema, values, ids -----------------------------------------------------------------


@pytest.mark.parametrize(("make", "says"), [
    (lambda g: schema_1(g.parent / "old.sqlite"), "schema version 1 is older"),
    (lambda g: doctored(g, g.parent / "x1.sqlite", "UPDATE meta SET value = 'x1'"), "'x1' is not a whole number"),
    (lambda g: doctored(g, g.parent / "new.sqlite", "UPDATE meta SET value = '99'"), "99 is newer"),
    (lambda g: doctored(g, g.parent / "nometa.sqlite", "DELETE FROM meta"), "no schema_version"),
    (lambda g: doctored(g, g.parent / "cols.sqlite", "ALTER TABLE claims DROP COLUMN emulated"), "lacks emulated"),
    (lambda g: doctored(g, g.parent / "abc.sqlite", "UPDATE claims SET reproduced = 'abc' WHERE "
                        f"{FIRST_CLAIM}"), "column reproduced: 1 value is not a number"),
    (lambda g: doctored(g, g.parent / "blob.sqlite", "UPDATE runs SET study = x'00ff' WHERE "
                        f"{FIRST_RUN}"), "column study: 1 value is not text"),
    (lambda g: doctored(g, g.parent / "esc.sqlite", f"UPDATE runs SET run_id = run_id || '{ESC}' WHERE "
                        f"{FIRST_RUN}"), "\\x1b]0;pwned\\x07"),
    (lambda g: doctored(g, g.parent / "study.sqlite", "UPDATE runs SET study = '../etc' WHERE "
                        f"{FIRST_RUN}"), "not a plain id"),
    (lambda g: doctored(g, g.parent / "key.sqlite", "UPDATE machines SET machine_key = 'x y'"), "12 hex digits"),
])
@pytest.mark.parametrize("packed", [False, True])
def test_a_colleagues_bad_ledger_is_refused_and_never_written(make: Callable[[Path], Path], says: str, packed: bool,
                                                              good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = make(good)
    if packed:
        theirs = theirs.rename(theirs.with_name(theirs.name + ".gz.tmp"))
        (gz := theirs.with_name(theirs.name.removesuffix(".tmp"))).write_bytes(gzip.compress(theirs.read_bytes()))
        theirs.unlink()
        theirs = gz
    refused(["merge", theirs.name, "--ledger", "mine/new.sqlite"], capsys, good.parent, says)
    refused(["merge", theirs.name, "--ledger", good.name], capsys, good.parent, says)


def test_a_ledger_with_bad_values_is_refused_by_every_reader(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = doctored(good, good.parent / "abc.sqlite", "UPDATE claims SET reproduced = 'abc'")
    for args in (["list"], ["history", "--out", "h.html"], ["compare", "fdw_overhead"], ["add"]):
        refused([*args, "--ledger", bad.name], capsys, good.parent, "not a number")


def test_a_good_merge_still_merges(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(good.parent)
    assert main(["ledger", "merge", good.name, "--ledger", "mine/new.sqlite"]) == 0
    with sqlite3.connect(good) as db:  # every run of the shipped ledger, however many it holds today
        n = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert n > 100 and f"{n} new runs" in capsys.readouterr().out
    assert snapshot(good.parent)[good.name] == before[good.name]  # read, never written


# -- what the CLI prints ---------------------------------------------------------------------------------------


def test_every_table_escapes_control_characters(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run id, a study's claim and a machine's label holding a terminal's escape sequences are shown escaped by
    list, show and compare; the file itself is only read."""
    con = sqlite3.connect(good)
    run, study = con.execute("SELECT run_id, study FROM runs WHERE run_id IN (SELECT run_id FROM claims) "
                             "AND study = 'fdw_overhead' LIMIT 1").fetchone()
    bad = run + ESC
    for table in ("runs", "analyses", "points", "claims"):
        con.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", (bad, run))
    con.execute("UPDATE claims SET claim = claim || ? WHERE run_id = ?", (ESC, bad))
    con.execute("UPDATE machines SET label = label || ?", (ESC,))
    con.commit()
    con.close()
    before = snapshot(good.parent)
    for args in (["list"], ["show", run], ["compare", study]):
        assert main(["ledger", *args, "--ledger", good.name]) == 0, args
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned\\x07\\x1b[2J" in out, args
    assert snapshot(good.parent) == before


# -- rebuild ----------------------------------------------------------------------------------------------------


def test_rebuild_refuses_a_missing_remote(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = here / "team.sqlite.gz"
    shutil.copyfile(REFERENCE, ledger)
    refused(["rebuild", "--ledger", ledger.name, "--remote", "no/such/remote"], capsys, here, "not a DVC remote")
    refused(["rebuild", "--ledger", "new/dir/l.sqlite", "--remote", "no/such/remote"], capsys, here,
            "not a DVC remote")


def test_rebuild_keeps_a_gz_ledger_gzipped(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = json.loads((REPO / "data" / "raw" / "cloud_providers" / "manifest.json").read_text())["run_id"]
    shutil.copytree(REPO / "data" / "raw" / "cloud_providers", here / "data" / "runs" / "cloud_providers" / run)
    ledger = here / "team.sqlite.gz"
    shutil.copyfile(REFERENCE, ledger)
    assert main(["ledger", "rebuild", "--ledger", ledger.name, "--no-remote", "--data-root", "data",
                 "--reference", str(REPO / "data" / "reference")]) == 0
    assert "rebuilt team.sqlite.gz: 1 runs" in capsys.readouterr().out
    assert ledger.read_bytes()[:2] == b"\x1f\x8b"  # gzip, not a plain SQLite file under a .gz name
    assert gzip.decompress(ledger.read_bytes())[:16] == b"SQLite format 3\x00"
    assert main(["ledger", "list", "--ledger", ledger.name]) == 0
    assert run in capsys.readouterr().out
    assert sorted(p.name for p in here.iterdir()) == ["data", "team.sqlite.gz"]  # no scratch left


# -- import-dvc ---------------------------------------------------------------------------------------------------


def _remote_with(here: Path, entries: list[dict[str, str]]) -> tuple[Path, str]:
    """A DVC remote holding one shipped run (its listing and files copied), its listing given ``entries`` more."""
    dir_hash, _ = next(shipped.remote_runs(REMOTE))
    remote = here / "remote"
    listing = json.loads((REMOTE / "files" / "md5" / dir_hash[:2] / dir_hash[2:]).read_text())
    for e in listing:
        src = REMOTE / "files" / "md5" / e["md5"][:2] / e["md5"][2:]
        dst = remote / "files" / "md5" / e["md5"][:2] / e["md5"][2:]
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    (remote / "files" / "md5" / dir_hash[:2] / dir_hash[2:]).write_text(json.dumps(listing + entries))
    return remote, dir_hash


def test_materialize_skips_entries_that_point_elsewhere(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = here / "outside.txt"
    outside.write_text("not the remote's")
    remote, dir_hash = _remote_with(here, [
        {"relpath": "stolen.txt", "md5": os.path.relpath(outside, here / "remote" / "files" / "md5" / "xx")},
        {"relpath": "../../escaped.txt", "md5": "0" * 32},
        {"relpath": "/etc/cron.d/x", "md5": "0" * 32},
        {"relpath": "short.txt", "md5": "abc"}])
    dest = here / "run"
    lines: list[str] = []
    shipped.materialize(remote, dir_hash, dest, skip=lines.append)
    assert len(lines) == 4, lines
    assert not (dest / "stolen.txt").exists() and not (here / "escaped.txt").exists()
    assert (dest / "manifest.json").is_file()


def test_import_dvc_skips_a_bad_entry_with_one_line(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest whose md5 is a path (to a manifest outside the remote) is never read; an entry pointing outside
    its run is never written; each is one line on stderr, and the good run is imported."""
    outside = here / "elsewhere" / "manifest.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps({"run_id": "20990101T000000Z-evil00", "study": "cloud_providers"}))
    remote, dir_hash = _remote_with(here, [{"relpath": "../../../escaped.txt", "md5": "0" * 32}])
    zero = remote / "files" / "md5" / "00" / ("0" * 30)
    zero.parent.mkdir(parents=True, exist_ok=True)
    zero.write_text("x")
    evil = remote / "files" / "md5" / "ee" / ("e" * 30 + ".dir")
    evil.parent.mkdir(parents=True, exist_ok=True)
    evil.write_text(json.dumps([{"relpath": "manifest.json", "md5": "../../../../elsewhere/manifest.json"}]))
    assert main(["ledger", "import-dvc", "--remote", "remote", "--ledger", "l.sqlite",
                 "--reference", str(REPO / "data" / "reference")]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2 and all(x.startswith("pglab: skipped ") for x in lines), err
    assert "Traceback" not in err and "1 runs in remote: 1 new" in out
    assert not list(here.rglob("escaped.txt"))
    con = sqlite3.connect(here / "l.sqlite")
    assert [r[0] for r in con.execute("SELECT dvc_hash FROM runs")] == [dir_hash]
    con.close()


def test_history_never_writes_over_the_pipelines_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`pglab ledger history` writes yours/reports/history.html; reports/history.html is a DVC output (the shipped
    runs' history): an --out naming it is refused in one line, and the file is left as it was."""
    from pglab.app.cli import main as cli

    shutil.copy(REPO / "dvc.lock", tmp_path / "dvc.lock")
    shutil.copy(REPO / "data" / "ledger" / "reference.sqlite.gz", tmp_path / "ref.sqlite.gz")
    (tmp_path / "reports").mkdir()
    page = tmp_path / "reports" / "history.html"
    page.write_text("shipped")
    monkeypatch.chdir(tmp_path)
    ledger = str(tmp_path / "ref.sqlite.gz")
    assert cli(["ledger", "history", "--ledger", ledger, "--out", "reports/history.html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stage history writes it" in err[0] and "yours/reports/history.html" in err[0]
    assert page.read_text() == "shipped"
    assert cli(["ledger", "history", "--ledger", ledger]) == 0
    assert (tmp_path / "yours" / "reports" / "history.html").stat().st_size > 1000
    assert page.read_text() == "shipped"
