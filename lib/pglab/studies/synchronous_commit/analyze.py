"""Analyze: raw run folder -> per-point table, within-block ratios, intervals, noise floor, verdicts, figures.

Pure and deterministic: the same raw files give byte-identical CSVs and figures. Failed points are
excluded and listed, never silently dropped. Every effect is a ratio to ``on`` (the baseline) taken
within a block, summarised over blocks, and shown beside the A/A noise floor (``pglab.analysis.effects``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pglab import emulated as emulation
from pglab.analysis import claims, effects, hardware, placement, result, tables
from pglab.analysis.effects import AA, BlockEffects
from pglab.analysis.stats import median_interval
from pglab.analysis.waits import fig_waits, wait_note, wait_shares
from pglab.parsers.fsync import parse_pg_test_fsync
from pglab.parsers.pgbench import parse_init
from pglab.runs import record
from pglab.runs.reading import read_meta, read_optional
from pglab.studies.synchronous_commit import claims as sc_claims
from pglab.studies.synchronous_commit import fidelity as sc_fidelity
from pglab.studies.synchronous_commit.figures import (
    LEVEL_ORDER,
    fig_flush_ladder,
    fig_ratio,
    fig_standby_reads,
    fig_tps_by_clients,
)
from pglab.studies.synchronous_commit.params import Params


@dataclass(kw_only=True)
class Analysis(result.Analysis):
    """The tables every study has (summary: ratio to the baseline per clients and level), and this study's."""

    fsync: dict[str, Any] | None
    latency: pd.DataFrame
    reads: pd.DataFrame  # standby reads: per-block loaded/idle ratios
    ladder: pd.DataFrame  # with an emulated flush ladder: each level's ratio to on at each flush level
    fidelity: pd.DataFrame  # under a calibrated emulation: the article's every tps beside the run's (sc_fidelity)

    def ratio_lines(self) -> pd.DataFrame:
        return tables.lines(self.summary.rename(columns={"level": "config"}), "clients", LEVEL_ORDER)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**super().tables(), "fsync.csv": fsync_table(self.fsync), "latency.csv": self.latency,
                "flush_ladder.csv": self.ladder, "fidelity.csv": self.fidelity}


LADDER_COLUMNS = ["flush", "flush_ms", "flush_ops_s", "level", "blocks", "median", "ci_low", "ci_high", "tps_median"]


def judged_writes(writes: pd.DataFrame, baseline: str, par: Params,
                  manifest: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the write points the claims are judged on, the flush ladder). With an emulated flush ladder
    (``emulate.flush_latency_ms``) the claims are judged at its last level, the article's disk; the ladder table
    gives every level's ratio to ``on`` at each flush level (geometric mean over the run's client counts per
    block, then the median over blocks with its interval): how each ratio moves from this disk to the article's;
    ``flush_ops_s``: the primary's disk at that level as measured before the run (``emulation`` in the manifest)."""
    if "flush_ms" not in writes or writes.flush_ms.isna().all():
        return writes, pd.DataFrame(columns=LADDER_COLUMNS)
    judged = round(emulation.latency_ms(par.judged_flush()), 3) if par.judged_flush() is not None \
        else writes.flush_ms.max()
    disks = ((manifest or {}).get("emulation") or {}).get("disks") or {}
    rates = next((d.get("levels") or {} for d in disks.values() if "primary" in (d.get("nodes") or [])), {})
    rows = []
    for (flush, ms), w in writes.groupby(["flush", "flush_ms"], sort=False):
        r = effects.block_ratios(w, baseline, by=["group", "clients"], value="tps")
        per_block = effects.per_block(r)
        tps = w.groupby("config").tps.median()
        for level in per_block.columns:
            x = per_block[level].dropna().to_numpy()
            med, lo, hi, _ = median_interval(x)
            rows.append({"flush": flush, "flush_ms": ms, "flush_ops_s": (rates.get(flush) or {}).get("measured_ops_s"),
                         "level": level, "blocks": len(x), "median": round(med, 4),
                         "ci_low": round(lo, 4), "ci_high": round(hi, 4),
                         "tps_median": round(float(tps.get(level, np.nan)), 1)})
    ladder = pd.DataFrame(rows, columns=LADDER_COLUMNS).sort_values(["flush_ms", "level"], ignore_index=True)
    return writes[writes.flush_ms == judged], ladder


def reference_ratios(reference_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    ref = pd.read_csv(reference_dir / "synchronous_commit.csv")
    on = ref[ref.synchronous_commit == "on"].set_index("clients").tps
    ref["ratio_to_on"] = ref.tps / ref.clients.map(on)
    reads = pd.read_csv(reference_dir / "synchronous_commit_standby_reads.csv")
    return ref, reads


def reads_separated(manifest: dict[str, Any], par: Params) -> tuple[bool, str]:
    """Whether the standby-read claim can be judged: the primary (and its writer) and the standby (and
    its reader) on different machines. Otherwise they share the CPU, and load on one slows the other."""
    primary, standby = par.primary_host, par.standby_host
    clients = [par.client_host] if par.client_host else []
    if placement.separate(manifest, [primary, *clients], [standby, *clients]):
        return True, f"primary ({primary}) and standby ({standby}) ran on different machines"
    where = (f"one machine ({primary})" if primary == standby else
             f"hosts {primary} and {standby} on one machine (e.g. lab namespaces)")
    if clients and primary != standby:
        where = f"with clients on {clients[0]}: {where}"
    return False, (f"primary and standby ran on {where}, sharing its cores, so the primary's load and the "
                   "standby's reads compete for them")


def article_reads(ref_reads: pd.DataFrame, level: str) -> tuple[float, str]:
    """(the article's standby-read value by the analysis's statistic, the median over blocks of loaded / idle; what
    it is over). Its i-th loaded run over its i-th idle run stand for a block, at the level the run's primary had
    during the reads (``standby_read_level``); at all four of its levels when it did not run that one."""
    pairs = ref_reads.pivot_table(index=["synchronous_commit", "run"], columns="primary_load", values="tps")
    ratio = pairs.loaded / pairs.idle
    levels = set(ratio.index.get_level_values(0))
    if level in levels:
        return float(ratio.xs(level).median()), f"published: the article's 5 runs at {level}, i-th loaded / i-th idle"
    return float(ratio.median()), (f"published: the article's 20 runs at its four levels (it did not run {level}), "
                                   "i-th loaded / i-th idle")


def weaker_step(steps: dict[str, pd.Series]) -> str:
    """The step an ordering's row shows (``claims.ordering_row``: the smallest median over blocks)."""
    med = {k: round(float(np.median(v.dropna())), 4) if v.notna().any() else np.inf for k, v in steps.items()}
    return min(med, key=lambda k: med[k])


def level_machine(manifest: dict[str, Any], par: Params, fsync: dict[str, Any] | None, fid: pd.DataFrame,
                  points: list[str]) -> claims.Machine:
    """What a level claim rests on: the primary's disk flush, every node's a commit waits for, the CPU per statement,
    the round trip, and (under a calibrated emulation) the fidelity of its own points (``sc_fidelity.gate``)."""
    separated, _ = reads_separated(manifest, par)
    parts = [hardware.disk_flush(fsync, hardware.emulated_flush(manifest)),
             hardware.cpu_speed((manifest.get("emulation") or {}).get("calibration"),
                                "fixed by the article's own off at 10 clients (6,247 tps)"),
             hardware.round_trip("between two machines" if separated else "the loopback: primary and standby on one "
                                 "machine (not emulated)", "a network between master and slave (not given; its table "
                                 "puts waiting for the standby's write at about 8 ms a transaction at 20 clients)")]
    kept = hardware.unemulated(manifest, ["primary", par.standby_name])
    if kept:
        parts.append(hardware.own_disk(kept))
    if not fid.empty:
        parts.append(hardware.emulation_fidelity(*sc_fidelity.gate(fid, points)))
    return hardware.joint(*parts)


def compare(a_ratios: pd.DataFrame, reads: pd.DataFrame, reference_dir: Path, fsync: dict[str, Any] | None,
            manifest: dict[str, Any], par: Params, waits: pd.DataFrame, steal: str = "",
            fid: pd.DataFrame | None = None) -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, each with its rule, interval and verdict; the
    level claims at the run's client counts in the article's range (``sc_claims.judged_clients``), the published
    value the article's at the same counts by the same statistic."""
    ref, ref_reads = reference_ratios(reference_dir)
    article = ref.pivot(index="clients", columns="synchronous_commit", values="ratio_to_on")
    counts, at = sc_claims.judged_clients(a_ratios.clients.dropna() if len(a_ratios) else [])
    per_block = BlockEffects.of(sc_claims.judged_ratios(a_ratios))  # block x level: geometric mean over those counts
    fid = pd.DataFrame() if fid is None else fid
    adaptive = claims.first_look(manifest)  # the record as the run ended (claims.read_look)
    kw: dict[str, Any] = {"aa": per_block.aa, "adaptive": adaptive}
    rows = []
    how = "; ".join(x for x in (at, "per block: geometric mean over those client counts of tps(level)/tps(on)") if x)
    for level, claim in sc_claims.LEVEL_CLAIMS.items():
        pub = sc_claims.article_value(article[level], counts)
        note = "; ".join(x for x in (how, sc_claims.WORDS.get(level, ""), wait_note(waits, level, "on"), steal) if x)
        machine = level_machine(manifest, par, fsync, fid, sc_fidelity.level_points(level, counts))
        rows.append(per_block.row(dataclasses.replace(claim, published=pub), level, note, machine=machine,
                                  adaptive=adaptive))
    steps = sc_claims.order_steps(per_block.table)
    if len(steps) == len(sc_claims.ORDER_STEPS):  # both steps, each per block; the weaker decides
        where = f"{at}; published: the article's value of the step shown, at the same client counts"
        machine = level_machine(manifest, par, fsync, fid, sc_fidelity.order_points(counts))
        row = claims.ordering_row(sc_claims.ORDER, steps, per_block.noise, where=where, machine=machine, **kw)
        num, den = sc_claims.ORDER_STEPS[weaker_step(steps)]
        row["published"] = round(sc_claims.article_value(article[num] / (article[den] if den else 1.0), counts), 4)
        rows.append(row)
    else:
        rows.append(claims.comparison_row(sc_claims.ORDER, [], per_block.noise, measurable=False,
                                          why_not="a level was not run"))
    if len(reads):
        separated, why = reads_separated(manifest, par)
        apart = dataclasses.replace(hardware.separate_machines(
            manifest, [par.primary_host, par.standby_host],
            "a master and a slave, each its own machine", "the standby on a machine of its own (`standby_host`), "
            "or on a core of its own (`emulate: core_per_node: true`)"), differs=not separated)
        cores = hardware.pinned_cores(manifest, ["primary", par.standby_name])
        if cores and not separated:  # a core each: the load on one no longer takes the other's CPU
            apart = dataclasses.replace(apart, property="cores per node", here=cores, differs=False, emulated=cores)
            why = f"primary (with its writers) and standby (with its reader) each on a core of its own: {cores}"
        if not fid.empty:  # under a calibrated emulation: the article's reads reproduced first
            apart = hardware.joint(apart, hardware.emulation_fidelity(
                *sc_fidelity.gate(fid, sc_fidelity.reads_points(par.standby_read_level))))
        pub, pub_how = article_reads(ref_reads, par.standby_read_level)
        rows.append(claims.comparison_row(
            dataclasses.replace(sc_claims.READS, published=pub),
            reads[reads.config == "loaded"].ratio, effects.noise_floor(reads[reads.config == AA].ratio),
            "; ".join(x for x in (f"per block: standby select-only tps with the primary loaded / idle (at "
                                  f"{par.standby_read_level})", pub_how, why) if x),
            aa=reads[reads.config == AA].ratio, machine=apart))
    return claims.comparison_frame(rows)


def fsync_table(fsync: dict[str, Any] | None) -> pd.DataFrame:
    """pg_test_fsync's operations per second by section and method (no rows when it was not run)."""
    rows = [{"section": sec, "method": m, "ops_s": v} for sec, methods in (fsync or {}).get("sections", {}).items()
            for m, v in methods.items()]
    return pd.DataFrame(rows, columns=["section", "method", "ops_s"])


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir = Path(run_dir)
    manifest, points, failed = result.read_run(run_dir, nodes={"write": "primary", "read": "standby"})
    par = record.parameters(manifest, Params)
    baseline = record.baseline(manifest, par.baseline)
    writes, ladder = judged_writes(points[points.kind == "write"], baseline, par, manifest)
    ratios = effects.block_ratios(writes, baseline, by=["group", "clients"], value="tps")
    summary = effects.summarise(ratios, by=["clients", "config"]).rename(columns={"config": "level"})
    tps = tables.tps_summary(writes, ["clients", "config"]).rename(columns={"config": "level"})
    summary = summary.merge(tps, on=["clients", "level"], how="outer")
    reads = effects.block_ratios(points[points.kind == "read"], "idle", by=["group"], value="tps") \
        if (points.kind == "read").any() else pd.DataFrame(columns=["block", "group", "config", "ratio"])
    fsync = None
    if (run_dir / "fsync" / "stdout.txt").exists() and read_meta(run_dir / "fsync", manifest)["status"] == "ok":
        fsync = parse_pg_test_fsync((run_dir / "fsync" / "stdout.txt").read_text())
    init = parse_init(read_optional(run_dir / "init", "stderr.txt")) if (run_dir / "init").exists() else {}
    waits = wait_shares(run_dir, points, node="primary")
    latency = tables.latency_table(run_dir, points[points.kind == "write"], ["config", "clients"]) \
        .rename(columns={"config": "level"})
    fid = sc_fidelity.table(writes, points[points.kind == "read"], Path(reference_dir), manifest,
                            par.standby_read_level)
    comparison = compare(ratios, reads, Path(reference_dir), fsync, manifest, par, waits, effects.steal_note(points),
                         fid)
    metrics = headline(summary, comparison, fsync, init, manifest, par, failed, points)
    a = Analysis(run_dir=run_dir, manifest=manifest, params=par, points=points, failed=failed, summary=summary,
                 ratios=ratios, comparison=comparison, waits=waits, stalls=tables.stalls_table(points),
                 metrics=metrics, fsync=fsync, latency=latency, reads=reads, ladder=ladder, fidelity=fid)
    return a.finish(derived_dir, figures_dir, functools.partial(draw, reference_dir=Path(reference_dir)))


def headline(summary: pd.DataFrame, comparison: pd.DataFrame, fsync: dict[str, Any] | None, init: dict[str, Any],
             manifest: dict[str, Any], par: Params, failed: pd.DataFrame, points: pd.DataFrame) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists."""
    out = result.run_metrics(manifest, failed, comparison, points)
    out["blocks"] = par.blocks
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
    out["noise_floor"] = result.verdicts_noise_floor(comparison)
    aa = summary[summary.level == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_clients"] = {int(r.clients): round(float(r.noise_floor), 4) for _, r in aa.iterrows()}
    if fsync:
        out["fdatasync_ops_s"] = fsync.get("fdatasync_ops_s")
    if init.get("init_total_s") is not None:
        out["pgbench_init_s"] = init["init_total_s"]
    return out


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    made = {"tps_by_clients": fig_tps_by_clients(a.summary, a.points, out),
            "ratio_to_on": fig_ratio(a.summary, reference_ratios(reference_dir)[0], out)}
    pub = {lvl: float(a.comparison.set_index("claim").published.get(c.text, np.nan))
           for lvl, c in sc_claims.LEVEL_CLAIMS.items()}
    made["flush_ladder"] = fig_flush_ladder(a.ladder, pub, out)
    if len(a.reads):
        made["standby_reads"] = fig_standby_reads(a.reads, out)
    made["published_vs_reproduced"] = tables.fig_comparison(a.comparison, out, "synchronous_commit: published "
                                                              "vs reproduced (ratio to on)")
    if len(a.waits):
        made["waits"] = fig_waits(a.waits, out, order=[lv for lv in LEVEL_ORDER if lv in set(a.waits.config)],
                                  title="Where the primary's client backends waited, by level")
    return made
