"""Analyze: raw run folder -> tidy tables, summary, ratios to streaming, verdicts and figures.

Pure and deterministic: the same raw files give byte-identical CSVs and figures. Points that failed
or whose tables differed after catch-up are not numbers: they are listed (``failed_points.csv``)
with their reason, and the per-system consistency verdict counts them.

Sustainable tps (the article's metric) = transactions / (run time + catch-up time), where catch-up
is measured until a marker committed at the end of the run is visible on the subscriber (applied);
``sustainable_tps_confirmed`` uses the system's own confirmation instead (LSN, sl_setsync, PgQ tick).
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

from pglab.analysis import effects, figures, tables
from pglab.analysis.effects import AA, Claim
from pglab.parsers.pgbench import parse_summary
from pglab.runs.store import load_manifest, read_optional, write_json
from pglab.studies.logical_replication.params import SYSTEMS

UNITS = {"sustainable_tps": "tx/s", "sustainable_tps_confirmed": "tx/s", "provider_tps": "tx/s",
         "transactions": "tx", "run_s": "s", "catchup_s": "s", "confirmed_s": "s", "latency_avg_ms": "ms",
         "max_lag_s": "s"}
METRICS = ["sustainable_tps", "sustainable_tps_confirmed", "provider_tps", "catchup_s", "confirmed_s", "max_lag_s"]
LABELS = {"streaming": "streaming (physical, async)", "builtin": "built-in logical", "pglogical": "pglogical",
          "slony": "Slony-I", "londiste": "Londiste 3"}


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    points: pd.DataFrame  # one row per measured point
    summary: pd.DataFrame  # per system and clients: metrics' medians and intervals, ratio to the baseline
    ratios: pd.DataFrame  # per-block ratios of sustainable tps to the baseline
    systems: pd.DataFrame
    comparison: pd.DataFrame
    lag: pd.DataFrame
    metrics: dict[str, Any]
    failed: pd.DataFrame
    waits: pd.DataFrame
    stalls: pd.DataFrame
    metric_summary: pd.DataFrame  # per system and clients: each metric's median and interval over blocks
    figures: dict[str, list[Path]] = field(default_factory=dict)


def point_values(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Sustainable tps (transactions / (run + catch-up)) and the provider's measured-window tps."""
    w = tables.pgbench_window(d, meta)
    s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
    t = meta["timing"]
    tx = float(s["transactions"])
    out = {"system": meta.get("system", meta.get("config")), "transactions": tx, "provider_tps": w["tps"],
           "run_s": t["run_s"], "catchup_s": t["catchup_s"], "confirmed_s": t["confirmed_s"],
           "sustainable_tps": tx / (t["run_s"] + t["catchup_s"]),
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


def system_table(manifest: dict[str, Any], points: pd.DataFrame, failed: pd.DataFrame) -> pd.DataFrame:
    """One row per system asked for: measured / skipped / setup failed, and its consistency verdict."""
    rows = []
    info = manifest.get("systems", {})
    failed = failed.assign(system=failed.config)
    for name in [s for s in SYSTEMS if s in manifest["parameters"]["systems"]]:
        i = info.get(name, {"status": "not reached (run interrupted)"})
        mine = points[points.config == name]
        ok = len(mine)
        f = failed[failed.system == name]
        incons = int((f.status == "inconsistent").sum())
        not_caught = int(f.error.fillna("").str.startswith("not caught up").sum())
        if i.get("status") != "measured":
            verdict = f"no data: {i.get('status')}"
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


def _growth(table: pd.DataFrame, system: str, few: int = 4) -> tuple[float, int, int] | None:
    """Published tps at the largest client count over tps at ``few`` clients (or the nearest count below)."""
    t = table[table.system == system].set_index("clients").sustainable_tps.sort_index()
    low = [c for c in t.index if c <= few]
    if not low or t.index.max() <= max(low):
        return None
    c_low, c_max = max(low), int(t.index.max())
    return float(t[c_max] / t[c_low]), int(c_low), c_max


def _per_block_value(points: pd.DataFrame, system: str, clients: int) -> pd.Series:
    p = points[(points.config == system) & (points.clients == clients) & (points["copy"] == 1)]
    return p.set_index("block").sustainable_tps


def compare(points: pd.DataFrame, ratios: pd.DataFrame, reference_dir: Path, cores: int | None,
            waits: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, each from per-block ratios."""
    ref = reference(reference_dir)
    rows = []
    shared = "" if cores is None else f"provider, subscriber, daemons and pgbench share {cores} cores"
    per_block = tables.per_block(ratios)  # block x system: geometric mean over client counts
    noise = effects.noise_floor(per_block.get(AA, pd.Series(dtype=float)))
    measured = set(points.config)
    pub = float(ref[ref.system == "pglogical"].ratio_to_streaming.median())
    rows.append(effects.comparison_row(
        Claim("pglogical is close to streaming", pub, "greater", 0.8), per_block.get("pglogical", []), noise,
        "per block: geometric mean over client counts of sustainable tps / streaming's; " + tables.wait_note(
            waits, "pglogical", baseline), measurable=baseline == "streaming" and "pglogical" in measured,
        why_not="needs streaming (the baseline) and pglogical"))
    counts = sorted(int(c) for c in points.clients.dropna().unique())
    for system in ("slony", "londiste"):
        g_pub = _growth(ref, system)
        claim = Claim(f"{LABELS[system]} is flat beyond a few clients", g_pub[0] if g_pub else float("nan"),
                      "less", 1.5)
        few = [c for c in counts if c <= 4]
        if system not in measured or not few or counts[-1] <= few[-1]:
            rows.append(effects.comparison_row(claim, [], noise, measurable=False,
                                               why_not="needs the system at 4 or fewer and at more clients"))
            continue
        c_low, c_max = few[-1], counts[-1]
        growth = (_per_block_value(points, system, c_max) / _per_block_value(points, system, c_low)).dropna()
        s_growth = (_per_block_value(points, "streaming", c_max) / _per_block_value(points, "streaming", c_low)
                    ).dropna()
        note = (f"per block: its sustainable tps at {c_max} / at {c_low} clients (flat: < 1.5x); streaming's "
                f"growth {s_growth.median():.2f}x" if len(s_growth) else "") + (f"; {shared}" if shared else "")
        rows.append(effects.comparison_row(claim, growth.to_numpy(), noise, note))
    four = ["streaming", "pglogical", "slony", "londiste"]
    claim = Claim("at the most clients: streaming > pglogical > Slony, Londiste", 1.0, "greater", 1.0)
    if set(four) <= measured:
        c_max = counts[-1]
        v = {s: _per_block_value(points, s, c_max) for s in four}
        steps = {"streaming/pglogical": v["streaming"] / v["pglogical"],
                 "pglogical/max(Slony, Londiste)": v["pglogical"] / pd.concat([v["slony"], v["londiste"]], axis=1
                                                                               ).max(axis=1)}
        step_rows = {k: effects.comparison_row(claim, x.dropna().to_numpy(), noise) for k, x in steps.items()}
        verdicts = {r["verdict"] for r in step_rows.values()}
        weaker = min(step_rows, key=lambda k: step_rows[k]["reproduced"]
                     if not pd.isna(step_rows[k]["reproduced"]) else np.inf)
        row = dict(step_rows[weaker])
        row["verdict"] = ("did not hold" if "did not hold" in verdicts else
                          "held" if verdicts == {"held"} else "not resolvable here")
        row["note"] = f"at {c_max} clients, per block; the weaker step is shown ({weaker}); " + ", ".join(
            f"{k}: {r['reproduced']:.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" for k, r in step_rows.items())
        rows.append(row)
    else:
        rows.append(effects.comparison_row(claim, [], noise, measurable=False, why_not="needs all four systems"))
    return effects.comparison_frame(rows)


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir, derived, figs = Path(run_dir), Path(derived_dir), Path(figures_dir)
    derived.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(run_dir)
    points, failed = tables.points_table(run_dir, point_values)
    if points.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    baseline = manifest.get("plan", {}).get("baseline", "streaming")
    lag = lag_table(run_dir, points)
    ratios = effects.block_ratios(points, baseline, by=["group", "clients"], value="sustainable_tps")
    summary = effects.summarise(ratios, by=["clients", "config"]).rename(columns={"config": "system"})
    metrics_table = metric_summary(points)
    systems = system_table(manifest, points, failed)
    params = manifest["parameters"]
    where = params.get("client_host") or params.get("provider_host") or params.get("host", "local")
    cores = manifest.get("hosts", {}).get(where, {}).get("cores")
    waits = tables.wait_shares(run_dir, points, node="provider")
    stalls = tables.stalls_table(points)
    comparison = compare(points, ratios, Path(reference_dir), cores, waits, baseline)
    metrics = headline(metrics_table, summary, systems, manifest, len(failed), comparison)
    points.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    metrics_table.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    tables.lines(summary.rename(columns={"system": "config"}), "clients", list(SYSTEMS)).to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    systems.to_csv(derived / "systems.csv", index=False)
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    waits.to_csv(derived / "waits.csv", index=False, float_format="%.6g")
    stalls.to_csv(derived / "stalls.csv", index=False)
    summary.to_csv(derived / "effects.csv", index=False, float_format="%.6g")
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, points, summary, ratios, systems, comparison, lag, metrics, failed, waits, stalls,
                 metrics_table)
    a.figures = draw(a, figs, Path(reference_dir))
    return a


def headline(metrics_table: pd.DataFrame, summary: pd.DataFrame, systems: pd.DataFrame, manifest: dict[str, Any],
             n_failed: int, comparison: pd.DataFrame) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists: per system at the largest client count."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"], "failed_points": n_failed,
                           "measurement_share": manifest.get("measurement_share"),
                           "blocks": int(manifest.get("parameters", {}).get("blocks", 0))}
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
    nf = comparison.noise_floor.dropna()
    out["noise_floor"] = round(float(nf.iloc[0]), 4) if len(nf) else None
    aa = summary[summary.system == AA].dropna(subset=["noise_floor"])
    out["noise_floor_by_clients"] = {int(r.clients): round(float(r.noise_floor), 4) for _, r in aa.iterrows()}
    out["consistency"] = dict(zip(systems.system, systems.consistency, strict=True))
    out["verdicts"] = {row.claim: row.verdict for _, row in comparison.iterrows()}
    return out


# -- figures -------------------------------------------------------------------------------------
def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    figures.style()
    made = {"sustainable_tps": fig_sustainable(a, out), "ratio_to_streaming": fig_ratio(a, out, reference_dir),
            "catchup": fig_catchup(a, out), "lag_over_time": fig_lag(a, out),
            "published_vs_reproduced": tables.fig_comparison(
                a.comparison, out, "logical_replication: published vs reproduced (see the table for units)")}
    if len(a.waits):
        made["waits"] = tables.fig_waits(a.waits, out, order=[s for s in SYSTEMS if s in set(a.waits.config)],
                                           title="Where the provider's client backends waited, by system")
    plt.close("all")
    return made


def _palette() -> dict[str, Any]:
    pal = dict(zip(SYSTEMS, sns.color_palette("colorblind", len(SYSTEMS)), strict=True))
    pal[AA] = "grey"
    return pal


def _systems(frame: pd.DataFrame, col: str = "system") -> list[str]:
    return [s for s in SYSTEMS if s in set(frame[col])]


def _lines(ax: plt.Axes, a: Analysis, metric: str, dots: bool = True, **kw: Any) -> None:
    pal = _palette()
    w = a.metric_summary[a.metric_summary.metric == metric]
    counts = sorted(int(c) for c in a.points.clients.unique())
    pos = {c: i for i, c in enumerate(counts)}
    for k, s in enumerate(_systems(w)):
        g = w[w.system == s].sort_values("clients")
        off = (k - 2) * 0.05
        ax.errorbar([pos[int(c)] + off for c in g.clients], g["median"],
                    yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]], label=LABELS[s], color=pal[s],
                    marker="o", capsize=3, **kw)
        if dots:
            p = a.points[(a.points.config == s) & (a.points["copy"] == 1)]
            ax.scatter([pos[int(c)] + off for c in p.clients], p[metric], color=pal[s], s=8, alpha=0.35)
    ax.set_xticks(range(len(counts)), [str(c) for c in counts])


def fig_sustainable(a: Analysis, out: Path) -> list[Path]:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    _lines(ax1, a, "sustainable_tps")
    _lines(ax2, a, "provider_tps")
    for ax, title in ((ax1, "sustainable: transactions / (run + catch-up)"),
                      (ax2, "provider's tps in the measured window (warm-up cut)")):
        ax.set_xlabel("pgbench clients on the provider (-c), as measured")
        ax.set_title(title, fontsize=11)
    ax1.set_ylabel("tps")
    ax1.legend(fontsize=8)
    w = a.metric_summary[a.metric_summary.metric == "sustainable_tps"]
    fig.suptitle(f"Write throughput a subscriber can sustain, per replication system\n(median and "
                 f"{tables.caption(w)} of {a.manifest['parameters']['run_seconds']} s; dots: points)", fontsize=11)
    return figures.save(fig, out, "sustainable_tps")


def fig_ratio(a: Analysis, out: Path, reference_dir: Path) -> list[Path]:
    ref = reference(reference_dir)
    pal = _palette()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4), sharey=True)
    configs = _systems(a.summary) + ([AA] if (a.summary.system == AA).any() else [])
    tables.ratio_panel(ax1, a.summary.rename(columns={"system": "config"}), configs, pal)
    for s in _systems(ref):
        g = ref[ref.system == s]
        ax2.plot(g.clients.astype(str), g.ratio_to_streaming, marker="s", color=pal[s], label=LABELS[s])
    ax1.set_title("reproduced: per-block ratio, median and 95% interval\n(grey band: A/A noise floor)", fontsize=10)
    ax2.set_title("published (article 000, 2 x i2.4xlarge)", fontsize=10)
    for ax in (ax1, ax2):
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("clients")
    ax1.set_ylabel("sustainable tps / streaming's")
    ax1.legend(fontsize=8)
    fig.suptitle("Each system relative to physical streaming replication", y=1.05)
    return figures.save(fig, out, "ratio_to_streaming")


def fig_catchup(a: Analysis, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    _lines(ax, a, "catchup_s")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("pgbench clients on the provider, as measured")
    ax.set_ylabel("seconds after the run (symlog)")
    ax.set_title("Catch-up: until a marker committed at the end of the run is applied", fontsize=10)
    ax.legend(fontsize=8)
    return figures.save(fig, out, "catchup")


def representative_points(a: Analysis) -> dict[str, str]:
    """Per system, at its largest client count, the run whose sustainable tps is closest to the median."""
    s = a.points[a.points["copy"] == 1]
    chosen = {}
    for system in _systems(s, "config"):
        g = s[(s.config == system) & (s.clients == s[s.config == system].clients.max())]
        med = g.sustainable_tps.median()
        chosen[system] = g.assign(d=(g.sustainable_tps - med).abs()).sort_values(["d", "point"]).point.iloc[0]
    return chosen


def fig_lag(a: Analysis, out: Path) -> list[Path]:
    pal = _palette()
    chosen = representative_points(a)
    systems = [s for s in chosen if (a.lag.point == chosen[s]).any()]
    fig, axes = plt.subplots(len(systems) or 1, 1, figsize=(8, 1.9 * max(1, len(systems))), sharex=True,
                             squeeze=False)
    for ax, s in zip(axes[:, 0], systems, strict=False):
        g = a.lag[a.lag.point == chosen[s]].sort_values("t_s")
        ax.plot(g.t_s, g.lag_s, color=pal[s], marker=".", label="lag (s)")
        end = g[g.phase != "run"].t_s.min()
        if not np.isnan(end):
            ax.axvline(end, color="grey", ls="--", lw=0.8)
        other = "lag_bytes" if g.lag_bytes.notna().any() else "lag_events"
        if g[other].notna().any():
            ax2 = ax.twinx()
            ax2.plot(g.t_s, g[other], color=pal[s], ls=":", lw=1)
            ax2.set_ylabel(other.replace("lag_", "") + " (dotted)", fontsize=8)
            ax2.grid(False)
        ax.set_ylabel("s", fontsize=8)
        ax.set_title(f"{LABELS[s]}: {chosen[s]}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds since the run started (dashed: run ended)")
    fig.suptitle("Replication lag during one representative run per system (largest client count)", fontsize=11)
    return figures.save(fig, out, "lag_over_time")
