"""Trigger-based replication (Slony-I, Londiste) between two real local clusters.

Each case runs the study's order (pgbench -i, history key, prepare, start), a short pgbench load,
then checks catch-up, consistency and that every daemon and server is gone afterwards.
"""

from __future__ import annotations

import time

import pytest
from conftest import postgres_pids
from pglab.hosts.inventory import Inventory
from pglab.replication.base import System, add_history_key
from pglab.replication.londiste import Londiste
from pglab.replication.slony import Slony
from pglab.runs.session import session

pytestmark = pytest.mark.servers


@pytest.mark.slow
@pytest.mark.parametrize("system_cls", [Slony, Londiste], ids=lambda c: c.name)
def test_trigger_replication(inventory: Inventory, system_cls: type[System]) -> None:
    pids: list[int] = []
    with session(inventory) as s:
        provider = s.deploy.node("provider", "local")
        subscriber = s.deploy.node("subscriber", "local")
        reason = system_cls.unavailable(provider.host, provider.bindir)
        assert reason is None, reason  # scripts/bootstrap.sh installs every system
        provider.start()
        subscriber.start()
        for node in (provider, subscriber):
            node.query("create database bench")
        provider.host.run([provider.bin("pgbench"), "-i", "-s", "1", "bench"], env=provider.pg_env())
        add_history_key(provider, "bench")
        system = system_cls(provider, subscriber)
        try:
            system.prepare()
            t0 = time.monotonic()
            system.start()
            print(f"{system.name}: start (initial copy) took {time.monotonic() - t0:.1f} s")
            pids = [b.pid for b in system.processes]
            assert pids and all(b.running() for b in system.processes)
            run = provider.host.run([provider.bin("pgbench"), "-c", "2", "-j", "2", "-T", "3", "-n", "bench"],
                                    env=provider.pg_env())
            assert "number of failed transactions: 0" in run.stdout
            lag = system.lag()
            assert "lag_s" in lag
            seconds = system.wait_caught_up(timeout=90)
            print(f"{system.name}: caught up {seconds:.2f} s after the load; lag sample {lag}")
            assert system.caught_up()
            result = system.verify()
            assert result.consistent, result.mismatched
            rows = result.provider["pgbench_history"]["rows"]
            assert rows > 0 and result.subscriber["pgbench_history"]["rows"] == rows
            # caught_up is not trivially true: a fresh commit is not replicated within milliseconds
            provider.query("insert into pgbench_history (tid, bid, aid, delta, mtime) values (1, 1, 1, 1, now())",
                           dbname="bench")
            assert not system.caught_up()
            system.wait_caught_up(timeout=30)
            assert system.verify().consistent
        finally:
            system.teardown()
        assert system.processes == []
        assert not any(provider.host.pid_alive(pid) for pid in pids)
        system.teardown()  # safe twice
        base = provider.ws.base
    # other tests may run servers at the same time: only ours (by workspace) must be gone
    assert not postgres_pids(base)

