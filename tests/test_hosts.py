"""Host operations, the same cases on the local host and through fabric to a real sshd."""

from __future__ import annotations

import os
import signal
import socket
import socketserver
import stat
import threading
import time
from pathlib import Path

import pytest
from pglab.errors import ProcessError, UserError
from pglab.hosts.base import Host, outside_ephemeral
from pglab.hosts.inventory import HostEntry
from pglab.hosts.local import LocalHost
from pglab.hosts.ssh import SSHHost, learned_host_keys


def test_run_separates_streams_and_reports_exit_codes(host: Host) -> None:
    res = host.run(["sh", "-c", "echo out; echo err >&2"])
    assert (res.stdout, res.stderr, res.exit_code) == ("out\n", "err\n", 0)
    assert host.run(["sh", "-c", "exit 3"], check=False).exit_code == 3
    with pytest.raises(ProcessError) as exc:
        host.run(["sh", "-c", "echo boom >&2; exit 4"])
    assert exc.value.exit_code == 4 and "boom" in exc.value.stderr


def test_timeout_kills_the_command(host: Host, tmp_path) -> None:
    marker = f"/tmp/pglab-timeout-{os.getpid()}-{host.name}"
    t0 = time.monotonic()
    with pytest.raises(ProcessError) as exc:
        host.run(["sh", "-c", f"sleep 30; touch {marker}"], timeout=1)
    assert exc.value.timed_out and time.monotonic() - t0 < 20
    time.sleep(0.5)
    assert not host.exists(marker)


def test_files_and_modes(host: Host, tmp_path) -> None:
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        host.write_text(f"{base}/secret", "s3cret\n", 0o600)
        assert host.read_text(f"{base}/secret") == "s3cret\n"
        big = "".join(f"line {i}: {'x' * (i % 97)}\n" for i in range(3000))  # ~150 kB through stdin
        t0 = time.monotonic()
        host.write_text(f"{base}/big", big)
        assert host.read_text(f"{base}/big") == big and time.monotonic() - t0 < 5
        assert host.run(["stat", "-c", "%a", f"{base}/secret"]).stdout.strip() == "600"
        local = tmp_path / "up.txt"
        local.write_text("payload")
        host.put(local, f"{base}/up.txt", 0o644)
        # a fetched file is private unless asked otherwise (we cannot know what it holds), whatever
        # the remote mode and the umask; an existing local file gets the mode too
        host.get(f"{base}/up.txt", tmp_path / "down.txt")
        assert (tmp_path / "down.txt").read_text() == "payload"
        assert stat.S_IMODE(os.stat(tmp_path / "down.txt").st_mode) == 0o600
        host.get(f"{base}/up.txt", tmp_path / "down.txt", mode=0o640)
        assert stat.S_IMODE(os.stat(tmp_path / "down.txt").st_mode) == 0o640
    finally:
        host.remove_tree(base)
    assert not host.exists(base)


def test_mkdir_and_wait_for_file_alike_on_every_host(host: Host) -> None:
    """The local host does both in Python (no subprocess per call); every host must answer the same: the
    mode only on a folder it creates (``mkdir -p -m``), the owner given, a file's text or None on timeout."""
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        host.mkdir(f"{base}/a/b", 0o750)
        assert host.run(["stat", "-c", "%a", f"{base}/a/b"]).stdout.strip() == "750"
        host.run(["chmod", "700", f"{base}/a/b"])
        host.mkdir(f"{base}/a/b", 0o755)  # exists: left as it is
        assert host.run(["stat", "-c", "%a", f"{base}/a/b"]).stdout.strip() == "700"
        if host.server_user != host.login_user:
            host.mkdir(f"{base}/owned", owner=host.server_user)
            assert host.run(["stat", "-c", "%U", f"{base}/owned"]).stdout.strip() == host.server_user
        t0 = time.monotonic()
        assert host.wait_for_file(f"{base}/rc", 0.3) is None and time.monotonic() - t0 >= 0.3
        host.start(["sh", "-c", f"sleep 0.5; echo 3 > {base}/part && mv {base}/part {base}/rc"], f"{base}/out",
                   f"{base}/err")
        assert host.wait_for_file(f"{base}/rc", 10) == "3\n"
    finally:
        host.remove_tree(base)


def test_a_wait_that_fails_stops_what_it_waited_for(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait whose own command fails (a dropped SSH connection, simulated: it cannot be made to drop on cue
    here) must not leave the program running unwatched: it is stopped, and the error raised."""
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        bg = host.start(["sleep", "60"], f"{base}/o", f"{base}/e")
        assert bg.running()

        def broken(path: str, timeout: float) -> str | None:
            raise ProcessError(host.name, f"wait for {path}", 255, "", "connection lost")

        monkeypatch.setattr(host, "wait_for_file", broken)
        with pytest.raises(ProcessError, match="connection lost"):
            bg.wait(timeout=5)
        monkeypatch.undo()
        deadline = time.monotonic() + 10
        while host.pid_alive(bg.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not host.pid_alive(bg.pid) and bg.exit_code is not None and bg.exit_code < 0
    finally:
        host.remove_tree(base)


def test_background_process_wait_and_stop(host: Host) -> None:
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        bg = host.start(["sh", "-c", "echo started; echo e >&2; exit 5"], f"{base}/o", f"{base}/e")
        assert bg.wait(10) == 5
        assert bg.output() == ("started\n", "e\n")
        long = host.start(["sleep", "300"], f"{base}/o2", f"{base}/e2")
        assert long.running() and host.pid_alive(long.pid)
        long.stop(grace_s=3)
        deadline = time.monotonic() + 5  # SIGKILL sent: gone once the kernel reaps it (slower on a loaded machine)
        while host.pid_alive(long.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not host.pid_alive(long.pid)
    finally:
        host.remove_tree(base)


def test_wait_timeout_stops_the_process(host: Host) -> None:
    """wait() that times out stops the session it waited for (over SSH too); a later wait() returns at once."""
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        bg = host.start(["sleep", "60"], f"{base}/o", f"{base}/e")
        assert host.pid_alive(bg.pid)
        t0 = time.monotonic()
        with pytest.raises(ProcessError) as exc:
            bg.wait(timeout=1)
        assert exc.value.timed_out and time.monotonic() - t0 < 8
        assert host.run(["kill", "-0", f"-{bg.pid}"], check=False).exit_code != 0  # the whole group is gone
        assert not bg.running()
        t0 = time.monotonic()
        assert bg.wait(timeout=30) == -signal.SIGTERM
        assert time.monotonic() - t0 < 0.5
        # a process that finished before stop() keeps its real exit code
        done = host.start(["sh", "-c", "exit 7"], f"{base}/o2", f"{base}/e2")
        while done.running():
            time.sleep(0.05)
        done.stop()
        assert done.wait(timeout=30) == 7
    finally:
        host.remove_tree(base)


def test_facts_and_free_port(host: Host) -> None:
    facts = host.facts()
    assert facts["cores"] >= 1 and facts["mem_total_kb"] > 0 and facts["kind"] in ("local", "ssh")
    port = host.free_port(30000, 31000)
    assert 30000 <= port < 31000 and port != 5432
    lo, hi = (int(v) for v in host.run(["cat", "/proc/sys/net/ipv4/ip_local_port_range"]).stdout.split())
    ports = {host.free_port() for _ in range(5)}  # the default range reaches into the ephemeral one
    assert all(20000 <= p < 60000 and not lo <= p <= hi for p in ports), (ports, lo, hi)


def test_ports_are_drawn_outside_the_ephemeral_range() -> None:
    """A port an outgoing connection can take between the check and the bind is never drawn, unless the
    range the user chose has nothing else (then it is honoured)."""
    assert outside_ephemeral(32760, 32780, "32768\t60999") == list(range(32760, 32768))
    assert outside_ephemeral(40000, 40010, "32768 60999") == list(range(40000, 40010))
    assert outside_ephemeral(100, 105, "") == list(range(100, 105))


def test_a_port_chosen_by_another_process_is_not_drawn_until_its_claim_lapses(tmp_path, monkeypatch) -> None:
    """Two processes that choose ports before either server binds must not choose the same one (CI saw a
    postmaster fail with "Address already in use"): a live process's claim keeps its port out of every
    other draw; a dead process's claim does not."""
    import subprocess
    import sys

    from pglab.hosts import port_claims

    monkeypatch.setenv("PGLAB_PORT_CLAIMS", str(tmp_path))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "30001").write_text(str(other.pid))  # a live process chose 30001
        assert not port_claims.claim(30001)
        assert {LocalHost().free_port(30000, 30003) for _ in range(2)} == {30000, 30002}
        with pytest.raises(UserError, match="no free port"):
            LocalHost().free_port(30000, 30003)  # 30000 and 30002 are this process's, 30001 the other's
    finally:
        other.kill()
        other.wait()
    assert port_claims.claim(30001)  # its claimer is gone
    assert (tmp_path / "30001").read_text() == str(os.getpid())
    shared = tmp_path / "new" / "claims"  # made by the first user to draw a port: every user may claim in it
    monkeypatch.setenv("PGLAB_PORT_CLAIMS", str(shared))
    assert port_claims.claim(30001) and stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_claim_removes_the_claims_that_lapsed_long_ago(tmp_path, monkeypatch) -> None:
    """The folder held 1,072 claims after a day of suites, one per port ever drawn: each claim prunes the old."""
    from pglab.hosts import port_claims

    monkeypatch.setenv("PGLAB_PORT_CLAIMS", str(tmp_path))
    old, recent, other = tmp_path / "30010", tmp_path / "30011", tmp_path / "notes.txt"
    for path in (old, recent, other):
        path.write_text("1")
    os.utime(old, (time.time() - 2 * port_claims.CLAIM_S - 60,) * 2)
    os.utime(recent, (time.time() - port_claims.CLAIM_S - 60,) * 2)  # lapsed, but may be taken over: left
    os.utime(other, (time.time() - 10 * port_claims.CLAIM_S,) * 2)  # not a claim
    assert port_claims.claim(30012)
    assert not old.exists() and recent.exists() and other.exists() and (tmp_path / "30012").exists()


def test_a_tunnel_outlives_a_channel_that_did_not_open(sshd_server) -> None:
    """A connection the SSH server cannot forward is closed alone, with its reason kept; the forward goes on
    accepting (fabric's stopped for good), and carries more than a chunk each way."""
    host = SSHHost("fwd", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                   sshd_server.known_hosts)
    with socket.socket() as probe:  # a port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        target = probe.getsockname()[1]
    try:
        local = host.tunnel(target)
        with socket.create_connection(("127.0.0.1", local), timeout=10) as c:
            assert c.recv(1) == b""  # closed: the server could not connect to the target
        assert "ChannelException" in (host.tunnel_error(local) or "")
        with socketserver.TCPServer(("127.0.0.1", target), _Echo) as echo:
            threading.Thread(target=echo.serve_forever, daemon=True).start()
            payload = os.urandom(300_000)
            with socket.create_connection(("127.0.0.1", local), timeout=10) as c:
                c.sendall(payload)
                c.shutdown(socket.SHUT_WR)
                got = b"".join(iter(lambda: c.recv(65536), b""))
            echo.shutdown()
        assert got == payload
    finally:
        host.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", local), timeout=2).close()


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def test_ssh_host_key_is_verified(sshd_server, tmp_path, monkeypatch) -> None:
    """fabric would accept any key; ours rejects a key not in known_hosts unless opted in."""
    monkeypatch.setenv("PGLAB_STATE_DIR", str(tmp_path / "state"))
    wrong = tmp_path / "known_hosts"
    key = tmp_path / "k"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {key}")
    wrong.write_text(f"[{sshd_server.host}]:{sshd_server.port} {key.with_suffix('.pub').read_text().split(' ', 2)[0]} "
                     f"{key.with_suffix('.pub').read_text().split(' ')[1]}\n")
    h = SSHHost("bad", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename, str(wrong))
    with pytest.raises(UserError, match="bad"):
        h.open()
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(UserError):
        SSHHost("unknown", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                str(empty)).open()
    opted_in = SSHHost("optin", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                       str(empty), accept_unknown_host_key=True)
    try:
        opted_in.open()
        assert opted_in.run(["whoami"]).stdout.strip() == sshd_server.user
    finally:
        opted_in.close()


def test_accepting_an_unknown_key_never_rewrites_known_hosts(sshd_server, tmp_path, monkeypatch) -> None:
    """accept_unknown_host_key records the key in pglab's own file; the user's known_hosts stays byte-identical."""
    state = tmp_path / "state"
    monkeypatch.setenv("PGLAB_STATE_DIR", str(state))
    other = tmp_path / "other"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    kh = tmp_path / "known_hosts"
    kh.write_bytes(b"# the user's own file\n"
                   + b"otherhost.example " + " ".join(other.with_suffix(".pub").read_text().split()[:2]).encode()
                   + b"\nthis line is not a host key at all\n@cert-authority *.example ssh-ed25519 AAAAnot-base64\n")
    before = kh.read_bytes()
    h = SSHHost("optin", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                str(kh), accept_unknown_host_key=True)
    try:
        h.open()
        assert h.run(["true"]).exit_code == 0
    finally:
        h.close()
    assert kh.read_bytes() == before
    learned = learned_host_keys()
    assert learned == state / "known_hosts"
    server_key = " ".join(Path(sshd_server.known_hosts).read_text().split()[1:3])
    assert learned.read_text() == f"[{sshd_server.host}]:{sshd_server.port} {server_key}\n"
    assert stat.S_IMODE(learned.stat().st_mode) == 0o600 and stat.S_IMODE(state.stat().st_mode) == 0o700
    # the learned key is trusted on later connects (not appended again) ...
    again = SSHHost("again", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                    str(kh), accept_unknown_host_key=True)
    try:
        again.open()
    finally:
        again.close()
    assert learned.read_text().count("\n") == 1 and kh.read_bytes() == before
    # ... and a different key for that host is refused, not learned over
    learned.write_text(f"[{sshd_server.host}]:{sshd_server.port} "
                       f"{' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    with pytest.raises(UserError, match="optin2"):
        SSHHost("optin2", sshd_server.host, sshd_server.user, sshd_server.port, sshd_server.key_filename,
                str(kh), accept_unknown_host_key=True).open()
    assert kh.read_bytes() == before


def test_inventory_rejects_bad_entries() -> None:
    with pytest.raises(ValueError, match="address"):
        HostEntry(kind="ssh")
    with pytest.raises(ValueError, match="port_range"):
        HostEntry(port_range=(5000, 80))
