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
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from pglab.errors import UserError
from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.ledger.locations import printable
from pglab.runs import campaign
from pglab.runs.record import MANIFEST, check, migrate
from pglab.runs.writing import git_revision
from pglab.studies import STUDIES, module

MD5 = re.compile(r"[0-9a-f]{32}")


def _skip(line: str) -> None:
    print(f"pglab: skipped {line}", file=sys.stderr)


def _content(remote: Path, md5: object) -> Path:
    """The file of the remote an md5 names; ValueError unless it is 32 hex digits (a path, ``..`` or ``/etc``
    would name a file outside the remote) and the file is inside the remote."""
    if not isinstance(md5, str) or not MD5.fullmatch(md5):
        raise ValueError(f"md5 {printable(repr(md5), 80)} is not 32 hex digits")
    path = remote / "files" / "md5" / md5[:2] / md5[2:]
    if path.exists() and not path.resolve().is_relative_to(remote.resolve()):
        raise ValueError(f"md5 {md5} names a file outside the remote")
    return path


def _listing(remote: Path, dir_hash: str) -> Path:
    """The ``.dir`` file of the remote a ``.dir`` hash names (ValueError unless it is an md5 and ``.dir``)."""
    if not dir_hash.endswith(".dir"):
        raise ValueError(f"{printable(repr(dir_hash), 80)} is not a .dir hash")
    return _content(remote, dir_hash.removesuffix(".dir")).with_name(dir_hash[2:])


def _entries(remote: Path, listing: Path, name: str, skip: Callable[[str], None]) -> list[dict[str, Any]]:
    """The entries of a ``.dir`` file that are a ``relpath`` and an ``md5``; each other one skipped, said in one
    line (a ``.dir`` that is no JSON list: all of it)."""
    try:
        entries = json.loads(listing.read_text())
    except (OSError, ValueError) as exc:
        skip(f"{name}: not a DVC .dir listing ({printable(exc, 120)})")
        return []
    if not isinstance(entries, list):
        skip(f"{name}: not a DVC .dir listing (not a list)")
        return []
    good = []
    for e in entries:
        relpath = e.get("relpath") if isinstance(e, dict) else None
        if not isinstance(relpath, str):
            skip(f"{name}: an entry with no relpath")
            continue
        try:
            _content(remote, e.get("md5"))
        except ValueError as exc:
            skip(f"{name}: {printable(repr(relpath), 120)}: {exc}")
            continue
        good.append(e)
    return good


def remote_runs(remote: str | Path, skip: Callable[[str], None] = _skip) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``.dir`` hash, checked manifest in today's format) of every run in a DVC remote, oldest run first; an entry
    that names no file of the remote, or a manifest that is none, is skipped with one line."""
    remote = Path(remote)
    found = []
    for listing in sorted((remote / "files" / "md5").glob("*/*.dir")):
        dir_hash = listing.parent.name + listing.name.removesuffix(".dir") + ".dir"
        if not MD5.fullmatch(dir_hash.removesuffix(".dir")):
            skip(f"{printable(listing, 200)}: not named by an md5")
            continue
        for e in _entries(remote, listing, dir_hash, skip):  # the run at the top, and a campaign's earlier runs
            relpath = e["relpath"]
            if relpath.rsplit("/", 1)[-1] != MANIFEST:
                continue
            inner = relpath[:-len(MANIFEST)].rstrip("/")
            if inner and not (inner.startswith(campaign.MEMBERS + "/") and inner.count("/") == 1):
                continue
            path = _content(remote, e["md5"])
            if not path.exists():
                continue
            try:
                data = migrate(check(json.loads(path.read_text()), path))  # read as today's format (runs.formats)
            except (OSError, ValueError, UserError) as exc:
                skip(f"{dir_hash}: {printable(relpath, 120)}: {printable(exc, 200)}")
                continue
            found.append((member_hash(dir_hash, inner), data))
    yield from sorted(found, key=lambda x: (str(x[1].get("start")), x[1]["run_id"]))


def materialize(remote: str | Path, dir_hash: str, dest: Path, skip: Callable[[str], None] = _skip) -> Path:
    """The run folder ``dir_hash`` names, copied out of the remote into ``dest`` (hard links where possible); an
    entry that would land outside the run folder, or names no file of the remote, is skipped with one line."""
    remote = Path(remote)
    dir_hash, _, inner = dir_hash.partition("#")  # a campaign's earlier run: only its files, from its folder
    prefix = f"{inner}/" if inner else ""
    for e in _entries(remote, _listing(remote, dir_hash), dir_hash, skip):
        if not e["relpath"].startswith(prefix):
            continue
        target = dest / e["relpath"][len(prefix):]
        source = _content(remote, e["md5"])
        if not target.resolve().is_relative_to(dest.resolve()) or target.resolve() == dest.resolve():
            skip(f"{dir_hash}: {printable(repr(e['relpath']), 120)} points outside the run folder")
            continue
        if not source.is_file():
            skip(f"{dir_hash}: {printable(repr(e['relpath']), 120)}: its file is not in the remote")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.hardlink_to(source)
        except OSError:
            shutil.copyfile(source, target)
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
        if _analysis_of(analysis) == _run_id(top):  # a campaign's verdicts over its runs, as its report tells them
            book.add_campaign(ledger, top, analysis, code_revision=revision)
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
            entries = json.loads(_listing(repo / store, dir_hash).read_text())
        except (OSError, ValueError):
            continue
        md5 = next((e.get("md5") for e in entries if e.get("relpath") == MANIFEST), None)
        return md5 == hashlib.md5((run / MANIFEST).read_bytes()).hexdigest()
    return False

