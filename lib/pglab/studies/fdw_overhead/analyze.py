"""Analyze: raw run folder -> points, overhead factors per block, intervals, noise floor, verdicts, figures.

Pure and deterministic. The overhead factor of a target is ``tps(local) / tps(target)`` taken within a
block (the article's "x slower"), summarised over blocks beside the A/A noise floor (``pglab.analysis.effects``).
The why comes from the set-up points: the remote SQL postgres_fdw sends (EXPLAIN VERBOSE) and the
statements the source executed per transaction (pg_stat_statements).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import claims, effects, fidelity, hardware, placement, result, tables
from pglab.analysis.effects import AA
from pglab.analysis.waits import fig_waits, wait_note, wait_shares
from pglab.analysis.window import pgbench_window
from pglab.parsers.pgbench import parse_summary
from pglab.runs import record
from pglab.runs.reading import read_optional
from pglab.studies.fdw_overhead import claims as fdw_claims
from pglab.studies.fdw_overhead import fidelity as fdw_fidelity
from pglab.studies.fdw_overhead.figures import fig_factor, fig_latency, fig_round_trips, fig_tps
from pglab.studies.fdw_overhead.params import TARGETS, Params

ARTICLE = "article 001: PostgreSQL 9.6.2, two instances on one machine, scale 100, 10 x 10 s, 1 client"


@dataclass(kw_only=True)
class Analysis(result.Analysis):
    """The tables every study has (summary: overhead factor per group and target, and tps), and this study's."""

    EXACT = result.Analysis.EXACT | {"why/remote_sql.csv"}

    latency: pd.DataFrame
    round_trips: pd.DataFrame  # statements the source ran per transaction, by target, workload and kind
    remote_sql: pd.DataFrame  # what postgres_fdw sends for each pgbench statement, by target
    checks: dict[str, Any]
    fidelity: pd.DataFrame  # under a calibrated emulation: the article's every tps beside the run's (fdw_fidelity)

    def ratio_lines(self) -> pd.DataFrame:
        s = self.summary
        lines = s[s.target != AA].dropna(subset=["factor"]).pivot(index="group", columns="target", values="factor")
        return lines.reindex(columns=[t for t in TARGETS if t in lines]).reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        # why/: one DVC output, what postgres_fdw sends and how often
        return {**super().tables(), "latency.csv": self.latency, "why/round_trips.csv": self.round_trips,
                "why/remote_sql.csv": self.remote_sql, "fidelity.csv": self.fidelity}


def reference(reference_dir: Path) -> pd.DataFrame:
    """The article's table with its overhead factors (local tps_mean / target tps_mean per workload)."""
    ref = pd.read_csv(reference_dir / "fdw_overhead.csv")
    local = ref[ref.target == "local"].set_index("type").tps_mean
    ref["factor"] = ref.type.map(local) / ref.tps_mean
    return ref


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The window tps, plus what pgbench's summary says: tps with and without connection time, retries."""
    row = pgbench_window(d, meta)
    s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
    conn_s = (s.get("initial_connection_ms") or 0.0) / 1000.0
    dur = s.get("duration_s")
    row.update(tps_excluding=s.get("tps"),
               tps_including=(s["transactions"] / (dur + conn_s)) if s.get("transactions") and dur else None,
               initial_connection_ms=s.get("initial_connection_ms"), transactions=s.get("transactions"),
               failed=s.get("failed"), serialization_failures=s.get("serialization_failures"),
               retried=s.get("retried"), retries=s.get("retries"), latency_summary_ms=s.get("latency_avg_ms"),
               protocol=meta.get("protocol"), fetch_size=meta.get("fetch_size"),
               use_remote_estimate=meta.get("use_remote_estimate"), variant=meta.get("variant"),
               transaction_isolation=meta.get("transaction_isolation"), instance=meta.get("instance"))
    row["inv_tps"] = 1.0 / row["tps"] if row.get("tps") else math.nan
    return row


def main_variant(points: pd.DataFrame, par: Params) -> pd.Series:
    """The points of the first value of every swept option (what the claims are judged on)."""
    fs = par.fetch_sizes[0]
    return ((points.protocol == par.protocols[0])
            & (points.fetch_size.fillna(0) == (fs or 0))
            & (points.use_remote_estimate.astype(bool) == bool(par.remote_estimates[0])))


def local_cost(points: pd.DataFrame, kind: str, clients: int) -> tuple[float | None, str]:
    """(seconds per transaction of ``local`` in workload ``kind``, how it was taken): clients / tps of each local
    point (both copies; steal-flagged ones left out) at ``clients``, or at the workload's smallest count when that
    was not run; the median over them. What the RW claims (commit cost) and RO claims (per-query CPU) depend on."""
    p = points[(points.config == "local") & (points.kind == kind)] if len(points) else points
    if "steal_flag" in p:
        p = p[~p.steal_flag.fillna(False).astype(bool)]
    p = p[p.tps > 0] if len(p) else p
    if not len(p):
        return None, ""
    at = clients if (p.clients == clients).any() else int(p.clients.min())
    p = p[p.clients == at]
    return float((p.clients / p.tps).median()), f"median of {len(p)} points at {at} client{'s' * (at != 1)}"


def machines(points: pd.DataFrame, ref: pd.DataFrame, instances: claims.Machine,
             emulated: str = "", k: float = 1.0) -> dict[str, claims.Machine]:
    """What each claim depends on, here and in the article: the commit cost (a local RW transaction's time,
    mostly its flush: the same extra round trips weigh less beside a slow commit; ``emulated``: the flush
    emulation it ran under) and the per-query CPU (a local RO transaction's time), each from its local tps at 1
    client; and where the two instances run."""
    art = ref[ref.target == "local"].set_index("type").tps_mean
    rw, rw_how = local_cost(points, "RW", fdw_claims.RW_CLIENTS)
    ro, ro_how = local_cost(points, "RO", fdw_claims.RO_CLIENTS)
    if k != 1:  # slow motion: the article's times x k (pglab.workloads.calibrate)
        rw_how, ro_how = (f"{h}; against the article's x {k:.3g}, the run's slow motion" for h in (rw_how, ro_how))
    return {fdw_claims.COMMIT: hardware.commit_cost(rw * 1e3 if rw else None, 1e3 * k / float(art["RW"]), rw_how,
                                                    emulated),
            fdw_claims.CPU: hardware.query_cpu(ro * 1e6 if ro else None, 1e6 * k / float(art["RO"]), ro_how),
            "instances": instances}


def compare(ratios: pd.DataFrame, points: pd.DataFrame, reference_dir: Path, manifest: dict[str, Any], par: Params,
            waits: pd.DataFrame, round_trips: pd.DataFrame, steal: str = "", fid: pd.DataFrame | None = None
            ) -> pd.DataFrame:
    """Published vs reproduced, one row per claim (``fdw_claims``), each with its rule, interval and verdict.

    "About 1.7x slower" is a claim of a size (``claims.about``), centred on the article's table; "the RO factor
    is above the RW factor" one of a direction, and "about 4.5x" its size. Every claim is judged at 1 client, as
    the article measured, when 1 client was run; and on the machine properties it depends on (``machines``):
    where they are unlike the article's, it is not judged (``claims.comparison_row``).
    """
    ref = reference(reference_dir)
    calibration = (manifest.get("emulation") or {}).get("calibration")
    fid = pd.DataFrame() if fid is None else fid
    factors = {(r.type, r.target): float(r.factor) for r in ref.itertuples() if r.target != "local"}
    blocks = fdw_claims.Blocks.of(ratios, {"RW": par.rw_clients, "RO": par.ro_clients})
    rt = _rt_note(round_trips)
    where = _external_where(manifest, par)
    props = machines(points, ref, hardware.instances(
        where, placement.separate(manifest, [par.source_host], [par.external_host_name])),
        hardware.emulated_flush(manifest), fidelity.k_of(calibration))
    # uncalibrated, the per-query CPU above already names the CPU; calibrated, whether the calibration matched
    cpu = [hardware.cpu_speed(calibration, "fixed by the article's own local transactions at 1 client (87 us RO, "
                              "4.6 ms RW)")] if calibration else []
    kw: dict[str, Any] = {"aa": blocks.aa(), "adaptive": claims.first_look(manifest)}
    extra = {"RW": [rt.get("RW", ""), wait_note(_kind(waits, "RW"), "FDW_local", "local"), steal],
             "RO": [rt.get("RO", ""), wait_note(_kind(waits, "RO"), "FDW_local", "local"), steal],
             "external": [where]}
    rel = "needs RW and RO through FDW_local or FDW_external"
    why_not = {"RW": "RW through a foreign target was not run", "RO": "RO through a foreign target was not run",
               "RO/RW": rel, "RO/RW size": rel, "ext_ro": "needs FDW_ext_ro and FDW_external",
               "external": "needs FDW_local and FDW_external"}
    for kind, planned, at in (("RW", par.rw_clients, fdw_claims.RW_CLIENTS), ("RO", par.ro_clients,
                                                                             fdw_claims.RO_CLIENTS)):
        measured = len(points) and ((points.kind == kind) & (points.clients == at)).any()
        if at in planned and measured and not ((ratios.kind == kind) & (ratios.clients == at)).any():
            left = (f"its {kind} points at {at} client were all left out (CPU steal or another load): no other "
                    "client count stands in")
            why_not.update({k: left for k, c in fdw_claims.claim_set(factors).items() if kind in dict(c.needs)})
    rows = []
    for key, c in fdw_claims.claim_set(factors).items():
        x = blocks.values(key)
        note = "; ".join(s for s in (c.how, *extra.get(key, [])) if s)
        gated = [hardware.emulation_fidelity(*fidelity.gate(fid, fdw_fidelity.claim_points(c)))] if len(fid) else []
        machine = hardware.joint(props["instances"], *(props[d] for d in c.depends), *cpu, *gated)
        rows.append(claims.comparison_row(c.claim, x, blocks.noise_floor(), note, measurable=len(x) > 0,
                                          why_not=why_not[key], machine=machine, **kw))
    return claims.comparison_frame(rows)


def _kind(waits: pd.DataFrame, kind: str) -> pd.DataFrame:
    return waits[waits.kind == kind] if len(waits) else waits


def _external_where(manifest: dict[str, Any], par: Params) -> str:
    src, ext = par.source_host, par.external_host_name
    if src == ext:
        return f"both instances on host {src}, as in the article (no network between them)"
    sep = placement.separate(manifest, [src], [ext])
    return (f"external instance on {ext}, source on {src}: " +
            ("different machines, so a network lies between them" if sep else
             "different hosts of one machine (lab namespaces): a virtual network, shared cores"))


def _rt_note(round_trips: pd.DataFrame) -> dict[str, str]:
    """'source statements per transaction: local 7.0, FDW_local 9.0' per workload."""
    out = {}
    tot = round_trips[round_trips.statement == "all"] if len(round_trips) else round_trips
    for w, g in tot.groupby("workload") if len(tot) else []:
        out[w] = "statements the source ran per transaction: " + ", ".join(
            f"{r.target} {r.per_transaction:.1f}" for r in g.sort_values("target").itertuples())
    return out


STATEMENT_KINDS = (("START TRANSACTION", "START TRANSACTION"), ("DECLARE", "DECLARE CURSOR"), ("FETCH", "FETCH"),
                   ("CLOSE", "CLOSE"), ("COMMIT", "COMMIT"), ("BEGIN", "BEGIN"), ("END", "END"),
                   ("SET", "SET"), ("UPDATE", "UPDATE"), ("INSERT", "INSERT"), ("SELECT", "SELECT"))


def statement_kind(query: str) -> str:
    q = query.lstrip().upper()
    return next((name for prefix, name in STATEMENT_KINDS if q.startswith(prefix)), "other")


def round_trips_table(run_dir: Path) -> pd.DataFrame:
    """Per target and workload: statements the source ran per transaction, by kind and in all.

    (calls in the 2N run - calls in the N run) / N: what a session does once cancels out."""
    cols = ["target", "workload", "statement", "per_transaction"]
    path = run_dir / "round_trips" / "round_trips.json"
    if not path.exists():
        return pd.DataFrame(columns=cols)
    data = json.loads(path.read_text())
    n1, n2 = data["transactions"]
    rows = []
    for target, per in data["targets"].items():
        for w, runs in per.items():
            counts = {}
            for k in (n1, n2):
                c: dict[str, int] = {}
                for s in runs[str(k)]["statements"]:
                    c[statement_kind(s["query"])] = c.get(statement_kind(s["query"]), 0) + int(s["calls"])
                counts[k] = c
            kinds = sorted(set(counts[n1]) | set(counts[n2]))
            per_tx = {kd: (counts[n2].get(kd, 0) - counts[n1].get(kd, 0)) / (n2 - n1) for kd in kinds}
            for kd, v in per_tx.items():
                if abs(v) > 1e-9:
                    rows.append({"target": target, "workload": w, "statement": kd, "per_transaction": v})
            rows.append({"target": target, "workload": w, "statement": "all",
                         "per_transaction": sum(per_tx.values())})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["workload", "target", "statement"], kind="stable").reset_index(drop=True)


def remote_sql_table(run_dir: Path) -> pd.DataFrame:
    """What postgres_fdw sends for each statement of pgbench's scripts, per foreign target (or its error)."""
    cols = ["target", "workload", "statement", "remote_sql", "error"]
    path = run_dir / "explain" / "explain.json"
    if not path.exists():
        return pd.DataFrame(columns=cols)
    data = json.loads(path.read_text())
    rows = [{"target": t, "workload": w, "statement": s["statement"], "remote_sql": " | ".join(s.get("remote_sql", [])),
             "error": s.get("error", "")}
            for t, per in data["targets"].items() for w, stmts in per.items() for s in stmts]
    return pd.DataFrame(rows, columns=cols)


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir = Path(run_dir)
    manifest, points, failed = result.read_run(run_dir, values=point_values)
    par = record.parameters(manifest, Params)
    baseline = record.baseline(manifest, par.baseline)
    by = ["group", "kind", "clients", "variant"]
    ratios = effects.block_ratios(points, baseline, by=by, value="inv_tps").drop(columns=["inv_tps", "baseline"])
    main = set(points[main_variant(points, par)].group)
    summary = effects.summarise(ratios, by=[*by, "config"]).rename(columns={"config": "target"})
    tps = tables.tps_summary(points, ["group", "config"]).rename(columns={"config": "target"})
    incl = tables.tps_summary(points.assign(tps=points.tps_including), ["group", "config"]) \
        .rename(columns={"config": "target", "tps_median": "tps_including_median"})[
        ["group", "target", "tps_including_median"]]
    summary = summary.merge(tps, on=["group", "target"], how="outer").merge(incl, on=["group", "target"], how="left")
    summary = summary.rename(columns={"median": "factor"})
    waits = wait_shares(run_dir, points)
    latency = tables.latency_table(run_dir, points, ["kind", "clients", "variant", "config"]) \
        .rename(columns={"config": "target"})
    rt, rsql = round_trips_table(run_dir), remote_sql_table(run_dir)
    fid = fdw_fidelity.table(points[points.group.isin(main)], Path(reference_dir), manifest)
    comparison = compare(ratios[ratios.group.isin(main)], points[points.group.isin(main)], Path(reference_dir),
                         manifest, par, waits, rt, effects.steal_note(points), fid)
    checks = json.loads((run_dir / "checks" / "checks.json").read_text()) \
        if (run_dir / "checks" / "checks.json").exists() else {}
    metrics = headline(summary, comparison, manifest, par, failed, points, rt, checks)
    a = Analysis(run_dir=run_dir, manifest=manifest, params=par, points=points, failed=failed, summary=summary,
                 ratios=ratios, comparison=comparison, waits=waits, stalls=tables.stalls_table(points),
                 metrics=metrics, latency=latency, round_trips=rt, remote_sql=rsql, checks=checks, fidelity=fid)
    return a.finish(derived_dir, figures_dir, functools.partial(draw, reference_dir=Path(reference_dir)))


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, manifest: dict[str, Any], par: Params,
             failed: pd.DataFrame, points: pd.DataFrame, rt: pd.DataFrame, checks: dict[str, Any]) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out = result.run_metrics(manifest, failed, comparison, points)
    out["blocks"] = par.blocks
    f = summary[summary.target != AA].dropna(subset=["factor"])
    out["overhead_factor"] = {g: {r.target: round(float(r.factor), 3) for r in gg.sort_values("target").itertuples()}
                              for g, gg in f.groupby("group")}
    out["tps_median"] = {g: {r.target: round(float(r.tps_median), 1) for r in gg.sort_values("target").itertuples()}
                         for g, gg in summary.dropna(subset=["tps_median"]).groupby("group")}
    out["noise_floor"] = result.verdicts_noise_floor(comparison)
    aa = summary[summary.target == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_group"] = {r.group: round(float(r.noise_floor), 4) for r in aa.itertuples()}
    tot = rt[rt.statement == "all"] if len(rt) else rt
    out["source_statements_per_transaction"] = {f"{r.workload}.{r.target}": round(float(r.per_transaction), 2)
                                                for r in tot.itertuples()} if len(tot) else {}
    out["retries"] = int(pd.to_numeric(points.retries, errors="coerce").fillna(0).sum())
    out["failed_transactions"] = int(pd.to_numeric(points.failed, errors="coerce").fillna(0).sum())
    if checks:
        out["checks"] = {"consistent": checks.get("consistent"),
                         "isolation": sorted(set(checks.get("isolation", {}).values())),
                         "ext_ro_refuses_update": (checks.get("ext_ro_update") or {}).get("refused")}
    return out


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    made = {"tps_by_target": fig_tps(a.points, a.summary, out),
            "overhead_factor": fig_factor(a.summary, reference(reference_dir), list(fdw_claims.FOREIGN), out)}
    if len(a.latency):
        made["latency_by_target"] = fig_latency(a.latency, out)
    if len(a.round_trips):
        made["round_trips"] = fig_round_trips(a.round_trips, out)
    made["published_vs_reproduced"] = tables.fig_comparison(
        a.comparison, out, "fdw_overhead: published vs reproduced (overhead factor = tps(local) / tps(target))")
    if len(a.waits):  # one bar per workload and target: shares sum to 1 within each
        w = a.waits.assign(config=a.waits.kind + " " + a.waits.config)
        order = [f"{k} {t}" for k in ("RW", "RO") for t in TARGETS if f"{k} {t}" in set(w.config)]
        made["waits"] = fig_waits(w, out, order=order, title="Where the client backends of both "
                                  "instances waited, by workload and target")
    return made
