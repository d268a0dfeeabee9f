"""Analyze: raw run folder -> tidy tables, summary, metrics, verdicts and figures.

Pure and deterministic: the same raw files give byte-identical CSVs and figures. Failed points
are excluded and listed, never silently dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pglab import figures, placement
from pglab.parsers.fsync import parse_pg_test_fsync
from pglab.parsers.pgbench import parse_init, parse_summary
from pglab.stats import interval_caption, lines_table, summarise
from pglab.store import load_manifest, read_optional, write_json
from pglab.studies.synchronous_commit import STUDY
from pglab.studies.synchronous_commit.params import LEVELS

LEVEL_ORDER = ["on", "remote_apply", "remote_write", "local", "off"]  # strictest first
FACTORS = ["kind", "level", "clients", "primary_load", "rep"]


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    tidy: pd.DataFrame
    summary: pd.DataFrame
    ratios: pd.DataFrame
    comparison: pd.DataFrame
    metrics: dict[str, Any]
    failed: pd.DataFrame
    fsync: dict[str, Any] | None
    figures: dict[str, list[Path]] = field(default_factory=dict)


def tidy_points(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (point, metric) for the points that succeeded; and the failed points."""
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for d in sorted(p for p in run_dir.iterdir() if (p / "meta.json").exists()):
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("kind") not in ("write", "read"):
            continue
        base = {"study": STUDY, "point": meta["point"], **{k: meta.get(k) for k in FACTORS}}
        if meta.get("status") != "ok":
            failed.append({**base, "status": meta.get("status"), "error": meta.get("error", "")})
            continue
        s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
        node = "primary" if meta["kind"] == "write" else "standby"
        for metric, unit in (("tps", "tx/s"), ("latency_avg_ms", "ms"), ("transactions", "tx"),
                             ("failed", "tx")):
            if s.get(metric) is not None:
                rows.append({**base, "node": node, "metric": metric, "value": float(s[metric]), "unit": unit})
        if (d / "primary_stdout.txt").exists():
            w = parse_summary(read_optional(d, "primary_stdout.txt"), read_optional(d, "primary_stderr.txt"))
            rows.append({**base, "node": "primary", "metric": "tps", "value": float(w["tps"]), "unit": "tx/s"})
    cols = ["study", "point", *FACTORS, "node", "metric", "value", "unit"]
    tidy = pd.DataFrame(rows, columns=cols).sort_values(["point", "node", "metric"], kind="stable")
    failed_df = pd.DataFrame(failed, columns=["study", "point", *FACTORS, "status", "error"])
    return _int_clients(tidy.reset_index(drop=True)), _int_clients(failed_df)


def _int_clients(df: pd.DataFrame) -> pd.DataFrame:
    """Client counts and repetitions are integers (1, not 1.0), missing for the standby reads."""
    for col in ("clients", "rep"):
        if col in df:
            df[col] = pd.to_numeric(df[col]).astype("Int64")
    return df


def ratios_to_on(summary: pd.DataFrame) -> pd.DataFrame:
    """Median write tps of each level over the median of ``on`` at the same client count."""
    w = summary[(summary.kind == "write") & (summary.metric == "tps")].set_index(["clients", "level"])["median"]
    if "on" not in w.index.get_level_values("level"):
        return pd.DataFrame(columns=["clients", "level", "ratio_to_on"])
    out = (w / w.xs("on", level="level")).rename("ratio_to_on").reset_index()
    return out.sort_values(["level", "clients"], kind="stable").reset_index(drop=True)


def reference_ratios(reference_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    ref = pd.read_csv(reference_dir / "synchronous_commit.csv")
    on = ref[ref.synchronous_commit == "on"].set_index("clients").tps
    ref["ratio_to_on"] = ref.tps / ref.clients.map(on)
    reads = pd.read_csv(reference_dir / "synchronous_commit_standby_reads.csv")
    return ref, reads


def _verdict(ours: float | None, published: float, low: float, high: float) -> str:
    if ours is None or np.isnan(ours):
        return "not measurable here (level not run)"
    if low <= ours / published <= high:
        return "held"
    return "did not hold" if (ours > 1) != (published > 1) else "direction held, size differs"


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
                   "primary's load slows the standby's reads by construction; needs separate machines")


def compare(ratios: pd.DataFrame, summary: pd.DataFrame, reference_dir: Path,
            fsync: dict[str, Any] | None, manifest: dict[str, Any]) -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, with a verdict."""
    ref, reads = reference_ratios(reference_dir)
    rows = []
    ours = ratios.groupby("level").ratio_to_on.median() if len(ratios) else pd.Series(dtype=float)
    fs = f"; this disk: {fsync['fdatasync_ops_s']:.0f} fdatasync/s" if fsync and fsync.get("fdatasync_ops_s") else ""
    for level, claim, lo, hi in (("remote_write", "remote_write is about 1.2x on", 0.8, 1.25),
                                 ("local", "local is about 1.5x on", 0.8, 1.25),
                                 ("off", "off is an order of magnitude faster than on (slow disk)", 0.5, 2.0)):
        pub = float(ref[ref.synchronous_commit == level].ratio_to_on.median())
        got = float(ours.get(level, np.nan))
        note = "median over client counts of tps(level)/tps(on)" + (fs if level == "off" else "")
        rows.append({"claim": claim, "published": round(pub, 3), "reproduced": round(got, 3),
                     "unit": "ratio to on", "verdict": _verdict(got, pub, lo, hi), "note": note})
    order = [lvl for lvl in ("on", "remote_write", "local") if lvl in ours.index]
    held = all(ours[a] <= ours[b] for a, b in zip(order, order[1:], strict=False)) if len(order) == 3 else None
    rows.append({"claim": "on < remote_write < local", "published": 1.0, "reproduced": float(held) if held is not None
                 else np.nan, "unit": "1 = ordering holds", "verdict": "not measurable here (level not run)"
                 if held is None else ("held" if held else "did not hold"), "note": "medians over client counts"})
    r = summary[(summary.kind == "read") & (summary.metric == "tps") & (summary.node == "standby")]
    if len(r):
        per = r.groupby("primary_load")["median"].median()
        pub = float(reads[reads.primary_load == "loaded"].tps.mean() / reads[reads.primary_load == "idle"].tps.mean())
        got = float(per.get("loaded", np.nan) / per.get("idle", np.nan))
        separated, why = reads_separated(manifest)
        note = f"loaded/idle standby select-only tps; {why}"
        verdict = ("held" if 0.9 <= got <= 1.1 else "did not hold") if separated else "not measurable here"
        rows.append({"claim": "standby read tps does not depend on primary load", "published": round(pub, 3),
                     "reproduced": round(got, 3), "unit": "ratio loaded/idle", "verdict": verdict, "note": note})
    return pd.DataFrame(rows)


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
    tidy, failed = tidy_points(run_dir)
    if tidy.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    keys = ["kind", "level", "clients", "primary_load", "node", "metric", "unit"]
    summary = _int_clients(summarise(tidy.fillna({"clients": 0, "primary_load": ""}), keys))
    ratios = ratios_to_on(summary)
    fsync = None
    if (run_dir / "fsync" / "stdout.txt").exists() and json.loads((run_dir / "fsync" / "meta.json").read_text())[
            "status"] == "ok":
        fsync = parse_pg_test_fsync((run_dir / "fsync" / "stdout.txt").read_text())
    init = parse_init(read_optional(run_dir / "init", "stderr.txt")) if (run_dir / "init").exists() else {}
    comparison = compare(ratios, summary, Path(reference_dir), fsync, manifest)
    metrics = headline(summary, ratios, fsync, init, manifest, len(failed))
    tidy.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    summary.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    lines_table(ratios, "clients", "level", "ratio_to_on", LEVEL_ORDER).to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    fsync_table(fsync).to_csv(derived / "fsync.csv", index=False, float_format="%.6g")
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, tidy, summary, ratios, comparison, metrics, failed, fsync)
    a.figures = draw(a, figs, reference_dir=Path(reference_dir))
    return a


def headline(summary: pd.DataFrame, ratios: pd.DataFrame, fsync: dict[str, Any] | None,
             init: dict[str, Any], manifest: dict[str, Any], n_failed: int) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists: median tps per level at the largest client count."""
    w = summary[(summary.kind == "write") & (summary.metric == "tps")]
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"], "failed_points": n_failed}
    if len(w):
        top = int(w.clients.max())
        out["clients_max"] = top
        out["tps_at_clients_max"] = {r.level: round(float(r["median"]), 1) for _, r in
                                     w[w.clients == top].sort_values("level").iterrows()}
        out["ratio_to_on"] = {lvl: round(float(g.ratio_to_on.median()), 3) for lvl, g in ratios.groupby("level")}
    r = summary[(summary.kind == "read") & (summary.metric == "tps") & (summary.node == "standby")]
    if len(r):
        out["standby_read_tps"] = {load: round(float(g["median"].median()), 1) for load, g in r.groupby("primary_load")}
    if fsync:
        out["fdatasync_ops_s"] = fsync.get("fdatasync_ops_s")
    if init.get("init_total_s") is not None:
        out["pgbench_init_s"] = init["init_total_s"]
    return out


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    figures.style()
    made = {"tps_by_clients": fig_tps_by_clients(a, out), "ratio_to_on": fig_ratio(a, out, reference_dir)}
    if (a.summary.kind == "read").any():
        made["standby_reads"] = fig_standby_reads(a, out)
    made["published_vs_reproduced"] = fig_comparison(a, out)
    plt.close("all")
    return made


def _palette(levels: list[str]) -> dict[str, Any]:
    colours = sns.color_palette("colorblind", len(LEVELS))
    return {lvl: colours[LEVELS.index(lvl)] for lvl in levels}


def fig_tps_by_clients(a: Analysis, out: Path) -> list[Path]:
    w = a.summary[(a.summary.kind == "write") & (a.summary.metric == "tps")]
    pts = a.tidy[(a.tidy.kind == "write") & (a.tidy.metric == "tps")]
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(w.level)]
    pal = _palette(levels)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for lvl in levels:
        g = w[w.level == lvl].sort_values("clients")
        ax.errorbar(g.clients, g["median"], yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]],
                    label=lvl, color=pal[lvl], marker="o", capsize=3)
        p = pts[pts.level == lvl]
        ax.scatter(p.clients, p.value, color=pal[lvl], s=10, alpha=0.4)
    ax.set_yscale("log")
    ax.set_xlabel("pgbench clients (-c)")
    ax.set_ylabel("tps, excluding connection time (log scale)")
    ax.set_title(f"Primary write throughput by synchronous_commit level\n({interval_caption(w)}; dots: runs)")
    ax.legend(title="synchronous_commit")
    return figures.save(fig, out, "tps_by_clients")


def fig_ratio(a: Analysis, out: Path, reference_dir: Path) -> list[Path]:
    ref, _ = reference_ratios(reference_dir)
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(a.ratios.level)]
    pal = _palette(levels)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for lvl in levels:
        g = a.ratios[a.ratios.level == lvl]
        ax1.plot(g.clients, g.ratio_to_on, marker="o", color=pal[lvl], label=lvl)
        r = ref[ref.synchronous_commit == lvl]
        if len(r):
            ax2.plot(r.clients, r.ratio_to_on, marker="s", color=pal[lvl], label=lvl)
    for ax, title in ((ax1, "reproduced (this machine)"), (ax2, "published (article 002, SATA HDD)")):
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("clients")
        ax.set_title(title)
    ax1.set_ylabel("tps / tps(on), log scale")
    ax1.legend(title="synchronous_commit", fontsize=8)
    fig.suptitle("Cost of each level relative to synchronous_commit=on")
    return figures.save(fig, out, "ratio_to_on")


def fig_standby_reads(a: Analysis, out: Path) -> list[Path]:
    t = a.tidy[(a.tidy.kind == "read") & (a.tidy.metric == "tps") & (a.tidy.node == "standby")]
    levels = [lvl for lvl in LEVEL_ORDER if lvl in set(t.level)]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    sns.stripplot(data=t, x="level", y="value", hue="primary_load", order=levels, hue_order=["idle", "loaded"],
                  dodge=True, ax=ax, jitter=False, size=6)
    sns.pointplot(data=t, x="level", y="value", hue="primary_load", order=levels, hue_order=["idle", "loaded"],
                  dodge=0.4, estimator=np.median, errorbar=None, markers="_", linestyles="none", ax=ax,
                  legend=False)
    ax.set_ylabel("standby select-only tps (pgbench -S -n)")
    ax.set_xlabel("synchronous_commit on the primary")
    ax.set_title("Standby reads with the primary idle vs under the write load\n(dots: runs; bars: medians)")
    return figures.save(fig, out, "standby_reads")


def fig_comparison(a: Analysis, out: Path) -> list[Path]:
    c = a.comparison[a.comparison.unit.str.startswith("ratio")].copy()
    long = c.melt(id_vars=["claim", "verdict"], value_vars=["published", "reproduced"], var_name="source",
                  value_name="ratio")
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.7 * len(c)))
    sns.barplot(data=long, y="claim", x="ratio", hue="source", ax=ax, orient="h")
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", lw=0.8)
    for i, (_, row) in enumerate(c.iterrows()):
        ax.text(1.02, i, row.verdict, transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_ylabel("")
    ax.set_xlabel("ratio (log scale)")
    ax.set_title("Published vs reproduced (verdict at right)")
    return figures.save(fig, out, "published_vs_reproduced")
