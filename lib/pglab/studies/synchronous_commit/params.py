"""The synchronous_commit study's parameters (params/synchronous_commit.yaml, one profile)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from pglab.params import not_reserved, unique_items

Level = Literal["off", "local", "remote_write", "on", "remote_apply"]
LEVELS: tuple[str, ...] = ("off", "local", "remote_write", "on", "remote_apply")
# Settings the study sets itself; a profile must not fight it over them.
RESERVED = {"port", "synchronous_commit", "synchronous_standby_names", "primary_conninfo",
            "listen_addresses", "unix_socket_directories"}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    levels: list[Level] = Field(min_length=1)  # synchronous_commit levels to compare
    clients: list[PositiveInt] = Field(min_length=1)  # pgbench -c sweep for the write benchmark
    transactions_per_client: PositiveInt  # pgbench -t (the article: 1000)
    repetitions: PositiveInt = 3  # runs of every (level, clients) point, in randomised order
    scale: PositiveInt = 1  # pgbench -i -s
    jobs: PositiveInt | None = None  # pgbench -j; default min(clients, host cores)
    standby_read_runs: int = Field(5, ge=0)  # pgbench -S runs on the standby per level and load; 0 = skip
    standby_read_seconds: PositiveInt = 5  # length of one standby read run
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

    @field_validator("levels", mode="before")
    @classmethod
    def _yaml_booleans(cls, v: object) -> object:
        """YAML 1.1 reads on/off as booleans; PostgreSQL means the same by them."""
        if isinstance(v, list):
            return [("on" if x else "off") if isinstance(x, bool) else x for x in v]
        return v

    @field_validator("levels", "clients")
    @classmethod
    def _unique(cls, v: list) -> list:
        return unique_items(v)

    @field_validator("server_settings")
    @classmethod
    def _not_reserved(cls, v: dict) -> dict:
        return not_reserved(v, RESERVED, "the study itself")

    @property
    def hosts(self) -> list[str]:
        """Every inventory host the run uses."""
        return list(dict.fromkeys([self.primary_host, self.standby_host, *([self.client_host] if self.client_host
                                                                           else [])]))

    def max_connections(self) -> int:
        """Enough for the largest client count plus the loaded-read case and our own sessions."""
        return max(max(self.clients), self.loaded_clients + 1) + 20
