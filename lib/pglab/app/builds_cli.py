"""``pglab builds``: the PostgreSQL builds of params/postgres_builds.yaml, listed, fetched, or pushed to a host.

``fetch --named-in params`` fetches what any profile of a study's params file names (``postgres:``): what
``make setup`` runs, so a profile's build is on the machine before its first run, and offline after that.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pglab.errors import ProcessError, UserError
from pglab.hosts import builds
from pglab.userfiles import yaml_mapping


def named_in(folder: str | Path) -> list[str]:
    """The builds the profiles of the study params files in ``folder`` name (``postgres``, ``subscriber_postgres``...),
    in file order, once each."""
    found: dict[str, None] = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        data = yaml_mapping(path, "a params file")
        profiles = data.get("profiles")
        if not isinstance(profiles, dict):
            continue  # the inventory, the builds' catalogue
        for body in profiles.values():  # `postgres:`, and a study's other nodes' (subscriber_postgres...)
            for key, value in (body.items() if isinstance(body, dict) else ()):
                if (key == "postgres" or str(key).endswith("_postgres")) and value is not None:
                    found[str(value)] = None
    return list(found)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--catalogue", help=f"the catalogue (default {builds.CATALOGUE})")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every build: id, family, version, present or not, bindir")
    f = sub.add_parser("fetch", help="fetch builds (idempotent; no network for those present)")
    f.add_argument("builds", nargs="*", help="ids or majors (15 is Debian's, 18 the embedded one), or all")
    f.add_argument("--named-in", metavar="FOLDER", help="also every build a profile in FOLDER/*.yaml names")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    p = sub.add_parser("push", help="copy registry builds to an SSH host of the inventory, where a run will need "
                                    "them (under its builds_dir; a lab host shares this machine's and needs none)")
    p.add_argument("host", help="the inventory host")
    p.add_argument("builds", nargs="+", help="ids or majors (13 to 18: the registry's builds)")
    p.add_argument("--inventory", default="params/hosts.yaml", help="the host inventory (default params/hosts.yaml)")
    p.add_argument("--quiet", action="store_true", help="no progress bar when a build is fetched here first")
    a = sub.add_parser("aa", help="the same minor of Debian's and the registry's build side by side, in blocks: does "
                                  "the build family matter on this machine? (pglab.app.build_aa)")
    a.add_argument("--major", type=int, default=15, help="the major both families have (default 15: 15.18)")
    a.add_argument("--host", default="local", help="the inventory host both servers run on (default local)")
    a.add_argument("--inventory", default="params/hosts.yaml", help="the host inventory")
    a.add_argument("--data-root", default="yours/data", help="where the run is archived: <data-root>/runs/build_aa/")
    a.add_argument("--clients", type=int, default=2, help="pgbench -c (default 2)")
    a.add_argument("--seconds", type=int, default=10, help="pgbench -T of each build in each block (default 10)")
    a.add_argument("--blocks", type=int, default=6, help="blocks, each running both builds (>= 6 for a 95%% interval)")
    a.add_argument("--scale", type=int, default=10, help="pgbench -i -s (default 10)")
    a.add_argument("--select-only", action="store_true", help="pgbench -S instead of the TPC-B-like script")
    a.add_argument("--margin", type=float, default=0.05, help="the stated margin: same within 1 +- margin (0.05)")
    a.add_argument("--seed", type=int, default=1, help="the builds' order in each block")


def run(a: argparse.Namespace) -> int:
    """Exit 0; 1 when a program failed; 2 on bad input or a build that cannot be had."""
    try:
        if a.command == "list":
            for b in builds.catalogue(a.catalogue).values():
                here = builds.present(b)
                version = b.version or (builds.server_version(b) if here else "-")
                print(f"{b.id:<12} {b.family:<9} {version:<8} {'present' if here else 'absent':<8} "
                      f"{builds.bindir(b)}")
            return 0
        if a.command == "aa":
            from pglab.app import build_aa
            from pglab.hosts.inventory import load_inventory

            if a.blocks < 2 or a.seconds < 1 or a.clients < 1 or a.scale < 1 or not 0 < a.margin < 1:
                raise UserError("aa: --blocks >= 2, --seconds, --clients and --scale >= 1, 0 < --margin < 1")
            r = build_aa.measure(load_inventory(a.inventory), a.data_root, major=a.major, host=a.host,
                                 clients=a.clients, seconds=a.seconds, blocks=a.blocks, scale=a.scale,
                                 select_only=a.select_only, margin=a.margin, seed=a.seed)
            print(build_aa.words(r))
            return 0
        if a.command == "push":
            return push(a)
        specs = list(builds.catalogue(a.catalogue)) if a.builds == ["all"] else list(a.builds)
        specs += named_in(a.named_in) if a.named_in else []
        for b in dict.fromkeys(builds.resolve(s, a.catalogue) for s in specs):  # all checked before a download
            was_here = builds.present(b)
            where = builds.fetch(b, progress=not a.quiet)
            if not (was_here and a.quiet):
                print(f"{b.id}: PostgreSQL {builds.server_version(b)} in {where}")
        return 0
    except (ProcessError, UserError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, ProcessError) else 2


def push(a: argparse.Namespace) -> int:
    """Each build named on the host: copied there unless it has it (checked by its marker, not by its path)."""
    from pglab.hosts import build_copy
    from pglab.hosts.inventory import load_inventory

    inventory = load_inventory(a.inventory)
    if a.host not in inventory.hosts:
        raise UserError(f"push: no host {a.host!r} in {a.inventory} (hosts: {', '.join(inventory.hosts)})")
    entry = inventory.entry(a.host)
    if entry.kind == "local":
        raise UserError(f"push: {a.host} is this machine: `pglab builds fetch` puts builds here")
    wanted = [builds.resolve(s, a.catalogue) for s in a.builds]  # all checked before a byte moves
    with inventory.connect(a.host) as host:
        for b in dict.fromkeys(wanted):
            where, copied = build_copy.push(host, entry, b, progress=not a.quiet)
            print(f"{a.host}: {b.id} {'copied to' if copied else 'already in'} {where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pglab builds", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
