"""The TSBS cpu-only workload: seeded rows whatever the batching, binary COPY checked against a real server,
the layouts, the loader program (SET LOCAL, a stuck commit, a killed server, no password anywhere), and the
read queries under real pgbench 15."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pglab.hosts.local import LocalHost
from pglab.nodes.node import Node
from pglab.nodes.workspace import SUPERUSER, Workspace
from pglab.workloads import tsbs
from pglab.workloads.tsbs import data as tsbs_data

BINDIR = "/usr/lib/postgresql/15/bin"
DB = "tsbs"
START = datetime(2016, 1, 1, tzinfo=UTC)
DEVICES, DURATION_S, INTERVAL_S = 30, 1800, 10  # 5,400 rows
END = START + timedelta(seconds=DURATION_S)


def _stream(devices: int, duration_s: int, batch: int, seed: int, start: datetime = START) -> tuple[int, str]:
    """(rows, md5 of the row bytes) of every batch put end to end."""
    h, rows = hashlib.md5(), 0
    for _, n, buf in tsbs.batches(devices, start, duration_s, INTERVAL_S, batch, seed):
        assert buf.startswith(tsbs_data.HEADER) and buf.endswith(tsbs_data.TRAILER)
        assert len(buf) == len(tsbs_data.HEADER) + n * tsbs_data.ROW_BYTES + len(tsbs_data.TRAILER)
        h.update(buf[len(tsbs_data.HEADER):-len(tsbs_data.TRAILER)])
        rows += n
    return rows, h.hexdigest()


def _arrays(devices: int, duration_s: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    chunks = list(tsbs.generate(devices, START, duration_s, INTERVAL_S, seed))
    return tuple(np.concatenate([c[i] for c in chunks]) for i in range(3))  # type: ignore[return-value]


# -- the generator, without a server --------------------------------------------------------------------
def test_same_seed_same_rows_whatever_the_batch_and_other_seeds_differ() -> None:
    devices, duration = 700, 3600  # 252,000 rows: several generated chunks, batches spanning them
    want = devices * (duration // INTERVAL_S)
    assert tsbs.total_rows(devices, duration, INTERVAL_S) == want
    got = {b: _stream(devices, duration, b, 5) for b in (1, 999, 65_537, 10**6)}
    assert {rows for rows, _ in got.values()} == {want}
    assert len({digest for _, digest in got.values()}) == 1
    assert _stream(devices, duration, 999, 6)[1] != got[999][1]
    # the batches are exactly the generated arrays, encoded
    times, tags, values = _arrays(devices, duration, 5)
    assert hashlib.md5(tsbs_data.encode(times, tags, values).tobytes()).hexdigest() == got[999][1]


def test_rows_are_time_then_device_with_bounded_integer_walks() -> None:
    times, tags, values = _arrays(DEVICES, DURATION_S, 1)
    steps = DURATION_S // INTERVAL_S
    assert len(times) == DEVICES * steps
    t = times.reshape(steps, DEVICES)
    assert (t == t[:, :1]).all() and (np.diff(t[:, 0]) == INTERVAL_S * 1_000_000).all()
    assert t[0, 0] == (START - datetime(2000, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    assert (tags.reshape(steps, DEVICES) == np.arange(1, DEVICES + 1)).all()
    assert values.shape == (len(times), 10) and values.min() >= 0 and values.max() <= 100
    assert (values == np.floor(values)).all()  # TSBS writes int64(value)
    walk = values.reshape(steps, DEVICES, 10)
    step = np.abs(np.diff(walk, axis=0))
    assert np.median(step) <= 1 and step.max() <= 8  # N(0, 1) steps, not independent draws
    assert len(np.unique(walk[0])) > 50  # start values spread over [0, 100)


@pytest.mark.parametrize(("call", "words"), [
    (lambda: list(tsbs.batches(10, START, 600, 10, 0, 1)), "batch must be at least 1"),
    (lambda: list(tsbs.batches(0, START, 600, 10, 100, 1)), "devices must be at least 1"),
    (lambda: tsbs.total_rows(0, 600, 10), "devices must be at least 1"),
    (lambda: list(tsbs.batches(10, START, 5, 10, 100, 1)), "shorter than one interval_s"),
    (lambda: list(tsbs.batches(10, START.replace(tzinfo=None), 600, 10, 100, 1)), "no time zone"),
    (lambda: tsbs.load(None, devices=10, start=START, duration_s=600, batch=0, clients=1, seed=1,
                       out=Path("/nonexistent")), "batch must be at least 1"),
    (lambda: tsbs.load(None, devices=10, start=START, duration_s=600, batch=10, clients=0, seed=1,
                       out=Path("/nonexistent")), "clients must be at least 1"),
    (lambda: tsbs.load({"PGHOST": "/tmp", "PGPASSWORD": "x"}, devices=10, start=START, duration_s=600, batch=10,
                       clients=1, seed=1, out=Path("/nonexistent")), "passfile"),
    (lambda: tsbs.load(None, devices=10, start=START, duration_s=600, batch=10, clients=1, seed=1,
                       out=Path("/nonexistent"), set_local=["synchronous_commit"]), "NAME=VALUE"),
    (lambda: tsbs.schema_sql("columnar", START, END, 3600), "unknown layout 'columnar'"),
    (lambda: tsbs.schema_sql("hypertable", START, END, 3600), "needs the installed TimescaleDB version"),
    (lambda: tsbs.schema_sql("hypertable", START, END, 3600, "two"), "cannot read TimescaleDB version"),
    (lambda: tsbs.schema_sql("partitioned", START, END, 0), "chunk_interval_s"),
    (lambda: tsbs.schema_sql("plain", END, START, 3600), "is not after start"),
    (lambda: tsbs.schema_sql("plain", START, END, 3600, table="cpu; drop"), "plain name"),
    (lambda: tsbs.pgbench_script("cpu-max-all-9", 10, START, END), "unknown TSBS query type"),
    (lambda: tsbs.query_sql("high-cpu-1", {}), "needs parameters"),
])
def test_bad_arguments_name_the_problem(call: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        call()


def test_create_hypertable_in_each_version_form() -> None:
    def call(version: str) -> str:
        stmts = tsbs.schema_sql("hypertable", START, END, 43200, version)
        assert stmts[0].startswith("CREATE TABLE cpu (") and len(stmts) == 5  # table, hypertable, 3 indexes
        return stmts[1]

    assert call("1.7.5") == ("SELECT create_hypertable('cpu'::regclass, 'time'::name, "
                             "chunk_time_interval => 43200000000, create_default_indexes => FALSE)")
    assert call("2.11.2") == ("SELECT create_hypertable('cpu', 'time', chunk_time_interval => "
                              "interval '43200 seconds', create_default_indexes => FALSE)")
    assert call("2.13.0-dev") == call("2.14.2") == (
        "SELECT create_hypertable('cpu', by_range('time', interval '43200 seconds'), create_default_indexes => FALSE)")
    with pytest.raises(ValueError, match="only 1.x and 2.x"):
        call("3.0.0")


def test_query_windows_lie_in_the_data_and_follow_the_seed() -> None:
    lo, hi = int(START.timestamp()), int(END.timestamp())
    for q in tsbs.QUERY_TYPES:
        drawn = [tsbs.draw_params(q, DEVICES, START, END, seed) for seed in range(200)]
        assert drawn[3] == tsbs.draw_params(q, DEVICES, START, END, 3)
        for p in drawn:
            assert 0 <= p.get("host", 0) < DEVICES
            if "t1" in p:
                assert lo <= p["t0"] < p["t1"] <= hi
        if q in ("single-groupby-1-1-1", "groupby-orderby-limit"):  # 1 h windows in 30 min of data: all of it
            assert {(p["t0"], p["t1"]) for p in drawn} == {(lo, hi)}
    week = START + timedelta(days=7)
    p = [tsbs.draw_params("single-groupby-1-1-1", 4000, START, week, s) for s in range(100)]
    assert {x["t1"] - x["t0"] for x in p} == {3600} and len({x["t0"] for x in p}) > 90
    assert len({x["host"] for x in p}) > 90


def test_tags_follow_the_seed_and_tsbs_choices() -> None:
    rows = tsbs.tags_rows(50, 1)
    assert rows == tsbs.tags_rows(50, 1) != tsbs.tags_rows(50, 2)
    assert [r[:2] for r in rows[:3]] == [(1, "host_0"), (2, "host_1"), (3, "host_2")]
    for _, _, region, dc, rack, os_, arch, team, service, version, env in rows:
        assert dc in tsbs.REGIONS[region] and 0 <= int(rack) < 100 and os_ in tsbs.OS_CHOICES
        assert arch in tsbs.ARCH_CHOICES and team in tsbs.TEAM_CHOICES and 0 <= int(service) < 20
        assert version in ("0", "1") and env in tsbs.ENVIRONMENT_CHOICES
    assert len({r[2] for r in rows}) > 5


def test_timescale_available_reads_the_catalog_of_a_fake_connection() -> None:
    """The one fake in this file: a connection whose catalog lists TimescaleDB (not installable here)."""

    class Cursor:
        def __enter__(self) -> Cursor:
            return self

        def __exit__(self, *_: object) -> None:
            pass

        def execute(self, sql: str) -> None:
            assert "pg_available_extensions" in sql and "'timescaledb'" in sql

        def fetchone(self) -> tuple[str]:
            return ("2.14.2",)

    class Conn:
        def cursor(self) -> Cursor:
            return Cursor()

    assert tsbs.timescale_available(Conn()) == "2.14.2"


# -- on a real server ------------------------------------------------------------------------------------
def _start_node(name: str) -> tuple[Node, Workspace]:
    host = LocalHost()
    ws = Workspace.create(host)
    node = Node(ws, name, host.free_port(), BINDIR)
    node.init({"max_connections": 40, "fsync": "off"})
    node.start()
    node.query(f"create database {DB}")
    return node, ws


@pytest.fixture(scope="module")
def server() -> Iterator[Node]:
    """One PostgreSQL 15 (as the server user, a free port), tags loaded, TSBS's cpu table in plain layout."""
    node, ws = _start_node("tsbs")
    try:
        with node.connect(DB) as conn:
            assert tsbs.load_tags(conn, DEVICES, 1) == DEVICES
            for stmt in tsbs.schema_sql("plain", START, END, 3600):
                conn.execute(stmt)
        yield node
    finally:
        node.stop()
        ws.remove()


def _env(node: Node, tcp: bool = False) -> dict[str, str]:
    """libpq environment: the socket, or TCP with the run's passfile (scram-sha-256 on TCP)."""
    if tcp:
        return {"PGHOST": "127.0.0.1", "PGPORT": str(node.port), "PGUSER": SUPERUSER, "PGDATABASE": DB,
                "PGPASSFILE": node.ws.local_passfile}
    return {**node.pg_env(), "PGDATABASE": DB}


def _table(node: Node, name: str, extra: str = "", **kw: Any) -> None:
    with node.connect(DB) as conn:
        conn.execute(f"drop table if exists {name}")
        for stmt in tsbs.schema_sql(kw.pop("layout", "plain"), START, END, kw.pop("chunk", 3600), table=name, **kw):
            conn.execute(stmt)
        if extra:
            conn.execute(f"alter table {name} {extra}")


def _content(node: Node, table: str) -> tuple[int, str]:
    cols = ", ".join(tsbs.COLUMNS)
    return node.query(f"select count(*), md5(string_agg(row({cols})::text, ',' order by time, tags_id)) "
                      f"from {table}", dbname=DB)[0]


def _load(node: Node, table: str, tmp: Path, **kw: Any) -> dict[str, Any]:
    args = {"devices": DEVICES, "start": START, "duration_s": DURATION_S, "interval_s": INTERVAL_S, "batch": 500,
            "clients": 2, "seed": 1, **kw}
    return tsbs.load(_env(node), table=table, out=tmp, **args)


@pytest.mark.servers
def test_binary_copy_round_trips_and_equals_text_copy(server: Node, tmp_path: Path) -> None:
    _table(server, "cpu_bin", unlogged=True, indexes=False)
    s = _load(server, "cpu_bin", tmp_path / "a", batch=37, clients=3)
    assert s["complete"] and s["rows"] == DEVICES * DURATION_S // INTERVAL_S and s["batches"] == -(-s["rows"] // 37)
    assert server.query("select relpersistence from pg_class where relname = 'cpu_bin'", dbname=DB) == [("u",)]
    times, tags, values = _arrays(DEVICES, DURATION_S, 1)
    with server.connect(DB) as conn:
        back = conn.execute("select extract(epoch from time - timestamptz '2000-01-01 00:00:00+00') * 1000000, "
                            f"tags_id, {', '.join(tsbs.METRICS)} from cpu_bin order by time, tags_id").fetchall()
        got = np.array(back, dtype=np.float64)
        assert (got[:, 0].astype(np.int64) == times).all() and (got[:, 1] == tags).all()
        assert (got[:, 2:] == values).all()
        # the same rows through text COPY: PostgreSQL reads both into the same values
        conn.execute("create unlogged table cpu_text (like cpu_bin)")
        stamps = np.datetime_as_string(times.astype("timedelta64[us]") + np.datetime64("2000-01-01T00:00:00", "us"),
                                       unit="us")
        text = "".join(f"{ts}+00\t{t}\t" + "\t".join(repr(float(v)) for v in vals) + "\n"
                       for ts, t, vals in zip(stamps, tags, values, strict=True))
        with conn.cursor().copy(f"copy cpu_text ({', '.join(tsbs.COLUMNS)}) from stdin") as cp:
            cp.write(text)
    assert _content(server, "cpu_bin") == _content(server, "cpu_text")
    batches = (tmp_path / "a" / "batches.csv").read_text().splitlines()
    assert batches[0] == "client,batch,rows,start_s,copy_ms,commit_ms" and len(batches) == 1 + s["batches"]
    assert {line.split(",")[0] for line in batches[1:]} == {"0", "1", "2"}  # batch k went to client k % 3
    assert all(int(line.split(",")[0]) == int(line.split(",")[1]) % 3 for line in batches[1:])


@pytest.mark.servers
def test_same_table_whatever_clients_and_batch_another_seed_differs(server: Node, tmp_path: Path) -> None:
    loads = {"c1": {"clients": 1, "batch": 5400}, "c4": {"clients": 4, "batch": 77},
             "seed2": {"clients": 2, "batch": 500, "seed": 2}}
    for name, kw in loads.items():
        _table(server, f"cpu_{name}")
        _load(server, f"cpu_{name}", tmp_path / name, **kw)
    c1, c4, s2 = (_content(server, f"cpu_{n}") for n in loads)
    assert c1 == c4 and c1[0] == 5400
    assert s2[0] == 5400 and s2[1] != c1[1]


@pytest.mark.servers
def test_partitions_cover_the_range_and_hold_their_rows(server: Node, tmp_path: Path) -> None:
    start = START + timedelta(minutes=10)  # not on a partition boundary
    end = start + timedelta(seconds=DURATION_S)
    with server.connect(DB) as conn:
        for stmt in tsbs.schema_sql("partitioned", start, end, 900, table="cpu_part"):
            conn.execute(stmt)
    tsbs.load(_env(server), devices=DEVICES, start=start, duration_s=DURATION_S, batch=500, clients=2, seed=1,
              table="cpu_part", out=tmp_path)
    parts = server.query(
        "select c.relname, pg_get_expr(c.relpartbound, c.oid) from pg_inherits i join pg_class c on c.oid = i.inhrelid "
        "where i.inhparent = 'cpu_part'::regclass order by 1", dbname=DB)
    bounds = tsbs.partition_bounds(start, end, 900)  # data 00:10-00:40 in 15 min partitions from 00:00
    assert bounds == [(START + timedelta(minutes=15 * i), START + timedelta(minutes=15 * (i + 1))) for i in range(3)]
    assert len(parts) == len(bounds) and bounds[0][0] <= start and bounds[-1][1] >= end
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))  # contiguous
    placed = server.query("select tableoid::regclass::text, min(time), max(time), count(*) from cpu_part "
                          "group by 1 order by 1", dbname=DB)
    assert sum(r[3] for r in placed) == 5400
    for (name, lo, hi, _), (low, high) in zip(placed, bounds, strict=True):
        assert name == f"cpu_part_{low:%Y%m%d_%H%M%S}" and low <= lo and hi < high
    idx = server.query("select indexdef from pg_indexes where tablename = 'cpu_part' order by 1", dbname=DB)
    assert [i[0].split(" USING ")[1] for i in idx] == ["btree (tags_id, \"time\" DESC)", "btree (\"time\" DESC)",
                                                       "btree (usage_user, \"time\" DESC)"]


@pytest.mark.servers
def test_timescale_absent_on_a_real_server(server: Node) -> None:
    with server.connect(DB) as conn:
        assert tsbs.timescale_available(conn) is None


def _program(args: list[str], env: dict[str, str], **kw: Any) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.Popen([sys.executable, "-m", "pglab.workloads.tsbs", "load", *args], env={**clean, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _argv(out: Path, table: str, **kw: Any) -> list[str]:
    opts = {"devices": DEVICES, "start": START.isoformat(), "duration-s": DURATION_S, "interval-s": INTERVAL_S,
            "batch": 500, "clients": 2, "seed": 1, "table": table, "out": out, **kw}
    return [x for k, v in opts.items() for x in (f"--{k}", str(v))]


@pytest.mark.servers
def test_program_over_tcp_set_local_and_a_stuck_commit(server: Node, tmp_path: Path) -> None:
    """Commits wait for a synchronous standby that does not exist: with SET LOCAL synchronous_commit = local
    (the per_transaction mode) the load completes; without, the guard ends it and the program says why."""
    _table(server, "cpu_tcp", "add column sc text default current_setting('synchronous_commit')")
    server.query("alter system set synchronous_standby_names = 'nobody'")
    server.reload()
    try:
        argv = _argv(tmp_path / "ok", "cpu_tcp") + ["--set-local", "synchronous_commit=local"]
        p = _program(argv, _env(server, tcp=True))
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out.startswith("tsbs load: 5400 rows (54000 metrics) in ") and "rows/s" in out
        assert server.query("select sc, count(*) from cpu_tcp group by 1", dbname=DB) == [("local", 5400)]
        t = time.monotonic()
        p = _program(_argv(tmp_path / "stuck", "cpu_tcp") + ["--timeout-s", "1"], _env(server, tcp=True))
        out2, err2 = p.communicate(timeout=30)
        print(f"exit {p.returncode} {time.monotonic() - t:.2f} s:\n{err2}")
        assert p.returncode == 1 and time.monotonic() - t < 10
        assert "COMMIT): no answer within timeout_s=1 s" in err2
        summary = json.loads((tmp_path / "stuck" / "summary.json").read_text())
        assert summary["complete"] is False and summary["errors"]
    finally:
        server.query("alter system reset synchronous_standby_names")
        server.reload()
    # no password anywhere: not in the argv (the program has no such option), the environment, the output
    secret = server.ws.password
    assert "password" not in tsbs.parser().format_help().lower()
    assert secret not in " ".join(argv) and secret not in json.dumps(_env(server, tcp=True))
    for text in (out, err, out2, err2, *(f.read_text() for f in tmp_path.rglob("*") if f.is_file())):
        assert secret not in text


@pytest.mark.servers
def test_sigterm_ends_the_load_and_keeps_what_was_committed(server: Node, tmp_path: Path) -> None:
    """How the study stops a loader (Background.stop: SIGTERM, SIGKILL 5 s later)."""
    _table(server, "cpu_term", unlogged=True)
    p = _program(_argv(tmp_path, "cpu_term", devices=2000, **{"duration-s": 36000, "batch": 2000}), _env(server))
    deadline = time.monotonic() + 30
    while server.query("select count(*) from cpu_term", dbname=DB)[0][0] == 0:
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1 and time.monotonic() - sent < 4
    assert "stopped from outside (SIGTERM or SIGINT)" in err
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["complete"] is False and s["rows"] == server.query("select count(*) from cpu_term", dbname=DB)[0][0]


@pytest.mark.servers
def test_program_exits_soon_when_the_server_is_killed(tmp_path: Path) -> None:
    node, ws = _start_node("victim")
    try:
        with node.connect(DB) as conn:
            for stmt in tsbs.schema_sql("plain", START, START + timedelta(days=1), 3600):
                conn.execute(stmt)
        argv = _argv(tmp_path, "cpu", devices=2000, **{"duration-s": 36000, "batch": 2000, "clients": 4})
        p = _program(argv, _env(node))
        deadline = time.monotonic() + 30
        while node.query("select count(*) from pg_stat_activity where query like 'COPY cpu%'")[0][0] == 0:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)
        node.close()
        node.host.run([node.bin("pg_ctl"), "-D", node.data_dir, "-m", "immediate", "stop"], as_user=node.user)
        killed = time.monotonic()
        out, err = p.communicate(timeout=30)
        print(f"exit {p.returncode} {time.monotonic() - killed:.2f} s after the kill:\n{err}")
        assert p.returncode == 1 and time.monotonic() - killed < 5
        assert "FAILED" in err and "partial results in" in err
        s = json.loads((tmp_path / "summary.json").read_text())
        assert s["complete"] is False and 0 < s["rows"] < s["rows_expected"]
        assert len((tmp_path / "batches.csv").read_text().splitlines()) == 1 + s["batches"]
    finally:
        node.stop()
        ws.remove()


def test_generate_only_program(tmp_path: Path) -> None:
    p = _program(_argv(tmp_path, "cpu") + ["--generate-only"], {})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["rows"] == 5400 and s["rows_per_s"] > 0 and out.startswith("tsbs generate: 5400 rows")


@pytest.mark.servers
def test_queries_run_under_pgbench_and_give_fixed_results(server: Node, tmp_path: Path) -> None:
    if server.query("select count(*) from cpu", dbname=DB)[0][0] == 0:
        _load(server, "cpu", tmp_path / "load")
    server.query("analyze", dbname=DB)
    for q in tsbs.QUERY_TYPES:
        script = tmp_path / f"{q}.sql"
        script.write_text(tsbs.pgbench_script(q, DEVICES, START, END))
        res = subprocess.run([f"{BINDIR}/pgbench", "-n", "-t", "3", "-f", str(script), "--random-seed=7", DB],
                             env={**os.environ, **_env(server)}, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, f"{q}: {res.stderr}"
        assert "number of transactions actually processed: 3/3" in res.stdout
        with server.connect(DB) as conn:
            params = tsbs.params_with_rows(conn, q, DEVICES, START, END, 1) if q == "high-cpu-1" \
                else tsbs.draw_params(q, DEVICES, START, END, 1)
        sql, args = tsbs.query_sql(q, params)
        first = server.query(sql, args, dbname=DB)
        assert first, f"{q}: no rows for {params}"
        assert server.query(sql, args, dbname=DB) == first
    lastpoint = server.query(tsbs.query_sql("lastpoint", {})[0], dbname=DB)
    assert len(lastpoint) == DEVICES and {r[1] for r in lastpoint} == {f"host_{i}" for i in range(DEVICES)}
