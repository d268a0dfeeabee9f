"""Shared fixtures: the same cases run against a local host and an SSH host (a real sshd)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pglab.hosts import Host, LocalHost, SSHHost
from pglab.inventory import HostEntry, Inventory
from sshd import SshServer, sshd_server  # noqa: F401  (re-exported fixture)

REPO = Path(__file__).resolve().parents[1]


def ssh_entry(server: SshServer) -> HostEntry:
    return HostEntry(kind="ssh", address=server.host, port=server.port, user=server.user,
                     key_filename=server.key_filename, known_hosts=server.known_hosts, workdir=server.workdir)


@pytest.fixture(scope="session")
def inventory(sshd_server: SshServer) -> Inventory:  # noqa: F811
    """``local`` (this process's user; servers as postgres when root) and ``ssh`` (the test sshd)."""
    return Inventory(hosts={"local": HostEntry(), "ssh": ssh_entry(sshd_server)})


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest, inventory: Inventory) -> Iterator[Host]:
    h = inventory.connect(request.param)
    assert isinstance(h, LocalHost if request.param == "local" else SSHHost)
    yield h
    h.close()


def postgres_pids() -> set[int]:
    """PIDs of running postmasters (``postgres -D``), to prove nothing was left behind."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines()[1:] if " -D " in line and "postgres" in line
            and "/postgres " in line.split(None, 1)[1] + " "}


def children_of(pids: set[int]) -> set[int]:
    return {p for p in pids if os.path.exists(f"/proc/{p}")}
