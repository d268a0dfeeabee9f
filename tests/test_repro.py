"""Your run beside the reference: ``pglab repro`` / ``pglab report`` measure and report into yours/, never over the
shipped run, and a report sets each claim beside the reference's with what differs between the machines."""

from __future__ import annotations

import copy
import hashlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import pulled_analyses
from pglab.app import repro
from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.runs import progress
from pglab.runs.record import read
from pglab.views import beside
from pglab.views.frames import SHOWN_ROWS, frame_html

REPO = Path(__file__).resolve().parents[1]
STUDY = "cloud_providers"  # its smoke profile, pgbench only: 3 points of 2 s


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def scratch_checkout(tmp_path: Path) -> Path:
    """A checkout to run in: the code, notebooks and params of this one, the shipped run and its analysis (the
    reference) copied, so the test can watch them stay as they were."""
    pulled_analyses(STUDY)
    root = tmp_path / "checkout"
    root.mkdir()
    for name in ("pyproject.toml", "notebooks", "lib"):
        (root / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "params", root / "params")
    params = root / "params" / f"{STUDY}.yaml"  # smoke without sysbench, 2 s points: what is tested is the flow
    data = yaml.safe_load(params.read_text())
    data["profiles"]["smoke"].update(workloads=["pgbench"], seconds=2)
    params.write_text(yaml.safe_dump(data))
    (root / "data").mkdir()
    for name in ("reference", "ledger"):
        (root / "data" / name).symlink_to(REPO / "data" / name)
    for part in ("raw", "derived"):
        shutil.copytree(REPO / "data" / part / STUDY, root / "data" / part / STUDY)
    return root


def test_repro_measures_into_yours_and_reports_beside_the_reference(tmp_path: Path) -> None:
    root = scratch_checkout(tmp_path)
    shipped = {part: _digest(root / "data" / part / STUDY) for part in ("raw", "derived")}
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "repro", STUDY, "--profile", "smoke"], cwd=root,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PGLAB_PROGRESS": "plain"})
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    # it said what it would cost and where it was, and ended on the verdicts beside the reference's
    assert "pglab repro: 1 study on this machine into yours/" in out and "about" in out, out
    assert f"== study 1 of 1: {STUDY} (smoke)" in out, out
    assert "Your runs (yours/reports/index.html), beside the shipped reference:" in out, out
    assert f"verdicts the same\n    report: yours/reports/{STUDY}.html" in out, out
    assert "Traceback" not in out and "WARNING" not in out, out  # nothing alarming on success
    # the shipped run and its analysis are as they were; yours is beside them, and archived
    assert {part: _digest(root / "data" / part / STUDY) for part in ("raw", "derived")} == shipped
    mine = read(root / "yours" / "data" / "raw" / STUDY)
    assert mine["profile"] == "smoke" and (root / "data" / "runs" / STUDY / mine["run_id"]).is_dir()
    page = (root / "yours" / "reports" / f"{STUDY}.html").read_text()
    reference = read(root / "data" / "raw" / STUDY)
    assert 'id="beside"' in page and mine["run_id"] in page and reference["run_id"] in page
    index = (root / "yours" / "reports" / "index.html").read_text()
    assert "<th>reference</th>" in index and f'href="{STUDY}.html"' in index
    assert (root / "yours" / "data" / "metrics" / f"{STUDY}.json").exists()
    # the by-hand path (`pglab collect`, then `pglab report`) keeps the analysis and writes the page the index links
    (root / "yours" / "reports" / "history.html").unlink()
    (root / "data" / "ledger.sqlite").unlink()
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "report", STUDY], cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert 'href="history.html"' in (root / "yours" / "reports" / "index.html").read_text()
    history = (root / "yours" / "reports" / "history.html").read_text()
    marked = bool((mine.get("machine") or {}).get("marked"))  # a busy machine (the suite's load): left out, and said
    assert ("run(s) marked for a busy or moving machine" in history) if marked else \
        mine["run_id"].rsplit("-", 1)[-1] in history
    with Ledger(str(root / "data" / "ledger.sqlite"), readonly=True) as ledger:
        runs = book.runs(ledger)
        assert runs.loc[runs.run_id == mine["run_id"], "analysed"].tolist() == [True], runs


def _side(verdicts: list[str], cpu: str = "Xeon") -> beside.Side:
    table = pd.DataFrame({"claim": ["a", "b"], "published": [1.7, 2.0], "reproduced": [1.19, 2.1],
                          "ci_low": [1.17, 1.9], "ci_high": [1.2, 2.3], "verdict": verdicts})
    manifest = {"study": STUDY, "run_id": f"run-{cpu}", "tools": {"postgres": "15.18"}, "parameters": {},
                "hosts": {"local": {"cpu_model": cpu, "cores": 2}}}
    return beside.Side(table, manifest)


def test_a_report_sets_each_claim_beside_the_reference_and_names_what_differs() -> None:
    ref, same = _side(["held", "did not hold"]), _side(["held", "held"])
    rows = beside.claims_rows(ref.comparison, same.comparison)
    assert [r["agree"] for r in rows] == [True, False]
    page = beside.section_html(STUDY, ref, same)
    assert "1 of 2 claims have the same verdict" in page and "<b>differs</b>" in page
    assert "1.19 [1.17, 1.2]" in page and "Nothing else a verdict rests on differs" in page
    other = copy.deepcopy(same.manifest)
    other["hosts"]["local"]["cpu_model"] = "EPYC"
    probe = {"flush_ops_s": 10214.0, "cpu_loop_ms": 40.0, "cores": 2, "boot_id": "aaaaaaaa-1", "load1": 0.2,
             "others": 0.01}
    ref.manifest["machine"] = {"before": {"local": probe}, "marked": [],
                               "statement_us": {"before": {"primary": 61.4, "standby": 60.0}}}
    other["machine"] = {"before": {"local": {**probe, "flush_ops_s": 1154.0, "boot_id": "bbbbbbbb-2"}},
                        "marked": ["host local: busy"], "statement_us": {"before": {"primary": 212.0}}}
    page = beside.section_html(STUDY, ref, beside.Side(same.comparison, other))
    assert "What else differs between the two runs" in page and "EPYC" in page and "Xeon" in page
    # what the verdicts rest on comes first: the flush rate and the boot, before the parameters
    rests = page.index("The machine as each run found it")
    assert rests < page.index("What else differs") and "10,214" in page and "1,154" in page
    assert '<tr class="warn"><td>boot</td><td class=num>aaaaaaaa</td><td class=num>bbbbbbbb</td>' in page
    assert "host local: busy" in page and "<td>PostgreSQL build</td><td>15.18</td>" in page
    assert "SELECT 1 before the first point" in page and "<td class=num>61</td><td class=num>212</td>" in page
    assert "dvc pull" in beside.section_html(STUDY, None, same)  # no reference checked out: how to get it


def test_notebook_tables_read_as_tables() -> None:
    df = pd.DataFrame({"group": ["a", "a", "b"], "level": ["x", "y", "x"], "v": [1.23456, None, 3.0]})
    flat = frame_html(df.pivot(index="group", columns="level", values="v"))
    assert "<th></th>" not in flat and "NaN" not in flat and ">–<" in flat and "1.235" in flat
    assert "<th>group</th>" in flat and "level" not in flat  # the index as a column, no header of the columns' name
    long = frame_html(pd.DataFrame({"n": range(SHOWN_ROWS + 5)}))
    assert "and 5 more rows" in long and "..." not in long


def test_the_estimate_comes_from_the_shipped_run() -> None:
    pulled_analyses(STUDY)
    from pglab.app.collect import load_params
    from pglab.views.summary import costs, published

    name, p, _ = load_params(STUDY, None, None)
    e = repro.estimate(STUDY, name, p, REPO)
    wall = costs(*published(REPO / "data" / "raw" / STUDY))[0]
    assert e.seconds == pytest.approx(wall + repro.ANALYSIS_S) and e.kept_bytes > 0
    name, p, _ = load_params(STUDY, None, "paper")
    bigger = repro.estimate(STUDY, name, p, REPO)
    assert bigger.seconds > e.seconds and "x" in bigger.basis


def test_a_busy_machine_is_said() -> None:
    quiet = [100, 0, 50, 850, 0, 0, 0, 0]
    assert repro.busy_warning(quiet, [2 * x for x in quiet], 0.05) == ""
    stolen = [200, 0, 100, 1700, 0, 0, 0, 200]
    assert "steal" in repro.busy_warning(quiet, stolen, 0.05)
    assert "60% of the CPU was in use" in repro.busy_warning(quiet, [2 * x for x in quiet], 0.6)
    assert 0.0 <= repro.busy_share(0.05) <= 1.0


def test_a_failing_notebook_is_one_line(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "pglab.app.notebook_run", STUDY, "--root", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and f"the {STUDY} notebook stopped in cell" in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "-----" not in res.stderr


def test_the_progress_count_comes_before_the_item() -> None:
    out = io.StringIO()
    bar = progress.bar(10, STUDY, stream=out, mode="tty")
    bar.set_postfix_str("b01-pgbench-stock-aa-" + "x" * 200)
    bar.update(3)
    bar.close()
    last = out.getvalue().split("\r")[-1]
    assert last.index("3/10 points") < last.index("b01-pgbench")
