"""Hosts: where commands run. One interface; the local and SSH implementations are in ``local`` and ``ssh``.

Everything above this module (nodes, runners, studies) is written once against ``Host``. The two
implementations differ only in how a shell command line reaches a shell: ``subprocess`` locally,
a fabric ``Connection`` remotely. Background processes, file writes and host facts are built on
``run`` so that they behave identically on both.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pglab.errors import ProcessError, UserError, redact

Command = Sequence[str] | str


@dataclass(frozen=True)
class Result:
    """What a finished command left: enough to write it to the raw store as it was."""

    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    def __repr__(self) -> str:
        """Redacted: a command's output may show a registered secret (``cat`` of a passfile)."""
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__)
        return redact(f"Result({fields})")


def command_line(argv: Command) -> str:
    """The shell-quoted form recorded in command.txt (secrets are never in argv: passfiles only)."""
    return argv if isinstance(argv, str) else shlex.join(argv)


def outside_ephemeral(low: int, high: int, ephemeral: str) -> list[int]:
    """The ports of ``low``..``high - 1`` outside the ephemeral range (``ip_local_port_range``'s "lo hi"); all of
    them when none is outside it (a range the user chose inside it is still honoured)."""
    bounds = [int(v) for v in ephemeral.split() if v.isdigit()]
    lo, hi = (bounds[0], bounds[1]) if len(bounds) == 2 else (0, -1)
    outside = [p for p in range(low, high) if not lo <= p <= hi]
    return outside or list(range(low, high))


class Host(ABC):
    """A machine that runs commands. ``login_user`` is who commands run as by default."""

    name: str
    is_local: bool
    # Where other hosts and clients reach this host's servers (inventory ``data_address``): PostgreSQL
    # listens there, and pg_hba admits exactly the data addresses of a run's hosts.
    data_address: str

    def __init__(self, name: str, server_user: str | None = None, data_address: str = "127.0.0.1"):
        self.name = name
        self._server_user = server_user
        self.data_address = data_address

    # -- the two primitives each implementation provides ------------------------------------
    @abstractmethod
    def _run_shell(self, line: str, timeout: float | None, stdin: str | None) -> tuple[int, str, str, bool]:
        """Run a shell command line; return (exit code, stdout, stderr, timed_out)."""

    @abstractmethod
    def put(self, local: str | Path, remote: str, mode: int = 0o600, owner: str | None = None) -> None:
        """Copy a local file to this host."""

    @abstractmethod
    def get(self, remote: str, local: str | Path, mode: int = 0o600) -> None:
        """Copy a file of this host to the local machine; the copy gets ``mode`` (0600: we cannot know
        what a file holds, so nobody else may read it unless the caller says so)."""

    @property
    @abstractmethod
    def login_user(self) -> str:
        """The OS user commands run as."""

    def close(self) -> None:  # noqa: B027  (a hook: only SSH hosts hold connections)
        """Release connections; a local host holds none."""

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- everything else is written once -------------------------------------------------------
    @property
    def server_user(self) -> str:
        """The OS user PostgreSQL runs as: never root (initdb and postgres refuse it)."""
        if self._server_user:
            return self._server_user
        if self.login_user == "root":
            return "postgres"
        return self.login_user

    def wrap(self, argv: Command, as_user: str | None = None, env: Mapping[str, str] | None = None) -> str:
        """The shell line for ``argv`` run as ``as_user`` with ``env`` set."""
        parts: list[str] = []
        if as_user and as_user != self.login_user:
            if self.login_user != "root":
                raise UserError(
                    f"host {self.name}: cannot run commands as {as_user!r} while logged in as "
                    f"{self.login_user!r}; set server_user to {self.login_user!r} in the inventory"
                )
            parts += ["runuser", "-u", as_user, "--"]
        if env:
            parts += ["env", *(f"{k}={v}" for k, v in env.items())]
        inner = argv if isinstance(argv, str) else shlex.join(argv)
        if not parts:
            return inner
        if isinstance(argv, str):
            return shlex.join([*parts, "sh", "-c", argv])
        return shlex.join(parts) + " " + inner

    def run(self, argv: Command, *, timeout: float | None = 120, check: bool = True,
            as_user: str | None = None, env: Mapping[str, str] | None = None,
            stdin: str | None = None) -> Result:
        """Run a command to completion. A timeout kills it; ``check`` raises ProcessError on failure."""
        line = self.wrap(argv, as_user, env)
        start = time.monotonic()
        code, out, err, timed_out = self._run_shell(line, timeout, stdin)
        result = Result(self.name, command_line(argv), code, out, err, time.monotonic() - start)
        if timed_out or (check and code != 0):
            raise ProcessError(self.name, result.command, None if timed_out else code, out, err, timed_out)
        return result

    def sh(self, script: str, **kw: object) -> Result:
        """Run a small shell script (our own, never user input)."""
        return self.run(["sh", "-c", script], **kw)  # type: ignore[arg-type]

    def write_text(self, path: str, text: str, mode: int = 0o600, owner: str | None = None) -> None:
        """Write a file on this host with ``mode`` set before any content lands (for passfiles)."""
        user = owner or self.login_user
        script = f"umask 077; cat > {shlex.quote(path)} && chmod {mode:o} {shlex.quote(path)}"
        self.run(["sh", "-c", script], as_user=user, stdin=text)

    def read_text(self, path: str) -> str:
        return self.run(["cat", path]).stdout

    def wait_for_file(self, path: str, timeout: float) -> str | None:
        """The text of ``path`` once it exists, or None after ``timeout`` seconds: one command polling on the
        host (one round trip, not one per poll)."""
        script = (f"i=0; while [ ! -e {shlex.quote(path)} ]; do sleep 0.05; i=$((i+1)); "
                  f"[ $i -gt {int(timeout * 20)} ] && exit {WAIT_EXPIRED}; done; cat {shlex.quote(path)}")
        res = self.run(["sh", "-c", script], check=False, timeout=timeout + 30)
        if res.exit_code == WAIT_EXPIRED:
            return None
        if res.exit_code != 0:
            raise ProcessError(self.name, f"wait for {path}", res.exit_code, res.stdout, res.stderr)
        return res.stdout

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path], check=False).exit_code == 0

    def mkdir(self, path: str, mode: int = 0o700, owner: str | None = None) -> None:
        self.run(["mkdir", "-p", "-m", f"{mode:o}", path])
        if owner and owner != self.login_user:
            self.run(["chown", owner, path])

    def remove_tree(self, path: str) -> None:
        self.run(["rm", "-rf", "--one-file-system", path])

    def pid_alive(self, pid: int) -> bool:
        return self.run(["kill", "-0", str(pid)], check=False).exit_code == 0

    def start(self, argv: Command, stdout_path: str, stderr_path: str, *, as_user: str | None = None,
              env: Mapping[str, str] | None = None) -> Background:
        """Start a command in its own session; its output goes to files on this host."""
        line = self.wrap(argv, as_user, env)
        rc_path = stdout_path + ".rc"
        body = (f"{line} > {shlex.quote(stdout_path)} 2> {shlex.quote(stderr_path)} < /dev/null; "
                f"echo $? > {shlex.quote(rc_path)}.tmp && mv {shlex.quote(rc_path)}.tmp {shlex.quote(rc_path)}")
        script = f"setsid sh -c {shlex.quote(body)} > /dev/null 2>&1 < /dev/null & echo $!"
        pid = int(self.run(["sh", "-c", script]).stdout.strip())
        return Background(self, command_line(argv), pid, stdout_path, stderr_path, rc_path)

    def free_port(self, low: int = 20000, high: int = 60000, exclude: set[int] | None = None) -> int:
        """A TCP port nobody listens on at this host's loopback (never 5432), outside the kernel's ephemeral
        range where ``low``-``high`` allows: a port drawn from it can be taken by an outgoing connection (SSH,
        a psycopg session) between this check and the server's bind, which CI saw as "Address already in use"."""
        script = ("cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0 0; "
                  "ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u")
        first, *rest = self.run(["sh", "-c", script]).stdout.split("\n", 1)
        used = {int(p) for p in "".join(rest).split() if p.isdigit()} | (exclude or set()) | {5432}
        candidates = outside_ephemeral(low, high, first)
        for _ in range(2000):
            port = candidates[uuid.uuid4().int % len(candidates)]
            if port not in used and self._port_bindable(port):
                return port
        raise UserError(f"host {self.name}: no free port in {low}-{high}")

    def _port_bindable(self, port: int) -> bool:
        return True

    def facts(self) -> dict[str, object]:
        """Host facts recorded with every run (pyperf-style environment capture)."""
        script = r"""
echo "hostname=$(hostname)"
echo "kernel=$(uname -srm)"
echo "cores=$(nproc)"
echo "mem_total_kb=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
echo "cpu_model=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
. /etc/os-release 2>/dev/null && echo "os=$PRETTY_NAME"
echo "disk_tmp=$(df -Pk /tmp | awk 'NR==2 {print $2" KiB total, "$4" KiB free, on "$1}')"
echo "user=$(id -un)"
echo "machine_id=$(cat /etc/machine-id 2>/dev/null || cat /var/lib/dbus/machine-id 2>/dev/null)"
echo "boot_id=$(cat /proc/sys/kernel/random/boot_id)"
echo "netns=$(readlink /proc/self/ns/net 2>/dev/null)"
"""
        out = self.run(["sh", "-c", script]).stdout
        facts: dict[str, object] = {"name": self.name, "kind": "local" if self.is_local else "ssh",
                                    "data_address": self.data_address}
        for line in out.splitlines():
            key, _, value = line.partition("=")
            facts[key] = int(value) if value.isdigit() else value or None  # a fact not found: null, not ""
        # Two hosts are one machine when machine id and boot id match (lab hosts: different netns only)
        facts["machine"] = f"{facts.get('machine_id', '?')}/{str(facts.get('boot_id', '?'))[:8]}"
        return facts

    def which(self, program: str) -> str | None:
        res = self.run(["sh", "-c", f"command -v {shlex.quote(program)}"], check=False)
        return res.stdout.strip() or None


# The wait loop's own exit code when its deadline passes: not 124, which SSHHost takes for the remote
# ``timeout`` command having killed the wait itself.
WAIT_EXPIRED = 99


@dataclass
class Background:
    """A process started by ``Host.start``: stop it by its session, never by name.

    ``exit_code`` is the command's exit code once seen, or minus the signal ``stop`` ended it with.
    """

    host: Host
    command: str
    pid: int
    stdout_path: str
    stderr_path: str
    rc_path: str
    exit_code: int | None = field(default=None)

    def wait(self, timeout: float) -> int:
        """Wait for the exit code; on timeout the process is stopped and ProcessError raised.

        Returns at once when the exit code is known already (also after ``stop``).
        """
        if self.exit_code is not None:
            return self.exit_code
        try:
            text = self.host.wait_for_file(self.rc_path, timeout)
        except ProcessError:  # the wait itself timed out or the connection broke: stop what we waited for
            self.stop()
            raise
        if text is None:
            self.stop()
            raise ProcessError(self.host.name, self.command, None, "", f"still running after {timeout:g} s; stopped",
                               timed_out=True)
        self.exit_code = int(text.strip())
        return self.exit_code

    def running(self) -> bool:
        return self.exit_code is None and not self.host.exists(self.rc_path)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the whole session, then SIGKILL what is left after ``grace_s``.

        Records the outcome in ``exit_code`` (the real one if the process had finished, else minus the
        signal), so that a later ``wait`` returns at once instead of waiting for an rc file that the
        killed session will never write.
        """
        pgid = str(self.pid)
        self.host.run(["kill", "-TERM", f"-{pgid}"], check=False)
        signum = signal.SIGTERM
        deadline = time.monotonic() + grace_s
        while self.host.run(["kill", "-0", f"-{pgid}"], check=False).exit_code == 0:
            if time.monotonic() >= deadline:
                self.host.run(["kill", "-KILL", f"-{pgid}"], check=False)
                signum = signal.SIGKILL
                break
            time.sleep(0.1)
        if self.exit_code is None:
            rc = self.host.run(["cat", self.rc_path], check=False).stdout.strip()
            self.exit_code = int(rc) if rc.lstrip("-").isdigit() else -int(signum)

    def output(self) -> tuple[str, str]:
        return self.host.read_text(self.stdout_path), self.host.read_text(self.stderr_path)


def stop_all(procs: list[Background], grace_s: float = 5.0) -> None:
    """``stop`` every process, the signals sent to all first: daemons that take their grace period to
    exit (slon, measured: 5 s each) then take it once, not one after the other."""
    for b in procs:
        if b.exit_code is None:
            b.host.run(["kill", "-TERM", f"-{b.pid}"], check=False)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(
            b.exit_code is None and b.host.run(["kill", "-0", f"-{b.pid}"], check=False).exit_code == 0 for b in procs):
        time.sleep(0.1)
    for b in procs:
        b.stop(grace_s=0.5)  # what is left is killed; each records its exit code


def _open_private(path: str | Path, mode: int):
    """``path`` opened for writing with ``mode`` from the first byte (an existing file is truncated
    and gets ``mode`` too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # the umask narrowed it, or the file existed with another mode
    return os.fdopen(fd, "wb")


def state_dir() -> Path:
    """pglab's own state on the control machine: ``$PGLAB_STATE_DIR``, else ``$XDG_STATE_HOME/pglab``."""
    if os.environ.get("PGLAB_STATE_DIR"):
        return Path(os.environ["PGLAB_STATE_DIR"])
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(xdg) / "pglab"
