"""One run's short folder on one host, and the password the run's servers share.

A ``Workspace`` holds the data dirs, the socket dir (mode 0700, so trust on the socket is safe) and the
passfile holding the run's generated password (0600, owned by the server user). TCP connections,
replication included, authenticate with scram-sha-256 against that password; it appears in no command
line, log, parameter file, notebook or repr.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass, field

from pglab.errors import UserError, register_secret
from pglab.hosts.base import Host

# the role initdb makes on every node; the passfiles hold its password
SUPERUSER = "pglab"


@dataclass
class Workspace:
    """One run's folder on one host. ``password`` lives only in memory and in the passfiles (never in a repr)."""

    host: Host
    base: str
    password: str = field(repr=False)
    local_passfile: str  # a 0600 copy on the control machine, for psycopg through tunnels
    tls_root: str | None = None  # the run CA's certificate on this host, when the run uses TLS

    def libpq_env(self) -> dict[str, str]:
        """What every libpq program started on this host gets (servers, daemons, clients): this host's
        passfile, and with TLS verify-full against the run's CA. Paths only, never the password."""
        env = {"PGPASSFILE": self.passfile}
        if self.tls_root:
            env.update(PGSSLMODE="verify-full", PGSSLROOTCERT=self.tls_root)
        return env

    @property
    def socket_dir(self) -> str:
        return f"{self.base}/s"

    @property
    def passfile(self) -> str:
        return f"{self.base}/pgpass"

    @classmethod
    def create(cls, host: Host, workdir: str = "/tmp", password: str | None = None) -> Workspace:
        """Make a new ``<workdir>/pglab-XXXXXX`` owned by the server user; fail if paths are too long.

        ``mktemp -d`` on the host creates the directory exclusively: an existing one (perhaps someone
        else's) is never reused, as ``mkdir -p`` of a random name would.
        """
        template = f"{workdir.rstrip('/')}/pglab-XXXXXX"
        if len(f"{template}/s/.s.PGSQL.65535") > 107:
            raise UserError(f"host {host.name}: workdir {workdir!r} is too long for a Unix socket path "
                            "(107 bytes); choose a shorter workdir in the inventory")
        user = host.server_user
        base = host.run(["mktemp", "-d", template]).stdout.strip()
        host.run(["chmod", "0711", base])  # others may traverse, not list
        if user != host.login_user:
            host.run(["chown", user, base])
        host.mkdir(f"{base}/s", 0o700, owner=user)
        pw = password or secrets.token_urlsafe(24)
        register_secret(pw)
        host.write_text(f"{base}/pgpass", f"*:*:*:{SUPERUSER}:{pw}\n", 0o600, owner=user)
        fd, local_pf = tempfile.mkstemp(prefix="pglab-pgpass-")
        with os.fdopen(fd, "w") as f:
            f.write(f"*:*:*:{SUPERUSER}:{pw}\n")
        return cls(host, base, pw, local_pf)

    def remove(self) -> None:
        self.host.remove_tree(self.base)
        if os.path.exists(self.local_passfile):
            os.unlink(self.local_passfile)

    def remove_secrets(self) -> None:
        """Delete the passfiles (on the host and the local copy), keep logs and data dirs.

        For a workspace kept after a failure: the evidence stays, the password does not.
        """
        self.host.run(["rm", "-f", self.passfile])
        if os.path.exists(self.local_passfile):
            os.unlink(self.local_passfile)

