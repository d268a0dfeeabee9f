"""Always clean up, keep the evidence (DESIGN.md principle 6).

``Session`` owns everything a study starts: hosts, workspaces, nodes and background processes. It
stops them on success, on an exception, on Ctrl-C and on SIGTERM (turned into KeyboardInterrupt so
that every ``finally`` runs). On success the workspaces are removed after the server logs were
copied to the raw run folder; on failure they are kept and their paths printed.

``cleanup_leftovers`` is the other half: a run killed with SIGKILL cannot clean up, so its manifest
still says ``running``; ``pglab cleanup`` reads those manifests and stops what they list.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pglab.hosts import Background, Host
from pglab.inventory import Inventory
from pglab.node import Node, Workspace
from pglab.store import MANIFEST, RunStore, write_json


class Session:
    """The resources of one study run, released in a safe order."""

    def __init__(self, inventory: Inventory, store: RunStore | None = None):
        self.inventory = inventory
        self.store = store
        self.hosts: dict[str, Host] = {}
        self.workspaces: dict[str, Workspace] = {}
        self.nodes: list[Node] = []
        self.background: list[Background] = []
        self.used_ports: set[int] = set()

    def host(self, name: str) -> Host:
        if name not in self.hosts:
            self.hosts[name] = self.inventory.connect(name)
        return self.hosts[name]

    def workspace(self, host_name: str) -> Workspace:
        if host_name not in self.workspaces:
            host = self.host(host_name)
            entry = self.inventory.entry(host_name)
            ws = Workspace.create(host, entry.workdir,
                                  password=next(iter(self.workspaces.values())).password
                                  if self.workspaces else None)
            self.workspaces[host_name] = ws
            if self.store:
                self.store.manifest.setdefault("workspaces", {})[host_name] = ws.base
                self.store.save()
        return self.workspaces[host_name]

    def node(self, name: str, host_name: str, settings: dict[str, Any] | None = None) -> Node:
        """A new, initialised (not started) node on ``host_name`` with a free port."""
        ws = self.workspace(host_name)
        entry = self.inventory.entry(host_name)
        port = ws.host.free_port(*entry.port_range, exclude=self.used_ports)
        self.used_ports.add(port)
        node = Node(ws, name, port, entry.bindir, on_start=self._track)
        node.init(settings)
        return node

    def standby(self, primary: Node, name: str) -> Node:
        entry = self.inventory.entry(primary.host.name)
        port = primary.host.free_port(*entry.port_range, exclude=self.used_ports)
        self.used_ports.add(port)
        return primary.backup(name, port)

    def _track(self, node: Node) -> None:
        if node not in self.nodes:
            self.nodes.append(node)
            if self.store:
                self.store.add_node(node.describe())

    def track_background(self, proc: Background) -> Background:
        self.background.append(proc)
        if self.store:
            self.store.add_process({"host": proc.host.name, "pid": proc.pid, "command": proc.command})
        return proc

    def untrack_background(self, proc: Background) -> None:
        """The owner stops ``proc`` itself: the manifest marks it stopped so ``pglab cleanup`` leaves its PID alone."""
        if proc in self.background:
            self.background.remove(proc)
        if self.store:
            for entry in self.store.manifest["processes"]:
                if entry["pid"] == proc.pid and entry["host"] == proc.host.name:
                    entry["stopped"] = True
            self.store.save()

    def close(self, failed: bool) -> None:
        """Stop processes, then primaries (sync names reset first), then standbys."""
        errors: list[str] = []
        for proc in self.background:
            with _collect(errors):
                proc.stop()
        for node in self.nodes:
            if node.role == "primary" and node.settings.get("synchronous_standby_names"):
                with _collect(errors):
                    node.configure({"synchronous_standby_names": ""}, reload=True)
        for node in sorted(self.nodes, key=lambda n: n.role != "primary"):
            with _collect(errors):
                node.stop()
        for host_name, ws in self.workspaces.items():
            with _collect(errors):
                self._keep_logs(host_name, ws)
                if failed:
                    print(f"pglab: kept {host_name}:{ws.base} (server logs and data) for inspection",
                          file=sys.stderr)
                else:
                    ws.remove()
            if os.path.exists(ws.local_passfile):  # only needed while the session runs
                os.unlink(ws.local_passfile)
        for host in self.hosts.values():
            with _collect(errors):
                host.close()
        if errors:
            print("pglab: problems during cleanup:\n  " + "\n  ".join(errors), file=sys.stderr)

    def _keep_logs(self, host_name: str, ws: Workspace) -> None:
        if not self.store:
            return
        logs = self.store.dir / "logs"
        logs.mkdir(exist_ok=True)
        for node in self.nodes:
            if node.ws is ws and node.host.exists(node.log_file):
                node.host.get(node.log_file, logs / f"{node.name}.log")


@contextlib.contextmanager
def _collect(errors: list[str]) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # cleanup goes on: one stuck node must not keep the others running
        errors.append(f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so ``finally`` blocks and context managers run."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def session(inventory: Inventory, store: RunStore | None = None) -> Iterator[Session]:
    """A Session that always closes; the store's status says how the run ended."""
    s = Session(inventory, store)
    status = "failed"
    with sigterm_as_interrupt():
        try:
            yield s
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            s.close(failed=status != "complete")
            if store:
                store.finish(status)
                if status != "complete":
                    print(f"pglab: run {status}; raw files kept in {store.dir}", file=sys.stderr)


def cleanup_leftovers(data_root: Path, inventory: Inventory, force: bool = False) -> list[str]:
    """Stop servers and processes listed by manifests of runs that never finished."""
    done: list[str] = []
    for manifest_path in sorted(Path(data_root).glob(f"raw/*/*/{MANIFEST}")):
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("status") != "running":
            continue
        pid = manifest.get("pid")
        if pid and _alive(pid) and not force:
            done.append(f"{manifest_path.parent}: run still in progress (pid {pid}); left alone")
            continue
        hosts: dict[str, Host] = {}
        try:
            for proc in manifest.get("processes", []):
                if proc.get("stopped"):
                    continue
                host = hosts.setdefault(proc["host"], inventory.connect(proc["host"]))
                if host.pid_alive(proc["pid"]):
                    host.run(["kill", "-TERM", f"-{proc['pid']}"], check=False)
                    done.append(f"stopped process {proc['pid']} on {proc['host']}: {proc['command'][:60]}")
            for n in sorted(manifest.get("nodes", []), key=lambda n: n.get("role") != "primary"):
                host = hosts.setdefault(n["host"], inventory.connect(n["host"]))
                pg_ctl = [f"{n['bindir']}/pg_ctl", "-D", n["data_dir"]]
                if host.run([*pg_ctl, "status"], as_user=n["server_user"], check=False).exit_code == 0:
                    host.run([*pg_ctl, "-m", "immediate", "-w", "stop"], as_user=n["server_user"], check=False)
                    done.append(f"stopped node {n['name']} on {n['host']} ({n['data_dir']})")
            for host_name, base in manifest.get("workspaces", {}).items():
                done.append(f"left {host_name}:{base} on disk (logs and data of the killed run)")
        finally:
            for h in hosts.values():
                h.close()
        manifest["status"] = "killed"
        write_json(manifest_path, manifest)
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
