"""Parser for the output of a ``sysbench ... run`` (1.0.x and the older 0.5).

Why: pglab stores raw tool output and derives numbers from it afterwards; studies compare with
published results that used sysbench 0.5 (``--test=oltp.lua``) as well as current 1.0 runs.

Differences handled:

* 1.0 prints ``SQL statistics:``, ``queries: N (X per sec.)`` and a ``Latency (ms):`` block with
  ``min/avg/max``, ``NNth percentile`` (or ``percentile stats: disabled`` with ``--percentile=0``)
  and ``sum``; report lines read ``[ 1s ] thds: 2 tps: .. qps: .. (r/w/o: ..) lat (ms,95%): ..
  err/s: .. reconn/s: ..``.
* 0.5 prints ``OLTP test statistics:``, ``read/write requests`` and ``other operations`` instead of
  ``queries``, a ``response time:`` block with ``ms`` units and ``approx.  95 percentile:``; report
  lines read ``[  60s] threads: N, tps: .., reads: .., writes: .., response time: 1484.54ms (95%),
  errors: .., reconnects: ..``. 0.5 prints no queries-per-second figure: ``qps`` is computed as
  total queries / total time (``qps_computed`` says so), and report lines have ``qps`` null.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from pglab.errors import ParseError

_N = r"(\d+(?:\.\d+)?)"


@dataclass
class Interval:
    """One ``--report-interval`` line: per-second rates over the last interval."""

    time_s: float
    threads: int
    tps: float
    qps: float | None
    reads_per_s: float | None
    writes_per_s: float | None
    other_per_s: float | None
    latency_pct_ms: float | None
    percentile: int | None
    errors_per_s: float
    reconnects_per_s: float


_IV_10 = re.compile(
    rf"^\[\s*{_N}s\s*\] thds: (\d+) tps: {_N} qps: {_N} \(r/w/o: {_N}/{_N}/{_N}\) "
    rf"lat \(ms,(\d+)%\): {_N} err/s: {_N} reconn/s: {_N}")
_IV_05 = re.compile(
    rf"^\[\s*{_N}s\s*\] threads: (\d+), tps: {_N}, reads: {_N}, writes: {_N}, "
    rf"response time: {_N}ms \((\d+)%\), errors: {_N}, reconnects:\s+{_N}")


def _intervals(lines: list[str]) -> list[dict[str, Any]]:
    out: list[Interval] = []
    for ln in lines:
        if (m := _IV_10.match(ln)):
            pct = int(m.group(8))
            out.append(Interval(float(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4)),
                                float(m.group(5)), float(m.group(6)), float(m.group(7)),
                                float(m.group(9)) if pct else None, pct or None,
                                float(m.group(10)), float(m.group(11))))
        elif (m := _IV_05.match(ln)):
            pct = int(m.group(7))
            out.append(Interval(float(m.group(1)), int(m.group(2)), float(m.group(3)), None,
                                float(m.group(4)), float(m.group(5)), None,
                                float(m.group(6)) if pct else None, pct or None,
                                float(m.group(8)), float(m.group(9))))
    return [asdict(i) for i in out]


def _find(pattern: str, text: str) -> re.Match[str] | None:
    return re.search(pattern, text, re.M)


def _int(pattern: str, text: str) -> int | None:
    m = _find(pattern, text)
    return int(m.group(1)) if m else None


def _fl(pattern: str, text: str) -> float | None:
    m = _find(pattern, text)
    return float(m.group(1)) if m else None


def parse_run(text: str) -> dict[str, Any]:
    """Numbers of one sysbench run (the output of ``sysbench <test> ... run``)."""
    text = text.replace("\r\n", "\n")
    banner = _find(r"^sysbench (\d+(?:\.\d+)*)", text)
    if not _find(r"^\s*(SQL|OLTP test) statistics:\s*$", text):
        what = ("sysbench output without run statistics (prepare/cleanup output, or a run that failed?)"
                if banner else "not sysbench output")
        raise ParseError(f"{what}: expected a sysbench run with an 'SQL statistics:' (1.0) or "
                         "'OLTP test statistics:' (0.5) section")
    trans = _find(rf"^\s*transactions:\s+(\d+)\s+\({_N} per sec\.\)", text)
    if not trans:
        raise ParseError("sysbench output without a 'transactions: N (X per sec.)' line")
    r: dict[str, Any] = {
        "tool": "sysbench", "version": banner.group(1) if banner else None,
        "threads": _int(r"^Number of threads: (\d+)", text),
        "transactions": int(trans.group(1)), "tps": float(trans.group(2)),
        "queries": _int(r"^\s*total:\s+(\d+)\s*$", text), "qps": None, "qps_computed": False,
        "reads": _int(r"^\s*read:\s+(\d+)\s*$", text),
        "writes": _int(r"^\s*write:\s+(\d+)\s*$", text),
        "other": _int(r"^\s*other:\s+(\d+)\s*$", text),
        "errors": _int(r"^\s*ignored errors:\s+(\d+)", text),
        "errors_per_s": _fl(rf"^\s*ignored errors:\s+\d+\s+\({_N} per sec\.\)", text),
        "reconnects": _int(r"^\s*reconnects:\s+(\d+)", text),
        "reconnects_per_s": _fl(rf"^\s*reconnects:\s+\d+\s+\({_N} per sec\.\)", text),
        "total_time_s": _fl(rf"^\s*total time:\s+{_N}s\s*$", text),
        "events": _int(r"^\s*total number of events:\s+(\d+)", text),
        "latency_min_ms": _fl(rf"^\s*min:\s+{_N}(?:ms)?\s*$", text),
        "latency_avg_ms": _fl(rf"^\s*avg:\s+{_N}(?:ms)?\s*$", text),
        "latency_max_ms": _fl(rf"^\s*max:\s+{_N}(?:ms)?\s*$", text),
        "latency_sum_ms": _fl(rf"^\s*sum:\s+{_N}(?:ms)?\s*$", text),
        "latency_p95_ms": None, "latency_pct_ms": None, "percentile": None,
        "intervals": _intervals(text.split("\n")),
    }
    if (m := _find(rf"^\s*queries:\s+\d+\s+\({_N} per sec\.\)", text)):
        r["qps"] = float(m.group(1))
    elif r["queries"] is not None and r["total_time_s"]:
        r["qps"] = r["queries"] / r["total_time_s"]
        r["qps_computed"] = True
    pct = (_find(rf"^\s*(\d+)(?:st|nd|rd|th) percentile:\s+{_N}", text)
           or _find(rf"^\s*approx\.\s+(\d+) percentile:\s+{_N}ms", text))
    if pct:
        r["percentile"], r["latency_pct_ms"] = int(pct.group(1)), float(pct.group(2))
        if r["percentile"] == 95:
            r["latency_p95_ms"] = r["latency_pct_ms"]
    return r
