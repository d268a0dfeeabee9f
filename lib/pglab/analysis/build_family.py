"""The build family's A/A (``pglab builds aa``, pglab.app.build_aa) as read back: its verdict rule, its words,
and the newest one measured, for a report whose run is of another build than the one beside it. Pure: reports
read it without the host layer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

AA_RUNS = Path("yours/data/runs/build_aa")  # where `pglab builds aa` archives its runs by default


def verdict(low: float, high: float, margin: float) -> str:
    """``same`` within 1 +- margin, ``differs`` wholly outside it, else ``open`` (more blocks may decide)."""
    if 1 - margin <= low and high <= 1 + margin:
        return "same"
    if high < 1 - margin or low > 1 + margin:
        return "differs"
    return "open"


def words(r: dict[str, Any]) -> str:
    """One sentence for a terminal, a report and the docs."""
    said = {"same": f"the build family does not matter here: within +-{r['margin']:.0%}",
            "differs": f"the build family matters here: outside +-{r['margin']:.0%}; do not compare runs of the "
                       "two families on this machine",
            "open": f"not decided: the interval straddles the +-{r['margin']:.0%} margin (more blocks may decide)"}
    return (f"{r['builds'][1]} / {r['builds'][0]}, {r['workload']}, {r['clients']} clients, {r['blocks']} blocks of "
            f"{r['seconds']} s: ratio {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] "
            f"({r['coverage']:.0%} interval, {r['ci_method']}); {said[r['verdict']]}")


def latest(runs: Path = AA_RUNS) -> dict[str, Any] | None:
    """The newest A/A measured here (its ``aa.json``), or None."""
    found = sorted(runs.glob("*/aa.json")) if runs.is_dir() else []
    return json.loads(found[-1].read_text()) if found else None
