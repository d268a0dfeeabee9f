"""A lab of real SSH hosts on this one machine: ``pglab lab up N`` / ``status`` / ``down``.

Each lab host is a Linux network namespace with its own IPv4 address in 198.18.0.0/15 (the range
RFC 2544 reserves for network benchmark tests; the lab never uses any other non-loopback address),
joined to one bridge in the root namespace by a veth pair. The bridge has an address in the same /24
(``.254``), so the control machine reaches every lab host directly. Each namespace runs its own
sshd (its own host key, listening on port 22 of that host's address only, root login by one
generated key only), and ``up`` writes an inventory whose hosts ``lab1..labN`` are ordinary
``kind: ssh`` hosts with host-key checking on. So the whole multi-host path runs for real: an SSH
login per host, servers and clients talking TCP between different addresses, pg_hba by address.

What a lab cannot show: its hosts share this machine's CPU, memory, disk and kernel.

Several labs live side by side, by name (default ``lab``): the name picks the namespaces
(``pglab-<name>-<i>``) and, through a /24 index recorded in the lab's state, the interface names
(``plb<tag>`` bridge, ``plv<tag>h<i>`` veths, tag = the index in hex) and the subnet. Every link the
lab creates carries the alias ``pglab-lab:<name>``, so ``down`` finds them even without the state.

State: ``pglab.hosts.base.state_dir() / "labs" / <name>/`` (0700): the client key, authorized_keys,
known_hosts (exactly the generated host keys), per host its host key, sshd config, pidfile and log,
and ``lab.json`` (hosts, addresses, namespaces, sshd PIDs with their process identity, creation time,
optional owner PID with its identity: ``cleanup_orphans`` removes a lab whose owner is gone).

Lab names are machine-wide (namespaces are), while state dirs are per user and per PGLAB_STATE_DIR
(tests use a private one). So ``/run/pglab/labs/<name>`` records where each lab's state is: ``status``,
``down`` and ``pglab cleanup`` find a lab whatever PGLAB_STATE_DIR made it (a killed test session's lab
too), and ``up`` never makes a second lab of a name that exists. /run is emptied at boot, like the
namespaces.

Everything here needs root (network namespaces, links, sshd on port 22); ``up`` says so before
touching anything.

This package is the lab's public API (``from pglab.hosts import lab``, then ``lab.up(...)``); here are
``up``, ``down`` and ``cleanup_orphans``, built from its modules: ``state`` (the model, lab.json, the
registry, the lock, the inventory file), ``network`` (``ip``, namespaces, bridge, veths, subnets),
``sshd`` (each host's sshd and the keys), ``processes`` (stopping by PID and start time) and ``health``
(``status``).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from pathlib import Path

from pglab.errors import PglabError, UserError
from pglab.hosts import procs
from pglab.hosts.lab.health import HostStatus, LabStatus, status
from pglab.hosts.lab.network import (
    NETNS_DIR,
    _aliased_links,
    _allocate,
    _ensure_bridge,
    _ensure_host_network,
    _link_exists,
    _namespace_pids,
    _netns_inode,
    _run,
    _stray_namespaces,
    require_root,
    require_tools,
    run_in,
)
from pglab.hosts.lab.processes import STOP_GRACE_S, _stop_pids
from pglab.hosts.lab.sshd import (
    SSHD_PRIVSEP_DIR,
    SSHD_START_TIMEOUT,
    _ensure_keys,
    _ensure_sshd,
    _log_tail,
    _stop_sshd,
    _wait_listening,
    _write_known_hosts,
)
from pglab.hosts.lab.state import (
    ALIAS_PREFIX,
    BRIDGE_HOST,
    DEFAULT_NAME,
    GENERATED_MARK,
    LAB_NETWORK,
    MAX_HOSTS,
    REGISTRY,
    SSH_PORT,
    SUBNETS,
    Echo,
    Lab,
    LabError,
    LabHost,
    _generated_for,
    _locked,
    _register,
    _unregister,
    _write_inventory,
    check_name,
    default_inventory_path,
    lab_dir,
    labs_root,
    load,
    names,
    state_of,
    subnet_of,
)
from pglab.hosts.local import LocalHost

__all__ = [
    "ALIAS_PREFIX", "BRIDGE_HOST", "DEFAULT_NAME", "GENERATED_MARK", "LAB_NETWORK", "MAX_HOSTS", "NETNS_DIR",
    "REGISTRY", "SSHD_PRIVSEP_DIR", "SSHD_START_TIMEOUT", "SSH_PORT", "STOP_GRACE_S", "SUBNETS",
    "Echo", "HostStatus", "Lab", "LabError", "LabHost", "LabStatus",
    "check_name", "cleanup_orphans", "default_inventory_path", "down", "exists", "lab_dir", "labs_root", "load",
    "names", "require_root", "require_tools", "run_in", "state_of", "status", "subnet_of", "up",
]


def exists(name: str = DEFAULT_NAME) -> bool:
    """True if lab ``name`` has state or anything on the system (a namespace, a link) left."""
    return (state_of(name) is not None or lab_dir(name).exists() or bool(_stray_namespaces(name))
            or bool(_aliased_links(name)))


def _ensure_workdir(h: LabHost) -> None:
    p = Path(h.workdir)
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        raise LabError(f"{h.name}: workdir {p} exists and is not a directory")
    p.mkdir(exist_ok=True)
    st = p.stat()
    if st.st_uid != 0:
        raise LabError(f"{h.name}: workdir {p} exists and is not root's; remove it")
    if (st.st_mode & 0o7777) != 0o1777:
        p.chmod(0o1777)  # like /tmp: the server user makes its folders here too


def up(n: int, name: str = DEFAULT_NAME, inventory_path: str | Path | None = None, owner_pid: int | None = None,
       echo: Echo | None = None) -> Lab:
    """Make (or repair, or grow) lab ``name`` to at least ``n`` hosts and write its inventory.

    Idempotent: a healthy lab of ``n`` hosts is left as it is (same keys, same sshd PIDs). Hosts beyond
    ``n`` are kept. ``inventory_path`` defaults to the one written last, else ``params/lab.yaml``
    (``params/lab-<name>.yaml`` for other names). ``owner_pid`` records an owner: once that process
    is gone, ``pglab cleanup`` removes the lab; None keeps what is recorded (by default: no owner,
    the lab lives until ``down``).
    """
    say = echo or (lambda line: None)
    check_name(name)
    if not isinstance(n, int) or not 1 <= n <= MAX_HOSTS:
        raise UserError(f"a lab has 1 to {MAX_HOSTS} hosts, not {n!r}")
    require_root()
    require_tools()
    owner_identity = None
    if owner_pid is not None:
        owner_identity = procs.identity(LocalHost(), owner_pid)
        if owner_identity is None:
            raise UserError(f"owner pid {owner_pid} does not exist")
    with _locked():
        here = lab_dir(name)
        lab = load(name)
        if lab is not None and lab.state_dir.absolute() != here.absolute():
            # made under another PGLAB_STATE_DIR: an orphan is removed, a lab in use is not taken over
            why = lab.owner_gone()
            if why is None:
                raise UserError(f"lab {name} exists already, its state under {lab.state_dir} (another "
                                f"PGLAB_STATE_DIR{', owner pid ' + str(lab.owner_pid) if lab.owner_pid else ''}): "
                                f"use another --name, or `pglab lab down --name {name}` first")
            say(f"lab {name}: an earlier lab of this name (state {lab.state_dir}) lost its owner pid "
                f"{lab.owner_pid} ({why}); removing it")
            _down(name, lab, say)
            lab = None
        inv = Path(inventory_path) if inventory_path is not None else (
            Path(lab.inventory_path) if lab and lab.inventory_path else default_inventory_path(name))
        inv = inv.absolute()
        if inv.exists() and _generated_for(inv) != name:  # before anything is made
            raise UserError(f"{inv} exists and was not written by `pglab lab up` for lab {name}; "
                            "choose another --inventory")
        if lab is None:
            if _stray_namespaces(name) or _aliased_links(name) or here.exists():
                say(f"lab {name}: removing what an earlier lab of this name left")
                _down(name, None, say)
            lab = Lab(name=name, subnet_index=_allocate(name),
                      created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), home=str(here))
            labs_root().mkdir(mode=0o700, parents=True, exist_ok=True)
            lab.state_dir.mkdir(mode=0o700, exist_ok=True)
            say(f"lab {name}: new, subnet {lab.subnet}")
        os.chmod(lab.state_dir, 0o700)
        if owner_pid is not None:
            lab.owner_pid, lab.owner_identity = owner_pid, owner_identity
        if len(lab.hosts) > n:
            say(f"lab {name}: has {len(lab.hosts)} hosts, more than {n}: all kept (`pglab lab down` removes the lab)")
        for i in range(len(lab.hosts) + 1, n + 1):
            lab.hosts.append(lab.planned_host(i))
        lab.save()  # first: `down` finds whatever the steps below make, even if one fails
        _register(lab)
        _ensure_keys(lab)
        _ensure_bridge(lab, say)
        try:
            for h in lab.hosts:
                _ensure_host_network(lab, h, say)
                _ensure_workdir(h)
                _ensure_sshd(lab, h, say)
                lab.save()
        finally:
            lab.save()
        _write_known_hosts(lab)
        for h in lab.hosts:
            if not _wait_listening(h.address):
                raise LabError(f"lab {name}: {h.name}: sshd (pid {h.sshd_pid}) does not answer on "
                               f"{h.address}:{SSH_PORT} {_log_tail(lab.host_dir(h) / 'sshd.log')}")
        _write_inventory(lab, inv)
        if str(inv) not in lab.inventories:
            lab.inventories.append(str(inv))
        lab.inventory_path = str(inv)
        lab.save()
    return lab


def down(name: str = DEFAULT_NAME, echo: Echo | None = None) -> bool:
    """Remove lab ``name``: its sshds (by PID and identity) and whatever else runs in its namespaces,
    the namespaces, veths and bridge, the workdirs, the inventories ``up`` wrote, and its state.

    Finds the lab wherever its state is (the registry), and what is left of one without state
    (namespaces ``pglab-<name>-<i>``, links with its alias). Returns False (and does nothing) when
    there is no such lab; raises LabError listing what could not be removed.
    """
    say = echo or (lambda line: None)
    check_name(name)
    if not exists(name):
        _unregister(name, None)  # a registry entry whose state is gone (root only: others cannot write it)
        return False
    require_root()
    require_tools()
    with _locked():
        try:
            lab = load(name)
        except LabError as exc:
            say(str(exc))
            lab = None
        _down(name, lab, say)
    return True


def _down(name: str, lab: Lab | None, say: Echo) -> None:
    """``down`` of ``lab`` (None: only what the system shows of a lab ``name``), under the lock."""
    failures: list[str] = []
    hosts = lab.hosts if lab else []
    workdirs = [h.workdir for h in hosts]
    if lab is None:  # without state: the workdirs follow from the bridge's tag and the namespaces' numbers
        tags = [str(link["ifname"])[3:] for link in _aliased_links(name) if str(link.get("ifname")).startswith("plb")]
        workdirs += [f"/tmp/pl-{tag}-{ns.rsplit('-', 1)[1]}" for tag in tags for ns in _stray_namespaces(name)]
    for h in hosts:
        try:
            if h.sshd_pid:
                pid = h.sshd_pid
                _stop_sshd(lab, h)  # type: ignore[arg-type]
                say(f"lab {name}: {h.name}: stopped sshd (pid {pid})")
        except LabError as exc:
            failures.append(str(exc))
    namespaces = list(dict.fromkeys([h.namespace for h in hosts] + _stray_namespaces(name)))
    for ns in namespaces:
        left = _namespace_pids(ns)
        if left:
            survivors = _stop_pids(left)
            say(f"lab {name}: stopped {len(left) - len(survivors)} process(es) left in namespace {ns}")
            if survivors:
                failures.append(f"lab {name}: processes {survivors} in namespace {ns} did not stop")
        res = _run(["ip", "netns", "del", ns], check=False)
        if res.returncode != 0 and _netns_inode(ns) is not None:
            failures.append(f"lab {name}: cannot remove namespace {ns}: {res.stderr.strip()}")
        else:
            say(f"lab {name}: removed namespace {ns}")
    # veths die with their namespace; the bridge (and any veth left) by its alias
    for link in _aliased_links(name):
        ifname = str(link.get("ifname"))
        res = _run(["ip", "link", "del", "dev", ifname], check=False)
        if res.returncode != 0 and _link_exists(ifname):
            failures.append(f"lab {name}: cannot remove link {ifname}: {res.stderr.strip()}")
        else:
            say(f"lab {name}: removed link {ifname}")
    if lab is not None and _link_exists(lab.bridge):
        failures.append(f"lab {name}: bridge {lab.bridge} is still there")
    for w in workdirs:
        p = Path(w)
        if p.is_dir() and not p.is_symlink() and p.stat().st_uid == 0:
            shutil.rmtree(p, ignore_errors=True)
            if p.exists():
                failures.append(f"lab {name}: cannot remove workdir {p}")
    for inv in lab.inventories if lab else []:
        p = Path(inv)
        if _generated_for(p) == name:
            p.unlink()
            say(f"lab {name}: removed inventory {p}")
    if failures:
        raise LabError("could not remove everything of the lab:\n" + "\n".join(f"  - {f}" for f in failures))
    home = lab.state_dir if lab else lab_dir(name)
    shutil.rmtree(home, ignore_errors=True)
    if home.exists():
        raise LabError(f"lab {name}: cannot remove its state {home}")
    _unregister(name, home if lab else None)
    say(f"lab {name}: removed")


def cleanup_orphans(echo: Echo | None = None) -> list[str]:
    """Tear down every lab whose recorded owner process is gone. Returns what could not be removed
    (empty: every orphan is gone); ``echo`` gets one line per action. Labs without an owner are left
    alone: they live until ``pglab lab down``."""
    say = echo or (lambda line: None)
    failures: list[str] = []
    for name in names():
        try:
            lab = load(name)
        except LabError as exc:
            failures.append(str(exc))
            continue
        if lab is None:
            if not exists(name):
                _unregister(name, None)
            continue
        why = lab.owner_gone()
        if why is None:
            continue
        say(f"lab {name}: owner pid {lab.owner_pid} is no more ({why}); removing the lab")
        try:
            down(name, say)
        except PglabError as exc:
            failures.append(f"lab {name}: {exc}")
            say(f"lab {name}: could not remove: {exc}")
    return failures
