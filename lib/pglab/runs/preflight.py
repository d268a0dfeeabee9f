"""Fail before starting (DESIGN.md principle 7): one message listing every problem."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterable
from typing import Any

from pglab import server_settings
from pglab.errors import ParameterError, PglabError, PreflightError, UserError
from pglab.hosts import build_copy, builds
from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory
from pglab.hosts.local import LocalHost

SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres", "pg_basebackup", "pgbench")
SOCKET_PATH_MAX = 107  # bytes of a Unix socket path (sun_path, less its NUL)


def host_problems(inventory: Inventory, host_names: Iterable[str],
                  programs: Iterable[str] = SERVER_PROGRAMS) -> tuple[list[str], dict[str, Host]]:
    """Problems with the named hosts (unknown, unreachable, key rejected, binaries missing)."""
    problems: list[str] = []
    hosts: dict[str, Host] = {}
    for name in dict.fromkeys(host_names):
        if name not in inventory.hosts:
            problems.append(f"host {name!r} is not in the inventory (known: {', '.join(sorted(inventory.hosts))})")
            continue
        try:
            host = inventory.connect(name)
        except PglabError as exc:
            problems.append(str(exc))
            continue
        except Exception as exc:  # network errors, auth failures
            problems.append(f"host {name}: cannot connect: {type(exc).__name__}: {exc}")
            continue
        hosts[name] = host
        bindir = inventory.entry(name).bindir
        programs = tuple(programs)
        res = host.run(["sh", "-c", " ; ".join(f"test -x {shlex.quote(f'{bindir}/{p}')} || echo {shlex.quote(p)}"
                                               for p in programs)], check=False)
        missing = res.stdout.split()
        if missing:
            problems.append(f"host {name}: missing {', '.join(missing)} in {bindir} "
                            "(install postgresql-15, or set bindir in params/hosts.yaml)")
        if host.login_user == "root" and host.run(["id", "-u", host.server_user], check=False).exit_code:
            problems.append(f"host {name}: server user {host.server_user!r} does not exist "
                            "(PostgreSQL refuses to run as root; create it or set server_user)")
        else:
            problems += workdir_problems(name, host, inventory.entry(name).workdir)
        problems += port_problems(name, host, inventory.entry(name).port_range)
    return problems, hosts


def workdir_problems(name: str, host: Host, workdir: str) -> list[str]:
    """What ``Workspace.create`` would trip on, found before a run folder exists: a socket path too long,
    a workdir that is missing, not writable, or that the server user cannot enter."""
    template = f"{workdir.rstrip('/')}/pglab-XXXXXX/s/.s.PGSQL.65535"
    if len(template) > SOCKET_PATH_MAX:
        return [f"host {name}: workdir {workdir!r} is too long for a Unix socket path ({len(template)} of at most "
                f"{SOCKET_PATH_MAX} bytes for {template}); choose a shorter workdir in the inventory"]
    if host.run(["test", "-d", workdir], check=False).exit_code:
        return [f"host {name}: workdir {workdir!r} does not exist (create it, or set workdir in the inventory)"]
    if host.run(["test", "-w", workdir], check=False).exit_code:
        return [f"host {name}: workdir {workdir!r} is not writable by {host.login_user}"]
    if host.server_user != host.login_user and host.run(["test", "-x", workdir], as_user=host.server_user,
                                                        check=False).exit_code:
        return [f"host {name}: the server user {host.server_user!r} cannot enter workdir {workdir!r} (or a "
                "folder above it): PostgreSQL's data directories go there; choose another workdir"]
    return []


def port_problems(name: str, host: Host, port_range: tuple[int, int]) -> list[str]:
    """A port range in which every port is taken fails here, not after the run folder was made."""
    try:
        host.free_port(*port_range)
    except UserError as exc:
        return [str(exc)]
    return []


def connection_problems(max_connections: int, clients: int, reserved: int = 3, in_use: int = 0) -> list[str]:
    """The article lost runs to 'sorry, too many clients already': check before the load starts."""
    free = max_connections - reserved - in_use
    if clients > free:
        return [f"clients={clients} exceeds the free connections: max_connections {max_connections} - "
                f"superuser_reserved_connections {reserved} - in use {in_use} = {free}"]
    return []


def require(problems: list[str]) -> None:
    if problems:
        raise PreflightError(problems)


def local_tools() -> dict[str, Any]:
    """Client tools on this machine (``pglab check``)."""
    return {t: shutil.which(t) for t in ("psql", "pgbench", "sysbench", "ssh", "runuser")}


def build_problems(build: builds.Build, inventory: Inventory, host_names: Iterable[str]) -> list[str]:
    """``build`` fetched here (once per machine: offline after that) and present on every host of the run.

    pglab fetches builds on this machine only: a lab host shares its filesystem, another SSH host gets the build
    by ``pglab builds push HOST BUILD`` (pglab.hosts.build_copy)."""
    try:
        builds.fetch(build)
    except PglabError as exc:
        return [f"PostgreSQL build {build.id}: {exc}"]
    problems = []
    for name in dict.fromkeys(host_names):
        if name not in inventory.hosts or inventory.entry(name).kind == "local":
            continue  # an unknown host is host_problems' to report
        entry = inventory.entry(name)
        with inventory.connect(name) as host:
            if not build_copy.present_on(host, build, entry):
                where = build_copy.bindir_on(build, entry)
                problems.append(f"host {name}: PostgreSQL build {build.id} is not at {where} there (pglab fetches "
                                f"builds on this machine only): `pglab builds push {name} {build.id}` copies it")
    return problems


def build_record(build: builds.Build) -> dict[str, Any]:
    """The manifest's ``postgres_build``: what runs of different builds are told apart by (never pooled)."""
    return {"id": build.id, "family": build.family, "major": build.major,
            "version": builds.server_version(build)}


def builds_named(p: Any, source: str = "parameters") -> dict[str, builds.Build]:
    """{field: build} for each field of ``p.BUILDS`` that names one (``postgres``, a study's others), each set to
    its build's id (what the manifest records); a build the catalogue lacks is a ParameterError naming the field.
    Here, not in the parameter model: the analysis reads the model and must not import the host layer."""
    named, problems = {}, []
    for field in getattr(p, "BUILDS", ()):
        spec = getattr(p, field, None)
        if spec is None:
            continue
        try:
            named[field] = builds.resolve(str(spec))
        except ParameterError as exc:
            problems += [f"{field}: {x}" for x in exc.problems]
            continue
        setattr(p, field, named[field].id)
    if problems:
        raise ParameterError(source, problems)
    return named


_KNOWN: dict[tuple[str, str], set[str]] = {}  # (host, bindir) -> its postgres's setting names: one call a process


def known_settings(host: Host, bindir: str) -> set[str]:
    """The settings ``<bindir>/postgres`` knows (``--describe-config``, cached per host and build); empty when it
    cannot say (a missing binary is ``host_problems``' to report)."""
    key = (host.name, bindir)
    if key not in _KNOWN:
        res = host.run([f"{bindir}/postgres", "--describe-config"], check=False, timeout=30)
        names = server_settings.parse_describe_config(res.stdout) if res.exit_code == 0 else set()
        if not names:
            return names
        _KNOWN[key] = names
    return _KNOWN[key]


def setting_name_problems(p: Any, inventory: Inventory, named: dict[str, builds.Build] | None = None) -> list[str]:
    """Server settings a profile gives that the servers' build does not know: refused here, where the server would
    refuse to start after the run folder was made. The build is ``named``'s (fetched here) or, without one, each
    server host's own bindir."""
    given = p.given_settings() if hasattr(p, "given_settings") else {}
    if not any(given.values()):
        return []
    sources: list[tuple[str, Host, str, bool]] = []  # (what, host, bindir, close it)
    for b in dict.fromkeys((named or {}).values()):
        if builds.present(b):
            sources.append((f"PostgreSQL build {b.id}", LocalHost(), builds.bindir(b), False))
    if not named:
        for name in dict.fromkeys(p.hosts):
            if name in inventory.hosts:
                try:
                    sources.append((f"host {name}'s PostgreSQL", inventory.connect(name), inventory.entry(name).bindir,
                                    True))
                except PglabError:
                    continue  # unreachable: host_problems says so
    problems: list[str] = []
    try:
        for what, host, bindir, _ in sources:
            known = known_settings(host, bindir)
            if not known:
                continue
            for where, settings in given.items():
                problems += [f"{where}.{n}: not a setting of {what} ({bindir}/postgres --describe-config lists "
                             f"{len(known)}; the server would refuse to start)"
                             for n in server_settings.unknown(list(settings), known)]
    finally:
        for _, host, _, close in sources:
            if close:
                host.close()
    return list(dict.fromkeys(problems))
