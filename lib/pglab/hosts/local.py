"""The local host: commands run through ``subprocess`` on this machine, as the user running pglab."""

from __future__ import annotations

import contextlib
import getpass
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from pglab.hosts import port_claims
from pglab.hosts.base import Host, _open_private


class LocalHost(Host):
    """This machine, through subprocess."""

    is_local = True

    def __init__(self, name: str = "local", server_user: str | None = None, data_address: str = "127.0.0.1"):
        super().__init__(name, server_user, data_address)
        self._user = getpass.getuser()

    @property
    def login_user(self) -> str:
        return self._user

    def read_text(self, path: str) -> str:
        """Without a subprocess (same user, same answer)."""
        return Path(path).read_text()

    def exists(self, path: str) -> bool:
        """Without a subprocess: polled 20 times a second while a benchmark runs (same user, same answer)."""
        return os.path.exists(path)

    def wait_for_file(self, path: str, timeout: float) -> str | None:
        """Polled here: a subprocess per wait cost pglab more CPU than the polls (every point waits for
        several background programs)."""
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        return Path(path).read_text()

    def mkdir(self, path: str, mode: int = 0o700, owner: str | None = None) -> None:
        """As ``mkdir -p -m`` (the mode only on a directory it creates) without a subprocess: every point
        makes folders."""
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode)
        if owner and owner != self.login_user:
            shutil.chown(path, owner)

    def _run_shell(self, line: str, timeout: float | None, stdin: str | None) -> tuple[int, str, str, bool]:
        proc = subprocess.Popen(
            ["sh", "-c", line], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
            return proc.returncode, out, err, False
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            return -9, out, err, True
        except BaseException:
            # Ctrl-C or SIGTERM while waiting: the child's session must not outlive us.
            _kill_group(proc.pid)
            proc.wait()
            raise

    def put(self, local: str | Path, remote: str, mode: int = 0o600, owner: str | None = None) -> None:
        if str(local) != remote:
            shutil.copyfile(local, remote)
        os.chmod(remote, mode)
        if owner and owner != self._user:
            pw = pwd.getpwnam(owner)
            os.chown(remote, pw.pw_uid, pw.pw_gid)

    def get(self, remote: str, local: str | Path, mode: int = 0o600) -> None:
        if str(local) == remote:
            return
        with open(remote, "rb") as src, _open_private(local, mode) as dst:
            shutil.copyfileobj(src, dst)

    def _port_bindable(self, port: int) -> bool:
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return port_claims.claim(port)  # another process may have chosen it and not yet bound it


def _kill_group(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.2)
