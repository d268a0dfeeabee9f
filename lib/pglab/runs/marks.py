"""Why a run is marked, and which sitting it belongs to, read from its record alone (no host code: the analysis
and the ledger judge runs long after, tests/test_run_record.py).

A marked run decides nothing unless asked (``PGLAB_WITH_MARKED=1``): a campaign's verdicts are over its other runs
(``pglab.app.campaign``), and the ledger's views leave it out. Marks are recomputed by today's rules
(``pglab.machine_rules``) from the probes the run recorded.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from pglab.machine_rules import OTHERS_MAX, drift, statement_drift

WITH_MARKED = "PGLAB_WITH_MARKED"  # "1": verdicts over runs keep marked runs (the test suite's runs are all busy)


def marks(manifest: dict[str, Any]) -> list[str]:
    """Why a run is marked, by today's rule: busy at its start or its end, or its machine moved between its two
    probes (``pglab.machine_rules.drift``, recomputed from the probes it recorded, so a rule that learnt what noise is
    applies to old runs too); [] for a run without probes (it predates them) or that sat still."""
    m = manifest.get("machine") or {}
    before, after = m.get("before") or {}, m.get("after") or {}
    moved = [f"host {h}: {d}" for h, s in after.items() for d in drift(before.get(h, {}), s)]
    moved += statement_drift(m.get("statement_us"))
    return list(dict.fromkeys([*(m.get("busy_at_start") or []), *busy_at_end(after), *moved, *beside_a_load(m)]))


def beside_a_load(machine: dict[str, Any]) -> list[str]:
    """The points measured twice while another load took more than its share of the CPU (the second kept, flagged,
    left out of the analysis): the load was no blip, so the run is no run of a machine sitting still."""
    ids = machine.get("busy_points") or []
    if not ids:
        return []
    shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return [f"{len(ids)} point(s) measured twice while other processes took more than {OTHERS_MAX:.0%} of the CPU "
            f"({shown})"]


SITTING_GAP_S = 3600  # runs further apart than this (or on another boot) are of another sitting


def when(text: Any) -> datetime | None:
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def sittings(manifests: dict[str, dict[str, Any]]) -> dict[str, str]:
    """run id -> its sitting: runs one after another on one boot, none starting more than an hour after the one
    before ended; a new boot or a longer pause starts another. The label names its first run's start (UTC) and
    boot. Why: runs of one sitting share what the machine was that afternoon, so a verdict across sittings needs
    them as a level of their own (``over_runs.decide_sittings``)."""
    out: dict[str, str] = {}
    label, boot, end = "", None, None
    for run_id, m in sorted(manifests.items(), key=lambda kv: str(kv[1].get("start") or "")):
        before = next(iter(((m.get("machine") or {}).get("before") or {}).values()), {})
        b, start = before.get("boot_id"), when(m.get("start"))
        gap = (start - end).total_seconds() if start and end else 0.0
        if not label or (b and boot and b != boot) or gap > SITTING_GAP_S:
            first = str(m.get("start") or "?")[:16].replace("T", " ")
            label = f"sitting of {first}" + (f" (boot {b[:8]})" if b else "")
        out[run_id], boot, end = label, b or boot, when(m.get("end")) or start
    return out


def left_out(manifests: dict[str, dict[str, Any]]) -> dict[str, str]:
    """run id -> why it is left out of the verdicts over runs ({} with ``PGLAB_WITH_MARKED=1``)."""
    if os.environ.get(WITH_MARKED) == "1":
        return {}
    return {i: "; ".join(why) for i, m in manifests.items() if (why := marks(m))}


def busy_at_end(after: dict[str, dict[str, Any]]) -> list[str]:
    """Others' CPU at the end probe (the run's own servers are down by then): a load that started during the run
    and is still there. Not the load average: it still carries the run's own minute."""
    most = OTHERS_MAX
    return [f"host {h}: at its end, other processes took {s['others']:.0%} of the CPU (at most {most:.0%})"
            for h, s in after.items() if s.get("others", 0) > most]
