"""Deployments across real SSH hosts: the lab (network namespaces of this machine, each with its sshd).

Primary or provider on lab1, standby or subscriber on lab2, clients on lab3, lab4 outside the topology.
Every connection between them is TCP between different addresses, after an SSH login per host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, TEST_LAB, postgres_pids
from pglab.analysis import placement
from pglab.errors import RunAborted
from pglab.hosts import lab
from pglab.hosts.inventory import Inventory
from pglab.nodes import topology
from pglab.nodes.workspace import SUPERUSER
from pglab.runs.leftovers import cleanup_leftovers
from pglab.runs.reading import load_manifest
from pglab.runs.session import session
from pglab.studies import STUDIES
from pglab.studies.synchronous_commit import collect as sc_collect

pytestmark = pytest.mark.servers


def _lab() -> lab.Lab:
    made = lab.load(TEST_LAB)
    assert made is not None
    return made


def _psql(inv: Inventory, host: str, sql: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    h = inv.connect(host)
    try:
        res = h.run(["/usr/lib/postgresql/15/bin/psql", "-XAtc", sql, "postgres"], env=env, check=False, timeout=30)
        return subprocess.CompletedProcess([], res.exit_code, res.stdout, res.stderr)
    finally:
        h.close()


def test_nodes_listen_on_their_data_address_and_admit_only_the_run_hosts(lab_inventory: Inventory) -> None:
    inv = lab_inventory
    addr = {n: inv.entry(n).data_ip for n in ("lab1", "lab2", "lab3", "lab4")}
    with session(inv) as s:
        topo = topology.streaming(s.deploy, "lab1", [("sb1", "lab2")], method="FIRST", count=1)
        s.deploy.open(["lab3"])  # the client host: admitted on the running nodes too (pg_hba rewritten, reloaded)
        primary, standby = topo.primary, topo.standbys[0]
        # listens on its data address (and its socket) only
        listening = _lab().run_in("lab1", ["ss", "-Htln"]).stdout
        ports = [line.split()[3] for line in listening.splitlines() if line.split()[3].endswith(f":{primary.port}")]
        assert ports == [f"{addr['lab1']}:{primary.port}"], listening
        hba = primary.host.read_text(f"{primary.data_dir}/pg_hba.conf")
        admitted = {line.split()[3].split("/")[0] for line in hba.splitlines() if line.startswith("host")}
        assert admitted == {addr["lab1"], addr["lab2"], addr["lab3"]}, hba
        # the standby streams from another host, over TCP from its own address
        row = primary.query("select host(client_addr), sync_state from pg_stat_replication")
        assert row == [(addr["lab2"], "sync")]
        # a client on lab3: TCP with lab3's own passfile
        client = s.deploy.client("lab3")
        ok = _psql(inv, "lab3", "select host(inet_client_addr())", client.env(primary))
        assert ok.returncode == 0 and ok.stdout.strip() == addr["lab3"], ok.stderr
        # lab4 is no host of this run: refused by pg_hba before any password is asked
        outside = _psql(inv, "lab4", "select 1", {"PGHOST": addr["lab1"], "PGPORT": str(primary.port),
                                                  "PGUSER": SUPERUSER, "PGPASSFILE": "/dev/null",
                                                  "PGCONNECT_TIMEOUT": "5"})
        assert outside.returncode != 0
        assert f'no pg_hba.conf entry for host "{addr["lab4"]}"' in outside.stderr, outside.stderr
        # nor is the standby reachable from there
        outside = _psql(inv, "lab4", "select 1", {"PGHOST": addr["lab2"], "PGPORT": str(standby.port),
                                                  "PGUSER": SUPERUSER, "PGPASSFILE": "/dev/null",
                                                  "PGCONNECT_TIMEOUT": "5"})
        assert "no pg_hba.conf entry" in outside.stderr
        bases = [ws.base for ws in s.deploy.workspaces.values()]
    assert all(not postgres_pids(b) for b in bases)


@pytest.mark.slow
def test_tls_verify_full_for_clients_and_replication(lab_inventory: Inventory) -> None:
    inv = lab_inventory
    with session(inv, tls=True) as s:
        s.deploy.open(["lab1", "lab2", "lab3"])
        topo = topology.streaming(s.deploy, "lab1", [("sb1", "lab2")], method="FIRST", count=1)
        primary = topo.primary
        assert primary.describe()["tls"] is True
        client = s.deploy.client("lab3")
        env = client.env(primary)
        assert env["PGSSLMODE"] == "verify-full" and env["PGSSLROOTCERT"].startswith(client.ws.base)
        ok = _psql(inv, "lab3", "select ssl from pg_stat_ssl where pid = pg_backend_pid()", env)
        assert ok.returncode == 0 and ok.stdout.strip() == "t", ok.stderr
        # the walsender of the standby on lab2 is encrypted too
        rows = primary.query("select s.ssl from pg_stat_replication r join pg_stat_ssl s on s.pid = r.pid")
        assert rows == [(True,)]
        # without TLS a client is refused (hostssl only)
        plain = _psql(inv, "lab3", "select 1", {**env, "PGSSLMODE": "disable"})
        assert plain.returncode != 0 and "no encryption" in plain.stderr, plain.stderr


def _namespace_pids(namespace: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.slow
def test_standby_host_dies_mid_run_the_run_ends_and_nothing_is_left(lab_inventory: Inventory,
                                                                       tmp_path: Path) -> None:
    """The synchronous standby's host (its sshd and its servers) is killed while the study runs."""
    inv = lab_inventory
    params = {**yaml.safe_load((REPO / "params/synchronous_commit.yaml").read_text())["profiles"]["smoke"],
              "levels": ["on", "remote_apply"], "clients": [2], "seconds": 30, "blocks": 1,
              "standby_read_blocks": 0, "fsync_test_seconds": 0, "client_timeout_s": 8,
              "primary_host": "lab1", "standby_host": "lab2", "client_host": "lab3"}
    ns = _lab().host("lab2").namespace
    killed: list[int] = []

    def kill_lab2_when_measuring() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(p.name.startswith("write-") for p in tmp_path.glob("runs/synchronous_commit/*/*")):
                time.sleep(0.5)
                for pid in _namespace_pids(ns):  # sshd, the standby's postmaster and its children
                    subprocess.run(["kill", "-KILL", str(pid)], check=False)
                    killed.append(pid)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_lab2_when_measuring, daemon=True)
    killer.start()
    try:
        t0 = time.monotonic()
        # the point fails, and the run ends there, naming the host, instead of failing every later point
        with pytest.raises(RunAborted, match="host lab2 does not answer|node standby1 on host lab2"):
            sc_collect.collect(params, data_root=tmp_path, progress=False, inventory=inv)
        run = next(tmp_path.glob("runs/synchronous_commit/*"))
        killer.join(5)
        assert killed, "lab2 was never killed"
        assert time.monotonic() - t0 < 150
        m = load_manifest(run)
        failed = {p.name: json.loads((p / "meta.json").read_text()) for p in run.iterdir()
                  if p.name.startswith("write-") and json.loads((p / "meta.json").read_text())["status"] != "ok"}
        assert len(failed) == 1, "one point failed, and no other was measured after it"
        errors = " ".join(str(f.get("error")) for f in failed.values())
        # what failed it: the commit waiting for the standby, pgbench, lab2's SSH for the point's CPU record,
        # or a connection of pglab's own (through lab2's tunnel) cut when its sshd was killed
        assert any(w in errors for w in ("timed out", "standby1", "pgbench exited", "Unable to connect",
                                         "connection")), errors
        # cleanup could not reach lab2 over SSH to prove its standby stopped: it says so instead of guessing
        assert m["status"] == "cleanup_failed" and any(left.get("host") == "lab2" for left in m["leftovers"]), m
        bases = list(m["workspaces"].values())
        assert all(not postgres_pids(b) for b in bases)  # nothing runs anywhere (one machine: one /proc)
        # once lab2 is back, `pglab cleanup` proves it and the run is closed; it finds the lab hosts through
        # the inventory file the run recorded, although it is given only the default inventory
        assert m["inventory"] == inv.source
        lab.up(4, name=TEST_LAB)
        for _ in range(3):  # lab2's new sshd may take a moment to answer: cleanup is meant to be run again
            report = cleanup_leftovers(tmp_path, Inventory())
            if report.clean:
                break
            time.sleep(2)
        assert report.clean, report.summary() + "\n" + "\n".join(report.lines)
        assert load_manifest(run)["status"] != "cleanup_failed"
        assert all(not postgres_pids(b) for b in bases)
    finally:  # the lab is shared by the tests after this one: lab2 comes back whatever failed here
        lab.up(4, name=TEST_LAB)


def _notebook(study: str, inventory_path: str, tmp: Path) -> tuple[dict, Path]:
    out = tmp / f"{study}.ipynb"
    res = subprocess.run([sys.executable, "-m", "papermill", f"notebooks/{study}.ipynb", str(out), "--log-level",
                          "WARNING", "-p", "profile", "smoke_lab", "-p", "inventory", inventory_path,
                          "-p", "data_root", str(tmp / "data"), "-p", "figures_root", str(tmp / "figures")],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = sorted((tmp / "data" / "runs" / study).iterdir())
    return load_manifest(runs[-1]), out


@pytest.mark.slow
@pytest.mark.parametrize("study", [s for s in STUDIES if s != "streaming_scale_out"])  # it: across four hosts
def test_smoke_lab_profiles_run_across_three_hosts(lab_inventory: Inventory, tmp_path: Path, study: str) -> None:
    """The notebooks at their smoke_lab profile: nodes on lab1 and lab2, pgbench on lab3, analysed."""
    inv_path = _lab().inventory_path
    assert inv_path
    m, executed = _notebook(study, inv_path, tmp_path)
    assert m["status"] == "complete"
    assert set(m["hosts"]) == {"lab1", "lab2", "lab3"}
    assert len(placement.machines(m)) == 1 and len({f["netns"] for f in m["hosts"].values()}) == 3
    text = executed.read_text()
    assert "3 hosts (lab1, lab2, lab3) as network namespaces (a pglab lab) on ONE machine" in text
    hosts_of = {n["name"]: n["host"] for n in m["nodes"]}
    if study == "synchronous_commit":
        assert hosts_of == {"primary": "lab1", "standby1": "lab2"} and m["topology"]["tls"] is True
        assert {c["host"] for c in m["topology"]["clients"].values()} == {"lab3"}
        comparison = (tmp_path / "data/derived/synchronous_commit/comparison.csv").read_text()
        assert "standby read tps does not depend on primary load" in comparison
        assert "not measurable here" in comparison.splitlines()[-1]
    elif study == "fdw_overhead":  # FDW_external: postgres_fdw on lab2 reaches the source on lab1 over TCP
        assert hosts_of == {"source": "lab1", "external": "lab2"}
        assert {c["host"] for c in m["topology"]["clients"].values()} == {"lab3"}
        assert m["checks"] == {"consistent": True, "isolation": dict.fromkeys(
            ["local", "FDW_local", "FDW_external", "FDW_ext_ro"], "repeatable read"), "ext_ro_refuses_update": True}
        run = sorted((tmp_path / "data" / "runs" / study).iterdir())[-1]
        setup = json.loads((run / "init" / "fdw_setup.json").read_text())
        lab1 = m["topology"]["hosts"]["lab1"]
        assert f"host '{lab1}'" in setup["FDW_external"][1] and "password" not in json.dumps(setup)
        comparison = (tmp_path / "data/derived/fdw_overhead/comparison.csv").read_text()
        assert "external instance on lab2, source on lab1" in comparison
    elif study == "cloud_providers":  # each target on a host of its own, pgbench and sysbench on a third
        assert hosts_of == {"stock": "lab1", "tuned": "lab2"} and m["topology"]["client"]["host"] == "lab3"
        assert m["targets"]["tuned"]["sized_from_memory"]["mem_total_kb"] > 0
        points = pd.read_csv(tmp_path / "data/derived/cloud_providers/points.csv")
        assert sorted(points["config"].unique()) == ["stock", "tuned"] and (points["tps"] > 0).all()
        assert set(points["kind"]) == {"pgbench", "sysbench"}
        for node in m["nodes"]:  # the client reached each target over the lab network, not a local socket
            assert node["address"] == m["topology"]["hosts"][node["host"]] != "127.0.0.1"
    else:
        assert {h for n, h in hosts_of.items() if "_provider" in n} == {"lab1"}
        assert {h for n, h in hosts_of.items() if "_subscriber" in n} == {"lab2"}
        assert m["topology"]["client"]["host"] == "lab3"
        systems = m["systems"]
        assert {k for k, v in systems.items() if v["status"] == "measured"} == {
            "streaming", "builtin", "pglogical", "slony", "londiste"}, systems
        run = sorted((tmp_path / "data" / "runs" / study).iterdir())[-1]
        for point in run.iterdir():  # every system replicated across hosts, caught up and matched
            meta = json.loads((point / "meta.json").read_text()) if (point / "meta.json").exists() else {}
            if meta.get("kind") == "run":
                assert meta["status"] == "ok" and meta["consistent"] is True, (point.name, meta.get("error"))
        daemons = {p["command"].split()[0]: p["host"] for p in m["processes"] if "pgbench" not in p["command"]}
        assert daemons.get("pgqd") == "lab1"
        slon_hosts = {p["host"] for p in m["processes"] if p["command"].startswith("slon ")}
        assert slon_hosts == {"lab1", "lab2"}  # one slon per node, on its node's host
        leaf = [p["host"] for p in m["processes"] if "londiste_leaf.ini" in p["command"]]
        assert leaf and set(leaf) == {"lab2"}


@pytest.mark.parametrize("method,states", [("ANY", {"quorum"}), ("FIRST", {"sync", "potential"})])
def test_streaming_with_standbys_on_two_other_hosts(lab_inventory: Inventory, method: str, states: set) -> None:
    """A primary on lab1 and two standbys (lab2, lab3): FIRST 1 / ANY 1 over both, states and replay."""
    with session(lab_inventory) as s:
        topo = topology.streaming(s.deploy, "lab1", [("sb1", "lab2"), ("sb2", "lab3")], method=method, count=1)
        assert topo.synchronous_standby_names == f"{method} 1 (sb1, sb2)"
        seen = topo.wait_sync_states()
        assert set(seen.values()) == states and (method == "ANY" or seen["sb1"] == "sync")
        topo.primary.query("create table t as select generate_series(1, 1000) x")
        waits = topo.wait_replay()
        assert set(waits) == {"sb1", "sb2"}
        assert [sb.query("select count(*) from t") for sb in topo.standbys] == [[(1000,)], [(1000,)]]
        assert {sb.host.name for sb in topo.standbys} == {"lab2", "lab3"}


@pytest.mark.slow
def test_streaming_scale_out_across_four_hosts(lab_inventory: Inventory, tmp_path: Path) -> None:
    """The study's smoke_lab profile: primary on lab1, standbys on lab2 and lab3, loader and queries on lab4.
    The scale-out verdicts are "not measurable here" because the lab hosts are one machine."""
    inv_path = _lab().inventory_path
    assert inv_path
    m, executed = _notebook("streaming_scale_out", inv_path, tmp_path)
    assert m["status"] == "complete" and m["points"]["failed"] == 0, m["points"]
    assert set(m["hosts"]) == {"lab1", "lab2", "lab3", "lab4"}
    assert {n["name"]: n["host"] for n in m["nodes"]} == {"primary": "lab1", "sb1": "lab2", "sb2": "lab3"}
    assert m["topology"]["clients"]["all"]["host"] == "lab4"
    run = sorted((tmp_path / "data" / "runs" / "streaming_scale_out").iterdir())[-1]
    loads = [json.loads((p / "meta.json").read_text()) for p in run.glob("insert-*")]
    assert loads and all(x["commands"]["load_"]["host"] == "lab4" for x in loads)
    assert all(x["status"] == "ok" for x in loads)
    lag = (run / next(p.name for p in run.glob("insert-*") if "sync_apply" in p.name) / "lag.csv").read_text()
    assert "sb1,streaming" in lag and "sb2,streaming" in lag  # both standbys streamed from lab1 during the load
    comparison = (tmp_path / "data/derived/streaming_scale_out/comparison.csv").read_text()
    scale = [line for line in comparison.splitlines() if "scale out" in line]
    assert scale and all("not measurable here" in line and "3 nodes (lab1, lab2, lab3) ran on 1 machine(s)" in line
                         for line in scale[:1])
    assert "4 hosts (lab1, lab2, lab3, lab4) as network namespaces (a pglab lab) on ONE machine" in \
        executed.read_text()
