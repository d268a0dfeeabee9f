"""The fdw_overhead study's parameters (params/fdw_overhead.yaml, one profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from pglab.runs.params import AdaptiveParams

Target = Literal["local", "FDW_local", "FDW_external", "FDW_ext_ro"]
TARGETS: tuple[str, ...] = ("local", "FDW_local", "FDW_external", "FDW_ext_ro")
READ_ONLY = ("FDW_ext_ro",)  # foreign tables with updatable 'false': RO workloads only
Protocol = Literal["simple", "extended", "prepared"]
# Settings the study sets itself; a profile must not fight it over them.
RESERVED = {"port", "listen_addresses", "unix_socket_directories", "shared_preload_libraries",
            "default_transaction_isolation", "pg_stat_statements.track"}


class Params(AdaptiveParams):
    UNIQUE = ("targets", "rw_clients", "ro_clients", "protocols", "fetch_sizes",
              "remote_estimates")  # list fields whose entries must not repeat
    RESERVED = RESERVED
    RESERVED_BY = "the study itself"  # who sets the RESERVED server settings
    BUILDS = ("postgres", "external_postgres")

    targets: list[Target] = Field(min_length=2)  # what pgbench runs against (see docs/fdw_overhead.md)
    baseline: Target = "local"  # every block runs it twice (A/A); overhead factor = baseline tps / target tps
    rw_clients: list[PositiveInt] = Field(default_factory=lambda: [1])  # pgbench TPC-B -n; [] = no RW
    ro_clients: list[PositiveInt] = Field(default_factory=lambda: [1, 5])  # pgbench -S -n; [] = no RO
    seconds: PositiveInt = 10  # pgbench -T per point (with -P 1)
    warmup_s: float = Field(1.0, ge=0)  # cut from the start of every point's -P 1 progress
    # blocks (repetitions of every target per workload and client count), max_blocks, budget_s: ``AdaptiveParams``
    scale: PositiveInt = 1  # pgbench -i -s on the source
    jobs: PositiveInt | None = None  # pgbench -j; default min(clients, host cores)
    max_tries: PositiveInt = 10  # pgbench --max-tries: serialization failures under REPEATABLE READ are retried
    protocols: list[Protocol] = Field(default_factory=lambda: ["simple"], min_length=1)  # pgbench -M, swept
    fetch_sizes: list[PositiveInt | None] = Field(default_factory=lambda: [None], min_length=1)  # postgres_fdw
    # fetch_size server option, swept; None = postgres_fdw's default (100)
    remote_estimates: list[bool] = Field(default_factory=lambda: [False], min_length=1)  # use_remote_estimate
    transaction_log: bool = True  # pgbench -l: latency percentiles merged over clients and blocks
    wait_sample_ms: int = Field(100, ge=0)  # pg_stat_activity wait-event sampling period; 0 = off
    explain: bool = True  # EXPLAIN (VERBOSE) of every pgbench statement through every foreign target
    round_trip_transactions: int = Field(200, ge=0)  # pgbench -t per target for the source's
    # pg_stat_statements count of remote statements per transaction; 0 = skip
    source_host: str = "local"  # inventory host of the source instance (and FDW_local)
    external_host: str | None = None  # inventory host of the second instance; None = the source's host
    # the second instance's PostgreSQL when it is not ``postgres`` (a major 13-18 or a build id): postgres_fdw from
    # one major to another, as a federation of mixed versions runs it (docs/majors.md)
    external_postgres: str | int | None = None
    client_host: str | None = None  # inventory host of every pgbench; None = each instance's own host (socket)
    tls: bool = False  # TLS with a per-run CA, verify-full for clients and postgres_fdw (costs throughput)
    server_settings: dict[str, str | int | float | bool] = Field(default_factory=dict)  # on both instances
    client_timeout_s: PositiveInt = 600  # any pgbench run longer than seconds plus this is killed, point failed
    seed: int = 1  # order of the points

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.baseline not in self.targets:
            raise ValueError(f"baseline {self.baseline!r} must be one of targets {self.targets}")
        if self.baseline in READ_ONLY and self.rw_clients:
            raise ValueError(f"baseline {self.baseline!r} refuses writes: it cannot be the baseline of RW")
        if not self.rw_clients and not self.ro_clients:
            raise ValueError("rw_clients and ro_clients are both empty: nothing to measure")
        if self.rw_clients and len(self.rw_targets) < 2:
            raise ValueError(f"RW needs the baseline and a writable target besides it; targets {self.targets} "
                             f"leave only {self.rw_targets}")
        if self.warmup_s >= self.seconds:
            raise ValueError(f"warmup_s={self.warmup_s:g} leaves no measured window in seconds={self.seconds}")
        return self

    @property
    def rw_targets(self) -> list[str]:
        """The targets a write workload runs against (a read-only foreign table refuses the UPDATEs)."""
        return [t for t in self.targets if t not in READ_ONLY]

    @property
    def external(self) -> bool:
        """Whether the run needs the second instance."""
        return any(t in ("FDW_external", "FDW_ext_ro") for t in self.targets)

    @property
    def external_host_name(self) -> str:
        return self.external_host or self.source_host

    @property
    def hosts(self) -> list[str]:
        """Every inventory host the run uses."""
        names = [self.source_host, *([self.external_host_name] if self.external else []),
                 *([self.client_host] if self.client_host else [])]
        return list(dict.fromkeys(names))

    @property
    def max_clients(self) -> int:
        return max([*self.rw_clients, *self.ro_clients])

    def node_names(self) -> list[str]:
        return ["source", *(["external"] if self.external else [])]

    def max_connections(self) -> int:
        """Clients, their postgres_fdw connections back into the source, and our own sessions."""
        return 2 * self.max_clients + 20
