"""One look for every study's figures: style, colours, and saving so that the same data gives the same bytes
(DESIGN.md "Data contract")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

if not matplotlib.get_backend().lower().startswith("module://"):  # keep Jupyter's inline backend
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pglab.analysis.effects import AA  # noqa: E402

SVG_HASH_SALT = "pglab"
# 150 dpi or more: small tick labels stay legible on high-density screens and in print
DPI = 150


def style() -> None:
    """One look for every study; fixed salt so SVG ids do not change between runs."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    # constrained layout makes room for every title, label, tick label and legend (outside ones too), so
    # nothing is drawn over anything else or beyond the canvas (pglab.analysis.layout checks it)
    plt.rcParams["figure.constrained_layout.use"] = True
    plt.rcParams["svg.hashsalt"] = SVG_HASH_SALT
    plt.rcParams["svg.fonttype"] = "path"
    plt.rcParams["figure.dpi"] = DPI
    # text is text: a label from params (``$\frac{1$``) would otherwise be parsed as mathtext, and malformed
    # math stops the figure (issue 33); no figure here writes math on purpose
    plt.rcParams["text.parse_math"] = False


def save(fig: plt.Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.svg with no date or software stamp."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = SVG_HASH_SALT
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    fig.savefig(paths[0], dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return paths


def palette(order: Sequence[str], aa: Any = None) -> dict[str, Any]:
    """A colour per configuration by its place in the study's order, so that it keeps its colour in every
    figure whatever subset that figure shows; the A/A pair gets the next colour, or ``aa``."""
    import seaborn as sns

    colours = sns.color_palette("colorblind", len(order) + 1)
    pal = {c: colours[i] for i, c in enumerate(order)}
    pal[AA] = colours[len(order)] if aa is None else aa
    return pal


def plain_log(axis: Any) -> None:
    """A log axis labelled 2000, 0.5, 20 instead of 2x10^3: the same ticks matplotlib labels, in plain numbers."""
    from matplotlib.ticker import LogFormatterSciNotation

    class Plain(LogFormatterSciNotation):
        def __call__(self, x: float, pos: Any = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    axis.set_major_formatter(Plain())
    axis.set_minor_formatter(Plain(labelOnlyBase=False))


STEAL_LABEL = "CPU steal > 20%: left out"


def mark_steal(ax: Any, x: Sequence[float] | Any, y: Sequence[float] | Any, flagged: Sequence[bool] | Any) -> None:
    """A black cross over every point flagged for CPU steal: drawn, so a reader sees it, and left out of every
    ratio and summary (``effects.block_ratios``); one legend entry per panel."""
    f = np.asarray(flagged, dtype=bool)
    if not f.any():
        return
    seen = STEAL_LABEL in ax.get_legend_handles_labels()[1]
    ax.scatter(np.asarray(x, dtype=float)[f], np.asarray(y, dtype=float)[f], marker="x", color="black", s=36,
               zorder=5, label=None if seen else STEAL_LABEL)


def outside_legend(ax: Any, *args: Any, **kw: Any) -> Any:
    """The legend to the right of the panel, where it hides no data (constrained layout makes room);
    ``args``: handles and labels, e.g. another panel's."""
    return ax.legend(*args, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def stacked_bars(wide: pd.DataFrame, out: str | Path, name: str, title: str, xlabel: str, width: float = 7.5,
                 xlim: tuple[float, float] | None = None, colours: dict[str, Any] | None = None,
                 hatches: dict[str, str] | None = None) -> list[Path]:
    """One horizontal bar per row of ``wide``, its columns stacked, the legend beside: what a whole is made of.
    The value axis starts at 0 (a bar's length is its value).

    ``colours`` and ``hatches``: column -> colour or hatch, so that a column looks the same in every figure
    (wait events)."""
    fig, ax = plt.subplots(figsize=(width, 0.9 + 0.45 * len(wide)))
    if colours is None:
        wide.plot.barh(stacked=True, ax=ax, colormap="tab20", width=0.7)
    else:
        wide.plot.barh(stacked=True, ax=ax, color=[colours[c] for c in wide.columns], width=0.7)
    for bars in ax.containers if hatches else []:
        for patch in bars.patches:
            patch.set_hatch(hatches.get(bars.get_label(), ""))
    ax.invert_yaxis()
    if xlim is not None:
        ax.set_xlim(*xlim)
    else:
        ax.set_xlim(left=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, out, name)


def suptitle(fig: plt.Figure, text: str, per_inch: float = 8.0) -> None:
    """A figure's title, wrapped to the figure's width (a figure of one or two panels is narrow, its title not)."""
    import textwrap

    fig.suptitle(textwrap.fill(text, width=max(30, int(fig.get_figwidth() * per_inch))))
