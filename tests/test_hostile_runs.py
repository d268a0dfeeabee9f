"""Run folders are untrusted input (issue 33 section 4): a manifest cut short, of the wrong shape, of another
study or hand-edited (a run id that is a path) is refused by every command that reads it, in one line that
names the file, with exit 2 (``pglab cleanup``: reported, "not clean", the other runs cleaned); nothing is ever written
outside ``--out``; and every manifest pglab shipped still loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, pulled_runs
from pglab.app import spread
from pglab.app.cli import main
from pglab.errors import UserError
from pglab.hosts.inventory import Inventory
from pglab.runs import record
from pglab.runs.leftovers import cleanup_leftovers
from pglab.studies import STUDIES

STUDY = "synchronous_commit"
RUN_ID = "20261101T000000Z-aaaaaa"  # the bad run's folder (a run id, as RunStore names them)
GOOD_ID = "20261101T000001Z-bbbbbb"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never the real user's runs index or labs."""
    monkeypatch.setenv("PGLAB_STATE_DIR", str(tmp_path / "state"))


def shipped(study: str = STUDY) -> dict[str, Any]:
    pulled_runs(study)
    return json.loads((REPO / "data" / "raw" / study / "manifest.json").read_text())


def edited(**changes: Any) -> Callable[[dict[str, Any]], str]:
    """The shipped manifest with keys replaced (``None``: removed), as JSON text."""
    def make(m: dict[str, Any]) -> str:
        for k, v in changes.items():
            if v is None:
                m.pop(k, None)
            else:
                m[k] = v
        return json.dumps(m)
    return make


def text(t: str) -> Callable[[dict[str, Any]], str]:
    return lambda m: t


# name -> (the manifest's text from the shipped one, what the message says, refused by cleanup too)
BAD: dict[str, tuple[Callable[[dict[str, Any]], str], str, bool]] = {
    "truncated": (lambda m: json.dumps(m, indent=1)[:300], "not valid JSON, truncated", True),
    "empty": (text(""), "not valid JSON", True),
    "list": (text("[]"), "a JSON array, not an object", True),
    "string": (text('"run"'), "a JSON string, not an object", True),
    "null": (text("null"), "a JSON null, not an object", True),
    "no run_id": (edited(run_id=None), "run_id: missing", False),
    "no study": (edited(study=None), "study: missing", False),
    "no status": (edited(status=None), "status: missing", True),
    "study a number": (edited(study=5), "study: input should be a valid string, not 5", True),
    "parameters a list": (edited(parameters=[1, 2]), "parameters: input should be a valid dictionary", False),
    "plan a string": (edited(plan="all"), "plan: input should be", False),
    "plan point a path": (edited(plan={"points": ["write-b01", "../../etc"]}), "plan.points.1: '../../etc'", False),
    "node without port": (edited(nodes=[{"name": "primary", "host": "local", "role": "primary"}]),
                          "nodes.0.port: missing", False),
    "nodes an object": (edited(nodes={"primary": {}}), "nodes: input should be a valid list", True),
    "host facts a string": (edited(hosts={"local": "big"}), "hosts.local: input should be a valid dictionary",
                            False),
    "workspaces a list": (edited(workspaces=["/tmp"]), "workspaces: input should be a valid dictionary", True),
    "run_id escapes": (edited(run_id="../escaped-X"), "run_id: '../escaped-X' is not a plain id", True),
    "run_id a path": (edited(run_id="a/b"), "run_id: 'a/b' is not a plain id", True),
    "run_id absolute": (edited(run_id="/tmp/escaped-X"), "run_id: '/tmp/escaped-X' is not a plain id", True),
    "run_id dot dot": (edited(run_id=".."), "run_id: '..' is not a plain id", True),
    "run_id NUL": (edited(run_id="x\0y"), "run_id: 'x\\x00y' is not a plain id", True),
    "run_id newline": (edited(run_id="x\ny"), "run_id: 'x\\ny' is not a plain id", True),
    "run_id empty": (edited(run_id=""), "run_id: '' is not a plain id", True),
    "run_id of another run": (edited(run_id=GOOD_ID), f"run_id '{GOOD_ID}' is not the name of its folder", True),
    "study escapes": (edited(study="../x"), "study: '../x' is not a plain id", True),
}


def bad_run(root: Path, case: str) -> Path:
    """A run folder (manifest only: every command refuses it before reading more) under the archive."""
    make, _, _ = BAD[case]
    run = root / "runs" / STUDY / RUN_ID
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(make({**shipped(), "run_id": RUN_ID}))
    return run


def good_run(root: Path, study: str = STUDY, run_id: str = GOOD_ID) -> Path:
    run = root / "runs" / study / run_id
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({**shipped(study), "run_id": run_id}))
    return run


def files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def one_line(err: str, path: Path, says: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pglab: "), err
    assert record.shown(path) in lines[0] and says in lines[0], err
    assert "Traceback" not in err


def command(name: str, root: Path, run: Path, out: Path) -> list[str]:
    if name == "compare":
        return ["compare", str(good_run(root)), str(run), "--data-root", str(root)]
    if name == "spread":
        return ["spread", STUDY, str(run), "--out", str(out), "--data-root", str(root)]
    return ["analyze", STUDY, "--run", str(run), "--data-root", str(root / "d"), "--figures", str(root / "f"),
            "--reference", str(REPO / "data" / "reference")]


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("name", ["compare", "spread", "analyze"])
def test_a_bad_manifest_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                               case: str) -> None:
    root = tmp_path / "data"
    run = bad_run(root, case)
    out = tmp_path / "out"
    argv = command(name, root, run, out)
    before = files(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    one_line(captured.err, run / "manifest.json", BAD[case][1])
    assert captured.out == ""  # refused before anything is shown or analysed
    assert files(tmp_path) == before and not out.exists()
    assert not (tmp_path / "escaped-X").exists() and not Path("/tmp/escaped-X").exists()


@pytest.mark.parametrize("case", sorted(c for c, (_, _, refused) in BAD.items() if refused))
def test_cleanup_reports_a_bad_manifest_in_one_line_and_cleans_the_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """cleanup goes on with the other runs (one bad file must not keep their servers running), says which
    manifest it could not read and why, and is not clean: exit 2, bad input as every reader answers it."""
    root = tmp_path / "data"
    run = bad_run(root, case)
    other = good_run(root, run_id="20261101T000002Z-cccccc")
    m = json.loads((other / "manifest.json").read_text())
    m.update(status="running", pid=99999999, processes=[], nodes=[], workspaces={}, local_passfiles={})
    (other / "manifest.json").write_text(json.dumps(m))
    report = cleanup_leftovers(root, Inventory())
    path = (run / "manifest.json").resolve()
    (line,) = [x for x in report.lines if str(path) in x]
    assert f"{record.shown(path)}: unreadable manifest (" in line and BAD[case][1] in line
    assert not report.clean and report.failed == [line]
    assert json.loads((other / "manifest.json").read_text())["status"] == "killed"  # the other run: cleaned
    monkeypatch.chdir(tmp_path)  # no params/hosts.yaml: everything on this machine
    assert main(["cleanup", "--data-root", str(root)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "NOT CLEAN" in captured.out


@pytest.mark.parametrize("case", sorted(c for c, (_, _, refused) in BAD.items() if not refused))
def test_cleanup_reads_what_a_killed_run_wrote(tmp_path: Path, case: str) -> None:
    """Keys cleanup does not need may be missing or odd (a run killed early): it still looks after the run."""
    run = bad_run(tmp_path / "data", case)
    report = cleanup_leftovers(tmp_path / "data", Inventory())
    assert report.clean and not [x for x in report.lines if "unreadable" in x]
    assert record.bookkeeping(run / "manifest.json")["status"] == "complete"


def test_a_run_of_another_study_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "data"
    run = good_run(root, "fdw_overhead", RUN_ID)
    assert main(command("analyze", root, run, tmp_path / "out")) == 2
    one_line(capsys.readouterr().err, run / "manifest.json", "a run of fdw_overhead, not of synchronous_commit")
    assert main(command("spread", root, run, tmp_path / "out")) == 2
    one_line(capsys.readouterr().err, run / "manifest.json", "is a run of fdw_overhead, not synchronous_commit")
    assert not (tmp_path / "out").exists() and not (root / "d").exists()


def test_a_manifest_that_is_not_utf8_or_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "data"
    run = bad_run(root, "empty")
    (run / "manifest.json").write_bytes(b'{"study": "\xff"}')
    assert main(command("analyze", root, run, tmp_path / "out")) == 2
    one_line(capsys.readouterr().err, run / "manifest.json", "not UTF-8 text")
    (run / "manifest.json").unlink()
    (run / "manifest.json").mkdir()
    assert main(command("spread", root, run, tmp_path / "out")) == 2
    one_line(capsys.readouterr().err, run / "manifest.json", "cannot be read")


@pytest.mark.parametrize("arg", ["../escaped", "x\0y", "a/../../b", "x\ny"])
def test_a_run_argument_that_is_no_folder_is_no_path_either(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            arg: str) -> None:
    root = tmp_path / "data"
    good = good_run(root)
    assert main(["compare", str(good), arg, "--data-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a run folder" in err and "Traceback" not in err


# -- --out ---------------------------------------------------------------------------------------------


def no_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the analysis started")

    monkeypatch.setattr(spread, "analyse", refuse)


def test_out_that_is_a_file_is_refused_before_any_analysis(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    no_analysis(monkeypatch)
    root = tmp_path / "data"
    run = good_run(root)
    out = tmp_path / "a-file"
    out.write_text("keep me\n")
    for target, says in [(out, "exists and is not a folder"), (out / "sub", "cannot be made a folder")]:
        assert main(["spread", STUDY, str(run), "--out", str(target), "--data-root", str(root)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"pglab: --out {target}: {says}") and len(err.splitlines()) == 1, err
    assert out.read_text() == "keep me\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_out_that_cannot_be_written_is_refused_before_any_analysis(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    no_analysis(monkeypatch)
    root = tmp_path / "data"
    run = good_run(root)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main(["spread", STUDY, str(run), "--out", str(locked / "out"), "--data-root", str(root)]) == 2
        assert "cannot be made a folder" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_nothing_is_written_through_a_link_out_of_out(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``<out>/<run id>`` resolved: a symlink there (left by anyone) cannot send the analysis elsewhere."""
    from pglab.studies import module

    analysed: list[Path] = []
    monkeypatch.setattr(module(STUDY, "analyze"), "analyze", lambda run, derived, *a: analysed.append(derived))
    root = tmp_path / "data"
    run = good_run(root)
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / GOOD_ID).symlink_to(elsewhere)
    assert main(["spread", STUDY, str(run), "--out", str(out), "--data-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "would be written outside" in err and len(err.splitlines()) == 1 and not analysed
    assert not any(elsewhere.iterdir())


def test_inside() -> None:
    assert record.inside("/a/b", "/a/b/c") == Path("/a/b/c")
    for bad in ("/a/b/../x", "/a/bc", "/"):
        with pytest.raises(UserError, match="outside"):
            record.inside("/a/b", bad)


# -- every shipped manifest loads ----------------------------------------------------------------------------


def shipped_manifests() -> list[Path]:
    data = REPO / "data"
    return sorted({*data.glob("raw/*/manifest.json"), *data.glob("raw/*/*/manifest.json"),
                   *data.glob("runs/*/*/manifest.json")})


def test_every_shipped_manifest_loads() -> None:
    pulled_runs(*STUDIES)
    found = shipped_manifests()
    assert {p.parent.name for p in found} >= set(STUDIES)
    for path in found:
        m = record.read(path.parent)
        study = path.parent.name if path.parent.parent.name == "raw" else path.parent.parent.name
        assert m["study"] == study, path
        assert record.read(path.parent, study) is not None and record.bookkeeping(path)["status"], path
        written = json.loads(path.read_text())  # read as written, in today's format: nothing dropped or coerced
        assert {k: m[k] for k in written} == written and m["format_version"] == record.FORMAT_VERSION, path


def remote_manifests() -> list[Path]:
    """Every manifest the repository's DVC remote holds: each run ever shipped (the remote keeps them all)."""
    files = REPO / "data" / "dvc-remote" / "files" / "md5"
    out = set()
    for listing in files.rglob("*.dir"):
        for entry in json.loads(listing.read_text()):
            if entry.get("relpath") == "manifest.json":
                out.add(files / entry["md5"][:2] / entry["md5"][2:])
    return sorted(out)


def test_every_manifest_ever_shipped_passes_the_record() -> None:
    """The remote's history (37 runs of the five studies, 2026-11-23 on) is the corpus of earlier formats."""
    found = remote_manifests()
    assert len(found) >= 30
    studies = set()
    for path in found:
        data = json.loads(path.read_text())
        m = record.check(data, path)
        assert m == data and m["status"], path
        studies.add(m["study"])
    assert studies == set(STUDIES)


def test_record_imports_no_host_code() -> None:
    code = ("import sys, pglab.runs.record; bad = sorted(m for m in sys.modules if m.startswith('pglab.') "
            "and m.split('.')[1] not in ('errors', 'runs')); assert not bad, bad; "
            "assert 'pglab.runs.store' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- the other readers ----------------------------------------------------------------------------------------


def test_publishing_never_archives_a_previous_copy_under_a_path_its_manifest_names(tmp_path: Path) -> None:
    from pglab.runs.store import publish

    new = good_run(tmp_path / "data")
    dest = tmp_path / "data" / "raw" / STUDY
    dest.mkdir(parents=True)
    (dest / "manifest.json").write_text(json.dumps({**shipped(), "run_id": "../../escaped-X"}))
    with pytest.raises(record.ManifestError, match="is not a plain id"):
        publish(new, dest)
    assert not (tmp_path / "escaped-X").exists() and not (tmp_path / "data" / "escaped-X").exists()
    assert json.loads((dest / "manifest.json").read_text())["run_id"] == "../../escaped-X"  # left as it was


def test_a_notebook_names_a_run_of_another_study(tmp_path: Path) -> None:
    from pglab.app import notebook

    dest = tmp_path / "data" / "raw" / STUDY
    dest.mkdir(parents=True)
    (dest / "manifest.json").write_text(json.dumps(shipped("fdw_overhead")))
    with pytest.raises(record.ManifestError, match="a run of fdw_overhead, not of synchronous_commit"):
        notebook.run(STUDY, {"collect": False, "data_root": str(tmp_path / "data")}, progress=False)
    assert not (tmp_path / "data" / "derived").exists()
