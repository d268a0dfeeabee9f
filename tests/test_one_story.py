"""One story in every view: a shipped claim has the same verdict wherever a reader meets it.

Why: the same campaign once read "2 held, 2 did not hold, 1 open" in its report and "5 x not resolvable here" in
the ledger and history.html, which showed each run's own verdict over its few blocks. A campaign's verdicts are now
stored in the ledger as the campaign's (``pglab.ledger.book.campaigns``), and every view reads them there or from
the analysis that wrote them. This test walks each view of each shipped study (the report, the index, the docs
page's generated block, ``dvc metrics``, the reference ledger, ``pglab ledger show`` and ``compare``, and
history.html) and compares each claim's verdict with ``data/derived/<study>/comparison.csv``.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter

import pandas as pd
import pytest
from conftest import REPO, pulled_analyses, pulled_pages
from pglab.app import cli
from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.runs import campaign
from pglab.studies import STUDIES

REFERENCE = REPO / "data" / "ledger" / "reference.sqlite.gz"


def _plain(text: str) -> str:
    """Markup and markdown escapes off: the words a reader sees."""
    return re.sub(r"\\(.)", r"\1", html.unescape(re.sub(r"<[^>]+>", "", text))).strip()


def shipped(study: str) -> tuple[str, dict[str, str]]:
    pulled_analyses(study)
    pulled_pages()
    comparison = pd.read_csv(REPO / "data" / "derived" / study / "comparison.csv")
    run_id = json.loads((REPO / "data" / "raw" / study / "manifest.json").read_text())["run_id"]
    return run_id, dict(zip(comparison.claim.astype(str), comparison.verdict.astype(str), strict=True))


@pytest.mark.parametrize("study", STUDIES)
def test_the_report_index_docs_and_metrics_tell_the_analysis_verdicts(study: str) -> None:
    _, want = shipped(study)
    page = (REPO / "reports" / f"{study}.html").read_text(encoding="utf-8")
    table = page[page.index('id="verdicts"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<td title="claim"[^>]*>(.*?)</td>.*?<td title="verdict"[^>]*>(.*?)</td>', table, re.S)
    assert {_plain(c): _plain(v) for c, v in rows} == want, "the report"

    index = (REPO / "reports" / "index.html").read_text(encoding="utf-8")
    row = next(r for r in re.findall(r"<tr[^>]*>.*?</tr>", index, re.S) if f'href="{study}.html"' in r)
    for verdict, n in Counter(want.values()).items():
        assert f"{n} {verdict}" in _plain(row), ("the index", verdict, n)

    docs = (REPO / "docs" / f"{study}.md").read_text(encoding="utf-8")
    block = docs[docs.index("<!-- pglab:verdicts:begin"):docs.index("<!-- pglab:verdicts:end")]
    lines = re.findall(r"^- \*\*(.+?)\*\*: \*(.+?)\*\.", block, re.M)
    assert {_plain(c): _plain(v) for c, v in lines} == want, "the docs page"

    metrics = json.loads((REPO / "data" / "metrics" / f"{study}.json").read_text())
    assert sum(metrics[k] for k in ("held", "not_held", "open", "n_a", "emu")) == len(want), "dvc metrics"
    assert metrics["held"] <= sum(v == "held" for v in want.values()), "dvc metrics"


@pytest.mark.parametrize("study", STUDIES)
def test_the_ledger_and_its_views_tell_the_same_verdicts(study: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_id, want = shipped(study)
    is_campaign = campaign.read(REPO / "data" / "raw" / study) is not None
    with Ledger(str(REFERENCE), readonly=True) as ledger:
        if is_campaign:
            k = book.campaigns(ledger, study)
            k = k[k.campaign_id == run_id]
            assert dict(zip(k.claim, k.verdict, strict=True)) == want, "the reference ledger's campaign"
        else:
            c = book.claims(ledger, study)
            c = c[c.run_id == run_id]
            assert dict(zip(c.claim, c.verdict, strict=True)) == want, "the reference ledger's run"

    assert cli.main(["ledger", "show", run_id, "--ledger", str(REFERENCE)]) == 0
    shown = capsys.readouterr().out
    for claim, verdict in want.items():
        told = f"  {claim}: {verdict}" if is_campaign else None
        assert (told in shown) if told else re.search(re.escape(claim) + r".*" + re.escape(verdict), shown), \
            ("pglab ledger show", claim)

    if is_campaign:  # compare puts the campaign's stored verdicts beside the runs it groups
        assert cli.main(["ledger", "compare", study, "--ledger", str(REFERENCE)]) == 0
        compared = capsys.readouterr().out
        for claim, verdict in want.items():
            assert f"  {claim}: {verdict}" in compared, ("pglab ledger compare", claim)

    page = (REPO / "reports" / "history.html").read_text(encoding="utf-8")
    start = page.index(f">{study}</h2>")
    section = page[start:page.find("<h2", start + 1)]
    latest = {_plain(c): _plain(v) for c, v in re.findall(
        r"<tr><td class=\"wrap\">(.*?)</td><td class=\"wrap [a-z]*\">([^<]*)<br><small>", section, re.S)}
    assert {c: latest.get(c) for c in want} == want, "history.html's latest verdict"


def test_every_shipped_page_fits_a_phone(tmp_path) -> None:
    """Each report, the index and history.html at 390 px: wide tables scroll inside their own box, the page itself
    never sideways (it once laid out 478 px wide for one table of parameters)."""
    from browser import layout_width

    for study in STUDIES:
        shipped(study)
    pages = [REPO / "reports" / f"{s}.html" for s in STUDIES] + [REPO / "reports" / "index.html",
                                                                 REPO / "reports" / "history.html"]
    wide = {p.name: w for p in pages if (w := layout_width(p, 390)) > 390}
    assert not wide, f"pages wider than a 390 px phone: {wide}"
    unwrapped = tmp_path / "wide.html"  # a table outside a scrolling box: the check sees it
    unwrapped.write_text("<html><head></head><body><table><tr><td style=\"white-space:nowrap\">" + "word " * 80
                         + "</td></tr></table></body></html>")
    assert layout_width(unwrapped, 390) > 390


@pytest.mark.parametrize("study", ["synchronous_commit", "fdw_overhead"])
def test_ledger_compare_of_a_major_tells_the_majors_tables_verdicts(study: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The claims x majors table (``data/majors/<study>.csv``, each major's campaign analysed) and ``pglab ledger
    compare --pg VERSION`` over the same runs in the reference ledger tell each claim the same verdict."""
    pulled_analyses(study)
    table = pd.read_csv(REPO / "data" / "majors" / f"{study}.csv", dtype={"version": str})
    for version, rows in table.groupby("version"):
        assert cli.main(["ledger", "compare", study, "--pg", version, "--ledger", str(REFERENCE)]) == 0
        told = capsys.readouterr().out.split("decided over these runs", 1)
        assert len(told) == 2, (version, "compare decided nothing over the major's runs")
        for r in rows.itertuples():
            assert f"  {r.claim}: {r.verdict}," in told[1], (version, r.claim, r.verdict)
