"""A registry build on another SSH host: copied there from this machine (``pglab builds push HOST BUILD``).

Why: pglab fetches builds on this machine only (a host of the run may not reach the npm registry, and the tarball is
verified here once). A lab host shares this machine's files, so it has every build already; another SSH host gets
the same verified tree, by the host's SSH connection, under its inventory entry's ``builds_dir`` (default: this
machine's path). The tree is unpacked beside its place, checked to run and report the catalogue's version there,
and renamed into place whole, as ``builds.fetch`` does here: a half-copied tree never counts as present, since
its marker (the tarball's integrity) is part of what is renamed.
"""

from __future__ import annotations

import json
import os
import posixpath
import tarfile
import tempfile

from pglab.errors import UserError
from pglab.hosts import builds
from pglab.hosts.base import Host
from pglab.hosts.inventory import HostEntry


def root_on(build: builds.Build, entry: HostEntry) -> str:
    """The build's tree on that host: under its ``builds_dir`` when it is an SSH host that names one, else where
    it is on this machine (the local host; a lab host, which shares this machine's files)."""
    if entry.kind == "ssh" and entry.builds_dir:
        return posixpath.join(entry.builds_dir, build.id)
    return str(builds.builds_dir() / build.id)


def bindir_on(build: builds.Build, entry: HostEntry) -> str:
    """Where the servers of ``build`` are on that host (Debian's: where apt put them, on every host)."""
    return builds.bindir(build) if build.family == "debian" else posixpath.join(root_on(build, entry), "bin")


def present_on(host: Host, build: builds.Build, entry: HostEntry) -> bool:
    """Ready to run there: Debian's bindir has ``postgres``; a registry tree has the marker of this very tarball."""
    if build.family == "debian":
        return host.run(["test", "-x", f"{builds.bindir(build)}/postgres"], check=False).exit_code == 0
    res = host.run(["cat", posixpath.join(root_on(build, entry), builds.MARKER)], check=False)
    try:
        return res.exit_code == 0 and builds.marks(json.loads(res.stdout), build)
    except ValueError:
        return False


def push(host: Host, entry: HostEntry, build: builds.Build, progress: bool = True) -> tuple[str, bool]:
    """``build`` ready to run on ``host``: (its bindir there, whether it was copied now). Fetched here first
    (offline once present); nothing is copied to a host that has it, or that shares this machine's files."""
    if build.family == "debian":
        raise UserError(f"build {build.id} is Debian's: install it on host {host.name} with apt-get install "
                        f"postgresql-{build.major}, it is not copied")
    builds.fetch(build, progress=progress)
    if present_on(host, build, entry):
        return bindir_on(build, entry), False
    final = root_on(build, entry)
    parent = posixpath.dirname(final)
    if host.run(["mkdir", "-p", parent], check=False).exit_code or host.run(["test", "-w", parent],
                                                                             check=False).exit_code:
        raise UserError(f"host {host.name}: {parent} cannot be made or written by {host.login_user}: make it there "
                        f"(writable by {host.login_user}, readable by the servers' user), or set builds_dir "
                        "in the inventory entry to a folder that is")
    staging = posixpath.join(parent, f".{build.id}-push-{os.getpid()}")
    with tempfile.NamedTemporaryFile(suffix=".tgz") as tgz:
        with tarfile.open(tgz.name, "w:gz") as tar:  # symlinks kept as links (libpq.so.5 -> libpq.so.5.13)
            tar.add(builds.builds_dir() / build.id, arcname=build.id)
        host.remove_tree(staging)
        host.mkdir(staging, mode=0o755)
        try:
            host.put(tgz.name, f"{staging}.tgz")
            host.run(["tar", "-xzf", f"{staging}.tgz", "-C", staging, "--no-same-owner"], timeout=600)
            got = host.run([posixpath.join(staging, build.id, "bin", "postgres"), "--version"], check=False)
            if build.version not in got.stdout.split():
                raise UserError(f"host {host.name}: the copy of {build.id} reports {got.stdout.strip() or got.stderr!r}"
                                f", not PostgreSQL {build.version}: it does not run there (another CPU or libc?)")
            host.remove_tree(final)  # a stale tree (an older tarball's, or half of one): replaced whole
            host.run(["mv", posixpath.join(staging, build.id), final])
        finally:
            host.run(["rm", "-f", f"{staging}.tgz"], check=False)
            host.remove_tree(staging)
    return bindir_on(build, entry), True
