"""The cloud_providers study's parameters (params/cloud_providers.yaml, one profile).

A target is one of: ``provision`` (pglab starts a node on an inventory host with these settings), ``dsn``
(a server somebody else runs, by libpq connection string) or ``service`` (the same, by a service name of
a service file). Passwords never appear here: a dsn with ``password=`` is refused, and the password comes
from the ``passfile`` (or the service file's own passfile) on the client host. pglab creates and drops
tables in a dsn or service target's database only when the target says ``disposable: true``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from pglab import server_settings
from pglab.errors import UserError
from pglab.runs.bounds import Checked
from pglab.runs.params import build_name, not_reserved, unique_items
from pglab.userfiles import CONTROL, one_line

Workload = Literal["pgbench", "sysbench"]
WORKLOADS: tuple[str, ...] = ("pgbench", "sysbench")
SysbenchTest = Literal["oltp_write_only", "oltp_read_write"]
Protocol = Literal["simple", "extended", "prepared"]
# Memory settings a provisioned target may size as a fraction of its host's memory
MemorySetting = Literal["shared_buffers", "effective_cache_size", "maintenance_work_mem", "work_mem",
                        "wal_buffers", "autovacuum_work_mem"]
# Settings the deployment owns (Node.configure): a target must not fight it over them
RESERVED = {"port", "listen_addresses", "unix_socket_directories", "unix_socket_permissions", "ssl",
            "ssl_cert_file", "ssl_key_file", "ssl_ca_file", "password_encryption"}
OWN_CONNECTIONS = 3  # pglab's own sessions on a target during a point: settings/preflight, wait sampler, slack
DEFAULT_DB = "bench"  # the database pglab creates in a provisioned node


class Provision(Checked):
    """A node pglab starts (and stops) on an inventory host."""

    host: str = "local"  # inventory host of the node
    settings: dict[str, str | int | float | bool] = Field(default_factory=dict)  # postgresql.conf, as given
    memory_fractions: dict[MemorySetting, float] = Field(default_factory=dict)  # setting -> share of the
    # host's MemTotal, computed when the run starts (recorded in the manifest)

    @field_validator("settings")
    @classmethod
    def _not_reserved(cls, v: dict) -> dict:
        return not_reserved(v, RESERVED, "pglab's deployment")

    @field_validator("memory_fractions")
    @classmethod
    def _fractions(cls, v: dict) -> dict:
        bad = [f"{k}={x}" for k, x in v.items() if not 0 < x <= 1]
        if bad:
            raise ValueError(f"memory fractions must be in (0, 1]: {', '.join(bad)}")
        return v

    @model_validator(mode="after")
    def _no_double(self) -> Provision:
        both = sorted(set(self.settings) & set(self.memory_fractions))
        if both:
            raise ValueError(f"{', '.join(both)} given both as a setting and as a memory fraction")
        return self


class TargetSpec(Checked):
    """One named target."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,30}$")  # part of point ids and file names
    label: str = ""  # how tables and figures describe it (default: its kind and where)
    provider: str | None = None  # aurora, rds, cloud_sql, azure, local...: what the article's claims match
    provision: Provision | None = None
    dsn: str | None = None  # libpq keywords or a postgresql:// URI, never with a password
    service: str | None = None  # a service name of ``servicefile`` (PGSERVICE)
    servicefile: str | None = None  # path on the client host (PGSERVICEFILE); default: libpq's
    passfile: str | None = None  # path on the client host (PGPASSFILE); default: libpq's ~/.pgpass
    dbname: str | None = None  # the database pglab writes to; default: the dsn's dbname, or bench when provisioned
    disposable: bool = False  # a dsn/service target: pglab may create and drop tables in that database
    os_host: str | None = None  # inventory host of a dsn target's machine for OS metrics (not a managed service)

    @field_validator("label", "provider", "dsn", "service", "servicefile", "passfile", "dbname", "os_host")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        """Text that goes into an environment variable, a command's argument or a report: one line of it."""
        return one_line(v)

    @model_validator(mode="after")
    def _database_name(self) -> TargetSpec:
        """A database name the server can hold (63 bytes at most); quoting makes any other character data."""
        name = self.database
        if len(name.encode()) > 63 or CONTROL.search(name):
            raise ValueError(f"target {self.name}: database name {name[:70]!r} is not a PostgreSQL database name "
                             "(at most 63 bytes, no control characters)")
        return self

    @model_validator(mode="after")
    def _one_kind(self) -> TargetSpec:
        kinds = [k for k in ("provision", "dsn", "service") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"target {self.name}: give exactly one of provision, dsn, service (got "
                             f"{', '.join(kinds) or 'none'})")
        if self.provision is not None:
            extra = [k for k in ("passfile", "servicefile", "os_host") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"target {self.name}: {', '.join(extra)} only for dsn or service targets "
                                 "(pglab makes a provisioned node's password and runs on its host)")
            return self
        if self.dsn is not None:
            if self.servicefile is not None:
                raise ValueError(f"target {self.name}: servicefile goes with service, not dsn")
            from pglab.nodes.target import ServerTarget

            try:
                params = ServerTarget.from_dsn(self.name, self.dsn).params
            except UserError as exc:
                raise ValueError(str(exc)) from None
            if not (self.dbname or params.get("dbname")):
                raise ValueError(f"target {self.name}: the dsn must name the database pglab may write to "
                                 "(dbname=...)")
            if self.dbname and params.get("dbname") and self.dbname != params["dbname"]:
                raise ValueError(f"target {self.name}: dbname {self.dbname!r} differs from the dsn's "
                                 f"{params['dbname']!r}")
        if self.service is not None and not self.dbname:
            raise ValueError(f"target {self.name}: a service target needs dbname (the database pglab may "
                             "write to; it is passed to pgbench and sysbench by name)")
        if not self.disposable:
            raise ValueError(
                f"target {self.name}: refused: pglab creates and drops the pgbench and sysbench tables "
                f"(pgbench_*, sbtest*) in database {self.database!r} of a server it did not start; "
                "declare `disposable: true` for this target if that database is yours to overwrite")
        return self

    @property
    def kind(self) -> str:
        return "provision" if self.provision else "dsn" if self.dsn else "service"

    @property
    def database(self) -> str:
        if self.dbname:
            return self.dbname
        if self.dsn:
            from psycopg.conninfo import conninfo_to_dict

            return str(conninfo_to_dict(self.dsn).get("dbname", ""))
        return DEFAULT_DB

    def describe(self) -> str:
        """Default label: 'local node on host local' / 'dsn host=... port=...' / 'service NAME'."""
        if self.label:
            return self.label
        if self.provision:
            return f"pglab node on {self.provision.host}"
        return f"service {self.service}" if self.service else "server by connection string"


class Params(Checked):
    targets: list[TargetSpec] = Field(min_length=1)  # see docs/cloud_providers.md; the first is the baseline
    runs: PositiveInt = 1  # a campaign of independent runs (pglab.app.collect), as runs.params.StudyParams has it
    # the provisioned targets' PostgreSQL build (params/postgres_builds.yaml): a major 13-18 or a build id; None: each
    # host's own bindir. A dsn or service target is whatever server it names (its version is recorded as found)
    postgres: str | int | None = None
    BUILDS: ClassVar[tuple[str, ...]] = ("postgres",)  # fields that name a PostgreSQL build (runs.preflight)
    # settings that run a command or load code that a provisioned target's settings may give (runs.params has it)
    allow_command_settings: list[str] = Field(default_factory=list)
    baseline: str | None = None  # runs twice per block (A/A); ratios are to it; None = the first target
    client_host: str = "local"  # inventory host where pgbench and sysbench run (near the targets)
    workloads: list[Workload] = Field(default_factory=lambda: ["pgbench", "sysbench"], min_length=1)
    scale: PositiveInt = 1  # pgbench -i --scale
    fillfactor: int = Field(90, ge=10, le=100)  # pgbench -i --fillfactor (the article: 90)
    clients: PositiveInt = 2  # pgbench --client
    jobs: PositiveInt | None = None  # pgbench --jobs; None = min(clients, client host cores)
    seconds: PositiveInt = 2  # pgbench --time
    progress_s: PositiveInt = 1  # pgbench -P (stalls are intervals with 0 tps)
    warmup_s: float = Field(1.0, ge=0)  # cut from the start of every pgbench run's progress
    protocol: Protocol = "prepared"  # pgbench --protocol (the article: prepared)
    sysbench_test: SysbenchTest = "oltp_write_only"  # or oltp_read_write with the read queries at 0
    sysbench_tables: PositiveInt = 2  # sysbench --tables
    sysbench_table_size: PositiveInt = 1000  # sysbench --table-size (rows per table)
    sysbench_threads: PositiveInt = 2  # sysbench --threads
    sysbench_seconds: PositiveInt = 2  # sysbench --time
    sysbench_report_interval: PositiveInt = 1  # sysbench --report-interval
    sysbench_warmup_s: float = Field(1.0, ge=0)  # report intervals cut from the start of every sysbench run
    blocks: PositiveInt = 1  # repetitions: every target once per workload per block (>= 6: a 95% interval)
    wait_sample_ms: int = Field(100, ge=0)  # pg_stat_activity wait sampling period; 0 = off
    init_timeout_s: PositiveInt = 1800  # pgbench -i and sysbench prepare are killed after this, point failed
    client_timeout_s: PositiveInt = 300  # a run longer than its seconds plus this is killed, point failed
    seed: int = 1  # order of the points within blocks

    @field_validator("postgres")
    @classmethod
    def _build_name(cls, v: str | int | None) -> str | int | None:
        return build_name(v)  # the same rule as every other study's

    @field_validator("workloads")
    @classmethod
    def _unique_workloads(cls, v: list) -> list:
        return unique_items(v)

    @field_validator("allow_command_settings")
    @classmethod
    def _allowed(cls, v: list) -> list:
        return unique_items(server_settings.allowed_names(v))

    @model_validator(mode="after")
    def _no_code_unless_allowed(self) -> Params:
        bad = server_settings.code_problems({**self.given_settings(), **self.dsn_options()},
                                            self.allow_command_settings)
        if bad:
            raise ValueError("; ".join(bad))
        return self

    def given_settings(self) -> dict[str, dict[str, Any]]:
        """{where in the profile: server settings it gives}: each provisioned target's ``settings``."""
        return {f"targets.{i}.provision.settings": t.provision.settings for i, t in enumerate(self.targets)
                if t.provision}

    def dsn_options(self) -> dict[str, dict[str, str]]:
        """{where: settings} a dsn target's ``options`` (-c name=value) give every session of a server pglab did not
        start: not judged by a build's names (the server is another's), but no code loaded unless allowed."""
        from psycopg.conninfo import conninfo_to_dict

        found = {f"targets.{i}.dsn options": server_settings.in_options(str(conninfo_to_dict(t.dsn).get("options")
                                                                            or "")) for i, t in enumerate(self.targets)
                 if t.dsn}
        return {k: v for k, v in found.items() if v}

    def node_names(self) -> list[str]:
        return [t.name for t in self.targets if t.provision]

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        names = [t.name for t in self.targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"target names must be unique: {', '.join(dup)} repeated")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} must be one of the targets {names}")
        if self.warmup_s >= self.seconds:
            raise ValueError(f"warmup_s={self.warmup_s:g} leaves no measured window in seconds={self.seconds}")
        if self.sysbench_warmup_s >= self.sysbench_seconds:
            raise ValueError(f"sysbench_warmup_s={self.sysbench_warmup_s:g} leaves no measured window in "
                             f"sysbench_seconds={self.sysbench_seconds}")
        return self

    @property
    def base(self) -> str:
        return self.baseline or self.targets[0].name

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.targets]

    def target(self, name: str) -> TargetSpec:
        return next(t for t in self.targets if t.name == name)

    @property
    def hosts(self) -> list[str]:
        """Every inventory host the run uses: the client's, provisioned nodes', OS-metrics hosts."""
        out = [self.client_host]
        for t in self.targets:
            out.append(t.provision.host if t.provision else t.os_host or self.client_host)
        return list(dict.fromkeys(out))

    @property
    def prepare_threads(self) -> int:
        """sysbench prepare's --threads: a thread with no table to create would only connect."""
        return min(self.sysbench_threads, self.sysbench_tables)

    def connection_loads(self) -> dict[str, int]:
        """The most connections each program holds at once on a target, as measured against PostgreSQL 15
        (tests/test_managed_target.py): pgbench --client N opens N+1 but closes its first (the vacuum) before
        the clients connect; sysbench prepare opens one per thread plus one per table it creates (to read the
        database's capabilities), up to two per thread at once; sysbench run one per thread."""
        out = {}
        if "pgbench" in self.workloads:
            out[f"pgbench --client {self.clients}"] = self.clients
        if "sysbench" in self.workloads:
            out[f"sysbench run --threads {self.sysbench_threads}"] = self.sysbench_threads
            out[f"sysbench prepare --threads {self.prepare_threads} (2 per thread: its own and one per table it "
                "creates)"] = 2 * self.prepare_threads
        return out

    def connections_needed(self) -> int:
        """What one target must admit at once: the largest load plus pglab's own sessions."""
        return max(self.connection_loads().values()) + OWN_CONNECTIONS
