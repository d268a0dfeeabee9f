"""Where a run's nodes and clients ran, and which of them shared a machine (from the manifest only).

Hosts are the inventory's names; a *machine* is what the host facts identify: machine id and boot id
(``Host.facts``). Lab hosts are network namespaces of one machine: different hosts and addresses, one
machine, one CPU. A claim that needs separate machines (a standby's reads independent of the primary's
load; read scale-out) is judged only when the hosts involved were on different machines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def machine(manifest: dict[str, Any], host: str) -> str:
    """The machine identity of inventory host ``host`` (runs recorded before machine ids: its hostname)."""
    facts = manifest.get("hosts", {}).get(host, {})
    if facts.get("machine_id"):
        return f"{facts['machine_id'][:12]}/{str(facts.get('boot_id', ''))[:8]}"
    return str(facts.get("hostname") or host)


def separate(manifest: dict[str, Any], one: Iterable[str], other: Iterable[str]) -> bool:
    """True when no host of ``one`` shares a machine with a host of ``other``."""
    a = {machine(manifest, h) for h in one}
    b = {machine(manifest, h) for h in other}
    return not (a & b)


def machines(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Machine identity -> the run's hosts on it."""
    out: dict[str, list[str]] = {}
    for host in manifest.get("hosts", {}):
        out.setdefault(machine(manifest, host), []).append(host)
    return out


def summary(manifest: dict[str, Any], text: Callable[[str], str] = str) -> str:
    """One sentence for a notebook: how many hosts on how many machines, and what that means. ``text`` shows a
    host's or machine's name (``analysis.text.escape_text`` in markdown: names come from the inventory)."""
    hosts, ms = list(manifest.get("hosts", {})), machines(manifest)
    if len(hosts) <= 1:
        return (f"Everything ran on one host ({', '.join(map(text, hosts)) or '?'}): nodes, daemons and clients "
                "shared its cores, disk and memory, and replication crossed no network.")
    if len(ms) == 1:
        netns = {f.get("netns") for f in manifest["hosts"].values()}
        how = "network namespaces (a pglab lab)" if len(netns) == len(hosts) else "hosts"
        return (f"{len(hosts)} hosts ({', '.join(map(text, hosts))}) as {how} on ONE machine: every connection "
                "crossed TCP between different addresses, but all shared one CPU, disk and kernel, so load on one "
                "host slows the others and throughput is not that of separate machines.")
    return (f"{len(hosts)} hosts on {len(ms)} machines: "
            + "; ".join(f"{', '.join(map(text, v))} on machine {text(k)}" for k, v in ms.items()) + ".")


def hosts_table(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per host of the run: address, machine identity, network namespace, size."""
    rows = []
    for name, f in manifest.get("hosts", {}).items():
        rows.append({"host": name, "kind": f.get("kind"), "data_address": f.get("data_address", "127.0.0.1"),
                     "machine": machine(manifest, name), "netns": f.get("netns"), "hostname": f.get("hostname"),
                     "cores": f.get("cores"), "mem_total_kb": f.get("mem_total_kb"), "cpu_model": f.get("cpu_model"),
                     "os": f.get("os")})
    return rows


def nodes_table(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node and per client host: role, host, address, machine."""
    rows = [{"what": n["name"], "role": n["role"], "host": n["host"],
             "address": f"{n.get('address', '127.0.0.1')}:{n['port']}", "tls": n.get("tls", False),
             "machine": machine(manifest, n["host"])} for n in manifest.get("nodes", [])]
    clients = manifest.get("topology", {}).get("clients") or {}
    if "client" in manifest.get("topology", {}):
        clients = {"pgbench": manifest["topology"]["client"]}
    for target, c in clients.items():
        rows.append({"what": f"pgbench -> {target}" if target != "pgbench" else "pgbench", "role": "client",
                     "host": c.get("host"), "address": c.get("address"), "tls": None,
                     "machine": machine(manifest, str(c.get("host")))})
    return rows
