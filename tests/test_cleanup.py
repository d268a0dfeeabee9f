"""Cleanup: the run's status is written after everything was released, `pglab cleanup` stops only what
it can prove a run started, finds runs under any data root, survives a second Ctrl-C, and leaves no
passfile behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, WORKDIR, postgres_pids
from pglab.hosts import procs
from pglab.hosts.base import Host
from pglab.hosts.inventory import HostEntry, Inventory
from pglab.hosts.local import LocalHost
from pglab.nodes.node import Node
from pglab.nodes.workspace import Workspace
from pglab.runs import runs_index
from pglab.runs.leftovers import cleanup_leftovers
from pglab.runs.session import session
from pglab.runs.store import RunStore

BINDIR = HostEntry().bindir


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never the real user's runs index (subprocesses inherit the variable)."""
    d = tmp_path / "state"
    monkeypatch.setenv("PGLAB_STATE_DIR", str(d))
    return d


# -- helpers ------------------------------------------------------------------------------------------


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write_run(root: Path, **fields: Any) -> Path:
    """A hand-written manifest of a run that was killed (its own process is gone)."""
    d = root / "runs" / "test" / f"20250101T000000Z-{uuid.uuid4().hex[:6]}"
    d.mkdir(parents=True)
    manifest = {"status": "running", "pid": dead_pid(), "nodes": [], "processes": [], "workspaces": {}, **fields}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d / "manifest.json"


def status(manifest: Path) -> dict[str, Any]:
    return json.loads(manifest.read_text())


def mktemp_workspace() -> str:
    """An empty folder shaped like a pglab workspace, in the inventory's default workdir (conftest.WORKDIR)."""
    return subprocess.run(["mktemp", "-d", f"{WORKDIR}/pglab-XXXXXX"], capture_output=True, text=True,
                          check=True).stdout.strip()


def group_alive(pgid: int) -> bool:
    """Any process (not a zombie) of group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def stop_servers_under(base: str) -> None:
    """Test teardown: SIGQUIT (immediate shutdown) the postmasters below ``base``, by PID."""
    for pid in postgres_pids(base):
        os.kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + 20
    while postgres_pids(base) and time.monotonic() < deadline:
        time.sleep(0.1)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- pglab.hosts.procs ----------------------------------------------------------------------------------------


def test_parse_start_time_counts_after_the_last_parenthesis() -> None:
    stat = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3"
    assert procs.parse_start_time(stat) == 987654
    assert procs.parse_cmdline("sh\0-c\0echo a\0") == ["sh", "-c", "echo a"]
    assert procs.parse_cmdline("a\0\0") == ["a", ""]


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_identity_of_a_started_process_locally_and_over_ssh(inventory: Inventory, where: str) -> None:
    """Read through Host.read_text: the same facts over SSH; read once the launcher has exec'd."""
    host = inventory.connect(where)
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    bg = host.start(["sleep", "60"], f"{base}/out", f"{base}/err")
    try:
        ident = procs.started_identity(host, bg.pid)
        # the test sshd runs on this machine: same boot id
        assert ident is not None and ident["boot_id"] == Path(procs.BOOT_ID).read_text().strip()
        assert ident["cmdline"][:2] == ["sh", "-c"] and ident["cmdline"][2].startswith("sleep 60 ")
        assert procs.mismatch(host, bg.pid, ident) is None
        assert "another time" in str(procs.mismatch(host, bg.pid, {**ident, "start_time": ident["start_time"] + 1}))
        assert "another command" in str(procs.mismatch(host, bg.pid, {**ident, "cmdline": ["sleep", "60"]}))
        assert "rebooted" in str(procs.mismatch(host, bg.pid, {**ident, "boot_id": "x"}))
        bg.stop()
        assert procs.mismatch(host, bg.pid, ident) == "gone"
    finally:
        bg.stop()
        host.remove_tree(base)
        host.close()


# -- 1. status after release; cleanup_failed + leftovers --------------------------------------------------


@pytest.mark.servers
def test_what_could_not_be_stopped_makes_the_run_cleanup_failed_and_cleanup_stops_it(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs" / "test", "test", "test", {})
    ws = ""
    bg_pid = 0
    try:
        with session(Inventory(), store) as s:
            node = s.deploy.node("primary", "local")
            node.start()
            ws = node.ws.base
            bg = s.track_background(node.host.start(["sleep", "300"], f"{ws}/sleep.out", f"{ws}/sleep.err"))
            bg_pid = bg.pid

            def refuse(*_: object, **__: object) -> None:
                raise RuntimeError("refuses to stop")

            bg.stop = refuse  # type: ignore[method-assign]
            node.stop = lambda *_, **__: None  # type: ignore[method-assign]  (returns, server still up)
        m = status(store.dir / "manifest.json")
        assert m["status"] == "cleanup_failed" and m["outcome"] == "complete"
        assert {"kind": "process", "host": "local", "pid": bg_pid, "command": "sleep 300"} in m["leftovers"]
        assert {"kind": "node", "host": "local", "node": "primary", "data_dir": f"{ws}/primary"} in m["leftovers"]
        assert postgres_pids(ws) and group_alive(bg_pid)  # really left behind
        assert not Path(f"{ws}/pgpass").exists()  # the kept workspace keeps no password

        # programs and users come from the inventory, whatever the manifest says
        m["nodes"] = [{**n, "bindir": "/nonexistent", "server_user": "nobody"} for n in m["nodes"]]
        (store.dir / "manifest.json").write_text(json.dumps(m))
        report = cleanup_leftovers(tmp_path, Inventory())
        assert report.clean, report.lines
        text = "\n".join(report.lines)
        assert f"stopped process {bg_pid} on local" in text and "stopped node primary on local" in text
        time.sleep(0.3)
        assert not postgres_pids(ws) and not group_alive(bg_pid)
        m = status(store.dir / "manifest.json")
        assert m["status"] == "complete" and m["leftovers"] == []  # the run itself had succeeded
    finally:
        if ws:
            stop_servers_under(ws)
            subprocess.run(["rm", "-rf", ws])
        if bg_pid:
            kill_group(bg_pid)


# -- 2. only what a run provably started ----------------------------------------------------------------


def test_a_pid_that_now_belongs_to_another_process_is_left_alone(tmp_path: Path) -> None:
    sleep = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10  # under load /proc shows an empty command line mid-exec (seen in CI)
        while (real := procs.identity(LocalHost(), sleep.pid)) is None or real["cmdline"] != ["sleep", "300"]:
            assert time.monotonic() < deadline, f"sleep's identity never settled: {real}"
            time.sleep(0.05)
        entry = {"host": "local", "pid": sleep.pid, "command": "pgbench -c 4 bench"}
        for fake in ({"start_time": real["start_time"] - 100},  # an earlier process had this PID
                     {"cmdline": ["sh", "-c", "pgbench -c 4 bench > out"]},
                     {"boot_id": "00000000-0000-0000-0000-000000000000"}):
            write_run(tmp_path, processes=[{**entry, **real, **fake}])
        write_run(tmp_path, processes=[entry])  # a manifest without identity proves nothing
        report = cleanup_leftovers(tmp_path, Inventory())
        time.sleep(0.3)
        assert sleep.poll() is None, "cleanup killed a process that is not the run's"
        text = "\n".join(report.lines)
        assert text.count(f"left alone: pid {sleep.pid} now belongs to another process") == 3, text
        assert "cannot prove" in text and report.clean and report.left_alone == 4

        # the same PID, proven: stopped (the check is not "never kill")
        write_run(tmp_path, processes=[{**entry, **real}])
        report = cleanup_leftovers(tmp_path, Inventory())
        text = "\n".join(report.lines)  # first, so that a failure shows what cleanup did
        assert f"stopped process {sleep.pid} on local (SIGTERM)" in text, text
        assert sleep.wait(timeout=30) == -signal.SIGTERM, text
    finally:
        if sleep.poll() is None:
            os.kill(sleep.pid, signal.SIGKILL)
            sleep.wait()


@pytest.fixture
def fake_bindir() -> Iterator[Path]:
    """A pg_ctl that would leave a marker: it must never run."""
    d = Path(tempfile.mkdtemp(prefix="pglab-fakebin-"))
    d.chmod(0o777)  # whoever it would run as could write the marker
    script = d / "pg_ctl"
    script.write_text(f"#!/bin/sh\ntouch {d}/marker\nexit 0\n")
    script.chmod(0o755)
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=True)


@pytest.fixture
def outside_node() -> Iterator[Node]:
    """A running server that belongs to no run."""
    host = LocalHost()
    ws = Workspace.create(host, "/tmp")
    node = Node(ws, "ext", host.free_port(), BINDIR)
    try:
        node.init()
        node.start()
        yield node
    finally:
        node.stop("immediate")
        ws.remove()


@pytest.mark.servers
def test_nodes_outside_the_run_and_programs_named_by_a_manifest_are_never_touched(
        tmp_path: Path, fake_bindir: Path, outside_node: Node) -> None:
    ws_a, ws_b = mktemp_workspace(), mktemp_workspace()
    ext = outside_node.data_dir
    try:
        node = {"name": "primary", "host": "local", "role": "primary", "server_user": "root"}
        # the manifest names its own pg_ctl: the inventory's is used (the data dir has no server)
        write_run(tmp_path, workspaces={"local": ws_a},
                  nodes=[{**node, "data_dir": f"{ws_a}/primary", "bindir": str(fake_bindir)}])
        # a data dir outside the run's workspace, directly or through '..'
        write_run(tmp_path, workspaces={"local": ws_b},
                  nodes=[{**node, "data_dir": ext, "bindir": BINDIR},
                         {**node, "name": "sneaky", "data_dir": f"{ws_b}/../{Path(ext).parent.name}/ext",
                          "bindir": BINDIR}])
        # a "workspace" that is not one: everything under /tmp would be in it
        write_run(tmp_path, workspaces={"local": "/tmp"}, nodes=[{**node, "data_dir": ext, "bindir": BINDIR}])
        report = cleanup_leftovers(tmp_path, Inventory())
        text = "\n".join(report.lines)
        assert not (fake_bindir / "marker").exists(), "cleanup ran a program named by a manifest"
        assert postgres_pids(outside_node.ws.base), f"cleanup stopped a server of no run:\n{text}"
        assert "not in a workspace of this run" in text and "is not a pglab workspace" in text
        assert "node primary on local not running" in text

        # the run's workspace, but not in the inventory's workdir for that host
        other = tmp_path / "other"
        write_run(other, workspaces={"local": outside_node.ws.base},
                  nodes=[{**node, "data_dir": ext, "bindir": BINDIR}])
        report = cleanup_leftovers(other, Inventory(hosts={"local": HostEntry(workdir="/srv")}))
        assert postgres_pids(outside_node.ws.base) and "is not a pglab workspace" in "\n".join(report.lines)
    finally:
        subprocess.run(["rm", "-rf", ws_a, ws_b])


def test_cleanup_closes_every_connection_it_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Host] = []
    closed: list[Host] = []

    class CountingHost(LocalHost):
        def close(self) -> None:
            closed.append(self)

    def connect(self: Inventory, name: str) -> Host:
        opened.append(CountingHost(name))
        return opened[-1]

    monkeypatch.setattr(Inventory, "connect", connect)
    boot = Path(procs.BOOT_ID).read_text().strip()
    gone = {"host": "local", "command": "x", "boot_id": boot, "start_time": 1, "cmdline": ["x"]}
    ws = mktemp_workspace()
    try:
        run = dict(workspaces={"local": ws}, processes=[{**gone, "pid": dead_pid()}, {**gone, "pid": dead_pid()}],
                   nodes=[{"name": "primary", "host": "local", "data_dir": f"{ws}/primary", "bindir": BINDIR}])
        write_run(tmp_path, **run)
        assert cleanup_leftovers(tmp_path, Inventory()).clean
        assert len(opened) == 1 and closed == opened  # one connection per host and run, closed

        write_run(tmp_path, **run)

        def interrupted(*_: object, **__: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(procs, "mismatch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            cleanup_leftovers(tmp_path, Inventory())
        assert len(opened) == 2 and closed == opened  # closed on the way out too
    finally:
        subprocess.run(["rm", "-rf", ws])


RUN_SCRIPT = """
import sys, time
from pathlib import Path
from pglab.runs.session import session
from pglab.hosts.inventory import Inventory
from pglab.runs.store import RunStore
store = RunStore(Path(sys.argv[1]) / "runs" / "test", "test", "test", {})
with session(Inventory(), store) as s:
    primary = s.deploy.node("primary", "local")
    primary.start()
    base = primary.ws.base
    s.track_background(primary.host.start(["sleep", "300"], f"{base}/sleep.out", f"{base}/sleep.err"))
    print(store.dir, flush=True)
    time.sleep(300)
"""


def sigkilled_run(data_root: Path) -> tuple[Path, dict[str, Any]]:
    """A run (one server, one background process) killed with SIGKILL: nothing of it cleaned up."""
    proc = subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(data_root)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    assert line, err
    manifest = Path(line) / "manifest.json"
    m = status(manifest)
    ws = m["workspaces"]["local"]
    assert m["status"] == "running" and len(postgres_pids(ws)) == 1 and group_alive(m["processes"][0]["pid"])
    assert Path(m["local_passfiles"]["local"]).exists() and Path(f"{ws}/pgpass").exists()
    return manifest, m


def assert_cleaned(res: subprocess.CompletedProcess[str], manifest: Path, m: dict[str, Any]) -> None:
    out = res.stdout + res.stderr
    ws = m["workspaces"]["local"]
    assert res.returncode == 0, out
    assert "stopped node primary on local" in res.stdout and "stopped process" in res.stdout, out
    assert res.stdout.rstrip().endswith("all clean"), out
    time.sleep(0.3)
    assert not postgres_pids(ws) and not group_alive(m["processes"][0]["pid"])
    assert not Path(m["local_passfiles"]["local"]).exists(), "the control machine's passfile copy is left"
    assert not Path(f"{ws}/pgpass").exists() and Path(f"{ws}/primary.log").exists()  # evidence, no secret
    after = status(manifest)
    assert after["status"] == "killed" and after["leftovers"] == []


@pytest.mark.servers
def test_a_sigkilled_run_is_stopped_by_pglab_cleanup(tmp_path: Path) -> None:
    manifest, m = sigkilled_run(tmp_path)
    try:
        res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "cleanup", "--data-root", str(tmp_path)],
                             capture_output=True, text=True, cwd=REPO, timeout=120)
        assert_cleaned(res, manifest, m)
    finally:
        stop_servers_under(m["workspaces"]["local"])
        kill_group(m["processes"][0]["pid"])
        subprocess.run(["rm", "-rf", m["workspaces"]["local"]])


@pytest.mark.servers
def test_a_run_under_any_data_root_is_found_through_the_runs_index(tmp_path: Path, state_dir: Path) -> None:
    data_root = Path(tempfile.mkdtemp(prefix="pglab-elsewhere-"))  # not under data/, not under the cwd
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    manifest, m = sigkilled_run(data_root)
    try:
        assert [p for _, p in runs_index.entries()] == [manifest.resolve()]
        assert str(state_dir) in str(runs_index.index_dir())
        res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "cleanup"], capture_output=True, text=True,
                             cwd=elsewhere, timeout=120)
        assert_cleaned(res, manifest, m)
        assert runs_index.entries() == []  # over and clean: dropped from the index
        again = subprocess.run([sys.executable, "-m", "pglab.app.cli", "cleanup"], capture_output=True, text=True,
                               cwd=elsewhere, timeout=120)
        assert again.returncode == 0 and "nothing left behind" in again.stdout
    finally:
        stop_servers_under(m["workspaces"]["local"])
        kill_group(m["processes"][0]["pid"])
        subprocess.run(["rm", "-rf", m["workspaces"]["local"], str(data_root)])


def test_the_index_forgets_runs_that_are_over(tmp_path: Path) -> None:
    gone = write_run(tmp_path, status="running")
    complete = write_run(tmp_path, status="complete")
    left = write_run(tmp_path, status="cleanup_failed", leftovers=[{"kind": "node", "host": "nowhere"}],
                     nodes=[{"name": "n", "host": "nowhere", "data_dir": "/tmp/pglab-abcdef/n"}])
    running = write_run(tmp_path, status="running", pid=os.getpid())  # this process: in progress
    # over, but its process still lives (a concurrent collect publishing, a notebook's kernel): not ours
    # to touch, whoever's it is, until that process is gone
    finishing = write_run(tmp_path, status="complete", pid=os.getpid(),
                          control=procs.identity(LocalHost(), os.getpid()))
    for p in (gone, complete, left, running, finishing):
        runs_index.register(p)
    gone.unlink()
    report = cleanup_leftovers(tmp_path / "no-data-root", Inventory())
    assert {p for _, p in runs_index.entries()} == {left.resolve(), running.resolve(), finishing.resolve()}
    assert report.pruned == 2 and not report.clean
    assert status(running)["status"] == "running" and "run still in progress" in "\n".join(report.lines)


# -- 3. a second signal does not abort the cleanup ---------------------------------------------------------


SIGNAL_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
from pglab.runs.session import session
from pglab.hosts.inventory import Inventory
from pglab.nodes.node import Node
from pglab.runs.store import RunStore

real_stop = Node.stop

def impatient_stop(self, mode="fast"):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT):  # Ctrl-C, again and again
        os.kill(os.getpid(), sig)
        time.sleep(0.2)
    real_stop(self, mode)

Node.stop = impatient_stop
store = RunStore(Path(sys.argv[1]) / "runs" / "test", "test", "test", {})
print(store.dir, flush=True)
try:
    with session(Inventory(), store) as s:
        node = s.deploy.node("primary", "local")
        node.start()
        print(node.ws.base, flush=True)
        raise KeyboardInterrupt
except KeyboardInterrupt:
    print("restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
          signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
    sys.exit(130)
"""


@pytest.mark.servers
def test_signals_during_cleanup_are_deferred_and_still_reported(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-c", SIGNAL_SCRIPT, str(tmp_path)], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    lines = res.stdout.splitlines()
    run = Path(lines[0])
    ws = lines[1] if len(lines) > 1 else ""
    try:
        assert ws and not postgres_pids(ws), res.stdout + res.stderr
        assert res.returncode == 130 and lines[-1] == "restored True True", res.stdout + res.stderr
        m = status(run / "manifest.json")
        assert m["status"] == "interrupted" and m["leftovers"] == []
        assert m["signals_during_cleanup"] == ["SIGTERM", "SIGINT", "SIGTERM", "SIGINT"]
        assert "received during cleanup" in res.stderr
        assert (run / "logs" / "primary.log").exists()  # the logs were still copied
    finally:
        if ws:
            stop_servers_under(ws)
            subprocess.run(["rm", "-rf", ws])


# -- 5. passfiles ------------------------------------------------------------------------------------------


@pytest.mark.servers
def test_a_failed_run_keeps_its_workspace_but_not_its_passfile(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path / "runs" / "test", "test", "test", {})
    at_finish: dict[str, Any] = {}
    real_finish = store.finish

    def finish(status: str, **extra: Any) -> None:  # what is still there when the status is written
        at_finish.update(servers=postgres_pids(ws.base), local_passfile=os.path.exists(ws.local_passfile),
                         passfile=os.path.exists(ws.passfile))
        real_finish(status, **extra)

    monkeypatch.setattr(store, "finish", finish)
    ws: Workspace | None = None
    try:
        with pytest.raises(RuntimeError, match="boom"):
            with session(Inventory(), store) as s:
                node = s.deploy.node("primary", "local")
                node.start()
                ws = node.ws
                raise RuntimeError("boom")
        assert ws is not None
        assert at_finish == {"servers": set(), "local_passfile": False, "passfile": False}
        assert Path(ws.base).is_dir() and Path(node.log_file).exists() and Path(node.data_dir).is_dir()
        assert not Path(ws.passfile).exists() and not Path(ws.local_passfile).exists()
        m = status(store.dir / "manifest.json")
        assert m["status"] == "failed" and m["local_passfiles"] == {"local": ws.local_passfile}
        assert ws.password not in (store.dir / "manifest.json").read_text()
    finally:
        if ws is not None:
            stop_servers_under(ws.base)
            subprocess.run(["rm", "-rf", ws.base])


# -- 6. the command's output and exit code -------------------------------------------------------------


def test_cleanup_command_exits_1_when_something_could_not_be_stopped(tmp_path: Path) -> None:
    boot = Path(procs.BOOT_ID).read_text().strip()
    write_run(tmp_path, processes=[{"host": "local", "pid": dead_pid(), "command": "pgbench", "boot_id": boot,
                                    "start_time": 1, "cmdline": ["pgbench"]}])
    cmd = [sys.executable, "-m", "pglab.app.cli", "cleanup", "--data-root", str(tmp_path)]
    ok = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "already gone" in ok.stdout and ok.stdout.rstrip().endswith("all clean")

    bad = write_run(tmp_path, workspaces={"db9": "/tmp/pglab-abcdef"},
                    nodes=[{"name": "primary", "host": "db9", "data_dir": "/tmp/pglab-abcdef/primary"}])
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "could not stop node primary on db9" in res.stdout and "NOT CLEAN" in res.stdout
    assert "2 could not be stopped or cleaned" in res.stdout  # the node, and the passfile in its workspace
    m = status(bad)
    assert m["status"] == "cleanup_failed" and m["outcome"] == "killed"
    assert {"kind": "node", "host": "db9", "node": "primary", "data_dir": "/tmp/pglab-abcdef/primary"} in m["leftovers"]
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert again.returncode == 1  # cleanup_failed is handled like running: tried again, still reported


def test_a_truncated_manifest_is_not_clean(tmp_path: Path) -> None:
    """A manifest cut short (a full disk, a copy gone wrong) hides what its run started: cleanup says so and
    exits 2 (bad input, as every reader of a run folder answers it), never "all clean"."""
    cut = write_run(tmp_path, workspaces={"local": "/tmp/pglab-abcdef"})
    cut.write_text(cut.read_text()[:40])
    cmd = [sys.executable, "-m", "pglab.app.cli", "cleanup", "--data-root", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{cut}: unreadable manifest" in res.stdout and "could not be looked for" in res.stdout
    assert "NOT CLEAN" in res.stdout and "all clean" not in res.stdout
