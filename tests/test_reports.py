"""Reports (pglab.app.report): the executed notebook made repeatable, the verdicts first, every image
embedded, and the browser check that would see a request to another host. The shipped reports are
opened in Chromium by test_dvc.py (on its fresh clone)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from browser import open_page
from pglab.app import report, report_notebook

MANIFEST: dict[str, Any] = {
    "run_id": "20260101T000000Z-abcdef", "profile": "quick", "status": "complete", "start": "2026-01-01T00:00:00",
    "git_revision": "0123456789abcdef", "tools": {"postgres": "postgres (PostgreSQL) 15.18"},
    "hosts": {"local": {"cores": 2, "cpu_model": "CPU", "mem_total_kb": 8 << 20, "os": "Debian", "machine_id": "m1",
                        "boot_id": "b1"}},
}
COMPARISON = pd.DataFrame([
    {"claim": "a is about 1.5x b", "published": 1.5, "reproduced": 1.29, "ci_low": 1.12, "ci_high": 1.49,
     "noise_floor": 0.18, "blocks": 6, "verdict": "not resolvable here",
     "rule": "held if the 95% interval lies inside (1.25, 1.8) (size); did not hold if it lies outside",
     "bound_low": 1.25, "bound_high": 1.8, "ci_method": "order-statistic", "coverage": 0.9688, "aa_median": 0.98,
     "aa_low": 0.9, "aa_high": 1.05, "aa_blocks": 6, "depends_on": "disk flush rate (commit cost)",
     "here": "4,167 fdatasync/s (pg_test_fsync)", "article": "a SATA hard disk", "note": "top waits: CPU 40%"},
    {"claim": "c <b>costs</b> nothing", "published": 1.0, "reproduced": 0.8, "ci_low": 0.5, "ci_high": 0.9,
     "noise_floor": 0.96, "blocks": 3, "verdict": "not measurable here", "rule": "", "bound_low": 0.909,
     "bound_high": 1.1, "ci_method": "range", "coverage": 0.75, "aa_median": float("nan"), "aa_low": float("nan"),
     "aa_high": float("nan"), "aa_blocks": 0, "depends_on": "", "here": "", "article": "",
     "note": "needs separate machines"},
])


def png() -> str:
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def executed(when: str, cell_id: str) -> dict[str, Any]:
    """A notebook as papermill leaves it: times of its execution everywhere, a new id for its injected cell."""
    timing = {"start_time": when, "end_time": when, "duration": 0.5, "status": "completed", "exception": False}
    exec_meta = {"iopub.execute_input": when, "shell.execute_reply": when}
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"papermill": {**timing, "parameters": {"profile": "x"}}},
            "cells": [
                {"cell_type": "markdown", "id": "t", "metadata": {}, "source": "# study: what it measures\n\nHow."},
                {"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"], "papermill": timing},
                 "execution_count": 1, "outputs": [], "source": "profile = None"},
                {"cell_type": "code", "id": cell_id, "metadata": {"tags": ["injected-parameters"], "papermill": timing},
                 "execution_count": 2, "outputs": [], "source": "profile = 'quick'"},
                {"cell_type": "markdown", "id": "h", "metadata": {},
                 "source": "## Throughput by `level`\nWhat it shows."},
                {"cell_type": "code", "id": "c", "metadata": {"execution": exec_meta, "papermill": timing},
                 "execution_count": 3, "source": "show()", "outputs": [
                     {"output_type": "display_data", "metadata": {},
                      "data": {"image/png": png(), "text/plain": "<Image>"}},
                     {"output_type": "execute_result", "execution_count": 3, "metadata": {},
                      "data": {"text/html": "<table><tr><td>42</td></tr></table>", "text/plain": "42"}},
                     {"output_type": "stream", "name": "stdout", "text": "3 points <ok>\n"}]},
            ]}


def test_two_executions_normalise_to_the_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    a.write_text(json.dumps(executed("2026-11-26T08:00:00Z", "f2320b42")))
    b.write_text(json.dumps(executed("2026-11-26T09:30:00Z", "570644e3")))
    assert a.read_bytes() != b.read_bytes()
    assert report_notebook.normalize(a) and report_notebook.normalize(b)
    assert a.read_bytes() == b.read_bytes()
    assert not report_notebook.normalize(a)  # once is enough
    # a cell's prints cut into two stream messages (a busy kernel) or sent as one: the same notebook
    split = executed("2026-11-26T10:00:00Z", "0a0b0c0d")
    outs = split["cells"][4]["outputs"]
    outs[2:3] = [{"output_type": "stream", "name": "stdout", "text": "3 points "},
                 {"output_type": "stream", "name": "stdout", "text": ["<ok>", "\n"]}]
    split["cells"][4]["outputs"] = outs
    whole = executed("2026-11-26T11:00:00Z", "0e0f")  # the same text as one stream, spelt as its lines
    whole["cells"][4]["outputs"][2]["text"] = ["3 points <ok>\n"]
    d = tmp_path / "d.ipynb"
    d.write_text(json.dumps(whole))
    report_notebook.normalize(d)
    assert d.read_bytes() == a.read_bytes()
    c = tmp_path / "c.ipynb"
    c.write_text(json.dumps(split))
    report_notebook.normalize(c)
    assert c.read_bytes() == a.read_bytes()
    nb = json.loads(a.read_text())
    assert nb["metadata"]["papermill"] == {"status": "completed", "exception": False, "parameters": {"profile": "x"}}
    assert nb["cells"][2]["id"] == report_notebook.INJECTED_ID


def test_a_report_opens_on_its_question_and_verdicts_and_ends_on_its_parameters(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(executed("2026-11-26T08:00:00Z", "x")))
    nb = report_notebook.read(path)
    assert nb.title == "study: what it measures" and [s.heading for s in nb.sections] == ["Throughput by `level`"]
    assert "profile = 'quick'" in nb.parameters and "profile = None" in nb.parameters
    page = report.study_html("synchronous_commit", nb, COMPARISON, MANIFEST, 4167.0)
    assert page == report.study_html("synchronous_commit", nb, COMPARISON, MANIFEST, 4167.0)  # no clock in it
    order = [page.index(k) for k in ("The question:", 'id="verdicts"', 'id="where"', 'id="figures"', 'id="details"',
                                     "Parameters (papermill)")]
    assert order == sorted(order)
    assert "c &lt;b&gt;costs&lt;/b&gt; nothing" in page and "3 points &lt;ok&gt;" in page  # escaped
    assert "95% interval of the median over 6 blocks" in page and "range of 3 blocks (covers the median 75%" in page
    assert "inside (1.25, 1.8) (size)" in page and "A/A (baseline / baseline) 0.98 [0.9, 1.05] over 6 blocks" in page
    assert "<b>disk flush rate (commit cost)</b>: here 4,167 fdatasync/s" in page  # beside the verdict
    assert "ci_method" not in page and "order-statistic" not in page
    assert "one machine of 2 cores" in page  # a claim without its own property: the machine's facts
    assert page.count("data:image/png;base64,") == 1 and "Figure 1. Throughput by level" in page
    assert "http://" not in page and "https://" not in page
    assert "form-action 'none'; base-uri 'none'" in page  # nothing posts, nothing re-points the links


def test_the_browser_check_sees_a_request_to_another_host(tmp_path: Path) -> None:
    """The check of the shipped reports could fail: a page that loads an image from a CDN is caught."""
    page = tmp_path / "leaky.html"
    page.write_text('<html><body><h1>x</h1><img src="https://cdn.example.org/x.png"></body></html>')
    seen = open_page(page, tmp_path, height=600)
    assert "https://cdn.example.org/x.png" in seen.requests and seen.screenshot.exists()


def test_every_study_has_its_question() -> None:
    from pglab.studies import STUDIES

    assert set(report.QUESTIONS) == set(STUDIES) and all(q.endswith("?") for q in report.QUESTIONS.values())


@pytest.mark.parametrize(("method", "blocks", "words"), [
    ("order-statistic", 8, "95% interval of the median over 8 blocks"),
    ("range", 2, "range of 2 blocks (covers the median 50% of the time)"),
    ("single", 1, "1 block, no interval"), ("none", 0, "not measured")])
def test_intervals_are_said_in_words(method: str, blocks: int, words: str) -> None:
    """One wording for the report, the figures and the notebooks (``stats.interval_words``)."""
    assert report.interval_words(method, blocks) == words


def test_the_headline_metrics_are_the_same_ten_keys_for_every_study() -> None:
    """`dvc metrics show` lists one row per study: the same short keys keep it within 120 columns."""
    from pglab.analysis.result import headline

    h = headline(COMPARISON, MANIFEST)
    assert h == {"run": "abcdef", "held": 0, "not_held": 0, "open": 1, "n_a": 1, "emu": 0, "floor": 0.18,
                 "ratio": 1.29, "low": 1.12, "high": 1.49}
    under = headline(COMPARISON.assign(emulated=["emulated flush hdd_7200 (8.33 ms) on primary", ""]), MANIFEST)
    assert (under["emu"], under["open"] + under["n_a"]) == (1, 1)  # counted apart, not twice
