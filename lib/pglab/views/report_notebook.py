"""An executed study notebook, made repeatable and cut into what a report shows.

Why: papermill stamps every execution with times and gives the injected cell a new id, so two analyses
of the same run differ and ``dvc repro`` leaves ``dvc.lock`` dirty; ``normalize`` removes exactly those
stamps. ``sections`` reads the notebook as its reader sees it (headings, text, tables, figures), without
the code, so a report can put the verdicts first and the parameters last.

A notebook's outputs hold user text (target names and labels, host names, server messages), so what a report
shows of them is made safe here, whatever an analysis forgot to escape: markdown is rendered with raw HTML
escaped, a link leaving the page as its text and an image not embedded as its alt text, and every piece of
HTML goes through ``clean_html``, which keeps only elements that show text and tables (nothing that loads,
navigates, submits or runs) and only local links and embedded images.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import mistune
from mistune.core import BlockState
from mistune.util import striptags

#: per-cell and per-notebook metadata papermill and the kernel fill with times of this execution
_VOLATILE_CELL = ("execution",)
_VOLATILE_PAPERMILL = ("start_time", "end_time", "duration")
INJECTED_ID = "injected-parameters"

#: elements a report shows: text, lists, tables, figures, folds; none loads, navigates, submits or runs anything
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div", "dl",
    "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p",
    "pre", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "u", "ul"})
_VOID = frozenset({"br", "col", "hr", "img"})
#: attributes kept (``href`` and ``src`` only when local / embedded, ``style`` only without a URL or escape)
_ATTRS = frozenset({"align", "alt", "border", "class", "colspan", "halign", "href", "id", "open", "rowspan",
                    "scope", "span", "src", "start", "style", "title", "valign"})
_EMBEDDED = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z")
_PLAIN_STYLE = re.compile(r"[\w\s:;.,%#-]*\Z")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")  # browsers drop these from a URL: "java\tscript:" is javascript:
#: a code span the analysis writes in plain text (a setting or a profile: `standby_hosts`, `runs: 5`, `emulate:
#: flush_latency_ms: [hdd_7200]`): no pipe, star, angle bracket, quote or parenthesis inside, so neither markup nor
#: a stray backtick in user text spans one (a user's label with a `word` in backticks shows it as code too: inert)
_CODE_SPAN = re.compile(r"`([A-Za-z_][\w.:/=\[\], -]{0,60})`")


def local_url(url: str) -> bool:
    """True for a link within the page or to a file beside it: no scheme (http:, javascript:, data:) and no
    host (``//host``, which a browser also reads in ``\\host`` and ``/\\host``)."""
    u = _CONTROL.sub("", html.unescape(url))
    return not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|[/\\]{2}", u)


def _attr_ok(tag: str, name: str, value: str | None) -> bool:
    if name not in _ATTRS:
        return False
    if name == "href":
        return tag == "a" and value is not None and local_url(value)
    if name == "src":
        return tag == "img" and value is not None and bool(_EMBEDDED.match(value))
    return name != "style" or bool(_PLAIN_STYLE.match(value or ""))


class _Cleaner(HTMLParser):
    """HTML rewritten from what the parser read: only ``SAFE_TAGS`` with their safe attributes, every text and
    attribute escaped anew, so the browser reads it as this parser did. Comments, declarations, scripts and
    styles go; a link without a local ``href`` and an image without an embedded ``src`` go, their text stays."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.links: list[bool] = []  # per open <a>: kept (its end tag too) or dropped
        self.skip = 0  # inside <script> or <style>: their text is code, not text

    def _start(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.skip += 1
            return
        kept = [(k, v) for k, v in attrs if _attr_ok(tag, k, v)]
        keep = tag in SAFE_TAGS and not (tag == "a" and not any(k == "href" for k, _ in kept)) \
            and not (tag == "img" and not any(k == "src" for k, _ in kept))
        if tag == "a":
            self.links.append(keep)
        if keep:
            self.out.append(f"<{tag}" + "".join(f" {k}" if v is None else f" {k}=\"{html.escape(v)}\""
                                                for k, v in kept) + ">")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs)
        if tag in ("script", "style"):
            self.skip -= 1
        elif tag == "a":
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
        elif tag == "a":
            if self.links and self.links.pop():
                self.out.append("</a>")
        elif tag in SAFE_TAGS and tag not in _VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(html.escape(data, quote=False))


def clean_html(fragment: str) -> str:
    """``fragment`` with nothing that loads, navigates, submits or runs (see ``_Cleaner``)."""
    cleaner = _Cleaner()
    cleaner.feed(fragment)
    cleaner.close()
    return "".join(cleaner.out)


class _Renderer(mistune.HTMLRenderer):
    """Markdown's raw HTML escaped; a link leaving the page shown as its text, an image not embedded as its alt
    text (the page loads nothing and a reader follows nothing from its text)."""

    def link(self, text: str, url: str, title: str | None = None) -> str:
        return super().link(text, url, title) if local_url(url) else text

    def image(self, text: str, url: str, title: str | None = None) -> str:
        return super().image(text, url, title) if _EMBEDDED.match(url) else striptags(text)


_markdown = mistune.create_markdown(renderer=_Renderer(escape=True), plugins=["table", "strikethrough"])


def normalize(path: Path) -> bool:
    """Drop the execution's times and random ids from an executed notebook, in place; True if it changed."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    for key in _VOLATILE_PAPERMILL:
        nb.get("metadata", {}).get("papermill", {}).pop(key, None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        for key in _VOLATILE_CELL:
            meta.pop(key, None)
        for key in _VOLATILE_PAPERMILL:
            meta.get("papermill", {}).pop(key, None)
        if "injected-parameters" in meta.get("tags", []):
            cell["id"] = INJECTED_ID
        if cell.get("cell_type") == "code":
            cell["execution_count"] = None
            cell["outputs"] = _coalesced(cell.get("outputs", []))
            for out in cell["outputs"]:
                if "execution_count" in out:
                    out["execution_count"] = None
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def _coalesced(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive stream outputs of one stream as one: how a cell's prints are cut into messages depends
    on when the kernel flushed them (a loaded machine cut one cell's output differently in two runs)."""
    out: list[dict[str, Any]] = []
    for o in outputs:
        if (o.get("output_type") == "stream" and out and out[-1].get("output_type") == "stream"
                and out[-1].get("name") == o.get("name")):
            out[-1] = {**out[-1], "text": _text(out[-1].get("text", "")) + _text(o.get("text", ""))}
        else:
            out.append(o)
    # one spelling of a stream's text (nbformat allows a string or its lines): merged or not, the same bytes
    return [{**o, "text": _text(o.get("text", "")).splitlines(keepends=True)} if o.get("output_type") == "stream"
            else o for o in out]


def markdown(text: str) -> str:
    return clean_html(str(_markdown(text)))


def code_spans(escaped: str) -> str:
    """Escaped text (or HTML) with the `code spans` of plain text as ``<code>``: comparison.csv's notes are text,
    not markdown, and a verdict line escapes their backticks (``analysis.text.escape_text``), which a report would
    otherwise show as typed."""
    return _CODE_SPAN.sub(r"<code>\1</code>", escaped)


def inline(text: str) -> str:
    """One line of markdown (a heading, a caption) as inline HTML: a code span as ``<code>``, no paragraph, and
    nothing read as a block (a caption "1. x" stays text, not a list)."""
    return clean_html(str(_markdown.renderer(_markdown.inline(text, {}), BlockState())))


def plain(text: str) -> str:
    """One line of markdown as plain text (an image's alt text): the markup's characters dropped."""
    return html.unescape(striptags(inline(text)))


@dataclass
class Figure:
    """An image a cell displayed, with the heading of the section it was shown under; ``name``: the analysis'
    figure it is (``result.figures["<name>"]`` in the cell's code), '' when the code does not say which."""

    caption: str
    png_base64: str
    name: str = ""


@dataclass
class Section:
    """A notebook section: its heading (markdown) and, in order, the HTML of its text and outputs."""

    heading: str
    parts: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


@dataclass
class Notebook:
    title: str
    intro: str  # the first markdown cell after its title, as HTML
    sections: list[Section]
    parameters: str  # the parameters cell and papermill's injected one, as text


def figure_html(number: int, fig: Figure, empty: bool = False) -> str:
    """Figure ``number`` with its caption; ``empty``: a chart with no value drawn (every claim unmeasured), folded
    under a caption that says so, so a reader does not take its blank axes for a result."""
    img = f"<img alt=\"{html.escape(plain(fig.caption))}\" src=\"data:image/png;base64,{fig.png_base64}\">"
    caption = f"Figure {number}. {inline(fig.caption)}"
    if empty:
        return (f"<figure><details><summary>{caption}: nothing to draw, as no claim got a number in this run (the "
                f"chart shows only where each rule would want the interval)</summary>{img}</details></figure>")
    return f"<figure>{img}<figcaption>{caption}</figcaption></figure>"


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


#: how a notebook's code displays one of the analysis' figures: ``result.figures["ratio_to_on"]``
_FIGURE_NAME = re.compile(r"figures\[\s*[\"'](\w+)[\"']\s*\]")


def _figure_names(cell: dict[str, Any]) -> Iterator[str]:
    """The figures a code cell displays, in order, when its code names one per image it shows; else ''s."""
    names = _FIGURE_NAME.findall(_source(cell))
    shown = sum(1 for o in cell.get("outputs", []) if "image/png" in o.get("data", {}))
    return iter(names if len(names) == shown else [])


def _output_html(out: dict[str, Any], section: Section, names: Iterator[str] | None = None) -> None:
    kind = out.get("output_type")
    if kind == "stream":
        section.parts.append(f"<pre class=\"out\">{html.escape(_text(out.get('text', '')))}</pre>")
        return
    if kind not in ("display_data", "execute_result"):
        return
    data = out.get("data", {})
    if "image/png" in data:
        png = _text(data["image/png"]).replace("\n", "")
        base64.b64decode(png, validate=True)  # a broken image fails the report, not the reader's browser
        section.figures.append(Figure(section.heading, png, next(names, "") if names else ""))
    elif "text/html" in data:
        # a table's cells are text (the notes of comparison.csv): their `code spans` as <code>, as in the verdicts
        section.parts.append(f"<div class=\"table\">{code_spans(clean_html(_text(data['text/html'])))}</div>")
    elif "text/markdown" in data:
        section.parts.append(code_spans(markdown(_text(data["text/markdown"]))))
    elif "text/plain" in data:
        section.parts.append(f"<pre class=\"out\">{html.escape(_text(data['text/plain']))}</pre>")


def read(path: Path) -> Notebook:
    """The executed notebook's story: title, introduction, sections with their outputs, parameters."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    title, intro, params = "", "", []
    sections: list[Section] = []
    for cell in nb.get("cells", []):
        src = _source(cell)
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") == "markdown":
            head, _, body = src.partition("\n")
            if not title and head.startswith("# "):
                title, intro = head[2:].strip(), markdown(body)
            elif head.startswith("#"):
                sections.append(Section(head.lstrip("#").strip()))
                if body.strip():
                    sections[-1].parts.append(markdown(body))
            elif sections:
                sections[-1].parts.append(markdown(src))
            continue
        if "parameters" in tags or "injected-parameters" in tags:
            params.append(src)
            continue
        if not sections:
            sections.append(Section(""))
        names = _figure_names(cell)
        for out in cell.get("outputs", []):
            _output_html(out, sections[-1], names)
    return Notebook(title, intro, sections, "\n\n".join(params))
