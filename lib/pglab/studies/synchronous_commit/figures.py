"""The study's figures, each one function of the derived tables it shows (``analyze.draw`` picks them)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pglab.analysis import effects, figures, tables
from pglab.analysis.effects import AA
from pglab.studies.synchronous_commit.params import LEVELS

LEVEL_ORDER = ["on", "remote_apply", "remote_write", "local", "off"]  # strictest first
PALETTE = figures.palette(LEVELS)


def fig_tps_by_clients(summary: pd.DataFrame, points: pd.DataFrame, out: Path) -> list[Path]:
    w = summary.dropna(subset=["tps_median"])
    pts = points[points.kind == "write"]
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(w.level)]
    counts = sorted(int(c) for c in w.clients.unique())
    pos = {c: i for i, c in enumerate(counts)}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, lvl in enumerate(levels):
        g = w[w.level == lvl].sort_values("clients")
        x = np.array([pos[int(c)] for c in g.clients]) + (k - len(levels) / 2) * 0.05
        ax.errorbar(x, g.tps_median, yerr=[g.tps_median - g.tps_low, g.tps_high - g.tps_median], label=lvl,
                    color=PALETTE[lvl], marker="o", capsize=3)
        p = pts[(pts.config == lvl) & pts.clients.isin(list(pos))]  # a count whose every point was flagged: none
        px = [pos[int(c)] + (k - len(levels) / 2) * 0.05 for c in p.clients]
        ax.scatter(px, p.tps, color=PALETTE[lvl], s=8, alpha=0.35)
        figures.mark_steal(ax, px, p.tps, p.get("steal_flag", False))
    ax.set_xticks(range(len(counts)), [str(c) for c in counts])
    ax.set_yscale("log")
    figures.plain_log(ax.yaxis)
    ax.set_xlabel("pgbench clients (-c), as measured")
    ax.set_ylabel("primary write throughput (tps, log scale)")
    # a run whose groups differ in blocks (a steal-flagged point left out) names two kinds of interval: wrapped
    ax.set_title("Primary write throughput by synchronous_commit level\n" + tables.wrap(
        f"(median and {tables.caption(w, method='tps_method', n='tps_n')}; dots: points)", 75), fontsize=10)
    figures.outside_legend(ax, title="synchronous_commit", fontsize=8, title_fontsize=8)
    return figures.save(fig, out, "tps_by_clients")


def fig_ratio(summary: pd.DataFrame, ref: pd.DataFrame, out: Path) -> list[Path]:
    """Reproduced ratios to ``on`` beside the published ones (``ref``: the article's table with its ratios)."""
    s = summary.dropna(subset=["median"])
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(s.level)] + ([AA] if (s.level == AA).any() else [])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4), sharey=True)
    tables.ratio_panel(ax1, s.rename(columns={"level": "config"}), levels, PALETTE)
    for lvl in levels:
        r = ref[ref.synchronous_commit == lvl]
        if len(r):
            ax2.plot(r.clients.astype(str), r.ratio_to_on, marker="s", color=PALETTE[lvl], label=lvl)
    ax1.set_title("reproduced: per-block ratio, median and\n" + tables.wrap(tables.caption(s, n="blocks"), 55)
                  + "\n(grey band: A/A noise floor)", fontsize=10)
    ax2.set_title("published (article 002, SATA HDD)", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_yscale("log")
        figures.plain_log(ax.yaxis)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("pgbench clients (-c)")
    ax1.set_ylabel("tps / tps(on), log scale")
    figures.outside_legend(ax2, *ax1.get_legend_handles_labels(), title="synchronous_commit", fontsize=8,
                           title_fontsize=8)
    fig.suptitle("Cost of each level relative to synchronous_commit=on")
    return figures.save(fig, out, "ratio_to_on")


def fig_standby_reads(reads: pd.DataFrame, out: Path) -> list[Path]:
    r = reads.copy()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    order = [c for c in ("loaded", AA) if c in set(r.config)]
    sns.stripplot(data=r, x="config", y="ratio", order=order, ax=ax, jitter=False, size=6)  # jitter is random
    for i, c in enumerate(order):
        med, lo, hi, _ = effects.interval(r[r.config == c].ratio.to_numpy())
        ax.errorbar([i + 0.25], [med], yerr=[[med - lo], [hi - med]], color="black", marker="_", capsize=4)
    nf = effects.noise_floor(r[r.config == AA].ratio)
    if not math.isnan(nf):
        ax.axhspan(1 - nf, 1 + nf, color="grey", alpha=0.15, lw=0)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(order)), ["primary loaded\n/ idle", "idle again / idle\n(A/A)"][:len(order)])
    ax.set_xlabel("")
    ax.set_ylabel("standby select-only tps,\nratio within a block")
    methods = pd.DataFrame([{"ci_method": effects.interval(r[r.config == c].ratio.to_numpy())[3],
                             "n": int(r[r.config == c].ratio.notna().sum())} for c in order])
    ax.set_title("Standby reads with the primary under write load\n(dots: blocks; band: noise floor; whiskers: "
                 "median and\n" + tables.wrap(f"{tables.caption(methods)})", 60), fontsize=10)
    return figures.save(fig, out, "standby_reads")


def fig_flush_ladder(ladder: pd.DataFrame, published: dict[str, float], out: Path) -> list[Path]:
    """Each level's ratio to ``on`` as the emulated flush latency goes from this machine's disk to the article's
    (``analyze.judged_writes``); the article's values marked at its disk, the last level. A run whose writes ran
    at one flush latency has no ladder: the figure says so, so every declared figure exists (dvc plots lists them)."""
    if ladder.empty:
        return _no_ladder(out)
    lad = ladder[ladder.level.isin(["off", "local", "remote_write"])].dropna(subset=["median"])
    steps = list(dict.fromkeys(ladder.sort_values("flush_ms").flush))
    rates = ladder.groupby("flush").flush_ops_s.first() if "flush_ops_s" in ladder else pd.Series(dtype=float)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, lvl in enumerate(["off", "local", "remote_write"]):
        g = lad[lad.level == lvl].set_index("flush").reindex(steps)
        x = np.arange(len(steps)) + (k - 1) * 0.06
        ax.errorbar(x, g["median"], yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]], color=PALETTE[lvl],
                    marker="o", capsize=3, label=f"{lvl} / on")
        if lvl in published and not math.isnan(published[lvl]):
            ax.scatter([len(steps) - 1 + 0.25], [published[lvl]], marker="*", s=140, color=PALETTE[lvl],
                       edgecolor="black", zorder=5, label=f"{lvl} / on, the article ({published[lvl]:.3g})")
    ax.set_xticks(range(len(steps)), [s.replace(" (", "\n(") + (f"\n{rates[s]:,.0f} flushes/s measured"
                                      if s in rates and not pd.isna(rates[s]) else "") for s in steps])
    ax.set_yscale("log")
    figures.plain_log(ax.yaxis)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("emulated WAL flush latency (the last: the article's disk)")
    ax.set_ylabel("tps / tps(on), log scale")
    blocks = int(lad.blocks.max()) if len(lad) else 0
    ax.set_title("What a slow disk does to each level's cost: ratio to on, per flush latency\n"
                 f"(median over {blocks} blocks with its interval; stars: the article, SATA disk)", fontsize=10)
    figures.outside_legend(ax, fontsize=8)
    return figures.save(fig, out, "flush_ladder")


def _no_ladder(out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    ax.set_axis_off()
    ax.text(0.5, 0.5, "No flush ladder in this run: its writes ran at one flush latency\n(this machine's own "
            "disk, or the latency calibrated to the article's),\nso there is no step from this disk to the "
            "article's to draw.\nEach level's ratio to on at that latency: published_vs_reproduced.png\n"
            "and ratio_to_on.png.", ha="center", va="center", fontsize=10, transform=ax.transAxes)
    ax.set_title("What a slow disk does to each level's cost: ratio to on, per flush latency", fontsize=10)
    return figures.save(fig, out, "flush_ladder")
