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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import claims, effects, figures, hardware, result, tables
from pglab.analysis.effects import AA
from pglab.analysis.stats import median_interval
from pglab.analysis.waits import fig_waits, wait_shares
from pglab.analysis.window import pgbench_window, sysbench_window, warmup_of
from pglab.errors import ParseError
from pglab.parsers.pgbench import parse_init, parse_progress, parse_summary
from pglab.parsers.sysbench import parse_run
from pglab.runs import record
from pglab.runs.reading import read_optional
from pglab.studies.cloud_providers.figures import (
    fig_context,
    fig_init_phases,
    fig_ranking,
    fig_sysbench,
    fig_tps_over_time,
)
from pglab.studies.cloud_providers.params import Params
from pglab.studies.cloud_providers.ranking import METRICS, ahead_of_best, metric_ratios, ranking

ARTICLE = ("article 003: Google Cloud SQL for PostgreSQL 9.6.10, 8 vCPU / 52 GiB, client 32 vCPU in the same "
           "zone, pgbench scale 10000 with 1000 clients for 600 s, sysbench 0.5 250 x 450000 rows, 1000 threads")
# pgbench -i phase names (13+ 'done in', and the AWS-patched 9.6 of the article) -> one vocabulary
PHASES = {"drop tables": "drop", "create tables": "create", "client-side generate": "generate",
          "server-side generate": "generate", "insert": "generate", "commit": "commit", "vacuum": "vacuum",
          "primary keys": "primary_keys", "index": "primary_keys", "foreign keys": "foreign_keys"}
PHASE_ORDER = ["drop", "create", "generate", "commit", "vacuum", "primary_keys", "foreign_keys"]
PROVIDER_ALIASES = {"aurora": "aurora", "amazon aurora": "aurora", "aws aurora": "aurora", "rds": "rds",
                    "amazon rds": "rds", "aws rds": "rds", "cloud_sql": "cloud_sql", "cloudsql": "cloud_sql",
                    "cloud sql": "cloud_sql", "google cloud sql": "cloud_sql", "gcp": "cloud_sql"}


@dataclass(kw_only=True)
class Analysis(result.Analysis):
    """The tables every study has (summary: the ranking table, per metric and target: value, ratio to the
    baseline, rank; ratios: per block, metric and target; comparison: the article's claims, judged only where
    its services were measured), and this study's."""

    order: list[str]  # the targets, in the run's order
    init_phases: pd.DataFrame  # per target and phase of pgbench -i: median seconds and interval
    sysbench: pd.DataFrame  # per target: tps, writes/s, p95, errors, reconnects
    timeseries: pd.DataFrame  # every progress / report interval of every point
    context: pd.DataFrame  # the article's Cloud SQL numbers beside ours (context only)
    rankings: dict[str, str]  # metric -> "tuned > stock" or "stock = tuned (not resolvable here)"

    def ratio_lines(self) -> pd.DataFrame:
        s = self.summary
        lines = s.pivot(index="metric", columns="target", values="ratio_to_baseline") if len(s) else pd.DataFrame()
        return lines.reindex(columns=[t for t in self.order if t in lines]).reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**super().tables(), "init_phases.csv": self.init_phases, "sysbench.csv": self.sysbench}


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


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """A pgbench point: steady-state tps, the summary, the init phases; a sysbench point: its summary."""
    if meta.get("kind") == "pgbench":
        row = pgbench_window(d, meta)
        s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
        if row.get("latency_avg_ms") is None:  # no progress line after the warm-up (a very short run)
            row["latency_avg_ms"] = s.get("latency_avg_ms")
        row.update(latency_stddev_ms=s.get("latency_stddev_ms"), latency_summary_ms=s.get("latency_avg_ms"),
                   transactions=s.get("transactions"), failed_transactions=s.get("failed"),
                   initial_connection_ms=s.get("initial_connection_ms"))
        row.update(init_phases_of(read_optional(d, "init_stderr.txt") + "\n" + read_optional(d, "init_stdout.txt")))
    else:
        r = parse_run(read_optional(d, "stdout.txt"))
        row = sysbench_window(r["intervals"], warmup_of(meta))
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


# -- the article's claims -------------------------------------------------------------------------------
def providers(manifest: dict[str, Any]) -> dict[str, str]:
    """aurora / rds / cloud_sql -> the first target that names that provider."""
    out: dict[str, str] = {}
    for name, t in manifest.get("targets", {}).items():
        p = PROVIDER_ALIASES.get(str(t.get("provider") or "").strip().lower())
        if p and p not in out:
            out[p] = name
    return out


# (claim, kind, metric, the provider it is about, the providers it is compared with, what each block gives)
CLAIMS = (("Aurora is first in the write-heavy sysbench test", "greater", "sysbench_tps", "aurora",
           ["rds", "cloud_sql"], "per block: sysbench tps of the aurora target / the best of rds and cloud_sql"),
          ("Aurora and Cloud SQL tie in pgbench read/write", "equal", "pgbench_tps", "aurora", ["cloud_sql"],
           "per block: pgbench tps of aurora / cloud_sql; tie = within 10%"),
          ("Cloud SQL is first in pgbench initialization", "greater", "init_s", "cloud_sql", ["aurora", "rds"],
           "per block: the fastest pgbench -i of aurora and rds / cloud_sql's"),
          ("RDS is second in pgbench initialization, ahead of Aurora", "greater", "init_s", "rds", ["aurora"],
           "per block: pgbench -i time of aurora / rds"))


def compare(points: pd.DataFrame, ratios: pd.DataFrame, manifest: dict[str, Any], steal: str = "") -> pd.DataFrame:
    """The article's rankings (parts 1-3), each judged only when the matching services were targets."""
    prov = providers(manifest)
    have = ", ".join(f"{n} ({t.get('provider') or 'no provider'})" for n, t in manifest.get("targets", {}).items())
    by = {m.name: m for m in METRICS}
    rows = []
    for text, kind, metric, one, others, note in CLAIMS:
        need = [one, *others]
        missing = [x for x in need if x not in prov]
        why = (f"needs targets with provider {', '.join(need)}; this run's targets: {have}; missing "
               f"{', '.join(missing)}" if missing else "")
        x = ahead_of_best(points, by[metric], prov[one], [prov[o] for o in others]) if not missing else []
        aa = ratios[(ratios.metric == metric) & (ratios.config == AA)].ratio if len(ratios) else []
        claim = (claims.equivalent(text, math.nan) if kind == "equal" else claims.direction(text, math.nan))
        services = hardware.services(have, bool(missing))
        rows.append(claims.comparison_row(claim, x, effects.noise_floor(aa), "; ".join(s for s in (note, steal) if s),
                                          measurable=not missing, why_not=why, machine=services, aa=aa))
    return claims.comparison_frame(rows)


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


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir = Path(run_dir)
    manifest, points, failed = result.read_run(run_dir, values=point_values)
    par = record.parameters(manifest, Params)
    order = par.names  # the targets in the order the parameters list them
    baseline = record.baseline(manifest, par.base)
    ratios = metric_ratios(points, baseline)
    summary, rankings = ranking(points, ratios, [baseline, *[t for t in order if t != baseline]])
    summary["order"] = summary.target.map({t: i for i, t in enumerate(order)})
    summary = summary.sort_values(["metric", "rank", "order"], kind="stable").drop(columns="order")
    summary = summary.reset_index(drop=True)
    comparison = compare(points, ratios, manifest, effects.steal_note(points))
    stalls = tables.stalls_table(points)
    stalls.insert(2, "kind", points.set_index("point").kind.reindex(stalls.point).to_numpy() if len(stalls) else [])
    metrics = headline(summary, comparison, manifest, baseline, failed, points, rankings, ratios)
    a = Analysis(run_dir=run_dir, manifest=manifest, params=par, points=points, failed=failed, summary=summary,
                 ratios=ratios, comparison=comparison, waits=wait_shares(run_dir, points), stalls=stalls,
                 metrics=metrics,
                 order=order, init_phases=init_phases_table(points, order), sysbench=sysbench_table(points, order),
                 timeseries=timeseries_table(run_dir, points), rankings=rankings,
                 context=context_table(points, Path(reference_dir), order))
    return a.finish(derived_dir, figures_dir, draw)


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, manifest: dict[str, Any], baseline: str,
             failed: pd.DataFrame, points: pd.DataFrame, rankings: dict[str, str], ratios: pd.DataFrame
             ) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    plan = manifest.get("plan") or {}
    out = result.run_metrics(manifest, failed, comparison, points)
    out.update(blocks=int(plan.get("blocks", 0)), baseline=baseline,
               stalls=int(points.stalls.fillna(0).sum()),
               targets={n: {"kind": t.get("kind"), "provider": t.get("provider"),
                            "server_version": t.get("server_version")} for n, t in manifest.get("targets", {}).items()})
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
    return out


def draw(a: Analysis, out: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables; a target's colour is its place in the order."""
    pal, par = figures.palette(a.order), a.params
    assert isinstance(par, Params)
    made: dict[str, list[Path]] = {}
    if len(a.init_phases):
        made["init_phases"] = fig_init_phases(a.init_phases, a.order, PHASE_ORDER, par.scale, out)
    if (a.points.kind == "pgbench").any():
        made["tps_over_time"] = fig_tps_over_time(a.timeseries, a.stalls, a.order, par.warmup_s, pal, out)
    if (a.points.kind == "sysbench").any():
        made["sysbench"] = fig_sysbench(a.timeseries, a.points, a.order, par.sysbench_test, pal, out)
    if len(a.summary):
        made["ranking"] = fig_ranking(a.summary, a.rankings, [m.name for m in METRICS], a.order,
                                      a.metrics["baseline"], pal, out)
    made["article_context"] = fig_context(a.context, a.order, pal, out)
    made["published_vs_reproduced"] = tables.fig_comparison(
        a.comparison, out, "cloud_providers: the article's rankings (judged only with its services among the targets)")
    if len(a.waits):
        w = a.waits.assign(config=a.waits.kind + " " + a.waits.config)
        wo = [f"{k} {t}" for k in ("pgbench", "sysbench") for t in a.order if f"{k} {t}" in set(w.config)]
        made["waits"] = fig_waits(w, out, order=wo, title="Where each target's client backends waited")
    return made
