"""The figures of a rate-at-a-latency-target campaign (``pglab slo``), each one function of its tables
(``pglab.analysis.slo_runs``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pglab.analysis import figures


def fig_rates(summary: pd.DataFrame, runs: pd.DataFrame, target_ms: float, out: Path) -> list[Path]:
    """Each configuration's SLO rate over runs (bar: geometric mean; whisker: 95% interval; dots: each run,
    hollow when marked and left out) beside its closed-loop peak (a diamond): what the target costs."""
    order = list(summary.config)
    pal = figures.palette(order)
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.6 * len(order)))
    y = np.arange(len(order))
    for i, r in enumerate(summary.itertuples()):
        if not math.isnan(r.slo_rate):
            ax.barh(i, r.slo_rate, color=pal[r.config], height=0.55, alpha=0.85)
            if not math.isnan(r.ci_low):
                ax.errorbar(r.slo_rate, i, xerr=[[r.slo_rate - r.ci_low], [r.ci_high - r.slo_rate]], color="black",
                            capsize=4, lw=1)
        g = runs[runs.config == r.config]
        kept, marked = g[g.marked == ""], g[g.marked != ""]
        ax.scatter(kept.slo_rate, np.full(len(kept), i + 0.12), color="black", s=14, zorder=4)
        ax.scatter(marked.slo_rate, np.full(len(marked), i + 0.12), facecolor="none", edgecolor="black", s=14,
                   zorder=4)
        if not math.isnan(r.peak_tps):
            ax.scatter([r.peak_tps], [i], marker="D", color="white", edgecolor=pal[r.config], s=50, zorder=5,
                       linewidths=1.5)
    ax.scatter([], [], marker="D", color="white", edgecolor="grey", label="closed-loop peak (no rate limit)")
    ax.scatter([], [], color="black", s=14, label="each run's SLO rate")
    if (runs.marked != "").any():
        ax.scatter([], [], facecolor="none", edgecolor="black", s=14, label="a marked run's (left out)")
    ax.set_yticks(y, order)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("transactions per second")
    ax.set_title(f"The highest Poisson rate with p99 <= {target_ms:g} ms, per configuration\n(bar: geometric mean "
                 "over runs; whisker: its 95% interval; diamond: the peak)", fontsize=10)
    figures.outside_legend(ax, fontsize=8)
    return figures.save(fig, out, "slo_rates")


def fig_latency_curve(trials: pd.DataFrame, target_ms: float, out: Path, order: Sequence[str] = ()) -> list[Path]:
    """p50 and p99 against the offered rate for every trial of every search (filled: a good trial; hollow: a
    bad one), the target drawn: where each configuration's latency leaves the target as the rate rises."""
    configs = list(dict.fromkeys([*[c for c in order if c in set(trials.config)], *trials.config]))
    pal = figures.palette(configs)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharex=True)
    for ax, col, name in ((axes[0], "p50_ms", "p50"), (axes[1], "p99_ms", "p99")):
        for c in configs:
            g = trials[(trials.config == c)].copy()
            g[col] = pd.to_numeric(g[col], errors="coerce").replace(np.inf, np.nan)
            g = g.dropna(subset=[col])
            good, bad = g[g.good], g[~g.good]
            ax.scatter(good.rate, good[col], color=pal[c], s=18, label=c)
            ax.scatter(bad.rate, bad[col], facecolor="none", edgecolor=pal[c], s=18)
        ax.axhline(target_ms, color="grey", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.plain_log(ax.xaxis)
        figures.plain_log(ax.yaxis)
        ax.set_xlabel("offered rate (transactions/s, Poisson), log scale")
        ax.set_ylabel(f"{name} latency from the schedule (ms), log")
        ax.set_title(f"{name} per trial (dashed: the {target_ms:g} ms target)", fontsize=10)
    axes[1].scatter([], [], facecolor="none", edgecolor="grey", s=18, label="hollow: a bad trial")
    figures.outside_legend(axes[1], fontsize=8)
    figures.suptitle(fig, "Latency against the offered rate: every trial of every search, every run")
    return figures.save(fig, out, "latency_curve")
