"""Analyze: raw run folder -> tidy tables, summary, ratios to streaming, verdicts and figures.

Pure and deterministic: the same raw files give byte-identical CSVs and figures. Points that failed
or whose tables differed after catch-up are not numbers: they are listed (``failed_points.csv``)
with their reason, and the per-system consistency verdict counts them.

Sustainable tps (the article's metric) = transactions / (run time + catch-up time), where catch-up
is measured until a marker committed at the end of the run is visible on the subscriber (applied);
``sustainable_tps_confirmed`` uses the system's own confirmation instead (LSN, sl_setsync, PgQ tick).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis import claims, effects, hardware, result, tables
from pglab.analysis.effects import AA, BlockEffects
from pglab.analysis.waits import fig_waits, wait_note, wait_shares
from pglab.analysis.window import pgbench_window
from pglab.parsers.pgbench import parse_summary
from pglab.runs import record
from pglab.runs.reading import read_optional
from pglab.studies.logical_replication import claims as lr_claims
from pglab.studies.logical_replication.claims import CLOSE_BASELINE, CLOSE_SYSTEM, close_to_streaming, sustainable
from pglab.studies.logical_replication.figures import (
    LABELS,
    fig_catchup,
    fig_lag,
    fig_ratio,
    fig_sustainable,
    label,
    labelled,
)
from pglab.studies.logical_replication.params import SYSTEMS, Params

UNITS = {"sustainable_tps": "tx/s", "sustainable_tps_confirmed": "tx/s", "provider_tps": "tx/s",
         "transactions": "tx", "run_s": "s", "catchup_s": "s", "confirmed_s": "s", "latency_avg_ms": "ms",
         "max_lag_s": "s"}
METRICS = ["sustainable_tps", "sustainable_tps_confirmed", "provider_tps", "catchup_s", "confirmed_s", "max_lag_s"]


@dataclass(kw_only=True)
class Analysis(result.Analysis):
    """The tables every study has (summary: ratio of sustainable tps to the baseline per system and clients,
    written as effects.csv), and this study's."""

    EXACT = result.Analysis.EXACT | {"systems.csv"}

    systems: pd.DataFrame  # one row per system asked for: measured or not, and its consistency verdict
    lag: pd.DataFrame  # every lag sample of every successful point
    metric_summary: pd.DataFrame  # per system and clients: each metric's median and interval over blocks (summary.csv)

    def ratio_lines(self) -> pd.DataFrame:
        return tables.lines(self.summary.rename(columns={"system": "config"}), "clients", list(SYSTEMS))

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**super().tables(), "summary.csv": self.metric_summary, "systems.csv": self.systems,
                "effects.csv": self.summary}


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Sustainable tps (transactions / (run + catch-up)) and the provider's measured-window tps."""
    w = pgbench_window(d, meta)
    s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
    t = meta["timing"]
    tx = float(s["transactions"])
    out = {"system": meta.get("system", meta.get("config")), "transactions": tx, "provider_tps": w["tps"],
           "run_s": t["run_s"], "catchup_s": t["catchup_s"], "confirmed_s": t["confirmed_s"],
           "sustainable_tps": sustainable(tx, t),
           "sustainable_tps_confirmed": tx / (t["run_s"] + t["confirmed_s"])}
    out.update({k: w[k] for k in ("tps_summary", "latency_avg_ms", "window_s", "stalls", "stall_times")})
    out["tps"] = out["sustainable_tps"]  # the value blocks compare
    if (d / "lag.csv").exists():
        lag = pd.read_csv(d / "lag.csv")
        out["max_lag_s"] = float(lag.lag_s.max()) if lag.lag_s.notna().any() else None
    return out


def lag_table(run_dir: Path, points: pd.DataFrame) -> pd.DataFrame:
    """Every lag sample of every successful point, with its point's factors (each lag.csv read once)."""
    frames = []
    for _, p in points.iterrows():
        path = Path(run_dir) / p.point / "lag.csv"
        if path.exists():
            lag = pd.read_csv(path)
            if len(lag):
                frames.append(lag.assign(point=p.point, system=p.system, clients=p.clients, block=p.block))
    cols = ["point", "system", "clients", "block", "t_s", "phase", "lag_bytes", "lag_s", "lag_events"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def metric_summary(points: pd.DataFrame) -> pd.DataFrame:
    """Per system and clients: median and interval of each metric over blocks (first baseline copy)."""
    frames = []
    for metric in METRICS:
        if metric in points:
            t = tables.tps_summary(points.assign(tps=points[metric]), ["clients", "config"])
            frames.append(t.assign(metric=metric, unit=UNITS[metric]))
    out = pd.concat(frames, ignore_index=True).rename(columns={
        "tps_median": "median", "tps_low": "ci_low", "tps_high": "ci_high", "tps_method": "ci_method", "tps_n": "n"})
    return out.rename(columns={"config": "system"})[["system", "clients", "metric", "unit", "median", "ci_low",
                                                     "ci_high", "ci_method", "n"]]


def system_table(manifest: dict[str, Any], par: Params, points: pd.DataFrame, failed: pd.DataFrame) -> pd.DataFrame:
    """One row per system asked for: measured / skipped / setup failed, and its consistency verdict."""
    rows = []
    info = manifest.get("systems", {})
    failed = failed.assign(system=failed.config)
    for name in [s for s in SYSTEMS if s in par.systems]:
        i = info.get(name, {"status": "not reached (run interrupted)"})
        mine = points[points.config == name]
        ok = len(mine)
        f = failed[failed.system == name]
        incons = int((f.status == "inconsistent").sum())
        not_caught = int(f.error.fillna("").str.startswith("not caught up").sum())
        closing = i.get("closing_check") or {}
        if i.get("status") != "measured":
            verdict = f"no data: {i.get('status')}"
        elif closing.get("consistent") is False:
            verdict = f"INCONSISTENT when the pair closed: {', '.join(closing.get('mismatched') or [])} differ"
            verdict += f"; and in {incons} of {ok + len(f)} points" if incons else ""
        elif incons:
            verdict = f"INCONSISTENT in {incons} of {ok + len(f)} points"
        elif ok and not len(f):
            verdict = f"consistent in all {ok} points"
        else:
            verdict = f"consistent in {ok} points; {len(f)} failed"
        rows.append({"system": name, "status": i.get("status"), "reason": i.get("reason", ""),
                     "cpu_steal_median": round(float(mine.steal.median()), 3) if mine.steal.notna().any() else None,
                     "points_ok": ok, "points_failed": len(f) - incons, "points_inconsistent": incons,
                     "not_caught_up": not_caught, "consistency": verdict,
                     "rebuilds": max(0, i.get("generations", 1) - 1),
                     "options": json.dumps({k: v for k, v in i.get("options", {}).items() if k != "copy_timeout_s"},
                                           sort_keys=True)})
    return pd.DataFrame(rows)


def reference(reference_dir: Path) -> pd.DataFrame:
    ref = pd.read_csv(reference_dir / "logical_replication.csv").rename(columns={"method": "system"})
    base = ref[ref.system == "streaming"].set_index("clients").sustainable_tps
    ref["ratio_to_streaming"] = ref.sustainable_tps / ref.clients.map(base)
    ref["rank"] = ref.groupby("clients").sustainable_tps.rank(ascending=False, method="min").astype(int)
    return ref


def _per_block_value(points: pd.DataFrame, system: str, clients: int) -> pd.Series:
    p = points[(points.config == system) & (points.clients == clients) & (points["copy"] == 1)]
    return p.set_index("block").sustainable_tps


def _article(ref: pd.DataFrame) -> pd.DataFrame:
    """clients x system: the article's sustainable tps."""
    return ref.pivot(index="clients", columns="system", values="sustainable_tps")


def order_note(points: pd.DataFrame, ref: pd.DataFrame, clients: int) -> str:
    """The order of the article's systems at ``clients`` here (medians over blocks; not judged) beside the
    article's at its nearest client count, and whether they match."""
    here = {s: float(_per_block_value(points, s, clients).median()) for s in lr_claims.ARTICLE_SYSTEMS
            if len(_per_block_value(points, s, clients).dropna())}
    if len(here) < 2:
        return ""
    art = _article(ref)
    near = int(min(art.index, key=lambda c: (abs(c - clients), c)))
    mine = sorted(here, key=lambda s: -here[s])
    theirs = [s for s in sorted(art.columns, key=lambda s: -art.loc[near, s]) if s in here]
    words = " > ".join(f"{LABELS[s]} {here[s]:.0f}" for s in mine)
    article = " > ".join(f"{LABELS[s]} {art.loc[near, s]:.0f}" for s in theirs)
    same = "matches" if mine == theirs else "does not match"
    return (f"at {clients} clients the measured order (median sustainable tps over blocks; not judged) is {words}, "
            f"which {same} the article's at {near} ({article})")


def _growth_rows(points: pd.DataFrame, ref: pd.DataFrame, noise: float, machine: claims.Machine,
                 aa: pd.Series) -> list[dict[str, object]]:
    """"X is flat beyond a few clients": its sustainable tps grows by at most 10% from 4 clients to 16 or more
    (the article: 4 to 32; ``lr_claims.flat_span``). Not measurable when the run has no such counts (then the
    note says what the run reached and how its systems ranked), nor when streaming itself does not grow over
    them: on a saturated provider every system is flat, and flatness says nothing of the system."""
    counts = sorted(int(c) for c in points.clients.dropna().unique())
    span = lr_claims.flat_span(counts)
    art = _article(ref)
    rows = []
    for system in ("slony", "londiste"):
        c_low, c_high = span or (lr_claims.FLAT_FROM, lr_claims.FLAT_TO)
        pub = lr_claims.article_value(art[system], [c_high]) / lr_claims.article_value(art[system], [c_low])
        claim = claims.threshold(f"{LABELS[system]} is flat beyond a few clients", pub, 1 + claims.MARGIN,
                                 above=False)
        if system not in set(points.config) or span is None:
            rows.append(claims.comparison_row(claim, [], noise, measurable=False, why_not=_unreached(
                points, ref, system, counts), machine=_answer_counts(machine, "4 and 16 to 32 clients")))
            continue
        growth = (_per_block_value(points, system, c_high) / _per_block_value(points, system, c_low)).dropna()
        control = (_per_block_value(points, "streaming", c_high) / _per_block_value(points, "streaming", c_low)
                   ).dropna()
        _, lo, hi, _ = effects.interval(control)
        grows = len(control) and lo > 1 + claims.MARGIN
        note = (f"at {c_low} and {c_high} clients; per block: its sustainable tps at {c_high} / at {c_low} clients "
                f"(the article: 4 to 32; published: the article's at {c_high} / at {c_low}); streaming's growth over "
                f"the same counts {control.median():.3g} [{lo:.3g}, {hi:.3g}]")
        rows.append(claims.comparison_row(
            claim, growth.to_numpy(), noise, note, measurable=bool(grows), aa=aa, machine=machine,
            why_not=f"the provider saturated: streaming itself does not grow by more than {claims.MARGIN:.0%} from "
                    f"{c_low} to {c_high} clients here, so flat cannot be told from saturated"))
    return rows


def _unreached(points: pd.DataFrame, ref: pd.DataFrame, system: str, counts: list[int]) -> str:
    """Why a flatness claim is not measurable in a run without the counts it needs: what the run reached."""
    have = ", ".join(map(str, counts)) or "no client count"
    if system not in set(points.config):
        return f"{LABELS[system]} was not run"
    words = [f"needs {LABELS[system]} at {lr_claims.FLAT_FROM} clients (or the smallest count from "
             f"{lr_claims.FLAT_FROM} up) and at {lr_claims.FLAT_REACH} or more, up to {lr_claims.FLAT_TO} (the "
             f"article: flat from 4 to 32); this run has {have} clients and did not reach those counts"]
    if len(counts) >= 2:
        c1, c2 = counts[0], counts[-1]
        g = (_per_block_value(points, "streaming", c2) / _per_block_value(points, "streaming", c1)).dropna()
        if len(g):
            med, lo, hi, _ = effects.interval(g)
            state = ("the run did not reach saturation (the provider still scaled)" if lo > 1 + claims.MARGIN
                     else "the provider may already have been saturated there")
            words.append(f"streaming grew {med:.3g} [{lo:.3g}, {hi:.3g}] from {c1} to {c2} clients: {state}")
        words.append(order_note(points, ref, c2))
    return "; ".join(w for w in words if w)


def _ranking_row(points: pd.DataFrame, ref: pd.DataFrame, noise: float, machine: claims.Machine,
                 aa: pd.Series) -> dict[str, object]:
    """The article's order at the most clients, judged at the run's most when it is 16 or more (the article's
    pglogical falls behind streaming from there); each step per block at that count. Published: the article's
    value of the step the row shows, at the same count (at its own most, 32, when the run cannot be judged)."""
    four = list(lr_claims.ARTICLE_SYSTEMS)
    c_max = int(points.clients.max()) if len(points) else 0
    art = _article(ref)
    article_steps = {"streaming/pglogical": art.streaming / art.pglogical,
                     "pglogical/max(Slony, Londiste)": art.pglogical / art[["slony", "londiste"]].max(axis=1)}
    if not set(four) <= set(points.config) or c_max < lr_claims.RANK_FROM:
        pub = min(lr_claims.article_value(x, [lr_claims.FLAT_TO]) for x in article_steps.values())
        claim = claims.direction("at the most clients: streaming > pglogical > Slony, Londiste", pub)
        why = ("needs all four systems" if not set(four) <= set(points.config) else
               f"the article's order is at its most clients (32), and streaming > pglogical only from "
               f"{lr_claims.RANK_FROM} clients on (0.86 at 16, 0.63 at 32), while up to 8 the article has pglogical "
               f"within 1-3% of streaming; this run's most is {c_max}")
        return claims.comparison_row(claim, [], noise, measurable=False, why_not=why,
                                     machine=_answer_counts(machine, f"{lr_claims.RANK_FROM} clients or more"))
    claim = claims.direction("at the most clients: streaming > pglogical > Slony, Londiste", 1.0)
    v = {s: _per_block_value(points, s, c_max) for s in four}
    steps = {"streaming/pglogical": v["streaming"] / v["pglogical"],
             "pglogical/max(Slony, Londiste)": v["pglogical"] / pd.concat([v["slony"], v["londiste"]], axis=1
                                                                           ).max(axis=1)}
    med = {k: round(float(np.median(x.dropna())), 4) if x.notna().any() else np.inf for k, x in steps.items()}
    weaker = min(med, key=lambda k: med[k])
    row = claims.ordering_row(claim, {k: x.dropna().to_numpy() for k, x in steps.items()}, noise,
                              where=f"at {c_max} clients, per block; published: the article's value of the step "
                                    "shown, at the same client count", aa=aa, machine=machine)
    row["published"] = round(lr_claims.article_value(article_steps[weaker], [c_max]), 4)
    return row


def _answer_counts(machine: claims.Machine, counts: str) -> claims.Machine:
    """``machine`` with what would answer a claim this run's client counts cannot: a run at ``counts`` (the
    ``paper`` profile runs 1 to 32), on machines of the article's kind if this one is not."""
    run = f"a run at {counts} (the `paper` profile: 1 to 32 clients)"
    return dataclasses.replace(machine, answer=run + (f", with {machine.answer}" if machine.differs else ""))


def compare(points: pd.DataFrame, ratios: pd.DataFrame, reference_dir: Path, manifest: dict[str, Any],
            par: Params, waits: pd.DataFrame, baseline: str, steal: str = "") -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, each where the article makes it
    (``lr_claims``), the published value the article's at the same client counts by the same statistic."""
    ref = reference(reference_dir)
    par_adaptive = claims.first_look(manifest)  # the record as the run ended (claims.read_look)
    cpu = hardware.shared_cpu(manifest, "two i2.4xlarge instances of 16 vCPU each (provider; subscriber)",
                              "provider, subscriber, daemons and pgbench", apart=[par.provider_host,
                                                                                   par.subscriber_host])
    per_block = BlockEffects.of(ratios)  # block x system: geometric mean over client counts
    noise, aa = per_block.noise, per_block.aa
    measured = set(points.config)
    close = lr_claims.close_clients(points.clients.dropna())
    near = BlockEffects.of(ratios[ratios.clients.isin(close)])  # the same, over the counts up to 8
    art = _article(ref)
    pub = lr_claims.article_value(art.pglogical / art.streaming, close or [1, 2, 4, 8])
    at = (f"at {', '.join(map(str, close))} clients (the article makes the claim up to {lr_claims.CLOSE_UP_TO}: "
          "0.97-0.99 there, 0.86 at 16, 0.63 at 32)") if close else ""
    rows = [claims.comparison_row(
        close_to_streaming(pub), near[CLOSE_SYSTEM], near.noise,
        "; ".join(x for x in (at, "per block: geometric mean over those client counts of sustainable tps / "
                              "streaming's", wait_note(waits, CLOSE_SYSTEM, baseline), steal) if x),
        measurable=baseline == CLOSE_BASELINE and CLOSE_SYSTEM in measured and bool(close), aa=near.aa, machine=cpu,
        why_not=("needs streaming (the baseline) and pglogical" if close else
                 f"needs a client count up to {lr_claims.CLOSE_UP_TO}, where the article makes the claim"),
        adaptive=par_adaptive)]
    rows += _growth_rows(points, ref, noise, cpu, aa)
    rows.append(_ranking_row(points, ref, noise, cpu, aa))
    return claims.comparison_frame(rows)


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir = Path(run_dir)
    manifest, points, failed = result.read_run(run_dir, point_values)
    par = record.parameters(manifest, Params)
    baseline = record.baseline(manifest, par.baseline)
    ratios = effects.block_ratios(points, baseline, by=["group", "clients"], value="sustainable_tps")
    summary = effects.summarise(ratios, by=["clients", "config"]).rename(columns={"config": "system"})
    metrics_table = metric_summary(points)
    systems = system_table(manifest, par, points, failed)
    waits = wait_shares(run_dir, points, node="provider")
    comparison = compare(points, ratios, Path(reference_dir), manifest, par, waits, baseline,
                         effects.steal_note(points))
    metrics = headline(metrics_table, summary, systems, manifest, par, failed, comparison)
    a = Analysis(run_dir=run_dir, manifest=manifest, params=par, points=points, failed=failed, summary=summary,
                 ratios=ratios, comparison=comparison, waits=waits, stalls=tables.stalls_table(points),
                 metrics=metrics, systems=systems, lag=lag_table(run_dir, points), metric_summary=metrics_table)
    return a.finish(derived_dir, figures_dir, functools.partial(draw, reference_dir=Path(reference_dir)))


def headline(metrics_table: pd.DataFrame, summary: pd.DataFrame, systems: pd.DataFrame, manifest: dict[str, Any],
             par: Params, failed: pd.DataFrame, comparison: pd.DataFrame) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists: per system at the largest client count."""
    out = result.run_metrics(manifest, failed, comparison)
    out.update(measurement_share=manifest.get("measurement_share"), blocks=par.blocks)
    top = int(metrics_table.clients.max())
    at = metrics_table[metrics_table.clients == top].set_index(["system", "metric"])["median"]
    out["clients_max"] = top
    for metric in ("sustainable_tps", "provider_tps", "catchup_s"):
        out[f"{metric}_at_clients_max"] = {s: round(float(at[(s, metric)]), 3 if metric == "catchup_s" else 1)
                                           for s in sorted(set(at.index.get_level_values("system")))
                                           if (s, metric) in at.index}
    r = summary[(summary.clients == top) & (summary.system != AA)].set_index("system")["median"].dropna()
    out["ratio_to_streaming_at_clients_max"] = {s: round(float(v), 3) for s, v in sorted(r.items())}
    # the floor the verdicts use (per-block ratios over every client count: the first claim's row), then
    # the floor at each client count, wider where a point is shorter or has fewer transactions
    out["noise_floor"] = result.verdicts_noise_floor(comparison)
    aa = summary[summary.system == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_clients"] = {int(r.clients): round(float(r.noise_floor), 4) for _, r in aa.iterrows()}
    out["consistency"] = dict(zip(systems.system, systems.consistency, strict=True))
    return out


def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    assert isinstance(a.params, Params)
    made = {"sustainable_tps": fig_sustainable(a.metric_summary, a.points, a.params.run_seconds, out),
            "ratio_to_streaming": fig_ratio(a.summary, reference(reference_dir), out),
            "catchup": fig_catchup(a.metric_summary, a.points, out), "lag_over_time": fig_lag(a.points, a.lag, out),
            "published_vs_reproduced": tables.fig_comparison(
                a.comparison, out, "logical_replication: published vs reproduced (see the table for units)")}
    if len(a.waits):
        made["waits"] = fig_waits(labelled(a.waits), out, order=[label(s) for s in SYSTEMS if s in set(a.waits.config)],
                                  title="Where the provider's client backends waited, by system")
    return made
