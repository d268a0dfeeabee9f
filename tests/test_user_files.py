"""Every file a user hands pglab gets one clear line and exit 2, before anything starts: params files,
inventories and ``pglab parse`` input that are malformed, of the wrong shape, binary, a directory,
empty or far too large."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, workspaces

SYNTAX = "profile: t\nprofiles:\n  t: {seconds: [1, 2}\n"
CASES: dict[str, tuple[bytes | None, str]] = {  # name -> (content, None for a directory; what the message says)
    "syntax": (SYNTAX.encode(), "is not valid YAML: line 3, column 21: expected ',' or ']'"),
    "list": (b"- a\n- b\n", "holds a YAML list at its top level"),
    "scalar": (b"just words\n", "holds a YAML string at its top level"),
    "binary": (bytes(range(256)) * 8, "is a binary file"),
    "latin1": ("profile: caf\u00e9\n".encode("latin-1"), "is not UTF-8 text (line 1"),
    "directory": (None, "is a directory"),
    "empty": (b"", "is empty"),
    "blank": (b"\n  \n", "holds only blank lines"),
    "huge": (b"# " + b"x" * (2 << 20) + b"\n", "is 2,097,155 bytes"),
}


def _make(tmp_path: Path, name: str, content: bytes | None) -> Path:
    path = tmp_path / f"{name}.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


def pglab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pglab.app.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.parametrize("name", CASES)
def test_a_bad_params_file_or_inventory_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    content, says = CASES[name]
    path = _make(tmp_path, name, content)
    before = workspaces()
    for args in (["collect", "synchronous_commit", "--params", str(path)],
                 ["collect", "synchronous_commit", "--profile", "smoke", "--inventory", str(path)],
                 ["check", "--inventory", str(path)]):
        res = pglab(*args, *(["--data-root", str(tmp_path / "data")] if args[0] == "collect" else []))
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith(f"pglab: {path}: ") and says in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
    assert not (tmp_path / "data").exists() and workspaces() == before  # nothing was started or created


@pytest.mark.parametrize("body, says", [
    ("profile: t\nprofiles:\n  t: [1, 2]\n", "profiles.t: a YAML list where a mapping of parameters belongs"),
    ("profiles: 5\n", "profiles: a YAML number where a mapping of profile names belongs"),
    ("profile: [a]\nprofiles: {t: {}}\n", "profile: a YAML list where a name belongs"),
    ("profile: t\nprofiles: {t: {}}\nextra: 1\n", "extra: unknown top-level key"),
])
def test_a_params_file_of_the_wrong_shape_names_the_key(tmp_path: Path, body: str, says: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(body)
    res = pglab("collect", "synchronous_commit", "--params", str(path), "--data-root", str(tmp_path / "data"))
    assert res.returncode == 2 and f"invalid parameters in {path}" in res.stderr and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "data").exists()


def test_an_inventory_of_the_wrong_shape_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("hosts: [a, b]\n")
    res = pglab("check", "--inventory", str(path))
    assert res.returncode == 2 and f"invalid parameters in {path}" in res.stderr, res.stderr
    assert "hosts: Input should be a valid dictionary (got ['a', 'b'])" in res.stderr, res.stderr


@pytest.mark.parametrize("name", ["binary", "directory", "empty"])
def test_parse_refuses_what_is_no_tool_output(tmp_path: Path, name: str) -> None:
    content, _ = CASES[name]
    path = _make(tmp_path, name, content)
    res = pglab("parse", str(path))
    says = {"binary": "it is a binary file", "directory": "cannot read: Is a directory",
            "empty": "the file is empty"}[name]
    assert res.returncode == 2 and f"{path}: " in res.stderr and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def _listening(port_low: int) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port_low))
    except OSError:
        s.close()
        return None
    s.listen()
    return s


def test_inventory_values_that_would_fail_late_are_refused_before_anything_starts(tmp_path: Path) -> None:
    """A workdir that is missing, too long for a socket path or closed to the server user, and a port range
    with no free port: exit 2 naming the host and the value, with no run folder, no runs-index entry, no
    workspace."""
    short = Path(tempfile.mkdtemp(prefix="pglab-t-", dir="/tmp"))  # room for the socket path (tmp_path is long)
    closed = short / "closed"
    closed.mkdir(mode=0o700)
    low = next(p for p in range(41000, 42000, 7) if (held := _listening(p)) is not None)
    cases = {
        "missing": ({"workdir": str(short / "nowhere")}, "does not exist"),
        "long": ({"workdir": "/tmp/" + "w" * 90}, "is too long for a Unix socket path"),
        "closed": ({"workdir": str(closed)}, "cannot enter workdir"),
        "ports": ({"port_range": [low, low + 1]}, f"no free port in {low}-{low + 1}"),
    }
    if os.geteuid() != 0:  # the server user is the login user: nothing to be closed to
        del cases["closed"]
    index = Path(os.environ["PGLAB_STATE_DIR"]) / "runs"
    try:
        for name, (entry, says) in cases.items():
            inv = tmp_path / f"{name}.yaml"
            inv.write_text(yaml.safe_dump({"hosts": {"local": {"kind": "local", **entry}}}))
            before, indexed = workspaces(), sorted(index.iterdir()) if index.exists() else []
            res = pglab("collect", "synchronous_commit", "--profile", "smoke", "--inventory", str(inv),
                        "--data-root", str(tmp_path / "data"))
            assert res.returncode == 2, (name, res.stderr)
            assert "preflight failed, nothing was started" in res.stderr and says in res.stderr, (name, res.stderr)
            assert "Traceback" not in res.stderr
            assert not (tmp_path / "data").exists() and workspaces() == before, name
            assert (sorted(index.iterdir()) if index.exists() else []) == indexed, name
    finally:
        held.close()
        shutil.rmtree(short)
