"""The machine properties verdicts depend on, measured for the run and set beside the article's.

Why: on a 2-core VM with a fast virtual disk, "off is an order of magnitude faster than on" does not
hold because the disk flushes 4,000 times a second where the article's SATA disk flushed about 120
times; that is a difference of hardware, not a refutation. Each study's analysis passes the property a
claim depends on to its row (``claims.Machine``), and the row of comparison.csv shows the property here
and in the article, and what would answer the claim where this machine cannot.
"""

from __future__ import annotations

from typing import Any

from pglab.analysis import placement
from pglab.analysis.claims import Machine

#: a 7,200 rpm disk's write cache off: one flush per rotation at most (60 s / 7,200 = 8.3 ms)
SATA_FLUSHES_S = 120


def cores_here(manifest: dict[str, Any]) -> tuple[int, str]:
    """(machines, "1 machine of 2 cores") of a run."""
    hosts = manifest.get("hosts", {})
    cores = sorted({int(f["cores"]) for f in hosts.values() if isinstance(f, dict) and f.get("cores")})
    n = len(placement.machines(manifest)) or 1
    where = "1 machine" if n == 1 else f"{n} machines"
    return n, where + (f" of {'/'.join(map(str, cores))} cores" if cores else "")


def disk_flush(fsync: dict[str, Any] | None) -> Machine:
    """The flush rate of the primary's WAL disk (pg_test_fsync's fdatasync) against the article's SATA disk."""
    ops = (fsync or {}).get("fdatasync_ops_s")
    here = f"{ops:,.0f} fdatasync/s (pg_test_fsync)" if ops else "not measured (fsync_test_seconds = 0)"
    return Machine("disk flush rate (commit cost)", here,
                   f"a SATA hard disk: at most about {SATA_FLUSHES_S} flushes/s (7,200 rpm; not measured there)",
                   "a primary whose WAL is on a hard disk (a few hundred flushes a second at most), where a "
                   "commit's flush dominates its cost",
                   differs=bool(ops and ops > 10 * SATA_FLUSHES_S))


def shared_cpu(manifest: dict[str, Any], article: str, who: str = "every node and client") -> Machine:
    """Cores shared by the nodes: what a claim of throughput under load, or of a ranking, depends on."""
    n, words = cores_here(manifest)
    return Machine("cores per node", words + (f", shared by {who}" if n == 1 else ""), article,
                   "nodes and clients on machines of their own, as the article had", differs=n == 1)


def separate_machines(manifest: dict[str, Any], hosts: list[str], article: str, answer: str) -> Machine:
    """Whether ``hosts`` ran on machines of their own: what scale-out and isolation claims need."""
    machines = {placement.machine(manifest, h) for h in hosts if h}
    words = f"{len(hosts)} nodes on {len(machines)} machine{'s' if len(machines) != 1 else ''}"
    return Machine("separate machines", words, article, answer, differs=len(machines) < len(set(hosts)))


def network(round_trip_ms: float | None, article: str) -> Machine:
    """The round trip between the instances (postgres_fdw pays it once per remote statement)."""
    here = f"{round_trip_ms:.3g} ms round trip" if round_trip_ms is not None else "not measured"
    return Machine("network round trip", here, article,
                   "the foreign server on another machine (`external_host`), to see the round trip's cost")


def instances(where: str, apart: bool) -> Machine:
    """Where postgres_fdw's two instances ran: the article had both on one machine (no network between them)."""
    return Machine("where the two instances run", where, "both instances on one machine (ports 5434 and 5435)",
                   "FDW_external on another machine (`external_host`)", differs=apart)


def services(have: str, missing: bool) -> Machine:
    """The database services a ranking compares: the article's are managed services in the cloud."""
    return Machine("the services compared", have or "no target", "Aurora, RDS and Cloud SQL (AWS and Google Cloud)",
                   "targets of those providers in the params file (docs/cloud_providers.md: pointing it at a "
                   "managed service)", differs=missing)
