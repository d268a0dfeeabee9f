"""The run's password stays secret: in no repr or message, in no reused directory, not left behind on request."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from conftest import postgres_pids
from pglab.errors import ProcessError, QueryTimeout
from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory
from pglab.nodes.workspace import Workspace
from pglab.replication.builtin import BuiltinLogical
from pglab.replication.londiste import Londiste
from pglab.replication.pglogical import Pglogical
from pglab.replication.slony import Slony
from pglab.replication.streaming import Streaming
from pglab.runs.session import session

SYSTEMS = (Streaming, BuiltinLogical, Pglogical, Slony, Londiste)


def scratch_dir(host: Host, inventory: Inventory) -> str:
    """A fresh directory under the host's workdir that the server user may traverse."""
    workdir = inventory.entry(host.name).workdir if host.name in inventory.hosts else "/tmp"  # a lab host
    path = host.run(["mktemp", "-d", f"{workdir}/pglab-t-XXXXXX"]).stdout.strip()
    host.run(["chmod", "0755", path])
    return path


@pytest.mark.servers
def test_password_is_in_no_repr_and_no_error(inventory: Inventory) -> None:
    with session(inventory) as s:
        primary = s.deploy.node("primary", "local")
        primary.start()
        standby = s.deploy.standby(primary, "standby1")
        ws = primary.ws
        pw = ws.password
        real = len(pw) >= 20 and pw in primary.host.read_text(ws.passfile)
        assert real  # the generated password, as the passfile holds it
        objects: list[object] = [ws, primary, standby, *(cls(primary, standby, dbname="bench") for cls in SYSTEMS)]
        # booleans, not `pw not in ...`: a failing assertion must not print the password either
        leaks = [type(obj).__name__ for obj in objects if pw in repr(obj) or pw in str(obj)]
        assert leaks == []
        assert "Workspace(" in repr(ws) and ws.base in repr(ws)  # still a useful repr

        # a failing command that prints the secret: the error and the result are scrubbed
        with pytest.raises(ProcessError) as err:
            primary.host.run(["sh", "-c", f"cat {ws.passfile} >&2; exit 3"])
        leaked = pw in str(err.value) or pw in err.value.stderr
        assert not leaked and "[redacted]" in str(err.value)
        res = primary.host.run(["cat", ws.passfile])
        shown, leaked = pw in res.stdout, pw in repr(res)
        assert shown and not leaked  # the caller gets the data, a repr never shows it

        # a statement that timed out: the real error, and one whose statement held the secret
        with pytest.raises(QueryTimeout) as timeout:
            primary.query("select pg_sleep(30)", timeout=1)
        leaked = pw in str(timeout.value)
        assert not leaked
        forged = QueryTimeout(primary.name, primary.host.name, primary.port, f"alter role x password '{pw}'", 1.0,
                              f"something with {pw} in it")
        leaked = pw in str(forged) or pw in forged.command or pw in forged.stderr
        assert not leaked
        base = ws.base
    assert not postgres_pids(base)


def test_workspace_never_reuses_an_existing_directory(host: Host, inventory: Inventory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Workspace.create makes its folder with mktemp: a name that exists is never taken over."""
    parent = scratch_dir(host, inventory)
    ws: Workspace | None = None
    try:
        fixed = uuid.UUID("abcdef00-0000-4000-8000-000000000000")
        taken = f"{parent}/pglab-{fixed.hex[:6]}"  # what a random-name-plus-mkdir-p scheme would pick
        host.run(["mkdir", "-m", "0755", taken])
        host.run(["touch", f"{taken}/theirs"])
        before = host.run(["stat", "-c", "%U %a", taken]).stdout
        with monkeypatch.context() as m:
            m.setattr(uuid, "uuid4", lambda: fixed)
            ws = Workspace.create(host, parent)
        assert ws.base != taken and re.fullmatch(rf"{re.escape(parent)}/pglab-[A-Za-z0-9]{{6}}", ws.base)
        assert host.run(["stat", "-c", "%U %a", taken]).stdout == before
        assert host.run(["ls", taken]).stdout.split() == ["theirs"]
        assert host.run(["stat", "-c", "%U %a", ws.base]).stdout.split() == [host.server_user, "711"]
        assert host.run(["stat", "-c", "%U %a", ws.socket_dir]).stdout.split() == [host.server_user, "700"]
    finally:
        if ws:
            ws.remove()
        host.remove_tree(parent)


def test_remove_secrets_keeps_the_evidence(host: Host, inventory: Inventory) -> None:
    parent = scratch_dir(host, inventory)
    ws = Workspace.create(host, parent)
    try:
        host.write_text(f"{ws.base}/primary.log", "a server log\n")
        assert host.exists(ws.passfile)
        ws.remove_secrets()
        assert not host.exists(ws.passfile)
        assert not os.path.exists(ws.local_passfile)  # the control machine's copy
        assert host.read_text(f"{ws.base}/primary.log") == "a server log\n" and host.exists(ws.socket_dir)
        ws.remove_secrets()  # safe twice
    finally:
        ws.remove()
        host.remove_tree(parent)
