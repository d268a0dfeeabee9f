"""The study's figures, each one function of the derived tables it shows (``analyze.draw`` picks them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pglab.analysis import figures, tables
from pglab.analysis.effects import AA
from pglab.studies.logical_replication.params import SYSTEMS

# the one name each system has in every figure (legends, tick labels, titles); data keep the run's names
LABELS = {"streaming": "streaming (physical, async)", "builtin": "built-in logical", "pglogical": "pglogical",
          "slony": "Slony-I", "londiste": "Londiste 3"}
PALETTE = figures.palette(SYSTEMS, aa="grey")


def label(system: str) -> str:
    """The display name of a system (``LABELS``); the A/A pair and anything unknown keep theirs."""
    return LABELS.get(system, system)


def labelled(frame: pd.DataFrame, col: str = "config") -> pd.DataFrame:
    """``frame`` with ``col`` in display names, for a shared figure function that labels by it (waits)."""
    return frame.assign(**{col: frame[col].map(label)})


def systems_in(frame: pd.DataFrame, col: str = "system") -> list[str]:
    """The systems ``frame`` has, in the study's order."""
    return [s for s in SYSTEMS if s in set(frame[col])]


def _lines(ax: plt.Axes, metric_summary: pd.DataFrame, points: pd.DataFrame, metric: str, dots: bool = True,
           **kw: Any) -> None:
    w = metric_summary[metric_summary.metric == metric]
    counts = sorted(int(c) for c in points.clients.unique())
    pos = {c: i for i, c in enumerate(counts)}
    for k, s in enumerate(systems_in(w)):
        g = w[w.system == s].sort_values("clients")
        off = (k - 2) * 0.05
        ax.errorbar([pos[int(c)] + off for c in g.clients], g["median"],
                    yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]], label=label(s), color=PALETTE[s],
                    marker="o", capsize=3, **kw)
        if dots:
            p = points[(points.config == s) & (points["copy"] == 1)]
            px = [pos[int(c)] + off for c in p.clients]
            ax.scatter(px, p[metric], color=PALETTE[s], s=8, alpha=0.35)
            figures.mark_steal(ax, px, p[metric], p.get("steal_flag", False))
    ax.set_xticks(range(len(counts)), [str(c) for c in counts])


def fig_sustainable(metric_summary: pd.DataFrame, points: pd.DataFrame, run_seconds: Any, out: Path) -> list[Path]:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    _lines(ax1, metric_summary, points, "sustainable_tps")
    _lines(ax2, metric_summary, points, "provider_tps")
    for ax, title in ((ax1, "sustainable: transactions / (run + catch-up)"),
                      (ax2, "provider's tps in the measured window (warm-up cut)")):
        ax.set_xlabel("pgbench clients on the provider (-c), as measured")
        ax.set_title(title, fontsize=10)
    ax1.set_ylabel("throughput (tps)")
    figures.outside_legend(ax2, *ax1.get_legend_handles_labels(), fontsize=8)
    w = metric_summary[metric_summary.metric == "sustainable_tps"]
    fig.suptitle(f"Write throughput a subscriber can sustain, per replication system\n(median and "
                 f"{tables.caption(w)}, runs of {run_seconds} s; dots: points)", fontsize=11)
    return figures.save(fig, out, "sustainable_tps")


def fig_ratio(summary: pd.DataFrame, ref: pd.DataFrame, out: Path) -> list[Path]:
    """Reproduced ratios to streaming beside the published ones (``ref``: the article's table with its ratios)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4), sharey=True)
    configs = systems_in(summary) + ([AA] if (summary.system == AA).any() else [])
    tables.ratio_panel(ax1, labelled(summary.rename(columns={"system": "config"})), [label(c) for c in configs],
                       {label(c): colour for c, colour in PALETTE.items()})
    for s in systems_in(ref):
        g = ref[ref.system == s]
        ax2.plot(g.clients.astype(str), g.ratio_to_streaming, marker="s", color=PALETTE[s], label=label(s))
    ax1.set_title(f"reproduced: per-block ratio, median and\n{tables.caption(summary, n='blocks')}\n"
                  "(grey band: A/A noise floor)", fontsize=10)
    ax2.set_title("published (article 000, 2 x i2.4xlarge)", fontsize=10)
    for ax in (ax1, ax2):
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("pgbench clients on the provider (-c)")
    ax1.set_ylabel("sustainable tps / streaming's")
    handles, names = ax1.get_legend_handles_labels()
    for h, n in zip(*ax2.get_legend_handles_labels(), strict=True):  # streaming: the published panel's line at 1
        if n not in names:
            handles, names = [*handles, h], [*names, n]
    figures.outside_legend(ax2, handles, names, fontsize=8)
    fig.suptitle("Each system relative to physical streaming replication")
    return figures.save(fig, out, "ratio_to_streaming")


def fig_catchup(metric_summary: pd.DataFrame, points: pd.DataFrame, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    _lines(ax, metric_summary, points, "catchup_s")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0)
    figures.plain_log(ax.yaxis)  # 0, 0.1, 1 (text is not parsed as math: the default labels printed its markup)
    ax.set_xlabel("pgbench clients on the provider, as measured")
    ax.set_ylabel("catch-up after the run (s, symlog)")
    w = metric_summary[metric_summary.metric == "catchup_s"]
    ax.set_title("Catch-up: until a marker committed at the end of the run is applied\n"
                 f"(median and {tables.caption(w)}; dots: points)", fontsize=10)
    figures.outside_legend(ax, fontsize=8)
    return figures.save(fig, out, "catchup")


def representative_points(points: pd.DataFrame) -> dict[str, str]:
    """Per system, at its largest client count, the run whose sustainable tps is closest to the median."""
    s = points[points["copy"] == 1]
    chosen = {}
    for system in systems_in(s, "config"):
        g = s[(s.config == system) & (s.clients == s[s.config == system].clients.max())]
        med = g.sustainable_tps.median()
        chosen[system] = g.assign(d=(g.sustainable_tps - med).abs()).sort_values(["d", "point"]).point.iloc[0]
    return chosen


def fig_lag(points: pd.DataFrame, lag: pd.DataFrame, out: Path) -> list[Path]:
    """Lag in seconds (solid, left axis) and in MB of WAL or events (dotted, right axis) over one run per system;
    a system that reports no lag in seconds says so in its panel instead of showing an empty axis."""
    chosen = representative_points(points)
    systems = [s for s in chosen if (lag.point == chosen[s]).any()]
    fig, axes = plt.subplots(len(systems) or 1, 1, figsize=(8, 2.1 * max(1, len(systems))), sharex=True,
                             squeeze=False)
    for ax, s in zip(axes[:, 0], systems, strict=False):
        g = lag[lag.point == chosen[s]].sort_values("t_s")
        if g.lag_s.notna().any():
            ax.plot(g.t_s, g.lag_s, color=PALETTE[s], marker=".")
        else:
            ax.text(0.5, 0.5, f"{label(s)} reported no lag in seconds (replay_lag empty):\nonly its lag in "
                    "bytes (dotted) was sampled", transform=ax.transAxes, ha="center", va="center", fontsize=8,
                    color="dimgrey", bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.9})
            ax.set_yticks([])
        end = g[g.phase != "run"].t_s.min()
        if not np.isnan(end):
            ax.axvline(end, color="grey", ls="--", lw=0.8)
        other = "lag_bytes" if g.lag_bytes.notna().any() else "lag_events"
        if g[other].notna().any():
            ax2 = ax.twinx()
            scale, unit = (1e6, "MB of WAL") if other == "lag_bytes" else (1.0, "events")
            ax2.plot(g.t_s, g[other] / scale, color=PALETTE[s], ls=":", lw=1)
            ax2.set_ylabel(f"{unit} behind\n(dotted)", fontsize=8)
            ax2.ticklabel_format(axis="y", style="plain", useOffset=False)
            ax2.grid(False)
        ax.set_ylabel("lag (s)", fontsize=8)
        ax.set_title(f"{label(s)}: {chosen[s]}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds since the run started (dashed: run ended)")
    fig.suptitle("Replication lag during one representative run per system (largest client count)", fontsize=11)
    return figures.save(fig, out, "lag_over_time")
