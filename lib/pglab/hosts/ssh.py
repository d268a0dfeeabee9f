"""SSH hosts: commands run through fabric, with host keys checked against known_hosts files only.

fabric and paramiko are imported when an SSH host is made or used, not with this module: a run on local
hosts only never loads them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from pglab.errors import UserError
from pglab.hosts.base import Host, _open_private, state_dir

if TYPE_CHECKING:
    from pglab.hosts.forward import Forward


def learned_host_keys() -> Path:
    """Host keys pglab accepted for hosts with ``accept_unknown_host_key`` (never the user's known_hosts)."""
    return state_dir() / "known_hosts"


class SSHHost(Host):
    """A remote machine through fabric. Host keys are verified against known_hosts.

    fabric accepts any host key by default (AutoAddPolicy); we load the configured known_hosts file
    (read only: paramiko would otherwise save its whole key set back to it, dropping lines it cannot
    parse) and reject unknown keys unless the inventory entry opts in with ``accept_unknown_host_key``.
    Keys accepted that way are recorded in pglab's own file (``learned_host_keys``) and checked on
    later connections, so a changed key is still refused.
    """

    is_local = False

    def __init__(self, name: str, address: str, user: str, port: int = 22,
                 key_filename: str | None = None, known_hosts: str | None = None,
                 accept_unknown_host_key: bool = False, server_user: str | None = None,
                 connect_timeout: float = 15, data_address: str | None = None):
        super().__init__(name, server_user, data_address or "127.0.0.1")
        import fabric
        import paramiko

        self.address = address
        self.port = port
        self._user = user
        connect_kwargs: dict[str, object] = {"look_for_keys": key_filename is None, "allow_agent": True}
        if key_filename:
            connect_kwargs.update(key_filename=os.path.expanduser(key_filename), allow_agent=False)
        self.conn = fabric.Connection(address, user=user, port=port, connect_kwargs=connect_kwargs,
                                      connect_timeout=connect_timeout)
        client = self.conn.client
        client._host_keys.clear()  # only the files named here count
        client._system_host_keys.clear()
        client._host_keys_filename = None  # nothing is ever saved back to a file we read
        kh = os.path.expanduser(known_hosts or "~/.ssh/known_hosts")
        if os.path.exists(kh):
            _load_known_hosts(client.get_host_keys(), kh)
        elif not accept_unknown_host_key:
            raise UserError(f"host {name}: known_hosts file {kh} does not exist "
                            f"(or set accept_unknown_host_key: true for this host)")
        policy: object = paramiko.RejectPolicy()
        if accept_unknown_host_key:
            learned = learned_host_keys()
            if learned.exists():
                _load_known_hosts(client.get_host_keys(), str(learned))
            policy = _RecordPolicy(learned)
        client.set_missing_host_key_policy(policy)
        self._tunnels = contextlib.ExitStack()
        self._tunnel_ports: dict[tuple[str, int], Forward] = {}

    @property
    def login_user(self) -> str:
        return self._user

    def open(self) -> None:
        """Connect now (host key checked here), so that preflight fails before anything starts."""
        import paramiko

        try:
            self.conn.open()
        except paramiko.SSHException as exc:
            raise UserError(f"host {self.name} ({self.address}:{self.port}): {exc}") from exc

    def _run_shell(self, line: str, timeout: float | None, stdin: str | None) -> tuple[int, str, str, bool]:
        from invoke.exceptions import CommandTimedOut

        remote_line = line
        if timeout:
            # The remote side enforces the timeout too, so nothing outlives a dropped wait.
            remote_line = f"timeout -k 5 {int(timeout) + 1} sh -c {shlex.quote(line)}"
        try:
            res = self.conn.run(remote_line, hide=True, warn=True, pty=False, timeout=(timeout + 15) if timeout
                                else None, in_stream=_WholeStream(stdin) if stdin is not None else False)
        except CommandTimedOut as exc:
            return -9, exc.result.stdout, exc.result.stderr, True
        timed_out = bool(timeout) and res.exited == 124
        return res.exited, res.stdout, res.stderr, timed_out

    def put(self, local: str | Path, remote: str, mode: int = 0o600, owner: str | None = None) -> None:
        self.conn.put(str(local), remote)
        self.run(["chmod", f"{mode:o}", remote])
        if owner and owner != self._user:
            self.run(["chown", owner, remote])

    def get(self, remote: str, local: str | Path, mode: int = 0o600) -> None:
        with _open_private(local, mode) as dst:
            self.conn.get(remote, dst)

    def tunnel(self, remote_port: int, remote_host: str = "127.0.0.1", fresh: bool = False) -> int:
        """Forward a local port to remote_host:remote_port as seen from this host; closed with the host.

        ``fresh``: a new forward even if one exists (the old one stays open until the host closes).
        """
        from pglab.hosts.forward import Forward

        key = (remote_host, remote_port)
        if key in self._tunnel_ports and not fresh:
            return self._tunnel_ports[key].port
        self.conn.open()  # no-op when connected; reconnects after the transport dropped
        forward = Forward(self.conn.transport, key)
        self._tunnels.callback(forward.close)
        self._tunnel_ports[key] = forward
        return forward.port

    def tunnel_error(self, local_port: int) -> str | None:
        """Why the forward on ``local_port`` last failed to open a channel, if it did (for error messages)."""
        return next((f.last_error for f in self._tunnel_ports.values() if f.port == local_port), None)

    def close(self) -> None:
        self._tunnels.close()
        self._tunnel_ports.clear()
        self.conn.close()


def _load_known_hosts(keys: object, path: str) -> None:
    """Add the entries of an OpenSSH known_hosts file to paramiko ``keys``, reading it only.

    Lines paramiko cannot parse (markers such as @cert-authority, key types it does not know, bad
    base64) are skipped: paramiko's own loader stops at some of them, and its save would drop them.
    """
    from paramiko.hostkeys import HostKeyEntry

    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                entry = HostKeyEntry.from_line(line, lineno)
            except Exception:  # noqa: BLE001  (InvalidHostKey is no SSHException): skip the line
                continue
            if entry is not None and entry.key is not None:
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)  # type: ignore[attr-defined]


class _WholeStream(io.StringIO):
    """stdin for invoke that hands over everything in one read.

    invoke reads a stream without a terminal one byte per 10 ms loop (``bytes_to_read`` is 1), which
    made writing a 5 kB file over SSH take 50 s.
    """

    def read(self, size: int | None = -1) -> str:
        return super().read()


class _RecordPolicy:
    """Accept an unknown host key and append it to pglab's own known_hosts (0600, in a 0700 dir).

    A paramiko MissingHostKeyPolicy by duck typing (paramiko is imported only when SSH is used).
    """

    def __init__(self, path: Path):
        self.path = path

    def missing_host_key(self, client: object, hostname: str, key: object) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)  # type: ignore[attr-defined]
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")  # type: ignore[attr-defined]
