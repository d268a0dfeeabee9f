"""Comparable or refused: `pglab compare` and pglab.analysis.comparable on real run manifests (no server is started)."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import REPO, pulled_runs
from pglab.analysis import comparable
from pglab.analysis.comparable import MISSING, NOTE, REFUSE
from pglab.app import notebook
from pglab.app.cli import main
from pglab.errors import NotComparableError
from pglab.views import side_by_side

RUN = REPO / "data" / "raw" / "synchronous_commit"
STUDY = "synchronous_commit"


def _real_run() -> Path:
    """The pipeline's synchronous_commit run (`dvc pull` fills data/raw on a fresh clone)."""
    pulled_runs(STUDY)
    return RUN


@pytest.fixture
def manifest() -> dict[str, Any]:
    return json.loads((_real_run() / "manifest.json").read_text())


def fields(diffs: list[comparable.Difference], severity: str | None = None) -> list[str]:
    return [d.field for d in diffs if severity is None or d.severity == severity]


# -- differences ------------------------------------------------------------------------------------


def test_identical_manifests_have_no_difference(manifest: dict[str, Any]) -> None:
    assert comparable.differences(manifest, copy.deepcopy(manifest)) == []
    assert comparable.check_comparable(manifest, copy.deepcopy(manifest)) == []


def test_run_bookkeeping_and_notes_do_not_refuse(manifest: dict[str, Any]) -> None:
    b = copy.deepcopy(manifest)
    b.update(run_id="other", pid=1, git_revision="abc", start="2030-01-01T00:00:00+00:00", processes=[])
    b["packages"]["psycopg"] = "9.9.9"
    b["parameters"]["seed"] = 42
    b["parameters"]["client_timeout_s"] = 5
    host = next(iter(b["hosts"]))
    b["hosts"][host]["boot_id"] = "another-boot"
    b["hosts"][host]["disk_tmp"] = b["hosts"][host]["disk_tmp"].replace(" KiB free", "1 KiB free")
    diffs = comparable.check_comparable(manifest, b)  # does not raise
    assert fields(diffs, REFUSE) == []
    assert {"git_revision", "start", "packages.psycopg", "parameters.seed", "parameters.client_timeout_s",
            f"hosts.{host}.boot_id", f"hosts.{host}.disk_tmp"} <= set(fields(diffs, NOTE))
    assert "run_id" not in fields(diffs) and "pid" not in fields(diffs)


def _other_cpu(m: dict[str, Any]) -> str:
    host = next(iter(m["hosts"]))
    m["hosts"][host]["cpu_model"] = "Intel Xeon"
    return f"hosts.{host}.cpu_model"


def _other_pgbench(m: dict[str, Any]) -> str:
    m["tools"]["pgbench"] = "pgbench (PostgreSQL) 17.2"
    return "tools.pgbench"


def _standby_on_another_machine(m: dict[str, Any]) -> str:
    """The standby moved to a second host on a second machine: where it ran relative to the primary changed."""
    first = next(iter(m["hosts"]))
    m["hosts"]["far"] = {**m["hosts"][first], "name": "far", "machine_id": "f" * 32, "hostname": "far"}
    standby = next(n for n in m["nodes"] if n["role"] == "standby")
    standby["host"] = "far"
    return f"placement.{standby['name']}"


def _other_server_setting(m: dict[str, Any]) -> str:
    m["parameters"]["server_settings"] = {"shared_buffers": "4GB"}
    return "parameters.server_settings.shared_buffers"


def _sysbench_on_one_side(m: dict[str, Any]) -> str:
    m["tools"]["sysbench"] = "sysbench 1.0.20"
    return "tools.sysbench"


def _other_cores(m: dict[str, Any]) -> str:
    host = next(iter(m["hosts"]))
    m["hosts"][host]["cores"] = 64
    return f"hosts.{host}.cores"


def _other_memory(m: dict[str, Any]) -> str:
    host = next(iter(m["hosts"]))
    m["hosts"][host]["mem_total_kb"] = int(m["hosts"][host]["mem_total_kb"] * 0.98)  # 2%: another size
    return f"hosts.{host}.mem_total_kb"


def _other_kernel_release(m: dict[str, Any]) -> str:
    host = next(iter(m["hosts"]))
    m["hosts"][host]["kernel"] = "Linux 6.1.0-28-amd64 x86_64"
    return f"hosts.{host}.kernel"


def _other_disk(m: dict[str, Any]) -> str:
    host = next(iter(m["hosts"]))
    m["hosts"][host]["disk_tmp"] = "1000 KiB total, 10 KiB free, on /dev/sdz"
    return f"hosts.{host}.disk_tmp"


@pytest.mark.parametrize("change", [_other_cpu, _other_pgbench, _standby_on_another_machine, _other_server_setting,
                                    _sysbench_on_one_side, _other_cores, _other_memory, _other_kernel_release,
                                    _other_disk])
def test_refused_with_the_field_named(manifest: dict[str, Any], change: Any) -> None:
    b = copy.deepcopy(manifest)
    field = change(b)
    with pytest.raises(NotComparableError) as exc:
        comparable.check_comparable(manifest, b)
    assert field in fields(exc.value.differences)
    assert field in str(exc.value) and "--allow-mixed" in str(exc.value)
    assert all(d.severity == REFUSE for d in exc.value.differences)


def test_noise_between_two_runs_of_one_machine_is_a_note(manifest: dict[str, Any]) -> None:
    """What two runs on this VM really differed in (the DVC remote's runs of 11-23 to 11-27): MemTotal by 4 to
    440 KiB, and the kernel's build suffix (6.18.44-fc-v595 ... v782). Notes, shown, never a refusal."""
    b = copy.deepcopy(manifest)
    host = next(iter(b["hosts"]))
    b["hosts"][host]["mem_total_kb"] = manifest["hosts"][host]["mem_total_kb"] - 440
    kernel = str(manifest["hosts"][host]["kernel"])
    b["hosts"][host]["kernel"] = re.sub(r"^(\S+ \d+(?:\.\d+)*)\S*", r"\1-fc-v999", kernel)
    assert b["hosts"][host]["kernel"] != kernel
    diffs = comparable.check_comparable(manifest, b)  # does not raise
    assert set(fields(diffs, NOTE)) == {f"hosts.{host}.mem_total_kb", f"hosts.{host}.kernel"}
    assert fields(diffs, REFUSE) == []


def test_allow_mixed_returns_the_differences(manifest: dict[str, Any]) -> None:
    b = copy.deepcopy(manifest)
    _other_pgbench(b)
    b["git_revision"] = "abc"
    diffs = comparable.check_comparable(manifest, b, allow_mixed=True)
    assert fields(diffs, REFUSE) == ["tools.pgbench"] and "git_revision" in fields(diffs, NOTE)
    assert comparable.mixing_message(diffs) == "mixing runs that differ in: tools.pgbench"


def test_a_field_missing_on_one_side_is_a_difference(manifest: dict[str, Any]) -> None:
    b = copy.deepcopy(manifest)
    value = b["parameters"].pop("scale")
    (d,) = comparable.differences(manifest, b)
    assert (d.field, d.value_a, d.value_b, d.severity) == ("parameters.scale", value, MISSING, REFUSE)
    b = copy.deepcopy(manifest)
    del b["tools"]
    assert set(fields(comparable.differences(manifest, b), REFUSE)) == {f"tools.{t}" for t in manifest["tools"]}


def test_a_parameter_an_older_run_lacked_is_no_difference_when_left_at_none(manifest: dict[str, Any]) -> None:
    """A parameter added later (max_blocks) and left at None, its default, means what the older run did."""
    a, b = copy.deepcopy(manifest), copy.deepcopy(manifest)
    a["parameters"].pop("max_blocks", None)
    b["parameters"]["max_blocks"] = None
    assert comparable.differences(a, b) == []
    b["parameters"]["max_blocks"] = 16
    (d,) = comparable.differences(a, b)
    assert (d.field, d.value_a, d.value_b) == ("parameters.max_blocks", MISSING, 16)


def test_placement_is_relative_not_by_name(manifest: dict[str, Any]) -> None:
    """The same arrangement on another host and another machine is placed the same; the host facts say the rest."""
    b = copy.deepcopy(manifest)
    (old,) = b["hosts"]
    b["hosts"] = {"lab1": {**b["hosts"][old], "name": "lab1", "machine_id": "e" * 32}}
    for n in b["nodes"]:
        n["host"] = "lab1"
    for c in (b.get("topology", {}).get("clients") or {}).values():
        c["host"] = "lab1"
    assert comparable.where(b) == comparable.where(manifest)
    assert not [f for f in fields(comparable.differences(manifest, b)) if f.startswith("placement.")]
    assert {f"hosts.{old}", "hosts.lab1"} <= set(fields(comparable.differences(manifest, b), REFUSE))


def test_two_studies_are_refused_on_the_study(manifest: dict[str, Any]) -> None:
    b = copy.deepcopy(manifest)
    b["study"] = "logical_replication"
    b["parameters"] = {"systems": ["streaming"]}
    with pytest.raises(NotComparableError) as exc:
        comparable.check_comparable(manifest, b)
    assert fields(exc.value.differences) == ["study"]


# -- runs and tables --------------------------------------------------------------------------------


def _comparison(reproduced: float) -> pd.DataFrame:
    return pd.DataFrame({"claim": ["remote_write is about 1.2x on", "on < remote_write < local"],
                         "published": [1.209, 1.0], "reproduced": [reproduced, 1.0], "ci_low": [1.1, 1.0],
                         "ci_high": [1.4, 1.0], "noise_floor": [0.05, 0.05], "verdict": ["held", "held"],
                         "note": ["", ""]})


def run_copy(root: Path, reproduced: float = 1.285, derived: bool = True) -> Path:
    """A copy of the real run as ``<root>/raw/<study>``, with its derived comparison.csv (as `pglab analyze` writes)."""
    run = root / "raw" / STUDY
    shutil.copytree(_real_run(), run)
    if derived:
        out = root / "derived" / STUDY
        out.mkdir(parents=True)
        _comparison(reproduced).to_csv(out / "comparison.csv", index=False)
        run_id = json.loads((run / "manifest.json").read_text())["run_id"]
        (out / "details.json").write_text(json.dumps({"run_id": run_id}))
    return run


def edit_manifest(run: Path, **tools: str) -> None:
    m = json.loads((run / "manifest.json").read_text())
    m["tools"].update(tools)
    (run / "manifest.json").write_text(json.dumps(m))


def test_side_by_side_tables(tmp_path: Path, manifest: dict[str, Any]) -> None:
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b", reproduced=1.3)
    t = side_by_side.side_by_side(a, b)
    assert set(t) == {"hosts", "placement", "tools", "parameters", "effects"}
    assert list(t["hosts"].columns) == ["fact", "a", "b", "same"] and t["hosts"]["same"].all()
    host = next(iter(manifest["hosts"]))
    assert f"{host}.cpu_model" in set(t["hosts"]["fact"])
    assert set(t["placement"]["what"]) >= {n["name"] for n in manifest["nodes"]} and t["placement"]["same"].all()
    assert set(t["tools"]["tool"]) == set(manifest["tools"])
    e = t["effects"]
    assert list(e.columns) == ["claim", "published", "reproduced_a", "reproduced_b", "ci_low_a", "ci_low_b",
                               "ci_high_a", "ci_high_b", "noise_floor_a", "noise_floor_b", "verdict_a", "verdict_b"]
    assert e.loc[0, "claim"] == "remote_write is about 1.2x on"
    assert (e.loc[0, "reproduced_a"], e.loc[0, "reproduced_b"]) == (1.285, 1.3)
    assert e.attrs["sources"]["a"].endswith(str(Path("a/derived/synchronous_commit/comparison.csv")))


def test_an_archived_run_without_derived_tables_is_analyzed_now(tmp_path: Path, monkeypatch: Any) -> None:
    """No derived comparison.csv for the run: its study's analyze runs into a temporary folder, with the reference."""
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b", derived=False)
    calls = []

    class FakeAnalyze:
        @staticmethod
        def analyze(run_dir: Path, derived_dir: Path, figures_dir: Path, reference_dir: Path) -> None:
            calls.append((Path(run_dir), Path(reference_dir)))
            Path(derived_dir).mkdir(parents=True)
            _comparison(1.5).to_csv(Path(derived_dir) / "comparison.csv", index=False)

    monkeypatch.setattr("pglab.studies.module", lambda study, part: FakeAnalyze)
    e = side_by_side.effects_table(a, b, reference_dir=tmp_path / "ref")
    assert calls == [(b.resolve(), tmp_path / "ref")]
    assert list(e["reproduced_b"]) == [1.5, 1.0] and e.attrs["sources"]["b"].startswith("analyzed now")

    def broken(study: str, part: str) -> Any:
        raise ImportError("the analysis cannot read this run")

    monkeypatch.setattr("pglab.studies.module", broken)
    e = side_by_side.effects_table(a, b)
    assert list(e["reproduced_a"]) == [1.285, 1.0] and e["reproduced_b"].isna().all()
    assert "analysis failed: ImportError" in e.attrs["sources"]["b"]


def pglab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pglab.app.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_cli_refuses_runs_with_another_pgbench(tmp_path: Path) -> None:
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b")
    edit_manifest(b, pgbench="pgbench (PostgreSQL) 17.2")
    res = pglab("compare", a, b)
    assert res.returncode == 2, res.stderr
    assert "tools.pgbench" in res.stderr and "--allow-mixed" in res.stderr and "Traceback" not in res.stderr
    assert "REFUSE tools.pgbench" in res.stdout
    assert "\nhosts:" in res.stdout and "cpu_model" in res.stdout  # the facts side by side, all the same
    assert "effects" not in res.stdout  # nothing mixed was analyzed


def test_cli_allow_mixed_says_what_it_mixed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b", reproduced=1.3)
    edit_manifest(b, pgbench="pgbench (PostgreSQL) 17.2")
    assert main(["compare", str(a), str(b), "--allow-mixed"]) == 0
    out = capsys.readouterr().out
    assert "mixing runs that differ in: tools.pgbench" in out
    assert "\neffects" in out and "1.285" in out and "1.3" in out


def test_cli_identical_runs_print_the_effects(tmp_path: Path) -> None:
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b")
    res = pglab("compare", a, b)
    assert res.returncode == 0, res.stderr
    assert "no differences: the runs are comparable" in res.stdout
    effects = res.stdout[res.stdout.index("\neffects"):]
    assert "remote_write is about 1.2x on" in effects and "reproduced_a" in effects and "verdict_b" in effects


def test_cli_finds_a_run_by_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run_copy(tmp_path / "data")
    run_id = json.loads((a / "manifest.json").read_text())["run_id"]
    archived = tmp_path / "data" / "runs" / STUDY / run_id
    shutil.copytree(a, archived)
    assert main(["compare", run_id, str(a), "--data-root", str(tmp_path / "data")]) == 0
    assert f"a: {archived}" in capsys.readouterr().out
    assert main(["compare", "20000101T000000Z-000000", str(a), "--data-root", str(tmp_path / "data")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_notebook_compare_runs(tmp_path: Path) -> None:
    a, b = run_copy(tmp_path / "a"), run_copy(tmp_path / "b")
    tables = notebook.compare_runs(a, b)
    if tables is None:  # inside an IPython kernel they are displayed
        return
    assert {"differences", "hosts", "placement", "tools", "effects"} <= set(tables) and tables["differences"].empty
    edit_manifest(b, pgbench="pgbench (PostgreSQL) 17.2")
    with pytest.raises(NotComparableError, match="tools.pgbench"):
        notebook.compare_runs(a, b)
    mixed = notebook.compare_runs(a, b, allow_mixed=True)
    assert mixed is not None and list(mixed["differences"]["field"]) == ["tools.pgbench"]


def test_runs_that_lack_different_points_are_refused(manifest: dict[str, Any]) -> None:
    """Two runs missing different points average different blocks: refused unless --allow-mixed."""
    a, b = copy.deepcopy(manifest), copy.deepcopy(manifest)
    a.pop("failed_points", None)  # a run recorded before the list: none failed
    assert comparable.failed_points(a) == [] and comparable.failed_points(b) == []
    b["failed_points"] = ["write-b02-c004-off"]
    assert fields(comparable.differences(a, b), REFUSE) == ["failed_points"]
    with pytest.raises(NotComparableError, match="failed_points"):
        comparable.check_comparable(a, b)
    assert fields(comparable.check_comparable(a, b, allow_mixed=True), REFUSE) == ["failed_points"]
    a["failed_points"] = ["write-b02-c004-off"]
    assert comparable.differences(a, b) == []  # the same point missing in both: comparable
