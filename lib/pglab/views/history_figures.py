"""The figures of ``reports/history.html`` (``pglab.views.history``): per claim every run's value and interval by run,
and what each study's runs cost, as inline PNGs of few colours (22 of them at full colour made the page 2 MB), a
colour per machine and a marker per PostgreSQL build, the same in every figure of the page."""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import pandas as pd

from pglab.analysis import figures

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
COLOURS = 64  # a point plot's colours but for anti-aliasing: 64 look the same, and weigh a third


def started_at(started: Any) -> pd.Timestamp:
    return pd.to_datetime(started, utc=True, errors="coerce", format="ISO8601")


def pg_label(version: Any, family: Any) -> str:
    if not isinstance(version, str) or not version:
        return "PG ?"
    return f"PG {version}" + (f" ({family})" if isinstance(family, str) and family and family != "other" else "")


def builds(frame: pd.DataFrame) -> list[str]:
    """Each row's PostgreSQL build, marked when the run imitated the article's machine (``emulation``): such a
    run gets a marker of its own, never mistaken for one on this machine as it is."""
    emulated = frame["emulation"] if "emulation" in frame else pd.Series([None] * len(frame), index=frame.index)
    return [pg_label(v, f) + (" emulated" if isinstance(e, str) and e else "")
            for v, f, e in zip(frame.pg_version, frame.pg_family, emulated, strict=True)]


def machine_names(runs: pd.DataFrame) -> dict[str, str]:
    """machine_key -> ``M1``, ``M2``... in the order each machine first ran (short enough for a legend)."""
    names: dict[str, str] = {}
    for key in runs.machine_key:
        names.setdefault(str(key), f"M{len(names) + 1}")
    return names


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt
    from PIL import Image

    buf, out = io.BytesIO(), io.BytesIO()
    fig.savefig(buf, format="png", dpi=figures.DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    Image.open(buf).convert("RGB").quantize(COLOURS, Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return base64.b64encode(out.getvalue()).decode()


def _xticks(ax: Any, order: pd.DataFrame) -> None:
    """Run numbers (at most ten), and below them the date at the first run of each day, on one of two lines
    so that no two dates run into each other (a day whose date would is left unlabelled, never mislabelled)."""
    n = len(order)
    step, gap = max(1, math.ceil(n / 10)), max(1, math.ceil(n / 8))
    ticks = list(range(1, n + 1, step))
    ax.set_xticks(ticks, [f"#{i}" for i in ticks])
    days, labels, last, free = [], [], None, {1: -math.inf, 2: -math.inf}
    for i, started in enumerate(order.started, 1):
        t = started_at(started)
        day = None if pd.isna(t) else t.strftime("%m-%d")
        line = next((k for k in (1, 2) if i - free[k] >= gap), None) if day and day != last else None
        if line:
            days.append(i)
            labels.append("\n" * line + str(day))
            free[line] = i
        last = day or last
    ax.xaxis.remove_overlapping_locs = False  # a date under a run number is meant to be there
    ax.set_xticks(days, labels, minor=True)
    import matplotlib.pyplot as plt

    ax.tick_params(axis="x", which="minor", length=0,  # on the run numbers' baseline
                   pad=plt.rcParams["xtick.major.pad"] + plt.rcParams["xtick.major.size"])
    ax.set_xlim(0.4, n + 0.6)


def style_of(runs: pd.DataFrame) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """A colour per machine and a marker per PostgreSQL build, the same in every figure of the page."""
    import seaborn as sns

    names = machine_names(runs)
    colours = sns.color_palette("colorblind", max(len(names), 1))
    colour = {k: colours[i % len(colours)] for i, k in enumerate(names)}
    kinds = sorted(set(builds(runs)))
    marker = {b: MARKERS[i % len(MARKERS)] for i, b in enumerate(kinds)}
    return colour, marker, names


def claim_figure(rows: pd.DataFrame, order: pd.DataFrame, look: tuple[dict[str, Any], dict[str, str], dict[str, str]],
                 claim: str) -> str:
    """Every run's reproduced value and interval for one claim, by run, against the article's number (PNG)."""
    import matplotlib.pyplot as plt

    colour, marker, names = look
    x_of = {r: i for i, r in enumerate(order.run_id, 1)}
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    tops = [0.0]
    rows = rows.assign(key=rows.machine_key.astype(str),
                       build=builds(rows))
    for (key, build), g in rows.groupby(["key", "build"], sort=True):
        g = g[g.reproduced.notna()]
        if not len(g):
            continue
        x = [x_of[r] for r in g.run_id]
        lo = (g.reproduced - g.ci_low).clip(lower=0).fillna(0)
        hi = (g.ci_high - g.reproduced).clip(lower=0).fillna(0)
        ax.errorbar(x, g.reproduced, yerr=[lo, hi], fmt=marker[build], color=colour[key], ms=7, capsize=4,
                    lw=1.5, label=f"{names[key]}, {build}")
        tops += [float(g.reproduced.max()), float(g.ci_high.max(skipna=True) or 0)]
    published = rows.published.dropna()
    if len(published):
        value = float(published.iloc[-1])
        ax.axhline(value, color="#222", ls="--", lw=1.3, label=f"article: {value:.3g}")
        ax.annotate(f"article\n{value:.3g}", xy=(1, value), xycoords=("axes fraction", "data"), ha="left",
                    va="center", fontsize=9, color="#222", xytext=(3, 0), textcoords="offset points",
                    annotation_clip=False)  # beside the axes, over no run's mark
        tops.append(value)
    low = min(0.0, float(rows.ci_low.min(skipna=True)) if rows.ci_low.notna().any() else 0.0,
              float(rows.reproduced.min(skipna=True)))
    ax.set_ylim(low, max(t for t in tops if not math.isnan(t)) * 1.12 or 1.0)  # from 0: no zoom that exaggerates
    _xticks(ax, order)
    ax.set_xlabel("run, in the order the runs started (month-day, UTC)")
    ax.set_ylabel("reproduced value")
    fig.legend(loc="outside lower center", ncol=2, fontsize=9, frameon=False)
    return _png(fig)


def _legend(fig: Any, order: pd.DataFrame, look: tuple[dict[str, Any], dict[str, str], dict[str, str]]) -> None:
    from matplotlib.lines import Line2D

    colour, marker, names = look
    seen = sorted(set(zip(order.machine_key.astype(str), builds(order), strict=True)))
    fig.legend([Line2D([], [], ls="", marker=marker[b], color=colour[k], ms=6) for k, b in seen],
               [f"{names[k]}, {b}" for k, b in seen], loc="outside lower center", ncol=2, fontsize=9, frameon=False)


def cost_figure(order: pd.DataFrame, look: tuple[dict[str, Any], dict[str, str], dict[str, str]]) -> str:
    """A study's runs: wall time, the share of it spent measuring and pglab's own CPU, by run (PNG)."""
    import matplotlib.pyplot as plt

    colour, marker, names = look
    fig, axes = plt.subplots(3, 1, figsize=(5.2, 5.0), sharex=True)
    x = list(range(1, len(order) + 1))
    series = ((order.wall_s / 60, "wall time (min)"), (order.measuring_share * 100, "measuring (% of wall time)"),
              (order.own_cpu_s, "pglab's own CPU (s)"))
    for ax, (values, label) in zip(axes, series, strict=True):
        for xi, v, key, build in zip(x, values, order.machine_key.astype(str), builds(order), strict=True):
            if not pd.isna(v):
                ax.plot([xi], [v], marker[build], color=colour[key], ms=6)
        top = values.max(skipna=True)
        ax.set_ylim(0, 105 if "%" in label else (float(top) * 1.15 if top and not pd.isna(top) else 1.0))
        ax.set_title(label, loc="left", fontsize=10)
    _xticks(axes[-1], order)
    axes[-1].set_xlabel("run, in the order the runs started (month-day, UTC)")
    _legend(fig, order, look)
    return _png(fig)
