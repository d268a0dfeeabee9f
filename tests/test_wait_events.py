"""Wait events: a synchronous standby that stops confirming shows up as SyncRep on the primary."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from pglab.analysis import waits as wait_analysis
from pglab.hosts.inventory import Inventory
from pglab.nodes import topology
from pglab.runs.session import session
from pglab.runs.store import Point
from pglab.workloads import pgbench, waits

pytestmark = pytest.mark.servers


def test_a_paused_wal_receiver_makes_syncrep_the_dominant_wait(tmp_path: Path, inventory: Inventory) -> None:
    with session(inventory) as s:
        topo = topology.streaming(s.deploy, "local", [("sb1", "local")], method="FIRST", count=1)
        primary, standby = topo.primary, topo.standbys[0]
        primary.query("create database bench")
        point = Point(tmp_path, {"point": "p"})
        pgbench.initialise(primary, point, "bench", 1)
        receiver = standby.query("select pid from pg_stat_wal_receiver")[0][0]
        # -N: no updates of the 1-row branch table, so that clients do not queue on each other's row locks
        # (with TPC-B at scale 1, three of four would wait in Lock:transactionid behind the one in SyncRep)
        argv = pgbench.pgbench_argv(primary, "bench", clients=2, duration_s=4, no_vacuum=True, extra=["-N"])
        nodes = {"primary": primary, "standby": standby}
        with waits.WaitSampler(0.1) as sampler, sampler.recording(point, nodes, delay_s=0.5):
            bg = s.track_background(pgbench.start(primary, point, argv, prefix="w_"))
            time.sleep(1.0)
            os.kill(receiver, signal.SIGSTOP)  # the standby stops receiving: every commit waits for it
            try:
                time.sleep(2.0)
            finally:
                os.kill(receiver, signal.SIGCONT)
            pgbench.collect(bg, point, "w_", timeout=30)
            s.untrack_background(bg)
            # a point shorter than its warm-up: nothing sampled, and the point is not held up
            (tmp_path / "short").mkdir()
            short = Point(tmp_path / "short", {"point": "short"})
            t0 = time.monotonic()
            with sampler.recording(short, nodes, delay_s=5.0):
                time.sleep(0.2)
            assert time.monotonic() - t0 < 1.5 and short.meta["waits"]["samples"] == 0
    df = wait_analysis.load(tmp_path / waits.CSV)
    assert df.t_s.min() >= 0.5  # the warm-up (delay_s) is not sampled
    busy = df[(df.node == "primary") & (wait_analysis.backend_groups(df) == "client")]
    event, share = wait_analysis.dominant(busy)
    assert event == "IPC:SyncRep" and share > 0.4, wait_analysis.shares(busy).head()
    assert point.meta["waits"]["samples"] >= 30 and not point.meta["waits"]["errors"]
    assert (tmp_path / waits.SUMMARY).exists()


def test_shares_and_dominant_on_known_samples() -> None:
    df = pd.DataFrame([
        {"t_s": 0.0, "node": "a", "backend_type": "client backend", "state": "active", "wait_event_type": "IPC",
         "wait_event": "SyncRep", "backends": 3},
        {"t_s": 0.0, "node": "a", "backend_type": "client backend", "state": "active", "wait_event_type": "",
         "wait_event": "", "backends": 1},
        {"t_s": 0.1, "node": "a", "backend_type": "walsender", "state": "active", "wait_event_type": "IO",
         "wait_event": "WALRead", "backends": 1},
    ])
    assert list(wait_analysis.backend_groups(df)) == ["client", "client", "replication"]
    sh = wait_analysis.shares(df[wait_analysis.backend_groups(df) == "client"], by=["node"])
    assert dict(zip(sh.event, sh.share, strict=True)) == {"IPC:SyncRep": 0.75, "CPU": 0.25}
    assert wait_analysis.dominant(df) == ("IPC:SyncRep", 0.6)
    assert wait_analysis.dominant(df.iloc[0:0]) == ("", 0.0)


def test_the_top_events_table_shows_real_shares_never_a_filled_zero() -> None:
    """The notebooks' waits table: an event in one config's top 3 shows every config's measured share of
    it (the first table kept each config's top 3 and filled the rest with 0: `on` showed CPU 0.000)."""
    from pglab.analysis.waits import top_events_table

    shares = pd.DataFrame({"config": ["on"] * 4 + ["off"] * 3,
                           "event": ["ClientRead", "Lock", "SyncRep", "CPU", "ClientRead", "CPU", "Lock"],
                           "share": [0.30, 0.26, 0.18, 0.08, 0.72, 0.13, 0.12]})
    table = top_events_table(shares)
    assert list(table.columns) == ["ClientRead", "Lock", "SyncRep", "CPU"]
    assert table.loc["on", "CPU"] == 0.08 and table.loc["off", "SyncRep"] == 0.0  # measured, and truly absent
    assert top_events_table(shares[shares.config == "nothing"]).empty
