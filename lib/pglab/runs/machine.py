"""A run's machine, probed and gated (``pglab.hosts.machine_state``): refused busy before a run folder exists,
probed again after the run, and the run record told what moved (``manifest["machine"]``).

``--busy-ok`` (the environment's ``PGLAB_BUSY_OK=1``: the test suite runs collects side by side) starts a run on a
busy machine all the same, and marks it: a marked run is one no verdict should rest on unless asked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pglab.errors import UserError
from pglab.hosts import machine_state
from pglab.hosts.inventory import Inventory
from pglab.runs.store import RunStore

BUSY_OK = "PGLAB_BUSY_OK"
WITH_MARKED = "PGLAB_WITH_MARKED"  # "1": verdicts over runs keep marked runs (the test suite's runs are all busy)


def busy_ok() -> bool:
    return os.environ.get(BUSY_OK) == "1"


def marks(manifest: dict[str, Any]) -> list[str]:
    """Why a run is marked, by today's rule: busy at its start or its end, or its machine moved between its two
    probes (``machine_state.drift``, recomputed from the probes it recorded, so a rule that learnt what noise is
    applies to old runs too); [] for a run without probes (it predates them) or that sat still."""
    m = manifest.get("machine") or {}
    before, after = m.get("before") or {}, m.get("after") or {}
    moved = [f"host {h}: {d}" for h, s in after.items() for d in machine_state.drift(before.get(h, {}), s)]
    return list(dict.fromkeys([*(m.get("busy_at_start") or []), *busy_at_end(after), *moved]))


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


def probe(inventory: Inventory, hosts: Sequence[str], wait: bool = False) -> dict[str, dict[str, Any]]:
    """Each host's state (``machine_state.probe``; ``wait``: a load above the cores waited out first)."""
    out = {}
    for name in dict.fromkeys(hosts):
        if name not in inventory.hosts:
            continue  # the preflight names it
        with inventory.connect(name) as host:
            workdir = inventory.entry(name).workdir
            waits = wait and not busy_ok()  # asked to measure anyway: no point waiting for the load to fall
            out[name] = machine_state.settled(host, workdir) if waits else machine_state.probe(host, workdir)
    return out


def gate(states: dict[str, dict[str, Any]]) -> list[str]:
    """Why the run may not start (UserError), or, with ``--busy-ok``, the reasons it is marked for."""
    reasons = [f"host {h}: {r}" for h, s in states.items() for r in machine_state.busy(s)]
    if reasons and not busy_ok():
        raise UserError(f"the machine is busy ({'; '.join(reasons)}): a run measured beside another load is no "
                        "run of this machine; stop the other load or wait, or pass --busy-ok to measure anyway (the "
                        "run is then marked and left out of verdicts)")
    return reasons


def opened(store: RunStore, before: dict[str, dict[str, Any]], reasons: list[str]) -> None:
    """The start's probe and marks, in the run record before anything is measured."""
    store.manifest["machine"] = {"before": before, "busy_at_start": reasons, "busy_ok": bool(reasons),
                                 "marked": list(reasons)}


def closed(store: RunStore, inventory: Inventory, hosts: Sequence[str]) -> None:
    """The end's probe and what drifted since the start; a drift, or points measured beside another load, mark the
    run. Never raises: the run's own outcome is what a failure here must not hide."""
    m = store.manifest.setdefault("machine", {"before": {}, "marked": []})
    try:
        after = probe(inventory, hosts)
    except Exception as exc:  # noqa: BLE001
        m["after_error"] = f"{type(exc).__name__}: {exc}"
        return
    m["after"] = after
    m["drift"] = [f"host {h}: {d}" for h, s in after.items() for d in machine_state.drift(m["before"].get(h, {}), s)]
    m["busy_at_end"] = busy_at_end(after)
    m["marked"] = list(dict.fromkeys([*m.get("marked", []), *m["busy_at_end"], *m["drift"]]))


def busy_at_end(after: dict[str, dict[str, Any]]) -> list[str]:
    """Others' CPU at the end probe (the run's own servers are down by then): a load that started during the run
    and is still there. Not the load average: it still carries the run's own minute."""
    most = machine_state.OTHERS_MAX
    return [f"host {h}: at its end, other processes took {s['others']:.0%} of the CPU (at most {most:.0%})"
            for h, s in after.items() if s.get("others", 0) > most]
