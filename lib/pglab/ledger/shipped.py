"""The runs a repository ships: the pipeline's runs (``data/raw/<study>``, analysed in ``data/derived``) and
every run the in-repository DVC remote has ever held, each re-analysed by today's code.

A DVC remote keeps a folder output as a ``.dir`` file (a JSON list of ``relpath`` and ``md5``) beside the
files' contents, named by their md5. A run is a ``.dir`` that lists a ``manifest.json``; it is copied out
of the remote into a scratch folder, analysed there, and added with its ``.dir`` hash as its DVC hash, the
link from every ledger row back to the raw files (``dvc pull`` or ``dvc get`` fetch them by that hash).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.runs import campaign
from pglab.runs.record import MANIFEST, check, migrate
from pglab.runs.writing import git_revision
from pglab.studies import STUDIES, module


def _content(remote: Path, md5: str) -> Path:
    return remote / "files" / "md5" / md5[:2] / md5[2:]


def remote_runs(remote: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``.dir`` hash, checked manifest in today's format) of every run in a DVC remote, oldest run first."""
    remote = Path(remote)
    found = []
    for listing in sorted((remote / "files" / "md5").glob("*/*.dir")):
        try:
            entries = json.loads(listing.read_text())
        except (OSError, ValueError):
            continue
        dir_hash = listing.parent.name + listing.name.removesuffix(".dir") + ".dir"
        for e in entries:  # the run at the top, and a campaign's earlier runs under campaign/<run-id>/
            relpath = e.get("relpath") if isinstance(e, dict) else None
            if not isinstance(relpath, str) or relpath.rsplit("/", 1)[-1] != MANIFEST:
                continue
            inner = relpath[:-len(MANIFEST)].rstrip("/")
            if inner and not (inner.startswith(campaign.MEMBERS + "/") and inner.count("/") == 1):
                continue
            path = _content(remote, e["md5"])
            if not path.exists():
                continue
            data = migrate(check(json.loads(path.read_text()), path))  # read as today's format (runs.formats)
            found.append((member_hash(dir_hash, inner), data))
    yield from sorted(found, key=lambda x: (str(x[1].get("start")), x[1]["run_id"]))


def materialize(remote: str | Path, dir_hash: str, dest: Path) -> Path:
    """The run folder ``dir_hash`` names, copied out of the remote into ``dest`` (hard links where possible)."""
    remote = Path(remote)
    dir_hash, _, inner = dir_hash.partition("#")  # a campaign's earlier run: only its files, from its folder
    prefix = f"{inner}/" if inner else ""
    for e in json.loads(_content(remote, dir_hash).read_text()):
        if not e["relpath"].startswith(prefix):
            continue
        target = dest / e["relpath"][len(prefix):]
        if not target.resolve().is_relative_to(dest.resolve()):
            raise ValueError(f"{dir_hash}: {e['relpath']!r} points outside the run folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.hardlink_to(_content(remote, e["md5"]))
        except OSError:
            shutil.copyfile(_content(remote, e["md5"]), target)
    return dest


def analyse(ledger: Ledger, run: Path, manifest: dict[str, Any], reference: str | Path, revision: str | None) -> str:
    """The run analysed by this checkout's code in a scratch folder and its analysis added; ``analysed``, or why
    not (an old format today's analysis cannot read: the run stays in the ledger, unjudged)."""
    with tempfile.TemporaryDirectory(prefix="pglab-ledger-") as tmp:
        try:
            module(manifest["study"], "analyze").analyze(run, Path(tmp) / "derived", Path(tmp) / "figures",
                                                         Path(reference))
        except Exception as exc:  # noqa: BLE001 - said, counted, and the other runs go on
            return f"not analysed ({type(exc).__name__}: {exc})"
        with ledger.transaction():
            book.add_analysis(ledger, manifest["run_id"], Path(tmp) / "derived", code_revision=revision)
    return "analysed"


def import_remote(ledger: Ledger, remote: str | Path = "data/dvc-remote", reference: str | Path = "data/reference",
                  *, reanalyse: bool = False, report: Callable[[str], None] = print) -> dict[str, int]:
    """Every run of the DVC remote, analysed by this checkout's code, into ``ledger``. A run the ledger already
    holds with an analysis is skipped unless ``reanalyse``; a run today's analysis cannot read is added
    without claims, and said so."""
    counts = {"runs": 0, "new": 0, "analysed": 0, "unreadable": 0}
    revision = git_revision()
    found = list(remote_runs(remote))
    for i, (dir_hash, manifest) in enumerate(found, 1):
        counts["runs"] += 1
        run_id = manifest["run_id"]
        with ledger.transaction():
            counts["new"] += book.add_run(ledger, manifest, dvc_hash=dir_hash)
        if not reanalyse and ledger.query("SELECT 1 FROM analyses WHERE run_id = ?", (run_id,)):
            continue
        with tempfile.TemporaryDirectory(prefix="pglab-ledger-") as tmp:
            said = analyse(ledger, materialize(remote, dir_hash, Path(tmp) / run_id), manifest, reference, revision)
        counts["analysed" if said == "analysed" else "unreadable"] += 1
        report(f"[{i}/{len(found)}] {manifest['study']} {run_id}: {said}")
    return counts


def pipeline_hashes(lock: str | Path = "dvc.lock") -> dict[str, str]:
    """Study -> the ``.dir`` hash of ``data/raw/<study>`` that ``dvc.lock`` records (none if no lock)."""
    try:
        stages = (yaml.safe_load(Path(lock).read_text()) or {}).get("stages") or {}
    except FileNotFoundError:
        return {}
    out = {}
    for study in STUDIES:
        for o in (stages.get(f"collect@{study}") or {}).get("outs") or []:
            if o.get("path") == f"data/raw/{study}" and o.get("md5"):
                out[study] = o["md5"]
    return out


def add_pipeline(ledger: Ledger, data_root: str | Path = "data", lock: str | Path = "dvc.lock") -> list[dict[str, Any]]:
    """Each study's pipeline run (``data/raw/<study>``) with its analysis (``data/derived/<study>``); the DVC hash
    only when ``dvc.lock`` describes that very run."""
    root, hashes, added = Path(data_root), pipeline_hashes(lock), []
    revision = git_revision()
    for study in STUDIES:
        top, analysis = root / "raw" / study, root / "derived" / study
        if not (top / MANIFEST).exists():
            continue
        dvc_hash = hashes.get(study) if _locked(hashes.get(study), top, Path(lock).parent) else None
        for run, derived in campaign.own_analyses(top, analysis):  # a campaign: each of its runs
            derived_ok = (derived / "comparison.csv").exists() and _analysis_of(derived) == _run_id(run)
            added.append(book.add(ledger, run, derived if derived_ok else None, code_revision=revision,
                                  dvc_hash=dvc_hash and member_hash(dvc_hash, run.relative_to(top).as_posix())))
    return added


def member_hash(dir_hash: str, relpath: str) -> str:
    """The DVC hash of a run inside a published folder: the folder's ``.dir`` hash, and for a campaign's earlier run
    ``#`` and its path in it (``campaign/<run-id>``), which ``materialize`` reads back."""
    return dir_hash if relpath in ("", ".") else f"{dir_hash}#{relpath}"


def _run_id(run: Path) -> str:
    return str(json.loads((run / MANIFEST).read_text()).get("run_id"))


def _analysis_of(derived: Path) -> str | None:
    """The run an analysis folder describes (``details.json``'s or ``points.csv``'s run id), if it says."""
    try:
        return str(json.loads((derived / "details.json").read_text()).get("run_id"))
    except (OSError, ValueError):
        return None


def _locked(dir_hash: str | None, run: Path, repo: Path) -> bool:
    """Whether the ``.dir`` that ``dvc.lock`` names lists the very ``manifest.json`` in ``run`` (a user's newer run,
    not yet committed to DVC, is not the locked one): checked by its md5 in DVC's cache or the remote."""
    if not dir_hash:
        return False
    for store in (".dvc/cache", "data/dvc-remote"):
        try:
            entries = json.loads(_content(repo / store, dir_hash).read_text())
        except (OSError, ValueError):
            continue
        md5 = next((e.get("md5") for e in entries if e.get("relpath") == MANIFEST), None)
        return md5 == hashlib.md5((run / MANIFEST).read_bytes()).hexdigest()
    return False

