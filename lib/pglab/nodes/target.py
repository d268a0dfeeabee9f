"""Targets: anything a workload connects to, whether or not pglab started it.

A ``Node`` (pglab.nodes.node) is a target that pglab also starts and stops; a ``ServerTarget`` is one given
by a connection string (a managed service, a server someone else runs). A workload asks a target for
the libpq environment of a program on the client's host (``libpq_env``), so pgbench, sysbench and
psql are started the same way against either.

Secrets stay out: a connection string with a password is refused; the password comes from a passfile
on the client's host (``PGPASSFILE``), named by path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from pglab.errors import UserError


class Workspace(Protocol):
    """What a target needs of the client's workspace (``nodes.workspace.Workspace``): its passfile's path. A
    protocol, not an import: a study's parameter model checks a connection string here (``from_dsn``), and the
    analyses read those models without the host layer the workspace lives on."""

    @property
    def passfile(self) -> str: ...

# libpq keywords a target may carry, and the environment variable each becomes
_ENV = {"host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "dbname": "PGDATABASE", "user": "PGUSER",
        "passfile": "PGPASSFILE", "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT",
        "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY", "connect_timeout": "PGCONNECT_TIMEOUT",
        "application_name": "PGAPPNAME", "options": "PGOPTIONS"}


class Target(ABC):
    """What a workload connects to."""

    name: str

    @abstractmethod
    def libpq_env(self, client: Workspace) -> dict[str, str]:
        """The libpq environment for a program in the client's workspace (its host) to reach this target."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


@dataclass
class ServerTarget(Target):
    """A server pglab did not start, given by libpq keywords (``from_dsn``)."""

    name: str
    params: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dsn(cls, name: str, dsn: str) -> ServerTarget:
        """``host=... port=... dbname=... user=... sslmode=...`` or a ``postgresql://`` URI, without a password."""
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
        except Exception as exc:  # noqa: BLE001  (psycopg's ProgrammingError: say which target)
            raise UserError(f"target {name}: not a libpq connection string: {exc}") from None
        if "password" in params:
            raise UserError(f"target {name}: the connection string holds a password; put it in a passfile "
                            "on the client host and name that file with passfile=... instead")
        unknown = sorted(set(params) - set(_ENV))
        if unknown:
            raise UserError(f"target {name}: unsupported connection keywords {', '.join(unknown)} "
                            f"(supported: {', '.join(sorted(_ENV))})")
        if "host" not in params and "hostaddr" not in params:
            raise UserError(f"target {name}: the connection string needs host=")
        return cls(name, params)

    def libpq_env(self, client: Workspace) -> dict[str, str]:
        """The target's own keywords; without a passfile of its own, the client host's."""
        env = {_ENV[k]: v for k, v in self.params.items()}
        env.setdefault("PGPASSFILE", client.passfile)
        return env

    def describe(self) -> dict[str, Any]:
        """What the manifest records (every keyword is a path or a name, never a secret)."""
        return {"name": self.name, **{k: v for k, v in self.params.items() if k != "passfile"}}
