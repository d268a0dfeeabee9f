"""The run record as a typed, versioned contract (issue 34, part 1): every run ever shipped reads and migrates,
a write that does not match the model fails at once, and the analyses read parameters through the record.

The corpus is the repository's DVC remote: every manifest and every point's meta.json it has ever held, read
straight from its content-addressed files (a ``.dir`` lists a run folder's files by md5), without materialising
a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from modgraph import closure
from pglab.errors import UserError
from pglab.runs import formats, reading, record
from pglab.runs.record import FORMAT_VERSION, ManifestError, RecordError
from pglab.runs.store import RunStore, write_meta
from pglab.studies import STUDIES, module

REMOTE = REPO / "data" / "dvc-remote" / "files" / "md5"
FORMAT_1_RUNS = 42  # the runs shipped before format 2 (2026-11-23 to 11-27 18:35); every later one is format 2


def _content(md5: str) -> Path:
    return REMOTE / md5[:2] / md5[2:]


def shipped() -> Iterator[tuple[str, dict[str, str]]]:
    """(the run folder's ``.dir`` file, relpath -> md5 of its files) of every run in the remote."""
    for listing in sorted(REMOTE.glob("*/*.dir")):
        entries = json.loads(listing.read_text())
        files = {e["relpath"]: e["md5"] for e in entries if isinstance(e, dict)}
        if record.MANIFEST in files and _content(files[record.MANIFEST]).exists():
            yield listing.name, files


@pytest.fixture(scope="module")
def corpus() -> list[tuple[dict[str, Any], dict[str, Any], dict[str, str]]]:
    """(the manifest as written, as read, the run's files) of every shipped run, the format-1 ones first."""
    out = []
    for _, files in shipped():
        path = _content(files[record.MANIFEST])
        written = json.loads(path.read_text())
        out.append((written, record.migrate(record.check(written, path)), files))
    return sorted(out, key=lambda x: formats.version(x[0]))


def test_every_shipped_run_reads_and_migrates(corpus: list) -> None:
    old = [c for c in corpus if formats.version(c[0]) == 1]
    assert len(old) == FORMAT_1_RUNS and {m["study"] for _, m, _ in old} == set(STUDIES)
    assert all(formats.version(w) == FORMAT_VERSION for w, _, _ in corpus[len(old):])  # shipped since
    for written, m, _ in corpus:
        assert m["format_version"] == FORMAT_VERSION
        if formats.version(written) == 1:
            assert m["migrated"] == {"from": 1, "notes": []}  # each had its baseline in the plan already
        else:
            assert "migrated" not in m and m == written  # today's format: read as written
        assert formats.written(m) == formats.version(written)  # what the ledger records of it
        assert {k: m[k] for k in written} == written, m["run_id"]  # nothing dropped or coerced
        record.RunRecord.model_validate(m)
        assert record.migrate(m) == m  # today's format: left as it is


def _kept(dumped: object, given: object) -> bool:
    """Every value ``given`` holds is in ``dumped`` unchanged; a key of a nested model it lacks is a default filled."""
    if isinstance(given, dict) and isinstance(dumped, dict):
        return given.keys() <= dumped.keys() and all(_kept(dumped[k], v) for k, v in given.items())
    return dumped == given


def test_the_study_parameters_and_the_baseline_of_every_shipped_run(corpus: list) -> None:
    """Each run's parameters validate with its study's model today; the baseline has one place, the plan."""
    for written, m, _ in corpus:
        params = module(m["study"], "params").Params
        par = record.parameters(m, params)
        given = written["parameters"]
        dumped = par.model_dump(include=set(given))
        assert _kept(dumped, {k: given[k] for k in type(par).model_fields if k in given}) or \
            m["study"] == "cloud_providers", m["run_id"]  # a model's nested defaults may be filled, never changed
        base = record.baseline(m, "?")
        assert base == written["plan"]["baseline"]
        assert base == (par.base if m["study"] == "cloud_providers" else par.baseline), m["run_id"]


def test_every_shipped_point_meta_reads_and_migrates(corpus: list) -> None:
    """4,104 metas; logical_replication's measured points get the warm-up its collect used, with a note."""
    n, warmups = 0, {}
    for _, m, files in corpus:
        for rel, md5 in files.items():
            if Path(rel).name != record.META or len(Path(rel).parts) != 2:
                continue  # points set aside in interrupted/ are never read as points
            path = _content(md5)
            written = json.loads(path.read_text())
            meta = formats.meta(record.check(written, path, record.PointMeta), Path(rel).parent.name, m)
            record.PointMeta.model_validate(meta)
            n += 1
            assert meta["format_version"] == FORMAT_VERSION and {k: meta[k] for k in written} == written
            if "migrated" not in m:  # a run written in today's format: its metas too
                assert "migrated" not in meta and ("warmup_s" in written or m["study"] != "logical_replication"
                                                   or "block" not in written)
                continue
            notes = meta["migrated"]["notes"]
            if m["study"] == "logical_replication" and "block" in written:
                assert "warmup_s" not in written and meta["warmup_s"] == m["parameters"]["warmup_s"]
                assert len(notes) == 1 and "the run's parameters.warmup_s (1 s)" in notes[0]
                warmups[m["run_id"]] = meta["warmup_s"]
            else:
                assert notes == [], (m["run_id"], rel)
    assert n >= 4104 and len(warmups) == 8


# -- the migrations, one by one --------------------------------------------------------------------------


def test_a_format_1_plan_without_a_baseline_takes_the_parameters(tmp_path: Path) -> None:
    v1 = {"study": "synchronous_commit", "run_id": "r1", "status": "complete", "parameters": {"baseline": "off"},
          "plan": {"points": ["a"]}}
    m = record.migrate(record.check(v1, tmp_path / record.MANIFEST))
    assert m["plan"] == {"points": ["a"], "baseline": "off"} and record.baseline(m, "on") == "off"
    assert m["migrated"]["notes"] == ["plan.baseline: not in the plan of format 1; parameters.baseline (off)"]
    assert v1["plan"] == {"points": ["a"]}  # in memory: what was read is not changed
    no_plan = record.migrate({"study": "s", "run_id": "r", "status": "failed"})
    assert "plan" not in no_plan and record.baseline(no_plan, "local") == "local"


def test_a_record_of_a_newer_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / record.MANIFEST).write_text(json.dumps({"study": "s", "run_id": "r", "status": "complete",
                                                        "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(ManifestError, match=f"format_version: format {FORMAT_VERSION + 1} is newer than this pglab "
                                            f"reads \\(up to {FORMAT_VERSION}\\): update pglab"):
        record.read(tmp_path)


def test_a_format_1_meta_gets_its_point_and_a_logical_point_its_warm_up(tmp_path: Path) -> None:
    run = {"study": "logical_replication", "parameters": {"warmup_s": 2.5}}
    meta = formats.meta({"status": "ok", "block": 1}, "b01-c002-builtin", run)
    assert meta["point"] == "b01-c002-builtin" and meta["warmup_s"] == 2.5
    assert formats.meta({"status": "ok", "block": 1}, "p", {"study": "logical_replication"})["warmup_s"] == 1.0
    assert "warmup_s" not in formats.meta({"status": "ok"}, "setup", run)  # a set-up step cuts nothing
    assert "warmup_s" not in formats.meta({"status": "ok", "block": 1}, "p", {**run, "study": "fdw_overhead"})
    today = {"format_version": FORMAT_VERSION, "status": "ok", "block": 1}
    assert formats.meta(today, "p", run) == today  # a format-2 point that lacks it lacks it


def test_a_point_meta_is_read_through_the_record(tmp_path: Path) -> None:
    point = tmp_path / "b01-x"
    point.mkdir()
    (point / record.META).write_text(json.dumps({"status": "ok", "block": "first"}))
    with pytest.raises(ManifestError, match="not a point's meta.json: block: input should be a valid integer"):
        reading.read_meta(point, {})
    with pytest.raises(ManifestError, match="no such file: the point was not measured"):
        reading.read_meta(tmp_path / "missing", {})


# -- writing: what a reader would refuse is never written -------------------------------------------------


def test_the_run_store_writes_today_s_format(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "synchronous_commit", "test", {"baseline": "on"})
    point = store.point("b01-c001-on", block=1, group="c001", config="on", copy=1)
    point.finish("ok")
    assert json.loads((store.dir / record.MANIFEST).read_text())["format_version"] == FORMAT_VERSION
    assert json.loads((point.dir / record.META).read_text())["format_version"] == FORMAT_VERSION
    m = reading.load_manifest(store.dir)
    assert "migrated" not in m and formats.written(m) == FORMAT_VERSION
    assert reading.read_meta(point.dir, m)["status"] == "ok"


def test_a_manifest_a_reader_would_refuse_is_not_written(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "synchronous_commit", "test", {})
    before = (store.dir / record.MANIFEST).read_bytes()
    store.manifest["plan"] = {"points": ["b01-on", "../../elsewhere"]}
    with pytest.raises(RecordError, match=r"manifest.json: not written: not a run manifest: plan.points.1: "
                                          r"'../../elsewhere' is not a plain id"):
        store.save()
    assert (store.dir / record.MANIFEST).read_bytes() == before and not list(store.dir.glob("*.tmp"))
    store.manifest["plan"] = {"points": []}
    store.manifest["points"] = {"total": 0}
    store.manifest["nodes"] = [{"name": "primary", "host": "local", "role": "primary", "port": "five"}]
    with pytest.raises(RecordError, match="nodes.0.port: input should be a valid integer"):
        store.save()
    store.manifest["nodes"] = []
    store.manifest["format_version"] = 1
    with pytest.raises(RecordError, match="format_version: 1, not today's 2"):
        store.save()


def test_a_point_meta_a_reader_would_refuse_is_not_written(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "synchronous_commit", "test", {})
    with pytest.raises(RecordError, match=r"meta.json: not written: not a point's meta.json: copy: input should be "
                                          "greater than 0"):
        store.point("b01-c001-on", block=1, config="on", copy=0)
    point = store.point("b01-c001-off", block=1, config="off", copy=1)
    point.meta["steal"] = "high"
    with pytest.raises(RecordError, match="steal: input should be a valid number"):
        point.finish("ok")
    assert json.loads((point.dir / record.META).read_text())["status"] == "running"  # the last good record
    point.meta["steal"] = 0.1
    point.finish("ok")
    with pytest.raises(RecordError, match="status: missing"):
        write_meta(point.dir, {"format_version": FORMAT_VERSION, "point": point.id})


# -- the study's parameters through the record --------------------------------------------------------------


def test_parameters_take_the_model_s_defaults_and_ignore_keys_it_no_longer_has() -> None:
    params = module("logical_replication", "params").Params
    older = {"run_id": "r", "parameters": {"systems": ["streaming"], "clients": [1], "run_seconds": 5,
                                           "gone_key": 1, "slony": {"sync_interval_ms": 500, "gone_too": True}}}
    par = record.parameters(older, params)
    assert par.warmup_s == 1.0 and par.baseline == "streaming" and par.slony.sync_interval_ms == 500
    assert not hasattr(par, "gone_key")
    with pytest.raises(ManifestError, match=r"run r: parameters.run_seconds: input should be a valid integer.*"
                                            r"refuses what this run recorded"):
        record.parameters({**older, "parameters": {**older["parameters"], "run_seconds": "long"}}, params)
    with pytest.raises(UserError, match="parameters.systems: missing"):
        record.parameters({"run_id": "r", "parameters": {}}, params)


def test_analyses_read_study_parameters_only_through_the_record() -> None:
    """No analysis, notebook helper or report reads ``manifest["parameters"]`` by key with a copied default."""
    lib = REPO / "lib" / "pglab"
    files = [*lib.glob("studies/*/analyze.py"), *lib.glob("analysis/*.py"), lib / "app" / "notebook.py",
             *lib.glob("views/*.py")]
    for f in files:
        text = f.read_text()
        for needle in ('["parameters"]', 'get("parameters"', "['parameters']"):
            assert needle not in text, (f, needle)


# -- reading a run needs no host --------------------------------------------------------------------------


@pytest.mark.parametrize("study", STUDIES)
def test_the_analysis_imports_no_host_code(study: str) -> None:
    """What the analyze stage runs (the notebook, the study's analyze and params, the report): not the host layer;
    nor the node layer, but for cloud_providers' model, which checks a connection string (``nodes.target``)."""
    files = closure("pglab.app.notebook", f"pglab.studies.{study}.analyze", f"pglab.studies.{study}.params",
                    "pglab.views.report")
    lower = sorted(str(p.relative_to(REPO / "lib")) for p in files if p.parent.name in ("hosts", "nodes")
                   or "/hosts/" in str(p))
    allowed = ["pglab/nodes/__init__.py", "pglab/nodes/target.py"] if study == "cloud_providers" else []
    assert lower == allowed


def test_points_not_ok_summary_reads_the_manifest_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "20260101T000000Z-abcdef"
    run.mkdir()
    (run / record.MANIFEST).write_text(json.dumps({"study": "s", "run_id": run.name, "status": "partial",
                                                   "plan": {"points": ["b01-a", "b01-b"]}}))
    (run / "b01-a").mkdir()
    (run / "b01-a" / record.META).write_text(json.dumps({"status": "failed", "error": "boom\nmore", "block": 1}))
    reads = []
    real = record.read
    monkeypatch.setattr(record, "read", lambda *a, **k: reads.append(a) or real(*a, **k))
    assert reading.points_not_ok_summary(run) == "2 of 2 planned points not measured (b01-a failed: boom; " \
                                                 "b01-b not measured)"
    assert len(reads) == 1
