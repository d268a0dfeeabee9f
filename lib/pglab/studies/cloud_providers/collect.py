"""Collect: named targets under the article's procedure, in blocks, from one client host.

Targets (``params``): ``provision`` nodes pglab starts on inventory hosts (the default run: ``stock``
and ``tuned`` on this machine), and ``dsn`` / ``service`` targets, servers somebody else runs (RDS,
Aurora, Cloud SQL, Azure, a server a test started). Every program that reaches a target (pgbench,
sysbench, psql) runs on ``client_host`` with that target's libpq environment; a dsn target's password
comes from the passfile the user names, never from a parameter, a command line or pglab.

Procedure per point (``sweep``: a block runs every target once per workload, the baseline twice):

* ``pgbench``: ``pgbench -i --fillfactor=F --scale=S`` (raw ``init_*`` files: its phase times), then
  ``pgbench --protocol=prepared -P p --time=T --client=C --jobs=J`` (the article's run).
* ``sysbench``: ``cleanup`` (leftovers of a killed run), ``prepare``, ``run`` (oltp_write_only, N tables
  x M rows, uniform, report interval), ``cleanup``; raw ``prepare_*``, main and ``cleanup_*`` files.

Before any load: the targets are described over SQL (version, non-default settings) and each must
admit the workload's connections plus pglab's own (the article lost a run to "sorry, too many clients
already"). After the blocks, the pgbench tables are dropped from dsn targets (``pgbench -i -I d``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pglab import userfiles
from pglab.errors import ProcessError
from pglab.hosts.base import Host, Result
from pglab.hosts.inventory import Inventory
from pglab.runs import preflight
from pglab.runs.opening import Plan, study_run
from pglab.runs.store import Point, RunStore
from pglab.runs.sweep import Group, Planned, plan_blocks
from pglab.studies.cloud_providers import STUDY
from pglab.studies.cloud_providers.params import Params
from pglab.studies.cloud_providers.targets import (
    PREFLIGHT_SQL,
    Handle,
    ManagedTarget,
    check_connections,
    connection_problem,
    describe,
    open_targets,
    psql_rows,
    session_warning,
    target_problems,
)
from pglab.userfiles import FileError
from pglab.workloads import observed, pgbench, sysbench
from pglab.workloads.observed import Watch

DEFAULT_MAX_CONNECTIONS = 100  # PostgreSQL's defaults, for a provisioned node that sets neither
DEFAULT_SUPERUSER_RESERVED = 3


def groups(p: Params) -> list[Group]:
    """One group per workload: a block runs every target once for each."""
    return [Group(w, {"kind": w}) for w in p.workloads]


def plan(p: Params) -> list[Planned]:
    """Blocks: every target once per workload, the baseline twice (A/A), in a seeded order."""
    return plan_blocks(p.names, p.base, groups(p), p.blocks, p.seed)


def check(p: Params, inventory: Inventory) -> None:
    """Everything that can be known before a server starts (dsn targets are asked over SQL);
    raises PreflightError with every problem."""
    problems: list[str] = []
    if os.environ.get("PGPASSWORD"):
        problems.append("PGPASSWORD is set in the environment: pglab takes passwords only from a passfile "
                        "(every process would inherit it); unset it and name a passfile per target")
    server_hosts = [t.provision.host for t in p.targets if t.provision]
    os_hosts = [t.os_host for t in p.targets if t.os_host]
    client_programs = ("pgbench", "psql")
    seen: set[str] = set()
    opened: dict[str, Host] = {}
    for names, programs in ((server_hosts, (*preflight.SERVER_PROGRAMS, "psql")), ([p.client_host], client_programs),
                            (os_hosts, ())):
        probs, hosts = preflight.host_problems(inventory, names, programs)
        problems += [x for x in probs if x not in seen]
        seen.update(probs)
        opened.update(hosts)
    try:
        client = opened.get(p.client_host)
        if client is not None:
            problems += _client_problems(p, inventory, client)
    finally:
        for h in opened.values():
            h.close()
    for t in p.targets:
        if t.provision:
            s = t.provision.settings
            msg = connection_problem(t.name, p, int(s.get("max_connections", DEFAULT_MAX_CONNECTIONS)),
                                     int(s.get("superuser_reserved_connections", DEFAULT_SUPERUSER_RESERVED)),
                                     int(s.get("reserved_connections", 0)), 0)
            if msg:
                problems.append(msg)
    preflight.require(problems)


def _client_problems(p: Params, inventory: Inventory, host: Host) -> list[str]:
    """On the client host: sysbench, each dsn target's passfile and service file, and the targets themselves."""
    problems = []
    if "sysbench" in p.workloads and not host.which(sysbench.PROGRAM):
        problems.append(f"host {host.name}: sysbench is not installed (Debian: apt-get install sysbench, 1.0.20 "
                        "has the pgsql driver)")
    psql = f"{inventory.entry(p.client_host).bindir}/psql"
    for t in p.targets:
        if t.provision:
            continue
        for what, path in (("passfile", t.passfile), ("servicefile", t.servicefile)):
            if path:
                client_file(host, path, FILE_KINDS[what].format(target=t.name))
        if t.passfile:
            mode = host.run(["stat", "-c", "%a", t.passfile], check=False).stdout.strip()
            if int(mode or "0", 8) & 0o077:
                problems.append(f"target {t.name}: passfile {t.passfile} is readable by group or others (mode "
                                f"{mode}): libpq ignores it; chmod 600 it")
                continue
        try:
            rows = psql_rows(host, psql, {**ManagedTarget.of(t).env(), "PGDATABASE": t.database}, t.database,
                             PREFLIGHT_SQL, timeout=30)
        except ProcessError as exc:
            first = (exc.stderr.strip().splitlines() or [""])[-1]
            problems.append(f"target {t.name}: cannot connect from {host.name} as given: {first}")
            continue
        problems += target_problems(t.name, p, rows[0])
        warning = session_warning(t.name, rows[0])
        if warning:
            print(f"pglab: warning: {warning}", file=sys.stderr)
    return problems


FILE_KINDS = {"passfile": "the passfile of target {target}: a libpq passfile, host:port:database:user:password lines",
              "servicefile": "the servicefile of target {target}: a libpq service file, [name] sections of "
                             "keyword=value lines"}
# The same checks as userfiles.check_text, on a client host reached over SSH (one command, first match wins)
_REMOTE_CHECK = ('p="$1"; if [ ! -e "$p" ]; then echo missing; elif [ -d "$p" ]; then echo directory; '
                 'elif [ ! -f "$p" ]; then echo special; elif [ ! -r "$p" ]; then echo unreadable; '
                 'elif [ ! -s "$p" ]; then echo empty; '
                 'elif [ "$(head -c 8192 "$p" | tr -d "\\000" | wc -c)" != "$(head -c 8192 "$p" | wc -c)" ]; '
                 'then echo binary; else echo ok; fi')
_REMOTE_PROBLEMS = {"missing": "does not exist", "directory": "is a directory", "special": "is not a regular file",
                    "unreadable": "cannot be read: Permission denied", "empty": "is empty",
                    "binary": "is a binary file"}


def client_file(host: Host, path: str, what: str) -> None:
    """A passfile or service file on the client host, checked as userfiles checks a file it reads (FileError:
    one line naming the file); never read into pglab beyond the first bytes (a passfile holds passwords)."""
    if host.is_local:
        userfiles.check_text(path, what)
        return
    found = host.run(["sh", "-c", _REMOTE_CHECK, "sh", path], check=False).stdout.strip()
    if found in _REMOTE_PROBLEMS:
        raise FileError(path, f"{_REMOTE_PROBLEMS[found]} on host {host.name} (expected {what})")


def collect(params: dict[str, Any] | Params, *, data_root: str | Path, profile: str = "custom",
            inventory: Inventory | None = None, progress: bool = True, resume: Path | None = None) -> Path:
    """Run the study (or resume the run folder ``resume``); returns the raw run folder."""
    with study_run(STUDY, Params, params, check, lambda p, _: Plan(plan(p), p.base), data_root=data_root,
                   profile=profile, inventory=inventory, resume=resume) as run:
        p, store = run.p, run.store
        client = run.s.deploy.client(p.client_host)
        targets = open_targets(run.s, p, store, client)
        describe(targets, store, p, client)
        check_connections(targets, store, p)
        cores = int(store.manifest["hosts"].get(p.client_host, {}).get("cores", 2) or 2)

        def measure(pl: Planned, point: Point, watch: Watch) -> str | None:
            return _measure(pl, point, targets[pl.config], p, cores, watch)

        observed.run(run, measure, desc=STUDY, progress=progress,
                     hosts=lambda pl: [client.host, *targets[pl.config].os_hosts])
        _teardown(targets, store, p)
    return store.dir


def jobs(p: Params, cores: int) -> int:
    """pgbench --jobs: as given (pgbench caps it at --client), else min(clients, client cores)."""
    return p.jobs or min(p.clients, cores)


def init_argv(h: Handle, p: Params) -> list[str]:
    """The article's initialisation: ``pgbench -i --fillfactor=90 --scale=S``."""
    return [h.client.bin("pgbench"), "-i", f"--fillfactor={p.fillfactor}", f"--scale={p.scale}", h.dbname]


def run_argv(h: Handle, p: Params, cores: int) -> list[str]:
    """The article's run: ``pgbench --protocol=prepared -P <interval> --time=T --client=C --jobs=J``."""
    return [h.client.bin("pgbench"), f"--protocol={p.protocol}", "-P", str(p.progress_s), f"--time={p.seconds}",
            f"--client={p.clients}", f"--jobs={jobs(p, cores)}", h.dbname]


def sysbench_argv(h: Handle, p: Params, command: str) -> list[str]:
    threads = p.sysbench_threads if command == "run" else p.prepare_threads
    return sysbench.sysbench_argv(p.sysbench_test, command, h.dbname, tables=p.sysbench_tables,
                                  table_size=p.sysbench_table_size, threads=threads, seconds=p.sysbench_seconds,
                                  report_interval=p.sysbench_report_interval)


def _run(h: Handle, point: Point, argv: list[str], timeout: float, prefix: str = "") -> Result:
    """A client program against the target, raw output recorded first (PGDATABASE set for psql-like use)."""
    if argv[0] == sysbench.PROGRAM:
        return sysbench.run(h.target, point, argv, client=h.client, timeout=timeout, prefix=prefix)
    # pgbench -i too is measured here: its time per phase is one of the study's results
    return pgbench.run(h.node or h.target, point, argv, timeout=timeout, prefix=prefix, client=h.client,  # type: ignore[arg-type]
                       measured=True)


def _measure(pl: Planned, point: Point, h: Handle, p: Params, cores: int, watch: Watch) -> str | None:
    """One point; None when it measured, else why not."""
    kind = str(pl.group.factors["kind"])
    point.meta.update(target_kind=h.spec.kind, database=h.dbname, label=h.spec.describe(), provider=h.spec.provider,
                      warmup_s=p.warmup_s if kind == "pgbench" else p.sysbench_warmup_s,
                      clients=p.clients if kind == "pgbench" else p.sysbench_threads,
                      waits_sampled=h.sampled is not None)
    nodes = {h.name: h.sampled} if h.sampled is not None else {}  # a dsn target sampled only from this machine

    if kind == "pgbench":
        res = _run(h, point, init_argv(h, p), p.init_timeout_s, prefix="init_")
        if res.exit_code != 0:
            return f"pgbench -i exited {res.exit_code}"
        with watch(nodes, p.warmup_s):
            res = _run(h, point, run_argv(h, p, cores), p.seconds + p.client_timeout_s)
        return None if res.exit_code == 0 else f"pgbench exited {res.exit_code}"
    _run(h, point, sysbench_argv(h, p, "cleanup"), p.init_timeout_s, prefix="precleanup_")
    res = _run(h, point, sysbench_argv(h, p, "prepare"), p.init_timeout_s, prefix="prepare_")
    reason = sysbench.failure("prepare", res)
    if reason is None:
        with watch(nodes, p.sysbench_warmup_s):
            res = _run(h, point, sysbench_argv(h, p, "run"), p.sysbench_seconds + p.client_timeout_s)
        reason = sysbench.failure("run", res)
    res = _run(h, point, sysbench_argv(h, p, "cleanup"), p.init_timeout_s, prefix="cleanup_")
    if reason is None and (why := sysbench.failure("cleanup", res)):
        reason = f"{why} (sbtest tables may be left in {h.dbname})"
    return reason


def _teardown(handles: dict[str, Handle], store: RunStore, p: Params) -> None:
    """Drop the pgbench tables from every dsn target (``pgbench -i -I d``): it is somebody's server."""
    managed = [h for h in handles.values() if h.node is None]
    if not managed or "pgbench" not in p.workloads:
        return
    point = store.point("teardown", unique=True, kind="teardown")
    failed = []
    for h in managed:
        res = _run(h, point, [h.client.bin("pgbench"), "-i", "-I", "d", h.dbname], 120, prefix=f"{h.name}_")
        if res.exit_code != 0:
            failed.append(f"{h.name}: pgbench -i -I d exited {res.exit_code}")
    point.finish("ok" if not failed else "failed", "; ".join(failed) or None)


def command_lines(run_dir: Path) -> list[str]:
    """Every command the run recorded (for audits: no password may be among them)."""
    return [f.read_text().strip() for f in sorted(Path(run_dir).rglob("*command.txt"))]
