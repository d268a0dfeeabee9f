"""The study's figures, each one function of the derived tables it shows (``analyze.draw`` picks them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from pglab.analysis import effects, figures, placement, tables
from pglab.analysis.effects import AA
from pglab.studies.streaming_scale_out.params import MODES

PALETTE = figures.palette(MODES)


def _mode_ticks(ax: plt.Axes, order: list[str]) -> None:
    """Mode names on two lines (sync_ / apply): six fit a panel side by side, unrotated."""
    ax.set_xticks(range(len(order)), [m.replace("_", "_\n", 1) for m in order], fontsize=9)


def fig_rows(points: pd.DataFrame, summary: pd.DataFrame, out: Path) -> list[Path]:
    """Left: rows/s of every point and the median per mode; right: the ratio to none with its interval."""
    pts = points[(points.kind == "insert") & (points["copy"] == 1)]
    modes = [m for m in MODES if m in set(pts.config)]
    layouts = sorted(set(pts.group))
    fig, axes = plt.subplots(len(layouts), 2, figsize=(12, 3.9 * len(layouts)), squeeze=False)
    for (ax, ax2), lay in zip(axes, layouts, strict=True):
        p = pts[pts.group == lay]
        sns.stripplot(data=p, x="config", y="rows_per_s", order=modes, hue="config", palette=PALETTE, ax=ax,
                      jitter=False, size=5, alpha=0.7, legend=False)
        s = summary[(summary.group == lay)].set_index("config")
        for i, m in enumerate(modes):
            if m in s.index and not pd.isna(s.loc[m, "rate_median"]):
                r = s.loc[m]
                ax.errorbar([i + 0.2], [r.rate_median], yerr=[[r.rate_median - r.rate_low],
                                                              [r.rate_high - r.rate_median]],
                            color="black", marker="_", capsize=4)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("")
        _mode_ticks(ax, modes)
        ax.set_ylabel("insert rate (rows/s; x10 = metrics/s)")
        rate = s[s.index.isin(modes)].dropna(subset=["rate_median"])
        ax.set_title(f"{lay}: insert rate per point\n(whiskers: median and "
                     f"{tables.caption(rate, method='rate_method', n='rate_n')})", fontsize=10)
        r = s[(s.kind == "insert") & s["median"].notna()]
        order = [m for m in [*modes, AA] if m in r.index]
        for i, m in enumerate(order):
            row = r.loc[m]
            ax2.errorbar([i], [row["median"]], yerr=[[row["median"] - row.ci_low], [row.ci_high - row["median"]]],
                         color=PALETTE.get(m), marker="o", capsize=4, ls="none")
            ax2.annotate(f"{row['median']:.2f}", (i, row["median"]), xytext=(6, 0), textcoords="offset points",
                         fontsize=8, va="center")
        nf = r.noise_floor.dropna()
        if len(nf):
            ax2.axhspan(1 - nf.iloc[0], 1 + nf.iloc[0], color="grey", alpha=0.15, lw=0)
        ax2.axhline(1.0, color="grey", lw=0.8)
        # the article's line named in a legend low on the left, where no ratio lands (a label on the line
        # collided with a ratio of about 0.5 at the right)
        ax2.axhline(0.5, color="tab:orange", lw=0.8, ls=":", label="article: sync_apply about 0.5")
        ax2.legend(loc="lower left", fontsize=7, frameon=False)
        _mode_ticks(ax2, order)
        ax2.set_ylim(0, max(1.3, float(r.ci_high.max()) + 0.1) if len(r) else 1.3)
        ax2.set_ylabel("rows/s / rows/s(none), per block")
        ax2.set_title(f"{lay}: ratio to no replication, median and\n"
                      + tables.wrap(f"{tables.caption(r, n='blocks')} (grey: A/A noise floor)", 48), fontsize=10)
    fig.suptitle("Time-series inserts (TSBS cpu-only) by replication mode")
    return figures.save(fig, out, "rows_by_mode")


def first_points(points: pd.DataFrame) -> pd.DataFrame:
    """The first block's insert point of every layout and mode: the ones whose lag ``fig_lag`` shows."""
    ins = points[(points.kind == "insert") & (points["copy"] == 1)]
    return ins.sort_values("block").groupby(["group", "config"]).head(1)


def fig_lag(first: pd.DataFrame, lags: Mapping[str, pd.DataFrame], out: Path) -> list[Path]:
    """Each standby's replay lag over the load (``lags``: point -> its samples) for the ``first`` points."""
    modes = [m for m in MODES if m in set(first.config) and m != "none"]
    if not modes:
        modes = sorted(set(first.config))
    fig, axes = plt.subplots(1, len(modes), figsize=(3.4 * len(modes) + 1, 3.6), squeeze=False, sharey=True)
    for ax, m in zip(axes[0], modes, strict=True):
        for r in first[first.config == m].itertuples():
            for sb, g in lags[r.point].groupby("standby"):
                ax.plot(g.t_s, g.replay_lag_bytes / 1e6, label=f"{sb} ({r.group})", lw=1)
        ax.set_title(m, fontsize=10)
        ax.set_xlabel("seconds into the load")
        if ax is axes[0][0]:
            ax.set_ylabel("replay lag (MB of WAL)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle("Standbys' replay lag during the load (pg_stat_replication, first block)")
    return figures.save(fig, out, "lag_during_load")


def fig_reads(reads: pd.DataFrame, manifest: dict[str, Any], out: Path) -> list[Path]:
    """Left: queries/s by node count per query type; right: the speed-up over 1 node with its interval."""
    r = reads
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.4))
    for (lay, q), g in r.groupby(["layout", "query_type"], sort=True):
        g = g.sort_values("nodes")
        label = q if r.layout.nunique() == 1 else f"{q} ({lay})"
        ax.errorbar(g.nodes, g.qps_median, yerr=[g.qps_median - g.qps_low, g.qps_high - g.qps_median], marker="o",
                    capsize=3, label=label)
        ax2.errorbar(g.nodes, g.speedup, yerr=[(g.speedup - g.speedup_low).fillna(0),
                                                (g.speedup_high - g.speedup).fillna(0)], marker="o", capsize=3,
                     label=label)
    nodes = sorted(set(r.nodes))
    ax.set_xticks(nodes)
    ax.set_yscale("log")
    ax.set_xlabel("nodes serving reads (primary + standbys)")
    ax.set_ylabel("read throughput, all nodes (queries/s, log)")
    kinds = pd.DataFrame({"ci_method": [effects.interval_method(int(n)) for n in r.points], "n": r.points})
    ax.set_title("Read throughput by node count\n" + tables.wrap(f"(median and {tables.caption(kinds)})", 44),
                 fontsize=10)
    figures.plain_log(ax.yaxis)  # one legend, the right panel's, names the lines of both
    ax2.plot(nodes, nodes, color="grey", ls=":", lw=1, label="linear")
    pub = [(n, v) for n, v in ((3, 2.5), (5, 4.8)) if n in nodes]
    ax2.scatter([n for n, _ in pub], [v for _, v in pub], marker="s", facecolor="none", edgecolor="tab:orange",
                s=70, zorder=3, label="article (separate VMs)")
    ax2.set_xticks(nodes)
    ax2.set_xlabel("nodes serving reads")
    ax2.set_ylabel("queries/s over queries/s of 1 node, per block")
    ax2.set_title("Speed-up over 1 node\n" + ("(nodes share one machine: not a scale-out)"
                                              if len(placement.machines(manifest)) == 1 else ""), fontsize=10)
    figures.outside_legend(ax2, fontsize=7)
    # the note under the panels, wrapped to the figure's width; constrained layout keeps room for it
    fig.supxlabel(tables.wrap(placement.summary(manifest), 190), fontsize=7, x=0.01, ha="left")
    return figures.save(fig, out, "reads_by_nodes")
