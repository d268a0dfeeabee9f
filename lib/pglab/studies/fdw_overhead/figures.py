"""The study's figures, each one function of the derived tables it shows (``analyze.draw`` picks them)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from pglab.analysis import figures, tables
from pglab.studies.fdw_overhead.params import TARGETS

PALETTE = figures.palette(TARGETS)


def _group_order(groups: list[str]) -> list[str]:
    return sorted(groups, key=lambda g: (not g.startswith("rw"), g))


def group_label(kind: str, clients: int, variant: str = "default") -> str:
    """One name per group in every figure (``RW, 1 client``), whether a table has the group's name (``rw-c001``)
    or its workload, client count and variant."""
    words = f"{kind.upper()}, {int(clients)} client{'s' if int(clients) != 1 else ''}"
    return words if variant in ("", "default") else f"{words}, {variant}"


def _named(group: str) -> str:
    """The display name of a group named by the run (``rw-c001-Mprepared``: workload, clients, variant)."""
    kind, clients, *variant = group.split("-")
    return group_label(kind, int(clients[1:]), "-".join(variant))


def _target_ticks(ax: plt.Axes, order: list[str]) -> None:
    """Target names on two lines (FDW_ / external): four of them fit a panel side by side, unrotated."""
    ax.set_xticks(range(len(order)), [t.replace("_", "_\n", 1) for t in order], fontsize=9)


def fig_tps(points: pd.DataFrame, summary: pd.DataFrame, out: Path) -> list[Path]:
    """Every point as a dot, the median and its interval as a bar, per group (workload x clients)."""
    pts = points[points["copy"] == 1]
    groups = _group_order(sorted(set(pts.group)))
    targets = [t for t in TARGETS if t in set(pts.config)]
    fig, axes = plt.subplots(1, len(groups), figsize=(3.8 * len(groups) + 1, 4.2), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        p = pts[pts.group == g]
        order = [t for t in targets if t in set(p.config)]
        sns.stripplot(data=p, x="config", y="tps", order=order, hue="config", palette=PALETTE, ax=ax, jitter=False,
                      size=4, alpha=0.6, legend=False)
        figures.mark_steal(ax, [order.index(c) for c in p.config], p.tps, p.get("steal_flag", False))
        s = summary[(summary.group == g)].set_index("target")
        for i, t in enumerate(order):
            if t in s.index and not pd.isna(s.loc[t, "tps_median"]):
                r = s.loc[t]
                ax.errorbar([i + 0.2], [r.tps_median], yerr=[[r.tps_median - r.tps_low], [r.tps_high - r.tps_median]],
                            color="black", marker="_", capsize=4)
        ax.set_yscale("log")
        figures.plain_log(ax.yaxis)
        ax.set_title(_named(g), fontsize=10)
        ax.set_xlabel("")
        _target_ticks(ax, order)
        ax.set_ylabel("tps in the measured window (log)" if ax is axes[0][0] else "")
    s = summary[summary.target.isin(targets)].dropna(subset=["tps_median"])
    figures.suptitle(fig, f"pgbench tps by target (dots: points; whiskers: median and "
                          f"{tables.caption(s, method='tps_method', n='tps_n')})")
    return figures.save(fig, out, "tps_by_target")


def fig_factor(summary: pd.DataFrame, ref: pd.DataFrame, foreign: list[str], out: Path) -> list[Path]:
    """Our overhead factor per ``foreign`` target and group beside the article's (``ref``), with the noise band."""
    s = summary.dropna(subset=["factor"])
    groups = _group_order(sorted(set(s.group)))
    targets = [t for t in foreign if t in set(s.target)]
    # at least as wide as its three-line title: a run whose foreign targets were all flagged but one draws few bars
    fig, ax = plt.subplots(figsize=(max(7.0, 1.8 + 1.6 * len(groups) * max(1, len(targets)) / 2), 4.4))
    width = 0.8 / max(1, len(targets) + 1)
    labelled: set[str] = set()
    for gi, g in enumerate(groups):
        gs = s[s.group == g].set_index("target")
        nf = gs.noise_floor.dropna()
        if len(nf):
            ax.fill_between([gi - 0.45, gi + 0.45], 1 - nf.iloc[0], 1 + nf.iloc[0], color="grey", alpha=0.15, lw=0)
        kind, c = g.split("-")[0].upper(), int(g.split("-")[1][1:])
        for ti, t in enumerate(targets):
            x = gi + (ti - (len(targets) - 1) / 2) * width
            if t in gs.index:
                r = gs.loc[t]
                ax.errorbar([x], [r.factor], yerr=[[r.factor - r.ci_low], [r.ci_high - r.factor]], color=PALETTE[t],
                            marker="o", capsize=3, label=None if t in labelled else t)
                labelled.add(t)
            pub = ref[(ref.type == kind) & (ref.target == t) & (ref.clients == c)]
            if len(pub):
                ax.scatter([x], pub.factor, marker="s", facecolor="none", edgecolor=PALETTE[t], s=60, zorder=3,
                           label=None if "article" in labelled else "article (open squares)")
                labelled.add("article")
    ax.set_xticks(range(len(groups)), [_named(g) for g in groups])
    ax.set_yscale("log")
    figures.plain_log(ax.yaxis)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("overhead factor = tps(local) / tps(target), log")
    ax.set_title(f"What postgres_fdw costs: overhead factor per block, median and\n"
                 f"{tables.caption(s[s.target.isin(targets)], n='blocks')}\n"
                 "(grey band: A/A noise floor; open squares: the article's factor)", fontsize=10)
    figures.outside_legend(ax, fontsize=8)
    return figures.save(fig, out, "overhead_factor")


PERCENTILES = {"p50_ms": ("p50 (median)", "o"), "p95_ms": ("p95", "D"), "p99_ms": ("p99", "^")}


def fig_latency(latency: pd.DataFrame, out: Path) -> list[Path]:
    """Per target, its latency percentiles as points joined by a line from p50 to p99, on a log axis: a target
    costs a factor (local against FDW is 5x at p50), and a bar on a log axis has no length to read."""
    keys = list(zip(latency.kind, latency.clients.astype(int), latency.variant, strict=True))
    lat = latency.assign(group=[group_label(*k) for k in keys])
    groups = [group_label(*k) for k in sorted(set(keys), key=lambda k: (k[0] != "RW", *k))]  # RW first, as elsewhere
    fig, axes = plt.subplots(1, len(groups), figsize=(3.4 * len(groups) + 1.6, 4.0), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        d = lat[lat.group == g].set_index("target")
        order = [t for t in TARGETS if t in d.index]
        for i, t in enumerate(order):
            r = d.loc[t]
            ax.plot([i, i], [r.p50_ms, r.p99_ms], color=PALETTE[t], lw=2.5, alpha=0.5, solid_capstyle="butt")
            for col, (_, marker) in PERCENTILES.items():
                ax.scatter([i], [r[col]], marker=marker, s=36, color=PALETTE[t], edgecolor="black", lw=0.5, zorder=3)
        ax.set_yscale("log")
        ax.margins(y=0.12)
        figures.plain_log(ax.yaxis)
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.set_title(g, fontsize=10)
        _target_ticks(ax, order)
        ax.set_ylabel("transaction latency (ms, log scale)" if ax is axes[0][0] else "")
    handles = [Line2D([], [], ls="none", marker=m, color="grey", markeredgecolor="black", label=name)
               for name, m in PERCENTILES.values()]
    handles.append(Line2D([], [], color="grey", lw=2.5, alpha=0.5, label="p50 to p99"))
    figures.outside_legend(axes[0][-1], handles=handles, title="percentile", fontsize=8, title_fontsize=8)
    figures.suptitle(fig, "Latency percentiles by target, merged over every transaction of every block (pgbench -l)")
    return figures.save(fig, out, "latency_by_target")


def fig_round_trips(round_trips: pd.DataFrame, out: Path) -> list[Path]:
    rt = round_trips[round_trips.statement != "all"]
    wide = rt.assign(row=rt.workload + " " + rt.target).pivot_table(index="row", columns="statement",
                                                                      values="per_transaction", aggfunc="sum")
    wide = wide.reindex(sorted(wide.index, key=lambda r: (not r.startswith("RW"), r))).fillna(0.0)
    return figures.stacked_bars(wide, out, "round_trips", width=8,
                                xlabel="statements the source executed per pgbench transaction (pg_stat_statements)",
                                title="Why: each statement is a round trip to the source (local: pgbench's own; "
                                      "foreign: postgres_fdw's)")
