"""The emulated machine beside the article's, point by point: each workload and target at 1 client, the article's
mean tps beside the run's (``pglab.analysis.fidelity``).

Why: the overhead claims are ratios to ``local``, but the emulation that judges them has to give the article's own
transaction times first. Its CPU and disk are calibrated on ``local`` (``fdw_claims.CALIBRATION``); each foreign
target is a prediction, and a claim is judged under the emulation only where the targets it rests on came within
``fidelity.TOLERANCE`` of the article's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import effects, fidelity
from pglab.studies.fdw_overhead.claims import FdwClaim

CLIENTS = 1  # the article's one client count


def point(kind: str, target: str) -> str:
    return f"{kind} {target} @ {CLIENTS} client"


def article_points(reference_dir: Path) -> pd.DataFrame:
    """point, unit, article: the article's mean tps of each workload and target (its table's order)."""
    ref = pd.read_csv(reference_dir / "fdw_overhead.csv")
    return pd.DataFrame([{"point": point(r.type, r.target), "unit": "tps", "article": float(r.tps_mean)}
                         for r in ref.itertuples()], columns=["point", "unit", "article"])


def measured(points: pd.DataFrame) -> pd.DataFrame:
    """point, value: each kept point's tps at 1 client (the first copy of the baseline; flagged points left out)."""
    p = effects.kept(points)
    p = p[(p["copy"] == 1) & (p.clients == CLIENTS)] if len(p) else p
    return pd.DataFrame([{"point": point(str(r.kind), str(r.config)), "value": float(r.tps)}
                         for r in p.itertuples(index=False)], columns=["point", "value"]).dropna()


def table(points: pd.DataFrame, reference_dir: Path, manifest: dict[str, Any]) -> pd.DataFrame:
    """The fidelity table of a calibrated run (no rows otherwise)."""
    calibration = (manifest.get("emulation") or {}).get("calibration")
    if not calibration:
        return pd.DataFrame(columns=fidelity.COLUMNS)
    return fidelity.table(article_points(reference_dir), measured(points), calibration)


def claim_points(c: FdwClaim) -> list[str]:
    """The points a claim rests on: ``local`` and each target of its ratio, in each workload it needs."""
    kinds = dict.fromkeys(w for w, _ in c.needs)
    return [point(w, "local") for w in kinds] + [point(w, t) for w, t in c.needs]
