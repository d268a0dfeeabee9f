"""Tests of tests/sshd.py: the real sshd it starts is usable, strict and cleaned up.

Why: every SSH test of pglab relies on this server, and on fabric rejecting a
host whose key is not in the given known_hosts; both are checked here once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import fabric
import paramiko
import pytest
from sshd import SshServer, running_sshd, sshd_server  # noqa: F401


@pytest.fixture(scope="module")
def server() -> Iterator[SshServer]:
    """One sshd for this module (the session fixture is exercised separately)."""
    with running_sshd() as srv:
        yield srv


def connect(
    srv: SshServer,
    known_hosts: str | None = None,
    policy: paramiko.MissingHostKeyPolicy | None = None,
) -> fabric.Connection:
    """Open a fabric connection that verifies the host key against ONLY `known_hosts`.

    fabric 3 builds ``SSHClient()`` with AutoAddPolicy (and no known_hosts), so
    the policy is replaced and the file loaded after construction, before open().
    """
    conn = fabric.Connection(
        srv.host,
        port=srv.port,
        user=srv.user,
        # ~/.ssh/config and /etc/ssh/ssh_config must not change host/port/keys;
        # in_stream=False: invoke otherwise reads our stdin, which pytest forbids.
        config=fabric.Config(overrides={"load_ssh_configs": False, "run": {"in_stream": False}}),
        connect_timeout=10,
        connect_kwargs={
            "key_filename": srv.key_filename,
            "look_for_keys": False,
            "allow_agent": False,
        },
    )
    conn.client.set_missing_host_key_policy(policy or paramiko.RejectPolicy())
    conn.client.load_host_keys(known_hosts or srv.known_hosts)
    conn.open()
    return conn


def _other_key_known_hosts(tmp_path: Path, srv: SshServer) -> str:
    """A known_hosts naming this host:port with a different, fresh ed25519 key."""
    key = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-t", "ed25519", "-N", "", "-q", "-f", str(key)], check=True)
    typ, b64 = Path(f"{key}.pub").read_text().split()[:2]
    path = tmp_path / "wrong_known_hosts"
    path.write_text(f"[{srv.host}]:{srv.port} {typ} {b64}\n")
    return str(path)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, starttime) of a process, None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _children_tree(root: int) -> list[tuple[int, tuple[str, int, int]]]:
    """Live descendants of root, found independently of sshd.py's own helper."""
    stats = {int(e.name): _stat(int(e.name)) for e in Path("/proc").iterdir() if e.name.isdigit()}
    tree, todo = [], [root]
    while todo:
        parent = todo.pop()
        for pid, st in stats.items():
            if st is not None and st[1] == parent and st[0] != "Z":
                tree.append((pid, st))
                todo.append(pid)
    return tree


def _alive_as(pid: int, starttime: int) -> bool:
    """Still the same, non-zombie process."""
    st = _stat(pid)
    return st is not None and st[0] != "Z" and st[2] == starttime


def _uid_of(pid: int) -> int:
    """Real UID of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


def test_server_shape(server: SshServer) -> None:
    assert server.host == "127.0.0.1"
    assert server.port not in (22, 5432) and server.port > 1024
    assert server.workdir.startswith("/tmp/pglab-sshd-")
    key = os.stat(server.key_filename)
    assert key.st_mode & 0o777 == 0o600
    assert key.st_uid == os.geteuid()
    lines = Path(server.known_hosts).read_text().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"[127.0.0.1]:{server.port} ssh-ed25519 AAAA")


def test_sshd_runs_unprivileged(server: SshServer) -> None:
    uid = _uid_of(server.pid)
    if os.geteuid() == 0:
        assert uid != 0
        assert server.user == "postgres"
    assert uid == Path(server.workdir).stat().st_uid
    assert Path(f"/proc/{server.pid}/exe").resolve() == Path("/usr/sbin/sshd")
    pid_file = Path(server.workdir).parent / "run" / "sshd.pid"
    assert int(pid_file.read_text()) == server.pid


def test_login_runs_commands(server: SshServer) -> None:
    started = time.monotonic()
    with connect(server) as conn:
        elapsed = time.monotonic() - started
        assert conn.run("whoami", hide=True).stdout.strip() == server.user
        res = conn.run("sh -c 'echo out; echo err >&2'", hide=True, pty=False)
        assert res.stdout == "out\n"
        assert res.stderr == "err\n"
        bad = conn.run("sh -c 'exit 3'", hide=True, warn=True)
        assert bad.exited == 3 and not bad.ok
        with pytest.raises(Exception) as info:
            conn.run("false", hide=True)
        assert getattr(info.value, "result", None) is not None
        assert info.value.result.exited == 1  # type: ignore[attr-defined]
    print(f"login took {elapsed:.3f} s")
    assert elapsed < 5


def test_workdir_put_get(server: SshServer, tmp_path: Path) -> None:
    local = tmp_path / "up.txt"
    local.write_text("hello pglab\n")
    remote = f"{server.workdir}/up.txt"
    with connect(server) as conn:
        conn.put(str(local), remote)
        owner = conn.run(f"stat -c %U {remote}", hide=True).stdout.strip()
        assert owner == server.user
        conn.run(f"echo back >> {remote}", hide=True)
        back = tmp_path / "down.txt"
        conn.get(remote, str(back))
    assert back.read_text() == "hello pglab\nback\n"


def test_wrong_host_key_rejected(server: SshServer, tmp_path: Path) -> None:
    wrong = _other_key_known_hosts(tmp_path, server)
    with pytest.raises(paramiko.BadHostKeyException):
        connect(server, known_hosts=wrong)
    # Even AutoAddPolicy never overrides a key that is known and different.
    with pytest.raises(paramiko.BadHostKeyException):
        connect(server, known_hosts=wrong, policy=paramiko.AutoAddPolicy())


def test_unknown_host_rejected_unless_opted_in(server: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        connect(server, known_hosts=str(empty))
    with connect(server, known_hosts=str(empty), policy=paramiko.AutoAddPolicy()) as conn:
        assert conn.run("whoami", hide=True).stdout.strip() == server.user
    # Pitfall: load_host_keys() remembers the path, so AutoAddPolicy writes the key there.
    assert f"[127.0.0.1]:{server.port} ssh-ed25519 " in empty.read_text()


def test_session_fixture(sshd_server: SshServer) -> None:  # noqa: F811  (imported fixture)
    with connect(sshd_server) as conn:
        assert conn.run("whoami", hide=True).stdout.strip() == sshd_server.user


def test_stopped_and_cleaned_after_exit() -> None:
    with running_sshd() as srv:
        with connect(srv) as conn:
            conn.run("true", hide=True)
        # a session left open, with a command running, must not outlive the server
        leaked = connect(srv)
        sleeper = leaked.run("sleep 60", hide=True, asynchronous=True)
        time.sleep(0.3)
        sessions = [(p, s[2]) for p, s in _children_tree(srv.pid)]
        assert len(sessions) >= 3  # connection handler, session child, sleep
        tmp = Path(srv.workdir).parent
    try:
        with pytest.raises(ProcessLookupError):
            os.kill(srv.pid, 0)
        with pytest.raises(OSError):
            socket.create_connection((srv.host, srv.port), timeout=1).close()
        assert not tmp.exists()
        assert [p for p, start in sessions if _alive_as(p, start)] == []
    finally:
        leaked.close()
    with pytest.raises(Exception):  # noqa: B017  (the remote side was killed)
        sleeper.join()


def test_cleanup_on_exception() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with running_sshd() as srv:
            raise RuntimeError("boom")
    with pytest.raises(ProcessLookupError):
        os.kill(srv.pid, 0)
    assert not Path(srv.workdir).parent.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="choosing the login user needs root")
def test_refuses_root_user() -> None:
    with pytest.raises(ValueError):
        with running_sshd(user="root"):
            pass
