"""``pglab lab status``: the health of a lab, per host its namespace, address, sshd and a real SSH login."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pglab.hosts.lab.network import _ip_json, _link_exists, _netns_inode, require_root
from pglab.hosts.lab.sshd import _sshd_mismatch
from pglab.hosts.lab.state import DEFAULT_NAME, check_name, load


@dataclass
class HostStatus:
    name: str
    address: str
    namespace: str
    namespace_ok: bool = False
    address_ok: bool = False
    sshd_pid: int | None = None
    sshd_ok: bool = False
    login_ok: bool | None = None  # None: not tried
    detail: str = ""  # the login's answer (``hostname``) or what is wrong

    @property
    def ok(self) -> bool:
        return self.namespace_ok and self.address_ok and self.sshd_ok and self.login_ok is not False

    def line(self) -> str:
        parts = [f"namespace {self.namespace} {'present' if self.namespace_ok else 'MISSING'}",
                 f"address {'up' if self.address_ok else 'MISSING'}",
                 f"sshd {'pid ' + str(self.sshd_pid) if self.sshd_ok else 'NOT RUNNING'}",
                 f"login {'not tried' if self.login_ok is None else 'ok' if self.login_ok else 'FAILED'}"]
        return (f"{'ok  ' if self.ok else 'FAIL'} {self.name} {self.address}: " + ", ".join(parts)
                + (f" ({self.detail})" if self.detail else ""))


@dataclass
class LabStatus:
    name: str
    exists: bool
    subnet: str = ""
    bridge: str = ""
    bridge_ok: bool = False
    inventory_path: str | None = None
    owner: str = ""
    hosts: list[HostStatus] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return self.exists and self.bridge_ok and bool(self.hosts) and all(h.ok for h in self.hosts)

    def lines(self) -> list[str]:
        if not self.exists:
            return [f"FAIL lab {self.name}: no such lab (`pglab lab up N` makes one)"]
        out = [f"{'ok  ' if self.bridge_ok else 'FAIL'} lab {self.name}: subnet {self.subnet}, bridge {self.bridge} "
               f"{'up' if self.bridge_ok else 'MISSING or without its address'}, inventory {self.inventory_path}"
               + (f", owner {self.owner}" if self.owner else "")]
        return out + [h.line() for h in self.hosts]


def status(name: str = DEFAULT_NAME, login: bool = True) -> LabStatus:
    """Each host: namespace present, address up, sshd alive (PID and identity), a real SSH login works."""
    check_name(name)
    lab = load(name)
    if lab is None:
        return LabStatus(name, exists=False)
    require_root()
    st = LabStatus(name, True, str(lab.subnet), lab.bridge, inventory_path=lab.inventory_path)
    if lab.owner_pid:
        why = lab.owner_gone()
        st.owner = f"pid {lab.owner_pid} " + ("alive" if why is None else f"gone ({why}): `pglab cleanup` removes it")
    br = _ip_json("addr", "show", "dev", lab.bridge) if _link_exists(lab.bridge) else []
    st.bridge_ok = bool(br) and "UP" in br[0].get("flags", []) and \
        lab.bridge_address in {a.get("local") for a in br[0].get("addr_info", [])}
    inventory = lab.inventory() if login else None
    for h in lab.hosts:
        hs = HostStatus(h.name, h.address, h.namespace, sshd_pid=h.sshd_pid)
        hs.namespace_ok = _netns_inode(h.namespace) is not None
        if hs.namespace_ok:
            eth0 = _ip_json("addr", "show", "dev", "eth0", namespace=h.namespace)
            hs.address_ok = bool(eth0) and h.address in {a.get("local") for a in eth0[0].get("addr_info", [])}
        why = _sshd_mismatch(lab, h, h.sshd_pid, h.sshd_identity)
        hs.sshd_ok = why is None
        if not hs.namespace_ok or not hs.address_ok:
            hs.login_ok = False
            hs.detail = "login not tried: the host's network is missing"
        elif not hs.sshd_ok:
            hs.detail = f"sshd {why}"
        if inventory is not None and hs.namespace_ok and hs.address_ok:
            hs.login_ok, answer = _try_login(inventory, h.name)
            if not hs.login_ok or hs.sshd_ok:
                hs.detail = answer if hs.sshd_ok else f"{hs.detail}; {answer}"
        st.hosts.append(hs)
    return st


def _try_login(inventory: Any, host: str) -> tuple[bool, str]:
    try:
        with inventory.connect(host) as h:
            res = h.run(["hostname"], timeout=20, check=False)
        if res.exit_code == 0:
            return True, f"logged in, hostname {res.stdout.strip()}"
        return False, f"login ran `hostname`: exit {res.exit_code}"
    except Exception as exc:  # noqa: BLE001  (any failure to log in is the answer)
        return False, f"login failed: {type(exc).__name__}: {exc}"
