"""Start and stop a real, unprivileged OpenSSH server on 127.0.0.1 for tests.

Why: the SSH host code must be tested against a real sshd (real auth, real
host-key checks, real exit codes), and the "remote" account must behave like
a normal user, so sshd runs as that user (``postgres`` by default when the
tests run as root) and never touches the system's sshd, port 22 or /run/sshd.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pglab.hosts.lab.sshd import KEY_ONLY

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
DEFAULT_ROOT_USER = "postgres"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
_RESERVED_PORTS = {22, 5432}


@dataclass(frozen=True)
class SshServer:
    """Everything a client needs to log in to the test sshd with strict host-key checks."""

    host: str
    port: int
    user: str
    key_filename: str
    known_hosts: str
    pid: int
    workdir: str


def _free_port() -> int:
    """A free port on 127.0.0.1 the way pglab picks a node's (outside the ephemeral range, never 22 or 5432)."""
    from pglab.hosts.local import LocalHost

    return LocalHost().free_port(20000, 60000, exclude=set(_RESERVED_PORTS))


def _port_open(host: str, port: int) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _keygen(path: Path) -> str:
    """Make an ed25519 key pair without passphrase; return the public key line."""
    subprocess.run(
        [SSH_KEYGEN, "-t", "ed25519", "-N", "", "-q", "-C", "pglab-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_name(path.name + ".pub").read_text().strip()


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, starttime) of a process from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _pid_alive(pid: int) -> bool:
    """True while a process with this PID exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def _descendants(root: int) -> list[list[tuple[int, int]]]:
    """(pid, starttime) of the live descendants of root, one list per depth, deepest first.

    sshd puts each connection in its own session (setsid), so its process
    group does not cover them; the /proc parent links do.
    """
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and stat[0] != "Z":
                children.setdefault(stat[1], []).append((int(entry.name), stat[2]))
    levels: list[list[tuple[int, int]]] = []
    level = children.get(root, [])
    while level:
        levels.insert(0, level)
        level = [c for pid, _ in level for c in children.get(pid, [])]
    return levels


def _same_process_alive(pid: int, starttime: int) -> bool:
    """True if pid is still the very process we saw (guards against PID reuse)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z" and stat[2] == starttime


def _sshd_config(tmp: Path, port: int, user: str) -> str:
    """Config that needs no root: own host key, absolute authorized_keys, no PAM."""
    return "\n".join(
        [
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            "AddressFamily inet",
            f"HostKey {tmp / 'ssh_host_ed25519_key'}",
            f"PidFile {tmp / 'run' / 'sshd.pid'}",
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}",
            f"AllowUsers {user}",
            "PermitRootLogin no",
            *KEY_ONLY,  # the lab's sshd options, the same here
            # many parallel logins must not be dropped at random (default 10:30:100)
            "MaxStartups 200",
            "MaxSessions 64",
            "LogLevel VERBOSE",
            "",
        ]
    )


def _awaiting_reap(pid: int, starttime: int) -> bool:
    """True while that process runs, or is a zombie its (sshd) parent has yet to reap."""
    stat = _proc_stat(pid)
    return stat is not None and stat[2] == starttime and (stat[0] != "Z" or stat[1] != 1)


def _end_level(procs: list[tuple[int, int]]) -> None:
    """SIGTERM (then SIGKILL) these processes and wait until their parents reaped them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, start in procs:
            if _same_process_alive(pid, start):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_TIMEOUT / 2
        while time.monotonic() < deadline:
            if not any(_awaiting_reap(pid, start) for pid, start in procs):
                return
            time.sleep(0.02)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop sshd by its own PID (SIGTERM, wait, SIGKILL if it lingers).

    Its live sessions are ended first, by PID, because the listener does not
    end them itself. Daemons that left the session (pg_ctl start) are not
    touched: whoever started them must stop them.
    """
    if proc.returncode is None:
        levels = _descendants(proc.pid)
        # Commands run in sessions (depth >= 3), leaves first; then the
        # per-connection monitors (depth 1), which forward SIGTERM to their
        # "user@notty" child (depth 2). That child may still end up a zombie
        # of PID 1 for a while (harmless; a lazy init reaps it late).
        for level in levels[:-2]:
            _end_level(level)
        if levels:
            _end_level(levels[-1])
        for level in levels:
            for pid, start in level:
                if _same_process_alive(pid, start):
                    os.kill(pid, signal.SIGKILL)
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
    if _pid_alive(proc.pid):
        raise RuntimeError(f"sshd pid {proc.pid} still exists after stop")


def _start(
    tmp: Path, config: Path, log: Path, port: int, pw: pwd.struct_passwd, as_root: bool
) -> subprocess.Popen[bytes]:
    """Launch sshd in the foreground; as root, drop to the target user directly
    (Popen user=/group=, not runuser) so the PID we hold is sshd's own."""
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": pw.pw_dir,
        "USER": pw.pw_name,
        "LOGNAME": pw.pw_name,
        "LANG": "C.UTF-8",
    }
    drop: dict[str, object] = {}
    if as_root:
        drop = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    with open(log, "ab") as log_fh:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            cwd=str(tmp),
            env=env,
            start_new_session=True,
            **drop,  # type: ignore[arg-type]
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if _port_open("127.0.0.1", port):
            return proc
        time.sleep(0.05)
    _stop(proc)
    raise RuntimeError(
        f"sshd did not accept connections on 127.0.0.1:{port} "
        f"(exit {proc.returncode}); log:\n{log.read_text(errors='replace')}"
    )


@contextmanager
def running_sshd(user: str | None = None) -> Iterator[SshServer]:
    """Run a throwaway sshd as an unprivileged user; always stop it and clean up.

    As root the server runs as (and accepts logins for) ``user`` or
    ``postgres``; otherwise it runs as, and only accepts, the current user.
    """
    as_root = os.geteuid() == 0
    if as_root:
        name = user or DEFAULT_ROOT_USER
    else:
        name = pwd.getpwuid(os.geteuid()).pw_name
        if user is not None and user != name:
            raise ValueError(f"not root: sshd can only log in as {name!r}, not {user!r}")
    pw = pwd.getpwnam(name)
    if as_root and pw.pw_uid == 0:
        raise ValueError("the test sshd must run as an unprivileged user, not root")

    tmp = Path(tempfile.mkdtemp(prefix="pglab-sshd-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        tmp.chmod(0o755)  # the unprivileged sshd must traverse it
        host_pub = _keygen(tmp / "ssh_host_ed25519_key")
        client_pub = _keygen(tmp / "client_ed25519")
        (tmp / "authorized_keys").write_text(client_pub + "\n")
        workdir = tmp / "remote"
        workdir.mkdir(mode=0o700)
        (tmp / "run").mkdir(mode=0o755)  # PidFile lives here: the sshd user must write it

        # sshd (as pw) reads these; the client key stays 0600, owned by us.
        owned = ["ssh_host_ed25519_key", "ssh_host_ed25519_key.pub", "authorized_keys"]
        if as_root:
            for rel in [*owned, "remote", "run"]:
                os.chown(tmp / rel, pw.pw_uid, pw.pw_gid)
        (tmp / "ssh_host_ed25519_key").chmod(0o600)
        (tmp / "authorized_keys").chmod(0o644)
        (tmp / "client_ed25519").chmod(0o600)
        workdir.chmod(0o700)

        log = tmp / "sshd.log"
        last_error: RuntimeError | None = None
        for _attempt in range(3):  # a chosen port can be taken before sshd binds it
            port = _free_port()
            host_type, host_b64 = host_pub.split()[:2]
            known_hosts = tmp / "known_hosts"
            known_hosts.write_text(f"[127.0.0.1]:{port} {host_type} {host_b64}\n")
            config = tmp / "sshd_config"
            config.write_text(_sshd_config(tmp, port, name))
            config.chmod(0o644)
            try:
                proc = _start(tmp, config, log, port, pw, as_root)
                break
            except RuntimeError as exc:
                last_error = exc
                if "Address already in use" not in str(exc):
                    raise
        else:
            assert last_error is not None
            raise last_error

        yield SshServer(
            host="127.0.0.1",
            port=port,
            user=name,
            key_filename=str(tmp / "client_ed25519"),
            known_hosts=str(known_hosts),
            pid=proc.pid,
            workdir=str(workdir),
        )
    finally:
        try:
            if proc is not None:
                _stop(proc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def sshd_server() -> Iterator[SshServer]:
    """One real sshd shared by the whole test session (startup costs ~0.1-0.5 s)."""
    with running_sshd() as server:
        yield server


__all__ = ["SshServer", "running_sshd", "sshd_server"]
