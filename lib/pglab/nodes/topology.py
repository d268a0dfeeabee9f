"""Deployments: which node runs on which host, who may connect to whom, and where clients run.

A ``Deployment`` opens the run's hosts, makes one workspace per host (the run's password in a passfile
there), creates nodes with free ports, and keeps every node's pg_hba equal to the data addresses of the
hosts opened so far: a node admits TCP connections from the run's hosts and from nothing else. With
``tls`` it generates the run's CA, a server certificate per host, and every libpq program pglab starts
(servers, daemons, clients) connects with ``sslmode=verify-full``.

Topologies are built from it: ``streaming`` (a primary and N standbys on any hosts, async or
``FIRST k`` / ``ANY k`` synchronous), ``logical_pair`` (provider and subscriber of a replication
system), and ``Client`` (a host that runs a workload against a node: over the socket on the node's own
host, else TCP to its data address).

A Deployment does not release anything: ``pglab.runs.session.Session`` owns one and stops what it made.
``Recorder`` is how the session hears of every host, workspace and node the moment they exist, so that
a run killed half-way is still cleaned up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pglab.errors import ProcessError, UserError
from pglab.hosts import build_copy, builds
from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory
from pglab.nodes import cpu_quota
from pglab.nodes import emulation as emu
from pglab.nodes.emulating import Emulating
from pglab.nodes.node import Node
from pglab.nodes.target import Target
from pglab.nodes.workspace import Workspace


class Recorder(Protocol):
    """What a Deployment reports as it goes (``pglab.runs.session.Session`` records it in the manifest)."""

    def host_opened(self, name: str, host: Host) -> None: ...

    def workspace_made(self, name: str, ws: Workspace) -> None: ...

    def node_starting(self, node: Node) -> None: ...


class Deployment(Emulating):
    """The hosts, workspaces and nodes of one run."""

    def __init__(self, inventory: Inventory, *, tls: bool = False, recorder: Recorder | None = None,
                 label: str = "pglab", emulation: emu.Emulation | None = None, build: builds.Build | None = None):
        self.inventory = inventory
        self.build = build  # the nodes' server build (pglab.hosts.builds); None: each host's own bindir
        self.emulation = emulation
        self.disks: dict[str, emu.Disk] = {}  # emulated disks by key (a node's name, or its host's with one_disk)
        self.cores_given: dict[str, list[str]] = {}  # host -> the nodes pinned there, in core order
        self.cpu_groups: dict[str, cpu_quota.CpuGroup] = {}  # CPU shares by key (a node's name, or its host's)
        self.calibration: dict[str, Any] = {}  # what pglab.workloads.calibrate searched, for the run record
        self.recorder = recorder
        self.tls = tls
        self.hosts: dict[str, Host] = {}
        self.workspaces: dict[str, Workspace] = {}
        self.nodes: list[Node] = []
        self.used_ports: dict[str, set[int]] = {}
        self._tls_settings: dict[str, dict[str, Any]] = {}
        self._ca: Any = None
        # pairs and standbys are set up in threads: without it two threads each made the host's workspace,
        # each with its own password, and nodes of the two refused each other (the set-up race of session 15)
        self._lock = threading.RLock()
        if tls:
            from pglab.hosts import tls as tls_mod

            self._ca = tls_mod.RunCA.create(label)

    # -- hosts and workspaces -----------------------------------------------------------------------
    def host(self, name: str) -> Host:
        """Open ``name`` (once). A host opened while nodes run is admitted by every node's pg_hba."""
        with self._lock:
            return self._host(name)

    def _host(self, name: str) -> Host:
        if name not in self.hosts:
            host = self.inventory.connect(name)
            self.hosts[name] = host
            if self.recorder:
                self.recorder.host_opened(name, host)
            if self.nodes:
                self._update_hba()
        return self.hosts[name]

    def open(self, names: Iterable[str]) -> list[Host]:
        """Open every host of the run before the first node, so that pg_hba is right from the start."""
        return [self.host(n) for n in dict.fromkeys(names)]

    @property
    def addresses(self) -> list[str]:
        """The data addresses pg_hba admits: those of the run's hosts."""
        return list(dict.fromkeys(h.data_address for h in self.hosts.values()))

    def workspace(self, host_name: str) -> Workspace:
        """The host's workspace, made once: every workspace of the run shares the first one's password."""
        with self._lock:
            return self._workspace(host_name)

    def _workspace(self, host_name: str) -> Workspace:
        if host_name not in self.workspaces:
            host = self.host(host_name)
            entry = self.inventory.entry(host_name)
            password = next(iter(self.workspaces.values())).password if self.workspaces else None
            ws = Workspace.create(host, entry.workdir, password=password)
            self.workspaces[host_name] = ws
            if self.recorder:
                self.recorder.workspace_made(host_name, ws)
            if self._ca is not None:
                from pglab.hosts import tls as tls_mod

                ws.tls_root = tls_mod.install_client(host, f"{ws.base}/tls-client", self._ca,
                                                     owner=host.server_user)
        return self.workspaces[host_name]

    def _server_tls(self, host_name: str) -> dict[str, Any]:
        """ssl settings for nodes on ``host_name`` (one certificate per host, for its data address)."""
        if self._ca is None:
            return {}
        with self._lock:
            return self._install_server_tls(host_name)

    def _install_server_tls(self, host_name: str) -> dict[str, Any]:
        if host_name not in self._tls_settings:
            from pglab.hosts import tls as tls_mod

            ws, host = self.workspace(host_name), self.host(host_name)
            self._tls_settings[host_name] = tls_mod.install_server(
                host, f"{ws.base}/tls", self._ca, [host.data_address], owner=host.server_user)
        return self._tls_settings[host_name]

    def _port(self, host_name: str) -> int:
        with self._lock:  # nodes made in threads never share a port
            used = self.used_ports.setdefault(host_name, set())
            entry = self.inventory.entry(host_name)
            port = self.host(host_name).free_port(*entry.port_range, exclude=used)
            used.add(port)
            return port

    def _update_hba(self) -> None:
        for node in self.nodes:
            if tuple(node.hba_addresses) != tuple(self.addresses):
                node.write_hba(self.addresses, reload=node.is_running())

    # -- nodes -------------------------------------------------------------------------------------
    def _starting(self, node: Node) -> None:
        if node not in self.nodes:
            self.nodes.append(node)
        if self.recorder:
            self.recorder.node_starting(node)

    def node(self, name: str, host_name: str, settings: dict[str, Any] | None = None,
             build: builds.Build | None = None) -> Node:
        """A new, initialised (not started) node on ``host_name`` with a free port; ``build``: its server's, when
        it is not the deployment's (a node of another major, as an upgrade or a federation has)."""
        ws = self.workspace(host_name)
        entry, build = self.inventory.entry(host_name), build or self.build
        own, there = entry.bindir, build_copy.bindir_on(build, entry) if build else None
        other = there is not None and there != own
        node = Node(ws, name, self._port(host_name), there if other else own,  # type: ignore[arg-type]
                    on_start=self._starting, fixed=self._server_tls(host_name), hba_addresses=tuple(self.addresses),
                    build=build.id if other else None, tools_bindir=own if other else None)  # type: ignore[union-attr]
        self._core_left(node)  # refused before initdb
        node.init(settings)
        return self._emulate(node)

    def standby(self, primary: Node, name: str, host_name: str | None = None) -> Node:
        """A streaming standby of ``primary`` on ``host_name`` (default: the primary's host), not started."""
        host_name = host_name or primary.host.name
        ws = self.workspace(host_name)
        return self._emulate(primary.backup(name, self._port(host_name), ws, fixed=self._server_tls(host_name)))

    def client(self, host_name: str) -> Client:
        """A host that runs workloads (pgbench, sysbench) against the run's nodes."""
        return Client(self.workspace(host_name), self.inventory.entry(host_name).bindir)

    def where(self) -> dict[str, Any]:
        """For the manifest: each host's data address, and whether TLS was on (it costs throughput)."""
        return {"tls": self.tls, "hosts": {n: h.data_address for n, h in self.hosts.items()},
                "pg_hba_admits": self.addresses}


@dataclass
class Client:
    """Where a workload runs: a host of the deployment (its workspace holds its passfile)."""

    ws: Workspace
    bindir: str

    @property
    def host(self) -> Host:
        return self.ws.host

    @classmethod
    def on_node_host(cls, node: Node) -> Client:
        """The default client: the node's own host, over the socket."""
        return cls(node.ws, node.tools_bindir or node.bindir)

    def bin(self, program: str) -> str:
        return f"{self.bindir}/{program}"

    def env(self, target: Target) -> dict[str, str]:
        """libpq environment to reach ``target`` from this host (for a node: its socket when on the same
        host, else TCP to its data address, with this host's passfile and the run's TLS settings)."""
        return target.libpq_env(self.ws)

    def describe(self) -> dict[str, Any]:
        return {"host": self.host.name, "address": self.host.data_address}


# -- topologies ------------------------------------------------------------------------------------


def sync_names(method: str | None, count: int, names: list[str]) -> str:
    """synchronous_standby_names for ``FIRST k`` / ``ANY k`` over ``names``; '' for asynchronous."""
    if not method:
        return ""
    if method not in ("FIRST", "ANY"):
        raise UserError(f"synchronous method must be FIRST or ANY, not {method!r}")
    if not 1 <= count <= len(names):
        raise UserError(f"{method} {count}: needs between 1 and {len(names)} (the number of standbys)")
    return f"{method} {count} ({', '.join(names)})"


def expected_sync_states(method: str | None, count: int, names: list[str]) -> dict[str, set[str]]:
    """The pg_stat_replication.sync_state each standby reaches once all are connected."""
    if not method:
        return {n: {"async"} for n in names}
    if method == "ANY":
        return {n: {"quorum"} for n in names}
    return {n: ({"sync"} if i < count else {"potential"}) for i, n in enumerate(names)}


@dataclass
class Streaming:
    """A primary and its standbys (any hosts); ``method``/``count``: FIRST k or ANY k, None = async."""

    primary: Node
    standbys: list[Node]
    method: str | None = None
    count: int = 1
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.standbys]

    @property
    def synchronous_standby_names(self) -> str:
        return sync_names(self.method, self.count, self.names)

    def wait_sync_states(self, timeout: float = 60) -> dict[str, str]:
        """Until every standby streams with the sync_state its place in the list gives it."""
        want = expected_sync_states(self.method, self.count, self.names)
        deadline = time.monotonic() + timeout
        seen: dict[str, str] = {}
        while True:
            rows = self.primary.query("select application_name, state, sync_state from pg_stat_replication")
            seen = {name: sync for name, state, sync in rows if state == "streaming"}
            if all(seen.get(n) in states for n, states in want.items()):
                return {n: seen[n] for n in want}
            if time.monotonic() >= deadline:
                missing = {n: seen.get(n, "not streaming") for n, s in want.items() if seen.get(n) not in s}
                raise ProcessError(self.primary.host.name, "wait for the standbys' sync states", None, "",
                                   f"wanted {({n: sorted(s) for n, s in want.items()})}, have {missing}",
                                   timed_out=True)
            time.sleep(0.1)

    def wait_replay(self, timeout: float = 120) -> dict[str, float]:
        """Seconds until each standby replayed everything the primary had written when called."""
        return {s.name: self.primary.wait_for_replay(s, timeout) for s in self.standbys}

    def describe(self) -> dict[str, Any]:
        return {"primary": self.primary.describe(), "standbys": [s.describe() for s in self.standbys],
                "synchronous_standby_names": self.synchronous_standby_names}


def streaming(d: Deployment, primary_host: str, standbys: list[tuple[str, str]], *, method: str | None = None,
              count: int = 1, settings: dict[str, Any] | None = None, primary_name: str = "primary",
              start: bool = True, timeout: float = 60) -> Streaming:
    """Build (and by default start) a primary on ``primary_host`` and standbys ``[(name, host), ...]``.

    The synchronous names are set from the start, so every standby is in its expected state on return.
    """
    names = [n for n, _ in standbys]
    topo = Streaming(None, [], method, count, dict(settings or {}))  # type: ignore[arg-type]
    conf = {**topo.settings}
    wanted = sync_names(method, count, names)
    if wanted:
        conf["synchronous_standby_names"] = wanted
    d.open([primary_host, *(h for _, h in standbys)])
    topo.primary = d.node(primary_name, primary_host, conf)
    if not start:
        return topo
    topo.primary.start()
    for name, host in standbys:
        sb = d.standby(topo.primary, name, host)
        topo.standbys.append(sb)
        sb.start()
    topo.wait_sync_states(timeout)
    return topo


def logical_pair(d: Deployment, provider: tuple[str, str], subscriber: tuple[str, str],
                 settings: dict[str, Any] | None = None,
                 subscriber_build: builds.Build | None = None) -> tuple[Node, Node]:
    """Provider and subscriber ``(name, host)`` of a replication system, initialised and started; the subscriber
    on ``subscriber_build`` when given (logical replication across two majors)."""
    d.open([provider[1], subscriber[1]])
    nodes = (d.node(provider[0], provider[1], dict(settings or {})),
             d.node(subscriber[0], subscriber[1], dict(settings or {}), subscriber_build))
    for n in nodes:
        n.start()
    return nodes
