"""Tables for people: what a notebook (and so its report) shows of a DataFrame."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest
from pglab.analysis import waits
from pglab.views import frames, majors_table, verdict_table


@pytest.mark.parametrize(("column", "words"), [
    ("p99_ms", "p99 (ms)"), ("rows_per_s", "rows/s"), ("replay_lag_s_max", "replay lag max (s)"),
    ("ops_s", "ops/s"), ("mem_total_kb", "memory total (kB)"), ("ci_low", "interval low"),
    ("aa_median", "A/A median"), ("noise_floor", "noise floor"), ("IO:WALSync", "IO:WALSync"),
    ("FDW_external", "FDW_external"), ("clients", "clients"), ("provider_tps builtin", "provider tps builtin"),
])
def test_headers_are_words_with_their_unit(column: str, words: str) -> None:
    assert frames.header(column) == words


def test_numbers_read_as_numbers() -> None:
    assert frames.cell(213000.0) == "213,000" and frames.cell(2.488e6) == "2,488,000"
    assert frames.cell(0.03524) == "0.03524" and frames.cell(25.3149) == "25.31" and frames.cell(1e-7) == "0.0000001"
    assert frames.cell(10912) == "10,912" and frames.cell(6234.0) == "6,234"
    assert frames.cell(1.4456, "ratio") == "1.446×" and frames.cell(0.347, "share") == "34.7%"
    assert frames.cell(True) == "yes" and frames.cell(None) == "–" and frames.cell(float("nan")) == "–"
    assert frames.cell("None") == "–" and frames.cell("False") == "no" and frames.cell(0.0726, "noise") == "±7%"


def test_a_table_reads_as_a_table() -> None:
    df = pd.DataFrame({"layout": ["plain", "partitioned"], "rows_per_s": [2.13e5, 1.173e4],
                       "ratio_to_none": [0.6071, 1.0], "tls": [False, True], "note": [None, "x"]})
    page = frames.frame_html(df)
    assert "e+" not in page and "True" not in page and "None" not in page and "NaN" not in page
    assert "<th>rows/s</th>" in page and "213,000" in page and "0.6071×" in page and ">no<" in page
    assert 'class="num">11,730<' in page and "<td>plain</td>" in page  # numbers right, words left
    assert "index" not in page and not re.search(r"<th>\d", page)  # no pandas row numbers


def test_wait_shares_show_as_percentages() -> None:
    shares = pd.DataFrame({"config": ["on", "on", "off"], "event": ["IO:WALSync", "CPU", "CPU"],
                           "share": [0.75, 0.25, 1.0]})
    page = frames.frame_html(waits.top_events_table(shares))
    assert "75.0%" in page and "100.0%" in page and "0.75" not in page


def test_an_empty_table_is_one_line() -> None:
    assert frames.frame_html(pd.DataFrame(columns=["point", "error"])) == '<p class="meta">(none)</p>'


def test_unnamed_row_labels_get_no_index_header() -> None:
    page = frames.frame_html(pd.DataFrame({"version": ["3.5"]}, index=["pgqd"]))
    assert "index" not in page and "<th></th><th>version</th>" in page and "<td>pgqd</td>" in page


def test_claims_keep_what_a_reader_compares() -> None:
    comparison = pd.DataFrame([{"claim": "local is about 1.4x on", "published": 1.3786, "reproduced": 1.4806,
                                "ci_low": 1.1196, "ci_high": 1.958, "noise_floor": 0.0726, "blocks": 18, "runs": 9,
                                "verdict": "not measurable here", "depends_on": "the disk's flush rate",
                                "block_values": "1;2;3", "icc": 0.4}])
    shown = frames.claims(comparison)
    assert list(shown.columns) == ["claim", "article", "reproduced", "interval", "noise floor", "over",
                                   "verdict", "depends on"]
    row = shown.iloc[0]
    assert (row["article"], row["interval"], row["noise floor"], row["over"]) == (
        "1.379×", "[1.12×, 1.958×]", "±7%", "9 runs")


def test_long_text_is_cut_on_a_word_with_an_ellipsis_and_kept_whole_on_hover() -> None:
    text = "the emulation left the standby on this machine's disk, where the article's had " + "a slower disk " * 20
    cut = majors_table.shortened(text)
    assert cut.endswith("…</span>") and f'title="{html.escape(text)}"' in cut and "a slower di…" not in cut
    assert majors_table.shortened("short") == "short"


def test_long_evidence_is_folded_beneath_a_short_summary() -> None:
    long = "one run left out, marked: the disk moved; " + "word " * 60
    cell = verdict_table.folded(long)
    summary = re.search(r"<summary>(.*?)</summary>", cell).group(1)
    assert cell.startswith("<details>") and len(summary.split()) <= verdict_table.CELL_WORDS
    assert summary == "one run left out, marked…" and "word word" in cell
    assert verdict_table.folded("held over 5 runs") == "held over 5 runs"
