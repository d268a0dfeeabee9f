"""pglab.runs.progress: a tqdm bar in a terminal, the widget in JupyterLab, one plain line per item elsewhere."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import types

import pytest
from conftest import REPO
from pglab.runs import progress
from pglab.runs.progress import bar, detect_mode

# the two ways the sweeps use it: iterate over the points (synchronous_commit), or a total and done()
SCRIPT = """
import sys, time
from pglab.runs.progress import bar
points = [f"write-on-c{c:03d}-r1" for c in (1, 4, 8, 16, 32)]
with bar(points, "synchronous_commit", unit="point") as b:
    for pid in b:
        b.set_postfix_str(pid)
        time.sleep(0.12)
        b.done(pid, "failed" if pid.endswith("c008-r1") else "ok")
b = bar(3, "logical_replication")
for i in range(3):
    b.set_postfix_str(f"slony-c{i:03d}-r1")
    b.update(1)
b.close()
"""

ITEM = re.compile(r"^synchronous_commit: (\d)/5 points \(\d+%\), elapsed \d+:\d\d, ETA \d+:\d\d — "
                  r"(write-on-c\d{3}-r1) (ok|failed)$")


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in (progress.ENV, "JPY_SESSION_NAME")}
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "lib"), e.get("PYTHONPATH", "")])
    e["PYTHONIOENCODING"] = "utf-8"
    return e


def test_piped_output_has_one_plain_line_per_item_and_no_carriage_return() -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, env=env(), timeout=60)
    assert res.returncode == 0, res.stderr
    err = res.stderr.decode()
    assert "\r" not in err and res.stdout == b""
    lines = err.splitlines()
    items = [ITEM.match(line) for line in lines[:5]]
    assert all(items), lines
    assert [int(m.group(1)) for m in items] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    assert [m.group(3) for m in items].count("failed") == 1  # type: ignore[union-attr]
    assert re.match(r"^synchronous_commit: 5 points in \d+:\d\d \(failed 1, ok 4\)$", lines[5]), lines[5]
    # update() without done(): the postfix names the item
    assert re.match(r"^logical_replication: 1/3 points \(33%\), elapsed 0:00, ETA 0:00 — slony-c000-r1$", lines[6])
    assert lines[8].startswith("logical_replication: 3/3 points (100%)") and lines[9].startswith(
        "logical_replication: 3 points in ")
    assert len(lines) == 10


def run_in_pty(code: str, timeout: float = 60) -> str:
    """Run ``code`` with stdin, stdout and stderr on a pseudo-terminal of 100x24; returns all it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave, env=env(),
                            close_fds=True)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                raise TimeoutError(out.decode(errors="replace"))
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=timeout)
    assert proc.returncode == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_terminal_gets_the_tqdm_bar_with_carriage_return_updates() -> None:
    out = run_in_pty(SCRIPT)
    assert out.count("\r") >= 5, out
    assert "5/5 points (100%)" in out and "point/s" in out and "<" in out  # tqdm's bar with rate and ETA
    assert out.index("5/5 points") < out.rindex("|")  # the count first: a long item id never hides it
    assert "synchronous_commit: write-on-c008-r1 failed" in out  # a failure is printed above the bar
    assert " — write-on-" not in out  # no plain lines


class ZMQInteractiveShell:  # what IPython.get_ipython() returns in a kernel (only the name matters)
    pass


def fake_ipython(shell: object) -> types.ModuleType:
    mod = types.ModuleType("IPython")
    mod.get_ipython = lambda: shell  # type: ignore[attr-defined]
    return mod


def test_detects_a_jupyter_server_kernel_and_a_headless_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(ZMQInteractiveShell()))
    assert detect_mode(io.StringIO()) == "plain"  # papermill, nbval: a kernel that no Jupyter server started
    monkeypatch.setenv("JPY_SESSION_NAME", "/work/notebooks/synchronous_commit.ipynb")
    assert detect_mode(io.StringIO()) == "notebook"  # JupyterLab
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(None))  # imported, but not in IPython
    assert detect_mode(io.StringIO()) == "plain"
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython(types.SimpleNamespace()))  # terminal IPython
    assert detect_mode(io.StringIO()) == "plain"


def test_no_ipython_import_outside_a_kernel() -> None:
    code = ("import sys, io; from pglab.runs.progress import detect_mode; "
            "assert detect_mode(io.StringIO()) == 'plain'; assert 'IPython' not in sys.modules")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=60)
    assert res.returncode == 0, res.stderr


def test_notebook_mode_uses_the_widget() -> None:
    pytest.importorskip("ipywidgets")
    b = bar(["a", "b"], "demo", mode="notebook")
    assert b.mode == "notebook" and type(b._tqdm).__module__ == "tqdm.notebook"
    for item in b:
        b.done(item, "ok")
    assert b.n == 2 and b._tqdm.n == 2 and b.closed


def test_environment_variable_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV, "plain")
    assert detect_mode(io.StringIO()) == "plain"
    monkeypatch.setenv(progress.ENV, "sideways")
    with pytest.raises(ValueError, match="PGLAB_PROGRESS"):
        detect_mode()


def test_disabled_bar_prints_nothing_but_counts() -> None:
    out = io.StringIO()
    with bar(["a", "b", "c"], "demo", disable=True, stream=out) as b:
        for item in b:
            b.done(item, "ok")
    assert out.getvalue() == "" and b.n == 3


def test_iteration_without_done_counts_like_tqdm() -> None:
    out = io.StringIO()
    for _ in bar(range(3), "demo", mode="plain", stream=out, unit="run"):
        pass
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines[:3]] == ["demo: 1/3 runs", "demo: 2/3 runs", "demo: 3/3 runs"]
    assert lines[3].startswith("demo: 3 runs in ")


def test_an_interrupted_sweep_says_where_it_stopped() -> None:
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), bar(["a", "b", "c"], "demo", mode="plain", stream=out) as b:
        for item in b:
            b.done(item, "ok")
            raise KeyboardInterrupt
    assert out.getvalue().splitlines()[-1].startswith("demo: stopped at 1/3 points in ")


def test_eta_and_interval_format() -> None:
    assert progress.format_interval(62) == "1:02" and progress.format_interval(3723) == "1:02:03"
    b = bar(90, "synchronous_commit", mode="plain", stream=io.StringIO())
    b.n, b._started = 12, b._started - 62
    assert b.line() == "synchronous_commit: 12/90 points (13%), elapsed 1:02, ETA 6:43"
