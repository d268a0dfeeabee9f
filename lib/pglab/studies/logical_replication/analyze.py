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

from pglab import figures
from pglab.parsers.pgbench import parse_summary
from pglab.stats import interval_caption, lines_table, summarise
from pglab.store import load_manifest, read_optional, write_json
from pglab.studies.logical_replication import STUDY
from pglab.studies.logical_replication.params import SYSTEMS

FACTORS = ["system", "clients", "rep", "generation"]
UNITS = {"sustainable_tps": "tx/s", "sustainable_tps_confirmed": "tx/s", "provider_tps": "tx/s",
         "transactions": "tx", "run_s": "s", "catchup_s": "s", "confirmed_s": "s", "latency_avg_ms": "ms",
         "max_lag_s": "s", "cpu_steal_share": "share", "cpu_idle_share": "share"}
LABELS = {"streaming": "streaming (physical, async)", "builtin": "built-in logical", "pglogical": "pglogical",
          "slony": "Slony-I", "londiste": "Londiste 3"}


@dataclass
class Analysis:
    """What the notebook shows; every table is also written to ``derived``."""

    run_dir: Path
    manifest: dict[str, Any]
    tidy: pd.DataFrame
    summary: pd.DataFrame
    ratios: pd.DataFrame
    systems: pd.DataFrame
    comparison: pd.DataFrame
    lag: pd.DataFrame
    metrics: dict[str, Any]
    failed: pd.DataFrame
    figures: dict[str, list[Path]] = field(default_factory=dict)


def _run_dirs(run_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for d in sorted(p for p in run_dir.iterdir() if (p / "meta.json").exists()):
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("kind") == "run":
            out.append((d, meta))
    return out


def tidy_points(points: list[tuple[Path, dict[str, Any]]], lag: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (point, metric) for the points that succeeded; and the others with their reason."""
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    max_lag = lag.dropna(subset=["lag_s"]).groupby("point").lag_s.max()
    for d, meta in points:
        base = {"study": STUDY, "point": meta["point"], **{k: meta.get(k) for k in FACTORS}}
        if meta.get("status") != "ok":
            failed.append({**base, "status": meta.get("status"), "consistent": meta.get("consistent"),
                           "mismatched": ",".join(meta.get("mismatched") or []), "error": meta.get("error", "")})
            continue
        s = parse_summary(read_optional(d, "stdout.txt"), read_optional(d, "stderr.txt"))
        t = meta["timing"]
        tx = float(s["transactions"])
        values = {"transactions": tx, "provider_tps": float(s["tps"]), "latency_avg_ms": s.get("latency_avg_ms"),
                  "run_s": t["run_s"], "catchup_s": t["catchup_s"], "confirmed_s": t["confirmed_s"],
                  "sustainable_tps": tx / (t["run_s"] + t["catchup_s"]),
                  "sustainable_tps_confirmed": tx / (t["run_s"] + t["confirmed_s"])}
        for name in ("steal", "idle"):
            if name in meta.get("cpu", {}):
                values[f"cpu_{name}_share"] = meta["cpu"][name]
        if meta["point"] in max_lag.index:
            values["max_lag_s"] = float(max_lag[meta["point"]])
        for metric, value in values.items():
            if value is not None:
                rows.append({**base, "metric": metric, "value": float(value), "unit": UNITS[metric]})
    cols = ["study", "point", *FACTORS, "metric", "value", "unit"]
    tidy = pd.DataFrame(rows, columns=cols).sort_values(["point", "metric"], kind="stable").reset_index(drop=True)
    fcols = ["study", "point", *FACTORS, "status", "consistent", "mismatched", "error"]
    return tidy, pd.DataFrame(failed, columns=fcols)


def lag_table(points: list[tuple[Path, dict[str, Any]]]) -> pd.DataFrame:
    """Every lag sample of every successful point, with its point's factors (each lag.csv read once)."""
    frames = []
    for d, meta in points:
        if meta.get("status") != "ok" or not (d / "lag.csv").exists():
            continue
        lag = pd.read_csv(d / "lag.csv")
        if len(lag):
            frames.append(lag.assign(point=meta["point"], system=meta["system"], clients=meta["clients"],
                                     rep=meta["rep"]))
    cols = ["point", "system", "clients", "rep", "t_s", "phase", "lag_bytes", "lag_s", "lag_events"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def ratios_to_streaming(summary: pd.DataFrame) -> pd.DataFrame:
    """Median sustainable tps of each system over streaming's at the same client count, and its rank."""
    s = summary[summary.metric == "sustainable_tps"].set_index(["clients", "system"])["median"]
    cols = ["clients", "system", "sustainable_tps", "ratio_to_streaming", "rank"]
    if s.empty:
        return pd.DataFrame(columns=cols)
    out = s.rename("sustainable_tps").reset_index()
    if "streaming" in s.index.get_level_values("system"):
        base = s.xs("streaming", level="system")
        out["ratio_to_streaming"] = out.sustainable_tps / out.clients.map(base)
    else:
        out["ratio_to_streaming"] = np.nan
    out["rank"] = out.groupby("clients").sustainable_tps.rank(ascending=False, method="min").astype(int)
    return out.sort_values(["system", "clients"], kind="stable").reset_index(drop=True)[cols]


def system_table(manifest: dict[str, Any], tidy: pd.DataFrame, failed: pd.DataFrame) -> pd.DataFrame:
    """One row per system asked for: measured / skipped / setup failed, and its consistency verdict."""
    rows = []
    info = manifest.get("systems", {})
    for name in [s for s in SYSTEMS if s in manifest["parameters"]["systems"]]:
        i = info.get(name, {"status": "not reached (run interrupted)"})
        ok = tidy[(tidy.system == name) & (tidy.metric == "transactions")].point.nunique()
        f = failed[failed.system == name]
        incons = int((f.status == "inconsistent").sum())
        not_caught = int(f.error.str.startswith("not caught up").sum())
        if i.get("status") != "measured":
            verdict = f"no data: {i.get('status')}"
        elif incons:
            verdict = f"INCONSISTENT in {incons} of {ok + len(f)} points"
        elif ok and not len(f):
            verdict = f"consistent in all {ok} points"
        else:
            verdict = f"consistent in {ok} points; {len(f)} failed"
        steal = tidy[(tidy.system == name) & (tidy.metric == "cpu_steal_share")].value
        rows.append({"system": name, "status": i.get("status"), "reason": i.get("reason", ""),
                     "cpu_steal_median": round(float(steal.median()), 3) if len(steal) else None,
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
    """tps at the largest client count over tps at ``few`` clients (or the nearest count below it)."""
    t = table[table.system == system].set_index("clients").sustainable_tps.sort_index()
    low = [c for c in t.index if c <= few]
    if not low or t.index.max() <= max(low):
        return None
    c_low, c_max = max(low), int(t.index.max())
    return float(t[c_max] / t[c_low]), int(c_low), c_max


def compare(ratios: pd.DataFrame, reference_dir: Path, cores: int | None) -> pd.DataFrame:
    """Published vs reproduced, one row per claim of the article, with a verdict."""
    ref = reference(reference_dir)
    rows = []
    shared = "" if cores is None else f"; here provider, subscriber, daemons and pgbench share {cores} cores"

    def ours(system: str) -> pd.Series:
        return ratios[ratios.system == system].set_index("clients").ratio_to_streaming

    pub = float(ref[ref.system == "pglogical"].ratio_to_streaming.median())
    got = ours("pglogical")
    val = float(got.median()) if len(got) and "streaming" in set(ratios.system) else np.nan
    rows.append({"claim": "pglogical is close to streaming", "published": round(pub, 3),
                 "reproduced": round(val, 3) if not np.isnan(val) else np.nan, "unit": "ratio to streaming",
                 "verdict": "not measurable here (system not run)" if np.isnan(val)
                 else ("held" if val >= 0.8 else "did not hold"),
                 "note": "median over client counts of sustainable tps / streaming's; held if >= 0.8"})
    for system in ("slony", "londiste"):
        g_pub = _growth(ref, system)
        g = _growth(ratios, system)
        r_max = ours(system)
        if g is None or not len(r_max) or np.isnan(r_max.iloc[-1]):
            rows.append({"claim": f"{LABELS[system]} is flat beyond a few clients", "published": round(g_pub[0], 3)
                         if g_pub else np.nan, "reproduced": np.nan, "unit": "tps(max clients) / tps(4 clients)",
                         "verdict": "not measurable here (needs streaming, 4 or fewer and more clients)", "note": ""})
            continue
        growth, c_low, c_max = g
        behind = float(r_max.loc[c_max])
        flat = growth <= 1.2
        far_behind = behind <= 0.5
        verdict = "held" if flat and far_behind else ("partly held" if flat or far_behind else "did not hold")
        article = ref[ref.system == system].sort_values("clients").ratio_to_streaming.iloc[-1]
        note = (f"sustainable tps at {c_max} vs {c_low} clients: x{growth:.2f} (flat if <= 1.2); ratio to streaming "
                f"at {c_max} clients {behind:.2f} (article {article:.2f} at 32; far behind if <= 0.5){shared}")
        rows.append({"claim": f"{LABELS[system]} is flat beyond a few clients", "published": round(g_pub[0], 3)
                     if g_pub else np.nan, "reproduced": round(growth, 3), "unit": "tps(max clients) / tps(4 clients)",
                     "verdict": verdict, "note": note})
    # Ranking at the largest client count among the article's four systems.
    four = ["streaming", "pglogical", "slony", "londiste"]
    top = ratios[ratios.clients == ratios.clients.max()] if len(ratios) else ratios
    present = [s for s in four if s in set(top.system)]
    if len(present) == 4:
        t = top.set_index("system").sustainable_tps
        held = t["streaming"] >= t["pglogical"] >= max(t["slony"], t["londiste"])
        order = " > ".join(t[four].sort_values(ascending=False, kind="stable").index)
        rows.append({"claim": "at the most clients: streaming > pglogical > Slony, Londiste", "published": 1.0,
                     "reproduced": float(held), "unit": "1 = ordering holds",
                     "verdict": "held" if held else "did not hold",
                     "note": f"here at {int(top.clients.max())} clients: {order}; article at 32: streaming > "
                             "pglogical > londiste > slony"})
    else:
        rows.append({"claim": "at the most clients: streaming > pglogical > Slony, Londiste", "published": 1.0,
                     "reproduced": np.nan, "unit": "1 = ordering holds",
                     "verdict": "not measurable here (needs all four systems)", "note": ""})
    return pd.DataFrame(rows)


def analyze(run_dir: str | Path, derived_dir: str | Path, figures_dir: str | Path,
            reference_dir: str | Path) -> Analysis:
    run_dir, derived, figs = Path(run_dir), Path(derived_dir), Path(figures_dir)
    derived.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(run_dir)
    points = _run_dirs(run_dir)
    lag = lag_table(points)
    tidy, failed = tidy_points(points, lag)
    if tidy.empty:
        raise ValueError(f"{run_dir}: no successful measurement to analyze ({len(failed)} failed points)")
    summary = summarise(tidy, ["system", "clients", "metric", "unit"])
    ratios = ratios_to_streaming(summary)
    systems = system_table(manifest, tidy, failed)
    params = manifest["parameters"]
    where = params.get("client_host") or params.get("provider_host") or params.get("host", "local")
    cores = manifest.get("hosts", {}).get(where, {}).get("cores")
    comparison = compare(ratios, Path(reference_dir), cores)
    metrics = headline(summary, ratios, systems, manifest, len(failed))
    tidy.to_csv(derived / "points.csv", index=False, float_format="%.6g")
    summary.to_csv(derived / "summary.csv", index=False, float_format="%.6g")
    ratios.to_csv(derived / "ratios.csv", index=False, float_format="%.6g")
    lines_table(ratios, "clients", "system", "ratio_to_streaming", list(SYSTEMS)).to_csv(
        derived / "ratio_lines.csv", index=False, float_format="%.6g")
    systems.to_csv(derived / "systems.csv", index=False)
    comparison.to_csv(derived / "comparison.csv", index=False, float_format="%.6g")
    failed.to_csv(derived / "failed_points.csv", index=False)
    write_json(derived / "metrics.json", metrics)
    a = Analysis(run_dir, manifest, tidy, summary, ratios, systems, comparison, lag, metrics, failed)
    a.figures = draw(a, figs, Path(reference_dir))
    return a


def headline(summary: pd.DataFrame, ratios: pd.DataFrame, systems: pd.DataFrame, manifest: dict[str, Any],
             n_failed: int) -> dict[str, Any]:
    """The numbers ``dvc metrics show`` lists: per system at the largest client count."""
    out: dict[str, Any] = {"run_id": manifest["run_id"], "profile": manifest["profile"], "failed_points": n_failed,
                           "measurement_share": manifest.get("measurement_share")}
    top = int(ratios.clients.max())
    at = summary[summary.clients == top].set_index(["system", "metric"])["median"]
    out["clients_max"] = top
    for metric in ("sustainable_tps", "provider_tps", "catchup_s"):
        out[f"{metric}_at_clients_max"] = {s: round(float(at[(s, metric)]), 3 if metric == "catchup_s" else 1)
                                           for s in sorted(set(at.index.get_level_values("system")))
                                           if (s, metric) in at.index}
    r = ratios[ratios.clients == top].set_index("system").ratio_to_streaming.dropna()
    out["ratio_to_streaming_at_clients_max"] = {s: round(float(v), 3) for s, v in sorted(r.items())}
    out["consistency"] = dict(zip(systems.system, systems.consistency, strict=True))
    return out


# -- figures -------------------------------------------------------------------------------------
def draw(a: Analysis, out: Path, reference_dir: Path) -> dict[str, list[Path]]:
    """The study's figures, each one function of the derived tables."""
    figures.style()
    made = {"sustainable_tps": fig_sustainable(a, out), "ratio_to_streaming": fig_ratio(a, out, reference_dir),
            "catchup": fig_catchup(a, out), "lag_over_time": fig_lag(a, out),
            "published_vs_reproduced": fig_comparison(a, out)}
    plt.close("all")
    return made


def _palette() -> dict[str, Any]:
    return dict(zip(SYSTEMS, sns.color_palette("colorblind", len(SYSTEMS)), strict=True))


def _systems(frame: pd.DataFrame) -> list[str]:
    return [s for s in SYSTEMS if s in set(frame.system)]


def _lines(ax: plt.Axes, a: Analysis, metric: str, dots: bool = True, **kw: Any) -> None:
    pal = _palette()
    w = a.summary[a.summary.metric == metric]
    pts = a.tidy[a.tidy.metric == metric]
    for s in _systems(w):
        g = w[w.system == s].sort_values("clients")
        ax.errorbar(g.clients, g["median"], yerr=[g["median"] - g.ci_low, g.ci_high - g["median"]],
                    label=LABELS[s], color=pal[s], marker="o", capsize=3, **kw)
        if dots:
            p = pts[pts.system == s]
            ax.scatter(p.clients, p.value, color=pal[s], s=10, alpha=0.4)


def _clients_axis(ax: plt.Axes, a: Analysis) -> None:
    """Log-2 axis labelled with the client counts actually measured (1, 2, 4 ... not 2^0, 2^1 ...)."""
    clients = sorted(set(a.tidy.clients))
    ax.set_xscale("log", base=2)
    ax.set_xticks(clients, [str(c) for c in clients])
    ax.minorticks_off()


def fig_sustainable(a: Analysis, out: Path) -> list[Path]:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    _lines(ax1, a, "sustainable_tps")
    _lines(ax2, a, "provider_tps")
    for ax, title in ((ax1, "sustainable: transactions / (run + catch-up)"),
                      (ax2, "provider's raw tps (pgbench)")):
        _clients_axis(ax, a)
        ax.set_xlabel("pgbench clients on the provider (-c)")
        ax.set_title(title, fontsize=11)
    ax1.set_ylabel("tps")
    ax1.legend(fontsize=8)
    caption = interval_caption(a.summary[a.summary.metric == "sustainable_tps"],
                               f"runs of {a.manifest['parameters']['run_seconds']} s")
    fig.suptitle(f"Write throughput a subscriber can sustain, per replication system ({caption}; dots: runs)")
    return figures.save(fig, out, "sustainable_tps")


def fig_ratio(a: Analysis, out: Path, reference_dir: Path) -> list[Path]:
    ref = reference(reference_dir)
    pal = _palette()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for s in _systems(a.ratios):
        g = a.ratios[a.ratios.system == s]
        ax1.plot(g.clients, g.ratio_to_streaming, marker="o", color=pal[s], label=LABELS[s])
    for s in _systems(ref):
        g = ref[ref.system == s]
        ax2.plot(g.clients, g.ratio_to_streaming, marker="s", color=pal[s], label=LABELS[s])
    for ax, title in ((ax1, "reproduced (this machine)"), (ax2, "published (article 000, 2 x i2.4xlarge)")):
        ax.set_xscale("log", base=2)
        ticks = sorted(set(a.ratios.clients) | set(ref.clients))
        ax.set_xticks(ticks, [str(c) for c in ticks])
        ax.minorticks_off()
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("clients")
        ax.set_title(title)
    ax1.set_ylabel("sustainable tps / streaming's")
    ax1.legend(fontsize=8)
    fig.suptitle("Each system relative to physical streaming replication")
    return figures.save(fig, out, "ratio_to_streaming")


def fig_catchup(a: Analysis, out: Path) -> list[Path]:
    pal = _palette()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    _lines(ax, a, "catchup_s")
    c = a.summary[a.summary.metric == "confirmed_s"]
    for s in _systems(c):
        g = c[c.system == s].sort_values("clients")
        ax.plot(g.clients, g["median"], color=pal[s], ls=":", lw=1)
    _clients_axis(ax, a)
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("pgbench clients on the provider")
    ax.set_ylabel("seconds after the run (symlog)")
    ax.set_title("Catch-up: until a marker committed at the end of the run is applied\n"
                 "(dotted: until the system's own confirmation — LSN, sl_setsync, PgQ tick)", fontsize=10)
    ax.legend(fontsize=8)
    return figures.save(fig, out, "catchup")


def representative_points(a: Analysis) -> dict[str, str]:
    """Per system, at its largest client count, the run whose sustainable tps is closest to the median."""
    s = a.tidy[a.tidy.metric == "sustainable_tps"]
    chosen = {}
    for system in _systems(s):
        g = s[(s.system == system) & (s.clients == s[s.system == system].clients.max())]
        med = g.value.median()
        chosen[system] = g.assign(d=(g.value - med).abs()).sort_values(["d", "point"]).point.iloc[0]
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


def fig_comparison(a: Analysis, out: Path) -> list[Path]:
    c = a.comparison.dropna(subset=["reproduced"]).copy()
    long = c.melt(id_vars=["claim", "verdict"], value_vars=["published", "reproduced"], var_name="source",
                  value_name="value")
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.7 * max(1, len(c))))
    if len(c):
        sns.barplot(data=long, y="claim", x="value", hue="source", ax=ax, orient="h")
        for i, (_, row) in enumerate(c.iterrows()):
            ax.text(1.02, i, row.verdict, transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("")
    ax.set_xlabel("value (unit per claim: see the comparison table)")
    ax.set_title("Published vs reproduced (verdict at right)")
    return figures.save(fig, out, "published_vs_reproduced")
