"""reports/history.html (pglab.views.history): every run of the ledger on one offline page, claim by claim.

The ledger is the pipeline's five runs (data/raw, data/derived: `dvc pull`) and synthetic runs of one study on
two other machines and PostgreSQL builds, one of them with hostile text where a manifest or an analysis has
text (a claim, a verdict, a CPU model, a profile)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from browser import open_page
from conftest import REPO, pulled_analyses
from pglab.ledger import book, shipped
from pglab.ledger.backend import Ledger
from pglab.runs import campaign
from pglab.studies import STUDIES
from pglab.views import history, report

HOSTILE_CLAIM = "<script>alert(1)</script> FDW is $2x$ faster & free"
HOSTILE_CPU = "<img src=x onerror=alert(2)>"
UNMEASURED = "the pooler hides the overhead"


def manifest(run_id: str, start: str, cpu: str, postgres: str, profile: str = "quick") -> dict[str, Any]:
    return {"run_id": run_id, "study": "fdw_overhead", "profile": profile, "status": "complete", "start": start,
            "end": start, "wall_s": [600.0], "measured_s": 540.0, "measurement_share": 0.9,
            "pglab_cpu": [{"process_cpu_s": 3.5}], "git_revision": "0123456789abcdef",
            "tools": {"postgres": f"postgres (PostgreSQL) {postgres} (Debian {postgres}-1)"},
            "hosts": {"local": {"cores": 4, "cpu_model": cpu, "mem_total_kb": 8 << 20, "kernel": "Linux 6.1.0 x86_64",
                                "os": "Debian GNU/Linux 12 (bookworm)", "hostname": "box"}}}


def synthetic(ledger: Ledger, tmp: Path) -> None:
    """Two runs of fdw_overhead on other machines: one ordinary, one with hostile text everywhere it can be."""
    runs = [(manifest("20261201T100000Z-aaaaaa", "2026-12-01T10:00:00+00:00", "Intel Xeon", "16.4"), 1.8, "held"),
            (manifest("20261202T100000Z-bbbbbb", "2026-12-02T10:00:00+00:00", HOSTILE_CPU, "17.2",
                      profile="<b>full</b>"), 1.2, "did not <i>hold</i>")]
    for m, value, verdict in runs:
        derived = tmp / m["run_id"]
        derived.mkdir()
        pd.DataFrame([
            {"claim": HOSTILE_CLAIM, "published": 2.0, "reproduced": value, "ci_low": value - 0.1,
             "ci_high": value + 0.2, "coverage": 0.95, "blocks": 8, "verdict": verdict, "rule": "r", "note": ""},
            {"claim": UNMEASURED, "published": 1.0, "reproduced": None, "ci_low": None, "ci_high": None,
             "coverage": None, "blocks": 0, "verdict": "not measurable here", "rule": "", "note": "one machine"},
        ]).to_csv(derived / "comparison.csv", index=False)
        with ledger.transaction():
            book.add_run(ledger, m, dvc_hash="0123456789abcdef0123456789abcdef.dir")
            book.add_analysis(ledger, m["run_id"], derived, analysed_at="2026-12-03T00:00:00Z")


def shipped_runs() -> int:
    """The runs the pipeline ships: every run of a campaign, one for a single run."""
    return sum(len(campaign.members(REPO / "data" / "raw" / s)) for s in STUDIES)


@pytest.fixture(scope="module")
def ledger_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pulled_analyses(*STUDIES)
    tmp = tmp_path_factory.mktemp("ledger")
    with Ledger(str(tmp / "ledger.sqlite")) as ledger:
        added = shipped.add_pipeline(ledger, REPO / "data", REPO / "dvc.lock")
        assert len(added) == shipped_runs()  # a campaign's every run
        synthetic(ledger, tmp)
    return tmp / "ledger.sqlite"


@pytest.fixture(scope="module")
def written(ledger_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports") / "history.html"
    assert history.main(["--ledger", str(ledger_file), "--out", str(out)]) == 0
    return out


def test_the_page_shows_every_claim_of_every_run(ledger_file: Path, written: Path) -> None:
    page = written.read_text(encoding="utf-8")
    with Ledger(str(ledger_file)) as ledger:
        claims, runs = book.claims(ledger), book.runs(ledger)
    assert len(runs) == shipped_runs() + 2
    for claim in set(claims.claim):
        assert history.html.escape(claim) in page, claim
    runs = runs[runs.marked.fillna("") == ""]  # the page leaves marked runs out (and says how many)
    assert f"Every run in the ledger: {len(runs)} runs of {len(STUDIES)} studies on 3 machines" in page
    assert "PG 15.18 (Debian), PG 16.4 (Debian), PG 17.2 (Debian)" in page
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    # a figure per claim that some run put a number on, and one of each study's costs; a claim no run could
    # measure is a line with its verdicts counted, not an empty figure
    drawn = claims.groupby(["study", "claim"]).reproduced.apply(lambda v: v.notna().any())
    assert page.count("data:image/png;base64,") == int(drawn.sum()) + len(STUDIES)
    line = re.search(rf"<li><b>{UNMEASURED}</b>:(.*?)</li>", page)
    assert line and '<span class="na">2 not measurable</span>' in line.group(1)
    # the tally of the hostile claim: one run held, one did not (its verdict text is not one pglab writes: open)
    row = re.search(r"<tr><td class=\"wrap\"><a href=\"#s\d-c\d\">&lt;script&gt;.*?</tr>", page)
    assert row and re.findall(r"<td[^>]*>(\d+)</td>", row.group(0)) == ["2", "1", "0", "1", "0"]
    assert "http://" not in page and "https://" not in page
    # a page that loads on a phone: its figures in few colours (at full colour the shipped page weighed 2.1 MB)
    assert written.stat().st_size < 1_000_000, written.stat().st_size


def test_every_text_from_the_ledger_is_escaped(written: Path) -> None:
    page = written.read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=x" not in page and "onerror=alert" not in page.replace(
        "&lt;img src=x onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; FDW is $2x$ faster &amp; free" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the machine's label, as text
    assert "&lt;b&gt;full&lt;/b&gt;" in page and "did not &lt;i&gt;hold&lt;/i&gt;" in page
    assert "<b>full</b>" not in page and "<i>hold</i>" not in page


def test_the_same_ledger_writes_the_same_bytes(ledger_file: Path, written: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    with Ledger(str(ledger_file)) as ledger:
        history.write(ledger, again)
    assert again.read_bytes() == written.read_bytes()
    assert re.search(r"generated|20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d", written.read_text()) is None


def test_the_page_opens_offline_in_a_browser(written: Path, tmp_path: Path) -> None:
    page = open_page(written, tmp_path, width=400, height=2400)  # a phone's width
    assert [u for u in page.requests if not u.startswith(("file:", "data:"))] == []
    assert "<h1>pglab: every run so far</h1>" in page.dom and "<script" not in page.dom
    pixels = plt.imread(page.screenshot)
    assert pixels.shape[0] > 1000 and pixels.std() > 0.05, "a blank screenshot"


def test_an_empty_ledger_says_so_and_a_missing_one_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with Ledger(str(tmp_path / "empty.sqlite")) as ledger:
        page = history.write(ledger, tmp_path / "h.html").read_text()
    assert "The ledger holds no runs yet" in page
    assert history.main(["--ledger", str(tmp_path / "nowhere.sqlite"), "--out", str(tmp_path / "x.html")]) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "nowhere.sqlite").exists()


def test_verdicts_fall_into_four_kinds() -> None:
    assert [history.kind(v) for v in ("held", "did not hold", "not measurable here", "not resolvable here",
                                      "open at the first look (6 blocks)", None)] == [
        "held", "did not hold", "not measurable", "open", "open", "open"]


def test_the_index_links_to_the_history() -> None:
    pulled_analyses(*STUDIES)
    assert '<a href="history.html">history.html</a>' in report.index_html(REPO)
