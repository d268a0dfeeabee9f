"""CPU time shares of a host between two moments, from /proc/stat (pyperf-style environment capture).

On a virtual machine the hypervisor can take a large share of the CPU ("steal"): 30-40% was seen on
the 2-core machine this project was built on, with run-to-run tps swinging by 2x. Every measured
point records the shares during its run, so that a reader can tell a slow system from a slow moment.
"""

from __future__ import annotations

from pglab.hosts import Host

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def sample(host: Host) -> dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat (clock ticks since boot); {} where there is none."""
    for line in host.read_text("/proc/stat").splitlines():
        if line.startswith("cpu "):
            return dict(zip(FIELDS, (int(x) for x in line.split()[1:len(FIELDS) + 1]), strict=False))
    return {}


def shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Share of each field in the ticks between two samples (empty when either is missing)."""
    if not before or not after:
        return {}
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in FIELDS}
    total = sum(delta.values())
    return {k: round(v / total, 4) for k, v in delta.items()} if total > 0 else {}
