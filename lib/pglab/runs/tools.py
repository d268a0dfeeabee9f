"""The manifest's ``tools``: the version of every program a study runs, read on the host it runs on.

Why one way: ``pglab compare`` and the analysis refuse to mix runs whose tools differ
(``pglab.analysis.comparable``), so every study must record them alike: each program's own ``--version``
(from the bindir it is run from), the Debian version of packages that have no such flag (replication
daemons), and what the study adds itself (a program of pglab's, sysbench's own answer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pglab.hosts.base import Host
from pglab.runs.store import RunStore


def versions(host: Host, bindir: str | Callable[[str], str], programs: Iterable[str]) -> dict[str, str]:
    """``<bindir>/<program> --version`` of each program on ``host`` (a ProcessError if one cannot say);
    ``bindir`` may be a node's ``bin``, which knows a build's server programs from the host's clients."""
    path = bindir if callable(bindir) else (lambda prog: f"{bindir}/{prog}")
    return {prog: host.run([path(prog), "--version"]).stdout.strip() for prog in programs}


def debian_versions(host: Host, packages: Iterable[str]) -> dict[str, str]:
    """The installed version of each Debian package on ``host`` (those not installed are left out)."""
    packages = list(packages)
    if not packages:
        return {}
    res = host.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *packages], check=False)
    out = {}
    for line in res.stdout.splitlines():
        pkg, _, version = line.partition(" ")
        out[pkg] = version
    return out


def record(store: RunStore, *found: Mapping[str, str]) -> dict[str, str]:
    """Write the tools found (later mappings win) to the manifest, whole."""
    tools: dict[str, str] = {}
    for f in found:
        tools.update(f)
    store.manifest["tools"] = tools
    store.save()
    return tools
