"""Always clean up, keep the evidence (DESIGN.md principle 6).

``Session`` owns everything a study starts: hosts, workspaces, nodes and background processes. It
stops them on success, on an exception, on Ctrl-C and on SIGTERM (turned into KeyboardInterrupt so
that every ``finally`` runs). While it stops them, further SIGINT/SIGTERM are only noted: a second
Ctrl-C must not abandon half-stopped servers. The run's final status is written only after that, and
says ``cleanup_failed`` (with ``leftovers``) when something could not be stopped. On success the
workspaces are removed after the server logs were copied to the raw run folder; on failure they are
kept (logs and data, not the passfile) and their paths printed.

What a run killed with SIGKILL leaves behind is for ``pglab cleanup`` (pglab.runs.leftovers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pglab.errors import first_line
from pglab.hosts import procs, run_account
from pglab.hosts.base import Background, Host
from pglab.hosts.builds import Build
from pglab.hosts.inventory import Inventory
from pglab.hosts.local import LocalHost
from pglab.nodes.emulation import Emulation
from pglab.nodes.node import Node
from pglab.nodes.topology import Deployment
from pglab.nodes.workspace import Workspace
from pglab.runs.process_groups import group_alive, wait_until
from pglab.runs.signals import deferred_signals, sigterm_as_interrupt
from pglab.runs.store import RunStore

HEALTH_TIMEOUT_S = 20.0  # a host that takes longer to run `true` is not fit to measure on
SETTLE_S = 15.0  # a server going down (a crash, an immediate stop) still runs while it refuses connections


class Session:
    """The resources of one study run, released in a safe order.

    ``deploy`` (a ``pglab.nodes.topology.Deployment``) creates hosts, workspaces and nodes; the session hears
    of each as it is made (``Recorder``), lists it in the manifest at once, and releases it in ``close``.
    """

    def __init__(self, inventory: Inventory, store: RunStore | None = None, tls: bool = False,
                 emulation: Emulation | None = None, build: Build | None = None):
        self.inventory = inventory
        self.store = store
        self.background: list[Background] = []
        self.boot_ids: dict[str, str] = {}
        self.deploy = Deployment(inventory, tls=tls, recorder=self,
                                 label=store.manifest["run_id"] if store else "pglab", emulation=emulation,
                                 build=build)
        if store:  # lets `pglab cleanup` tell this process from a later one with the same PID
            store.manifest["control"] = _quietly(procs.identity, LocalHost(), os.getpid())
            store.manifest["inventory"] = inventory.source  # where `pglab cleanup` finds the run's hosts
            store.save()

    @property
    def hosts(self) -> dict[str, Host]:
        return self.deploy.hosts

    @property
    def workspaces(self) -> dict[str, Workspace]:
        return self.deploy.workspaces

    @property
    def nodes(self) -> list[Node]:
        return self.deploy.nodes

    def host(self, name: str) -> Host:
        return self.deploy.host(name)

    # -- Recorder: the manifest lists everything the moment it exists ------------------------------
    def host_opened(self, name: str, host: Host) -> None:
        """Boot id (for ``pglab cleanup``) and host facts with the machine identity, for every host."""
        if not self.store:
            return
        boot = _quietly(procs.boot_id, host)
        if boot:
            self.boot_ids[name] = boot
            self.store.manifest.setdefault("boot_ids", {})[name] = boot
        facts = _quietly(host.facts)
        if facts:
            hosts = self.store.manifest.setdefault("hosts", {})
            if name in hosts and self.store.manifest.get("resumes"):  # the run's facts stay those it began with
                self.store.manifest["resumes"][-1].setdefault("hosts", {})[name] = facts
            else:
                hosts[name] = facts
        self.store.save()

    def workspace_made(self, name: str, ws: Workspace) -> None:
        if self.store:
            self.store.manifest.setdefault("workspaces", {})[name] = ws.base
            # the path of the control machine's copy (never its content): removed after a SIGKILL
            self.store.manifest.setdefault("local_passfiles", {})[name] = ws.local_passfile
            self.store.save()

    def node_starting(self, node: Node) -> None:
        """Called before the server starts, so its PID is not known yet: ``pglab cleanup`` proves a
        node is this run's by its data dir (in this run's workspace) and the host's boot id."""
        if self.store and not any(n.get("data_dir") == node.data_dir for n in self.store.manifest["nodes"]):
            self.store.add_node(node.describe())

    def track_background(self, proc: Background) -> Background:
        """List ``proc`` for cleanup, with what identifies it beyond its PID (see ``pglab.hosts.procs``)."""
        self.background.append(proc)
        if self.store:
            entry: dict[str, Any] = {"host": proc.host.name, "pid": proc.pid, "command": proc.command}
            ident = _quietly(procs.started_identity, proc.host, proc.pid, self.boot_ids.get(proc.host.name))
            entry.update(ident or {})
            self.store.add_process(entry)
        return proc

    def untrack_background(self, proc: Background) -> None:
        """The owner stops ``proc`` itself: the manifest marks it stopped so ``pglab cleanup`` leaves its PID alone."""
        if proc in self.background:
            self.background.remove(proc)
        self._mark_stopped(proc)

    def _mark_stopped(self, proc: Background) -> None:
        if self.store:
            for entry in self.store.manifest["processes"]:
                if entry["pid"] == proc.pid and entry["host"] == proc.host.name:
                    entry["stopped"] = True
            self.store.save()

    def health(self) -> str | None:
        """Why the run cannot go on, or None: a host that no longer answers, a node that should run and
        does not (with the last lines of its server log). Asked after a failed point, not before each."""
        for name, host in self.hosts.items():
            try:
                host.run(["true"], timeout=HEALTH_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001  (SSH and socket errors as much as ProcessError)
                return f"host {name} does not answer ({type(exc).__name__}: {first_line(exc)})"
        for node in self.nodes:
            try:
                state = _settled_state(node) if node.up else "accepting"
            except Exception:  # noqa: BLE001  (its host answered a moment ago: try the next node)
                continue
            if state == "accepting":
                continue
            if state == "refusing":
                return (f"node {node.name} on host {node.host.name} runs but has refused connections for "
                        f"{SETTLE_S:.0f} s (see its server log {node.log_file})")
            tail = (_quietly(node.log_tail, 8) or "").rstrip()
            return (f"node {node.name} on host {node.host.name} is not running any more"
                    + (f"; the last lines of its server log ({node.log_file}):\n" +
                       "\n".join(f"    {line}" for line in tail.splitlines()) if tail else ""))
        return None

    def close(self, failed: bool) -> list[dict[str, Any]]:
        """Stop processes, then primaries (sync names reset first), then standbys.

        Returns what could not be stopped (the manifest's ``leftovers``). Workspaces are kept, without
        their passfiles, when the run failed or something is left (a data dir still in use).
        """
        errors: list[str] = []
        leftovers: list[dict[str, Any]] = []
        if self.store and self.deploy.emulation:  # what the run imitated, as measured (pglab.nodes.emulation)
            with _collect(errors):
                self.store.manifest["emulation"] = self.deploy.emulated()
        for proc in list(self.background):
            gone = False
            with _collect(errors):
                proc.stop()
                gone = wait_until(lambda p=proc: not group_alive(p.host, p.pid), 2.0)
            if gone:
                self._mark_stopped(proc)
            else:
                leftovers.append({"kind": "process", "host": proc.host.name, "pid": proc.pid,
                                  "command": proc.command})
        if self.deploy.disks:  # the shutdown checkpoints measure nothing: at the disk's own speed (26 s at 35 ms)
            with _collect(errors):
                self.deploy.set_flush(0)
        for node in self.nodes:
            if node.role == "primary" and node.settings.get("synchronous_standby_names"):
                with _collect(errors):
                    node.configure({"synchronous_standby_names": ""}, reload=True)
        for tier in ([n for n in self.nodes if n.role == "primary"], [n for n in self.nodes if n.role != "primary"]):
            # a tier's nodes stop all at once (each takes its shutdown checkpoint: 1-2 s one after the other)
            with ThreadPoolExecutor(max(1, len(tier)), thread_name_prefix="stop") as pool:
                for left in pool.map(lambda node: _stop_node(node, errors), tier):
                    if left:
                        leftovers.append(left)
        if self.deploy.cpu_groups:  # emptied by the stops; one a process still runs in stays for `pglab cleanup`
            with _collect(errors):
                busy = self.deploy.release_cpu()
                if busy:
                    errors.append(f"CPU groups still in use: {', '.join(busy)}")
        for host_name, ws in self.workspaces.items():
            with _collect(errors):
                self._keep_logs(host_name, ws)
            with _collect(errors):
                if failed or leftovers:
                    _remove_secrets(ws)
                    print(f"pglab: kept {host_name}:{ws.base} (server logs and data) for inspection",
                          file=sys.stderr)
                else:
                    try:
                        ws.remove()
                    except Exception:
                        _remove_secrets(ws)  # the folder may stay, the password must not
                        raise
            with _collect(errors):
                if os.path.exists(ws.local_passfile):  # only needed while the session runs
                    os.unlink(ws.local_passfile)
        for host in self.hosts.values():
            with _collect(errors):
                host.close()
        if errors:
            print("pglab: problems during cleanup:\n  " + "\n  ".join(errors), file=sys.stderr)
        for left in leftovers:
            print(f"pglab: could not stop {_describe_leftover(left)}; `pglab cleanup` will try again",
                  file=sys.stderr)
        return leftovers

    def _keep_logs(self, host_name: str, ws: Workspace) -> None:
        if not self.store:
            return
        logs = self.store.dir / "logs"
        logs.mkdir(exist_ok=True)
        for node in self.nodes:
            if node.ws is ws and node.host.exists(node.log_file):
                dest, n = logs / f"{node.name}.log", 1
                while dest.exists():  # a resumed run's nodes have the names of the first attempt's
                    n += 1
                    dest = logs / f"{node.name}.{n}.log"
                node.host.get(node.log_file, dest, mode=0o644)  # evidence, no secret


def _remove_secrets(ws: Workspace) -> None:
    """A kept workspace keeps logs and data dirs, not the run's password."""
    ws.remove_secrets()


def _describe_leftover(left: dict[str, Any]) -> str:
    if left.get("kind") == "node":
        return f"node {left.get('node')} on {left.get('host')} ({left.get('data_dir')})"
    return f"process {left.get('pid')} on {left.get('host')} ({str(left.get('command', ''))[:60]})"


def _quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """Identity facts are extra safety, not a reason to fail a run: None when they cannot be read
    (e.g. a control machine without /proc)."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001
        return None


@contextlib.contextmanager
def _collect(errors: list[str]) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # cleanup goes on: one stuck node must not keep the others running
        errors.append(f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def session(inventory: Inventory, store: RunStore | None = None, tls: bool = False,
            emulation: Emulation | None = None, build: Build | None = None) -> Iterator[Session]:
    """A Session that always closes; the store's status, written after everything was released, says
    how the run ended."""
    s = Session(inventory, store, tls, emulation, build)
    account = run_account.join()  # the run's own CPU, so that a point's "others" are others (pglab.workloads.cpu)
    if store and account:
        store.manifest["cpu_account"] = account  # for `pglab cleanup`, should the run be killed
    outcome = "failed"
    not_ok: dict[str, str] | None = None  # read once the body ended: a failed run is read in ``finally``
    in_flight = False
    with sigterm_as_interrupt():
        try:
            yield s
            not_ok = store.points_not_ok() if store else {}
            outcome = "partial" if not_ok else "complete"
        except KeyboardInterrupt:
            outcome, in_flight = "interrupted", True
            raise
        except BaseException:
            in_flight = True
            raise
        finally:
            with deferred_signals() as noted:
                leftovers: list[dict[str, Any]] = []
                try:
                    leftovers = s.close(failed=outcome != "complete")
                except Exception as exc:  # noqa: BLE001  (close collects its own errors; this is a bug's last net)
                    leftovers = [{"kind": "unknown", "error": f"{type(exc).__name__}: {exc}"}]
                    print(f"pglab: cleanup failed: {exc}", file=sys.stderr)
                run_account.leave(account)  # a group something still runs in stays for `pglab cleanup`
                if noted:
                    outcome = "interrupted"
                status = "cleanup_failed" if leftovers else outcome
                if store:
                    extra: dict[str, Any] = {"leftovers": leftovers, "outcome": outcome,
                                             "failed_points": list(not_ok if not_ok is not None
                                                                   else _quietly(store.points_not_ok) or {})}
                    if noted:
                        extra["signals_during_cleanup"] = [signal.Signals(n).name for n in noted]
                    store.finish(status, **extra)
            if noted:
                names = ", ".join(sorted({signal.Signals(n).name for n in noted}))
                print(f"pglab: {names} received during cleanup: cleanup finished first", file=sys.stderr)
            if store and status == "partial":
                print(f"pglab: run partial: {store.points_not_ok_summary()}; raw files kept in {store.dir}",
                      file=sys.stderr)
            elif store and status != "complete":
                print(f"pglab: run {status}; raw files kept in {store.dir}", file=sys.stderr)
            if noted and not in_flight:
                raise KeyboardInterrupt(f"signal {noted[0]} during cleanup")


def _stop_node(node: Node, errors: list[str]) -> dict[str, Any] | None:
    """Stop ``node``; its leftover entry when it still runs.

    An SSH host whose connection broke (seen on a loaded 2-core machine: the tunnel's channel closed with a broken
    pipe while the node's connection was released) is asked again once on a fresh connection: stopping and asking
    whether it runs are safe to repeat, and a node left running over a dropped socket made the run cleanup_failed."""
    for attempt in (1, 2):
        tried: list[str] = []
        with _collect(tried):
            node.stop()
        running = True
        with _collect(tried):
            running = node.is_running()
        if not running or attempt == 2 or node.host.is_local or not tried:
            errors.extend(tried)
            break
        with _collect(errors):
            node.host.close()  # the next command opens a new SSH connection (fabric reconnects on use)
    if running:
        return {"kind": "node", "host": node.host.name, "node": node.name, "data_dir": node.data_dir}
    return None


def _settled_state(node: Node) -> str:
    """``accepting``, ``stopped`` or ``refusing``, once the node settles: a point fails the moment its
    server starts to go down, and ``pg_ctl status`` still says running until the postmaster is gone.
    Reading that as healthy let the next point fail the same way before the run ended."""
    state = ["refusing"]

    def settled() -> bool:
        state[0] = ("stopped" if not node.is_running() else
                    "accepting" if node.accepts_connections() else "refusing")
        return state[0] != "refusing"

    wait_until(settled, SETTLE_S)
    return state[0]
