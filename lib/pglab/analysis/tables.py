"""What every study's analysis shares: the per-point table, absolute rates, latency, stalls, figures.

A study's ``analyze`` reads its run folder with :func:`points_table` (one row per measured point, with
the measured-window tps cut from ``-P 1`` progress, stalls, CPU steal and load), divides within blocks
(``pglab.analysis.effects``), and draws with the figure helpers here, so that every study shows intervals over
blocks and the noise floor the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pglab.analysis import effects, figures, stats
from pglab.analysis.effects import AA
from pglab.analysis.stats import median_interval
from pglab.analysis.window import pgbench_window
from pglab.runs.reading import point_metas

POINT_COLUMNS = ["point", "kind", "block", "group", "config", "copy", "clients", "tps", "tps_summary",
                 "latency_avg_ms", "window_s", "stalls", "stall_times", "steal", "steal_flag", "load1"]
EMULATED_FACTORS = ("flush", "flush_ms")  # pglab.nodes.emulation: the flush level a point ran at, when emulated
PointValues = Callable[[Path, dict[str, Any]], dict[str, Any]]


def measured_dirs(run_dir: Path, manifest: Mapping[str, Any] | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """The folders of planned points (they carry a block) and their metas read through the record (in today's
    format), sorted by id; set-aside attempts excluded. ``manifest``: the run's, when the caller has read it."""
    return point_metas(run_dir, manifest)


def points_table(run_dir: Path, values: PointValues = pgbench_window, nodes: dict[str, str] | None = None,
                 manifest: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per measured point that succeeded (``POINT_COLUMNS`` plus what ``values`` adds); and the failed."""
    rows, failed = [], []
    for d, meta in measured_dirs(run_dir, manifest):
        base = {k: meta.get(k) for k in ("point", "kind", "block", "group", "config", "copy", "clients")}
        base.update({k: meta[k] for k in EMULATED_FACTORS if k in meta})  # an emulated flush ladder's level
        if meta.get("status") != "ok":
            failed.append({**base, "status": meta.get("status"), "error": meta.get("error", "")})
            continue
        load = meta.get("load1") or {}
        row = {**base, "steal": meta.get("steal"), "steal_flag": bool(meta.get("steal_flag", False)), **busy(meta),
               "load1": max((v for v in load.values() if v is not None), default=None)}
        row.update(values(d, meta))
        if nodes:
            row["node"] = nodes.get(str(meta.get("kind")), "")
        rows.append(row)
    extra = sorted({k for r in rows for k in r} - set(POINT_COLUMNS) - {"node"})
    cols = POINT_COLUMNS + (["node"] if nodes else []) + extra
    points = pd.DataFrame(rows, columns=cols).sort_values("point", kind="stable").reset_index(drop=True)
    for col in ("block", "copy", "clients", "stalls"):
        points[col] = pd.to_numeric(points[col]).astype("Int64")
    failed_df = pd.DataFrame(failed, columns=["point", "kind", "block", "group", "config", "copy", "clients",
                                              "status", "error"])
    return points, failed_df


def busy(meta: Mapping[str, Any]) -> dict[str, bool]:
    """``busy_flag`` where the point recorded it (``pglab.workloads.cpu``: niced others took over 10% of the CPU):
    left out of every ratio and summary as a steal-flagged point is. Runs from before it have no such column."""
    return {"busy_flag": bool(meta["busy_flag"])} if "busy_flag" in meta else {}


def tps_summary(points: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Absolute tps per group: median and interval over the points (first baseline copy only; points flagged for
    CPU steal left out, as from every ratio)."""
    rows = []
    points = effects.kept(points)
    for key, g in points[points["copy"] == 1].groupby(list(by), sort=True):
        med, lo, hi, method = median_interval(g.tps.dropna().to_numpy())
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)), "tps_median": med,
                     "tps_low": lo, "tps_high": hi, "tps_method": method, "tps_n": int(g.tps.notna().sum())})
    return pd.DataFrame(rows, columns=[*by, "tps_median", "tps_low", "tps_high", "tps_method", "tps_n"])


def lines(summary: pd.DataFrame, x: str, order: list[str]) -> pd.DataFrame:
    """One column per configuration of the median ratio against ``x``: what `dvc plots` draws."""
    s = summary[summary.config != AA].dropna(subset=["median"])
    wide = s.pivot(index=x, columns="config", values="median").reindex(columns=order)
    wide.columns.name = None
    return wide.reset_index()


def caption(summary: pd.DataFrame, method: str = "ci_method", n: str = "n", unit: str = "blocks") -> str:
    """What the error bars are, in words and from the data (``stats.interval_caption``): "95% interval of the
    median over 6 blocks (order statistics)" (``method``: the column naming how each interval was made;
    ``n``: over how many blocks)."""
    return stats.interval_caption(summary, unit, method, n) if len(summary) else "no interval"


# -- latency and stalls -------------------------------------------------------------------------------
def latency_table(run_dir: Path, points: pd.DataFrame, by: Sequence[str], folder: str = "txlog") -> pd.DataFrame:
    """Latency percentiles over every transaction of every point of a group, merged from ``-l`` logs or, for a
    run thinned at collect, their histograms (within 0.05%)."""
    from pglab.parsers.txlog import latency_sources, merged_percentiles

    rows = []
    for key, g in points[points["copy"] == 1].groupby(list(by), sort=True):
        paths = sorted(str(f) for p in g.point for f in latency_sources(Path(run_dir) / p / folder))
        if not paths:
            continue
        pct = merged_percentiles(paths, qs=(50, 95, 99))
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                     "p50_ms": pct.get(50), "p95_ms": pct.get(95), "p99_ms": pct.get(99),
                     "transactions": pct.get("n"), "points": len(g)})
    return pd.DataFrame(rows, columns=[*by, "p50_ms", "p95_ms", "p99_ms", "transactions", "points"])


def stalls_table(points: pd.DataFrame) -> pd.DataFrame:
    """Points with progress intervals of 0 tps inside the measured window, and when they were."""
    s = points[points.stalls.fillna(0) > 0]
    return s[["point", "config", "clients", "stalls", "stall_times", "steal"]].reset_index(drop=True)


# -- figures ------------------------------------------------------------------------------------------
def ratio_panel(ax: plt.Axes, summary: pd.DataFrame, configs: list[str], palette: dict[str, Any],
                x: str = "clients") -> None:
    """Median ratio and its interval per configuration at each measured ``x`` (categorical), noise band."""
    xs = sorted(int(v) for v in summary[x].dropna().unique())
    pos = {v: i for i, v in enumerate(xs)}
    for k, c in enumerate(configs):
        g = summary[summary.config == c].sort_values(x)
        if g.empty:
            continue
        off = (k - (len(configs) - 1) / 2) * 0.06
        ax.errorbar([pos[int(v)] + off for v in g[x]], g["median"],
                    yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]], color=palette.get(c), marker="o",
                    capsize=3, label=c, ls="--" if c == AA else "-")
    nf = summary.drop_duplicates(x).set_index(x).noise_floor.reindex(xs)
    for v, f in nf.items():
        if not pd.isna(f):
            ax.fill_between([pos[int(v)] - 0.4, pos[int(v)] + 0.4], 1 - f, 1 + f, color="grey", alpha=0.15, lw=0)
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])


def fig_comparison(comparison: pd.DataFrame, out: Path, title: str, name: str = "published_vs_reproduced") \
        -> list[Path]:
    """Each claim: where its rule wants the interval (green), the published ratio, the reproduced median with its
    interval, the verdict. An interval end at or below 0 (a position, not a ratio) is drawn to the left edge
    with an arrow and its value, never clipped silently by the log axis."""
    c = comparison.reset_index(drop=True)
    by_runs = "runs" in c and bool((c.get("ci_method") == "t over runs").any())  # analysis.over_runs
    over, centre = ("runs", "geometric mean of the runs' medians") if by_runs else ("blocks", "median")
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.75 * len(c)))
    y = np.arange(len(c))
    ok = c.reproduced.notna()
    cols = [c[k] for k in ("published", "reproduced", "ci_low", "ci_high", "bound_low", "bound_high") if k in c]
    seen = pd.concat(cols).astype(float) if cols else pd.Series([1.0])
    seen = seen[(seen > 0) & np.isfinite(seen)]
    left, right = float(min(seen.min(), 1.0)) / 1.3, float(max(seen.max(), 1.0)) * 1.3
    # a median or interval end at or below the axis' left edge (a position, not a ratio) is drawn at the edge
    rep, low, high = (c[k].clip(lower=left) for k in ("reproduced", "ci_low", "ci_high"))
    ax.errorbar(rep[ok], y[ok], xerr=[(rep - low)[ok], (high - rep)[ok]],
                fmt="o", color="tab:blue", capsize=4,
                label=wrap(f"reproduced: {centre} and {caption(c[ok], n=over)}", 60) if ok.any() else "reproduced")
    ax.scatter(c.published, y, marker="s", color="tab:orange", zorder=3, label="published")
    for i, row in c.iterrows():
        a = row.get("bound_low", math.nan)
        b = row.get("bound_high", math.nan)
        if not (pd.isna(a) and pd.isna(b)):
            ax.fill_between([left if pd.isna(a) else a, right if pd.isna(b) else b], i - 0.3, i + 0.3,
                            color="tab:green", alpha=0.15, lw=0, label="held if the interval lies here" if i == 0
                            else None)
        if ok[i] and row.ci_low <= left:
            ax.plot([left], [i], marker="<", color="tab:blue", ms=7)
            words = f"to {row.ci_low:.2g}" + (f", median {row.reproduced:.2g}" if row.reproduced <= left else "")
            ax.annotate(words, (left, i), xytext=(4, 6), textcoords="offset points", fontsize=7, color="tab:blue")
        n = int(row.blocks)
        runs = f"{int(row.runs)} runs, " if by_runs and not pd.isna(row.runs) else ""
        ax.text(1.01, i, f"{row.verdict} ({runs}{n} block{'s' if n != 1 else ''})", transform=ax.get_yaxis_transform(),
                va="center", fontsize=8)
    ax.set_yticks(y, [wrap(t) for t in c.claim], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(left, right)
    figures.plain_log(ax.xaxis)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("ratio (log scale); green: where the claim's rule wants the interval for held")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.08), ncol=2)
    return figures.save(fig, out, name)


def wrap(text: str, width: int = 38) -> str:
    """Words on lines of at most ``width`` characters (figure labels)."""
    words, lines_, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + len(w) + 1 > width:
            lines_.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "\n".join([*lines_, cur])


def effects_table(summary: pd.DataFrame, x: str = "clients") -> pd.DataFrame:
    """Configurations x ``x``: "1.19x [1.05, 1.31] (noise +-8%, 6 blocks)" for a notebook."""
    s = summary.dropna(subset=["median"]).copy()
    s["effect"] = s.apply(effects.effect_label, axis=1)
    return s.pivot(index="config", columns=x, values="effect")

