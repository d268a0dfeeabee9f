"""What pgbench's text parsers share: its lines and its printed numbers.

Why: the run summary, the aggregate log and the per-transaction log's line-by-line rules must split
lines and read numbers the same way (a ``\\r`` ends a line too; NaN means no sample), so one
definition serves them all.
"""

from __future__ import annotations

import math

#: A number as pgbench prints it, NaN and infinities included (printed with 0 samples).
NUM = r"(-?nan|NaN|-?inf|[-+]?\d+(?:\.\d+)?)"


def split_lines(text: str) -> list[str]:
    """Split on \\n, \\r\\n and bare \\r: pgbench rewrites progress lines with \\r on a terminal."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def to_float(s: str | None) -> float | None:
    """A printed number, or None for a missing one or a NaN (pgbench prints NaN with 0 samples)."""
    if s is None:
        return None
    v = float(s)
    return None if math.isnan(v) or math.isinf(v) else v
