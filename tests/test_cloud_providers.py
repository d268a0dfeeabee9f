"""The cloud_providers study: a server pglab did not start, given only by connection string and passfile,
measured end to end beside a node pglab provisions; the refusals; stalls; no password anywhere."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import REPO, refused_with_key, workspaces
from pglab.errors import ParameterError, PreflightError
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import Node
from pglab.runs.session import session
from pglab.studies.cloud_providers import analyze, collect, targets
from pglab.studies.cloud_providers.params import Params
from pglab.userfiles import FileError
from pglab.workloads import sysbench

pytestmark = pytest.mark.servers
SMOKE = yaml.safe_load((REPO / "params/cloud_providers.yaml").read_text())["profiles"]["smoke"]
DATA = REPO / "tests" / "data"
REFERENCE = REPO / "data" / "reference"


def tiny(**kw: object) -> dict:
    """Smaller than smoke: the tests check behaviour, not numbers."""
    return {**SMOKE, "blocks": 1, "seconds": 2, "sysbench_seconds": 2, "wait_sample_ms": 100, **kw}


# -- parameters and plan (no server) ------------------------------------------------------------------------
def test_bad_parameters_name_the_problem_and_start_nothing(tmp_path: Path) -> None:
    dsn = {"name": "managed", "dsn": "host=127.0.0.1 port=5999 dbname=bench user=bench", "disposable": True}
    cases = {
        "disposable: true": tiny(targets=[{k: v for k, v in dsn.items() if k != "disposable"}]),
        "holds a password": tiny(targets=[{**dsn, "dsn": dsn["dsn"] + " password=hunter2"}]),
        "exactly one of provision, dsn, service": tiny(targets=[{**dsn, "provision": {"host": "local"}}]),
        "must name the database": tiny(targets=[{**dsn, "dsn": "host=127.0.0.1 port=5999"}]),
        "baseline": tiny(baseline="nope"),
        "unique": tiny(targets=[SMOKE["targets"][0], SMOKE["targets"][0]]),
        "warmup_s": tiny(warmup_s=2),
        "port": tiny(targets=[{"name": "x", "provision": {"settings": {"port": 5432}}}]),
        "memory fractions": tiny(targets=[{"name": "x", "provision": {"memory_fractions": {"shared_buffers": 2}}}]),
        "only for dsn or service": tiny(targets=[{"name": "x", "provision": {}, "passfile": "/tmp/pw"}]),
        "workloads.0": tiny(workloads=["tpcc"]),
        "cleints: Extra inputs are not permitted": tiny(cleints=3),
    }
    before = workspaces()
    refused_with_key(collect.collect, cases, tmp_path)
    with pytest.raises(PreflightError, match="elsewhere"):
        collect.collect(tiny(client_host="elsewhere"), data_root=tmp_path, progress=False)
    assert workspaces() == before  # not even a workspace was made
    assert not (tmp_path / "runs").exists()


def test_plan_runs_every_target_per_workload_and_the_first_twice() -> None:
    p = Params.model_validate(tiny(blocks=3))
    points = collect.plan(p)
    assert len(points) == 3 * 2 * 3  # blocks x workloads x (stock, tuned, stock again)
    for b in (1, 2, 3):
        for w in ("pgbench", "sysbench"):
            ids = sorted(pl.id for pl in points if pl.block == b and pl.group.name == w)
            assert ids == [f"b0{b}-{w}-stock", f"b0{b}-{w}-stock-aa", f"b0{b}-{w}-tuned"]
    assert [pl.id for pl in collect.plan(p)] == [pl.id for pl in points]  # seeded
    assert [pl.id for pl in collect.plan(Params.model_validate(tiny(blocks=3, seed=2)))] != [pl.id for pl in points]


def test_tuned_settings_are_sized_from_the_host_memory() -> None:
    tuned = next(t for t in SMOKE["targets"] if t["name"] == "tuned")["provision"]
    sized = targets.sized_settings(16 * 1024 * 1024, tuned["memory_fractions"])  # 16 GiB
    assert sized == {"shared_buffers": "4096MB", "effective_cache_size": "12288MB", "maintenance_work_mem": "819MB"}
    assert {"max_wal_size", "checkpoint_timeout", "checkpoint_completion_target"} <= set(tuned["settings"])
    stock = next(t for t in SMOKE["targets"] if t["name"] == "stock")["provision"]
    assert not stock.get("settings") and not stock.get("memory_fractions")  # PostgreSQL's own defaults


def test_sysbench_never_gets_a_password_option() -> None:
    argv = sysbench.sysbench_argv("oltp_read_write", "run", "db", tables=4, table_size=10, threads=2, seconds=3,
                                  report_interval=1)
    assert "--point-selects=0" in argv and "--rand-type=uniform" in argv and argv[-1] == "run"
    assert not any(a.startswith("--pgsql-password") for a in argv)
    with pytest.raises(ValueError, match="ps shows it"):
        sysbench.sysbench_argv("oltp_write_only", "run", "db", tables=1, table_size=1, threads=1, seconds=1,
                               extra=["--pgsql-password=x"])


# -- parsing real captured outputs ------------------------------------------------------------------------
def _point(tmp: Path, kind: str, files: dict[str, Path], warmup: float = 1.0) -> tuple[Path, dict]:
    d = tmp / f"p{len(list(tmp.iterdir()))}-{kind}"
    d.mkdir()
    for name, src in files.items():
        shutil.copy(src, d / name)
    return d, {"kind": kind, "warmup_s": warmup}


def test_pgbench_and_sysbench_points_parse_real_output(tmp_path: Path) -> None:
    d, meta = _point(tmp_path, "pgbench", {"stdout.txt": DATA / "pgbench/15/run_T.stdout",
                                           "stderr.txt": DATA / "pgbench/15/run_T.stderr",
                                           "init_stderr.txt": DATA / "pgbench/15/init.stderr"})
    v = analyze.point_values(d, meta)
    # init.stderr: "done in 0.58 s (drop tables 0.00 s, create tables 0.00 s, client-side generate 0.34 s,
    # vacuum 0.12 s, primary keys 0.11 s)."
    assert v["init_total_s"] == 0.58 and v["init_generate_s"] == 0.34 and v["init_vacuum_s"] == 0.12
    assert v["init_primary_keys_s"] == 0.11 and v["init_drop_s"] == 0.0
    # run_T: progress at 1.0 s (2521.8 tps, the warm-up, cut) and 2.0 s (2109.9 tps); summary 3030.715782 tps,
    # latency average 0.659 ms, stddev 0.559 ms
    assert v["tps"] == pytest.approx(2109.9) and v["window_s"] == pytest.approx(1.0) and v["stalls"] == 0
    assert v["tps_summary"] == 3030.715782 and v["latency_summary_ms"] == 0.659 and v["latency_stddev_ms"] == 0.559

    d, meta = _point(tmp_path, "sysbench", {"stdout.txt": DATA / "sysbench/1.0/oltp_write_only.txt"})
    v = analyze.point_values(d, meta)
    assert v["tps_summary"] == 327.85 and v["p95_ms"] == 0.95 and v["errors"] == 12 and v["reconnects"] == 0
    assert v["tps"] == pytest.approx((101.14 + 465.20) / 2)  # report intervals after the first second
    assert v["writes_per_s"] == pytest.approx(4279 / 3.2652) and v["stalls"] == 0

    # the article's own outputs give the reference CSV's numbers
    ref = analyze.reference(REFERENCE).set_index(["benchmark", "metric"]).value
    init = analyze.init_phases_of((DATA / "pgbench/9.6/article_init.txt").read_text())
    assert init["init_total_s"] == ref[("pgbench_init", "total_time")]
    assert init["init_generate_s"] == ref[("pgbench_init", "insert_time")]
    assert init["init_vacuum_s"] == ref[("pgbench_init", "vacuum_time")]
    assert init["init_primary_keys_s"] == ref[("pgbench_init", "index_time")]
    d, meta = _point(tmp_path, "sysbench", {"stdout.txt": DATA / "sysbench/0.5/article_run.txt"}, warmup=60)
    v = analyze.point_values(d, meta)
    assert v["tps_summary"] == ref[("sysbench_oltp_write_only", "tps")]
    assert v["p95_ms"] == ref[("sysbench_oltp_write_only", "latency_p95")]
    assert v["writes_per_s"] == pytest.approx(ref[("sysbench_oltp_write_only", "write_requests_per_sec")], rel=1e-3)


def test_sysbench_report_intervals_with_zero_tps_are_stalls() -> None:
    iv = [{"time_s": float(t), "tps": tps, "writes_per_s": 4 * tps, "latency_pct_ms": 1.0 if tps else 0.0}
          for t, tps in ((1, 100.0), (2, 90.0), (3, 0.0), (4, 0.0), (5, 95.0))]
    w = analyze.sysbench_window(iv, warmup_s=1)
    assert w["stalls"] == 2 and w["stall_times"] == "3 4" and w["tps"] == pytest.approx(185 / 4)


# -- a server pglab did not start --------------------------------------------------------------------------
@dataclass
class Server:
    """A PostgreSQL server this test started (with pglab's Deployment): the study only gets its dsn."""

    node: Node
    password: str
    passfile: Path
    dsn: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pw = "cp-" + secrets.token_hex(12)
    where = tmp_path_factory.mktemp("client")
    with session(Inventory()) as s:
        node = s.deploy.node("theirs", "local")
        node.start()
        node.query(f"create role bench login password '{pw}'")
        node.query("create database benchdb owner bench")
        passfile = where / "pgpass"
        passfile.write_text(f"127.0.0.1:{node.port}:benchdb:bench:{pw}\n")
        passfile.chmod(0o600)
        yield Server(node, pw, passfile, f"host=127.0.0.1 port={node.port} dbname=benchdb user=bench sslmode=prefer")


def managed(srv: Server, **kw: object) -> dict:
    return {"name": "managed", "label": "a server this test started", "provider": "other", "dsn": srv.dsn,
            "passfile": str(srv.passfile), "disposable": True, **kw}


def user_tables(srv: Server) -> list[str]:
    return [r[0] for r in srv.node.query("select tablename from pg_tables where schemaname = 'public' order by 1",
                                         dbname="benchdb")]


class CommandLines:
    """Every client program's command line as ``ps`` shows it to any user, polled during a run."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
            self.seen.update(ln for ln in out.splitlines() if any(p in ln for p in ("sysbench", "pgbench", "psql")))
            self._stop.wait(0.02)

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def run(server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, analyze.Analysis, CommandLines]:
    """One smoke run: the dsn target first (the baseline, run twice) and a provisioned stock node."""
    data = tmp_path_factory.mktemp("data")
    stock = next(t for t in SMOKE["targets"] if t["name"] == "stock")
    with CommandLines() as ps:
        d = collect.collect(tiny(targets=[managed(server), stock]), data_root=data, profile="test", progress=False)
    a = analyze.analyze(d, data / "derived", data / "figures", REFERENCE)
    return d, a, ps


@pytest.mark.slow
def test_a_server_given_only_by_connection_string_is_measured_end_to_end(run: tuple, server: Server) -> None:
    d, a, _ = run
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "complete" and m["points"]["failed"] == 0 and a.failed.empty
    assert set(a.points.config) == {"managed", "stock"} and set(a.points.kind) == {"pgbench", "sysbench"}
    assert [n["name"] for n in m["nodes"]] == ["stock"]  # pglab started only its own target
    t = m["targets"]["managed"]
    assert t["kind"] == "dsn" and t["connection"]["port"] == str(server.node.port) and t["disposable"] is True
    assert t["server_version_num"] >= 150000 and t["user"] == "bench"
    assert "password_encryption" in t["non_default_settings"]  # read over SQL as the client sees it
    assert m["topology"]["client"]["host"] == "local" and m["topology"]["targets"]["managed"]["kind"] == "dsn"
    assert m["connections"]["managed"]["max_connections"] == 100 and "sysbench" in m["tools"]
    # raw output first: every command of a sysbench point, as the pgbench runner records it
    sb = d / "b01-sysbench-managed"
    for prefix in ("precleanup_", "prepare_", "", "cleanup_"):
        for f in ("command.txt", "stdout.txt", "stderr.txt", "exit_code"):
            assert (sb / f"{prefix}{f}").exists(), f"{prefix}{f}"
    assert "--pgsql-db=benchdb" in (sb / "command.txt").read_text()
    assert (d / "b01-pgbench-managed" / "init_command.txt").read_text().split()[1:4] == \
        ["-i", "--fillfactor=90", "--scale=1"]
    # the study left somebody else's server running, with its tables dropped
    assert server.node.is_running()
    assert user_tables(server) == []
    # analysis: the ranking table, init phases and sysbench per target, the claims not measurable here
    assert set(a.summary.metric) == {m.name for m in analyze.METRICS}
    assert set(a.summary.target) == {"managed", "stock"} and (a.summary["rank"] == 1).all()  # 1 block: tied
    assert set(a.init_phases.target) == {"managed", "stock"} and "generate" in set(a.init_phases.phase)
    assert list(a.sysbench.target) == ["managed", "stock"] and (a.sysbench.tps_median > 0).all()
    assert set(a.comparison.verdict) == {"not measurable here"}
    assert "needs targets with provider" in a.comparison.note.iloc[0]
    derived = d.parent.parent.parent / "derived"
    for name in ("points.csv", "summary.csv", "ratios.csv", "ratio_lines.csv", "comparison.csv", "failed_points.csv",
                 "waits.csv", "stalls.csv", "init_phases.csv", "sysbench.csv", "details.json"):
        assert (derived / name).exists(), name
    assert {"init_phases", "tps_over_time", "sysbench", "ranking", "published_vs_reproduced"} <= set(a.figures)
    assert len(a.waits) and set(a.waits.config) >= {"managed"}  # pg_stat_activity of the dsn target, over SQL


def test_the_password_is_in_no_command_line_and_no_output(run: tuple, server: Server) -> None:
    d, _, ps = run
    pw = server.password
    sysbench_lines = [ln for ln in ps.seen if "sysbench oltp_write_only" in ln and "--pgsql-db=benchdb" in ln]
    assert sysbench_lines, sorted(ps.seen)[:20]  # ps saw the runs...
    leaked = [ln for ln in ps.seen if pw in ln or "--pgsql-password" in ln]
    assert leaked == []  # ...and no password in any of them (booleans only: never print it)
    files = [f for f in (d.parent.parent.parent).rglob("*") if f.is_file()]
    assert len(files) > 50
    assert [str(f) for f in files if pw.encode() in f.read_bytes()] == []
    assert all(pw not in ln for ln in collect.command_lines(d))


def test_a_dsn_target_without_disposable_is_refused_before_anything_runs(server: Server, tmp_path: Path) -> None:
    before = workspaces()
    target = {k: v for k, v in managed(server).items() if k != "disposable"}
    with pytest.raises(ParameterError, match="disposable: true") as exc:
        collect.collect(tiny(targets=[target]), data_root=tmp_path, progress=False)
    assert "benchdb" in str(exc.value) and "creates and drops" in str(exc.value)
    assert workspaces() == before and not (tmp_path / "runs").exists()
    assert user_tables(server) == []


def test_preflight_refuses_too_many_clients_with_the_numbers(server: Server, tmp_path: Path) -> None:
    before = workspaces()
    with pytest.raises(PreflightError) as exc:
        collect.collect(tiny(targets=[managed(server)], clients=200), data_root=tmp_path, progress=False)
    msg = str(exc.value)
    assert "target managed: needs 203 connections" in msg and "max_connections 100" in msg
    assert "superuser_reserved_connections 3" in msg and "in use" in msg
    assert "Raise max_connections on managed to at least" in msg and "too many clients already" in msg
    # the same server by service name: the service file and the passfile reach it (it answered the preflight)
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[benchsvc]\nhost=127.0.0.1\nport={server.node.port}\nuser=bench\nsslmode=prefer\n")
    svc = {"name": "svc", "service": "benchsvc", "servicefile": str(services), "dbname": "benchdb",
           "passfile": str(server.passfile), "disposable": True}
    with pytest.raises(PreflightError, match="target svc: needs 203 connections .* max_connections 100"):
        collect.collect(tiny(targets=[svc], clients=200), data_root=tmp_path, progress=False)
    # a provisioned stock node (max_connections 100) is refused from its settings, before it starts
    with pytest.raises(PreflightError, match="target stock: needs 153 connections"):
        collect.collect(tiny(sysbench_threads=150), data_root=tmp_path, progress=False)
    assert workspaces() == before and not (tmp_path / "runs").exists()


def test_a_server_given_only_by_service_name_is_measured_end_to_end(server: Server, tmp_path: Path) -> None:
    """The service file names host, port and user; the passfile the password; pglab gets only the names."""
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[benchsvc]\nhost=127.0.0.1\nport={server.node.port}\nuser=bench\nsslmode=prefer\n")
    svc = {"name": "svc", "service": "benchsvc", "servicefile": str(services), "dbname": "benchdb",
           "passfile": str(server.passfile), "disposable": True}
    before = workspaces()
    d = collect.collect(tiny(targets=[svc]), data_root=tmp_path, profile="test", progress=False)
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "complete" and m["points"]["failed"] == 0 and m["nodes"] == []
    t = m["targets"]["svc"]
    assert t["kind"] == "service" and t["user"] == "bench" and t["server_version_num"] >= 150000
    # recorded in full, as the client's connection reached it: the service file, the address and port
    assert t["connection"]["service"] == "benchsvc" and t["connection"]["servicefile"] == str(services)
    assert t["started_by_pglab"] is False
    assert t["client_connection"]["server_address"] == "127.0.0.1"
    assert t["client_connection"]["server_port"] == str(server.node.port)
    assert m["topology"]["tls"] is t["client_connection"]["tls"]  # what the connection used, not a default
    for kind in ("pgbench", "sysbench"):  # the A/A pair of each workload, measured through the service
        for point in (f"b01-{kind}-svc", f"b01-{kind}-svc-aa"):
            meta = json.loads((d / point / "meta.json").read_text())
            assert meta["status"] == "ok", (point, meta.get("error"))
    assert "service=benchsvc" not in (d / "b01-sysbench-svc" / "command.txt").read_text()  # libpq's env, not argv
    assert server.node.is_running() and user_tables(server) == [] and workspaces() == before
    assert server.password.encode() not in b"".join(f.read_bytes() for f in d.rglob("*") if f.is_file())


def test_a_bad_passfile_is_refused_before_anything_runs(server: Server, tmp_path: Path) -> None:
    loose = tmp_path / "pgpass"
    loose.write_text("nothing\n")
    loose.chmod(0o644)
    with pytest.raises(PreflightError, match="readable by group or others"):
        collect.collect(tiny(targets=[managed(server, passfile=str(loose))]), data_root=tmp_path, progress=False)
    with pytest.raises(FileError, match=f"{tmp_path / 'none'}: does not exist .expected the passfile of target"):
        collect.collect(tiny(targets=[managed(server, passfile=str(tmp_path / "none"))]), data_root=tmp_path,
                        progress=False)


def _postmaster_pid(node: Node) -> int:
    return int(Path(node.data_dir, "postmaster.pid").read_text().split()[0])


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_stall_is_detected_when_the_target_is_paused(server: Server, tmp_path: Path) -> None:
    """SIGSTOP the pgbench backends of the dsn target's postmaster (by PID) for 3 s mid-run, then SIGCONT."""
    postmaster = _postmaster_pid(server.node)
    paused: list[int] = []
    done = threading.Event()

    def pause() -> None:
        while not done.is_set():
            rows = server.node.query("select pid from pg_stat_activity where application_name = 'pgbench' "
                                     "and backend_type = 'client backend' and datname = 'benchdb'")
            pids = [r[0] for r in rows if _parent(r[0]) == postmaster]
            if len(pids) >= 2:  # the run's two clients, not pgbench -i's one session
                time.sleep(1.5)
                try:
                    for pid in pids:
                        os.kill(pid, signal.SIGSTOP)
                        paused.append(pid)
                    time.sleep(3)
                finally:
                    for pid in paused:
                        os.kill(pid, signal.SIGCONT)
                return
            time.sleep(0.05)

    pauser = threading.Thread(target=pause, daemon=True)
    pauser.start()
    try:
        d = collect.collect(tiny(targets=[managed(server)], workloads=["pgbench"], seconds=7), data_root=tmp_path,
                            progress=False)
    finally:
        done.set()
        pauser.join(10)
    assert paused
    a = analyze.analyze(d, tmp_path / "derived", tmp_path / "figures", REFERENCE)
    assert a.failed.empty
    assert len(a.stalls) == 1 and a.stalls.stalls.iloc[0] >= 2, a.stalls  # 3 s paused: at least 2 intervals at 0
    stalled = a.points.set_index("point").loc[a.stalls.point.iloc[0]]
    assert stalled.config == "managed" and stalled.kind == "pgbench"
    assert len((tmp_path / "derived" / "stalls.csv").read_text().splitlines()) == 2  # header and that point
    assert a.metrics["stalls"] >= 2
