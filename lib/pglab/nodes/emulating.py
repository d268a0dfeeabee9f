"""The article's machine imitated by a deployment: each node's emulated disk, core and CPU share
(``pglab.nodes.emulation``, ``pglab.nodes.cpu_quota``), set when a node is made, changed between points, and
recorded for the run's manifest. A mixin of ``pglab.nodes.topology.Deployment``, kept apart for its size."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pglab.errors import UserError
from pglab.nodes import cpu_quota
from pglab.nodes import emulation as emu
from pglab.nodes.node import Node


class Emulating:
    """The emulated parts of a run's nodes; ``Deployment`` sets these attributes in its ``__init__``."""

    emulation: emu.Emulation | None
    disks: dict[str, emu.Disk]
    cores_given: dict[str, list[str]]
    cpu_groups: dict[str, cpu_quota.CpuGroup]
    calibration: dict[str, Any]
    nodes: list[Node]
    _lock: threading.RLock

    def _emulate(self, node: Node) -> Node:
        """Give ``node`` its emulated disk and its core, as the run's ``emulation`` says (before it starts)."""
        e = self.emulation
        if e is None:
            return node
        with self._lock:
            if e.flushes(node.name):
                key = node.host.name if e.one_disk else node.name
                if key not in self.disks:
                    disk = emu.Disk(node.host, f"{node.ws.base}/flush-{key}.ctl", node.user)
                    disk.set(e.flush[0])
                    disk.measure(e.flush, f"{node.ws.base}/flush-{key}")
                    self.disks[key] = disk
                node.flush = self.disks[key]
            if e.core_per_node:
                self._core_left(node)
                given = self.cores_given.setdefault(node.host.name, [])
                node.cpus = str(len(given))
                given.append(node.name)
            if e.cpu_share is not None:
                key = node.name if e.per_node else node.host.name
                if key not in self.cpu_groups:
                    cores = 1 if e.per_node else emu.host_cores(node.host)
                    share = 1.0 if e.calibrated else float(e.cpu_share)
                    name = f"{cpu_quota.run_prefix(node.ws.base)}{key}"
                    self.cpu_groups[key] = cpu_quota.CpuGroup(node.host, name, node.user, cores, share).create()
                node.cpu_group = self.cpu_groups[key]
        return node

    def set_share(self, share: float) -> None:
        """Every emulated CPU at ``share`` from now on (the running servers' processes stay in their groups)."""
        for group in self.cpu_groups.values():
            group.set(share)

    def slow_motion(self, k: float) -> None:
        """Every emulated disk's latency times ``k`` (the article's machine run ``k`` times slower), each level
        measured again at its new latency; ``k`` = 1 undoes it."""
        for disk in self.disks.values():
            disk.scale = k
            disk.set(disk.level)
        self._remeasure()

    def calibrated_flush(self, ms: float) -> None:
        """Every emulated disk at ``ms`` (a calibration found it), recorded as the run's one flush level."""
        if self.emulation is not None:
            self.emulation = dataclasses.replace(self.emulation, flush=(round(ms, 3),))
        self.set_flush(round(ms, 3))
        for disk in self.disks.values():
            disk.measured.clear()
        self._remeasure()

    def _remeasure(self) -> None:
        """Each disk's emulated levels measured again (``Disk.measure``), as they are now."""
        levels = [lv for lv in self.emulation.flush if emu.latency_ms(lv)] if self.emulation else []
        for disk in self.disks.values():
            disk.measure(levels, disk.ctl.removesuffix(".ctl"))

    def release_cpu(self) -> list[str]:
        """Remove the CPU groups once the servers are down; the names of those something still runs in."""
        return [g.name for g in self.cpu_groups.values() if not g.remove()]

    def _core_left(self, node: Node) -> None:
        """With a core per node, refuse a node its host has no core left for."""
        if not (self.emulation and self.emulation.core_per_node):
            return
        given = self.cores_given.get(node.host.name, [])
        cores = emu.host_cores(node.host)
        if len(given) >= cores:
            raise UserError(f"core_per_node: host {node.host.name} has {cores} cores, all given to nodes "
                            f"({', '.join(given)}); {node.name} would share one. Give it another host, or set "
                            "core_per_node: false")

    def set_flush(self, level: str | float) -> None:
        """Every emulated disk's flushes wait ``level`` from now on (no restart: the library reads it per flush)."""
        for disk in self.disks.values():
            if disk.level != level:
                disk.set(level)

    @contextmanager
    def flushing(self, level: str | float) -> Iterator[None]:
        """Every emulated disk at ``level`` inside, then back at what each waited before.

        Why: a study's set-up (``pgbench -i``, row checks, counting round trips) measures nothing, and under a
        4 ms flush its commits alone cost a run of fdw_overhead 10 s; ``flushing(0)`` runs it at the disk's own
        speed."""
        before = {k: d.level for k, d in self.disks.items()}
        self.set_flush(level)
        try:
            yield
        finally:
            for k, d in self.disks.items():
                if d.level != before[k]:
                    d.set(before[k])

    def emulated(self) -> dict[str, Any]:
        """For the manifest: what was imitated, and each disk's levels as measured (``emulation.fidelity``)."""
        e = self.emulation
        if e is None:
            return {}
        return {"said": e.words(), "flush_levels": [emu.label(x) for x in e.flush], "one_disk": e.one_disk,
                "core_per_node": e.core_per_node, "machine_per_node": e.machine_per_node,
                "disks": {k: {"host": d.host.name, "nodes": [n.name for n in self.nodes if n.flush is d],
                              "levels": d.measured, "measured": emu.said(d.measured)} for k, d in self.disks.items()},
                "cores": {n.name: {"host": n.host.name, "cpus": n.cpus, "cpus_allowed": n.cpus_allowed}
                          for n in self.nodes if n.cpus},
                **({"cpu_share": e.cpu_share, "cpu": {k: {"host": g.host.name, **g.record()}
                                                      for k, g in self.cpu_groups.items()}}
                   if self.cpu_groups else {}),
                **({"calibration": self.calibration} if self.calibration else {})}
