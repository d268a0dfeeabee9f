"""``pglab cleanup``: stop what runs that were killed left running, and only what they provably started.

A run killed with SIGKILL cannot clean up, so its manifest still says ``running``; ``pglab cleanup``
reads those manifests (under the data root and in the per-user runs index) and stops what they list,
but only what it can prove that run started: a PID whose boot id, start time and command line still
match, a server whose data dir is in that run's workspace, stopped with the inventory's own pg_ctl
(never a program path read from a manifest). Resuming a killed run does the same first
(pglab.runs.resume).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglab.hosts import procs, run_account
from pglab.hosts.base import Host
from pglab.hosts.inventory import Inventory, load_inventory
from pglab.hosts.local import LocalHost
from pglab.nodes import cpu_quota
from pglab.runs import record, runs_index
from pglab.runs.process_groups import group_alive, wait_until
from pglab.runs.record import MANIFEST, ManifestError
from pglab.runs.store import write_manifest
from pglab.runs.writing import now

# A run's status once it is over and nothing of it runs any more (its index entry can go).
FINAL = ("complete", "partial", "failed", "interrupted", "killed")
# Statuses ``pglab cleanup`` acts on: the run never cleaned up, or its cleanup left something.
UNFINISHED = ("running", "cleanup_failed")
# the folder name Workspace.create makes (mktemp pglab-XXXXXX): nothing else is taken for a workspace
WORKSPACE_NAME = re.compile(r"pglab-[A-Za-z0-9]{6}")


@dataclass
class CleanupReport:
    """What ``pglab cleanup`` did: one line per action, and whether anything could not be stopped."""

    echo: Callable[[str], None] | None = None
    lines: list[str] = field(default_factory=list)
    runs: int = 0
    stopped: int = 0
    left_alone: int = 0
    live: int = 0  # runs whose own process still runs: never touched
    failed: list[str] = field(default_factory=list)
    pruned: int = 0
    lab_failures: list[str] = field(default_factory=list)  # orphaned labs that could not be removed
    unreadable: list[str] = field(default_factory=list)  # manifests refused by the run record (bad input)

    def add(self, line: str) -> None:
        self.lines.append(line)
        if self.echo:
            self.echo(line)

    @property
    def clean(self) -> bool:
        return not self.failed and not self.lab_failures

    @property
    def exit_code(self) -> int:
        """0 clean; 2 when all that is not clean is a manifest the run record refused (bad input, as every
        other reader of a run folder answers it); 1 when something could not be stopped or cleaned."""
        if self.clean:
            return 0
        return 2 if len(self.unreadable) == len(self.failed) and not self.lab_failures else 1

    def summary(self) -> str:
        if not self.runs:
            head = "nothing left behind: no unfinished run"
        else:
            head = (f"{self.runs} unfinished run(s): {self.stopped} stopped, {self.left_alone} left alone, "
                    f"{len(self.failed)} could not be stopped or cleaned")
        if self.live:
            head += f"; {self.live} run(s) in progress, left alone"
        if self.pruned:
            head += f"; {self.pruned} finished run(s) dropped from the runs index"
        if not self.clean:
            return head + "\nNOT CLEAN: still running or unknown:\n  " + "\n  ".join(self.failed + self.lab_failures)
        return head + "\nall clean"


class _Connections:
    """The hosts one run's cleanup needs, each connected once and all closed at the end (also on error)."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self.open: dict[str, Host] = {}
        self._boot: dict[str, str] = {}

    def get(self, name: str) -> Host:
        if name not in self.open:
            self.open[name] = self.inventory.connect(name)
        return self.open[name]

    def boot_id(self, name: str) -> str:
        if name not in self._boot:
            self._boot[name] = procs.boot_id(self.get(name))
        return self._boot[name]

    def close(self) -> None:
        for host in self.open.values():
            with contextlib.suppress(Exception):
                host.close()
        self.open.clear()


def cleanup_leftovers(data_root: Path, inventory: Inventory, force: bool = False,
                      echo: Callable[[str], None] | None = None) -> CleanupReport:
    """Stop what unfinished runs left behind: runs whose manifest is under ``data_root`` or in the
    per-user runs index, with status ``running`` (killed) or ``cleanup_failed``.

    Index entries of runs that are over, left nothing and whose own process is gone are pruned: a run
    whose process still lives (same boot, PID and start time) is never touched, whoever started it.
    """
    report = CleanupReport(echo=echo)
    for manifest_path, index_entry in _known_manifests(Path(data_root)):
        if not manifest_path.exists():
            if index_entry:
                runs_index.unregister(index_entry)
                report.pruned += 1
            continue
        try:
            manifest = record.bookkeeping(manifest_path)
        except ManifestError as exc:  # not clean: whatever that run started cannot be looked for
            problem = (f"{record.shown(exc.path)}: unreadable manifest ({exc.problem}): the servers and processes "
                       "of that run, if any, could not be looked for; restore or remove the file and run "
                       "`pglab cleanup` again")
            report.add(problem)
            report.failed.append(problem)
            report.unreadable.append(problem)
            continue
        if manifest.get("status") in UNFINISHED:
            _clean_run(manifest_path, manifest, _inventory_for(manifest, inventory, report), force, report)
        if (index_entry and manifest.get("status") in FINAL and not manifest.get("leftovers")
                and not _run_in_progress(manifest)):  # only a run whose own process is gone is ours to touch
            runs_index.unregister(index_entry)
            report.pruned += 1
    return report


def _inventory_for(manifest: dict[str, Any], inventory: Inventory, report: CleanupReport) -> Inventory:
    """``inventory``, plus the hosts of the inventory file the run recorded that it does not know (a run
    on lab hosts is cleaned up without naming the lab's inventory)."""
    recorded = manifest.get("inventory")
    hosts = {n.get("host") for n in manifest.get("nodes", [])} | set(manifest.get("workspaces", {}))
    if not recorded or hosts <= set(inventory.hosts):
        return inventory
    try:
        other = load_inventory(recorded)
    except Exception as exc:  # noqa: BLE001  (gone or invalid: the hosts stay unknown, and are reported)
        report.add(f"{recorded}: the run's inventory cannot be read ({exc})")
        return inventory
    return Inventory(hosts={**other.hosts, **inventory.hosts})


def _known_manifests(data_root: Path) -> list[tuple[Path, Path | None]]:
    """Manifests under ``data_root`` (the archive, and the older raw/<study>/<run-id> layout) and in the
    runs index, each once, with its index entry if it has one."""
    found: dict[Path, Path | None] = {}
    for pattern in (f"runs/*/*/{MANIFEST}", f"raw/*/*/{MANIFEST}"):
        for p in sorted(data_root.glob(pattern)):
            found.setdefault(p.resolve(), None)
    for entry, p in runs_index.entries():
        found[p.resolve() if p.exists() else p] = entry
    return sorted(found.items(), key=lambda kv: kv[0].parent.name)


def _clean_run(path: Path, manifest: dict[str, Any], inventory: Inventory, force: bool,
               report: CleanupReport) -> None:
    run = path.parent
    was = manifest["status"]
    if was == "running" and not force and _run_in_progress(manifest):
        report.add(f"{run}: run still in progress (pid {manifest.get('pid')}); left alone")
        report.live += 1
        return
    report.runs += 1
    report.add(f"{run.name}: unfinished run ({was}), manifest {path}")
    actions: list[str] = []
    leftovers: list[dict[str, Any]] = []

    def act(line: str, outcome: str = "stopped", left: dict[str, Any] | None = None) -> None:
        actions.append(line)
        report.add(f"{run.name}: {line}")
        if outcome == "stopped":
            report.stopped += 1
        elif outcome == "alone":
            report.left_alone += 1
        elif outcome == "failed":
            report.failed.append(f"{run.name}: {line}")
            if left is not None:
                leftovers.append(left)

    conns = _Connections(inventory)
    try:
        for proc in manifest.get("processes", []):
            if proc.get("stopped"):
                continue
            left = {"kind": "process", "host": proc.get("host"), "pid": proc.get("pid"), "command": proc.get("command")}
            try:
                if _stop_process(conns, proc, act, left):
                    proc["stopped"] = True  # a later cleanup need not look at this PID again
            except Exception as exc:  # noqa: BLE001  (one host down must not stop the others' cleanup)
                act(f"could not stop process {proc.get('pid')} on {proc.get('host')}: {exc}", "failed", left)
        workspaces = _checked_workspaces(manifest, inventory, act)
        for n in sorted(manifest.get("nodes", []), key=lambda n: n.get("role") != "primary"):
            left = {"kind": "node", "host": n.get("host"), "node": n.get("name"), "data_dir": n.get("data_dir")}
            try:
                _stop_node(conns, n, manifest, inventory, workspaces, act, left)
            except Exception as exc:  # noqa: BLE001
                act(f"could not stop node {n.get('name')} on {n.get('host')}: {exc}", "failed", left)
        for host_name, base in workspaces.items():
            try:
                host = conns.get(host_name)
                if host.exists(f"{base}/pgpass"):
                    host.run(["rm", "-f", f"{base}/pgpass"])
                    act(f"removed passfile {host_name}:{base}/pgpass", "done")
                act(f"kept {host_name}:{base} on disk (server logs and data of the run)", "done")
                mine = cpu_quota.run_prefix(base)  # its nodes' CPU groups, emptied
                for group in (g for g in cpu_quota.leftovers(host) if g.startswith(mine)):
                    host.run(["rmdir", f"{cpu_quota.ROOT}/{group}"], check=False)
                    act(f"removed CPU group {host_name}:{cpu_quota.ROOT}/{group}", "done")
            except Exception as exc:  # noqa: BLE001
                act(f"could not remove passfile {host_name}:{base}/pgpass: {exc}", "failed",
                    {"kind": "passfile", "host": host_name, "path": f"{base}/pgpass"})
        for local in manifest.get("local_passfiles", {}).values():
            _remove_local_passfile(str(local), act)
        if (group := manifest.get("cpu_account")) and run_account.leave_empty(group):  # the run's own CPU count
            act(f"removed CPU account group {run_account.ROOT}/{group}", "done")
    finally:
        conns.close()
    manifest["cleanup"] = {"by": "pglab cleanup", "at": now(), "actions": actions}
    if was == "running":
        manifest["outcome"] = "killed"
    if leftovers:
        manifest.update(status="cleanup_failed", leftovers=leftovers)
    else:
        manifest.update(status=manifest.get("outcome") or "killed", leftovers=[])
    write_manifest(path, manifest)


def _run_in_progress(manifest: dict[str, Any]) -> bool:
    """The run's own process still lives: its PID runs, and is still that process if we can tell."""
    pid = manifest.get("pid")
    if not pid or not _alive(int(pid)):
        return False
    control = manifest.get("control")
    if not control:
        return True
    try:
        return procs.mismatch(LocalHost(), int(pid), control) is None
    except Exception:  # noqa: BLE001  (cannot tell: assume it runs)
        return True


def _stop_process(conns: _Connections, proc: dict[str, Any], act: Callable[..., None],
                  left: dict[str, Any]) -> bool:
    """SIGTERM (then SIGKILL) the process group of a PID that is provably the one this run started.

    True when the run's process is gone (stopped now, or earlier); False when it may still run.
    """
    name, pid = str(proc["host"]), int(proc["pid"])
    host = conns.get(name)
    why = procs.mismatch(host, pid, proc, conns.boot_id(name))
    if why == "gone":
        act(f"process {pid} on {name} already gone", "done")
        return True
    if why and why.startswith("no identity"):
        act(f"left alone: pid {pid} on {name}: {why}", "alone")
        return False
    if why:
        act(f"left alone: pid {pid} now belongs to another process ({name}: {why})", "alone")
        return True
    for sig in ("TERM", "KILL"):
        host.run(["kill", f"-{sig}", f"-{pid}"], check=False)  # its session: the command and its children
        host.run(["kill", f"-{sig}", str(pid)], check=False)  # in case it was no group leader
        boot = conns.boot_id(name)
        if wait_until(lambda: not group_alive(host, pid) and procs.mismatch(host, pid, proc, boot) is not None,  # noqa: B023
                 5.0 if sig == "TERM" else 3.0):
            act(f"stopped process {pid} on {name} (SIG{sig}): {str(proc.get('command', ''))[:60]}")
            return True
        # The PID may have died and been reused meanwhile: SIGKILL only a group that is still ours.
        leader = procs.mismatch(host, pid, proc, boot)
        if leader not in (None, "gone"):
            break
    act(f"could not stop process {pid} on {name}: {str(proc.get('command', ''))[:60]}", "failed", left)
    return False


def _checked_workspaces(manifest: dict[str, Any], inventory: Inventory, act: Callable[..., None]) -> dict[str, str]:
    """The run's workspaces that are what pglab creates: ``<inventory workdir>/pglab-XXXXXX``."""
    ok: dict[str, str] = {}
    for host_name, base in manifest.get("workspaces", {}).items():
        try:
            workdir = inventory.entry(host_name).workdir
        except Exception as exc:  # noqa: BLE001
            act(f"could not remove the passfile of workspace {host_name}:{base}: {exc}", "failed",
                {"kind": "workspace", "host": host_name, "path": base})
            continue
        path = posixpath.normpath(str(base))
        if (posixpath.dirname(path) == posixpath.normpath(workdir)
                and WORKSPACE_NAME.fullmatch(posixpath.basename(path))):
            ok[host_name] = path
        else:
            act(f"left alone: {host_name}:{base} is not a pglab workspace in the inventory's workdir {workdir}",
                "alone")
    return ok


def _stop_node(conns: _Connections, n: dict[str, Any], manifest: dict[str, Any], inventory: Inventory,
               workspaces: dict[str, str], act: Callable[..., None], left: dict[str, Any]) -> None:
    """Stop a node with the inventory's pg_ctl, as the inventory's server user, if its data dir is in
    one of the run's workspaces and its postmaster is that data dir's."""
    name, host_name = n.get("name"), str(n.get("host"))
    entry = inventory.entry(host_name)  # a host the inventory does not know: cannot be stopped from here
    data_dir = posixpath.normpath(str(n.get("data_dir", "")))
    ws = workspaces.get(host_name)
    if ws is None or not data_dir.startswith(ws + "/"):
        act(f"left alone: node {name} on {host_name}: data dir {data_dir} is not in a workspace of this run",
            "alone")
        return
    host = conns.get(host_name)
    recorded_boot = manifest.get("boot_ids", {}).get(host_name)
    if recorded_boot and recorded_boot != conns.boot_id(host_name):
        act(f"node {name} on {host_name}: host rebooted since the run; nothing of it runs", "done")
        return
    pg_ctl = [f"{entry.bindir}/pg_ctl", "-D", data_dir]
    user = host.server_user
    res = host.run([*pg_ctl, "status"], as_user=user, check=False)
    # pg_ctl status: 0 running, 3 not running, 4 no data dir; anything else says nothing about the server
    if res.exit_code == 3 or (res.exit_code == 4 and not host.exists(data_dir)):
        act(f"node {name} on {host_name} not running ({data_dir})", "done")
        return
    if res.exit_code != 0:
        act(f"could not check node {name} on {host_name} ({data_dir}): pg_ctl status exited {res.exit_code}: "
            f"{(res.stderr or res.stdout).strip()[:100]}", "failed", left)
        return
    first = host.run(["head", "-n", "1", f"{data_dir}/postmaster.pid"], as_user=user, check=False).stdout.strip()
    argv = procs.cmdline(host, int(first)) if first.isdigit() else None
    if not _is_postmaster_of(argv, data_dir):
        act(f"left alone: node {name} on {host_name}: postmaster.pid names pid {first or '?'}, "
            f"which is not the server of {data_dir}", "alone")
        return
    host.run([*pg_ctl, "-m", "immediate", "-w", "-t", "60", "stop"], as_user=user, check=False, timeout=90)
    if host.run([*pg_ctl, "status"], as_user=user, check=False).exit_code == 0:
        act(f"could not stop node {name} on {host_name} ({data_dir})", "failed", left)
    else:
        act(f"stopped node {name} on {host_name} ({data_dir})")


def _is_postmaster_of(argv: list[str] | None, data_dir: str) -> bool:
    """pg_ctl starts ``<bindir>/postgres -D <data_dir>``; the postmaster keeps that command line."""
    if not argv or posixpath.basename(argv[0]) != "postgres" or "-D" not in argv[:-1]:
        return False
    return posixpath.normpath(argv[argv.index("-D") + 1]) == data_dir


def _remove_local_passfile(path: str, act: Callable[..., None]) -> None:
    """Only a file that is what ``Workspace.create`` makes: ours, regular, named pglab-pgpass-*."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if (not os.path.basename(path).startswith("pglab-pgpass-") or not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.getuid()):
        act(f"left alone: {path} is not a passfile copy pglab made", "alone")
        return
    os.unlink(path)
    act(f"removed passfile copy {path} (control machine)", "done")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
