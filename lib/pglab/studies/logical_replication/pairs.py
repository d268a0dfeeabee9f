"""Every system's provider/subscriber pair: set up once before the first block, kept across blocks, rebuilt
after a point broke it, compared whole when the sweep ends.

Why kept: setting up Londiste or Slony takes 10-20 s (the initial copy, the subscribe); set up per point it
would be most of the run. Only the measured system has a workload; the others' daemons idle (the manifest's
plan says so).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

import psycopg

from pglab.errors import ProcessError
from pglab.nodes import topology
from pglab.nodes.node import Node
from pglab.replication.base import System, add_history_key
from pglab.replication.builtin import BuiltinLogical
from pglab.replication.londiste import Londiste
from pglab.replication.pglogical import Pglogical
from pglab.replication.slony import Slony
from pglab.replication.streaming import Streaming
from pglab.runs import preflight
from pglab.runs.session import Session
from pglab.runs.store import RunStore
from pglab.studies.logical_replication.params import Params
from pglab.workloads import pgbench

DB = "bench"
CLASSES: dict[str, type[System]] = {"streaming": Streaming, "builtin": BuiltinLogical, "pglogical": Pglogical,
                                    "slony": Slony, "londiste": Londiste}
# Errors that end one point or one system's setup, not the study (KeyboardInterrupt always ends it).
POINT_ERRORS = (ProcessError, psycopg.Error)
# slowest set-up first, so that the last pair to start is a short one
SETUP_ORDER = ("londiste", "slony", "pglogical", "builtin", "streaming")
SETUP_WORKERS = 3  # pairs set up at once: 27 s for five on 2 cores, 65 s one after the other

class Pairs:
    """Every system's pair, set up once and kept across blocks; rebuilt after a point broke it."""

    def __init__(self, s: Session, store: RunStore, p: Params, clock: dict[str, float]):
        self.s, self.store, self.p, self.clock = s, store, p, clock
        self.pairs: dict[str, Pair | None] = {}
        self.evidence_lock = threading.Lock()  # two pairs whose set-up failed at once keep their evidence in turn

    def get(self, name: str) -> Pair | None:
        """The system's pair, set up if it has none; None once its setup failed (the reason is recorded)."""
        info = self.store.manifest["systems"].setdefault(
            name, {"status": "measured", "options": self.p.options(name), "generations": 0})
        if info.get("status") == "setup failed":
            return None
        if self.pairs.get(name) is None:
            info["generations"] += 1
            pair = Pair(self.s, self.store, self.p, name, info["generations"], self.evidence_lock)
            try:
                pair.setup()
            except POINT_ERRORS as exc:
                pair.close(keep_data=True)
                info.update(status="setup failed", reason=describe(exc))
                self.store.save()
                return None
            self.pairs[name] = pair
            self.store.save()
        return self.pairs[name]

    def setup_all(self, names: list[str]) -> None:
        """Every system's pair, ``SETUP_WORKERS`` at a time, the slowest first (Londiste's initial copy, Slony's
        subscribe). A failed set-up is recorded in the manifest and leaves the others going."""
        t0 = time.monotonic()
        order = sorted(names, key=lambda n: SETUP_ORDER.index(n) if n in SETUP_ORDER else len(SETUP_ORDER))
        with ThreadPoolExecutor(max(1, min(SETUP_WORKERS, len(order))), thread_name_prefix="setup") as pool:
            for future in [pool.submit(self.get, name) for name in order]:
                future.result()
        self.clock["setup_s"] += time.monotonic() - t0

    def broken(self, name: str) -> None:
        """The last point left the pair untrustworthy: close it (data kept as evidence); the next point rebuilds."""
        pair = self.pairs.pop(name, None)
        if pair is not None:
            pair.close(keep_data=True)

    def close_all(self, check: bool = False) -> None:
        """Every pair, all at once; with ``check`` (the sweep ended) after the whole tables are compared
        once more: each point compared only the rows it touched."""
        pairs = {name: pair for name, pair in self.pairs.items() if pair is not None}
        self.pairs.clear()
        if pairs:
            with ThreadPoolExecutor(len(pairs), thread_name_prefix="close") as pool:
                for future in [pool.submit(self._close, name, pair, check) for name, pair in pairs.items()]:
                    future.result()
        self.store.save()

    def _close(self, name: str, pair: Pair, check: bool) -> None:
        t0 = time.monotonic()
        try:
            if check:
                self.store.manifest["systems"][name]["closing_check"] = pair.closing_check()
        finally:
            pair.close(keep_data=False)
            self.store.manifest["systems"][name]["close_s"] = round(time.monotonic() - t0, 2)


class Pair:
    """One system's provider and subscriber, set up once and reused until a point breaks them."""

    def __init__(self, s: Session, store: RunStore, p: Params, name: str, generation: int, evidence: threading.Lock):
        self.s, self.store, self.p, self.name, self.generation = s, store, p, name, generation
        self.evidence_lock = evidence
        self.system: System | None = None
        self.nodes: list[Node] = []
        self.cores = int(store.manifest["hosts"].get(p.client_host or p.provider_host, {}).get("cores", 2))

    def setup(self) -> dict[str, Any]:
        """Fresh nodes, pgbench -i on the provider, the history key, then the system's prepare and start."""
        p, s = self.p, self.s
        suffix = "" if self.generation == 1 else f"_{self.generation}"
        settings = {"max_connections": p.max_connections(), **p.server_settings}
        provider, subscriber = topology.logical_pair(s.deploy, (f"{self.name}_provider{suffix}", p.provider_host),
                                                     (f"{self.name}_subscriber{suffix}", p.subscriber_host), settings,
                                                     preflight.builds_named(p).get("subscriber_postgres"))
        self.nodes = [provider, subscriber]
        for node in self.nodes:
            node.query(f"create database {DB}")
        point = self.store.point(f"setup-{self.name}{suffix}", unique=True, kind="setup", system=self.name,
                                 generation=self.generation)
        t0 = time.monotonic()
        try:
            res = pgbench.initialise(provider, point, DB, p.scale)
            if res.exit_code != 0:
                raise ProcessError(provider.host.name, res.command, res.exit_code, res.stdout, res.stderr)
            add_history_key(provider, DB)
            self.system = CLASSES[self.name](provider, subscriber, dbname=DB, options=self.p.options(self.name),
                                             on_process=s.track_background)
            self.system.prepare()
            self.system.start()
            for node in self.nodes:  # streaming turned the subscriber into a standby: the manifest must say so
                self.store.update_node(node.describe())
            check = self.system.verify()
            point.write_json("consistency.json", asdict(check))
            if not check.consistent:
                raise ProcessError(provider.host.name, f"{self.name}: initial copy", None, "",
                                   f"tables differ after the initial copy: {', '.join(check.mismatched)}")
        except BaseException as exc:
            point.meta["setup_s"] = round(time.monotonic() - t0, 3)
            point.finish("failed", describe(exc))
            raise
        point.meta.update(setup_s=round(time.monotonic() - t0, 3), daemons=self.system.daemons())
        point.write_json("settings.json", self.settings())
        point.finish("ok")
        return point.meta

    def closing_check(self) -> dict[str, Any]:
        """The whole tables compared after the pair's last point, caught up first (``consistent`` False
        makes the analysis call every point of the pair into question)."""
        assert self.system is not None
        t0 = time.monotonic()
        try:
            self.system.wait_caught_up(self.p.catchup_timeout_s, poll_s=self.p.catchup_poll_s)
            check = self.system.verify()
        except POINT_ERRORS as exc:
            return {"consistent": None, "error": describe(exc)}
        return {"consistent": check.consistent, "mismatched": check.mismatched,
                "seconds": round(time.monotonic() - t0, 2)}

    @property
    def provider(self) -> Node:
        return self.nodes[0]

    @property
    def subscriber(self) -> Node:
        return self.nodes[1]

    def settings(self) -> dict[str, Any]:
        return {"provider": self.provider.snapshot_settings(DB), "subscriber": self.subscriber.snapshot_settings(DB)}

    def clear(self) -> None:
        """Right after a point (its touched rows checked): empty history, vacuumed small tables. Not waited
        for: the system replicates this one truncate while other systems' points run, and ``reset`` waits
        for it before this pair's next point (measured: Londiste's ticker made that wait 1-4 s a point)."""
        self.provider.query("truncate pgbench_history", dbname=DB)
        self.provider.query("vacuum pgbench_branches, pgbench_tellers", dbname=DB)

    def reset(self) -> float:
        """Same starting point for every run: a checkpoint, and the ``clear`` of its last point applied.

        What ``pgbench`` itself does before a run without -n, but done here so that its replication is
        not part of the measured window. Returns the seconds the subscriber still took to catch up.
        """
        self.provider.query("checkpoint", dbname=DB)
        assert self.system is not None
        return self.system.wait_caught_up(self.p.catchup_timeout_s, poll_s=self.p.catchup_poll_s)

    def close(self, keep_data: bool) -> None:
        """Stop the system's daemons and both nodes; their data dirs go unless kept as evidence.

        Only the most recent broken pair keeps its data dirs (at paper scale one pair is ~150 GB);
        every pair's server logs and every point's raw files are kept regardless.
        """
        try:
            if self.system is not None:
                daemons = list(self.system.processes)
                self.system.teardown()  # stops them; the Session keeps them listed until it has
                for proc in daemons:
                    self.s.untrack_background(proc)
        finally:
            for node in reversed(self.nodes):
                node.stop()
            if keep_data:
                with self.evidence_lock:  # two pairs whose set-up failed at once
                    self._keep_evidence()
            else:
                for node in self.nodes:
                    node.host.remove_tree(node.data_dir)
            self.store.save()

    def _keep_evidence(self) -> None:
        """This pair's data dirs kept; the previous broken pair's make room for them."""
        evidence = self.store.manifest.setdefault("evidence", {"kept_data_dirs": [], "removed_data_dirs": []})
        for old in evidence["kept_data_dirs"]:
            self.s.host(old["host"]).remove_tree(old["data_dir"])
            evidence["removed_data_dirs"].append(old)
        evidence["kept_data_dirs"] = [{"host": n.host.name, "data_dir": n.data_dir} for n in self.nodes]


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
