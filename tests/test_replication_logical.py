"""Replication systems on real local clusters: initial copy, pgbench traffic, catch-up, consistency.

Every system is driven in the order the study uses: pgbench -i and add_history_key on the provider,
then prepare(), then start(). A disabled subscription proves that catch-up and verify() notice a
subscriber that stopped applying.
"""

from __future__ import annotations

import time

import pytest
from conftest import postgres_pids
from pglab.errors import ProcessError
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import Node
from pglab.replication.base import System, add_history_key
from pglab.replication.builtin import SUBSCRIPTION, BuiltinLogical
from pglab.replication.pglogical import Pglogical
from pglab.replication.streaming import Streaming
from pglab.runs.session import Session, session

pytestmark = pytest.mark.servers

DB = "bench"




def start_pair(s: Session) -> tuple[Node, Node]:
    """Provider with pgbench tables (scale 1) and the history key; an empty started subscriber."""
    provider = s.deploy.node("provider", "local")
    provider.start()
    subscriber = s.deploy.node("subscriber", "local")
    subscriber.start()
    for node in (provider, subscriber):
        node.query(f"create database {DB}")
    provider.host.run([provider.bin("pgbench"), "-i", "-s", "1", DB], env=provider.pg_env())
    add_history_key(provider, DB)
    return provider, subscriber


def history_rows(node: Node) -> int:
    return node.query("select count(*) from pgbench_history", dbname=DB)[0][0]


@pytest.mark.parametrize("cls", [Streaming, BuiltinLogical, Pglogical], ids=lambda c: c.name)
def test_replicates_pgbench_and_catches_up(inventory: Inventory, cls: type[System]) -> None:
    with session(inventory) as s:
        provider, subscriber = start_pair(s)
        base = provider.ws.base
        reason = cls.unavailable(provider.host, provider.bindir)
        assert reason is None, reason  # scripts/bootstrap.sh installs every system
        system = cls(provider, subscriber, dbname=DB)
        system.prepare()
        system.start()
        assert system.verify().consistent  # the initial copy is complete
        provider.host.run([provider.bin("pgbench"), "-c", "2", "-j", "2", "-T", "3", "-n", DB],
                          env=provider.pg_env(), timeout=60)
        waited = system.wait_caught_up(timeout=60)
        assert isinstance(waited, float) and waited >= 0
        lag = system.lag()
        assert set(lag) == {"lag_bytes", "lag_s"} and lag["lag_bytes"] is not None
        check = system.verify()
        assert check.consistent, check.mismatched
        rows = check.provider["pgbench_history"]["rows"]
        assert rows > 0 and rows == check.subscriber["pgbench_history"]["rows"] == history_rows(subscriber)
        if cls is Streaming:
            assert subscriber.role == "standby" and subscriber.query("select pg_is_in_recovery()") == [(True,)]
            assert provider.query("select sync_state from pg_stat_replication") == [("async",)]
        system.teardown()
        system.teardown()  # safe twice
        if cls is not Streaming:
            assert not provider.query("select slot_name from pg_replication_slots", dbname=DB)
    assert not postgres_pids(base)


def test_disabled_subscription_is_caught(inventory: Inventory) -> None:
    with session(inventory) as s:
        provider, subscriber = start_pair(s)
        base = provider.ws.base
        system = BuiltinLogical(provider, subscriber, dbname=DB)
        system.prepare()
        system.start()
        pgbench = s.track_background(provider.host.start(
            [provider.bin("pgbench"), "-c", "2", "-j", "2", "-T", "3", "-n", DB],
            f"{base}/pgbench.out", f"{base}/pgbench.err", env=provider.pg_env()))
        time.sleep(1)
        subscriber.query(f"alter subscription {SUBSCRIPTION} disable", dbname=DB)
        assert pgbench.wait(timeout=30) == 0
        with pytest.raises(ProcessError) as err:
            system.wait_caught_up(timeout=3)
        assert err.value.timed_out
        check = system.verify()
        assert not check.consistent and "pgbench_history" in check.mismatched
        assert check.provider["pgbench_history"]["rows"] > check.subscriber["pgbench_history"]["rows"]
        # re-enabled, it catches up again: the check follows the subscriber, not a one-way flag
        subscriber.query(f"alter subscription {SUBSCRIPTION} enable", dbname=DB)
        system.wait_caught_up(timeout=60)
        assert system.verify().consistent
        system.teardown()
    assert not postgres_pids(base)
