"""Shared fixtures: the same cases run against a local host and an SSH host (a real sshd)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# Set before pglab is imported (``pglab.hosts.machine_state`` reads them once): the suite runs collects side by side,
# so every run would find the machine busy; it starts them marked (tests/test_machine_state.py checks the refusal
# with these unset), keeps them in its verdicts over runs (tests/test_over_runs.py checks the leaving out), and
# probes the machine for 0.2 s instead of 1 s.
os.environ.setdefault("PGLAB_BUSY_OK", "1")
os.environ.setdefault("PGLAB_WITH_MARKED", "1")
os.environ.setdefault("PGLAB_PROBE_S", "0.2")

import pytest  # noqa: E402
import yaml  # noqa: E402
from _pytest.nodeid import coerce_node_id  # noqa: E402
from pglab.errors import ParameterError
from pglab.hosts.base import Host
from pglab.hosts.inventory import HostEntry, Inventory, load_inventory
from pglab.hosts.local import LocalHost
from pglab.hosts.ssh import SSHHost
from sshd import SshServer, sshd_server  # noqa: F401  (re-exported fixture)

REPO = Path(__file__).resolve().parents[1]

# A background job of a non-interactive shell (`make test &`, nohup) starts with SIGINT ignored, and every
# child inherits that, so the tests that interrupt a run with SIGINT (Ctrl-C) would wait for a signal that
# never arrives. A handler is reset to the default on exec: children get SIGINT as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Each test process (an xdist worker, or pytest alone) makes its per-run folders in a workdir of its own
# (hosts without `workdir` in the inventory use $PGLAB_WORKDIR), so "the run created no workspace" is
# checked against this process's runs only, whatever other workers do meanwhile. Short: socket paths.
WORKDIR = tempfile.mkdtemp(prefix=f"pgw{os.environ.get('PYTEST_XDIST_WORKER', '')}-", dir="/tmp")
os.chmod(WORKDIR, 0o1777)
os.environ["PGLAB_WORKDIR"] = WORKDIR


@atexit.register
def _remove_workdir() -> None:
    with contextlib.suppress(OSError):  # kept when a run left something in it: that is evidence
        os.rmdir(WORKDIR)


def _pulled(stage: str, marker: str, what: str, studies: tuple[str, ...]) -> None:
    """``<stage>@<study>``'s outputs, pulled from the in-repo remote for each study lacking ``marker`` (a path under
    the checkout, ``{s}`` the study). Under a lock: xdist workers share the checkout, and a folder copied while
    another worker's pull is still writing it has half its files."""
    (REPO / ".dvc" / "tmp").mkdir(exist_ok=True)  # DVC's own scratch folder, ignored by git
    with open(REPO / ".dvc" / "tmp" / "pglab-test-pull.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [s for s in studies if not (REPO / marker.format(s=s)).exists()]
        if missing:
            dvc = Path(sys.executable).parent / "dvc"
            targets = [f"{stage}@{s}" if s else stage for s in missing]  # "": a stage of its own (no foreach)
            subprocess.run([str(dvc), "pull", "-q", *targets], cwd=REPO, check=True, timeout=600, capture_output=True)
    for s in studies:
        assert (REPO / marker.format(s=s)).exists(), f"dvc pull did not restore {what} of {s}"


def pulled_runs(*studies: str) -> None:
    """The shipped runs of ``studies`` in data/raw (`dvc pull` from the in-repo remote on a fresh clone)."""
    _pulled("collect", "data/raw/{s}/manifest.json", "the run", studies)


def pulled_pages() -> None:
    """reports/index.html and reports/history.html: the report_index and history stages' outputs."""
    _pulled("report_index", "reports/index.html", "the index", ("",))
    _pulled("history", "reports/history.html", "the history page", ("",))


def pulled_analyses(*studies: str) -> None:
    """The shipped runs of ``studies`` and their analyses (data/derived, the reports and figures: the analyze
    stages' outputs)."""
    pulled_runs(*studies)
    _pulled("analyze", "data/derived/{s}/comparison.csv", "the analysis", studies)


_NBVAL_ROOT = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """nbval checks every notebook against the shipped runs (collect=False through PGLAB_NOTEBOOK_RUNS, on
    a copy): each study's collect is tested by its own tests, the notebooks' collect path by test_notebooks
    and the lab's smoke_lab runs. Set in the controller, before xdist starts the workers that inherit it."""
    from pglab.app.notebook import ANALYZE_ONLY_ENV
    from pglab.studies import STUDIES

    notebooks = any(Path(a.split("::")[0]).parts[:1] == ("notebooks",) or a.split("::")[0].endswith(".ipynb")
                    for a in config.args)
    if hasattr(config, "workerinput") or not notebooks or os.environ.get(ANALYZE_ONLY_ENV):
        return
    pulled_runs(*STUDIES)
    root = Path(tempfile.mkdtemp(prefix="pglab-nbval-"))
    shutil.copytree(REPO / "data" / "raw", root / "raw", symlinks=True)
    os.environ[ANALYZE_ONLY_ENV] = str(root)
    config.stash[_NBVAL_ROOT] = root


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(_NBVAL_ROOT, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _private_pglab_state(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Runs the tests start register in a runs index of their own, never the user's (subprocesses inherit it)."""
    os.environ["PGLAB_STATE_DIR"] = str(tmp_path_factory.mktemp("pglab-state"))


def ssh_entry(server: SshServer) -> HostEntry:
    return HostEntry(kind="ssh", address=server.host, port=server.port, user=server.user,
                     key_filename=server.key_filename, known_hosts=server.known_hosts, workdir=server.workdir)


@pytest.fixture(scope="session")
def inventory(sshd_server: SshServer) -> Inventory:  # noqa: F811
    """``local`` (this process's user; servers as postgres when root) and ``ssh`` (the test sshd)."""
    return Inventory(hosts={"local": HostEntry(), "ssh": ssh_entry(sshd_server)})


# The test lab: four SSH hosts in network namespaces (lab1-3 for topologies, lab4 outside them).
TEST_LAB = f"pgt{os.getpid()}"  # one per test session: never the user's lab, never another session's
# Where the nodes of a two-node topology and its client run, per placement a test is parametrised over.
PLACES = {"local": ("local", "local", "local"), "ssh": ("ssh", "ssh", "ssh"), "lab": ("lab1", "lab2", "lab3")}


@pytest.fixture(scope="session")
def lab_inventory(inventory: Inventory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inventory]:
    """``inventory`` plus the hosts lab1..lab4 of a real lab (namespaces, sshd, host keys), removed at the end.

    Owned by this pytest process: if it dies, ``pglab cleanup`` removes the lab.
    """
    from pglab.hosts import lab

    where = tmp_path_factory.mktemp("lab")
    made = lab.up(4, name=TEST_LAB, inventory_path=where / "lab.yaml", owner_pid=os.getpid())
    try:
        merged = Inventory(hosts={**inventory.hosts, **made.inventory().hosts})
        (where / "all.yaml").write_text(yaml.safe_dump(merged.model_dump(mode="json")))
        yield load_inventory(where / "all.yaml")  # from a file, as `pglab collect --inventory` reads it
    finally:
        lab.down(TEST_LAB)


@pytest.fixture
def placed(request: pytest.FixtureRequest, inventory: Inventory) -> tuple[Inventory, tuple[str, str, str]]:
    """(inventory, (primary host, standby host, client host)) for ``request.param`` in PLACES."""
    where = request.param
    inv = request.getfixturevalue("lab_inventory") if where == "lab" else inventory
    return inv, PLACES[where]


@pytest.fixture(params=["local", "ssh", "lab"])
def host(request: pytest.FixtureRequest, inventory: Inventory) -> Iterator[Host]:
    inv = request.getfixturevalue("lab_inventory") if request.param == "lab" else inventory
    h = inv.connect("lab1" if request.param == "lab" else request.param)
    assert isinstance(h, LocalHost if request.param == "local" else SSHHost)
    yield h
    h.close()


def postgres_pids(under: str | None = None) -> set[int]:
    """PIDs of running postmasters (not their children), optionally only those whose data dir is below ``under``.

    Tests check their own workspace: other servers on the machine are none of their business.
    """
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"/postgres") or b"-D" not in argv:
            continue
        data_dir = argv[argv.index(b"-D") + 1].decode() if argv.index(b"-D") + 1 < len(argv) else ""
        if under is None or data_dir.startswith(under.rstrip("/") + "/"):
            pids.add(int(entry))
    # a child forked a moment ago still shows its postmaster's argv: keep only the postmasters
    return {pid for pid in pids if _parent(pid) not in pids}


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def workspaces() -> set[str]:
    """This test process's pglab per-run folders (a test that starts nothing creates none)."""
    return {str(p) for p in Path(WORKDIR).glob("pglab-??????") if p.is_dir()}




def refused_with_key(collect: Callable[..., Path], cases: dict[str, dict], data_root: Path) -> None:
    """Each case's parameters are refused by ``collect`` with a ParameterError that names the case's key."""
    for key, params in cases.items():
        with pytest.raises(ParameterError) as exc:
            collect(params, data_root=data_root, progress=False)
        assert key in str(exc.value), (key, str(exc.value))


def processes_mentioning(text: str) -> dict[int, str]:
    """Every process whose command line contains ``text`` (a workspace path: servers, slon, pgqd, londiste)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found[int(entry)] = cmd
    return found


# -- scheduling under pytest-xdist (`make test` runs `-n 4 --dist loadgroup`) ------------------------------
# Tests that share something expensive run in one worker, in file order: the cells of a notebook (nbval
# runs them in one kernel), and the tests of a module that use its module-scoped fixture (a collected
# study, a server, a checkout: else every worker that got one of them would build it again). The tests
# of test_lab.py stop and repair their own lab, so they stay together too.
WHOLE_MODULES = {"test_lab.py"}


def _group(item: pytest.Item) -> str | None:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        return f"nb-{path.stem}"
    if path.name in WHOLE_MODULES:
        return f"mod-{path.name}"
    info = getattr(item, "_fixtureinfo", None)
    shared = sorted(name for name, defs in (info.name2fixturedefs.items() if info else ())
                    if any(d.scope == "module" and Path(str(d.baseid).split("::")[0]).name == path.name for d in defs))
    return f"mod-{path.name}-{shared[0]}" if shared else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group what must not be split (above), and start the slow files first: a 2-core machine runs the
    suite in the time of its longest worker, so the multi-minute tests must not be the last handed out."""
    for item in items:
        if (g := _group(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(g))
            if getattr(config.option, "loadgroup", False) and not item.nodeid.endswith(f"@{g}"):
                # what xdist's worker does itself, for every item: it skips non-Function items (nbval's
                # cells), and under pytest 9 its `item._nodeid = ...` no longer renames the item
                item._id = coerce_node_id(f"{item.nodeid}@{g}")
        if Path(str(item.fspath)).suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)  # each notebook collects its study's smoke profile
    slow: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(str(item.fspath), i)
        if item.get_closest_marker("slow"):
            slow[str(item.fspath)] = slow.get(str(item.fspath), 0) + 1
    # stable, and a file's items stay together (module-scoped fixtures are set up once per worker)
    items.sort(key=lambda it: (-slow.get(str(it.fspath), 0), first_seen[str(it.fspath)]))
