"""The notebooks as users run them: papermill's help, profiles, misspelt names, and what a run leaves.

nbval runs each notebook as stored (see the Makefile); these tests drive them the other ways that
docs/running.md documents: papermill with -p / -y, and `papermill --help-notebook`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO, workspaces
from pglab.app import notebook
from pglab.errors import ParameterError
from pglab.studies import STUDIES, module

BIN = Path(sys.executable).parent
PAPERMILL = str(BIN / "papermill")


def parameters_cell(study: str) -> list[str]:
    nb = json.loads((REPO / f"notebooks/{study}.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    lines = "".join(cell["source"]).splitlines()
    return [line.split(":")[0] for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("study", STUDIES)
def test_help_notebook_documents_every_parameter(study: str) -> None:
    res = subprocess.run([PAPERMILL, "--help-notebook", f"notebooks/{study}.ipynb"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Unable to parse" not in res.stderr + res.stdout
    documented = {line.split(":")[0].strip() for line in res.stdout.splitlines() if ": " in line
                  and line.startswith("  ") and not line.startswith("   ")}
    names = parameters_cell(study)
    expected = set(module(study, "params").Params.model_fields) | set(notebook.RUN_KEYS)
    assert set(names) == expected, "the parameters cell declares exactly the study's fields and the run keys"
    assert expected <= documented, sorted(expected - documented)


@pytest.mark.parametrize("study", STUDIES)
def test_a_profile_name_selects_its_values(study: str) -> None:
    profiles = yaml.safe_load((REPO / f"params/{study}.yaml").read_text())["profiles"]
    defaults = {name: None for name in module(study, "params").Params.model_fields}
    for name, values in profiles.items():
        got_name, got, overrides, _ = notebook.parameters(study, {**defaults, "profile": name})
        assert got_name == name and got == values and overrides == {}
    _, got, overrides, _ = notebook.parameters(study, {**defaults, "profile": "quick", "blocks": 7})
    assert got == {**profiles["quick"], "blocks": 7} and overrides == {"blocks": 7}
    with pytest.raises(ParameterError, match="'fast' is not one of"):
        notebook.parameters(study, {**defaults, "profile": "fast"})


def test_misspelt_names_and_lists_as_text_are_refused() -> None:
    ns = {"profile": "smoke", "block": 5, "client": 8, "clients": "[1, 4]"}
    with pytest.raises(ParameterError) as exc:
        notebook.parameters("synchronous_commit", ns)
    text = str(exc.value)
    assert "block: unknown parameter (did you mean 'blocks'?)" in text
    assert "client: unknown parameter (did you mean 'clients'?)" in text
    assert "clients: got the text '[1, 4]'" in text and "-y" in text
    with pytest.raises(ParameterError) as exc:  # every problem at once: a name and a value
        notebook.parameters("synchronous_commit", {"profile": "smoke", "block": 5, "seconds": "abc"})
    assert "block: unknown parameter" in str(exc.value) and "seconds: Input should be a valid integer" in str(exc.value)


def test_papermill_with_a_misspelt_name_fails_before_anything_starts(tmp_path: Path) -> None:
    """A misspelt name and a bad value: one message each, in one run, no traceback through pglab, nothing started."""
    before = workspaces()
    res = subprocess.run([PAPERMILL, "notebooks/synchronous_commit.ipynb", str(tmp_path / "out.ipynb"),
                          "-p", "block", "5", "-p", "seconds", "abc", "-p", "data_root", str(tmp_path / "data")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    out = res.stderr + res.stdout
    for says in ("block: unknown parameter (did you mean 'blocks'?)", "seconds: Input should be a valid integer"):
        assert says in out
    # the cell's error is the message alone: papermill's report ends with it, not with pglab's frames
    cell_error = out[out.index('Exception encountered at "In'):]
    assert cell_error.splitlines()[1].startswith("ParameterError: invalid parameters in notebooks/")
    assert "lib/pglab/" not in cell_error, cell_error
    assert not (tmp_path / "data").exists() and workspaces() == before


def test_pglab_papermill_ends_in_one_line_with_every_problem_and_no_traceback(tmp_path: Path) -> None:
    """The documented command (docs/running.md): papermill's own options through `pglab papermill`, a refusal said
    as pglab's commands say it, exit 2; a notebook that runs gives papermill's exit 0."""
    res = subprocess.run([sys.executable, "-m", "pglab.app.cli", "papermill", "notebooks/synchronous_commit.ipynb",
                          str(tmp_path / "out.ipynb"), "-p", "block", "5", "-p", "seconds", "abc", "-p", "data_root",
                          str(tmp_path / "data")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "-----" not in res.stderr and "lib/pglab/" not in res.stderr
    said = res.stderr[res.stderr.index("pglab: invalid parameters in notebooks/"):]
    assert "block: unknown parameter (did you mean 'blocks'?)" in said and "seconds: Input should be" in said
    assert not (tmp_path / "data").exists()
    help_ = subprocess.run([sys.executable, "-m", "pglab.app.cli", "papermill", "--help-notebook",
                            "notebooks/synchronous_commit.ipynb"], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert help_.returncode == 0 and "blocks" in help_.stdout


SITECUSTOMIZE = textwrap.dedent("""
    # Test only: records every password pglab generates, so the test can search for it.
    import inspect, os, secrets
    _real = secrets.token_urlsafe
    def _recording(n=None):
        value = _real(n)
        if any("pglab" in f.filename for f in inspect.stack()[1:4]):
            with open(os.environ["PGLAB_TEST_PASSWORDS"], "a") as f:
                f.write(value + "\\n")
        return value
    secrets.token_urlsafe = _recording
""")


@pytest.mark.slow
@pytest.mark.servers
def test_a_notebook_run_shows_its_data_root_and_leaks_no_password(tmp_path: Path) -> None:
    """The smoke run through papermill and nbconvert: the generated password is in none of its outputs."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    passwords = tmp_path / "passwords.txt"
    env = {**os.environ, "PYTHONPATH": f"{hook}:{REPO / 'lib'}", "PGLAB_TEST_PASSWORDS": str(passwords),
           "PATH": f"{BIN}:{os.environ['PATH']}"}
    data, out = tmp_path / "data", tmp_path / "out"
    out.mkdir()
    before = workspaces()
    res = subprocess.run([PAPERMILL, "notebooks/synchronous_commit.ipynb", str(out / "sc.ipynb"),
                          "-p", "data_root", str(data), "-y", "clients: [2]\nlevels: ['on', 'off']"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    subprocess.run([str(BIN / "jupyter"), "nbconvert", "--to", "html", str(out / "sc.ipynb")], env=env,
                   check=True, capture_output=True, timeout=300)
    assert workspaces() == before  # nothing left in /tmp
    executed = (out / "sc.ipynb").read_text()
    assert f"raw data goes to {data / 'runs' / 'synchronous_commit'}" in executed
    manifest = json.loads((data / "raw/synchronous_commit/manifest.json").read_text())
    assert manifest["profile"] == "smoke+clients,levels" and manifest["parameters"]["clients"] == [2]
    secrets = passwords.read_text().split()
    assert secrets, "no password was recorded: the hook did not run"
    for pw in secrets:
        leaks = [str(p) for p in [*data.rglob("*"), *out.rglob("*")] if p.is_file() and pw.encode() in p.read_bytes()]
        assert not leaks and pw not in res.stdout + res.stderr, leaks


def test_make_lab_serves_on_localhost_only_and_prints_its_url(tmp_path: Path) -> None:
    """`make lab` as this machine's user (root here: --allow-root) on a free port: the URL with its token is
    printed, the server listens on 127.0.0.1 alone and answers there; stopped by its process group."""
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "lab.log"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    with open(log, "w") as out:
        proc = subprocess.Popen(["make", "-s", "lab", f"LAB_PORT={port}"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url, deadline = None, time.monotonic() + 120
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            url = next((w for w in log.read_text().split() if w.startswith(f"http://127.0.0.1:{port}/lab?token=")),
                       None)
        assert url, f"no URL with a token printed:\n{log.read_text()[-3000:]}"
        listening = subprocess.run(["ss", "-Htln"], capture_output=True, text=True).stdout.splitlines()
        mine = [line.split()[3] for line in listening if line.split()[3].endswith(f":{port}")]
        assert mine == [f"127.0.0.1:{port}"], mine
        token = url.split("token=", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=30) as res:
            assert res.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
