"""The synchronous_commit study's parameters (params/synchronous_commit.yaml, one profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from pglab.runs.params import AdaptiveParams

Level = Literal["off", "local", "remote_write", "on", "remote_apply"]
LEVELS: tuple[str, ...] = ("off", "local", "remote_write", "on", "remote_apply")
# Settings the study sets itself; a profile must not fight it over them.
RESERVED = {"port", "synchronous_commit", "synchronous_standby_names", "primary_conninfo",
            "listen_addresses", "unix_socket_directories"}


class Params(AdaptiveParams):
    UNIQUE = ("levels", "clients")  # list fields whose entries must not repeat
    RESERVED = RESERVED
    RESERVED_BY = "the study itself"  # who sets the RESERVED server settings
    FLUSH_LADDER = True  # emulate.flush_latency_ms may name several levels: each a group of write blocks

    levels: list[Level] = Field(min_length=1)  # synchronous_commit levels to compare
    baseline: Level = "on"  # every block runs it twice (A/A); the other levels are divided by it
    clients: list[PositiveInt] = Field(min_length=1)  # pgbench -c: one group of blocks per count
    seconds: PositiveInt = 3  # pgbench -T per point (with -P 1)
    warmup_s: float = Field(1.0, ge=0)  # cut from the start of every point's -P 1 progress
    # blocks (repetitions of every level at every client count), max_blocks, budget_s: ``AdaptiveParams``
    scale: PositiveInt = 1  # pgbench -i -s
    jobs: PositiveInt | None = None  # pgbench -j; default min(clients, host cores)
    transaction_log: bool = True  # pgbench -l: latency percentiles merged over clients and blocks
    wait_sample_ms: int = Field(100, ge=0)  # pg_stat_activity wait-event sampling period; 0 = off
    standby_read_blocks: int = Field(6, ge=0)  # blocks of standby reads (idle, idle again, loaded); 0 = skip
    standby_read_level: Level = "on"  # synchronous_commit on the primary during the standby reads
    standby_read_seconds: PositiveInt = 3  # pgbench -S -T on the standby per point
    loaded_clients: PositiveInt = 10  # primary write clients while the standby is read "loaded"
    fsync_test_seconds: int = Field(2, ge=0)  # pg_test_fsync -s per method; 0 = skip
    primary_host: str = "local"  # inventory host of the primary
    standby_host: str = "local"  # inventory host of the synchronous standby
    client_host: str | None = None  # inventory host of every pgbench; None = each node's own host (socket)
    tls: bool = False  # TLS with a per-run CA, verify-full for clients and replication (costs throughput)
    standby_name: str = Field("standby1", pattern=r"^[a-z][a-z0-9_]{0,30}$")  # application_name
    server_settings: dict[str, str | int | float | bool] = Field(default_factory=dict)  # on both nodes
    client_timeout_s: PositiveInt = 600  # any pgbench run longer than this is killed and marked failed
    seed: int = 1  # order of the points

    @field_validator("levels", "baseline", "standby_read_level", mode="before")
    @classmethod
    def _yaml_booleans(cls, v: object) -> object:
        """YAML 1.1 reads on/off as booleans; PostgreSQL means the same by them."""
        if isinstance(v, list):
            return [("on" if x else "off") if isinstance(x, bool) else x for x in v]
        return ("on" if v else "off") if isinstance(v, bool) else v

    @model_validator(mode="after")
    def _baseline_measured(self) -> Params:
        if self.baseline not in self.levels:
            raise ValueError(f"baseline {self.baseline!r} must be one of levels {self.levels}")
        if self.max_blocks and len(self.flush_levels()) > 1:
            raise ValueError("max_blocks with a flush ladder: the first look judges one flush level; give "
                             "emulate.flush_latency_ms one level, or drop max_blocks")
        if self.warmup_s >= self.seconds or self.warmup_s >= self.standby_read_seconds:
            raise ValueError(f"warmup_s={self.warmup_s:g} leaves no measured window in seconds={self.seconds} "
                             f"or standby_read_seconds={self.standby_read_seconds}")
        return self

    @property
    def hosts(self) -> list[str]:
        """Every inventory host the run uses."""
        return list(dict.fromkeys([self.primary_host, self.standby_host, *([self.client_host] if self.client_host
                                                                           else [])]))

    def node_names(self) -> list[str]:
        return ["primary", self.standby_name]

    def flush_levels(self) -> list[str | float]:
        """The emulated flush levels the write blocks run at (``emulate``); none without an emulated flush."""
        return list(self.emulate.flush_latency_ms) if self.emulate else []

    def flush_calibrated(self) -> bool:
        """The one flush level is a calibration's starting point (``cpu_share: calibrate``): the run's latency is the
        one the search finds (``sc_claims.CALIBRATION``), so no point is planned at the named level."""
        return len(self.flush_levels()) == 1 and bool(self.emulate) and self.emulate.cpu_share == "calibrate"

    def judged_flush(self) -> str | float | None:
        """The level the claims are judged at, the standby reads and pg_test_fsync run at: the ladder's last."""
        levels = self.flush_levels()
        return levels[-1] if levels else None

    def max_connections(self) -> int:
        """Enough for the largest client count plus the loaded-read case and our own sessions."""
        return max(max(self.clients), self.loaded_clients + 1) + 20
