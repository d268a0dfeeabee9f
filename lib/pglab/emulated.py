"""What a run may imitate of the article's machine: a disk's flush latency (presets named for what they imitate)
and a core per node. Pure data, in the base layer: the parameters (``pglab.runs.params``) and the analyses read
it without the host and node layers; ``pglab.nodes.emulation`` carries it out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: what each preset imitates: a hard disk with its write cache off flushes at most once a rotation (60 s / rpm)
PRESETS: dict[str, float] = {
    "own": 0.0,  # this machine's own disk: the real call alone
    "hdd_5400": 60e3 / 5400,  # 11.1 ms: a laptop disk
    "hdd_7200": 60e3 / 7200,  # 8.33 ms: a SATA desktop/server disk (the synchronous_commit article's)
    "hdd_10k": 60e3 / 10000,  # 6 ms: a SAS disk
    "hdd_15k": 60e3 / 15000,  # 4 ms: a fast SAS disk
}


def latency_ms(level: str | float) -> float:
    """A flush level in milliseconds: a preset's name or a number (0 = this machine's own disk)."""
    if isinstance(level, str):
        if level in PRESETS:
            return PRESETS[level]
        raise ValueError(f"flush latency {level!r}: not a preset ({', '.join(PRESETS)}) nor a number of ms")
    if not 0 <= float(level) <= 1000:
        raise ValueError(f"flush latency {level!r} ms: outside 0-1000 ms")
    return float(level)


def label(level: str | float) -> str:
    """How a level is said: 'own disk', 'hdd_7200 (8.33 ms)', '2 ms'."""
    ms = latency_ms(level)
    if ms == 0:
        return "own disk"
    return f"{level} ({ms:.3g} ms)" if isinstance(level, str) else f"{ms:g} ms"


@dataclass(frozen=True)
class Emulation:
    """What a run imitates (``emulate`` in a study's params): the flush levels (the first is set when a disk is
    made), the nodes they apply to (None: every node), whether a host's emulated nodes share one disk, and
    whether each node gets a core of its own."""

    flush: tuple[str | float, ...] = ()
    nodes: tuple[str, ...] | None = None
    one_disk: bool = False
    core_per_node: bool = False
    cpu_share: float | str | None = None  # a share of each node's CPU (0.1-1), or "calibrate": searched per run
    machine_per_node: bool = False  # each node a machine of its own: a CPU share of one core each, not pinned

    @property
    def per_node(self) -> bool:
        """Whether each node has a CPU group of its own (else its host's nodes share one)."""
        return self.core_per_node or self.machine_per_node

    @property
    def calibrated(self) -> bool:
        return self.cpu_share == "calibrate"

    def flushes(self, node_name: str) -> bool:
        """Whether ``node_name`` is one of ``nodes``: by its name, its name without a set-up's generation suffix
        (``pglogical_provider_2``), or its role, the name's last word (``provider``)."""
        if not self.flush:
            return False
        if self.nodes is None:
            return True
        base = re.sub(r"_[0-9]+$", "", node_name)
        return bool({node_name, base, base.rsplit("_", 1)[-1]} & set(self.nodes))

    def words(self) -> str:
        """The property as a verdict states it."""
        parts = []
        if self.flush:
            where = "every node" if self.nodes is None else ", ".join(self.nodes)
            parts.append(f"emulated flush {' / '.join(label(x) for x in self.flush)} on {where}"
                         + (" (one disk per host)" if self.one_disk else ""))
        if self.core_per_node:
            parts.append("1 core per node (its clients share it), on one machine")
        if self.machine_per_node:
            parts.append("a machine per node, scaled down: each node a CPU share of one core of its own (a cgroup "
                         "quota), on one machine")
        if self.calibrated:
            parts.append("CPU " + ("per node" if self.per_node else "per host")
                         + " slowed (a cgroup quota) to match the article's own figure, calibrated before the run")
        elif self.cpu_share is not None:
            parts.append(f"CPU {'per node' if self.per_node else 'per host'} at {float(self.cpu_share):.0%} "
                         "(a cgroup quota)")
        return "; ".join(parts)
