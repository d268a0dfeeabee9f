"""The streaming_scale_out study's parameters (params/streaming_scale_out.yaml, one profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from pglab.runs.params import StudyParams

Mode = Literal["none", "async", "sync_write", "remote_write", "sync_apply", "per_transaction"]
MODES: tuple[str, ...] = ("none", "async", "sync_write", "remote_write", "sync_apply", "per_transaction")
# synchronous_commit on the primary in each mode; per_transaction: the server default is remote_apply and
# the inserts run with SET LOCAL synchronous_commit = local (the mixed workload the article recommends)
LEVEL = {"none": "on", "async": "on", "sync_write": "on", "remote_write": "remote_write",
         "sync_apply": "remote_apply", "per_transaction": "remote_apply"}
SYNC_MODES = ("sync_write", "remote_write", "sync_apply", "per_transaction")
QueryType = Literal["cpu-max-all-1", "single-groupby-1-1-1", "double-groupby-1", "high-cpu-1", "lastpoint",
                    "groupby-orderby-limit"]
Layout = Literal["plain", "partitioned"]
MAX_STANDBYS = 4
# Settings the study sets itself; a profile must not fight it over them.
RESERVED = {"port", "listen_addresses", "unix_socket_directories", "synchronous_commit",
            "synchronous_standby_names", "primary_conninfo", "primary_slot_name", "hot_standby"}


class Params(StudyParams):
    UNIQUE = ("modes", "layouts", "read_nodes", "query_types", "read_layouts")  # no entry twice
    RESERVED = RESERVED
    RESERVED_BY = "the study itself (the modes)"  # who sets the RESERVED server settings

    modes: list[Mode] = Field(default_factory=lambda: ["none", "async", "sync_write", "sync_apply"], min_length=2)
    baseline: Literal["none"] = "none"  # every block runs it twice (A/A); each mode's rows/s is divided by it
    standbys: int = Field(2, ge=0, le=MAX_STANDBYS)  # streaming standbys during the inserts (article: 2)
    sync_method: Literal["FIRST", "ANY"] = "FIRST"  # synchronous_standby_names: FIRST n (...) or ANY k (...)
    sync_count: PositiveInt = 1  # how many standbys must confirm a commit in the synchronous modes
    layouts: list[Layout] = Field(default_factory=lambda: ["plain"], min_length=1)  # plain table, or native
    # range partitions on time (one per chunk interval); TimescaleDB's hypertable is added where installed
    timescale: bool = True  # also run every case with a TimescaleDB hypertable where the extension is installed
    chunk_interval_s: PositiveInt = 43200  # partition / chunk width (article: 12 hours)
    devices: PositiveInt = 100  # simulated hosts, one row of 10 metrics each every interval_s
    duration_s: PositiveInt = 3600  # simulated time span (article: 3 days = 259200)
    interval_s: PositiveInt = 10  # seconds between two rows of one device (TSBS: 10)
    batch: PositiveInt = 1000  # rows per COPY, one transaction each (TSBS default: 10000)
    clients: PositiveInt = 8  # concurrent loader connections (article: 8)
    blocks: PositiveInt = 3  # repetitions of every mode (>= 6: an order-statistic 95% interval)
    lag_sample_s: float = Field(0.5, gt=0, le=5)  # standbys' lag sampling period during a load (0.25 s cost
    # 0.58% of the machine in pglab's own CPU, over the goal of 0.5%)
    standby_loss_s: float = Field(3.0, gt=0)  # a standby that must confirm and is gone this long fails the point
    read_nodes: list[PositiveInt] = Field(default_factory=lambda: [1, 3, 5])  # node counts of the read
    # workload (the primary plus standbys); [] skips reads; needs max - 1 standbys (up to 4)
    query_types: list[QueryType] = Field(default_factory=lambda: ["cpu-max-all-1", "single-groupby-1-1-1",
                                                                  "double-groupby-1", "high-cpu-1", "lastpoint",
                                                                  "groupby-orderby-limit"])
    read_layouts: list[Literal["plain", "partitioned", "hypertable"]] | None = None  # layouts the reads run
    # on; None = every layout of the run
    read_clients: PositiveInt = 8  # concurrent query clients, spread round-robin over the nodes
    read_seconds: PositiveInt = 10  # pgbench -T per read point (all nodes at once)
    read_blocks: PositiveInt = 3  # repetitions of every node count per query type
    warmup_s: float = Field(1.0, ge=0)  # cut from the start of every read point's -P 1 progress
    transaction_log: bool = True  # pgbench -l on the read points: latency percentiles per query type
    wait_sample_ms: int = Field(100, ge=0)  # pg_stat_activity sampling on the primary during loads; 0 = off
    primary_host: str = "local"  # inventory host of the primary
    standby_hosts: list[str] = Field(default_factory=list)  # inventory host of standby 1, 2...; missing = primary's
    client_host: str | None = None  # inventory host of the loader and the query clients; None = the primary's
    tls: bool = False  # TLS with a per-run CA, verify-full for every connection
    server_settings: dict[str, str | int | float | bool] = Field(default_factory=dict)  # on every node
    client_timeout_s: PositiveInt = 600  # a load or read longer than this is killed and its point failed
    seed: int = 1  # the generated rows, the query parameters and the order of the points

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.read_layouts is not None and not set(self.read_layouts) <= {*self.layouts, "hypertable"}:
            raise ValueError(f"read_layouts {self.read_layouts} must be among layouts {self.layouts} (or hypertable)")
        if self.baseline not in self.modes:
            raise ValueError(f"baseline {self.baseline!r} must be one of modes {self.modes}")
        if self.standbys == 0 and set(self.modes) - {"none"}:
            raise ValueError(f"modes {self.modes} replicate, but standbys=0")
        if self.sync_count > self.standbys and set(self.modes) & set(SYNC_MODES):
            raise ValueError(f"sync_count={self.sync_count} standbys must confirm, but there are only "
                             f"standbys={self.standbys}")
        if self.read_nodes and max(self.read_nodes) > 1 + MAX_STANDBYS:
            raise ValueError(f"read_nodes {self.read_nodes}: at most {1 + MAX_STANDBYS} nodes (the primary and "
                             f"{MAX_STANDBYS} standbys)")
        if self.read_nodes and 1 not in self.read_nodes:
            raise ValueError(f"read_nodes {self.read_nodes} must include 1: the speed-up is against one node")
        if len(self.standby_hosts) > self.standby_count:
            raise ValueError(f"standby_hosts names {len(self.standby_hosts)} hosts but the run has only "
                             f"{self.standby_count} standbys (standbys={self.standbys}, read_nodes={self.read_nodes})")
        if self.warmup_s >= self.read_seconds:
            raise ValueError(f"warmup_s={self.warmup_s:g} leaves no measured window in "
                             f"read_seconds={self.read_seconds}")
        if self.rows < self.batch:
            raise ValueError(f"batch={self.batch} is more rows than the whole load ({self.rows}: devices x "
                             f"duration_s / interval_s)")
        if self.duration_s < self.interval_s:
            raise ValueError(f"duration_s={self.duration_s} is shorter than one interval_s={self.interval_s}")
        return self

    @property
    def rows(self) -> int:
        return self.devices * (self.duration_s // self.interval_s)

    @property
    def standby_count(self) -> int:
        """Standbys the run builds: those of the inserts, and more for the largest read node count."""
        return max(self.standbys, max(self.read_nodes, default=1) - 1)

    def node_names(self) -> list[str]:
        return ["primary", *(f"sb{i + 1}" for i in range(self.standby_count))]

    def standby_host(self, i: int) -> str:
        """Inventory host of standby ``i`` (0-based)."""
        return self.standby_hosts[i] if i < len(self.standby_hosts) else self.primary_host

    @property
    def hosts(self) -> list[str]:
        names = [self.primary_host, *(self.standby_host(i) for i in range(self.standby_count)),
                 *([self.client_host] if self.client_host else [])]
        return list(dict.fromkeys(names))

    def max_connections(self) -> int:
        """Loader and query clients, walsenders, and our own sessions."""
        return max(self.clients, self.read_clients) + MAX_STANDBYS + 20
