"""The lab's network on this machine: ``ip`` and other commands, namespaces, the bridge, veth pairs,
addresses, and the /24 each lab gets.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pglab.errors import UserError
from pglab.hosts import procs
from pglab.hosts.lab.processes import _alive
from pglab.hosts.lab.state import (
    ALIAS_PREFIX,
    BRIDGE_HOST,
    DEFAULT_NAME,
    LAB_NETWORK,
    SUBNETS,
    Echo,
    Lab,
    LabError,
    LabHost,
    load,
    names,
    subnet_of,
)
from pglab.hosts.local import LocalHost

NETNS_DIR = Path("/run/netns")
_TOOL_DIRS = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CMD_TIMEOUT = 30.0


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError("the lab needs root: network namespaces, veth links, a bridge and an sshd on port 22 per "
                        "host can only be made by root; run it as root (e.g. `sudo pglab lab up 3`)")


def _tool(program: str) -> str | None:
    return shutil.which(program, path=os.environ.get("PATH", "") + ":" + _TOOL_DIRS)


def require_tools() -> None:
    missing = []
    if not _tool("ip"):
        missing.append("`ip` (install the Debian package iproute2)")
    if not os.access("/usr/sbin/sshd", os.X_OK):
        missing.append("/usr/sbin/sshd (install the Debian package openssh-server)")
    if not _tool("ssh-keygen"):
        missing.append("`ssh-keygen` (install the Debian package openssh-client)")
    if missing:
        raise UserError("the lab needs " + ", ".join(missing))


def _run(argv: Sequence[str], check: bool = True, timeout: float = _CMD_TIMEOUT,
         input: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = list(argv)
    exe = _tool(argv[0]) if "/" not in argv[0] else argv[0]
    try:
        res = subprocess.run([exe or argv[0], *argv[1:]], capture_output=True, text=True, timeout=timeout,
                             input=input, stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(argv)}` did not finish in {timeout:g} s") from None
    except FileNotFoundError:
        raise LabError(f"`{argv[0]}` not found") from None
    if check and res.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed (exit {res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
    return res


def _ip_json(*args: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """``ip -j <args>`` (in ``namespace``) parsed; [] when the object does not exist."""
    argv = ["ip", *(["-n", namespace] if namespace else []), "-j", *args]
    res = _run(argv, check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    try:
        return json.loads(res.stdout)
    except ValueError:
        return []


def run_in(namespace: str, argv: Sequence[str], *, lab_name: str = DEFAULT_NAME, check: bool = False,
           timeout: float = _CMD_TIMEOUT, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside a lab host's network namespace (``ip netns exec``) and return what it did.

    ``namespace`` is a namespace name (``pglab-lab-1``) or a host of lab ``lab_name`` (``lab1``).
    """
    if not (NETNS_DIR / namespace).exists() and re.fullmatch(r"lab\d+", namespace):
        lab = load(lab_name)
        if lab is not None:
            namespace = lab.host(namespace).namespace
    return _run(["ip", "netns", "exec", namespace, *argv], check=check, timeout=timeout, input=input)


def _netns_inode(namespace: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / namespace).st_ino
    except OSError:
        return None


def _proc_netns_inode(pid: int) -> int | None:
    try:
        return int(os.readlink(f"/proc/{pid}/ns/net").split("[", 1)[1].rstrip("]"))
    except (OSError, IndexError, ValueError):
        return None


def _stray_namespaces(name: str) -> list[str]:
    pattern = re.compile(rf"^pglab-{re.escape(name)}-\d+$")
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if pattern.match(p.name))
    except OSError:
        return []


def _links() -> list[dict[str, Any]]:
    return _ip_json("link", "show") if _tool("ip") else []


def _aliased_links(name: str) -> list[dict[str, Any]]:
    return [link for link in _links() if link.get("ifalias") == ALIAS_PREFIX + name]


def _link_exists(ifname: str, namespace: str | None = None) -> bool:
    argv = ["ip", *(["-n", namespace] if namespace else []), "link", "show", "dev", ifname]
    return _run(argv, check=False).returncode == 0


def _used_subnets(name: str) -> dict[int, str]:
    """/24 indexes in use, and by whom: other labs' state, and any address or route of this machine."""
    used: dict[int, str] = {}
    for other in names():
        if other == name:
            continue
        with contextlib.suppress(LabError):
            o = load(other)
            if o is not None:
                used[o.subnet_index] = f"lab {other}"

    def mark(net: ipaddress.IPv4Network | ipaddress.IPv6Network, what: str) -> None:
        if net.version != 4 or not net.overlaps(LAB_NETWORK):
            return
        for k in range(SUBNETS):
            if subnet_of(k).overlaps(net):
                used.setdefault(k, what)

    own_links = {link.get("ifname") for link in _aliased_links(name)}
    for link in _ip_json("-4", "addr", "show"):
        if link.get("ifname") in own_links:
            continue
        for a in link.get("addr_info", []):
            with contextlib.suppress(ValueError, KeyError):
                mark(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False),
                     f"address {a['local']} on {link.get('ifname')}")
    for route in _ip_json("-4", "route", "show", "table", "all"):
        dst, dev = route.get("dst"), route.get("dev")
        if not dst or dst == "default" or dev in own_links:
            continue
        with contextlib.suppress(ValueError):
            mark(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False), f"route {dst} via {dev}")
    return used


def _allocate(name: str) -> int:
    """The /24 index for a new lab: a hash of its name, else the next free one (recorded in the state)."""
    used = _used_subnets(name)
    links = {link.get("ifname"): link.get("ifalias") for link in _links()}
    first = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % SUBNETS
    for step in range(SUBNETS):
        k = (first + step) % SUBNETS
        bridge = f"plb{k:03x}"
        if k in used or (bridge in links and links[bridge] != ALIAS_PREFIX + name):
            continue
        return k
    raise UserError(f"lab {name}: every /24 of {LAB_NETWORK} is in use here ({len(used)} taken); "
                    "`pglab lab down` another lab first")


def _ensure_bridge(lab: Lab, echo: Echo) -> None:
    links = _ip_json("addr", "show", "dev", lab.bridge) if _link_exists(lab.bridge) else []
    if not links:
        _run(["ip", "link", "add", "name", lab.bridge, "address", lab.mac(BRIDGE_HOST), "type", "bridge"])
        _run(["ip", "link", "set", "dev", lab.bridge, "alias", lab.alias])
        echo(f"lab {lab.name}: created bridge {lab.bridge}")
        links = _ip_json("addr", "show", "dev", lab.bridge)
    link = links[0]
    if link.get("ifalias") != lab.alias:
        _run(["ip", "link", "set", "dev", lab.bridge, "alias", lab.alias])
    if link.get("address") != lab.mac(BRIDGE_HOST):
        _run(["ip", "link", "set", "dev", lab.bridge, "address", lab.mac(BRIDGE_HOST)])
    addrs = {a.get("local") for a in link.get("addr_info", [])}
    if lab.bridge_address not in addrs:
        _run(["ip", "addr", "add", f"{lab.bridge_address}/24", "dev", lab.bridge])
        echo(f"lab {lab.name}: bridge {lab.bridge} has address {lab.bridge_address}/24")
    if "UP" not in link.get("flags", []):
        _run(["ip", "link", "set", "dev", lab.bridge, "up"])


def _ensure_host_network(lab: Lab, h: LabHost, echo: Echo) -> None:
    """Namespace, lo up, veth pair (eth0 inside with the host's address), root end on the bridge."""
    if _netns_inode(h.namespace) is None:
        _run(["ip", "netns", "add", h.namespace])
        echo(f"lab {lab.name}: {h.name}: created namespace {h.namespace}")
    inside = {link.get("ifname"): link for link in _ip_json("addr", "show", namespace=h.namespace)}
    lo = inside.get("lo")
    if lo is not None and "UP" not in lo.get("flags", []):
        _run(["ip", "-n", h.namespace, "link", "set", "dev", "lo", "up"])
    eth0 = inside.get("eth0")
    root_end = _ip_json("link", "show", "dev", h.veth) if _link_exists(h.veth) else []
    if eth0 is None or not root_end:
        # one end without the other (a namespace made anew, a deleted link): make the pair again
        if root_end:
            _run(["ip", "link", "del", "dev", h.veth])
        if eth0 is not None:
            _run(["ip", "-n", h.namespace, "link", "del", "dev", "eth0"])
        _run(["ip", "link", "add", "name", h.veth, "type", "veth", "peer", "name", "eth0", "address", lab.mac(h.index),
              "netns", h.namespace])
        _run(["ip", "link", "set", "dev", h.veth, "alias", lab.alias])
        echo(f"lab {lab.name}: {h.name}: created veth {h.veth} <-> {h.namespace}:eth0")
        inside = {link.get("ifname"): link for link in _ip_json("addr", "show", namespace=h.namespace)}
        eth0 = inside["eth0"]
        root_end = _ip_json("link", "show", "dev", h.veth)
    if eth0.get("address") != lab.mac(h.index):
        _run(["ip", "-n", h.namespace, "link", "set", "dev", "eth0", "address", lab.mac(h.index)])
    if h.address not in {a.get("local") for a in eth0.get("addr_info", [])}:
        _run(["ip", "-n", h.namespace, "addr", "add", f"{h.address}/24", "dev", "eth0"])
        echo(f"lab {lab.name}: {h.name}: address {h.address}/24 on {h.namespace}:eth0")
    if "UP" not in eth0.get("flags", []):
        _run(["ip", "-n", h.namespace, "link", "set", "dev", "eth0", "up"])
    veth = root_end[0]
    if veth.get("ifalias") != lab.alias:
        _run(["ip", "link", "set", "dev", h.veth, "alias", lab.alias])
    if veth.get("master") != lab.bridge:
        _run(["ip", "link", "set", "dev", h.veth, "master", lab.bridge])
    if "UP" not in veth.get("flags", []):
        _run(["ip", "link", "set", "dev", h.veth, "up"])


def _namespace_pids(namespace: str) -> list[tuple[int, int]]:
    """``(pid, start time)`` of every process inside ``namespace`` (by the namespace's inode)."""
    ino = _netns_inode(namespace)
    if ino is None:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _proc_netns_inode(int(entry)) == ino and _alive(int(entry)):
            start = procs.start_time(LocalHost(), int(entry))
            if start is not None:
                found.append((int(entry), start))
    return found
