"""Whether a stopped process group is gone: the session's close and ``pglab cleanup`` both wait for it.

A process counts while anything of its group runs (a shell's children), zombies excepted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pglab.hosts.base import Host


def group_alive(host: Host, pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies, already dead, do not count)."""
    out = host.run(["ps", "-e", "-o", "pgid=,stat="], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == str(pgid) and not parts[1].startswith("Z"):
            return True
    return False


def wait_until(done: Callable[[], bool], timeout: float) -> bool:
    """A stopped process takes a moment to go: poll ``done`` until it holds (True) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
