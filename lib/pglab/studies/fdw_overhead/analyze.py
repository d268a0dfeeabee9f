"""Analyze: raw run folder -> points, overhead factors per block, intervals, noise floor, verdicts, figures.

Pure and deterministic. The overhead factor of a target is ``tps(local) / tps(target)`` taken within a
block (the article's "x slower"), summarised over blocks beside the A/A noise floor (``pglab.analysis.effects``).
The why comes from the set-up points: the remote SQL postgres_fdw sends (EXPLAIN VERBOSE) and the
statements the source executed per transaction (pg_stat_statements).
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
from pglab.parsers.pgbench import parse_summary
from pglab.runs.store import load_manifest, read_optional, write_json
from pglab.studies.fdw_overhead.params import TARGETS

FOREIGN_RW = ["FDW_local", "FDW_external"]
FOREIGN = ["FDW_local", "FDW_external", "FDW_ext_ro"]
ARTICLE = "article 001: PostgreSQL 9.6.2, two instances on one machine, scale 100, 10 x 10 s, 1 client"


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    points: pd.DataFrame  # one row per measured point
    summary: pd.DataFrame  # overhead factor per group and target: median, interval, noise floor; tps
    ratios: pd.DataFrame  # the per-block factors behind it
    comparison: pd.DataFrame
    metrics: dict[str, Any]
    failed: pd.DataFrame
    waits: pd.DataFrame
    latency: pd.DataFrame
    stalls: pd.DataFrame
    round_trips: pd.DataFrame  # statements the source ran per transaction, by target, workload and kind
    remote_sql: pd.DataFrame  # what postgres_fdw sends for each pgbench statement, by target
    checks: dict[str, Any]
    figures: dict[str, list[Path]] = field(default_factory=dict)


def reference(reference_dir: Path) -> pd.DataFrame:
    """The article's table with its overhead factors (local tps_mean / target tps_mean per workload)."""
    ref = pd.read_csv(reference_dir / "fdw_overhead.csv")
    local = ref[ref.target == "local"].set_index("type").tps_mean
    ref["factor"] = ref.type.map(local) / ref.tps_mean
    return ref


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The window tps, plus what pgbench's summary says: tps with and without connection time, retries."""
    row = tables.pgbench_window(d, meta)
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


def main_variant(points: pd.DataFrame, manifest: dict[str, Any]) -> pd.Series:
    """The points of the first value of every swept option (what the claims are judged on)."""
    par = manifest.get("parameters", {})
    fs = (par.get("fetch_sizes") or [None])[0]
    return ((points.protocol == (par.get("protocols") or ["simple"])[0])
            & (points.fetch_size.fillna(0) == (fs or 0))
            & (points.use_remote_estimate.astype(bool) == bool((par.get("remote_estimates") or [False])[0])))


def _geo(df: pd.DataFrame, cols: list[str]) -> pd.Series:
    """Per block: the geometric mean over the columns present (NaN where none is)."""
    cols = [c for c in cols if c in df]
    if not cols:
        return pd.Series(dtype=float)
    return np.exp(np.log(df[cols]).mean(axis=1, skipna=False)).dropna()


def _per_block(ratios: pd.DataFrame, kind: str, clients: int | None = None) -> pd.DataFrame:
    r = ratios[ratios.kind == kind]
    if clients is not None and (r.clients == clients).any():
        r = r[r.clients == clients]
    return tables.per_block(r)


def compare(ratios: pd.DataFrame, reference_dir: Path, manifest: dict[str, Any], waits: pd.DataFrame,
            round_trips: pd.DataFrame) -> pd.DataFrame:
    """Published vs reproduced, one row per claim, each with its interval and verdict.

    A claim of a size ("about 1.7x slower") holds when the interval lies above the square root of the
    published factor: nearer it than to no overhead, on a log scale. The RO claims use 1 client, as the
    article did, when 1 client was measured.
    """
    ref = reference(reference_dir)
    ref_f = ref.set_index(["type", "target"]).factor
    rw, ro = _per_block(ratios, "RW"), _per_block(ratios, "RO", clients=1)
    aa = pd.concat([rw.get(AA, pd.Series(dtype=float)), ro.get(AA, pd.Series(dtype=float))])
    noise = effects.noise_floor(aa)
    tol = max(0.1, 0.0 if math.isnan(noise) else noise)
    rt = _rt_note(round_trips)
    rows = []

    pub_rw = float(np.exp(np.log(ref_f.loc["RW"].reindex(FOREIGN_RW)).mean()))
    f_rw = _geo(rw, FOREIGN_RW)
    rows.append(effects.comparison_row(
        Claim("RW through postgres_fdw is about 1.7x slower than local", pub_rw, "greater", math.sqrt(pub_rw)),
        f_rw, noise, "; ".join(x for x in ("per block: geometric mean over FDW_local and FDW_external of tps(local) "
                                           "/ tps(target), RW", rt.get("RW", ""),
                                           tables.wait_note(_kind(waits, "RW"), "FDW_local", "local")) if x),
        measurable=len(rw) > 0 and any(c in rw for c in FOREIGN_RW), why_not="RW through a foreign target was not run"))
    pub_ro = float(np.exp(np.log(ref_f.loc["RO"].reindex(FOREIGN)).mean()))
    f_ro = _geo(ro, FOREIGN)
    rows.append(effects.comparison_row(
        Claim("RO through postgres_fdw is about 7.6x slower than local", pub_ro, "greater", math.sqrt(pub_ro)),
        f_ro, noise, "; ".join(x for x in ("per block: geometric mean over the foreign targets of tps(local) / "
                                           "tps(target), RO at 1 client", rt.get("RO", ""),
                                           tables.wait_note(_kind(waits, "RO"), "FDW_local", "local")) if x),
        measurable=len(ro) > 0 and any(c in ro for c in FOREIGN), why_not="RO through a foreign target was not run"))
    both = pd.concat([_geo(ro, FOREIGN_RW).rename("ro"), _geo(rw, FOREIGN_RW).rename("rw")], axis=1).dropna()
    pub_rel = pub_ro / pub_rw
    rows.append(effects.comparison_row(
        Claim("the RO overhead factor is far above the RW factor", pub_rel, "greater", math.sqrt(pub_rel)),
        both.ro / both.rw if len(both) else [], noise,
        "per block: RO factor / RW factor (FDW_local and FDW_external, the same block number)",
        measurable=len(both) > 0, why_not="needs RW and RO through FDW_local or FDW_external"))
    ro_all = _per_block(ratios, "RO")
    pub_ro_ext = float(ref_f.loc[("RO", "FDW_external")] / ref_f.loc[("RO", "FDW_ext_ro")])
    ok = {"FDW_ext_ro", "FDW_external"} <= set(ro_all)
    rows.append(effects.comparison_row(
        Claim("FDW_ext_ro is no faster than FDW_external", pub_ro_ext, "less", 1 + tol),
        (ro_all["FDW_external"] / ro_all["FDW_ext_ro"]).dropna() if ok else [], noise,
        f"per block: tps(FDW_ext_ro) / tps(FDW_external), RO; 'no faster' = below 1 + {tol:.2g} "
        "(10% or the noise floor)", measurable=ok, why_not="needs FDW_ext_ro and FDW_external"))
    per = pd.concat([_per_block(ratios, "RW"), ro_all])
    ok = {"FDW_local", "FDW_external"} <= set(per)
    pub_ext = float(np.exp(np.mean([math.log(ref_f.loc[(w, "FDW_local")] / ref_f.loc[(w, "FDW_external")])
                                    for w in ("RW", "RO")])))
    where = _external_where(manifest)
    rows.append(effects.comparison_row(
        Claim("FDW_external is no slower than FDW_local", pub_ext, "greater", 1 / (1 + tol)),
        (per["FDW_local"] / per["FDW_external"]).groupby(level=0).apply(lambda s: float(np.exp(np.log(s).mean())))
        if ok else [], noise,
        f"per block: tps(FDW_external) / tps(FDW_local), geometric mean over RW and RO; 'no slower' = above "
        f"1/(1 + {tol:.2g}); {where}", measurable=ok, why_not="needs FDW_local and FDW_external"))
    return effects.comparison_frame(rows)


def _kind(waits: pd.DataFrame, kind: str) -> pd.DataFrame:
    return waits[waits.kind == kind] if len(waits) else waits


def _external_where(manifest: dict[str, Any]) -> str:
    par = manifest.get("parameters", {})
    src, ext = par.get("source_host", "local"), par.get("external_host") or par.get("source_host", "local")
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
    run_dir, derived, figs = Path(run_dir), Path(derived_dir), Path(figures_dir)
    derived.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(run_dir)
    baseline = manifest.get("parameters", {}).get("baseline", "local")
    points, failed = tables.points_table(run_dir, values=point_values)
    if points.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    by = ["group", "kind", "clients", "variant"]
    ratios = effects.block_ratios(points, baseline, by=by, value="inv_tps").drop(columns=["inv_tps", "baseline"])
    main = set(points[main_variant(points, manifest)].group)
    summary = effects.summarise(ratios, by=[*by, "config"]).rename(columns={"config": "target"})
    tps = tables.tps_summary(points, ["group", "config"]).rename(columns={"config": "target"})
    incl = tables.tps_summary(points.assign(tps=points.tps_including), ["group", "config"]) \
        .rename(columns={"config": "target", "tps_median": "tps_including_median"})[
        ["group", "target", "tps_including_median"]]
    summary = summary.merge(tps, on=["group", "target"], how="outer").merge(incl, on=["group", "target"], how="left")
    summary = summary.rename(columns={"median": "factor"})
    waits = tables.wait_shares(run_dir, points)
    latency = tables.latency_table(run_dir, points, ["kind", "clients", "variant", "config"]) \
        .rename(columns={"config": "target"})
    stalls = tables.stalls_table(points)
    rt, rsql = round_trips_table(run_dir), remote_sql_table(run_dir)
    comparison = compare(ratios[ratios.group.isin(main)], Path(reference_dir), manifest, waits, rt)
    checks = json.loads((run_dir / "checks" / "checks.json").read_text()) \
        if (run_dir / "checks" / "checks.json").exists() else {}
    metrics = headline(summary, comparison, manifest, len(failed), points, rt, checks)
    points.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    summary.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    lines = summary[summary.target != AA].dropna(subset=["factor"]).pivot(index="group", columns="target",
                                                                          values="factor")
    lines.reindex(columns=[t for t in TARGETS if t in lines]).reset_index().to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    waits.to_csv(derived / "waits.csv", index=False, float_format="%.6g")
    latency.to_csv(derived / "latency.csv", index=False, float_format="%.6g")
    stalls.to_csv(derived / "stalls.csv", index=False)
    (derived / "why").mkdir(exist_ok=True)  # one DVC output: what postgres_fdw sends, and how often
    rt.to_csv(derived / "why" / "round_trips.csv", index=False, float_format="%.6g")
    rsql.to_csv(derived / "why" / "remote_sql.csv", index=False)
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, points, summary, ratios, comparison, metrics, failed, waits, latency, stalls,
                 rt, rsql, checks)
    a.figures = draw(a, figs, Path(reference_dir))
    return a


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, manifest: dict[str, Any], n_failed: int,
             points: pd.DataFrame, rt: pd.DataFrame, checks: dict[str, Any]) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"], "failed_points": n_failed,
                           "blocks": int(manifest.get("parameters", {}).get("blocks", 0)),
                           "steal_flagged_points": int(points.steal_flag.sum()) if "steal_flag" in points else 0}
    f = summary[summary.target != AA].dropna(subset=["factor"])
    out["overhead_factor"] = {g: {r.target: round(float(r.factor), 3) for r in gg.sort_values("target").itertuples()}
                              for g, gg in f.groupby("group")}
    out["tps_median"] = {g: {r.target: round(float(r.tps_median), 1) for r in gg.sort_values("target").itertuples()}
                         for g, gg in summary.dropna(subset=["tps_median"]).groupby("group")}
    nf = comparison.noise_floor.dropna()
    out["noise_floor"] = round(float(nf.iloc[0]), 4) if len(nf) else None
    aa = summary[summary.target == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_group"] = {r.group: round(float(r.noise_floor), 4) for r in aa.itertuples()}
    out["verdicts"] = {row.claim: row.verdict for _, row in comparison.iterrows()}
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


# -- figures ------------------------------------------------------------------------------------------
def _palette(targets: list[str]) -> dict[str, Any]:
    colours = sns.color_palette("colorblind", len(TARGETS) + 1)
    pal = {t: colours[TARGETS.index(t)] for t in targets if t in TARGETS}
    pal[AA] = colours[-1]
    return pal


def _group_order(groups: list[str]) -> list[str]:
    return sorted(groups, key=lambda g: (not g.startswith("rw"), g))


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    figures.style()
    made = {"tps_by_target": fig_tps(a, out), "overhead_factor": fig_factor(a, out, reference_dir)}
    if len(a.latency):
        made["latency_by_target"] = fig_latency(a, out)
    if len(a.round_trips):
        made["round_trips"] = fig_round_trips(a, out)
    made["published_vs_reproduced"] = tables.fig_comparison(
        a.comparison, out, "fdw_overhead: published vs reproduced (overhead factor = tps(local) / tps(target))")
    if len(a.waits):  # one bar per workload and target: shares sum to 1 within each
        w = a.waits.assign(config=a.waits.kind + " " + a.waits.config)
        order = [f"{k} {t}" for k in ("RW", "RO") for t in TARGETS if f"{k} {t}" in set(w.config)]
        made["waits"] = tables.fig_waits(w, out, order=order, title="Where the client backends of both "
                                           "instances waited, by workload and target")
    plt.close("all")
    return made


def fig_tps(a: Analysis, out: Path) -> list[Path]:
    """Every point as a dot, the median and its interval as a bar, per group (workload x clients)."""
    pts = a.points[a.points["copy"] == 1]
    groups = _group_order(sorted(set(pts.group)))
    targets = [t for t in TARGETS if t in set(pts.config)]
    pal = _palette(targets)
    fig, axes = plt.subplots(1, len(groups), figsize=(3.6 * len(groups) + 1, 4.2), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        p = pts[pts.group == g]
        order = [t for t in targets if t in set(p.config)]
        sns.stripplot(data=p, x="config", y="tps", order=order, hue="config", palette=pal, ax=ax, jitter=False,
                      size=4, alpha=0.6, legend=False)
        s = a.summary[(a.summary.group == g)].set_index("target")
        for i, t in enumerate(order):
            if t in s.index and not pd.isna(s.loc[t, "tps_median"]):
                r = s.loc[t]
                ax.errorbar([i + 0.2], [r.tps_median], yerr=[[r.tps_median - r.tps_low], [r.tps_high - r.tps_median]],
                            color="black", marker="_", capsize=4)
        ax.set_yscale("log")
        ax.set_title(g, fontsize=10)
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
        ax.set_ylabel("tps in the measured window (log)" if ax is axes[0][0] else "")
    fig.suptitle("pgbench tps by target (dots: points; bars: median and 95% interval over blocks)", y=1.02)
    return figures.save(fig, out, "tps_by_target")


def fig_factor(a: Analysis, out: Path, reference_dir: Path) -> list[Path]:
    """Our overhead factor per target and group beside the article's, with the noise band."""
    ref = reference(reference_dir)
    s = a.summary.dropna(subset=["factor"])
    groups = _group_order(sorted(set(s.group)))
    targets = [t for t in FOREIGN if t in set(s.target)]
    pal = _palette(targets)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(groups) * max(1, len(targets)) / 2, 4.4))
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
                ax.errorbar([x], [r.factor], yerr=[[r.factor - r.ci_low], [r.ci_high - r.factor]], color=pal[t],
                            marker="o", capsize=3, label=None if t in labelled else t)
                labelled.add(t)
            pub = ref[(ref.type == kind) & (ref.target == t) & (ref.clients == c)]
            if len(pub):
                ax.scatter([x], pub.factor, marker="s", facecolor="none", edgecolor=pal[t], s=60, zorder=3,
                           label=None if "article" in labelled else "article (open squares)")
                labelled.add("article")
    ax.set_xticks(range(len(groups)), groups)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("overhead factor = tps(local) / tps(target), log")
    ax.set_title("What postgres_fdw costs: overhead factor per block, median and 95% interval\n"
                 "(grey band: A/A noise floor; open squares: the article's factor)", fontsize=10)
    ax.legend(fontsize=8)
    return figures.save(fig, out, "overhead_factor")


def fig_latency(a: Analysis, out: Path) -> list[Path]:
    lat = a.latency.melt(id_vars=["kind", "clients", "variant", "target"], value_vars=["p50_ms", "p95_ms", "p99_ms"],
                         var_name="percentile", value_name="ms")
    lat["group"] = lat.kind + " c" + lat.clients.astype(str)
    groups = sorted(set(lat.group), key=lambda g: (not g.startswith("RW"), g))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.8 * len(groups) + 1, 4.0), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        d = lat[lat.group == g]
        order = [t for t in TARGETS if t in set(d.target)]
        sns.barplot(data=d, x="target", y="ms", hue="percentile", order=order, ax=ax, errorbar=None)
        ax.set_yscale("log")
        ax.set_title(g, fontsize=10)
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
        ax.set_ylabel("transaction latency, ms (log)" if ax is axes[0][0] else "")
        if ax is not axes[0][-1]:
            ax.get_legend().remove()
    fig.suptitle("Latency percentiles by target, merged over every transaction of every block (pgbench -l)", y=1.02)
    return figures.save(fig, out, "latency_by_target")


def fig_round_trips(a: Analysis, out: Path) -> list[Path]:
    rt = a.round_trips[a.round_trips.statement != "all"]
    wide = rt.assign(row=rt.workload + " " + rt.target).pivot_table(index="row", columns="statement",
                                                                      values="per_transaction", aggfunc="sum")
    wide = wide.reindex(sorted(wide.index, key=lambda r: (not r.startswith("RW"), r))).fillna(0.0)
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.45 * len(wide)))
    wide.plot.barh(stacked=True, ax=ax, colormap="tab20", width=0.7)
    ax.invert_yaxis()
    ax.set_xlabel("statements the source executed per pgbench transaction (pg_stat_statements)")
    ax.set_ylabel("")
    ax.set_title("Why: each statement is a round trip to the source (local: pgbench's own; foreign: "
                 "postgres_fdw's)", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figures.save(fig, out, "round_trips")
