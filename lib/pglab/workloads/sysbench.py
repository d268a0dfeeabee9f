"""Running sysbench 1.0's OLTP scripts: build the command, run it on the client's host, record raw files first.

Exactly as ``pglab.workloads.pgbench`` does: the command line, stdout, stderr and exit code go to the
point folder before anything parses them (``pglab.parsers.sysbench``).

Connection: sysbench's pgsql driver hands host, port, user, password and database to libpq's
``PQsetdbLogin``, which falls back to the libpq environment for every empty one. So pglab passes
``--pgsql-host=`` ``--pgsql-port=`` ``--pgsql-user=`` empty and the database by name, and the target's
libpq environment (``Client.env``: PGHOST, PGPORT, PGUSER, PGSSLMODE, PGPASSFILE, PGSERVICE...) decides
the rest, the same environment pgbench gets. ``--pgsql-password`` is never given: sysbench puts it on its
command line, where ``ps`` shows it to every user of the host; libpq reads the passfile instead (checked
with sysbench 1.0.20: scram-sha-256 over TCP works with PGPASSFILE alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from pglab.errors import ProcessError
from pglab.hosts.base import Result
from pglab.nodes.target import Target
from pglab.nodes.topology import Client
from pglab.runs.store import Point

TESTS = ("oltp_write_only", "oltp_read_write")
COMMANDS = ("prepare", "run", "cleanup")
# oltp_read_write with these at 0 issues only the write-only script's statements (the article's sysbench 0.5
# oltp.lua run set the same five to 0)
NO_READS = ("--point-selects=0", "--simple-ranges=0", "--sum-ranges=0", "--order-ranges=0", "--distinct-ranges=0")
PROGRAM = "sysbench"


def sysbench_argv(test: str, command: str, dbname: str, *, tables: int, table_size: int, threads: int,
                  seconds: int | None = None, report_interval: int | None = None, rand_type: str = "uniform",
                  percentile: int = 95, extra: Sequence[str] = ()) -> list[str]:
    """One sysbench command (``prepare``, ``run`` or ``cleanup``); never a password option."""
    if test not in TESTS:
        raise ValueError(f"sysbench test must be one of {TESTS}, not {test!r}")
    if command not in COMMANDS:
        raise ValueError(f"sysbench command must be one of {COMMANDS}, not {command!r}")
    argv = [PROGRAM, test, "--db-driver=pgsql", "--pgsql-host=", "--pgsql-port=", "--pgsql-user=",
            f"--pgsql-db={dbname}", f"--tables={tables}", f"--table-size={table_size}", f"--threads={threads}"]
    if command == "run":
        argv += [f"--time={int(seconds or 0)}", "--events=0", f"--rand-type={rand_type}",
                 f"--percentile={percentile}"]
        if report_interval:
            argv.append(f"--report-interval={report_interval}")
        if test == "oltp_read_write":
            argv += NO_READS
    argv += [*extra, command]
    if any(a.startswith("--pgsql-password") for a in argv):
        raise ValueError("sysbench must not get --pgsql-password: ps shows it; use a passfile (PGPASSFILE)")
    return argv


def run(target: Target, point: Point, argv: list[str], *, client: Client, timeout: float,
        prefix: str = "") -> Result:
    """Run on the client's host to completion (killed at ``timeout``); record the raw output first."""
    host = client.host
    measured = argv[-1] == "run"  # prepare and cleanup are set-up (measurement share)
    if measured:
        point.workload_started(prefix or "main")
    try:
        result = host.run(argv, env=client.env(target), timeout=timeout, check=False)
    except ProcessError as exc:  # timed out: keep what it printed
        result = Result(host.name, exc.command, -1, exc.stdout, exc.stderr + "\npglab: timed out\n", timeout)
    if measured:
        point.workload_ended(prefix or "main")
    point.record(result, prefix)
    return result


def failure(command: str, result: Result) -> str | None:
    """Why a sysbench command failed, or None. Not only its exit code: measured with 1.0.20, ``prepare`` whose
    connections the server refused ("FATAL: Connection to database failed ... remaining connection slots are
    reserved") still exits 0, with tables missing, and the ``run`` after it crashed."""
    if result.exit_code != 0:
        return f"sysbench {command} exited {result.exit_code}"
    fatal = next((ln.strip() for ln in (result.stdout + "\n" + result.stderr).splitlines() if "FATAL:" in ln), None)
    return f"sysbench {command} exited 0 but reported {fatal}" if fatal else None


def version(client: Client) -> str:
    """``sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)``, or why there is none."""
    res = client.host.run([PROGRAM, "--version"], check=False)
    return res.stdout.strip() if res.exit_code == 0 else f"sysbench not runnable on {client.host.name}"
