"""A run's machine, probed and gated (``pglab.hosts.machine_state``): refused busy before a run folder exists,
probed again after the run, and the run record told what moved (``manifest["machine"]``).

``--busy-ok`` (the environment's ``PGLAB_BUSY_OK=1``: the test suite runs collects side by side) starts a run on a
busy machine all the same, and marks it: a marked run is one no verdict should rest on unless asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pglab.errors import UserError
from pglab.hosts import machine_state
from pglab.hosts.inventory import Inventory
from pglab.machine_rules import BUSY_OK, busy_ok, statement_drift  # noqa: F401  (``--busy-ok`` sets it)
from pglab.runs import marks
from pglab.runs.reading import point_metas
from pglab.runs.store import RunStore


def probe(inventory: Inventory, hosts: Sequence[str], wait: bool = False,
          written_back: bool = False) -> dict[str, dict[str, Any]]:
    """Each host's state (``machine_state.probe``; ``wait``: a load above the cores waited out first;
    ``written_back``: ``sync`` first, so that the end probe measures the disk, not the run's dirty pages still
    being written back: right after a write-heavy run the flush probe read 38% slower without it)."""
    out = {}
    for name in dict.fromkeys(hosts):
        if name not in inventory.hosts:
            continue  # the preflight names it
        with inventory.connect(name) as host:
            if written_back:
                host.run(["sync"], check=False, timeout=300)
            workdir = inventory.entry(name).workdir
            waits = wait and not busy_ok()  # asked to measure anyway: no point waiting for the load to fall
            out[name] = machine_state.settled(host, workdir) if waits else machine_state.probe(host, workdir)
    return out


def gate(states: dict[str, dict[str, Any]]) -> list[str]:
    """Why the run may not start (UserError), or, with ``--busy-ok``, the reasons it is marked for."""
    reasons = [f"host {h}: {r}" for h, s in states.items() for r in machine_state.busy(s)]
    if reasons and not busy_ok():
        waited = max((s.get("waited_s") or 0 for s in states.values()), default=0)
        raise UserError(f"the machine is busy ({'; '.join(reasons)}" + (f", still after {waited} s" if waited else "")
                        + "): a run measured beside another load is no run of this machine; stop the other load or "
                        "wait, or pass --busy-ok to measure anyway (the run is then marked and left out of verdicts)")
    return reasons


def opened(store: RunStore, before: dict[str, dict[str, Any]], reasons: list[str]) -> None:
    """The start's probe and marks, in the run record before anything is measured."""
    store.manifest["machine"] = {"before": before, "busy_at_start": reasons, "busy_ok": bool(reasons),
                                 "marked": list(reasons)}


def closed(store: RunStore, inventory: Inventory, hosts: Sequence[str]) -> None:
    """The end's probe and what drifted since the start; a drift, or points measured beside another load (each
    measured twice, ``pglab.runs.sweep``), mark the run. Never raises: the run's own outcome is what a failure here
    must not hide."""
    m = store.manifest.setdefault("machine", {"before": {}, "marked": []})
    try:
        after = probe(inventory, hosts, written_back=True)
    except Exception as exc:  # noqa: BLE001
        m["after_error"] = f"{type(exc).__name__}: {exc}"
        return
    m["after"] = after
    m["drift"] = [f"host {h}: {d}" for h, s in after.items() for d in machine_state.drift(m["before"].get(h, {}), s)]
    m["drift"] += statement_drift(m.get("statement_us"))  # probed by the sweeps (pglab.workloads.statement_probe)
    m["busy_at_end"] = marks.busy_at_end(after)
    m["busy_points"] = [meta.get("point") or d.name for d, meta in point_metas(store.dir, store.manifest)
                        if meta.get("busy_flag")]
    m["marked"] = list(dict.fromkeys([*m.get("marked", []), *m["busy_at_end"], *m["drift"],
                                      *marks.beside_a_load(m)]))
