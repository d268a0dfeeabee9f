"""How close the emulation came to the article's own numbers, point by point, and whether a claim may rest on it.

Why: a verdict made under an emulation of the article's machine is only as good as the emulation. Its CPU is
calibrated on one of the article's numbers (a *calibration point*, matched within CALIBRATED); every other point
the article published is a *prediction* the emulation was not tuned to. A claim is judged under the emulation only
where the predictions at its own points came within TOLERANCE. Where this machine is slower than the article's the
run is in slow motion: every emulated time times k, so the article's ratios hold and its rates are compared / k.
The calibration itself is ``manifest["emulation"]["calibration"]``; a run without one has every point a prediction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from pglab.analysis.stats import median_interval

#: a prediction counts as close when within 20% of the article's number (divided by k)
TOLERANCE = 0.20
#: a calibration point counts as matched when within 5%: the calibration searched for exactly that
CALIBRATED = 0.05
COLUMNS = ["point", "role", "unit", "article", "article_here", "emulated", "ci_low", "ci_high", "n", "error",
           "within"]
ROLES = ("calibration", "prediction", "not measured")


def k_of(calibration: dict[str, Any] | None) -> float:
    """The slow-motion factor (1 when none was recorded, or when what was recorded is no factor)."""
    k = (calibration or {}).get("k")
    try:
        k = float(k)
    except (TypeError, ValueError):
        return 1.0
    return k if math.isfinite(k) and k > 0 else 1.0


def calibration_points(calibration: dict[str, Any] | None) -> list[str]:
    """The names of the points the calibration matched, in its order."""
    points = (calibration or {}).get("points") or []
    return [str(p.get("point", "")) if isinstance(p, dict) else str(p) for p in points]


def table(article: pd.DataFrame, measured: pd.DataFrame, calibration: dict[str, Any] | None) -> pd.DataFrame:
    """One row per point of the article, in its order: its role, the article's number (and / k), the emulated
    median with its 95% interval over ``measured``'s values, and the relative error against the article's / k."""
    k, calibrated = k_of(calibration), set(calibration_points(calibration))
    values: dict[str, list[float]] = {}
    if measured is not None and len(measured):
        for point, value in zip(measured["point"].astype(str), measured["value"], strict=True):
            values.setdefault(point, []).append(float(value))
    for c in (calibration or {}).get("points") or []:  # a point the run's blocks did not measure: the search's value
        if isinstance(c, dict) and str(c.get("point")) not in values and c.get("measured") is not None:
            values[str(c["point"])] = [float(c["measured"])]
    rows = []
    for a in article.to_dict("records"):
        point = str(a["point"])
        published = float(a["article"])
        here = published / k
        x = np.asarray(values.get(point, []), dtype=float)
        n = int((~np.isnan(x)).sum())
        med, lo, hi, _ = median_interval(x) if n else (math.nan, math.nan, math.nan, "none")
        error = round(med / here - 1, 4) if n and here else math.nan
        role = "calibration" if point in calibrated else "prediction" if n else "not measured"
        bound = CALIBRATED if role == "calibration" else TOLERANCE
        rows.append({"point": point, "role": role, "unit": str(a.get("unit") or "tps"), "article": published,
                     "article_here": round(here, 4), "emulated": med, "ci_low": lo, "ci_high": hi, "n": n,
                     "error": error, "within": None if math.isnan(error) else bool(abs(error) <= bound)})
    return pd.DataFrame(rows, columns=COLUMNS).astype({"n": int, "within": object})


def median_abs_error(t: pd.DataFrame) -> float | None:
    """The median |error| of the predictions (calibration points were tuned to fit: they prove nothing)."""
    e = t.loc[t["role"] == "prediction", "error"].astype(float).dropna() if len(t) else pd.Series(dtype=float)
    return round(float(e.abs().median()), 4) if len(e) else None


def rate(x: float) -> str:
    """A rate in words: whole numbers with thousands separators from 100 up, 3 significant digits below."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def percent(error: float) -> str:
    """A relative error as a signed whole percent, "+12%", "-3%", "+0%"."""
    return f"{round(100 * error):+d}%"


def _true(v: Any) -> bool:
    return (isinstance(v, (bool, np.bool_)) and bool(v)) or str(v) == "True"


def _against(r: dict[str, Any]) -> str:
    here = rate(r["article_here"])
    return here if r["article_here"] == round(r["article"], 4) else f"{rate(r['article'])} / k = {here}"


def gate(t: pd.DataFrame, points: list[str], tolerance: float = TOLERANCE) -> tuple[bool, str]:
    """Whether a claim resting on ``points`` may be judged under the emulation: each of them measured, and within
    ``tolerance`` (a calibration point: within what its calibration asked). The words say which point fails and why."""
    rows = {str(r["point"]): r for r in t.to_dict("records")} if len(t) else {}
    off, missing, close = [], [], []
    for p in points:
        r = rows.get(p)
        if r is None or not r["n"] or pd.isna(r["error"]):
            missing.append(p)
            continue
        ok = _true(r["within"]) if r["role"] == "calibration" else abs(float(r["error"])) <= tolerance
        bound = CALIBRATED if r["role"] == "calibration" else tolerance
        if ok:
            close.append(percent(r["error"]))
        else:
            off.append(f"{p} {rate(r['emulated'])} {r['unit']} against the article's {_against(r)} "
                       f"({percent(r['error'])}), beyond {bound:.0%}")
    if not off and not missing:
        return True, (f"the emulation's predictions at {', '.join(points)} came within {tolerance:.0%} of the "
                      f"article's ({', '.join(close)})")
    parts = ([f"are off: {'; '.join(off)}"] if off else []) + ([f"not measured: {', '.join(missing)}"]
                                                              if missing else [])
    return False, "the emulation's predictions at the claim's own points " + "; ".join(parts)


KNOBS = {"cpu": "CPU", "flush": "disk flush"}


def matched(calibration: dict[str, Any]) -> str:
    """What a calibration that succeeded matched: each point, the article's number, what was measured, the share."""
    k, share = k_of(calibration), calibration.get("share")
    parts = []
    for p in (p for p in calibration.get("points") or [] if isinstance(p, dict)):
        knob = str(p.get("knob", "cpu"))
        unit = str(p.get("unit", "tps"))
        article = f"{rate(float(p['article']))} {unit}" if p.get("article") is not None else "its number"
        if k != 1 and p.get("target") is not None:
            article += f"; {rate(float(p['target']))} in slow motion"
        measured = f": {rate(float(p['measured']))} measured" if p.get("measured") is not None else ""
        at = f" at a {float(share):.0%} CPU share" if knob == "cpu" and share is not None else ""
        parts.append(f"{KNOBS.get(knob, knob)} calibrated to the article's {p.get('point')} ({article}){measured}{at}")
    return "; ".join(parts) or str(calibration.get("said") or "calibrated")


def said(calibration: dict[str, Any] | None) -> str:
    """One line on the calibration for a verdict's note: what it matched, at what share, and the slow motion."""
    if not calibration:
        return ""
    k = k_of(calibration)
    points = [p for p in calibration.get("points") or [] if isinstance(p, dict)]
    if not calibration.get("ok", False):
        why = str(calibration.get("said") or "") or "; ".join(
            f"{p.get('point')}: {rate(float(p['measured']))} measured against {rate(float(p['target']))}"
            for p in points if p.get("measured") is not None and p.get("target") is not None) or "no point matched"
        return f"calibration failed: {why}"
    line = matched(calibration)
    if k != 1:
        line += (f"; in slow motion, k = {k:.3g}: every emulated time x{k:.3g}, the article's rates compared "
                 f"divided by {k:.3g}")
    return line


def pooled(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The fidelity table over a campaign's runs: each run's median in the article's units (times that run's own k,
    its slow motion) is one value, so the interval is over the runs; calibration points stay marked as such."""
    tables = [t for t in tables if len(t)]
    if not tables:
        return pd.DataFrame(columns=COLUMNS)
    first = tables[-1]
    values = [{"point": r["point"], "value": float(r["emulated"]) * float(r["article"]) / float(r["article_here"])}
              for t in tables for r in t.to_dict("records") if pd.notna(r["emulated"]) and r["article_here"]]
    cal = {"k": 1.0, "points": [{"point": p} for p in first.loc[first.role == "calibration", "point"]]}
    return table(first[["point", "unit", "article"]], pd.DataFrame(values, columns=["point", "value"]), cal)
