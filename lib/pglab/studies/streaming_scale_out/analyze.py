"""Analyze: raw run folder -> insert rates per mode, read rates per node count, ratios per block, verdicts.

Pure and deterministic. Inserts: rows/s of each mode divided by ``none`` (no standby) of the same block;
reads: queries/s over n nodes divided by 1 node of the same block (per query type). Both summarised over
blocks beside the A/A noise floor (``pglab.analysis.effects``). The scale-out claims are judged only when the nodes
ran on separate machines (``pglab.analysis.placement``): on one machine they share its cores.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis import claims, effects, hardware, placement, result, tables
from pglab.analysis.effects import AA, BlockEffects
from pglab.analysis.waits import fig_waits, wait_shares
from pglab.analysis.window import pgbench_window
from pglab.runs import record
from pglab.studies.streaming_scale_out.figures import fig_lag, fig_reads, fig_rows, first_points
from pglab.studies.streaming_scale_out.params import MODES, Params

ARTICLE = ("article 004: 3 Azure D8 VMs (8 cores, 32 GB), 8 clients, 4000 devices x 3 days (about 100M rows), "
           "PostgreSQL and TimescaleDB")
LAG_COLUMNS = ["point", "block", "layout", "mode", "standby", "samples", "replay_lag_bytes_max",
               "replay_lag_bytes_mean", "replay_lag_s_max", "streaming_share"]
READ_COLUMNS = ["layout", "query_type", "nodes", "qps_median", "qps_low", "qps_high", "speedup", "speedup_low",
                "speedup_high", "per_node_qps", "p50_ms", "p95_ms", "p99_ms", "queries", "points"]


@dataclass(kw_only=True)
class Analysis(result.Analysis):
    """The tables every study has (points: inserts and reads; summary: per kind, group and config, the median
    ratio, its interval, the noise floor and absolute rates), and this study's."""

    lag: pd.DataFrame  # each standby's replay lag during each load
    reads: pd.DataFrame  # queries/s, speed-up and latency per layout, query type and node count
    checks: dict[str, Any]

    def ratio_lines(self) -> pd.DataFrame:
        s = self.summary
        ins = s[(s.kind == "insert") & (s.config != AA)].dropna(subset=["median"])
        return ins.pivot(index="group", columns="config", values="median").reindex(
            columns=[m for m in MODES if m in set(ins.config)]).rename_axis("layout").reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**super().tables(), "lag.csv": self.lag, "reads.csv": self.reads}


# -- per point ---------------------------------------------------------------------------------------
def insert_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """rows/s and commit latency from the loader's own files; stalls: seconds of the load with no commit."""
    s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    row: dict[str, Any] = {"mode": meta.get("mode"), "layout": meta.get("layout"), "value": s.get("rows_per_s"),
                           "rows_per_s": s.get("rows_per_s"), "metrics_per_s": s.get("metrics_per_s"),
                           "rows": s.get("rows"), "load_s": s.get("seconds"), "clients": meta.get("clients"),
                           "commit_p50_ms": s.get("commit_p50_ms"), "commit_p95_ms": s.get("commit_p95_ms"),
                           "commit_p99_ms": s.get("commit_p99_ms"),
                           "sync_state": json.dumps(meta.get("sync_state") or {}, sort_keys=True),
                           "synchronous_commit": meta.get("synchronous_commit_in_effect")}
    b = _batches(d)
    if len(b):
        ends = b.start_s + (b.copy_ms + b.commit_ms) / 1000.0
        seconds = int(math.ceil(float(ends.max())))
        hist = np.bincount(np.floor(ends).astype(int), minlength=seconds)[:seconds]
        quiet = [i for i, n in enumerate(hist[:-1]) if n == 0]  # the last second is partial
        row.update(stalls=len(quiet), stall_times=" ".join(str(i) for i in quiet))
    else:
        row.update(stalls=0, stall_times="")
    lag = _lag(d)
    if len(lag):
        row["replay_lag_bytes_max"] = float(lag.replay_lag_bytes.max())
        row["replay_lag_s_max"] = float(lag.replay_lag_s.max()) if lag.replay_lag_s.notna().any() else math.nan
    return row


def read_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """queries/s of every node in the measured window (warm-up cut), and their sum."""
    per = meta.get("clients_per_node") or {}
    qps: dict[str, float] = {}
    stalls, times = 0, []
    for node in per:
        w = pgbench_window(d, meta, prefix=f"{node}_")
        qps[node] = float(w["tps"]) if w["tps"] is not None else math.nan
        stalls += int(w["stalls"] or 0)
        times += [f"{node}:{t}" for t in w["stall_times"].split()]
    total = float(np.sum(list(qps.values()))) if qps else math.nan
    return {"layout": meta.get("layout"), "query_type": meta.get("query_type"), "nodes": meta.get("nodes"),
            "clients": meta.get("read_clients"), "value": total, "qps": total, "tps": total,
            "per_node_qps": json.dumps({k: round(v, 2) for k, v in qps.items()}, sort_keys=True),
            "stalls": stalls, "stall_times": " ".join(times)}


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    return insert_values(d, meta) if meta.get("kind") == "insert" else read_values(d, meta)


def _batches(d: Path) -> pd.DataFrame:
    f = d / "batches.csv"
    return pd.read_csv(f) if f.exists() and f.stat().st_size else pd.DataFrame()


def _lag(d: Path) -> pd.DataFrame:
    f = d / "lag.csv"
    if not f.exists() or not f.stat().st_size:
        return pd.DataFrame(columns=["t_s", "standby", "state", "replay_lag_bytes", "replay_lag_s"])
    return pd.read_csv(f)


# -- tables ------------------------------------------------------------------------------------------
def lag_table(run_dir: Path, points: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in points[points.kind == "insert"].itertuples():
        lag = _lag(Path(run_dir) / r.point)
        for sb, g in lag.groupby("standby", sort=True):
            rows.append({"point": r.point, "block": r.block, "layout": r.layout, "mode": r.config, "standby": sb,
                         "samples": len(g), "replay_lag_bytes_max": g.replay_lag_bytes.max(),
                         "replay_lag_bytes_mean": g.replay_lag_bytes.mean(),
                         "replay_lag_s_max": g.replay_lag_s.max(),
                         "streaming_share": float((g.state == "streaming").mean())})
    return pd.DataFrame(rows, columns=LAG_COLUMNS)


def insert_latency(run_dir: Path, points: pd.DataFrame) -> pd.DataFrame:
    """Commit latency percentiles per layout and mode, merged over every batch of every block."""
    rows = []
    ins = points[(points.kind == "insert") & (points["copy"] == 1)]
    for (lay, mode), g in ins.groupby(["layout", "config"], sort=True):
        b = pd.concat([_batches(Path(run_dir) / p) for p in g.point], ignore_index=True)
        if b.empty:
            continue
        c, t = b.commit_ms.to_numpy(), (b.copy_ms + b.commit_ms).to_numpy()
        rows.append({"group": lay, "config": mode, "commit_p50_ms": np.percentile(c, 50),
                     "commit_p95_ms": np.percentile(c, 95), "commit_p99_ms": np.percentile(c, 99),
                     "batch_p50_ms": np.percentile(t, 50), "batch_p99_ms": np.percentile(t, 99),
                     "batches": len(b)})
    return pd.DataFrame(rows, columns=["group", "config", "commit_p50_ms", "commit_p95_ms", "commit_p99_ms",
                                       "batch_p50_ms", "batch_p99_ms", "batches"])


def reads_table(run_dir: Path, points: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    rd = points[(points.kind == "read") & (points["copy"] == 1)]
    if rd.empty:
        return pd.DataFrame(columns=READ_COLUMNS)
    from pglab.parsers.txlog import latency_sources, merged_percentiles

    rows = []
    sp = summary[summary.kind == "read"].set_index(["group", "config"])
    for (lay, q, n), g in rd.groupby(["layout", "query_type", "nodes"], sort=True):
        med, lo, hi, _ = effects.interval(g.qps.to_numpy())
        per = pd.DataFrame([json.loads(v) for v in g.per_node_qps]).median().round(1).to_dict()
        paths = sorted(str(f) for p in g.point for d in (Path(run_dir) / p).glob("txlog_*") for f in latency_sources(d))
        pct = merged_percentiles(paths, qs=(50, 95, 99)) if paths else {}
        key = (f"{lay}-{q}", f"n{int(n)}")
        s = sp.loc[key] if key in sp.index else None
        rows.append({"layout": lay, "query_type": q, "nodes": int(n), "qps_median": med, "qps_low": lo,
                     "qps_high": hi, "speedup": 1.0 if int(n) == 1 else (s["median"] if s is not None else math.nan),
                     "speedup_low": math.nan if s is None else s.ci_low,
                     "speedup_high": math.nan if s is None else s.ci_high,
                     "per_node_qps": json.dumps(per, sort_keys=True), "p50_ms": pct.get(50), "p95_ms": pct.get(95),
                     "p99_ms": pct.get(99), "queries": pct.get("n"), "points": len(g)})
    return pd.DataFrame(rows, columns=READ_COLUMNS)


# -- claims -----------------------------------------------------------------------------------------
def node_hosts(manifest: dict[str, Any], n: int) -> list[str]:
    """The hosts of the first ``n`` nodes (the primary and n - 1 standbys), as the run's topology placed them."""
    topo = manifest.get("topology", {})
    hosts = [topo.get("primary", {}).get("host")] + [s.get("host") for s in topo.get("standbys", [])][: n - 1]
    return [h for h in hosts if h]


def nodes_apart(manifest: dict[str, Any], n: int) -> tuple[bool, str]:
    """Whether the first ``n`` nodes (the primary and n - 1 standbys) ran on n different machines."""
    hosts = node_hosts(manifest, n)
    if len(hosts) < n:
        return False, f"{n} nodes were not measured (the run had {len(hosts)})"
    ms = {placement.machine(manifest, h) for h in hosts}
    if len(ms) == n:
        return True, f"{n} nodes on {n} machines"
    where = ", ".join(hosts) or "unknown hosts"
    return False, (f"the {n} nodes ({where}) ran on {len(ms)} machine(s): they share its cores, so reads "
                   "cannot scale out")


def throttled(points: pd.DataFrame | None, run_dir: Path | None, n: int | None = None) -> dict[str, float]:
    """node -> the share of its CPU group's periods it used up over the read points on ``n`` nodes (None: the
    insert points), as the collect recorded them under ``emulate: machine_per_node``; {} when it did not."""
    if run_dir is None or points is None or not len(points):
        return {}
    mine = points[points.kind == "insert"] if n is None else (
        points[(points.kind == "read") & (points.nodes == n)] if "nodes" in points else points.iloc[:0])
    tot: dict[str, list[int]] = {}
    for point in mine.point:
        meta = json.loads((run_dir / str(point) / "meta.json").read_text())
        for node, g in (meta.get("cpu_groups") or {}).items():
            t = tot.setdefault(node, [0, 0])
            t[0], t[1] = t[0] + int(g.get("periods", 0)), t[1] + int(g.get("throttled", 0))
    return {k: v[1] / v[0] for k, v in tot.items() if v[0]}


def _apart(manifest: dict[str, Any], n: int, what: str, article: str,
           used: dict[str, float] | None = None, limit: list[str] | None = None) -> tuple[str, str, claims.Machine]:
    """(why the claim cannot be computed: "" when the run had ``n`` nodes; where they ran when they shared a
    machine, for the note; the property beside the verdict). Nodes sharing a machine are the one policy's
    business (``claims.comparison_row``: on a machine unlike the article's a claim is not judged, the verdict its
    interval gives kept apart), not a claim the run could not compute."""
    ok, why = nodes_apart(manifest, n)
    machine = hardware.separate_machines(manifest, node_hosts(manifest, n), article,
                                         f"the primary and each standby on a machine of its own ({what})")
    missing = why if len(node_hosts(manifest, n)) < n else ""
    names = [manifest.get("topology", {}).get("primary", {}).get("name", "primary")] + [
        s.get("name", "") for s in manifest.get("topology", {}).get("standbys", [])][: n - 1]
    scaled = hardware.machine_per_node(manifest, names, used or {}, article, machine.answer,
                                       limit) if not ok else None
    if scaled is not None:  # a machine per node, emulated: judged where each node was its own limit
        return missing, "" if not scaled.differs else scaled.here, scaled
    return missing, "" if ok or missing else why, machine


def compare(ratios: pd.DataFrame, manifest: dict[str, Any], steal: str = "", points: pd.DataFrame | None = None,
            run_dir: Path | None = None) -> pd.DataFrame:
    """Published vs reproduced, one row per claim. The insert claims are of replicas on machines of their own:
    where they share the primary's cores, a replica's replay and walsender take CPU from the inserts, and the
    cost measured is that of sharing, not of the mode; they are then not judged (the machine differs from the
    article's), the verdict the interval gives kept apart."""
    ins = BlockEffects.of(ratios[ratios.kind == "insert"].drop(columns="kind"))
    rd = BlockEffects.of(ratios[ratios.kind == "read"].drop(columns="kind"))
    standbys = len(manifest.get("topology", {}).get("standbys", []))
    missing, where, machine = _apart(manifest, standbys + 1, "`standby_hosts`", "3 Azure D8 VMs (8 cores, 32 GB): "
                                     "the primary and 2 replicas, each on its own", throttled(points, run_dir),
                                     ["primary"])
    where = where.replace("reads cannot scale out", "the replicas' work takes CPU from the inserts")
    note = "; ".join(x for x in ("per block: rows/s of the mode / rows/s with no replica", steal, where) if x)

    def insert_row(claim: claims.Claim, values: pd.Series, noise: float, note: str, needs: str) -> dict[str, object]:
        return claims.comparison_row(claim, values, noise, note, measurable=not missing and len(values) > 0,
                                     why_not=missing or f"needs {needs}", aa=ins.aa, machine=machine)

    rows = [
        insert_row(claims.equivalent("async replication costs inserts almost nothing (rows/s async / none)", 1.0),
                   ins["async"], ins.noise, note, "async"),
        insert_row(claims.about("synchronous apply costs inserts about 50% (rows/s sync_apply / none)", 0.5, 0.5),
                   ins["sync_apply"], ins.noise, note, "sync_apply"),
    ]
    between = pd.Series(dtype=float)
    if {"sync_write", "sync_apply", "async"} <= set(ins.table):
        b = ins.table[["async", "sync_write", "sync_apply"]].dropna()
        # in between, per block: sync_write's distance from both ends on a log scale, 0 = at sync_apply, 1 = at async
        between = (np.log(b.sync_write / b.sync_apply) / np.log(b["async"] / b.sync_apply)).replace(
            [np.inf, -np.inf], np.nan).dropna() + 0.5
    rows.append(insert_row(
        claims.within("synchronous write lies in between (where sync_write falls from sync_apply to async, + 0.5)",
                      1.0, 0.5, 1.5), between, math.nan,
        "; ".join(x for x in ("0.5 = as slow as sync_apply, 1.5 = as fast as async (log scale, per block); the "
                              "article gives no number, so 1.0 (half way) stands for it", where) if x),
        "async, sync_write and sync_apply"))
    for n, pub, extra in ((3, 2.5, "2.9x elsewhere in the article"), (5, 4.8, "")):
        missing_n, where_n, m = _apart(manifest, n, "`read_nodes`", f"{n} Azure D8 VMs (8 cores, 32 GB), one per node",
                                       throttled(points, run_dir, n))
        got = rd[f"n{n}"].dropna() if f"n{n}" in rd else pd.Series(dtype=float)
        if m.emulated and len(got) and float(got.median()) > n * 1.05:  # more than n machines' worth: not machines
            m = dataclasses.replace(m, differs=True, emulated="", here=m.here + (
                f"; but {n} nodes answered {float(got.median()):.2f}x one node's queries, more than {n} machines "
                "could: a CPU quota crowded with one node's clients loses more to throttling than several do"))
        rows.append(claims.comparison_row(
            claims.about(f"reads scale out: {n} nodes answer {pub}x the queries of 1 (queries/s n{n} / n1)", pub,
                         pub), rd[f"n{n}"], rd.noise, "; ".join(x for x in (extra, where_n) if x),
            measurable=not missing_n and f"n{n}" in rd, why_not=missing_n or f"reads on {n} nodes were not run",
            aa=rd.aa, machine=m))
    return claims.comparison_frame(rows)


# -- analyze -----------------------------------------------------------------------------------------
def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir = Path(run_dir)
    manifest, points, failed = result.read_run(run_dir, values=point_values)
    par = record.parameters(manifest, Params)
    baseline = record.baseline(manifest, par.baseline)
    parts = []
    for kind, base in (("insert", baseline), ("read", "n1")):
        p = points[points.kind == kind]
        if len(p):
            parts.append(effects.block_ratios(p, base, by=["group"], value="value").assign(kind=kind))
    ratios = pd.concat(parts, ignore_index=True)
    summary = effects.summarise(ratios, by=["kind", "group", "config"])
    rates = tables.tps_summary(points.assign(tps=points.value), ["group", "config"]) \
        .rename(columns=lambda c: c.replace("tps_", "rate_"))
    summary = summary.merge(rates, on=["group", "config"], how="outer")
    summary = summary.merge(insert_latency(run_dir, points), on=["group", "config"], how="left")
    summary["kind"] = summary.kind.fillna(summary.group.map(dict(zip(points.group, points.kind, strict=False))))
    comparison = compare(ratios, manifest, effects.steal_note(points), points, run_dir)
    checks = {"timescaledb": manifest.get("timescaledb", {}), "read_checks": manifest.get("read_checks", {}),
              "counts_equal": _counts_equal(run_dir)}
    metrics = headline(summary, comparison, manifest, par, failed, points, checks)
    a = Analysis(run_dir=run_dir, manifest=manifest, params=par, points=points, failed=failed, summary=summary,
                 ratios=ratios, comparison=comparison, waits=wait_shares(run_dir, points[points.kind == "insert"]),
                 stalls=tables.stalls_table(points), metrics=metrics, lag=lag_table(run_dir, points),
                 reads=reads_table(run_dir, points, summary), checks=checks)
    return a.finish(derived_dir, figures_dir, draw)


def _counts_equal(run_dir: Path) -> bool | None:
    """Every insert point's row counts equal on every node (its counts.json), as the points were checked."""
    seen = []
    for f in sorted(Path(run_dir).glob("insert-*/counts.json")):  # inconsistent points too, not only ok ones
        if f.exists():
            c = json.loads(f.read_text())
            seen.append(len({json.dumps(v) for v in c.values()}) == 1)
    return all(seen) if seen else None


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, manifest: dict[str, Any], par: Params,
             failed: pd.DataFrame, points: pd.DataFrame, checks: dict[str, Any]) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out = result.run_metrics(manifest, failed, comparison, points)
    out.update(blocks=par.blocks, read_blocks=par.read_blocks)
    s = summary[summary.config != AA]
    ins, rd = s[s.kind == "insert"], s[s.kind == "read"]
    out["rows_per_s"] = {g: {r.config: round(float(r.rate_median), 1) for r in gg.itertuples()
                             if not pd.isna(r.rate_median)} for g, gg in ins.groupby("group")}
    out["ratio_to_none"] = {g: {r.config: round(float(r.median), 3) for r in gg.itertuples()
                                if not pd.isna(r.median)} for g, gg in ins.groupby("group")}
    out["read_speedup"] = {g: {r.config: round(float(r.median), 3) for r in gg.itertuples()
                               if not pd.isna(r.median)} for g, gg in rd.groupby("group")}
    aa = summary[summary.config == AA].dropna(subset=["noise_floor"])
    out["noise_floor"] = {k: round(float(g.noise_floor.max()), 4) for k, g in aa.groupby("kind")}
    ts = checks.get("timescaledb") or {}
    out["timescaledb"] = {"available": bool(ts.get("available")), "version": ts.get("version")}
    out["counts_equal_on_every_node"] = checks.get("counts_equal")
    rc = checks.get("read_checks") or {}
    out["read_results_equal_on_every_node"] = all(all(v["same_on_every_node"].values()) for v in rc.values()) \
        if rc else None
    out["machines"] = len(placement.machines(manifest))
    return out


# -- figures -----------------------------------------------------------------------------------------
def draw(a: Analysis, out: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    made: dict[str, list[Path]] = {}
    if (a.points.kind == "insert").any():
        made["rows_by_mode"] = fig_rows(a.points, a.summary, out)
    if len(a.lag):
        first = first_points(a.points)
        made["lag_during_load"] = fig_lag(first, {p: _lag(a.run_dir / p) for p in first.point}, out)
    if (a.points.kind == "read").any():
        made["reads_by_nodes"] = fig_reads(a.reads, a.manifest, out)
    made["published_vs_reproduced"] = tables.fig_comparison(
        a.comparison, out, "streaming_scale_out: published vs reproduced (insert ratio to no replication; "
                           "read speed-up over 1 node)")
    if len(a.waits):
        made["waits"] = fig_waits(a.waits, out, order=[m for m in MODES if m in set(a.waits.config)],
                                  title="Where the primary's loader backends waited, by mode "
                                        "(SyncRep: waiting for standbys to confirm)")
    return made
