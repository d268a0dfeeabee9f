"""Insert points: the TSBS loader on the client's host, every standby's lag sampled meanwhile.

The loader (``python -m pglab.workloads.tsbs load``, a program on the client's host, like pgbench) writes
the same seeded rows in batches of ``batch``, one transaction each, from ``clients`` connections. The
standbys' replay lag is sampled on the primary during the load (``pglab.workloads.lag``, into the point's
``lag.csv``); a standby that must confirm commits and stops streaming fails the point and ends the run
(every commit would wait for it). After the load every node must hold the same rows.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from pglab.hosts.base import Result
from pglab.nodes import cpu_quota
from pglab.nodes.node import Node
from pglab.runs.store import Point
from pglab.runs.sweep import Abort, Planned
from pglab.studies.streaming_scale_out.deploy import DB, START, State, ensure_alive, fresh_table, row_counts, set_mode
from pglab.studies.streaming_scale_out.params import SYNC_MODES
from pglab.workloads import pgbench
from pglab.workloads.lag import LagSampler
from pglab.workloads.observed import Watch

LAG_CSV = "lag.csv"
LAG_COLUMNS = ["t_s", "standby", "state", "sync_state", "sent_lag_bytes", "replay_lag_bytes", "write_lag_s",
               "flush_lag_s", "replay_lag_s"]
LAG_SQL = ("select application_name, state, sync_state, pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn), "
           "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), extract(epoch from write_lag), "
           "extract(epoch from flush_lag), extract(epoch from replay_lag) from pg_stat_replication")


class StandbyLag:
    """One lag sample: every standby's row of the primary's pg_stat_replication, over a connection of its own
    (opened at the first sample, in the sampler's thread). Notices a standby that must confirm commits and
    has not streamed for ``loss_s`` (``lost``): fewer standbys than a commit waits for, it never returns."""

    def __init__(self, primary: Node, expected: list[str], loss_s: float, need: int):
        self.primary, self.loss_s, self.need = primary, loss_s, need  # need: standbys a commit waits for
        self.seen = dict.fromkeys(expected, 0.0)  # standby -> when it last streamed (t_s)
        self.lost: str | None = None
        self._conn: Any = None

    def __call__(self, t_s: float) -> list[list[Any]]:
        if self._conn is None:
            self._conn = self.primary.connect()
        rows = []
        for name, state, sync, sent, replay, wl, fl, rl in self._conn.execute(LAG_SQL).fetchall():
            rows.append([round(t_s, 3), name, state, sync, sent, replay, wl, fl, rl])
            if state == "streaming" and name in self.seen:
                self.seen[name] = t_s
        gone = [n for n, t in self.seen.items() if t_s - t > self.loss_s]
        if gone and len(self.seen) - len(gone) < self.need and self.lost is None:
            self.lost = ", ".join(gone)
        return rows

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def loader_argv(st: State, point: Point, out: str, set_local: bool) -> list[str]:
    p = st.p
    argv = [sys.executable, "-m", "pglab.workloads.tsbs", "load", "--devices", str(p.devices),
            "--start", START.isoformat(), "--duration-s", str(p.duration_s), "--interval-s", str(p.interval_s),
            "--batch", str(p.batch), "--clients", str(p.clients), "--seed", str(p.seed), "--table", "cpu",
            "--out", out]
    if set_local:
        argv += ["--set-local", "synchronous_commit=local"]
    return argv


def load(st: State, point: Point, mode: str) -> str | None:
    """One load through the loader program on the client's host, its lag sampled; None when it measured."""
    c, primary = st.client, st.primary
    out = f"{c.ws.base}/tsbs-{point.dir.parent.name}-{point.id}"
    c.host.mkdir(out)
    env = {**pgbench.session_env(primary, None, c), "PGDATABASE": DB}
    argv = loader_argv(st, point, out, mode == "per_transaction")
    expected = [] if mode == "none" else [sb.name for sb in st.insert_standbys()]
    need = st.p.sync_count if mode in SYNC_MODES and mode != "per_transaction" else 0  # SET LOCAL local: no wait
    point.workload_started("load_")
    bg = st.s.track_background(c.host.start(argv, f"{out}.stdout", f"{out}.stderr", env=env))
    reason = None
    try:
        standbys = StandbyLag(primary, expected, st.p.standby_loss_s, need)
        with LagSampler(point.dir / LAG_CSV, LAG_COLUMNS, standbys, st.p.lag_sample_s) as lag:
            deadline = time.monotonic() + st.p.client_timeout_s
            while bg.running():
                if standbys.lost:
                    reason = (f"standby {standbys.lost} stopped streaming during a {mode} load: every commit waits "
                              f"for it, so the load was stopped and the run ends (see lag.csv)")
                    break
                if time.monotonic() > deadline:
                    reason = f"the load ran longer than client_timeout_s={st.p.client_timeout_s}; stopped"
                    break
                time.sleep(0.1)
        if lag.error:
            point.meta["lag_sampler_error"] = lag.error
    finally:
        point.workload_ended("load_")
        if bg.running():
            bg.stop()
            _release_waiters(primary)
        code = bg.wait(30)
        st.s.untrack_background(bg)
        point.record(_result(bg, code), "load_")
        for name in ("batches.csv", "summary.json"):
            if c.host.exists(f"{out}/{name}"):
                c.host.get(f"{out}/{name}", point.dir / name, mode=0o644)
        c.host.remove_tree(out)
        c.host.run(["rm", "-f", f"{out}.stdout", f"{out}.stderr"], check=False)
    if reason and "standby" in reason:
        raise Abort(reason)
    if reason:
        return reason
    return None if code == 0 else f"loader exited {code}"


def _result(bg: Any, code: int) -> Result:
    out, err = bg.output()
    return Result(bg.host.name, bg.command, code, out, err, 0.0)


def _release_waiters(primary: Node) -> None:
    """Backends left waiting for a standby that will not confirm: terminate them (their commit is local)."""
    with contextlib.suppress(Exception):
        primary.query("select pg_terminate_backend(pid) from pg_stat_activity where wait_event = 'SyncRep'")


def insert(st: State, pl: Planned, point: Point, layout: str, watch: Watch) -> str | None:
    """One insert point: the mode in effect, the table afresh, the load (wait events of the primary's
    backends: SyncRep is the sync modes' cost), then the same rows on every node."""
    mode = pl.config
    ensure_alive(st)
    point.meta.update(set_mode(st, mode, replay=False), mode=mode, layout=layout, rows_expected=st.p.rows,
                      batch=st.p.batch, clients=st.p.clients)
    fresh_table(st, layout)
    for sb in st.topo.standbys:
        if sb.name in st.streaming:
            st.primary.wait_for_replay(sb, timeout=600)
    before = cpu_quota.stats({st.primary.name: st.primary.cpu_group})  # a machine per node: its quota used up?
    with watch({"primary": st.primary}):
        reason = load(st, point, mode)
    if reason:
        return reason
    if before:
        point.meta["cpu_groups"] = cpu_quota.used(before, cpu_quota.stats({st.primary.name: st.primary.cpu_group}))
    streaming = [sb for sb in st.topo.standbys if sb.name in st.streaming]
    point.meta["replay_after_load_s"] = {sb.name: round(st.primary.wait_for_replay(sb, timeout=600), 3)
                                         for sb in streaming}
    counts = row_counts(st, [st.primary, *streaming])
    point.write_json("counts.json", counts)
    problems = [f"{n} holds {c}, the primary {counts[st.primary.name]}" for n, c in counts.items()
                if c != counts[st.primary.name]]
    if int(counts[st.primary.name][0]) != st.p.rows:
        problems.append(f"the primary holds {counts[st.primary.name][0]} rows, the load wrote {st.p.rows}")
    if problems:
        point.finish("inconsistent", "; ".join(problems))
    return None
