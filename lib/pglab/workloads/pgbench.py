"""Running pgbench: build the command, run it on the client's host, write the raw files first.

The client is a ``pglab.nodes.topology.Client``: by default the node's own host over the socket, else any
host of the deployment over TCP to the node's data address. Parsing lives in ``pglab.parsers.pgbench``;
nothing here interprets the output beyond the exit code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pglab.errors import ProcessError
from pglab.hosts.base import Background, Result
from pglab.nodes import cpu_quota
from pglab.nodes.node import Node
from pglab.nodes.target import Target
from pglab.nodes.topology import Client
from pglab.runs.store import Point
from pglab.workloads import txlog_thin


def pgbench_argv(node: Node | Client, dbname: str, *, clients: int = 1, jobs: int | None = None,
                 transactions: int | None = None, duration_s: float | None = None,
                 select_only: bool = False, no_vacuum: bool = False, progress_s: float | None = None,
                 protocol: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """A pgbench run command (the binary of ``node``'s or the client's host); exactly one of
    ``transactions`` / ``duration_s``."""
    if (transactions is None) == (duration_s is None):
        raise ValueError("give exactly one of transactions or duration_s")
    argv = [node.bin("pgbench"), "-c", str(clients), "-j", str(jobs or clients)]
    argv += ["-t", str(transactions)] if transactions is not None else ["-T", str(int(duration_s or 0))]
    if select_only:
        argv.append("-S")
    if no_vacuum:
        argv.append("-n")
    if progress_s:
        argv += ["-P", str(progress_s)]
    if protocol:
        argv.append(f"--protocol={protocol}")
    return [*argv, *extra, dbname]


def session_env(node: Target, settings: Mapping[str, Any] | None = None,
                client: Client | None = None) -> dict[str, str]:
    """Client environment: how ``client`` reaches ``node``, plus per-session settings through PGOPTIONS."""
    env = (client or Client.on_node_host(node)).env(node)
    if settings:
        env["PGOPTIONS"] = " ".join(f"-c {k}={v}" for k, v in settings.items())
    return env


def run(node: Node, point: Point, argv: list[str], *, timeout: float, prefix: str = "",
        settings: Mapping[str, Any] | None = None, client: Client | None = None,
        measured: bool | None = None) -> Result:
    """Run on the client's host to completion (killed at ``timeout``); record the raw output first.
    ``measured``: whether its time counts as measuring (default: unless it is ``pgbench -i``, which
    is set-up except where a study reports its phases' times)."""
    host = (client or Client.on_node_host(node)).host
    measured = not _initialises(argv) if measured is None else measured
    if measured:
        point.workload_started(prefix or "main")
    try:
        result = host.run(pinned(node, client, argv), env=session_env(node, settings, client), timeout=timeout,
                          check=False)
    except ProcessError as exc:  # timed out: keep what it printed
        result = Result(host.name, exc.command, -1, exc.stdout, exc.stderr + "\npglab: timed out\n",
                        timeout)
    if measured:
        point.workload_ended(prefix or "main")
    point.record(result, prefix)
    return result


def _initialises(argv: Sequence[str]) -> bool:
    """``pgbench -i``: set-up, not part of the measured window (measurement share)."""
    return any(a in ("-i", "--initialize") for a in argv)


def start(node: Node, point: Point, argv: list[str], *, prefix: str,
          settings: Mapping[str, Any] | None = None, client: Client | None = None) -> Background:
    """Start in the background on the client's host; output lands in its workspace until ``collect``."""
    c = client or Client.on_node_host(node)
    base = f"{c.ws.base}/{point.id}-{prefix}"
    if not _initialises(argv):
        point.workload_started(prefix or "main")
    return c.host.start(pinned(node, c, argv), f"{base}stdout.txt", f"{base}stderr.txt",
                        env=session_env(node, settings, c))


def pinned(node: Target, client: Client | None, argv: list[str]) -> list[str]:
    """A workload run from its node's own host shares the node's core and CPU share (``emulate``); from another
    host it is not pinned."""
    cpus = getattr(node, "cpus", None)  # a Node pinned to a core; other targets (a managed server) never are
    group = getattr(node, "cpu_group", None)  # and its CPU share, a cgroup quota
    if (cpus or group) and client is not None and client.host.name != node.host.name:  # type: ignore[attr-defined]
        cpus = group = None
    return cpu_quota.confined(argv, cpus, group)


def collect(proc: Background, point: Point, prefix: str, timeout: float) -> Result:
    """Wait for a background run and record it like a foreground one."""
    try:
        code = proc.wait(timeout)
    except ProcessError:
        code = -1
    point.workload_ended(prefix or "main")
    out, err = proc.output()
    result = Result(proc.host.name, proc.command, code, out, err, 0.0)
    point.record(result, prefix)
    return result


def initialise(node: Node, point: Point, dbname: str, scale: int, extra: Sequence[str] = (),
               timeout: float = 1800, client: Client | None = None) -> Result:
    """``pgbench -i`` (its log goes to stderr; phase times are parsed later from stderr.txt)."""
    argv = [(client or node).bin("pgbench"), "-i", "-s", str(scale), *extra, dbname]
    return run(node, point, argv, timeout=timeout, client=client)


# -- per-transaction logs (-l): latency distributions merged over clients and blocks -----------------
TXLOG_DIR = "txlog"


def txlog_args(point: Point, node: Node, client: Client | None = None, prefix: str = "") -> tuple[list[str], str]:
    """``-l --log-prefix=...`` into a fresh folder of the client's workspace, and that folder."""
    c = client or Client.on_node_host(node)
    remote = f"{c.ws.base}/{TXLOG_DIR}-{point.dir.parent.name}-{point.id}{'-' + prefix if prefix else ''}"
    c.host.mkdir(remote)
    return ["-l", f"--log-prefix={remote}/pgbench_log"], remote


def fetch_txlogs(point: Point, node: Node, remote: str, client: Client | None = None, prefix: str = "") -> list[str]:
    """Copy pgbench's log files (one per thread) into the point folder, remove them on the client, and thin
    them there (``txlog_thin``): a latency histogram and a 1-in-100 sample of their lines replace them, and
    the point's meta says what was kept (``txlog_kept``: per folder, the full logs' lines and bytes). The
    names of the files kept are returned."""
    c = client or Client.on_node_host(node)
    names = [n for n in c.host.run(["ls", "-1", remote], check=False).stdout.split() if n.startswith("pgbench_log")]
    dest = point.dir / (TXLOG_DIR + (f"_{prefix.rstrip('_')}" if prefix else ""))
    dest.mkdir(exist_ok=True)
    for name in names:
        c.host.get(f"{remote}/{name}", dest / name, mode=0o644)
    c.host.remove_tree(remote)
    kept, record = txlog_thin.thin(dest, [dest / n for n in names])
    point.meta.setdefault("txlog_kept", {})[dest.name] = record
    return kept
