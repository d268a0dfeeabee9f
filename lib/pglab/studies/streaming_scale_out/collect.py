"""Collect: a primary and streaming standbys; TSBS cpu-only inserts in every mode, then reads over 1..5 nodes.

Topology (``pglab.nodes.topology.streaming``): the primary on ``primary_host``, standby ``sb1``... on
``standby_hosts`` (default: the primary's host), each with a physical replication slot so that a standby
detached for the ``none`` mode catches up afterwards. The loader and the query clients run on
``client_host`` (default: the primary's host).

Insert points: the mode is put in effect and proved (a new session's ``SHOW synchronous_commit``, each
standby's ``sync_state``), the ``cpu`` table is made afresh in the point's layout, then the loader
(``python -m pglab.workloads.tsbs load``, a program on the client's host, like pgbench) writes the same
seeded rows in batches of ``batch``, one transaction each, from ``clients`` connections. The standbys'
replay lag is sampled during the load; a standby that must confirm commits and stops streaming fails the
point and ends the run (every commit would wait for it). After the load every node must hold the same
rows.

Read points: the data loaded once per layout, replay caught up, then every query type's result compared
between the primary and each standby; a read point runs ``read_clients`` pgbench clients (TSBS query
scripts) spread round-robin over 1, 3 or 5 nodes, all at once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory
from pglab.runs import preflight
from pglab.runs.opening import Plan, study_run
from pglab.runs.store import Point
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.streaming_scale_out import STUDY
from pglab.studies.streaming_scale_out.deploy import HYPERTABLE, State, deploy
from pglab.studies.streaming_scale_out.load import insert
from pglab.studies.streaming_scale_out.params import Params
from pglab.studies.streaming_scale_out.reads import read
from pglab.workloads import observed
from pglab.workloads.observed import Watch


def layouts(p: Params, timescale: str | None) -> list[str]:
    """The layouts of the run: the parameter's, and TimescaleDB's hypertable where it is installed."""
    return [*p.layouts, *([HYPERTABLE] if p.timescale and timescale else [])]


def plan(p: Params, timescale: str | None = None) -> list[Planned]:
    """Insert blocks (every mode once per layout, ``none`` twice), then read blocks per layout (every node
    count once per query type, one node twice), each in a seeded random order (``pglab.runs.sweep``)."""
    out: list[Planned] = []
    lays = layouts(p, timescale)
    groups = [Group(lay, {"kind": "insert", "layout": lay}) for lay in lays]
    out += plan_blocks(p.modes, p.baseline, groups, p.blocks, p.seed, prefix="insert")
    if p.read_nodes:
        nodes = [f"n{n}" for n in sorted(p.read_nodes)]
        reads = [lay for lay in lays if p.read_layouts is None or lay in p.read_layouts]
        for i, lay in enumerate(reads):  # one layout's data at a time: its read blocks together
            qgroups = [Group(f"{lay}-{q}", {"kind": "read", "layout": lay, "query_type": q}) for q in p.query_types]
            out += plan_blocks(nodes, "n1", qgroups, p.read_blocks, p.seed + 1 + i, prefix="read")
    return out


def timescale_installed(host: Host, bindir: str) -> str | None:
    """TimescaleDB's default version when its extension files are on ``host`` (before any server starts)."""
    res = host.run([f"{bindir}/pg_config", "--sharedir"], check=False)
    if res.exit_code != 0:
        return None
    return control_version(host.run(["cat", f"{res.stdout.strip()}/extension/timescaledb.control"],
                                     check=False).stdout)


def control_version(control: str) -> str | None:
    """``default_version`` of an extension control file's text (None when empty: not installed)."""
    for line in control.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "default_version":
            return value.strip().strip("'\"") or None
    return None


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts; raises PreflightError (``pglab check``)."""
    examine(p, inventory)


def examine(p: Params, inventory: Inventory) -> dict[str, Any]:
    """``check``, and what was found of TimescaleDB on the nodes' hosts (the plan depends on it)."""
    problems, hosts = preflight.host_problems(inventory, p.hosts, (*preflight.SERVER_PROGRAMS, "pg_config"))
    found: dict[str, str | None] = {}
    try:
        client = hosts.get(p.client_host or p.primary_host)
        if client is not None and not client.exists(sys.executable):
            problems.append(f"client host {client.name}: no {sys.executable} (the TSBS loader runs there as "
                            "`python -m pglab.workloads.tsbs`; use a host that has pglab, such as local or a lab host)")
        for name in dict.fromkeys([p.primary_host, *(p.standby_host(i) for i in range(p.standby_count))]):
            if name in hosts:
                found[name] = timescale_installed(hosts[name], inventory.entry(name).bindir)
    finally:
        for h in hosts.values():
            h.close()
    max_conn = int(p.server_settings.get("max_connections", p.max_connections()))
    problems += preflight.connection_problems(max_conn, max(p.clients, p.read_clients) + p.standby_count + 3)
    preflight.require(problems)
    versions = set(found.values())
    version = versions.pop() if len(versions) == 1 else None
    why = ("installed on every node's host" if version else
           "not installed on " + ", ".join(h for h, v in found.items() if not v) if None in found.values() else
           f"different versions on the nodes' hosts: {found}")
    return {"available": bool(version), "version": version, "wanted": p.timescale, "per_host": found,
            "note": f"TimescaleDB {why}" + ("" if version else
                                            "; the chunked layout is measured with native partitions (layout "
                                            "partitioned), never labelled as TimescaleDB")}


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    with study_run(STUDY, Params, params, examine, lambda p, ts: Plan(plan(p, ts["version"]), p.baseline),
                   data_root=data_root, profile=profile, inventory=inventory, resume=resume) as run:
        p, ts = run.p, run.found
        run.store.manifest["timescaledb"] = ts
        st = deploy(run.s, p, run.store, ts["version"] if p.timescale else None)

        def measure(pl: Planned, point: Point, watch: Watch) -> str | None:
            return _measure(st, pl, point, watch)

        observed.run(run, measure, desc=STUDY, progress=progress)
    return run.store.dir


def _measure(st: State, pl: Planned, point: Point, watch: Watch) -> str | None:
    f = pl.group.factors
    if f["kind"] == "insert":
        return insert(st, pl, point, str(f["layout"]), watch)
    return read(st, pl, point, str(f["layout"]), str(f["query_type"]))
