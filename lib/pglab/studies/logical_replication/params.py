"""The logical_replication study's parameters (params/logical_replication.yaml, one profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from pglab.runs.params import AdaptiveParams

SystemName = Literal["streaming", "builtin", "pglogical", "slony", "londiste"]
SYSTEMS: tuple[str, ...] = ("streaming", "builtin", "pglogical", "slony", "londiste")
# Settings the study or a system sets itself; a profile must not fight it over them.
RESERVED = {"port", "listen_addresses", "unix_socket_directories", "primary_conninfo", "synchronous_standby_names",
            "synchronous_commit", "wal_level", "shared_preload_libraries", "output_plugin_libraries"}


class SlonyTiming(BaseModel):
    """slon's -s / -t (measured here: the defaults left the subscriber 21 s behind a 10 s run)."""

    model_config = ConfigDict(extra="forbid")

    sync_interval_ms: PositiveInt = 1000  # slon -s: check for new changes this often
    sync_interval_timeout_ms: PositiveInt = 2000  # slon -t: emit a SYNC at least this often


class LondisteTiming(BaseModel):
    """PgQ's ticker and the workers' loop (measured here: the 60 s idle ticker made the copy take 153 s)."""

    model_config = ConfigDict(extra="forbid")

    ticker_idle_period: str = "1 second"  # pgq.set_queue_config right after create-root
    ticker_max_lag: str | None = None  # pgq default (3 seconds) when None
    loop_delay_s: PositiveFloat = 1.0  # londiste worker's sleep between empty batches
    parallel_copies: PositiveInt = 4  # tables copied at once during the initial copy


class Params(AdaptiveParams):
    UNIQUE = ("systems", "clients")  # list fields whose entries must not repeat
    RESERVED = RESERVED
    BUILDS = ("postgres", "subscriber_postgres")
    RESERVED_BY = "the study or the replication systems"  # who sets the RESERVED server settings

    systems: list[SystemName] = Field(min_length=1)  # systems to compare (seeded random order per block)
    clients: list[PositiveInt] = Field(min_length=1)  # pgbench -c sweep on the provider
    run_seconds: PositiveInt  # pgbench -T per point (the article's example: 30 min)
    # blocks: every system at every client count, repeated (>= 6: a 95% interval); max_blocks, budget_s: blocks
    # of streaming and pglogical alone while "pglogical is close to streaming" is open (AdaptiveParams)
    # run twice per block (A/A); the others are divided by it. A run without it (one system, in tests
    # or to look at one system alone) runs its first system twice instead: the manifest's plan says so.
    baseline: SystemName = "streaming"
    warmup_s: float = Field(1.0, ge=0)  # cut from the provider's -P 1 progress (provider tps only)
    wait_sample_ms: int = Field(100, ge=0)  # pg_stat_activity wait-event sampling period; 0 = off
    scale: PositiveInt = 1  # pgbench -i -s (the article: 5000)
    jobs: PositiveInt | None = None  # pgbench -j; default min(clients, host cores)
    catchup_timeout_s: PositiveFloat = 300  # a subscriber not caught up by then fails the point
    catchup_poll_s: float = Field(0.1, gt=0, le=0.1)  # catch-up resolution (at most 100 ms; each poll costs queries)
    lag_interval_s: float = Field(0.5, ge=0)  # lag CSV sampling interval during run and catch-up; 0 = off
    copy_timeout_s: PositiveFloat = 600  # initial copy of the tables into a new subscriber
    slony: SlonyTiming = Field(default_factory=SlonyTiming)
    londiste: LondisteTiming = Field(default_factory=LondisteTiming)
    provider_host: str = "local"  # inventory host of every provider
    subscriber_host: str = "local"  # inventory host of every subscriber (streaming: the standby)
    client_host: str | None = None  # inventory host of pgbench; None = the provider's host (socket)
    # the subscribers' PostgreSQL when it is not ``postgres`` (a major 13-18 or a build id): replication across two
    # majors, as an upgrade runs it; only built-in logical replication runs so (docs/majors.md)
    subscriber_postgres: str | int | None = None
    tls: bool = False  # TLS with a per-run CA, verify-full for clients and replication (costs throughput)
    server_settings: dict[str, str | int | float | bool] = Field(default_factory=dict)  # on every node
    client_timeout_s: PositiveInt = 600  # a pgbench run longer than run_seconds + this is stopped
    seed: int = 1  # the order of the systems within each block (pglab.runs.sweep.plan_blocks)

    @property
    def hosts(self) -> list[str]:
        """Every inventory host the run uses."""
        return list(dict.fromkeys([self.provider_host, self.subscriber_host,
                                   *([self.client_host] if self.client_host else [])]))

    def node_names(self) -> list[str]:
        """Each pair's sides by role (every system's) or by node name (one system's: ``pglogical_provider``)."""
        return ["provider", "subscriber", *(f"{s}_{side}" for s in self.systems for side in ("provider", "subscriber"))]

    def max_connections(self) -> int:
        """The largest client count plus the systems' own sessions (slon, londiste, walsenders, ours)."""
        return max(self.clients) + 30

    def options(self, system: str) -> dict[str, object]:
        """The System.options for ``system``: its timing parameters and the copy timeout."""
        timing = {"slony": self.slony, "londiste": self.londiste}.get(system)
        extra = timing.model_dump(exclude_none=True) if timing else {}
        return {"copy_timeout_s": self.copy_timeout_s, **extra}
