"""``pglab ledger`` as a user runs it: list, show, compare, merge, and the refusals (exit 2, one line)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, pulled_analyses
from pglab.app.cli import main
from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.studies import STUDIES

RAW, DERIVED = REPO / "data" / "raw", REPO / "data" / "derived"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """The five pipeline runs, and a second run of fdw_overhead on another machine class with PostgreSQL 16."""
    pulled_analyses(*STUDIES)
    path = tmp_path / "l.sqlite"
    other = tmp_path / "20261201T000000Z-abc123"
    shutil.copytree(RAW / "fdw_overhead", other)
    m = json.loads((other / "manifest.json").read_text())
    m["run_id"] = other.name
    m["start"] = "2026-12-01T00:00:00+00:00"
    for h in m["hosts"].values():
        h["cores"] = 16
    m["tools"]["postgres"] = "postgres (PostgreSQL) 16.4"
    (other / "manifest.json").write_text(json.dumps(m))
    with Ledger(path) as L:
        for s in STUDIES:
            book.add(L, RAW / s, DERIVED / s)
        book.add(L, other, DERIVED / "fdw_overhead")
    return path


def test_list_show_and_compare(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "list", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") >= 6 and "16.4 other" in out and "15.18 Debian" in out and "16 cores" in out
    fdw = json.loads((RAW / "fdw_overhead" / "manifest.json").read_text())["run_id"]
    assert main(["ledger", "show", fdw.split("-")[-1], "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert fdw[-6:] in out and "RW through postgres_fdw" in out and "dvc_hash" in out
    assert main(["ledger", "compare", "fdw_overhead", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert out.count("== 1 run of fdw_overhead") == 2 and "never pooled" in out  # two classes, shown apart
    assert main(["ledger", "compare", "fdw_overhead", "--pg", "16.4", "--ledger", str(ledger)]) == 0
    assert "never pooled" not in capsys.readouterr().out


def test_merge_twice_adds_once(ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.sqlite"
    assert main(["ledger", "merge", str(ledger), "--ledger", str(mine)]) == 0
    assert "6 new runs, 6 analyses" in capsys.readouterr().out
    assert main(["ledger", "merge", str(ledger), "--ledger", str(mine)]) == 0
    assert "0 new runs, 0 analyses" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "says"), [
    (["show", "nosuch"], "no run"),
    (["compare", "synchronous_commit", "--pg", "9.6"], "no analysed run"),
    (["merge", "postgresql://me:s3cret@127.0.0.1/x"], "holds a password"),
    (["add", str(REPO)], "not a run folder"),
])
def test_refusals_are_one_line_and_exit_2(ledger: Path, args: list[str], says: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", *args, "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and "s3cret" not in err


def test_your_ledger_takes_in_the_reference_and_never_writes_it(ledger: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The default ledger is yours (``<data-root>/ledger.sqlite``): reading it takes in the shipped runs of
    ``<data-root>/ledger/reference.sqlite.gz`` beside yours; nothing you run writes the reference."""
    data = tmp_path / "data"
    (data / "ledger").mkdir(parents=True)
    ref = data / "ledger" / "reference.sqlite.gz"
    with gzip.open(ref, "wb") as packed:  # the reference is kept gzipped (ledger.backend._unpacked)
        packed.write(ledger.read_bytes())
    before = ref.read_bytes()
    mine = tmp_path / "20261202T000000Z-def456"
    shutil.copytree(RAW / "cloud_providers", mine)
    m = json.loads((mine / "manifest.json").read_text())
    (mine / "manifest.json").write_text(json.dumps({**m, "run_id": mine.name}))
    assert main(["ledger", "add", str(mine), "--data-root", str(data)]) == 0
    assert main(["ledger", "list", "--data-root", str(data)]) == 0
    out = capsys.readouterr().out
    assert mine.name in out and "20261201T000000Z-abc123" in out  # yours beside the shipped
    assert ref.read_bytes() == before
    with Ledger(data / "ledger.sqlite") as L:
        assert len(book.runs(L)) == 7


def test_a_marked_run_is_left_out_of_list_compare_and_history_unless_asked(
        ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that started on a busy machine is kept in the ledger with why, and counted apart in every view."""
    busy = tmp_path / "20261202T000000Z-b0b0b0"
    shutil.copytree(RAW / "fdw_overhead", busy)
    m = json.loads((busy / "manifest.json").read_text())
    m.update(run_id=busy.name, start="2026-12-02T00:00:00+00:00")
    m["machine"] = {"before": {}, "after": {}, "busy_at_start": ["host local: other processes took 45% of the CPU"]}
    (busy / "manifest.json").write_text(json.dumps(m))
    with Ledger(ledger) as L:
        book.add(L, busy, DERIVED / "fdw_overhead")
        assert book.marked_count(L) == 1 and busy.name not in set(book.runs(L, with_marked=False).run_id)
    assert main(["ledger", "list", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "b0b0b0" not in out and "1 run marked for a busy or moving machine left out" in out
    assert main(["ledger", "list", "--with-marked", "--ledger", str(ledger)]) == 0
    assert "b0b0b0" in capsys.readouterr().out
    assert main(["ledger", "show", "b0b0b0", "--ledger", str(ledger)]) == 0
    assert "45% of the CPU" in capsys.readouterr().out
    assert main(["ledger", "compare", "fdw_overhead", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "b0b0b0" not in out and "left out" in out
    page = tmp_path / "h.html"
    assert main(["ledger", "history", "--out", str(page), "--ledger", str(ledger)]) == 0
    assert "1 run(s) marked" in page.read_text() and "b0b0b0" not in page.read_text()
