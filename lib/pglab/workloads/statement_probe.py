"""The time a statement takes on each running node, probed before a sweep's first point and after its last.

Why: the articles' claims rest on the CPU time a statement takes as much as on a disk's flush (on this project's VM
a local select-only statement took 67 us on one boot and 227 us on another). The machine probe at a run's start and
end (``pglab.hosts.machine_state``) times a shell loop, because no server runs yet when it runs; this one times a
real statement on a real node, as the run's workloads see it: ``SELECT 1`` from one pgbench client on the node's own
host, on its core and inside its CPU share (``emulate``), in ``REPEATS`` batches of ``statements()``, no flush. The
median of the batches' average latency is the probe. The run record keeps the first sweep's start and the last
sweep's end (``manifest["machine"]["statement_us"]``); a move past ``machine_rules.DRIFT["statement_us"]`` marks
the run (``pglab.runs.marks``).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any

from pglab.hosts.machine_state import PROBE_S
from pglab.nodes.node import Node
from pglab.runs.store import RunStore
from pglab.workloads.pgbench import pinned, session_env

SCRIPT = "SELECT 1;\n"
PER_SECOND = 3000  # statements per second of PROBE_S, in all: about 0.3-1 s a node on this VM at the default 1 s
REPEATS = 5  # batches; their median is the probe's (one batch moved 39-625 us within two minutes at idle)


def statements() -> int:
    """Statements per batch."""
    return max(50, round(PER_SECOND * PROBE_S / REPEATS))


def per_statement_us(node: Node, repeats: int = REPEATS) -> float | None:
    """The node's time for one ``SELECT 1`` round trip, in us: the median of ``repeats`` batches' average latency;
    None when pgbench could not tell."""
    script = f"{node.ws.base}/.pglab-statement-probe.sql"
    node.host.write_text(script, SCRIPT, 0o644)
    argv = pinned(node, None, [node.bin("pgbench"), "-n", "-c", "1", "-t", str(statements()), "-f", script,
                               "postgres"])
    got = []
    for _ in range(repeats):
        res = node.host.run(argv, env=session_env(node), check=False, timeout=120)
        m = re.search(r"latency average = ([\d.]+) ms", res.stdout)
        if res.exit_code == 0 and m:
            got.append(float(m[1]) * 1000)
    return round(statistics.median(got), 1) if got else None


def probe(nodes: Iterable[Any]) -> dict[str, float | None]:
    """node name -> its statement time, for every node pglab started that runs now (a managed target is not probed:
    its CPU is the service's)."""
    return {n.name: _quietly(n) for n in nodes if isinstance(n, Node) and n.up}


def _quietly(node: Node) -> float | None:
    try:
        return per_statement_us(node)
    except Exception:  # noqa: BLE001  (a probe that fails says nothing; the points say what broke)
        return None


def opened(store: RunStore, nodes: Iterable[Any]) -> None:
    """Before a sweep: the first sweep's probe is the run's start (a resumed run's or a later block's is not)."""
    rec = store.manifest.setdefault("machine", {}).setdefault("statement_us", {})
    if "before" not in rec:
        rec["before"] = probe(nodes)
        store.save()


def closed(store: RunStore, nodes: Iterable[Any]) -> None:
    """After a sweep: the last sweep's probe is the run's end."""
    rec = store.manifest.setdefault("machine", {}).setdefault("statement_us", {})
    rec["after"] = probe(nodes)
    store.save()
