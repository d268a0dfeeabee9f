"""The host inventory (params/hosts.yaml): which machines a study may use and how to reach them.

Keys and passwords never live here: an SSH entry names a key *file* and a known_hosts *file*.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pglab.errors import ParameterError, UserError
from pglab.hosts.base import Host
from pglab.hosts.local import LocalHost
from pglab.hosts.ssh import SSHHost
from pglab.userfiles import PLAIN_PATH, one_line, yaml_mapping


def default_workdir() -> str:
    """``$PGLAB_WORKDIR``, else /tmp: where a host entry without ``workdir`` makes its per-run folders.

    The variable lets one machine keep concurrent sessions apart (the test suite gives each worker its
    own), without editing the inventory.
    """
    return os.environ.get("PGLAB_WORKDIR") or "/tmp"


OS_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


class HostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ssh"] = "local"
    address: str | None = None  # ssh: DNS name or IP
    data_address: str | None = None  # where other hosts and clients reach its servers; default below
    port: int = Field(22, ge=1, le=65535)  # ssh port
    user: str | None = None  # ssh login user
    key_filename: str | None = None  # path to the private key (never the key itself)
    known_hosts: str | None = None  # default ~/.ssh/known_hosts
    accept_unknown_host_key: bool = False  # explicit opt-in; default rejects unknown keys
    server_user: str | None = None  # OS user for PostgreSQL; default: login user, or postgres for root
    bindir: str = "/usr/lib/postgresql/15/bin"  # PostgreSQL binaries on that host
    # ssh: where registry builds of other majors live there (`pglab builds push HOST BUILD` copies them);
    # None: the same path as on this machine (pglab.hosts.build_copy)
    builds_dir: str | None = None
    workdir: str = Field(default_factory=default_workdir)  # base of the per-run folders (short: socket paths <= 107 B)
    port_range: tuple[int, int] = (20000, 60000)  # where node ports are picked

    @property
    def data_ip(self) -> str:
        """The data address: as given, else 127.0.0.1 for a local host, else the SSH address if it is an IP."""
        if self.data_address:
            return self.data_address
        if self.kind == "local":
            return "127.0.0.1"
        try:
            return str(ipaddress.ip_address(self.address or ""))
        except ValueError:
            raise UserError(f"host at {self.address!r}: set data_address (an IP address other hosts reach "
                            "its servers at) in the inventory") from None

    @field_validator("bindir", "workdir")
    @classmethod
    def _plain_path(cls, v: str) -> str:
        """Paths that become part of commands, conninfo strings and slonik scripts: absolute, and made of
        characters none of those reads as syntax (no space, quote, ``$``, ``;`` or control character)."""
        if not PLAIN_PATH.fullmatch(v):
            raise ValueError(f"{v!r} must be an absolute path of letters, digits and . _ + - @ / only")
        return v

    @field_validator("builds_dir")
    @classmethod
    def _plain_builds_dir(cls, v: str | None) -> str | None:
        return None if v is None else cls._plain_path(v)

    @field_validator("user", "server_user")
    @classmethod
    def _os_user(cls, v: str | None) -> str | None:
        if v is not None and not OS_USER.fullmatch(v):
            raise ValueError(f"{v!r} is not an OS user name (lowercase letters, digits, _ and -)")
        return v

    @field_validator("address", "key_filename", "known_hosts")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        return one_line(v)

    @model_validator(mode="after")
    def _ssh_needs_address(self) -> HostEntry:
        if self.kind == "ssh" and not (self.address and self.user):
            raise ValueError("an ssh host needs 'address' and 'user'")
        if self.data_address is not None:
            try:
                ipaddress.ip_address(self.data_address)
            except ValueError:
                raise ValueError(f"data_address {self.data_address!r} must be an IP address "
                                 "(pg_hba admits addresses, not names)") from None
        lo, hi = self.port_range
        if not 1024 <= lo < hi <= 65535:
            raise ValueError(f"port_range {self.port_range} must be within 1024-65535, low < high")
        return self


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hosts: dict[str, HostEntry] = Field(default_factory=lambda: {"local": HostEntry()})
    # The file it was read from (recorded in run manifests, so that `pglab cleanup` finds the hosts of a
    # run made with another inventory, e.g. a lab's)
    source: str | None = Field(default=None, exclude=True)

    def entry(self, name: str) -> HostEntry:
        if name not in self.hosts:
            raise UserError(f"host {name!r} is not in the inventory (known: {', '.join(sorted(self.hosts))})")
        return self.hosts[name]

    def connect(self, name: str) -> Host:
        """A ready Host; for SSH the key check happens here, before anything starts."""
        e = self.entry(name)
        if e.kind == "local":
            return LocalHost(name, server_user=e.server_user, data_address=e.data_ip)
        host = SSHHost(name, e.address or "", e.user or "", port=e.port, key_filename=e.key_filename,
                       known_hosts=e.known_hosts, accept_unknown_host_key=e.accept_unknown_host_key,
                       server_user=e.server_user, data_address=e.data_ip)
        host.open()
        return host


def load_inventory(path: str | Path | None) -> Inventory:
    """The inventory at ``path``; no path (or a missing default) means: everything on this machine."""
    if path is None or not Path(path).exists():
        if path is not None and str(path) != "params/hosts.yaml":
            raise UserError(f"inventory {path} does not exist")
        return Inventory()
    data = yaml_mapping(path, "an inventory (`hosts:` and one entry per host)")
    if "source" in data:
        raise ParameterError(str(path), ["source: unknown key (expected hosts)"])
    try:
        return Inventory.model_validate(data).model_copy(update={"source": str(Path(path).resolve())})
    except ValidationError as exc:
        raise ParameterError(str(path), _problems(exc)) from None


def _problems(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
            + (f" (got {e['input']!r})" if e["type"] != "missing" and not isinstance(e["input"], dict) else "")
            for e in exc.errors()]
