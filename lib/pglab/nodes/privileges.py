"""What a role may do on a target pglab did not start, and what pglab therefore leaves alone there.

Why: a managed service (RDS, Aurora, Cloud SQL, Azure) gives a role that is not a superuser, forbids
``ALTER SYSTEM`` and may lack ``pg_stat_statements``. pglab reads what the role may read (pg_settings through
``pg_read_all_settings``, other sessions through ``pg_read_all_stats`` / ``pg_monitor``), sends nothing
but the reads its workloads need (``sql_guard``: PostgreSQL's own grammar, an allow-list), and records per
target what it skipped and which settings it could not read, with the server's own reason (``unreadable_from``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Predefined roles that widen what a role may read or do (pg_checkpoint exists from PostgreSQL 15 on)
ROLES = ("pg_monitor", "pg_read_all_settings", "pg_read_all_stats", "pg_checkpoint")
# One row: superuser, createdb, then per predefined role whether the current role has its privileges
# (pg_has_role ... 'USAGE' is has_privs_of_role, what the server checks), then pg_stat_statements here.
ROLE_SQL = ("select r.rolsuper, r.rolcreatedb, "
            + ", ".join(f"coalesce((select pg_has_role(current_user, oid, 'USAGE') from pg_roles "
                        f"where rolname = '{name}'), false)" for name in ROLES)
            + ", coalesce((select installed_version is not null from pg_available_extensions "
              "where name = 'pg_stat_statements'), false), "
              "exists (select 1 from pg_available_extensions where name = 'pg_stat_statements') "
              "from pg_roles r where r.rolname = current_user")

# Settings PostgreSQL 15 shows only to superusers and pg_read_all_settings (GUC_SUPERUSER_ONLY; measured: a
# role without it sees 333 of 354 rows of pg_settings). Each is probed (``probe_statements``): a name the
# server does not have reads NULL, one the role may not read fails with the server's reason.
RESTRICTED_SETTINGS = ("config_file", "data_directory", "dynamic_library_path", "extension_destdir",
                       "external_pid_file", "hba_file", "ident_file", "jit_provider", "krb_server_keyfile",
                       "log_directory", "log_filename", "primary_conninfo", "session_preload_libraries",
                       "shared_preload_libraries", "ssl_ciphers", "ssl_dh_params_file", "ssl_ecdh_curve",
                       "ssl_max_protocol_version", "ssl_min_protocol_version", "ssl_passphrase_command",
                       "unix_socket_directories")

@dataclass(frozen=True)
class Privileges:
    """What the target's role may do, as the server answered ``ROLE_SQL``."""

    role: str
    superuser: bool
    createdb: bool
    member: dict[str, bool]
    pg_stat_statements_installed: bool
    pg_stat_statements_available: bool

    @classmethod
    def from_row(cls, role: str, row: list[str]) -> Privileges:
        flags = [x == "t" for x in row]
        member = dict(zip(ROLES, flags[2:2 + len(ROLES)], strict=True))
        return cls(role, flags[0], flags[1], member, flags[2 + len(ROLES)], flags[3 + len(ROLES)])

    @property
    def sees_other_sessions(self) -> bool:
        """Other roles' rows of pg_stat_activity with their state, query and wait events."""
        return self.superuser or self.member["pg_read_all_stats"]

    @property
    def reads_all_settings(self) -> bool:
        return self.superuser or self.member["pg_read_all_settings"]

    def describe(self) -> dict[str, Any]:
        return {"role": self.role, "superuser": self.superuser, "createdb": self.createdb, **self.member,
                "pg_stat_statements": ("installed" if self.pg_stat_statements_installed else
                                       "available, not installed" if self.pg_stat_statements_available else
                                       "not installed")}

    def skipped(self, waits_sampled: bool) -> dict[str, str]:
        """What pglab does or may do on a node it starts and does not do here, and why (for the manifest)."""
        who = f"role {self.role}"
        has = ", ".join(r for r, yes in self.member.items() if yes) or "no predefined role"
        out = {
            "ALTER SYSTEM": "settings are read, never changed: the server is not pglab's (postgresql.conf, ALTER "
                            "SYSTEM and restarts are its owner's; managed services forbid ALTER SYSTEM)",
            "start, stop, restart": "pglab did not start it and never stops it",
            "CHECKPOINT": (f"not attempted: needs superuser or pg_checkpoint ({who} has {has}); checkpoints run "
                           "on the server's own schedule" if not (self.superuser or self.member["pg_checkpoint"])
                           else "not attempted: the server's own checkpoint schedule is part of what is measured"),
            "pg_stat_statements": (
                "not installed in the target's database: statement counts are not read, and pglab never runs "
                "CREATE EXTENSION on a server it did not start" if not self.pg_stat_statements_installed else
                "installed, not used: resetting it (pg_stat_statements_reset) would erase its owner's statistics"),
            "pg_stat_reset": "not attempted: it resets every user's statistics on somebody else's server",
            "CREATE EXTENSION": "not attempted: extensions are the server owner's choice",
            "server log and files (pg_ls_logdir, pg_read_file)": (
                "not read: pglab reads the log of its own nodes from disk; here a failure is reported with the "
                "client's error only"),
        }
        if not self.sees_other_sessions:
            out["wait events of other sessions"] = (
                f"{who} has not the privileges of pg_read_all_stats (pg_monitor): other roles' sessions and the "
                "server's background processes show no state or wait event"
                + ("; the wait sampler sees this role's own sessions, the workload's" if waits_sampled else ""))
        if not waits_sampled:
            out["wait event sampling"] = ("not sampled: only from this machine, by connection string (not a "
                                          "service name)")
        return out


def probe_statements() -> list[str]:
    """One statement per restricted setting, run in one psql session that goes on after an error."""
    return [f"select '{name}', current_setting('{name}', true) is not null" for name in RESTRICTED_SETTINGS]


_DENIED = re.compile(r'^(?:psql:[^\n]*?)?ERROR:\s+(.*"([a-z_.]+)".*)$', re.M)


def unreadable_from(stdout: str, stderr: str) -> dict[str, str]:
    """Restricted settings the role could not read, each with the server's own reason."""
    out = {m.group(2): m.group(1).strip() for m in _DENIED.finditer(stderr) if m.group(2) in RESTRICTED_SETTINGS}
    answered = {line.split("\t")[0] for line in stdout.splitlines() if "\t" in line}
    for name in RESTRICTED_SETTINGS:  # neither a row nor a reason: say so rather than drop it
        if name not in answered and name not in out:
            out[name] = "no answer from the server (psql printed neither a row nor an error for it)"
    return dict(sorted(out.items()))
