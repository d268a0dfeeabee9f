"""User text stays text: a target's provider and label and an inventory host name written as markdown or HTML
(an image, a link, a meta refresh, a form, a javascript: link, a backtick and a pipe) go through the full
analysis of a shipped run and the report builder, and the page Chromium renders has no element made of them
and requests nothing outside file: and data:. Issue 33 section 3."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mistune
import pytest
from browser import open_page
from conftest import REPO, pulled_runs
from markdown_it import MarkdownIt
from pglab.views import report, report_notebook

PROVIDER = ('![p](http://x.invalid/a.png) [docs](http://x.invalid/d) <img src="http://x.invalid/r.png"> '
            '<meta http-equiv="refresh" content="0;url=http://x.invalid/m"> '
            '<form action="http://x.invalid/f"><button>go</button></form> [js](javascript:alert(1)) '
            '<http://x.invalid/auto> www.x.invalid a`b|c *em* _u_ # h')
LABEL = ('<base href="http://x.invalid/"> [l](http://x.invalid/l) a|b `c` <script>alert(1)</script> '
         '$\\frac{1$ $5')  # malformed mathtext: a figure's text must not be parsed as math
HOST = "[h](http://x.invalid/h)|`x`"
#: what a rendered page may never contain, whatever its text said
FORBIDDEN = re.compile(r"<(form|base|iframe|script|object|embed|frame|input|button|link)\b", re.I)


def _rename_host(value: Any, old: str, new: str, key: str = "") -> Any:
    """Every mention of inventory host ``old`` (a dict key or a value) as ``new``; a host's ``kind`` stays."""
    if isinstance(value, dict):
        return {(new if k == old else k): _rename_host(v, old, new, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename_host(v, old, new, key) for v in value]
    return new if value == old and key != "kind" else value


def _hostile(value: dict[str, Any]) -> dict[str, Any]:
    out = _rename_host(value, "local", HOST)
    for t in [*out.get("targets", {}).values(), *out.get("parameters", {}).get("targets", [])]:
        t["provider"], t["label"] = PROVIDER, LABEL
    if "config" in out:  # a point's meta
        out["provider"], out["label"] = PROVIDER, LABEL
    return out


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped cloud_providers run with hostile user text, analysed by its notebook (as `dvc repro` does)
    and made into reports/cloud_providers.html under a root of its own."""
    pulled_runs("cloud_providers")
    root = tmp_path_factory.mktemp("hostile")
    raw = root / "data" / "raw" / "cloud_providers"
    shutil.copytree(REPO / "data" / "raw" / "cloud_providers", raw)
    for path in [raw / "manifest.json", *raw.glob("*/meta.json")]:
        path.write_text(json.dumps(_hostile(json.loads(path.read_text()))))
    (root / "reports").mkdir()
    res = subprocess.run([sys.executable, "-m", "papermill", "notebooks/cloud_providers.ipynb",
                          str(root / "reports" / "cloud_providers.ipynb"), "--log-level", "WARNING",
                          "-p", "collect", "False", "-p", "data_root", str(root / "data"),
                          "-p", "figures_root", str(root / "figures")],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    res = subprocess.run([sys.executable, "-m", "pglab.views.report", "cloud_providers", "--root", str(root)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return root


def _tags(dom: str, name: str) -> list[str]:
    return re.findall(rf"<{name}\b[^>]*>", dom, re.I)


def _attr(tag: str, name: str) -> str:
    m = re.search(rf"\b{name}\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", tag, re.I)
    value = m.group(1) if m else ""
    return html.unescape(value[1:-1] if value[:1] in "\"'" else value)


def test_hostile_user_text_renders_as_text_in_the_report(hostile_report: Path, tmp_path: Path) -> None:
    page = open_page(hostile_report / "reports" / "cloud_providers.html", tmp_path)
    dom = page.dom
    assert [u for u in page.requests if not u.startswith(("file:", "data:"))] == []
    assert [t for t in _tags(dom, "img") if not _attr(t, "src").startswith("data:image/png;base64,")] == []
    assert [t for t in _tags(dom, "a") if re.match(r"\s*([a-z][a-z0-9+.-]*:|//)", _attr(t, "href"), re.I)] == []
    assert [t for t in _tags(dom, "meta") if _attr(t, "http-equiv").lower() != "content-security-policy"
            and not _attr(t, "charset") and _attr(t, "name") != "viewport"] == []
    assert not FORBIDDEN.search(dom), FORBIDDEN.search(dom)
    csp = _attr(next(t for t in _tags(dom, "meta") if _attr(t, "http-equiv")), "content")
    assert "form-action 'none'" in csp and "base-uri 'none'" in csp
    # the user's text is there, as the characters they typed: in the verdict lines (markdown) and the header
    text = html.unescape(re.sub(r"<[^>]+>", "", dom))
    assert text.count(PROVIDER) >= 4 and f"Everything ran on one host ({HOST})" in text
    assert "javascript:" not in "".join(_attr(t, "href") for t in _tags(dom, "a"))


def test_the_notebooks_markdown_outputs_hold_no_markup_from_user_text(hostile_report: Path) -> None:
    """The executed notebook (what Jupyter shows) too: each markdown output, rendered by two CommonMark
    renderers that pass raw HTML through (as Jupyter's does before sanitising), makes no image, link or tag."""
    nb = json.loads((hostile_report / "reports" / "cloud_providers.ipynb").read_text())
    shown = ["".join(o["data"]["text/markdown"]) for c in nb["cells"] for o in c.get("outputs", [])
             if "text/markdown" in o.get("data", {})]
    loose = mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])
    gfm = MarkdownIt("commonmark", {"html": True}).enable("table")
    texts = []
    for source in shown:
        for rendered in (str(loose(source)), gfm.render(source)):
            assert not re.search(r"<(img|a|meta|form|base|script|button|input|h1)\b", rendered), rendered
            texts.append(html.unescape(re.sub(r"<[^>]+>", "", rendered)))
    # shown as typed: the verdict lines name each target's provider, the placement sentence the host
    assert sum(t.count(PROVIDER) for t in texts) >= 8 and any(f"one host ({HOST})" in t for t in texts)


@pytest.mark.parametrize("value", [PROVIDER, LABEL, HOST, "1 * 2 * 3", "back\\slash \\[x\\]", "line\nbreak",
                                   "| a | b |", "&amp; &lt;b&gt;", "~~no~~ ==x== $x$ <!-- c -->",
                                   "a \\| b", "12. x", "- x", "+ x", "=== x", "> q", "www.x.invalid or a@b.invalid",
                                   "HTTP://x.invalid/ ftp://x.invalid/", "## x", "#1 and -3.5", "- - -", "---", "1.25",
                                   "pg_test_fsync _u_ a_b_ c __d__"])
def test_escaped_text_renders_as_itself(value: str) -> None:
    """``escape_text`` then markdown gives back the characters (a newline as a space), in a paragraph and in a
    table cell, whichever renderer."""
    from pglab.analysis.text import escape_text

    want = " ".join(value.split("\n"))
    md = mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])
    gfm = MarkdownIt("commonmark", {"html": True}).enable("table")
    for render in (lambda s: str(md(s)), gfm.render, report_notebook.markdown):
        for before, after in (("x ", " y"), ("", "")):  # within a line, and starting one
            para = render(f"{before}{escape_text(value)}{after}")
            assert html.unescape(re.sub(r"</?p>", "", para)).strip() == f"{before}{want}{after}".strip(), para
        cell = render(f"| a | b |\n|---|---|\n| {escape_text(value)} | 2 |\n")
        cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cell, re.S)]
        assert cells == [want, "2"], cell


def test_the_report_drops_markup_that_would_navigate_or_load(tmp_path: Path) -> None:
    """Whatever a notebook output holds (a table's HTML, a stream, markdown), the report keeps no element
    that navigates, submits, runs or loads from a host: one sanitiser over the whole page."""
    from test_reports import COMPARISON, MANIFEST, executed

    nb = executed("2026-11-26T08:00:00Z", "x")
    evil = ('<meta http-equiv="refresh" content="0;url=http://x.invalid/"><base href="http://x.invalid/">'
            '<form action="http://x.invalid/"><input name=a></form><script>alert(1)</script>'
            '<img src="http://x.invalid/i.png" onerror="alert(1)"><a href="javascript:alert(1)">j</a>'
            '<a href="http://x.invalid/">out</a><iframe src="http://x.invalid/"></iframe>'
            '<table class="dataframe" onclick="x()"><tr><td style="background:url(http://x.invalid/)">7</td>'
            '<td style="text-align: right;">8</td></tr></table><style>@import "http://x.invalid/s.css";</style>')
    nb["cells"][4]["outputs"].append({"output_type": "display_data", "metadata": {},
                                      "data": {"text/html": evil, "text/plain": "x"}})
    nb["cells"][4]["outputs"].append({"output_type": "display_data", "metadata": {},
                                      "data": {"text/markdown": "[m](http://x.invalid/) ![i](http://x.invalid/i.png) "
                                                                + evil, "text/plain": "x"}})
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    page = report.study_html("synchronous_commit", report_notebook.read(path), COMPARISON, MANIFEST, 4167.0)
    assert not FORBIDDEN.search(page) and len(_tags(page, "meta")) == 3  # charset, viewport, CSP
    assert [t for t in _tags(page, "img") if not _attr(t, "src").startswith("data:image/png;base64,")] == []
    assert _tags(page, "a") == [] and page.count("<style>") == 1  # the report's own style only
    assert [t for t in re.findall(r"<[a-z][^>]*>", page) if re.search(r"\bon\w+=|url\(", t)] == []
    # the table kept, the links' text, nothing else
    assert ('<div class="table">jout<table class="dataframe"><tr><td>7</td><td style="text-align: right;">8</td>'
            "</tr></table></div>") in page
    out = tmp_path / "evil.html"
    out.write_text(page)
    seen = open_page(out, tmp_path, height=800)
    assert [u for u in seen.requests if not u.startswith(("file:", "data:"))] == []


def test_a_verdict_line_shows_its_fields_as_typed() -> None:
    """``text.verdict_line``: the verdict, numbers and rule as markdown, every field of comparison.csv as text."""
    from pglab.analysis.text import verdict_line

    row = {"claim": "stock *beats* tuned", "verdict": "held", "published": 1.5, "reproduced": 1.29, "ci_low": 1.12,
           "ci_high": 1.49, "ci_method": "order-statistic", "blocks": 6, "confidence": float("nan"),
           "rule": "held if the 95% interval lies inside (1.25, 1.8) (size)", "depends_on": "the services compared",
           "here": f"stock ({PROVIDER})", "article": "", "note": f"on host {HOST}; see `docs/x.md`"}
    line = verdict_line(row)
    assert line.startswith("- **stock \\*beats\\* tuned**: *held*. Article 1.5; reproduced 1.29 [1.12, 1.49] (95% "
                           "interval of the median over 6 blocks); rule: held if the 95% interval lies inside (1.25, "
                           "1.8) (size). Depends on: the services compared; here stock (")
    for render in (report_notebook.markdown, MarkdownIt("commonmark", {"html": True}).render):
        out = render(line)
        assert re.findall(r"<(\w+)", out) == ["ul", "li", "strong", "em"], out
        text = html.unescape(re.sub(r"<[^>]+>", "", out))
        assert f"stock ({PROVIDER})" in text and f"on host {HOST}; see `docs/x.md`" in text
        assert "the article: not given." in text and "stock *beats* tuned" in text


def test_figure_text_is_never_parsed_as_math(tmp_path: Path) -> None:
    """A name from params in a title or tick label (``$\\frac{1$``) is drawn as typed: matplotlib would parse it
    as mathtext and stop the figure on malformed math."""
    import matplotlib.pyplot as plt
    from pglab.analysis import figures

    figures.style()
    fig, ax = plt.subplots()
    ax.set_title(LABEL)
    ax.bar([LABEL[-12:], "b"], [1, 2])
    paths = figures.save(fig, tmp_path, "hostile")
    plt.close(fig)
    assert all(p.stat().st_size > 0 for p in paths)
