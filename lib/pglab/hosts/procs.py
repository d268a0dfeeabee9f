"""Who a PID is: the facts that tell a process pglab started from one that got its PID later.

A PID alone proves nothing once its process is gone: the kernel hands it to the next process. So for
every process pglab starts, the run manifest records the host's boot id, the process's start time
(clock ticks since boot, field 22 of ``/proc/<pid>/stat``) and its command line. ``pglab cleanup``
signals a PID only while all three still match (``mismatch`` returns None).

Everything is read through ``Host.read_text``, so the same code works on the control machine and
over SSH.
"""

from __future__ import annotations

import time
from typing import Any

from pglab.errors import ProcessError
from pglab.hosts.base import Host

BOOT_ID = "/proc/sys/kernel/random/boot_id"
_READ_ERRORS = (OSError, ValueError, ProcessError)  # gone (local: OSError, ssh: ProcessError) or undecodable


def boot_id(host: Host) -> str:
    """Changes at every boot: a PID recorded under another boot id is somebody else's now."""
    return host.read_text(BOOT_ID).strip()


def parse_start_time(stat: str) -> int:
    """Field 22 of a ``/proc/<pid>/stat`` line. The command name (field 2) may hold spaces and
    parentheses, so fields are counted after the last ')'."""
    rest = stat.rsplit(")", 1)[1].split()
    return int(rest[22 - 3])  # rest[0] is field 3 (state)


def start_time(host: Host, pid: int) -> int | None:
    """Clock ticks after boot at which ``pid`` started; None if there is no such process."""
    try:
        return parse_start_time(host.read_text(f"/proc/{int(pid)}/stat"))
    except (*_READ_ERRORS, IndexError):
        return None


def parse_cmdline(raw: str) -> list[str]:
    """``/proc/<pid>/cmdline``: every argument ends with a NUL (a process that rewrote it may not)."""
    if not raw:
        return []
    return (raw[:-1] if raw.endswith("\0") else raw).split("\0")


def cmdline(host: Host, pid: int) -> list[str] | None:
    """The argument vector of ``pid``; None if there is no such process."""
    try:
        return parse_cmdline(host.read_text(f"/proc/{int(pid)}/cmdline"))
    except _READ_ERRORS:
        return None


def identity(host: Host, pid: int, boot: str | None = None) -> dict[str, Any] | None:
    """``{"boot_id", "start_time", "cmdline"}`` of a running ``pid``, or None if it is gone.

    The start time is read before and after the command line: if they differ, the PID changed hands
    in between and the reading is not one process's.
    """
    before = start_time(host, pid)
    argv = cmdline(host, pid)
    after = start_time(host, pid)
    if before is None or argv is None or before != after:
        return None
    return {"boot_id": boot or boot_id(host), "start_time": before, "cmdline": argv}


def _launcher_done(argv: list[str]) -> bool:
    """``Host.start`` runs ``sh -c "setsid sh -c BODY & echo $!"``: the PID it prints shows the
    launcher's command line until the fork has exec'd setsid, then ``setsid sh -c BODY`` until setsid
    has exec'd the shell. Only ``sh -c BODY`` stays. An empty command line is read while a process
    is in the middle of an exec (seen under load): not done either."""
    if not argv or argv[:1] == ["setsid"]:
        return False
    return not (len(argv) >= 3 and argv[1] == "-c" and argv[2].startswith("setsid "))


def started_identity(host: Host, pid: int, boot: str | None = None, settle_s: float = 2.0) -> dict[str, Any] | None:
    """As ``identity`` for a PID ``Host.start`` returned, read once it runs its own command line
    (a cleanup compares against what the process shows for the rest of its life)."""
    deadline = time.monotonic() + settle_s
    while True:
        ident = identity(host, pid, boot)
        if ident is None or _launcher_done(ident["cmdline"]) or time.monotonic() >= deadline:
            return ident
        time.sleep(0.01)


def mismatch(host: Host, pid: int, recorded: dict[str, Any], boot: str | None = None) -> str | None:
    """None when ``pid`` on ``host`` is still the process ``recorded`` describes, else why not.

    ``"gone"`` means no process has that PID now; anything else means the PID must not be signalled.
    """
    if not all(k in recorded for k in ("boot_id", "start_time", "cmdline")):
        return "no identity recorded (boot id, start time, command line): cannot prove it is the same process"
    now_boot = boot or boot_id(host)
    if recorded["boot_id"] != now_boot:
        return "the host has rebooted since"
    current = identity(host, pid, now_boot)
    if current is None:
        return "gone"
    if current["start_time"] != recorded["start_time"]:
        return f"started at another time (tick {current['start_time']}, recorded {recorded['start_time']})"
    if current["cmdline"] != list(recorded["cmdline"]):
        return f"runs another command ({' '.join(current['cmdline'])[:80]!r})"
    return None
