"""The studies ``pglab slo`` searches, each as the search sees it: its configurations, the baseline, the servers a
run starts, and how a configuration is put in effect (the node and database its trials run against).

Why in the app layer: a target reuses the study's own set-up (``synchronous_commit.collect.set_level``,
``fdw_overhead.targets``), so a configuration here is the study's, made the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pglab.errors import ProcessError
from pglab.nodes import topology
from pglab.nodes.node import Node
from pglab.runs.session import Session
from pglab.runs.store import RunStore
from pglab.studies.synchronous_commit.collect import DB as SYNC_DB
from pglab.studies.synchronous_commit.collect import set_level
from pglab.workloads import pgbench

HOST = "local"


@dataclass(frozen=True)
class Target:
    """``setup(session, store, scale, clients)`` starts the servers and returns what ``apply(that, config)`` needs;
    ``apply`` puts the configuration in effect and returns the (node, database) its trials run against."""

    study: str
    configs: tuple[str, ...]  # the default, in the study's order
    allowed: tuple[str, ...]
    baseline: str
    select_only: bool
    setup: Callable[[Session, RunStore, int, int], Any]
    apply: Callable[[Any, str], tuple[Node, str]]
    extra: tuple[str, ...] = ()  # more pgbench options for every trial and peak


def _init(node: Node, store: RunStore, db: str, scale: int) -> None:
    point = store.point("init", unique=True, kind="init")
    res = pgbench.initialise(node, point, db, scale)
    point.finish("ok" if res.exit_code == 0 else "failed")
    if res.exit_code != 0:
        raise ProcessError(node.host.name, res.command, res.exit_code, res.stdout, res.stderr)


def _sync_setup(s: Session, store: RunStore, scale: int, clients: int) -> Node:
    """A primary and one synchronous standby (``FIRST 1``), as the study has them."""
    topo = topology.streaming(s.deploy, HOST, [("standby1", HOST)], method="FIRST", count=1,
                              settings={"max_connections": 4 * clients + 20})
    topo.primary.query(f"create database {SYNC_DB}")
    store.manifest["topology"] = {**topo.describe(), **s.deploy.where()}
    store.save()
    _init(topo.primary, store, SYNC_DB, scale)
    return topo.primary


def _sync_apply(primary: Node, level: str) -> tuple[Node, str]:
    set_level(primary, level, "standby1")  # in effect in a new session, the standby still sync: or it raises
    return primary, SYNC_DB


def _fdw_setup(s: Session, store: RunStore, scale: int, clients: int) -> Any:
    """The study's two instances, foreign servers and databases (REPEATABLE READ everywhere, as postgres_fdw's
    remote transactions run), from its quick profile with every target and this campaign's scale."""
    from pglab.studies.fdw_overhead.params import TARGETS as FDW_TARGETS
    from pglab.studies.fdw_overhead.params import Params
    from pglab.studies.fdw_overhead.targets import deploy, initialise

    p = Params(targets=list(FDW_TARGETS), rw_clients=[clients], ro_clients=[clients], scale=scale, source_host=HOST)
    t = deploy(s, p, store)
    initialise(t, store, p)
    return t


def _fdw_apply(t: Any, target: str) -> tuple[Node, str]:
    from pglab.studies.fdw_overhead.targets import DATABASES

    return t.node(target), DATABASES[target]


SYNC_LEVELS = ("on", "remote_write", "local", "off", "remote_apply")
FDW_CONFIGS = ("local", "FDW_local", "FDW_external")  # FDW_ext_ro refuses writes: no place in a TPC-B-like search
TARGETS = {
    "synchronous_commit": Target("synchronous_commit", ("on", "remote_write", "local", "off"), SYNC_LEVELS, "on",
                                 False, _sync_setup, _sync_apply),
    # TPC-B-like through each target; serialization failures under REPEATABLE READ retried as the study does
    "fdw_overhead": Target("fdw_overhead", FDW_CONFIGS, FDW_CONFIGS, "local", False, _fdw_setup, _fdw_apply,
                           ("--max-tries=10",)),
}
