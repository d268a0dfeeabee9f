"""Reports (pglab.views.report): the executed notebook made repeatable, the verdicts first, every image
embedded, and the browser check that would see a request to another host. The shipped reports are
opened in Chromium by test_dvc.py (on its fresh clone)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from browser import open_page
from conftest import REPO, pulled_analyses
from pglab.runs import record
from pglab.studies import STUDIES
from pglab.views import report, report_notebook, takeaway, verdict_table

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
    assert page.count("data:image/png;base64,") == 1 and "Figure 1. Throughput by <code>level</code>" in page
    assert 'alt="Throughput by level"' in page and "<h3>Throughput by <code>level</code></h3>" in page
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
    assert verdict_table.interval_words(method, blocks) == words


def test_the_headline_metrics_are_the_same_ten_keys_for_every_study() -> None:
    """`dvc metrics show` lists one row per study: the same short keys keep it within 120 columns."""
    from pglab.analysis.result import headline

    h = headline(COMPARISON, MANIFEST)
    assert h == {"run": "abcdef", "held": 0, "not_held": 0, "open": 1, "n_a": 1, "emu": 0, "floor": 0.18,
                 "ratio": 1.29, "low": 1.12, "high": 1.49}
    under = headline(COMPARISON.assign(emulated=["emulated flush hdd_7200 (8.33 ms) on primary", ""]), MANIFEST)
    assert (under["emu"], under["open"] + under["n_a"]) == (1, 1)  # counted apart, not twice


# --- what a reader sees first: the takeaway, code as code, no blank chart, the verdict a hardware gap explains ---

#: an emulation of the article's slow disk on the primary only, its standby on this machine's fast disk
EMULATED = {**MANIFEST, "nodes": [{"name": "primary"}, {"name": "standby1"}], "emulation": {"disks": {"primary": {
    "nodes": ["primary"], "levels": {"own disk": {"latency_ms": 0.0, "measured_ops_s": 10213.6},
                                     "hdd_7200 (8.33 ms)": {"latency_ms": 8.333, "named_ops_s": 120.0}}}}}}
UNDER = "emulated flush hdd_7200 (8.33 ms) on primary, probe 119/s (CPU +94 us a flush)"
SIX = pd.DataFrame([
    {"claim": "RW is about 1.7x", "published": 1.7019, "reproduced": 1.1854, "ci_low": 1.17, "ci_high": 1.2,
     "verdict": "did not hold", "depends_on": "commit cost", "here": "4.5 ms", "article": "4.6 ms", "emulated": UNDER},
    {"claim": "RO is above RW", "published": 4.5023, "reproduced": 3.6978, "ci_low": 3.34, "ci_high": 4.1,
     "verdict": "held", "depends_on": "", "here": "", "article": "", "emulated": ""},
    {"claim": "RO is about 4.5x RW", "published": 4.5023, "reproduced": 3.6978, "ci_low": 3.3366, "ci_high": 4.0982,
     "verdict": "not resolvable here", "depends_on": "", "here": "", "article": "", "emulated": ""},
    *[{"claim": f"reads scale {n}", "published": 2.5, "reproduced": 0.8554 if n == 3 else float("nan"),
       "ci_low": float("nan"), "ci_high": float("nan"), "verdict": "not measurable here",
       "depends_on": "separate machines", "here": f"{n} nodes on 1 machine", "article": "3 VMs", "emulated": "",
       "note": "answered by each standby on a machine of its own (`standby_hosts`)"} for n in (3, 5, 7)],
])


def _said(paragraph: str) -> dict[str, int]:
    """The verdicts a takeaway counts: '2 held', '1 did not hold', 'None of the article's 4 claims could be judged'."""
    text = html.unescape(re.sub(r"<[^>]+>", "", paragraph))
    said = {v: sum(int(n) for n in re.findall(rf"(\d+) {w}\b", text)) for v, w in (
        ("held", "held"), ("did not hold", "did not hold"), ("not resolvable here", "not settled yet"),
        ("not measurable here", "could not be judged"))}
    said["not measurable here"] += sum(int(n) for n in re.findall(r"None of the article's (\d+) claims", text))
    return said


def test_the_takeaway_counts_the_verdicts_in_plain_words_with_emulations_apart() -> None:
    words = takeaway.paragraph(SIX, EMULATED)
    assert words == takeaway.paragraph(SIX, EMULATED)  # the same input, the same bytes
    text = html.unescape(re.sub(r"<[^>]+>", "", words))
    assert text.startswith("In short (one run, 6 claims): On the machine it ran on, as it is, 1 held: ")
    assert _said(words) == {"held": 1, "did not hold": 1, "not resolvable here": 1, "not measurable here": 3}
    assert "3.70 here; the article 4.50" in text and "1.19 here, not the article's 1.70" in text  # rounded
    assert "its interval, 3.34 to 4.10, is neither wholly inside" in text
    # under an emulation: said as such, after the machine as it is, with what the emulation left unlike the article
    assert text.index("as it is") < text.index("With the article's slower disk imitated (every disk flush made to "
                                               "take 8.33 ms, as on a 7,200 rpm hard disk), counted apart, 1 did "
                                               "not hold")
    assert "node standby1 kept the machine's own disk (about 10,214 flushes a second, 85 times the article's 120)" \
        in text and "a difference of hardware, not a refutation" in text
    assert ("3 could not be judged: they depend on separate machines, where this run differs from the article "
            "(the article: 3 VMs). Measured all the same, not judged: \u201creads scale 3\u201d (0.86 here; the "
            "article 2.50); nothing could be measured for the other 2.") in text
    assert "`" not in text and "standby_hosts" not in text and "ci_low" not in text  # no jargon, no setting names
    # when nothing got a number: what the run measured instead, from its summary (cloud_providers)
    none = SIX.iloc[3:].assign(reproduced=float("nan"))
    summary = pd.DataFrame([
        {"title": "pgbench -i time", "target": "stock", "ratio_to_baseline": 1.0, "ratio_low": None,
         "ratio_high": None, "n": 6},
        {"title": "pgbench -i time", "target": "tuned", "ratio_to_baseline": 1.40711, "ratio_low": 1.13933,
         "ratio_high": 1.5809, "n": 6},
        {"title": "pgbench tps", "target": "tuned", "ratio_to_baseline": 1.02, "ratio_low": 0.9, "ratio_high": 1.31,
         "n": 6}])
    text = html.unescape(re.sub(r"<[^>]+>", "", takeaway.paragraph(none, MANIFEST, summary)))
    assert "None of the article's 3 claims could be judged" in text and "nothing could be measured for any" in text
    assert ("What the run measured instead: tuned against stock (the median ratio over 6 blocks, with its 95% "
            "interval): pgbench -i time 1.41x (1.14 to 1.58), pgbench tps 1.02x (0.90 to 1.31; no clear "
            "difference).") in text


def test_a_verdict_a_hardware_gap_explains_is_not_coloured_as_a_refutation() -> None:
    rows = verdict_table.verdict_rows(SIX, "one machine", EMULATED)
    assert rows[0]["_class"] == "hw" and "<b>hardware differs</b>" in rows[0]["depends on"]
    assert [r["_class"] for r in rows[1:]] == [""] * 5
    assert "<code>standby_hosts</code>" in rows[3]["evidence"]  # a setting the note names, as code
    table = report._table(rows, report.VERDICT_COLUMNS)
    assert table.count('<tr class="hw">') == 1 and table.count('<tr class="held">') == 1
    assert 'class="hw"' in report.legend() and "this machine" not in report.legend()
    assert 'class="hw"' not in report.legend(emulated=False)  # a page with no such verdict has no key to it
    # every node's disk emulated (fdw_overhead's two instances on one disk): a plain refutation, red
    both = {**EMULATED, "emulation": {"disks": {"local": {**EMULATED["emulation"]["disks"]["primary"],
                                                          "nodes": ["primary", "standby1"]}}}}
    assert verdict_table.verdict_rows(SIX, "one machine", both)[0]["_class"] == ""
    assert takeaway.hardware_gap(SIX.iloc[0].to_dict(), MANIFEST) == ""  # no emulation recorded


def test_user_text_with_backticks_stays_text() -> None:
    """Only a setting-like code span of analysis text becomes <code>: markup or a stray backtick does not."""
    assert report_notebook.code_spans("set `runs: 5` or `standby_hosts`") == \
        "set <code>runs: 5</code> or <code>standby_hosts</code>"
    hostile = html.escape("a`b|c *em* (x) `<img src=x>` `a*b`")
    assert report_notebook.code_spans(hostile) == hostile


class _Prose(HTMLParser):
    """A page's text as a reader reads it, without preformatted blocks (the parameters, printed output)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        self.pre -= tag == "pre"

    def handle_data(self, data: str) -> None:
        if not self.pre:
            self.text.append(data)


def shipped_page(study: str) -> str:
    """The report of the shipped run as this code writes it (from the DVC outputs, read only: nothing written)."""
    pulled_analyses(study)
    derived = REPO / "data" / "derived" / study
    return report.study_html(study, report_notebook.read(REPO / "reports" / f"{study}.ipynb"),
                             pd.read_csv(derived / "comparison.csv"), record.read(REPO / "data" / "raw" / study, study),
                             report._fsync(derived), summary=pd.read_csv(derived / "summary.csv"))


@pytest.mark.parametrize("study", STUDIES)
def test_a_shipped_report_opens_on_a_takeaway_and_shows_code_as_code(study: str) -> None:
    page = shipped_page(study)
    prose = _Prose()
    prose.feed(page)
    text = "".join(prose.text)
    assert "`" not in text, re.findall(r".{40}`.{40}", text)
    start = page.index('<p class="takeaway"')
    assert page.index("The question:") < start < page.index('id="verdicts"')
    comparison = pd.read_csv(REPO / "data" / "derived" / study / "comparison.csv")
    said = _said(page[start:page.index("</p>", start)])
    assert said == {v: int((comparison.verdict == v).sum()) for v in said}, said
    # every figure shows an image; a comparison chart with nothing drawn is folded under a caption saying so
    figures = re.findall(r"<figure>(.*?)</figure>", page, re.S)
    assert figures and all(re.search(r'<img alt="[^"]+" src="data:image/png;base64,[A-Za-z0-9+/]', f) for f in figures)
    folded = [f for f in figures if f.startswith("<details>")]
    assert len(folded) == (1 if comparison.reproduced.isna().all() else 0)
    assert all("nothing to draw" in f for f in folded)


def test_the_japanese_article_is_named_in_english_too() -> None:
    english = "PostgreSQL streaming replication, part 3"
    assert english in shipped_page("synchronous_commit")
    first = json.loads((REPO / "notebooks" / "synchronous_commit.ipynb").read_text())["cells"][0]
    intro = report_notebook.markdown("".join(first["source"]))
    assert "PostgreSQLストリーミングレプリケーション 第3回" in intro and english in intro
    assert "IPAGothic" in report._STYLE  # a CJK font where one is installed


@pytest.mark.parametrize("study", STUDIES)
def test_the_notebooks_prose_reads_right_in_the_report_too(study: str) -> None:
    """The notebook's markdown is the report's text: nothing that only makes sense inside Jupyter, and no
    parameter named where words would do."""
    nb = json.loads((REPO / "notebooks" / f"{study}.ipynb").read_text())
    prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for phrase in ("this notebook", "top of the notebook", "cell below", "cell above", "parameters cell",
                   "first output", "verdicts below", "rule (below)", "`here_verdict`", "`warmup_s`",
                   "`catchup_poll_s`", "the test runner (nbval, `make test`) and every DVC analysis assert"):
        assert phrase.lower() not in prose.lower(), f"{study}: {phrase!r}"
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_the_index_says_this_machine_only_of_itself() -> None:
    pulled_analyses(*STUDIES)
    page = report.index_html(REPO)
    prose = _Prose()
    prose.feed(page)
    text = "".join(prose.text)
    assert "on the machine it ran on (the machine column)" in text and "this machine" not in text
    # at a glance, before the table: per study one sentence of what came of its claims, and from how many runs
    glance = page.split("<h2>At a glance</h2>", 1)[1].split("</ul>", 1)[0]
    assert glance.count("<li>") == len(STUDIES) and page.index("At a glance") < page.index("<table")
    for study in STUDIES:
        comparison = pd.read_csv(REPO / "data" / "derived" / study / "comparison.csv")
        item = glance.split(f"<b>{study}</b>", 1)[1].split("</li>", 1)[0]
        assert f"of the article's {len(comparison)} claims" in item or f"{len(comparison)} claims" in item, item
        assert re.search(r"\(\d+ runs?, ", item) and item.rstrip().endswith(".")
        # what the article claimed comes first, in its claims' words (a DBA reading the index alone could not say)
        claimed = item.split("<i>The article claimed:</i>", 1)[1].split("<i>pglab found:</i>", 1)[0]
        assert all(html.escape(c) in claimed for c in comparison["claim"]), claimed
        if comparison["depends_on"].astype(str).str.contains("fidelity").all():  # how far the emulation was off
            assert re.search(r"off by \d+-\d+% \(the report's fidelity table\)", item), item
