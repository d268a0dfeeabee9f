"""Analyze: raw run folder -> per-point numbers, ratios to the baseline per block, a ranking, figures.

Pure and deterministic. Every metric (pgbench steady-state tps and latency, pgbench -i time, sysbench
tps and p95 latency) is divided by the baseline of its own block (``pglab.analysis.effects``); the A/A pair gives
each metric's noise floor. The ranking orders targets by median and calls two neighbours apart only
when the per-block ratio between them has an interval clear of 1 and of the noise floor; otherwise
they are tied, "not resolvable here". The article's Cloud SQL numbers are shown beside ours as
context only (different hardware, version and scale); its rankings of Aurora, RDS and Cloud SQL are
judged only when targets with those providers were measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pglab.analysis import effects, figures, tables
from pglab.analysis.effects import AA, MIN_BLOCKS, Claim
from pglab.analysis.stats import median_interval
from pglab.errors import ParseError
from pglab.parsers.pgbench import parse_init, parse_progress, parse_summary
from pglab.parsers.sysbench import parse_run
from pglab.runs.store import load_manifest, read_optional, write_json

ARTICLE = ("article 003: Google Cloud SQL for PostgreSQL 9.6.10, 8 vCPU / 52 GiB, client 32 vCPU in the same "
           "zone, pgbench scale 10000 with 1000 clients for 600 s, sysbench 0.5 250 x 450000 rows, 1000 threads")
# pgbench -i phase names (13+ 'done in', and the AWS-patched 9.6 of the article) -> one vocabulary
PHASES = {"drop tables": "drop", "create tables": "create", "client-side generate": "generate",
          "server-side generate": "generate", "insert": "generate", "commit": "commit", "vacuum": "vacuum",
          "primary keys": "primary_keys", "index": "primary_keys", "foreign keys": "foreign_keys"}
PHASE_ORDER = ["drop", "create", "generate", "commit", "vacuum", "primary_keys", "foreign_keys"]


@dataclass(frozen=True)
class Metric:
    """A number per point that targets are ranked by."""

    name: str
    kind: str  # the workload (points' kind) it comes from
    column: str  # in the points table
    higher_is_better: bool
    unit: str
    title: str


METRICS = (Metric("pgbench_tps", "pgbench", "tps", True, "tps", "pgbench steady-state tps"),
           Metric("pgbench_latency_ms", "pgbench", "latency_avg_ms", False, "ms", "pgbench latency average"),
           Metric("init_s", "pgbench", "init_total_s", False, "s", "pgbench -i time"),
           Metric("sysbench_tps", "sysbench", "tps", True, "tps", "sysbench tps"),
           Metric("sysbench_p95_ms", "sysbench", "p95_ms", False, "ms", "sysbench p95 latency"))
PROVIDER_ALIASES = {"aurora": "aurora", "amazon aurora": "aurora", "aws aurora": "aurora", "rds": "rds",
                    "amazon rds": "rds", "aws rds": "rds", "cloud_sql": "cloud_sql", "cloudsql": "cloud_sql",
                    "cloud sql": "cloud_sql", "google cloud sql": "cloud_sql", "gcp": "cloud_sql"}


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    points: pd.DataFrame  # one row per measured point (pgbench and sysbench)
    summary: pd.DataFrame  # the ranking table: per metric and target, value, ratio to baseline, rank
    ratios: pd.DataFrame  # per block, metric and target: value / the block's baseline
    comparison: pd.DataFrame  # the article's claims, judged only where its services were measured
    metrics: dict[str, Any]
    failed: pd.DataFrame
    waits: pd.DataFrame
    stalls: pd.DataFrame
    init_phases: pd.DataFrame  # per target and phase of pgbench -i: median seconds and interval
    sysbench: pd.DataFrame  # per target: tps, writes/s, p95, errors, reconnects
    timeseries: pd.DataFrame  # every progress / report interval of every point
    context: pd.DataFrame  # the article's Cloud SQL numbers beside ours (context only)
    rankings: dict[str, str]  # metric -> "tuned > stock" or "stock = tuned (not resolvable here)"
    figures: dict[str, list[Path]] = field(default_factory=dict)


# -- per point ------------------------------------------------------------------------------------------
def init_phases_of(text: str) -> dict[str, Any]:
    """Total and per-phase seconds of one ``pgbench -i`` (empty when its output has no times)."""
    try:
        r = parse_init(text)
    except ParseError:
        return {}
    out: dict[str, Any] = {"init_total_s": r["init_total_s"]}
    for name, secs in r["phases"].items():
        key = PHASES.get(name, name.replace(" ", "_"))
        out[f"init_{key}_s"] = out.get(f"init_{key}_s", 0.0) + secs
    return out


def sysbench_window(intervals: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    """Report intervals after the warm-up: mean tps and writes/s, median p95, and the stalls (0 tps)."""
    w = [i for i in intervals if i["time_s"] > warmup_s + 1e-9]
    if not w:
        return {"tps": None, "window_s": 0.0, "stalls": 0, "stall_times": ""}
    stalls = [i["time_s"] for i in w if i["tps"] == 0]
    p95 = [i["latency_pct_ms"] for i in w if i["latency_pct_ms"] is not None and i["tps"] > 0]
    return {"tps": float(np.mean([i["tps"] for i in w])), "window_s": w[-1]["time_s"] - warmup_s,
            "window_writes_per_s": float(np.mean([i["writes_per_s"] or 0.0 for i in w])),
            "window_p95_ms": float(np.median(p95)) if p95 else None,
            "stalls": len(stalls), "stall_times": " ".join(f"{t:g}" for t in stalls)}


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """A pgbench point: steady-state tps, the summary, the init phases; a sysbench point: its summary."""
    if meta.get("kind") == "pgbench":
        row = tables.pgbench_window(d, meta)
        s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
        if row.get("latency_avg_ms") is None:  # no progress line after the warm-up (a very short run)
            row["latency_avg_ms"] = s.get("latency_avg_ms")
        row.update(latency_stddev_ms=s.get("latency_stddev_ms"), latency_summary_ms=s.get("latency_avg_ms"),
                   transactions=s.get("transactions"), failed_transactions=s.get("failed"),
                   initial_connection_ms=s.get("initial_connection_ms"))
        row.update(init_phases_of(read_optional(d, "init_stderr.txt") + "\n" + read_optional(d, "init_stdout.txt")))
    else:
        r = parse_run(read_optional(d, "stdout.txt"))
        row = sysbench_window(r["intervals"], float(meta.get("warmup_s", 1.0)))
        total = r.get("total_time_s") or 0.0
        row.update(tps_summary=r["tps"], latency_avg_ms=r["latency_avg_ms"], p95_ms=r["latency_p95_ms"],
                   latency_max_ms=r["latency_max_ms"], writes_per_s=(r["writes"] or 0) / total if total else None,
                   errors=r["errors"], errors_per_s=r["errors_per_s"], reconnects=r["reconnects"],
                   reconnects_per_s=r["reconnects_per_s"], transactions=r["transactions"],
                   prepare_s=(meta.get("commands", {}).get("prepare_") or {}).get("duration_s"))
        if row["tps"] is None:
            row["tps"] = r["tps"]
    row.update(label=meta.get("label"), provider=meta.get("provider"), target_kind=meta.get("target_kind"))
    return row


def timeseries_table(run_dir: Path, points: pd.DataFrame) -> pd.DataFrame:
    """Every progress line (pgbench -P) and report line (sysbench) of every measured point."""
    rows = []
    for r in points.itertuples():
        d = Path(run_dir) / r.point
        base = {"point": r.point, "kind": r.kind, "block": r.block, "config": r.config, "copy": r.copy}
        if r.kind == "pgbench":
            for x in parse_progress(read_optional(d, "stderr.txt")):
                rows.append({**base, "time_s": x["time_s"], "tps": x["tps"], "latency_ms": x["latency_avg_ms"],
                             "latency_stddev_ms": x["latency_stddev_ms"], "p95_ms": None, "writes_per_s": None,
                             "errors_per_s": None, "reconnects_per_s": None})
        else:
            for x in parse_run(read_optional(d, "stdout.txt"))["intervals"]:
                rows.append({**base, "time_s": x["time_s"], "tps": x["tps"], "latency_ms": None,
                             "latency_stddev_ms": None, "p95_ms": x["latency_pct_ms"],
                             "writes_per_s": x["writes_per_s"], "errors_per_s": x["errors_per_s"],
                             "reconnects_per_s": x["reconnects_per_s"]})
    cols = ["point", "kind", "block", "config", "copy", "time_s", "tps", "latency_ms", "latency_stddev_ms", "p95_ms",
            "writes_per_s", "errors_per_s", "reconnects_per_s"]
    return pd.DataFrame(rows, columns=cols)


# -- effects and the ranking ----------------------------------------------------------------------------
def metric_ratios(points: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per block, metric and target: value / the block's first baseline (the second baseline is A/A)."""
    frames = []
    for m in METRICS:
        sub = points[(points.kind == m.kind)].dropna(subset=[m.column]) if m.column in points else points.iloc[:0]
        if sub.empty:
            continue
        r = effects.block_ratios(sub.assign(value=pd.to_numeric(sub[m.column])), baseline, by=["group"])
        frames.append(r.assign(metric=m.name))
    cols = ["block", "group", "metric", "config", "ratio", "value", "baseline"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def _wide(points: pd.DataFrame, m: Metric) -> pd.DataFrame:
    """block x target of one metric (first copies)."""
    if m.column not in points:
        return pd.DataFrame()
    sub = points[(points.kind == m.kind) & (points["copy"] == 1)].dropna(subset=[m.column])
    return sub.pivot_table(index="block", columns="config", values=m.column, aggfunc="first")


def _better_ratio(wide: pd.DataFrame, a: str, b: str, m: Metric) -> np.ndarray:
    """Per block, how many times ``a`` is better than ``b`` (> 1: a is better)."""
    both = wide[[a, b]].dropna()
    r = both[a] / both[b] if m.higher_is_better else both[b] / both[a]
    return r.to_numpy(dtype=float)


def ranking(points: pd.DataFrame, ratios: pd.DataFrame,
            order_targets: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ranking table: per metric, targets by median (best first); rank shared while not resolvable."""
    rows, texts = [], {}
    summ = effects.summarise(ratios, by=["metric", "config"]) if len(ratios) else pd.DataFrame(
        columns=["metric", "config", "median", "ci_low", "ci_high", "ci_method", "blocks", "noise_floor"])
    for m in METRICS:
        wide = _wide(points, m)
        if wide.empty:
            continue
        s = summ[summ.metric == m.name].set_index("config")
        noise = float(s.noise_floor.dropna().iloc[0]) if len(s.noise_floor.dropna()) else math.nan
        vals = {}
        for t in [t for t in order_targets if t in wide]:
            med, lo, hi, method = median_interval(wide[t].dropna().to_numpy(dtype=float))
            vals[t] = (med, lo, hi, method, int(wide[t].notna().sum()))
        order = sorted(vals, key=lambda t: (-vals[t][0] if m.higher_is_better else vals[t][0], order_targets.index(t)))
        rank, text = 1, order[0] if order else ""
        for i, t in enumerate(order):
            vs_next, resolved = "", None
            if i + 1 < len(order):
                nxt = order[i + 1]
                x = _better_ratio(wide, t, nxt, m)
                med, lo, hi, _ = effects.interval(x) if len(x) else (math.nan,) * 3 + ("none",)
                v = effects.verdict(lo, hi, med, noise, claim="greater")
                if len(x) < MIN_BLOCKS:
                    v = "not resolvable here"
                resolved = v == "held"
                vs_next = (f"{'ahead of' if resolved else 'not resolvable here from'} {nxt}: {med:.3g}x "
                           f"[{lo:.3g}, {hi:.3g}] over {len(x)} blocks" if len(x) else f"no common block with {nxt}")
            r = s.loc[t] if t in s.index else None
            rows.append({"metric": m.name, "title": m.title, "unit": m.unit, "better": "higher" if m.higher_is_better
                         else "lower", "rank": rank, "target": t, "median": vals[t][0], "low": vals[t][1],
                         "high": vals[t][2], "method": vals[t][3], "n": vals[t][4],
                         "ratio_to_baseline": r["median"] if r is not None else (1.0 if t == order_targets[0] else
                                                                                   math.nan),
                         "ratio_low": r["ci_low"] if r is not None else math.nan,
                         "ratio_high": r["ci_high"] if r is not None else math.nan,
                         "noise_floor": noise, "vs_next": vs_next})
            if resolved is not None:
                text += (" > " if resolved else " = ") + order[i + 1]
                if resolved:  # else tied: the next one shares this rank
                    rank = i + 2
        tied = " = " in text
        texts[m.name] = text + (" (=: not resolvable here)" if tied else "")
    cols = ["metric", "title", "unit", "better", "rank", "target", "median", "low", "high", "method", "n",
            "ratio_to_baseline", "ratio_low", "ratio_high", "noise_floor", "vs_next"]
    return pd.DataFrame(rows, columns=cols), texts


# -- the article's claims -------------------------------------------------------------------------------
def providers(manifest: dict[str, Any]) -> dict[str, str]:
    """aurora / rds / cloud_sql -> the first target that names that provider."""
    out: dict[str, str] = {}
    for name, t in manifest.get("targets", {}).items():
        p = PROVIDER_ALIASES.get(str(t.get("provider") or "").strip().lower())
        if p and p not in out:
            out[p] = name
    return out


def compare(points: pd.DataFrame, ratios: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """The article's rankings (parts 1-3), each judged only when the matching services were targets."""
    prov = providers(manifest)
    have = ", ".join(f"{n} ({t.get('provider') or 'no provider'})" for n, t in manifest.get("targets", {}).items())
    by = {m.name: m for m in METRICS}

    def noise(metric: str) -> float:
        aa = ratios[(ratios.metric == metric) & (ratios.config == AA)].ratio if len(ratios) else []
        return effects.noise_floor(aa)

    def row(claim: Claim, metric: str, need: list[str], per_block: Any, note: str) -> dict[str, object]:
        missing = [x for x in need if x not in prov]
        why = (f"needs targets with provider {', '.join(need)}; this run's targets: {have}; missing "
               f"{', '.join(missing)}" if missing else "")
        x = per_block() if not missing else []
        return effects.comparison_row(claim, x, noise(metric), note, measurable=not missing, why_not=why)

    def best_of_others(metric: str, one: str, others: list[str]) -> np.ndarray:
        m = by[metric]
        wide = _wide(points, m)
        names = [prov[o] for o in others if o in prov]
        if prov[one] not in wide or not any(n in wide for n in names):
            return np.array([])
        cols = [n for n in names if n in wide]
        best = wide[cols].max(axis=1) if m.higher_is_better else wide[cols].min(axis=1)
        r = wide[prov[one]] / best if m.higher_is_better else best / wide[prov[one]]
        return r.dropna().to_numpy(dtype=float)

    rows = [
        row(Claim("Aurora is first in the write-heavy sysbench test", math.nan, "greater"), "sysbench_tps",
            ["aurora", "rds", "cloud_sql"], lambda: best_of_others("sysbench_tps", "aurora", ["rds", "cloud_sql"]),
            "per block: sysbench tps of the aurora target / the best of rds and cloud_sql"),
        row(Claim("Aurora and Cloud SQL tie in pgbench read/write", math.nan, "equal"), "pgbench_tps",
            ["aurora", "cloud_sql"], lambda: best_of_others("pgbench_tps", "aurora", ["cloud_sql"]),
            "per block: pgbench tps of aurora / cloud_sql; tie = within 10% or the noise floor"),
        row(Claim("Cloud SQL is first in pgbench initialization", math.nan, "greater"), "init_s",
            ["cloud_sql", "aurora", "rds"], lambda: best_of_others("init_s", "cloud_sql", ["aurora", "rds"]),
            "per block: the fastest pgbench -i of aurora and rds / cloud_sql's"),
        row(Claim("RDS is second in pgbench initialization, ahead of Aurora", math.nan, "greater"), "init_s",
            ["rds", "aurora"], lambda: best_of_others("init_s", "rds", ["aurora"]),
            "per block: pgbench -i time of aurora / rds"),
    ]
    return effects.comparison_frame(rows)


# -- tables ---------------------------------------------------------------------------------------------
def _median_row(values: pd.Series) -> tuple[float, float, float, str, int]:
    x = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    med, lo, hi, method = median_interval(x)
    return med, lo, hi, method, len(x)


def init_phases_table(points: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per target and pgbench -i phase: median seconds and interval over its points (first copies)."""
    cols = ["target", "phase", "median_s", "low_s", "high_s", "method", "n", "share"]
    pg = points[(points.kind == "pgbench") & (points["copy"] == 1)]
    rows = []
    for t in [t for t in order if t in set(pg.config)]:
        g = pg[pg.config == t]
        total = _median_row(g.init_total_s)[0] if "init_total_s" in g else math.nan
        for ph in [*PHASE_ORDER, "total"]:
            col = "init_total_s" if ph == "total" else f"init_{ph}_s"
            if col not in g or g[col].isna().all():
                continue
            med, lo, hi, method, n = _median_row(g[col])
            rows.append({"target": t, "phase": ph, "median_s": med, "low_s": lo, "high_s": hi, "method": method,
                         "n": n, "share": med / total if total and ph != "total" else 1.0 if ph == "total" else None})
    return pd.DataFrame(rows, columns=cols)


def sysbench_table(points: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per target: sysbench tps, writes/s, p95 and average latency (median, interval), errors, reconnects."""
    cols = ["target", "tps_median", "tps_low", "tps_high", "writes_per_s_median", "p95_ms_median", "p95_ms_low",
            "p95_ms_high", "latency_avg_ms_median", "errors", "reconnects", "errors_per_s_median", "prepare_s_median",
            "stalls", "n"]
    sb = points[(points.kind == "sysbench") & (points["copy"] == 1)]
    rows = []
    for t in [t for t in order if t in set(sb.config)]:
        g = sb[sb.config == t]
        tps, p95 = _median_row(g.tps), _median_row(g.p95_ms)
        rows.append({"target": t, "tps_median": tps[0], "tps_low": tps[1], "tps_high": tps[2],
                     "writes_per_s_median": _median_row(g.writes_per_s)[0], "p95_ms_median": p95[0],
                     "p95_ms_low": p95[1], "p95_ms_high": p95[2],
                     "latency_avg_ms_median": _median_row(g.latency_avg_ms)[0],
                     "errors": int(pd.to_numeric(g.errors).fillna(0).sum()),
                     "reconnects": int(pd.to_numeric(g.reconnects).fillna(0).sum()),
                     "errors_per_s_median": _median_row(g.errors_per_s)[0],
                     "prepare_s_median": _median_row(g.prepare_s)[0], "stalls": int(g.stalls.fillna(0).sum()),
                     "n": len(g)})
    return pd.DataFrame(rows, columns=cols)


def reference(reference_dir: Path) -> pd.DataFrame:
    return pd.read_csv(Path(reference_dir) / "cloud_providers.csv")


# (article benchmark, article metric) -> (our kind, our column, how ours is measured)
CONTEXT = [("pgbench_run", "tps_excluding_connections", "pgbench", "tps_summary", "tps"),
           ("pgbench_run", "latency_average", "pgbench", "latency_summary_ms", "ms"),
           ("pgbench_run", "latency_stddev", "pgbench", "latency_stddev_ms", "ms"),
           ("pgbench_init", "total_time", "pgbench", "init_total_s", "s"),
           ("pgbench_init", "insert_time", "pgbench", "init_generate_s", "s"),
           ("pgbench_init", "vacuum_time", "pgbench", "init_vacuum_s", "s"),
           ("pgbench_init", "index_time", "pgbench", "init_primary_keys_s", "s"),
           ("sysbench_oltp_write_only", "tps", "sysbench", "tps_summary", "tps"),
           ("sysbench_oltp_write_only", "write_requests_per_sec", "sysbench", "writes_per_s", "ops/s"),
           ("sysbench_oltp_write_only", "latency_p95", "sysbench", "p95_ms", "ms"),
           ("sysbench_oltp_write_only", "latency_avg", "sysbench", "latency_avg_ms", "ms")]


def context_table(points: pd.DataFrame, reference_dir: Path, order: list[str]) -> pd.DataFrame:
    """The article's Cloud SQL numbers and our per-target medians, side by side: context, not a comparison."""
    ref = reference(reference_dir).set_index(["benchmark", "metric"]).value
    rows = []
    for bench, metric, kind, col, unit in CONTEXT:
        row: dict[str, Any] = {"benchmark": bench, "metric": metric, "unit": unit,
                               "article: Cloud SQL": float(ref.get((bench, metric), math.nan))}
        sub = points[(points.kind == kind) & (points["copy"] == 1)]
        for t in order:
            g = sub[sub.config == t]
            row[t] = _median_row(g[col])[0] if col in g and len(g) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def target_order(manifest: dict[str, Any]) -> list[str]:
    return [t["name"] for t in manifest.get("parameters", {}).get("targets", [])]


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir, derived, figs = Path(run_dir), Path(derived_dir), Path(figures_dir)
    derived.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(run_dir)
    order = target_order(manifest)
    baseline = manifest.get("plan", {}).get("baseline") or (order[0] if order else "")
    points, failed = tables.points_table(run_dir, values=point_values)
    if points.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    order = order or sorted(set(points.config))
    ratios = metric_ratios(points, baseline)
    summary, rankings = ranking(points, ratios, [baseline, *[t for t in order if t != baseline]])
    summary["order"] = summary.target.map({t: i for i, t in enumerate(order)})
    summary = summary.sort_values(["metric", "rank", "order"], kind="stable").drop(columns="order")
    summary = summary.reset_index(drop=True)
    comparison = compare(points, ratios, manifest)
    waits_df = tables.wait_shares(run_dir, points)
    stalls = tables.stalls_table(points)
    stalls.insert(2, "kind", points.set_index("point").kind.reindex(stalls.point).to_numpy() if len(stalls) else [])
    phases = init_phases_table(points, order)
    sb = sysbench_table(points, order)
    ts = timeseries_table(run_dir, points)
    context = context_table(points, Path(reference_dir), order)
    metrics = headline(summary, comparison, manifest, failed, points, rankings, ratios)
    points.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    summary.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    lines = summary.pivot(index="metric", columns="target", values="ratio_to_baseline") if len(summary) else \
        pd.DataFrame()
    lines.reindex(columns=[t for t in order if t in lines]).reset_index().to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    waits_df.to_csv(derived / "waits.csv", index=False, float_format="%.6g")
    stalls.to_csv(derived / "stalls.csv", index=False)
    phases.to_csv(derived / "init_phases.csv", index=False, float_format="%.6g")
    sb.to_csv(derived / "sysbench.csv", index=False, float_format="%.6g")
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, points, summary, ratios, comparison, metrics, failed, waits_df, stalls, phases,
                 sb, ts, context, rankings)
    a.figures = draw(a, figs, order)
    return a


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, manifest: dict[str, Any], failed: pd.DataFrame,
             points: pd.DataFrame, rankings: dict[str, str], ratios: pd.DataFrame) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"],
                           "failed_points": len(failed), "blocks": int(manifest.get("plan", {}).get("blocks", 0)),
                           "baseline": manifest.get("plan", {}).get("baseline"),
                           "targets": {n: {"kind": t.get("kind"), "provider": t.get("provider"),
                                           "server_version": t.get("server_version")}
                                       for n, t in manifest.get("targets", {}).items()},
                           "steal_flagged_points": int(points.steal_flag.sum()) if "steal_flag" in points else 0,
                           "stalls": int(points.stalls.fillna(0).sum())}
    for m in METRICS:
        s = summary[summary.metric == m.name]
        if len(s):
            out[m.name] = {r.target: round(float(r.median), 3) for r in s.itertuples()}
    out["ranking"] = rankings
    aa = ratios[ratios.config == AA] if len(ratios) else ratios
    out["noise_floor"] = {k: round(effects.noise_floor(g.ratio), 4) for k, g in aa.groupby("metric")} if len(aa) \
        else {}
    sb = points[points.kind == "sysbench"]
    out["sysbench_errors"] = int(pd.to_numeric(sb.get("errors", pd.Series(dtype=float))).fillna(0).sum())
    out["sysbench_reconnects"] = int(pd.to_numeric(sb.get("reconnects", pd.Series(dtype=float))).fillna(0).sum())
    out["verdicts"] = {row.claim: row.verdict for _, row in comparison.iterrows()}
    return out


# -- figures --------------------------------------------------------------------------------------------
def _palette(order: list[str]) -> dict[str, Any]:
    colours = sns.color_palette("colorblind", max(3, len(order) + 1))
    pal = {t: colours[i] for i, t in enumerate(order)}
    pal[AA] = colours[len(order)]
    return pal


def draw(a: Analysis, out: Path, order: list[str]) -> dict[str, list[Path]]:
    figures.style()
    pal = _palette(order)
    made: dict[str, list[Path]] = {}
    if len(a.init_phases):
        made["init_phases"] = fig_init_phases(a, out, order)
    if (a.points.kind == "pgbench").any():
        made["tps_over_time"] = fig_tps_over_time(a, out, order, pal)
    if (a.points.kind == "sysbench").any():
        made["sysbench"] = fig_sysbench(a, out, order, pal)
    if len(a.summary):
        made["ranking"] = fig_ranking(a, out, order, pal)
    made["article_context"] = fig_context(a, out, order)
    made["published_vs_reproduced"] = tables.fig_comparison(
        a.comparison, out, "cloud_providers: the article's rankings (judged only with its services among the targets)")
    if len(a.waits):
        w = a.waits.assign(config=a.waits.kind + " " + a.waits.config)
        wo = [f"{k} {t}" for k in ("pgbench", "sysbench") for t in order if f"{k} {t}" in set(w.config)]
        made["waits"] = tables.fig_waits(w, out, order=wo, title="Where each target's client backends waited")
    plt.close("all")
    return made


def fig_init_phases(a: Analysis, out: Path, order: list[str]) -> list[Path]:
    """Stacked bars: median seconds of each pgbench -i phase per target."""
    ph = a.init_phases[a.init_phases.phase != "total"]
    wide = ph.pivot(index="target", columns="phase", values="median_s").reindex(
        index=[t for t in order if t in set(ph.target)], columns=[p for p in PHASE_ORDER if p in set(ph.phase)])
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.6 * len(wide)))
    wide.plot.barh(stacked=True, ax=ax, colormap="tab10", width=0.6)
    tot = a.init_phases[a.init_phases.phase == "total"].set_index("target")
    for i, t in enumerate(wide.index):
        if t in tot.index:
            r = tot.loc[t]
            ax.errorbar([r.median_s], [i], xerr=[[r.median_s - r.low_s], [r.high_s - r.median_s]], color="black",
                        capsize=3, fmt="none")
    ax.invert_yaxis()
    ax.set_xlabel("seconds (median over blocks; bar: interval of the total)")
    ax.set_ylabel("")
    scale = a.manifest.get("parameters", {}).get("scale")
    ax.set_title(f"pgbench -i --fillfactor=90 --scale={scale}: time per phase and target", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figures.save(fig, out, "init_phases")


def fig_tps_over_time(a: Analysis, out: Path, order: list[str], pal: dict[str, Any]) -> list[Path]:
    """pgbench tps and latency per progress interval: one line per point, one colour per target."""
    ts = a.timeseries[a.timeseries.kind == "pgbench"]
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for t in [t for t in order if t in set(ts.config)]:
        first = True
        for _, g in ts[ts.config == t].groupby("point"):
            g = g.sort_values("time_s")
            for ax, col in zip(axes, ("tps", "latency_ms"), strict=True):
                ax.plot(g.time_s, g[col], color=pal[t], alpha=0.5, lw=1, label=t if first and col == "tps" else None)
            first = False
    warm = a.manifest.get("parameters", {}).get("warmup_s", 0)
    for ax in axes:
        ax.axvspan(0, warm, color="grey", alpha=0.12, lw=0)
    st = a.stalls[a.stalls.kind == "pgbench"] if len(a.stalls) else a.stalls
    for r in st.itertuples():
        for x in str(r.stall_times).split():
            axes[0].axvline(float(x), color="red", lw=0.8, ls=":")
    axes[0].set_ylabel("tps per progress interval")
    axes[1].set_ylabel("latency average, ms")
    axes[1].set_xlabel("seconds into the run (grey: warm-up, cut; red dotted: stalls, 0 tps)")
    axes[0].legend(fontsize=8)
    axes[0].set_title("pgbench --protocol=prepared: tps and latency over time, every point of every block",
                      fontsize=10)
    return figures.save(fig, out, "tps_over_time")


def _dots(ax: plt.Axes, pts: pd.DataFrame, col: str, order: list[str], pal: dict[str, Any]) -> None:
    ts = [t for t in order if t in set(pts.config)]
    for i, t in enumerate(ts):
        v = pd.to_numeric(pts[pts.config == t][col], errors="coerce").dropna()
        ax.scatter([i] * len(v), v, color=pal[t], alpha=0.6, s=18)
        med, lo, hi, _ = median_interval(v.to_numpy(dtype=float))
        if not math.isnan(med):
            ax.errorbar([i + 0.15], [med], yerr=[[med - lo], [hi - med]], color="black", marker="_", capsize=4)
    ax.set_xlim(-0.5, len(ts) - 0.5)
    ax.set_xticks(range(len(ts)), ts)


def fig_sysbench(a: Analysis, out: Path, order: list[str], pal: dict[str, Any]) -> list[Path]:
    """sysbench tps and p95 over time (top) and per target (bottom: points, median and interval)."""
    ts = a.timeseries[a.timeseries.kind == "sysbench"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for t in [t for t in order if t in set(ts.config)]:
        first = True
        for _, g in ts[ts.config == t].groupby("point"):
            g = g.sort_values("time_s")
            axes[0][0].plot(g.time_s, g.tps, color=pal[t], alpha=0.5, lw=1, label=t if first else None)
            axes[0][1].plot(g.time_s, g.p95_ms, color=pal[t], alpha=0.5, lw=1)
            first = False
    axes[0][0].set_ylabel("tps per report interval")
    axes[0][1].set_ylabel("p95 latency per interval, ms")
    for ax in axes[0]:
        ax.set_xlabel("seconds into the run")
    axes[0][0].legend(fontsize=8)
    pts = a.points[(a.points.kind == "sysbench") & (a.points["copy"] == 1)]
    _dots(axes[1][0], pts, "tps", order, pal)
    _dots(axes[1][1], pts, "p95_ms", order, pal)
    axes[1][0].set_ylabel("tps after the warm-up")
    axes[1][1].set_ylabel("p95 latency of the run, ms")
    test = a.manifest.get("parameters", {}).get("sysbench_test", "oltp_write_only")
    fig.suptitle(f"sysbench {test}: over time (top), per target (bottom: points, median and interval)", y=1.0)
    fig.tight_layout()
    return figures.save(fig, out, "sysbench")


def fig_ranking(a: Analysis, out: Path, order: list[str], pal: dict[str, Any]) -> list[Path]:
    """Each metric's ratio to the baseline per target: median, 95% interval, noise band; the ranking text."""
    s = a.summary
    metrics = [m for m in METRICS if m.name in set(s.metric)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(2.9 * len(metrics) + 1, 4.2), squeeze=False)
    for ax, m in zip(axes[0], metrics, strict=True):
        g = s[s.metric == m.name].set_index("target")
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
        ax.set_title(f"{m.title}\n({'higher' if m.higher_is_better else 'lower'} is better)", fontsize=9)
        ax.set_xlabel(tables.wrap(a.rankings.get(m.name, ""), 28), fontsize=7)
    axes[0][0].set_ylabel(f"ratio to {a.manifest.get('plan', {}).get('baseline')} (same block)")
    fig.suptitle("Ratios to the baseline per block: median and 95% interval; grey: A/A noise floor", y=1.03)
    return figures.save(fig, out, "ranking")


def fig_context(a: Analysis, out: Path, order: list[str]) -> list[Path]:
    """The article's Cloud SQL numbers beside ours (log scale): context only, not a comparison."""
    c = a.context[a.context.metric.isin(["tps_excluding_connections", "total_time", "tps", "latency_p95"])]
    labels = [f"{r.benchmark}\n{r.metric} ({r.unit})" for r in c.itertuples()]
    cols = ["article: Cloud SQL", *[t for t in order if t in c]]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(cols)
    for j, col in enumerate(cols):
        vals = pd.to_numeric(c[col], errors="coerce").to_numpy(dtype=float)
        ax.bar(np.arange(len(c)) + (j - (len(cols) - 1) / 2) * width, np.where(np.isnan(vals), 0, vals), width,
               label=col, hatch="//" if j == 0 else None, alpha=0.85)
    ax.set_xticks(range(len(c)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Context only: the article's Cloud SQL (scale 10000, 1000 clients, 8 vCPU) vs this run's "
                 "targets at their own scale", fontsize=9)
    return figures.save(fig, out, "article_context")

