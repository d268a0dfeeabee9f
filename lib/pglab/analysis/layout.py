"""Where a drawn figure's text landed: text over text, text beyond the canvas, a legend over the data.

Why: a figure is read, not computed, and nothing fails when tick labels run together, a suptitle sits on
the panel titles, an offset text ("1e6") covers a title or a note runs off the edge. These checks measure
the renderer's window extents (pixels) after one ``fig.canvas.draw()``, so a test can fail on them for
every figure of every study (tests/test_figures.py) and anyone can call :func:`problems` on a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backend_bases import RendererBase
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

NO_MARKER = (None, "None", "none", "", " ")


@dataclass(frozen=True)
class Box:
    """One text element (or a whole legend), the pixels it covers, and the panel it belongs to (None: the figure's)."""

    name: str
    bbox: Bbox
    panel: tuple[float, ...] | None = None


def _short(text: str, width: int = 40) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= width else one[: width - 3] + "...")


def _panel(fig: Figure, ax: Axes) -> str:
    title = next((ax.get_title(loc) for loc in ("center", "left", "right") if ax.get_title(loc)), "")
    return f"panel {fig.axes.index(ax)}" + (f" {_short(title, 30)}" if title else "")


def _place(ax: Axes) -> tuple[float, ...]:
    """Where a panel sits: a twin (``twinx``) sits where its host does, so the two count as one panel."""
    return tuple(round(v, 1) for v in ax.bbox.bounds)


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _ticks(axis: Axis) -> list[Text]:
    """The tick labels the last draw showed: as many ticks as the locators gave, inside the view interval."""
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * max(abs(hi - lo), abs(hi), abs(lo), 1e-300)
    out = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks), (axis.get_minorticklocs(),
                                                                            axis.get_minor_ticks)):
        for tick in ticks(len(locs)):
            if lo - tol <= tick.get_loc() <= hi + tol:
                out += [t for t in (tick.label1, tick.label2) if _shown(t)]
    return out


def _axis_boxes(fig: Figure, ax: Axes, renderer: RendererBase) -> list[Box]:
    out = []
    panel = _panel(fig, ax)
    for letter, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        if not (ax.axison and axis.get_visible()):
            continue
        for kind, texts in (("label", [axis.label]), ("offset text", [axis.offsetText]),
                            ("tick label", _ticks(axis))):
            out += [Box(f"{panel}: {letter} {kind} {_short(t.get_text())}", t.get_window_extent(renderer),
                        _place(ax)) for t in texts if _shown(t)]
    return out


def text_boxes(fig: Figure, renderer: RendererBase) -> list[Box]:
    """Every visible, non-empty text of a drawn figure: suptitle and figure texts, and per visible panel its
    titles, axis labels, offset texts, tick labels, texts and annotations; a legend counts as one box."""
    out = []
    suptitle = getattr(fig, "_suptitle", None)
    for t in fig.texts:
        if _shown(t):
            name = "suptitle" if t is suptitle else f"figure text {_short(t.get_text())}"
            out.append(Box(name, t.get_window_extent(renderer)))
    for leg in fig.legends:
        if leg.get_visible():
            out.append(Box("figure legend", leg.get_window_extent(renderer)))
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        panel = _panel(fig, ax)
        for child in ax.get_children():
            if isinstance(child, Text) and _shown(child):
                kind = "text" if any(child is t for t in ax.texts) else "title"  # the rest: its 3 titles
                out.append(Box(f"{panel}: {kind} {_short(child.get_text())}", child.get_window_extent(renderer),
                               _place(ax)))
            elif isinstance(child, Legend) and child.get_visible():
                out.append(Box(f"{panel}: legend", child.get_window_extent(renderer), _place(ax)))
        out += _axis_boxes(fig, ax, renderer)
    return out


def _apart(a: Bbox, b: Bbox, pad: float) -> bool:
    return a.x1 + pad <= b.x0 or b.x1 + pad <= a.x0 or a.y1 + pad <= b.y0 or b.y1 + pad <= a.y0


def _inside(inner: Bbox, outer: Bbox, tol: float = 0.5) -> bool:
    return (inner.x0 >= outer.x0 - tol and inner.y0 >= outer.y0 - tol and inner.x1 <= outer.x1 + tol
            and inner.y1 <= outer.y1 + tol)


def _data_marks(ax: Axes, renderer: RendererBase) -> tuple[list[Bbox], np.ndarray]:
    """The panel's bars (rectangles in data coordinates, cut to the panel) and its marker and dot positions."""
    bars = []
    for p in ax.patches:
        if isinstance(p, Rectangle) and p.get_visible() and p.get_data_transform() is ax.transData:
            e = p.get_window_extent(renderer)
            if all(np.isfinite(v) for v in e.bounds) and e.width > 0 and e.height > 0:
                cut = Bbox.intersection(e, ax.bbox)
                if cut is not None and cut.width > 0 and cut.height > 0:
                    bars.append(cut)
    points = [np.empty((0, 2))]
    for line in ax.lines:
        if line.get_visible() and line.get_marker() not in NO_MARKER and isinstance(line, Line2D):
            points.append(line.get_transform().transform(line.get_xydata()))
    for c in ax.collections:
        if isinstance(c, PathCollection) and c.get_visible() and len(c.get_offsets()):
            points.append(c.get_offset_transform().transform(c.get_offsets()))
    return bars, np.vstack(points)


def over_other_panels(fig: Figure, boxes: list[Box]) -> list[str]:
    """Text over a panel it does not belong to (a tick label spilling into the next one, a suptitle or a note
    over a plot) hides that panel's data."""
    panels = {_place(ax): _panel(fig, ax) for ax in fig.axes if ax.get_visible()}
    return [f"{b.name} runs into {name}" for b in boxes for place, name in panels.items()
            if place != b.panel and not _apart(b.bbox, Bbox.from_bounds(*place), 0.0)]


def legends_over_data(fig: Figure, renderer: RendererBase) -> list[str]:
    """A legend inside a panel that covers one of its bars, markers or dots hides what the figure shows."""
    out = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if not ax.get_visible() or leg is None or not leg.get_visible():
            continue
        box = leg.get_window_extent(renderer)
        bars, points = _data_marks(ax, renderer)
        hidden = sum(not _apart(box, b, 0.0) for b in bars)
        inside = points[(points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                        & (points[:, 1] < box.y1)] if len(points) else points
        if hidden or len(inside):
            out.append(f"{_panel(fig, ax)}: legend covers {hidden} bar(s) and {len(inside)} marker(s)")
    return out


def problems(fig: Figure, pad: float = 1.0) -> list[str]:
    """Draw ``fig`` once; every text beyond the canvas, every two texts closer than ``pad`` pixels (tick labels
    of one axis included) and every legend over the data, one sentence each; an empty list means clean."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = text_boxes(fig, renderer)
    out = [f"{b.name} leaves the canvas ({b.bbox.x0:.0f}..{b.bbox.x1:.0f} x {b.bbox.y0:.0f}..{b.bbox.y1:.0f} px "
           f"of {fig.bbox.width:.0f} x {fig.bbox.height:.0f})" for b in boxes if not _inside(b.bbox, fig.bbox)]
    out += [f"{a.name} overlaps {b.name}" for a, b in combinations(boxes, 2) if not _apart(a.bbox, b.bbox, pad)]
    return out + over_other_panels(fig, boxes) + legends_over_data(fig, renderer)
