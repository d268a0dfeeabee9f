"""An executed study notebook, made repeatable and cut into what a report shows.

Why: papermill stamps every execution with times and gives the injected cell a new id, so two analyses
of the same run differ and ``dvc repro`` leaves ``dvc.lock`` dirty; ``normalize`` removes exactly those
stamps. ``sections`` reads the notebook as its reader sees it (headings, text, tables, figures), without
the code, so a report can put the verdicts first and the parameters last.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mistune

#: per-cell and per-notebook metadata papermill and the kernel fill with times of this execution
_VOLATILE_CELL = ("execution",)
_VOLATILE_PAPERMILL = ("start_time", "end_time", "duration")
INJECTED_ID = "injected-parameters"

_markdown = mistune.create_markdown(plugins=["table", "strikethrough"])


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
    return str(_markdown(text))


@dataclass
class Figure:
    """An image a cell displayed, with the heading of the section it was shown under."""

    caption: str
    png_base64: str


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


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_html(out: dict[str, Any], section: Section) -> None:
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
        section.figures.append(Figure(section.heading, png))
    elif "text/html" in data:
        section.parts.append(f"<div class=\"table\">{_text(data['text/html'])}</div>")
    elif "text/markdown" in data:
        section.parts.append(markdown(_text(data["text/markdown"])))
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
        for out in cell.get("outputs", []):
            _output_html(out, sections[-1])
    return Notebook(title, intro, sections, "\n\n".join(params))
