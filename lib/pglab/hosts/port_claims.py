"""Ports claimed on this machine between their choice and the server's bind.

A free port is only free until someone binds it: two processes (two pytest workers, two runs) that pick
the same port before either server starts both see it free, and the second postmaster fails with
"Address already in use" (CI saw it on a logical-replication test). A claim is a file named for the port,
made with O_EXCL, holding the claimer's pid; it stands while that process lives and for ``CLAIM_S``
seconds, long enough for the initdb and start that follow, after which the listening socket itself
keeps the port out of ``free_port``. Each new claim removes the claims that lapsed long ago (``prune``), so
the folder holds about the ports drawn in the last ``2 x CLAIM_S``, not every port ever drawn.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

CLAIM_S = 900.0


def claims_dir() -> Path:
    """One place for every process on the machine: not $TMPDIR, which two processes may set apart."""
    path = Path(os.environ.get("PGLAB_PORT_CLAIMS") or "/tmp/pglab-port-claims")
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # shared by every user, as /tmp is (the umask would narrow it)
            path.chmod(0o1777)
    return path


def _stale(path: Path) -> bool:
    try:
        pid = int(path.read_text().strip() or 0)
        age = time.time() - path.stat().st_mtime
    except (OSError, ValueError):
        return True
    if age > CLAIM_S:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim(port: int) -> bool:
    """True when this process now holds ``port``'s claim; False when a live process holds it."""
    try:
        path = claims_dir() / str(port)
    except OSError:
        return True  # nowhere to claim (a read-only /tmp): the port is drawn as before claims existed
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            if not _stale(path):
                return False
            with contextlib.suppress(OSError):  # another user's: it lapses, it is not ours to remove
                path.unlink(missing_ok=True)  # a dead or old claim: take it over once
            continue
        except OSError:
            return True  # the folder is not writable for this user: drawn as before claims existed
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        prune(path.parent)
        return True
    return False


def prune(folder: Path) -> int:
    """Remove the claims older than twice ``CLAIM_S`` (lapsed whoever made them); how many went. A claim taken over
    between the age read and the removal would be lost (microseconds; the port is then drawn as before claims
    existed); a claim of another user stays."""
    gone, cutoff = 0, time.time() - 2 * CLAIM_S
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for e in entries:
            with contextlib.suppress(OSError):
                if e.name.isdigit() and e.stat().st_mtime < cutoff:
                    os.unlink(e.path)
                    gone += 1
    return gone
