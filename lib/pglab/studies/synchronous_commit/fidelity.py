"""The emulated machine beside the article's, point by point: every tps the article published (each level at each
of its client counts, the standby's reads idle and loaded) beside what the run measured (``pglab.analysis.fidelity``).

Why: the level claims are ratios, but the emulation that judges them has to reproduce the article's absolute numbers
first. Its CPU is calibrated on one of them (``sc_claims.CALIBRATION``: ``off`` at 10 clients); every other is a
prediction. A claim is judged under the emulation only where the predictions at its own points (the levels of its
ratio at the judged client counts) come within ``fidelity.TOLERANCE`` of the article's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pglab.analysis import effects, fidelity

LEVELS = ("on", "remote_write", "local", "off")  # the article's, in its table's order
READS = {"idle": "standby reads, primary idle", "loaded": "standby reads, primary loaded"}


def point(level: str, clients: int) -> str:
    return f"{level} @ {int(clients)} clients"


def read_point(load: str, level: str) -> str:
    return f"{READS[load]} ({level})"


def article_points(reference_dir: Path, read_level: str) -> pd.DataFrame:
    """point, unit, article: each level at each client count, then the standby's reads (the median of the article's
    five runs at ``read_level``, or over all its levels where it did not run that one)."""
    ref = pd.read_csv(reference_dir / "synchronous_commit.csv")
    rows = [{"point": point(lv, c), "unit": "tps", "article": float(t)}
            for lv in LEVELS for c, t in ref[ref.synchronous_commit == lv].sort_values("clients")[["clients", "tps"]]
            .itertuples(index=False)]
    reads = pd.read_csv(reference_dir / "synchronous_commit_standby_reads.csv")
    at = reads[reads.synchronous_commit == read_level] if (reads.synchronous_commit == read_level).any() else reads
    rows += [{"point": read_point(load, read_level), "unit": "tps", "article": float(at[at.primary_load == load]
                                                                                     .tps.median())}
             for load in READS]
    return pd.DataFrame(rows, columns=["point", "unit", "article"])


def measured(writes: pd.DataFrame, reads: pd.DataFrame, read_level: str) -> pd.DataFrame:
    """point, value: each kept point's tps (the first copy of the baseline; flagged points left out, as from every
    ratio), at the flush level the claims are judged at."""
    rows = []
    w = effects.kept(writes)
    for r in w[(w["copy"] == 1) & w.config.isin(LEVELS)].itertuples(index=False):
        rows.append({"point": point(str(r.config), int(r.clients)), "value": float(r.tps)})
    rd = effects.kept(reads)
    for r in rd[(rd["copy"] == 1) & rd.config.isin(list(READS))].itertuples(index=False):
        rows.append({"point": read_point(str(r.config), read_level), "value": float(r.tps)})
    return pd.DataFrame(rows, columns=["point", "value"]).dropna()


def table(writes: pd.DataFrame, reads: pd.DataFrame, reference_dir: Path, manifest: dict[str, Any],
          read_level: str) -> pd.DataFrame:
    """The fidelity table of an emulated run (no rows for a run of this machine as it is: nothing was calibrated)."""
    calibration = (manifest.get("emulation") or {}).get("calibration")
    if not calibration:
        return pd.DataFrame(columns=fidelity.COLUMNS)
    return fidelity.table(article_points(reference_dir, read_level), measured(writes, reads, read_level), calibration)


def level_points(level: str, counts: list[int]) -> list[str]:
    """The points a level claim (``level`` over ``on``) rests on: both levels at each judged client count."""
    return [point(lv, c) for c in counts for lv in ("on", level)]


def order_points(counts: list[int]) -> list[str]:
    return [point(lv, c) for c in counts for lv in ("on", "remote_write", "local")]


def reads_points(read_level: str) -> list[str]:
    return [read_point(load, read_level) for load in READS]


def gate(t: pd.DataFrame, points: list[str]) -> tuple[bool, str]:
    """(judged under the emulation, why): always judged when the run had no calibration (``t`` empty)."""
    if t.empty:
        return True, ""
    return fidelity.gate(t, points)

