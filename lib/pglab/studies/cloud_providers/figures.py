"""The study's figures, each one function of the derived tables it shows (``analyze.draw`` picks them).

Targets are named by the run, so their colours come from the run's target order (``figures.palette``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pglab.analysis import effects, figures, tables
from pglab.analysis.stats import median_interval


def fig_init_phases(init_phases: pd.DataFrame, order: list[str], phase_order: list[str], scale: Any,
                    out: Path) -> list[Path]:
    """Stacked bars: median seconds of each pgbench -i phase per target."""
    ph = init_phases[init_phases.phase != "total"]
    wide = ph.pivot(index="target", columns="phase", values="median_s").reindex(
        index=[t for t in order if t in set(ph.target)], columns=[p for p in phase_order if p in set(ph.phase)])
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.6 * len(wide)))
    wide.plot.barh(stacked=True, ax=ax, colormap="tab10", width=0.6)
    tot = init_phases[init_phases.phase == "total"].set_index("target")
    for i, t in enumerate(wide.index):
        if t in tot.index:
            r = tot.loc[t]
            ax.errorbar([r.median_s], [i], xerr=[[r.median_s - r.low_s], [r.high_s - r.median_s]], color="black",
                        capsize=3, fmt="none")
    ax.invert_yaxis()
    ax.set_xlim(left=0)  # a bar's length is its value
    ax.set_xlabel("seconds (median over blocks; whisker: interval of the total)")
    ax.set_ylabel("")
    ax.set_title(f"pgbench -i --fillfactor=90 --scale={scale}: time per phase and target", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figures.save(fig, out, "init_phases")


def fig_tps_over_time(timeseries: pd.DataFrame, stalls: pd.DataFrame, order: list[str], warmup_s: float,
                      pal: dict[str, Any], out: Path) -> list[Path]:
    """pgbench tps and latency per progress interval: one line per point, one colour per target."""
    ts = timeseries[timeseries.kind == "pgbench"]
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for t in [t for t in order if t in set(ts.config)]:
        first = True
        for _, g in ts[ts.config == t].groupby("point"):
            g = g.sort_values("time_s")
            for ax, col in zip(axes, ("tps", "latency_ms"), strict=True):
                ax.plot(g.time_s, g[col], color=pal[t], alpha=0.5, lw=1, label=t if first and col == "tps" else None)
            first = False
    for ax in axes:
        ax.axvspan(0, warmup_s, color="grey", alpha=0.12, lw=0)
    st = stalls[stalls.kind == "pgbench"] if len(stalls) else stalls
    for r in st.itertuples():
        for x in str(r.stall_times).split():
            axes[0].axvline(float(x), color="red", lw=0.8, ls=":")
    axes[0].set_ylabel("tps per progress interval")
    axes[1].set_ylabel("latency average (ms)")
    axes[1].set_xlabel("seconds into the run (grey: warm-up, cut; red dotted: stalls, 0 tps)")
    axes[0].legend(fontsize=8)
    axes[0].set_title("pgbench --protocol=prepared: tps and latency over time, every point of every block",
                      fontsize=10)
    return figures.save(fig, out, "tps_over_time")


def _dots(ax: plt.Axes, pts: pd.DataFrame, col: str, order: list[str], pal: dict[str, Any]) -> None:
    ts = [t for t in order if t in set(pts.config)]
    for i, t in enumerate(ts):
        mine = pts[pts.config == t]
        v = pd.to_numeric(mine[col], errors="coerce").dropna()
        ax.scatter([i] * len(v), v, color=pal[t], alpha=0.6, s=18)
        figures.mark_steal(ax, [i] * len(v), v, mine.loc[v.index].get("steal_flag", False))
        med, lo, hi, _ = median_interval(v.to_numpy(dtype=float))
        if not math.isnan(med):
            ax.errorbar([i + 0.15], [med], yerr=[[med - lo], [hi - med]], color="black", marker="_", capsize=4)
    ax.set_xlim(-0.5, len(ts) - 0.5)
    ax.set_xticks(range(len(ts)), ts)


def _interval_kinds(pts: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per target, the interval ``_dots`` draws and over how many points (for the caption)."""
    rows = [median_interval(pts[pts.config == t].tps.dropna().to_numpy(dtype=float)) for t in order
            if t in set(pts.config)]
    return pd.DataFrame({"ci_method": [r[3] for r in rows],
                         "n": [int(pts[pts.config == t].tps.notna().sum()) for t in order if t in set(pts.config)]})


def fig_sysbench(timeseries: pd.DataFrame, points: pd.DataFrame, order: list[str], test: str, pal: dict[str, Any],
                 out: Path) -> list[Path]:
    """sysbench tps and p95 over time (top) and per target (bottom: points, median and interval)."""
    ts = timeseries[timeseries.kind == "sysbench"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for t in [t for t in order if t in set(ts.config)]:
        first = True
        for _, g in ts[ts.config == t].groupby("point"):
            g = g.sort_values("time_s")
            axes[0][0].plot(g.time_s, g.tps, color=pal[t], alpha=0.5, lw=1, label=t if first else None)
            axes[0][1].plot(g.time_s, g.p95_ms, color=pal[t], alpha=0.5, lw=1)
            first = False
    axes[0][0].set_ylabel("tps per report interval")
    axes[0][1].set_ylabel("p95 latency per interval (ms)")
    for ax in axes[0]:
        ax.set_xlabel("seconds into the run")
    axes[0][0].legend(fontsize=8)
    pts = points[(points.kind == "sysbench") & (points["copy"] == 1)]
    _dots(axes[1][0], pts, "tps", order, pal)
    _dots(axes[1][1], pts, "p95_ms", order, pal)
    axes[1][0].set_ylabel("tps after the warm-up")
    axes[1][1].set_ylabel("p95 latency of the run (ms)")
    fig.suptitle(f"sysbench {test}: over time (top), per target\n(bottom: points, median and "
                 f"{tables.caption(_interval_kinds(pts, order))})")
    return figures.save(fig, out, "sysbench")


def fig_ranking(summary: pd.DataFrame, rankings: dict[str, str], metrics: list[str], order: list[str],
                baseline: Any, pal: dict[str, Any], out: Path) -> list[Path]:
    """Each metric's ratio to the baseline per target: median, 95% interval, noise band; the ranking text.

    ``metrics``: the metrics in the study's order; their titles and which way is better come from ``summary``.
    """
    s = summary
    metrics = [m for m in metrics if m in set(s.metric)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(2.9 * len(metrics) + 1, 4.2), squeeze=False)
    for ax, m in zip(axes[0], metrics, strict=True):
        g = s[s.metric == m].set_index("target")
        ts = [t for t in order if t in g.index]
        nf = g.noise_floor.dropna()
        if len(nf):
            ax.axhspan(1 - nf.iloc[0], 1 + nf.iloc[0], color="grey", alpha=0.15, lw=0)
        for i, t in enumerate(ts):
            r = g.loc[t]
            if not pd.isna(r.ratio_low):
                ax.errorbar([i], [r.ratio_to_baseline], yerr=[[r.ratio_to_baseline - r.ratio_low],
                                                              [r.ratio_high - r.ratio_to_baseline]],
                            color=pal[t], marker="o", capsize=3)
            else:
                ax.scatter([i], [r.ratio_to_baseline], color=pal[t])
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlim(-0.5, len(ts) - 0.5)
        ax.set_xticks(range(len(ts)), ts, rotation=30)
        ax.set_title(f"{g.title.iloc[0]}\n({g.better.iloc[0]} is better)", fontsize=9)
        ax.set_xlabel(tables.wrap(rankings.get(m, ""), 28), fontsize=7)
    axes[0][0].set_ylabel(f"ratio to {baseline} (same block)")
    drawn = s[s.ratio_low.notna()]
    kinds = pd.DataFrame({"ci_method": [effects.interval_method(int(n)) for n in drawn.n], "n": drawn.n})
    fig.suptitle(f"Ratios to the baseline per block: median and {tables.caption(kinds)}; grey: A/A noise floor")
    return figures.save(fig, out, "ranking")


LOG_SPAN = 10.0  # values further apart than this do not fit one linear axis from 0


def _value(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _context_panel(ax: plt.Axes, cols: list[str], vals: np.ndarray, article: str, pal: dict[str, Any]) -> str:
    """Bars from 0 when the values are within ``LOG_SPAN`` of each other (a bar's length is its value); points
    on a log axis when they span more (a bar on a log axis has no length to read). Returns the axis' scale."""
    ok = np.isfinite(vals) & (vals > 0)
    x = np.arange(len(cols))
    colour = ["lightgrey" if col == article else pal[col] for col in cols]
    log = bool(ok.any()) and vals[ok].max() / vals[ok].min() > LOG_SPAN
    if log:
        for i in x[ok]:
            ax.scatter([i], [vals[i]], s=70, zorder=3, color=colour[i], edgecolor="dimgrey",
                       marker="s" if cols[i] == article else "o", hatch="///" if cols[i] == article else None)
        ax.set_yscale("log")
        ax.margins(y=0.2)
        figures.plain_log(ax.yaxis)
    else:
        ax.bar(x[ok], vals[ok], 0.7, alpha=0.85, color=[colour[i] for i in x[ok]],
               hatch=["//" if cols[i] == article else "" for i in x[ok]], edgecolor="dimgrey", lw=0.5)
        ax.set_ylim(0, float(vals[ok].max()) * 1.15 if ok.any() else 1.0)
    for i in x:
        ax.annotate(_value(vals[i]) if ok[i] else "n/a", (i, vals[i] if ok[i] else 0.0), xytext=(0, 9 if log else 4),
                    textcoords="offset points", ha="center", fontsize=8,
                    xycoords="data" if ok[i] else ("data", "axes fraction"))
    ax.set_xlim(-0.6, len(cols) - 0.4)
    ax.set_xticks(x, [tables.wrap(col, 10) for col in cols], fontsize=8)
    return "log scale" if log else "from 0"


def fig_context(context: pd.DataFrame, order: list[str], pal: dict[str, Any], out: Path) -> list[Path]:
    """The article's Cloud SQL numbers beside ours: context only, not a comparison. One panel per metric, so
    that tps, seconds and milliseconds each get their own axis and unit."""
    c = context[context.metric.isin(["tps_excluding_connections", "total_time", "tps", "latency_p95"])]
    article = "article: Cloud SQL"
    cols = [article, *[t for t in order if t in c]]
    fig, axes = plt.subplots(1, len(c), figsize=(2.7 * len(c) + 0.6, 4.0), squeeze=False)
    for ax, (_, r) in zip(axes[0], c.iterrows(), strict=True):
        vals = pd.to_numeric(r[cols], errors="coerce").to_numpy(dtype=float)
        scale = _context_panel(ax, cols, vals, article, pal)
        ax.set_ylabel(f"{r.metric} ({r.unit}, {scale})", fontsize=9)
        ax.set_title(r.benchmark, fontsize=9)
    fig.suptitle("Context only: the article's Cloud SQL (scale 10000, 1000 clients, 8 vCPU) vs this run's "
                 "targets at their own scale\n(this run: median over blocks; a panel whose values span more than "
                 f"{LOG_SPAN:g}x shows points on a log axis, not bars)", fontsize=10)
    return figures.save(fig, out, "article_context")
