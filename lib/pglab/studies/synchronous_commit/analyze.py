"""Analyze: raw run folder -> per-point table, within-block ratios, intervals, noise floor, verdicts, figures.

Pure and deterministic: the same raw files give byte-identical CSVs and figures. Failed points are
excluded and listed, never silently dropped. Every effect is a ratio to ``on`` (the baseline) taken
within a block, summarised over blocks, and shown beside the A/A noise floor (``pglab.analysis.effects``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pglab.analysis import effects, figures, placement, tables
from pglab.analysis.effects import AA, Claim
from pglab.parsers.fsync import parse_pg_test_fsync
from pglab.parsers.pgbench import parse_init
from pglab.runs.store import load_manifest, read_optional, write_json
from pglab.studies.synchronous_commit.params import LEVELS

LEVEL_ORDER = ["on", "remote_apply", "remote_write", "local", "off"]  # strictest first


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    points: pd.DataFrame  # one row per measured point
    summary: pd.DataFrame  # ratio to the baseline per clients and level: median, interval, noise floor
    ratios: pd.DataFrame  # the per-block ratios behind it
    comparison: pd.DataFrame
    metrics: dict[str, Any]
    failed: pd.DataFrame
    fsync: dict[str, Any] | None
    waits: pd.DataFrame
    latency: pd.DataFrame
    stalls: pd.DataFrame
    reads: pd.DataFrame  # standby reads: per-block loaded/idle ratios
    figures: dict[str, list[Path]] = field(default_factory=dict)


def reference_ratios(reference_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    ref = pd.read_csv(reference_dir / "synchronous_commit.csv")
    on = ref[ref.synchronous_commit == "on"].set_index("clients").tps
    ref["ratio_to_on"] = ref.tps / ref.clients.map(on)
    reads = pd.read_csv(reference_dir / "synchronous_commit_standby_reads.csv")
    return ref, reads


def reads_separated(manifest: dict[str, Any]) -> tuple[bool, str]:
    """Whether the standby-read claim can be judged: the primary (and its writer) and the standby (and
    its reader) on different machines. Otherwise they share the CPU, and load on one slows the other."""
    par = manifest.get("parameters", {})
    primary, standby = par.get("primary_host", "local"), par.get("standby_host", "local")
    clients = [par["client_host"]] if par.get("client_host") else []
    if placement.separate(manifest, [primary, *clients], [standby, *clients]):
        return True, f"primary ({primary}) and standby ({standby}) ran on different machines"
    where = (f"one machine ({primary})" if primary == standby else
             f"hosts {primary} and {standby} on one machine (e.g. lab namespaces)")
    if clients and primary != standby:
        where = f"with clients on {clients[0]}: {where}"
    return False, (f"not measurable here: primary and standby ran on {where}, sharing its cores, so the "
                   "primary's load and the standby's reads compete for them; needs separate machines")


def compare(a_ratios: pd.DataFrame, reads: pd.DataFrame, reference_dir: Path, fsync: dict[str, Any] | None,
            manifest: dict[str, Any], waits: pd.DataFrame) -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, each with its interval and verdict."""
    ref, ref_reads = reference_ratios(reference_dir)
    per_block = tables.per_block(a_ratios)  # block x level: geometric mean over client counts
    noise = effects.noise_floor(per_block.get(AA, pd.Series(dtype=float)))
    rows = []
    fs = f"this disk: {fsync['fdatasync_ops_s']:.0f} fdatasync/s" if fsync and fsync.get("fdatasync_ops_s") else ""
    for level, text, threshold in (("remote_write", "remote_write is about 1.2x on", 1.0),
                                   ("local", "local is about 1.5x on", 1.0),
                                   ("off", "off is an order of magnitude faster than on (slow disk)", math.sqrt(10))):
        pub = float(ref[ref.synchronous_commit == level].ratio_to_on.median())
        claim = Claim(text, pub, "greater", threshold)
        note = "per block: geometric mean over client counts of tps(level)/tps(on)"
        why = tables.wait_note(waits, level, "on")
        rows.append(effects.comparison_row(claim, per_block.get(level, []), noise,
                                           "; ".join(x for x in (note, why, fs if level == "off" else "") if x),
                                           measurable=level in per_block, why_not=f"{level} was not run"))
    rows.append(_ordering(per_block, noise))
    if len(reads):
        pub = float(ref_reads[ref_reads.primary_load == "loaded"].tps.mean()
                    / ref_reads[ref_reads.primary_load == "idle"].tps.mean())
        separated, why = reads_separated(manifest)
        loaded = reads[reads.config == "loaded"].ratio
        read_noise = effects.noise_floor(reads[reads.config == AA].ratio)
        rows.append(effects.comparison_row(
            Claim("standby read tps does not depend on primary load", pub, "equal", band=0.1), loaded, read_noise,
            "per block: standby select-only tps with the primary loaded / idle", measurable=separated,
            why_not=why))
    return effects.comparison_frame(rows)


def _ordering(per_block: pd.DataFrame, noise: float) -> dict[str, Any]:
    """``on < remote_write < local``: both steps, each per block; the weaker step decides."""
    claim = Claim("on < remote_write < local", 1.0, "greater", 1.0)
    if not {"remote_write", "local"} <= set(per_block):
        return effects.comparison_row(claim, [], noise, measurable=False, why_not="a level was not run")
    steps = {"remote_write/on": per_block["remote_write"], "local/remote_write": per_block["local"]
             / per_block["remote_write"]}
    rows = {k: effects.comparison_row(claim, v, noise) for k, v in steps.items()}
    verdicts = {r["verdict"] for r in rows.values()}
    weaker = min(rows, key=lambda k: rows[k]["reproduced"] if not pd.isna(rows[k]["reproduced"]) else np.inf)
    row = dict(rows[weaker])
    row["verdict"] = ("did not hold" if "did not hold" in verdicts else
                      "held" if verdicts == {"held"} else "not resolvable here")
    row["note"] = "the weaker step is shown (" + weaker + "); " + ", ".join(
        f"{k}: {r['reproduced']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" for k, r in rows.items())
    return row


def fsync_table(fsync: dict[str, Any] | None) -> pd.DataFrame:
    """pg_test_fsync's operations per second by section and method (no rows when it was not run)."""
    rows = [{"section": sec, "method": m, "ops_s": v} for sec, methods in (fsync or {}).get("sections", {}).items()
            for m, v in methods.items()]
    return pd.DataFrame(rows, columns=["section", "method", "ops_s"])


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir, derived, figs = Path(run_dir), Path(derived_dir), Path(figures_dir)
    derived.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(run_dir)
    baseline = manifest.get("parameters", {}).get("baseline", "on")
    points, failed = tables.points_table(run_dir, nodes={"write": "primary", "read": "standby"})
    if points.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    writes = points[points.kind == "write"]
    ratios = effects.block_ratios(writes, baseline, by=["group", "clients"], value="tps")
    summary = effects.summarise(ratios, by=["clients", "config"]).rename(columns={"config": "level"})
    tps = tables.tps_summary(writes, ["clients", "config"]).rename(columns={"config": "level"})
    summary = summary.merge(tps, on=["clients", "level"], how="outer")
    reads = effects.block_ratios(points[points.kind == "read"], "idle", by=["group"], value="tps") \
        if (points.kind == "read").any() else pd.DataFrame(columns=["block", "group", "config", "ratio"])
    fsync = None
    if (run_dir / "fsync" / "stdout.txt").exists() and json.loads((run_dir / "fsync" / "meta.json").read_text())[
            "status"] == "ok":
        fsync = parse_pg_test_fsync((run_dir / "fsync" / "stdout.txt").read_text())
    init = parse_init(read_optional(run_dir / "init", "stderr.txt")) if (run_dir / "init").exists() else {}
    waits = tables.wait_shares(run_dir, points, node="primary")
    latency = tables.latency_table(run_dir, points[points.kind == "write"], ["config", "clients"]) \
        .rename(columns={"config": "level"})
    stalls = tables.stalls_table(points)
    comparison = compare(ratios, reads, Path(reference_dir), fsync, manifest, waits)
    metrics = headline(summary, comparison, fsync, init, manifest, len(failed), points)
    points.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    summary.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    tables.lines(summary.rename(columns={"level": "config"}), "clients", LEVEL_ORDER).to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    fsync_table(fsync).to_csv(derived / "fsync.csv", index=False, float_format="%.6g")
    waits.to_csv(derived / "waits.csv", index=False, float_format="%.6g")
    stalls.to_csv(derived / "stalls.csv", index=False)
    latency.to_csv(derived / "latency.csv", index=False, float_format="%.6g")
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, points, summary, ratios, comparison, metrics, failed, fsync, waits, latency,
                 stalls, reads)
    a.figures = draw(a, figs, reference_dir=Path(reference_dir))
    return a


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, fsync: dict[str, Any] | None, init: dict[str, Any],
             manifest: dict[str, Any], n_failed: int, points: pd.DataFrame) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"], "failed_points": n_failed,
                           "blocks": int(manifest.get("parameters", {}).get("blocks", 0)),
                           "steal_flagged_points": int(points.steal_flag.sum()) if "steal_flag" in points else 0}
    w = summary.dropna(subset=["tps_median"])
    if len(w):
        top = int(w.clients.max())
        out["clients_max"] = top
        out["tps_at_clients_max"] = {r.level: round(float(r.tps_median), 1) for _, r in
                                     w[w.clients == top].sort_values("level").iterrows()}
    r = summary[summary.level != AA].dropna(subset=["median"])
    out["ratio_to_on"] = {lvl: round(float(np.exp(np.log(g["median"]).mean())), 3) for lvl, g in r.groupby("level")}
    # the floor the verdicts use (per-block ratios over every client count: the first claim's row), then
    # the floor at each client count, wider where a point is shorter or has fewer transactions
    nf = comparison.noise_floor.dropna()
    out["noise_floor"] = round(float(nf.iloc[0]), 4) if len(nf) else None
    aa = summary[summary.level == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_clients"] = {int(r.clients): round(float(r.noise_floor), 4) for _, r in aa.iterrows()}
    out["verdicts"] = {row.claim: row.verdict for _, row in comparison.iterrows()}
    if fsync:
        out["fdatasync_ops_s"] = fsync.get("fdatasync_ops_s")
    if init.get("init_total_s") is not None:
        out["pgbench_init_s"] = init["init_total_s"]
    return out


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    figures.style()
    made = {"tps_by_clients": fig_tps_by_clients(a, out), "ratio_to_on": fig_ratio(a, out, reference_dir)}
    if len(a.reads):
        made["standby_reads"] = fig_standby_reads(a, out)
    made["published_vs_reproduced"] = tables.fig_comparison(a.comparison, out, "synchronous_commit: published "
                                                              "vs reproduced (ratio to on)")
    if len(a.waits):
        made["waits"] = tables.fig_waits(a.waits, out, order=[lv for lv in LEVEL_ORDER if lv in set(a.waits.config)],
                                           title="Where the primary's client backends waited, by level")
    plt.close("all")
    return made


def _palette(levels: list[str]) -> dict[str, Any]:
    colours = sns.color_palette("colorblind", len(LEVELS) + 1)
    pal = {lvl: colours[LEVELS.index(lvl)] for lvl in levels if lvl in LEVELS}
    pal[AA] = colours[-1]
    return pal


def fig_tps_by_clients(a: Analysis, out: Path) -> list[Path]:
    w = a.summary.dropna(subset=["tps_median"])
    pts = a.points[a.points.kind == "write"]
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(w.level)]
    pal = _palette(levels)
    counts = sorted(int(c) for c in w.clients.unique())
    pos = {c: i for i, c in enumerate(counts)}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, lvl in enumerate(levels):
        g = w[w.level == lvl].sort_values("clients")
        x = np.array([pos[int(c)] for c in g.clients]) + (k - len(levels) / 2) * 0.05
        ax.errorbar(x, g.tps_median, yerr=[g.tps_median - g.tps_low, g.tps_high - g.tps_median], label=lvl,
                    color=pal[lvl], marker="o", capsize=3)
        p = pts[pts.config == lvl]
        ax.scatter([pos[int(c)] + (k - len(levels) / 2) * 0.05 for c in p.clients], p.tps, color=pal[lvl], s=8,
                   alpha=0.35)
    ax.set_xticks(range(len(counts)), [str(c) for c in counts])
    ax.set_yscale("log")
    ax.set_xlabel("pgbench clients (-c), as measured")
    ax.set_ylabel("tps in the measured window (log scale)")
    ax.set_title(f"Primary write throughput by synchronous_commit level\n(median and "
                 f"{tables.caption(w.rename(columns={'tps_method': 'ci_method', 'tps_n': 'n'}))}; dots: points)")
    ax.legend(title="synchronous_commit", fontsize=8)
    return figures.save(fig, out, "tps_by_clients")


def fig_ratio(a: Analysis, out: Path, reference_dir: Path) -> list[Path]:
    ref, _ = reference_ratios(reference_dir)
    s = a.summary.dropna(subset=["median"])
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(s.level)] + ([AA] if (s.level == AA).any() else [])
    pal = _palette(levels)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4), sharey=True)
    tables.ratio_panel(ax1, s.rename(columns={"level": "config"}), levels, pal)
    for lvl in levels:
        r = ref[ref.synchronous_commit == lvl]
        if len(r):
            ax2.plot(r.clients.astype(str), r.ratio_to_on, marker="s", color=pal[lvl], label=lvl)
    ax1.set_title("reproduced: per-block ratio, median and 95% interval\n(grey band: A/A noise floor)",
                  fontsize=10)
    ax2.set_title("published (article 002, SATA HDD)", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("clients")
    ax1.set_ylabel("tps / tps(on), log scale")
    ax1.legend(title="synchronous_commit", fontsize=8)
    fig.suptitle("Cost of each level relative to synchronous_commit=on", y=1.05)
    return figures.save(fig, out, "ratio_to_on")


def fig_standby_reads(a: Analysis, out: Path) -> list[Path]:
    r = a.reads.copy()
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
    ax.set_xticks(range(len(order)), ["primary loaded / idle", "idle again / idle (A/A)"][:len(order)])
    ax.set_xlabel("")
    ax.set_ylabel("standby select-only tps, ratio within a block")
    ax.set_title("Standby reads with the primary under write load\n(dots: blocks; bars: median and 95% interval; "
                 "band: noise floor)", fontsize=10)
    return figures.save(fig, out, "standby_reads")
