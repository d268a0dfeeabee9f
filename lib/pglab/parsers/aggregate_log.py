"""pgbench's ``--aggregate-interval`` log: one line of sums per interval, in any version's layout.

Why: a long run's latency over time is best read from the aggregate log, which pgbench writes in a
layout that depends on its version and options; the column count says which. 9.5-14 write 6 columns,
10 with ``--rate``, 11 with ``--rate`` and ``--latency-limit``; 15+ always write 15 (see
:data:`AGGREGATE_LAYOUTS`). Latencies in the log are microseconds, returned as ms.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pglab.errors import ParseError
from pglab.parsers.text import split_lines

_AGG_BASE = ["interval_start", "num_transactions", "sum_latency", "sum_latency_2", "min_latency",
             "max_latency"]
_AGG_LAG = ["sum_lag", "sum_lag_2", "min_lag", "max_lag"]
#: Column layouts of aggregate logs, by column count. 9.5-14 add optional columns; 15+ always
#: print all 15 and write 0 where an option is off (serialization/deadlock failures are 0
#: unless --failures-detailed; there is no column for the total of failures).
AGGREGATE_LAYOUTS: dict[int, tuple[str, list[str]]] = {
    6: ("9.5-14", _AGG_BASE),
    10: ("9.5-14 with --rate", _AGG_BASE + _AGG_LAG),
    11: ("9.5-14 with --rate and --latency-limit", _AGG_BASE + _AGG_LAG + ["skipped"]),
    15: ("15+", _AGG_BASE + _AGG_LAG + ["skipped", "retried", "retries", "serialization_failures",
                                        "deadlock_failures"]),
}


def parse_aggregate_log(text: str) -> dict[str, Any]:
    """A ``--aggregate-interval`` log; latencies in it are microseconds, returned as ms.

    Supported layouts are :data:`AGGREGATE_LAYOUTS` (6, 10, 11 or 15 numeric columns).
    """
    rows: list[list[int]] = []
    for lineno, raw in enumerate(split_lines(text), 1):
        tok = raw.split()
        if not tok:
            continue
        if len(tok) not in AGGREGATE_LAYOUTS or not all(re.fullmatch(r"-?\d+", t) for t in tok):
            expected = "; ".join(f"{n} columns ({v}): {' '.join(c)}"
                                 for n, (v, c) in AGGREGATE_LAYOUTS.items())
            raise ParseError(f"not a pgbench aggregate log: line {lineno} is {raw.strip()[:80]!r}; "
                             f"expected integers in one of these layouts: {expected}")
        rows.append([int(t) for t in tok])
    if not rows:
        raise ParseError("not a pgbench aggregate log: no interval lines")
    if len({len(r) for r in rows}) != 1:
        raise ParseError("not a pgbench aggregate log: lines have different column counts")
    versions, cols = AGGREGATE_LAYOUTS[len(rows[0])]
    intervals: list[dict[str, Any]] = []
    for row in rows:
        d = dict(zip(cols, row, strict=True))
        cnt = d["num_transactions"]
        mean = d["sum_latency"] / cnt if cnt else 0.0
        iv: dict[str, Any] = {
            "time": d["interval_start"], "transactions": cnt,
            "latency_avg_ms": d["sum_latency"] / cnt / 1000.0 if cnt else None,
            "latency_stddev_ms": (math.sqrt(max(d["sum_latency_2"] / cnt - mean**2, 0.0)) / 1000.0
                                  if cnt else None),
            "latency_min_ms": d["min_latency"] / 1000.0 if cnt else None,
            "latency_max_ms": d["max_latency"] / 1000.0 if cnt else None,
            "lag_avg_ms": d["sum_lag"] / cnt / 1000.0 if "sum_lag" in d and cnt else None,
            "lag_max_ms": d["max_lag"] / 1000.0 if "max_lag" in d else None,
            "skipped": d.get("skipped"), "retried": d.get("retried"), "retries": d.get("retries"),
            "serialization_failures": d.get("serialization_failures"),
            "deadlock_failures": d.get("deadlock_failures"),
        }
        intervals.append(iv)
    total = sum(r[1] for r in rows)
    starts = [r[0] for r in rows]
    steps = sorted({b - a for a, b in zip(starts, starts[1:], strict=False)})

    def _sum(key: str) -> int | None:
        vals = [iv[key] for iv in intervals]
        return None if vals[0] is None else sum(vals)

    return {
        "tool": "pgbench", "columns": len(rows[0]), "layout": cols, "layout_versions": versions,
        "interval_s": steps[0] if steps else None, "intervals": intervals, "transactions": total,
        "latency_avg_ms": sum(r[2] for r in rows) / total / 1000.0 if total else None,
        "skipped": _sum("skipped"), "retried": _sum("retried"), "retries": _sum("retries"),
        "serialization_failures": _sum("serialization_failures"),
        "deadlock_failures": _sum("deadlock_failures"),
    }
