"""``pglab builds aa``: does the build family matter on this machine? The same minor of two builds side by side.

A registry build (gcc 7.5, ICU 60, OpenSSL 1.1 of Ubuntu 18.04) is not Debian's: before a verdict made on one is
set beside a verdict made on the other, the same PostgreSQL minor of both families (15.18) is measured in
blocks, each block running both in a seeded random order, one at a time, with the same settings, data and
client. The verdict is over the blocks' ratios (registry / Debian) and a stated margin: ``same`` when the
interval of their median (95% from 6 blocks; its real coverage is stated) lies within 1 +- margin, ``differs``
when it lies wholly outside, else ``open``.
A run is raw first like a study's (``<data-root>/runs/build_aa/<run-id>/``: every pgbench's output), its result
in the manifest (``aa``) and in ``aa.json``; ``differs`` means runs of the two families must not be compared
on this machine (docs/majors.md).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pglab.analysis import effects, stats
from pglab.analysis.build_family import verdict, words  # noqa: F401  (words: the CLI's)
from pglab.errors import ParameterError, ProcessError
from pglab.hosts import builds
from pglab.hosts.inventory import Inventory
from pglab.parsers.pgbench import parse_summary
from pglab.runs.session import session
from pglab.runs.store import RunStore, write_json
from pglab.workloads import pgbench

STUDY = "build_aa"
DB = "bench"


def pair(major: int) -> tuple[builds.Build, builds.Build]:
    """(Debian's, the registry's) build of ``major``: the catalogue has both for 15 only."""
    known = builds.catalogue()
    ids = (f"debian-{major}", f"embedded-{major}")
    missing = [i for i in ids if i not in known]
    if missing:
        both = sorted({b.major for b in known.values() if {f"debian-{b.major}", f"embedded-{b.major}"} <= set(known)})
        raise ParameterError("pglab builds aa", [f"--major {major}: no {', '.join(missing)} in the catalogue; both "
                                                 f"families exist for {', '.join(map(str, both))}"])
    return known[ids[0]], known[ids[1]]


def measure(inventory: Inventory, data_root: str | Path, *, major: int = 15, host: str = "local", clients: int = 2,
            seconds: int = 10, blocks: int = 6, scale: int = 10, select_only: bool = False, margin: float = 0.05,
            seed: int = 1, progress: bool = True) -> dict[str, Any]:
    """The A/A: its result (also in the run's manifest and ``aa.json``)."""
    debian, embedded = pair(major)
    for b in (debian, embedded):
        builds.fetch(b, progress=progress)
    params = {"major": major, "host": host, "clients": clients, "seconds": seconds, "blocks": blocks, "scale": scale,
              "select_only": select_only, "margin": margin, "seed": seed}
    store = RunStore(Path(data_root) / "runs" / STUDY, STUDY, "aa", params)
    rng = random.Random(seed)
    tps: dict[tuple[int, str], float] = {}
    with session(inventory, store) as s:
        s.deploy.open([host])
        nodes = {b.family: s.deploy.node(b.family, host, {"max_connections": clients + 10}, build=b)
                 for b in (debian, embedded)}
        for family, node in nodes.items():
            node.start()
            node.query(f"create database {DB}")
            point = store.point(f"init-{family}", unique=True, kind="setup", family=family)
            _checked(pgbench.initialise(node, point, DB, scale), point)
        store.manifest["tools"] = {f"postgres ({f})": n.host.run([n.bin("postgres"), "--version"]).stdout.strip()
                                   for f, n in nodes.items()}
        store.manifest["tools"]["pgbench"] = debian_pgbench = nodes["debian"].host.run(
            [nodes["debian"].bin("pgbench"), "--version"]).stdout.strip()
        store.save()
        for block in range(1, blocks + 1):
            for family in rng.sample(sorted(nodes), 2):
                node = nodes[family]
                point = store.point(f"b{block:02d}-{family}", kind="aa", block=block, family=family,
                                    build=(debian if family == "debian" else embedded).id)
                argv = pgbench.pgbench_argv(node, DB, clients=clients, duration_s=seconds, select_only=select_only,
                                            no_vacuum=True)
                res = _checked(pgbench.run(node, point, argv, timeout=seconds + 120), point)
                tps[(block, family)] = point.meta["tps"] = float(parse_summary(res.stdout, res.stderr)["tps"])
                point.finish("ok")
                if progress:
                    print(f"block {block}/{blocks}: {family} {tps[(block, family)]:,.0f} tps", flush=True)
    ratios = [tps[(b, "embedded")] / tps[(b, "debian")] for b in range(1, blocks + 1)]
    median, low, high, method = effects.interval(ratios)
    result = {"major": major, "builds": [debian.id, embedded.id], "pgbench": debian_pgbench,
              "workload": "select-only" if select_only else "tpcb-like", "clients": clients, "seconds": seconds,
              "blocks": blocks, "ratios": [round(r, 4) for r in ratios], "ratio": round(median, 4),
              "low": round(low, 4), "high": round(high, 4), "ci_method": method,
              "coverage": round(stats.coverage(method, len(ratios)), 4), "margin": margin,
              "verdict": verdict(low, high, margin), "run": store.dir.name}
    write_json(store.dir / "aa.json", result)
    store.finish("complete", aa=result)
    return result


def _checked(res: Any, point: Any) -> Any:
    if res.exit_code != 0:
        point.finish("failed", f"pgbench exited {res.exit_code}")
        raise ProcessError(res.host, res.command, res.exit_code, res.stdout, res.stderr)
    return res
