"""Adding runs and their analyses to a ledger, merging ledgers, and reading them back as DataFrames.

Idempotent by construction: a run is keyed by its run id (a UTC timestamp and a random suffix, unique
across machines), and a run's analysis by the digest of what it said. Adding what is there changes
nothing; a different analysis of a run replaces the one before only if it is newer (``analysed_at``, then
the digest to break a tie), so merging ledgers in any order gives the same ledger.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pglab.errors import UserError
from pglab.ledger import rows
from pglab.ledger.backend import Ledger, is_yours, location, reference
from pglab.ledger.schema import TABLES
from pglab.runs import campaign
from pglab.runs.writing import git_revision


def _insert(ledger: Ledger, table: str, records: list[dict[str, Any]], replace: bool = False) -> None:
    cols, key = TABLES[table]
    conflict = "DO NOTHING" if not replace else "DO UPDATE SET " + ", ".join(
        f"{c} = excluded.{c}" for c in cols if c not in key)
    ledger.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                       f"ON CONFLICT ({', '.join(key)}) {conflict}",
                       [[r.get(c) for c in cols] for r in records])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _put_runs(ledger: Ledger, records: list[dict[str, Any]]) -> None:
    """Runs added; a known run's row replaced only by a later record of it (a resumed run ends later than its
    interrupted self), so that adding and merging in any order keep the latest; a DVC hash is never lost, and a
    row from before the ledger kept marks (``marked`` NULL) gains them when its record is added again."""
    cols, _ = TABLES["runs"]
    update = ", ".join(f"{c} = COALESCE(excluded.{c}, runs.{c})" if c in ("dvc_hash", "marked")
                       else f"{c} = excluded.{c}" for c in cols if c != "run_id")
    ledger.executemany(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                       f"ON CONFLICT (run_id) DO UPDATE SET {update} "
                       "WHERE COALESCE(excluded.ended, '') > COALESCE(runs.ended, '') "
                       "OR (runs.dvc_hash IS NULL AND excluded.dvc_hash IS NOT NULL) "
                       "OR (runs.marked IS NULL AND excluded.marked IS NOT NULL)",
                       [[r.get(c) for c in cols] for r in records])


def add_run(ledger: Ledger, manifest: dict[str, Any], *, dvc_hash: str | None = None) -> bool:
    """The run and its machine (a checked manifest); True if the run was new. A known run is updated by a later
    record of it (resumed), and gains a DVC hash it lacked (the pipeline's copy learns it after ``dvc commit``)."""
    run = rows.run(manifest, dvc_hash)
    known = ledger.query("SELECT 1 FROM runs WHERE run_id = ?", (run["run_id"],))
    _insert(ledger, "machines", [rows.machine(manifest)])
    _put_runs(ledger, [run])
    return not known


def add_analysis(ledger: Ledger, run_id: str, derived: str | Path, *, analysed_at: str | None = None,
                 code_revision: str | None = None) -> str:
    """The points and claims of the analysis in ``derived`` (``points.csv``, ``comparison.csv``) for a run the
    ledger has: ``added``, ``same`` (that analysis is there already) or ``older`` (a newer one is kept)."""
    derived = Path(derived)
    if not (derived / "comparison.csv").is_file():  # a misspelt folder must not read as an empty analysis
        raise UserError(f"{derived}: not an analysis of a run (no comparison.csv); nothing was added")
    p, c = rows.points(run_id, derived), rows.claims(run_id, derived)
    return _put_analysis(ledger, {"run_id": run_id, "digest": rows.digest(p, c), "analysed_at": analysed_at or _now(),
                                  "code_revision": code_revision, "n_points": len(p), "n_claims": len(c)}, p, c)


def _kept(ledger: Ledger, table: str, key: str, row: dict[str, Any], merging: bool) -> str | None:
    """``same`` when ``table`` holds this very analysis (``digest``; merging, the later time and revision of the two
    kept), ``older`` when it holds a newer one, None when ``row`` is to replace what it holds: the one rule that
    makes adding idempotent and merging order-free, for a run's analysis and a campaign's alike."""
    old = ledger.query(f"SELECT digest, analysed_at, code_revision FROM {table} WHERE {key} = ?", (row[key],))
    if old and old[0][0] == row["digest"]:
        if merging and (row["analysed_at"], row["code_revision"] or "") > (old[0][1], old[0][2] or ""):
            ledger.execute(f"UPDATE {table} SET analysed_at = ?, code_revision = ? WHERE {key} = ?",
                           (row["analysed_at"], row["code_revision"], row[key]))
        return "same"
    if old and (old[0][1], old[0][0]) > (row["analysed_at"], row["digest"]):
        return "older"
    return None


def _put_analysis(ledger: Ledger, analysis: dict[str, Any], p: list[dict[str, Any]], c: list[dict[str, Any]],
                  merging: bool = False) -> str:
    """The analysis, unless the ledger has the same one or a newer one. Merging, the same analysis made at two
    times keeps the later time (and revision), so that two ledgers merge to one result in either order."""
    run_id = analysis["run_id"]
    if kept := _kept(ledger, "analyses", "run_id", analysis, merging):
        return kept
    ledger.execute("DELETE FROM points WHERE run_id = ?", (run_id,))
    ledger.execute("DELETE FROM claims WHERE run_id = ?", (run_id,))
    _insert(ledger, "analyses", [analysis], replace=True)
    _insert(ledger, "points", p)
    _insert(ledger, "claims", c)
    return "added"


def add(ledger: Ledger, run_dir: str | Path, derived: str | Path | None = None, *, dvc_hash: str | None = None,
        analysed_at: str | None = None, code_revision: str | None = None) -> dict[str, Any]:
    """A run folder (and, given its analysis folder, what the analysis said), in one transaction."""
    manifest = rows.from_folder(run_dir)
    with ledger.transaction():
        new = add_run(ledger, manifest, dvc_hash=dvc_hash)
        analysis = add_analysis(ledger, manifest["run_id"], derived, analysed_at=analysed_at,
                                code_revision=code_revision) if derived is not None else None
    return {"run_id": manifest["run_id"], "study": manifest["study"], "new": new, "analysis": analysis}


def add_campaign(ledger: Ledger, top: str | Path, derived: str | Path, *, analysed_at: str | None = None,
                 code_revision: str | None = None) -> str | None:
    """A campaign (its folder ``top``) with its verdicts over runs (its analysis ``derived``): ``added``, ``same``,
    ``older``, or None when ``top`` is a single run or the analysis is not over its runs. Its runs are added by
    ``add`` (each with its own analysis); this row is what every view shows as the campaign's verdicts."""
    if campaign.read(top) is None:
        return None
    made = rows.campaign(Path(derived), [rows.from_folder(m) for m in campaign.members(top)])
    if made is None:
        return None
    row, claims = made
    row.update(analysed_at=analysed_at or _now(), code_revision=code_revision)
    with ledger.transaction():
        return _put_campaign(ledger, row, claims)


def _put_campaign(ledger: Ledger, row: dict[str, Any], claims: list[dict[str, Any]], merging: bool = False) -> str:
    """As ``_put_analysis``: the same verdicts again change nothing, a newer analysis replaces an older one."""
    key = row["campaign_id"]
    if kept := _kept(ledger, "campaigns", "campaign_id", row, merging):
        return kept
    ledger.execute("DELETE FROM campaign_claims WHERE campaign_id = ?", (key,))
    _insert(ledger, "campaigns", [row], replace=True)
    _insert(ledger, "campaign_claims", claims)
    return "added"


def _records(ledger: Ledger, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    cols, found = ledger.columns(sql, params)
    return [dict(zip(cols, r, strict=True)) for r in found]


def merge(into: Ledger, other: Ledger) -> dict[str, int]:
    """Every run, machine and analysis of ``other`` added to ``into`` (by the rules of ``add``): counts of new."""
    counts = {"runs": 0, "analyses": 0}
    with into.transaction():
        _insert(into, "machines", _records(other, "SELECT * FROM machines"))
        known = {r[0] for r in into.query("SELECT run_id FROM runs")}
        theirs = _records(other, "SELECT * FROM runs")
        _put_runs(into, theirs)
        counts["runs"] = sum(r["run_id"] not in known for r in theirs)
        for a in _records(other, "SELECT * FROM analyses"):
            p = _records(other, "SELECT * FROM points WHERE run_id = ?", (a["run_id"],))
            c = _records(other, "SELECT * FROM claims WHERE run_id = ?", (a["run_id"],))
            counts["analyses"] += _put_analysis(into, a, p, c, merging=True) == "added"
        for row in _records(other, "SELECT * FROM campaigns"):
            claims = _records(other, "SELECT * FROM campaign_claims WHERE campaign_id = ?", (row["campaign_id"],))
            _put_campaign(into, row, claims, merging=True)
    return counts


def add_published(ledger: Ledger, run: str | Path, derived: str | Path | None,
                  code_revision: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """A published run folder: a campaign's runs, each with its own analysis, then its verdicts over the runs
    (``add_campaign``'s answer second); a single run with its analysis."""
    pairs = campaign.own_analyses(Path(run), Path(derived)) if derived is not None else \
        [(m, None) for m in campaign.members(run)]
    done = [add(ledger, member, own, code_revision=code_revision) for member, own in pairs]
    kept = add_campaign(ledger, run, derived, code_revision=code_revision) if derived is not None else None
    return done, kept


def record(run: str | Path, derived: str | Path | None = None, *, data_root: str | Path = "data",
           url: str | None = None) -> None:
    """Add a run (and its analysis) to the ledger after a command made it; a ledger that cannot take it is said
    on stderr and changes nothing else: the run folder is the truth, and ``pglab ledger add`` adds it later."""
    try:
        with Ledger(url, data_root) as ledger:
            add_published(ledger, run, derived, code_revision=git_revision())
    except Exception as exc:  # noqa: BLE001 - never let the index cost the run
        print(f"pglab: the run {run} was not added to the ledger {location(url, data_root)} ({exc}); "
              f"`pglab ledger add {run}` adds it later", file=sys.stderr)


# -- reading ----------------------------------------------------------------------------------------------


#: a run that sat still: no mark, or none known (a row added before the ledger kept marks)
UNMARKED = "(r.marked IS NULL OR r.marked = '')"


def frame(ledger: Ledger, sql: str, params: tuple[Any, ...] = ()) -> pd.DataFrame:
    cols, found = ledger.columns(sql, params)
    return pd.DataFrame(found, columns=cols)


def runs(ledger: Ledger, study: str | None = None, with_marked: bool = True) -> pd.DataFrame:
    """One row per run, oldest first, with its machine's label and whether it has an analysis; without
    ``with_marked``, the runs marked for a busy or moving machine left out (``marked``)."""
    where = " AND ".join(([] if with_marked else [UNMARKED]) + (["r.study = ?"] if study else []))
    return frame(ledger, "SELECT r.*, m.label AS machine, CASE WHEN a.digest IS NULL THEN 0 ELSE 1 END AS analysed, "
                         "a.n_claims FROM runs r LEFT JOIN machines m USING (machine_key) "
                         f"LEFT JOIN analyses a USING (run_id) {'WHERE ' + where if where else ''} "
                         "ORDER BY r.started, r.run_id", (study,) if study else ())


def claims(ledger: Ledger, study: str | None = None, with_marked: bool = True) -> pd.DataFrame:
    """One row per (run, claim): the claim's verdict, value and interval, with the run's study, profile, start,
    machine and PostgreSQL build, oldest run first; without ``with_marked``, marked runs' claims left out. ``asked``:
    the emulation the run asked for (``emulation_asked``), what pools runs."""
    where = " AND ".join(([] if with_marked else [UNMARKED]) + (["r.study = ?"] if study else []))
    c = frame(ledger, "SELECT r.study, c.*, r.profile, r.started, r.status, r.machine_key, m.label AS machine, "
                      "r.pg_version, r.pg_family, r.git_revision, r.dvc_hash, r.emulation, r.marked, r.parameters "
                      "FROM claims c JOIN runs r USING "
                      f"(run_id) LEFT JOIN machines m USING (machine_key) {'WHERE ' + where if where else ''} "
                      "ORDER BY r.started, r.run_id, c.claim", (study,) if study else ())
    c["emulation"] = c["emulation"].fillna("")
    c["asked"] = [emulation_asked(p, e) for p, e in zip(c["parameters"], c["emulation"], strict=True)]
    return c


def campaigns(ledger: Ledger, study: str | None = None) -> pd.DataFrame:
    """One row per (campaign, claim): the campaign's verdict over its runs, with the campaign's study, profile,
    start, runs (``run_ids``: JSON, oldest first), the runs left out and the scope; oldest campaign first."""
    where = "WHERE k.study = ?" if study else ""
    return frame(ledger, "SELECT k.study, k.profile, k.started, k.ended, k.run_ids, k.left_out, k.scope AS "
                         f"campaign_scope, c.* FROM campaign_claims c JOIN campaigns k USING (campaign_id) {where} "
                         "ORDER BY k.started, c.campaign_id, c.claim", (study,) if study else ())


def emulation_asked(parameters: Any, said: Any) -> str:
    """What a run asked to imitate (its parameters' ``emulate``, canonical), '' on the machine as it is: the key that
    pools runs. Not the words the run measured (``said``): a calibrated run measures its own flush time (8.563 ms in
    one, 8.568 ms in the next of one campaign), and grouping by those split every campaign into runs of one."""
    if not isinstance(said, str) or not said:
        return ""
    try:
        asked = json.loads(parameters).get("emulate") if isinstance(parameters, str) else None
    except (ValueError, AttributeError):
        asked = None
    return json.dumps(asked, sort_keys=True) if asked else said


def campaign_of(ledger: Ledger, run_id: str) -> str | None:
    """The latest campaign ``run_id`` is one of (or is), if any."""
    found = [k for k, ids in ledger.query("SELECT campaign_id, run_ids FROM campaigns ORDER BY started DESC")
             if run_id == k or run_id in json.loads(ids or "[]")]
    return found[0] if found else None


def marked_count(ledger: Ledger, study: str | None = None) -> int:
    """How many runs (of ``study``) are marked: what a view that leaves them out says it left out."""
    where = "WHERE NOT " + UNMARKED + (" AND r.study = ?" if study else "")
    return int(ledger.columns(f"SELECT count(*) FROM runs r {where}", (study,) if study else ())[1][0][0])


def points(ledger: Ledger, run_id: str) -> pd.DataFrame:
    return frame(ledger, "SELECT * FROM points WHERE run_id = ? ORDER BY point", (run_id,))


def with_reference(ledger: Ledger, data_root: str | Path = "data") -> Ledger:
    """Your ledger with the reference's runs taken in (a merge: idempotent, a second of work when nothing is
    new), so that what you read puts your runs beside the shipped ones; the reference itself is only read."""
    ref = reference(data_root)
    if ref.is_file() and (ledger.where.path is None or ledger.where.path.resolve() != ref.resolve()):
        with Ledger(str(ref), readonly=True) as shipped:
            merge(ledger, shipped)
    return ledger


def load(url: str | None = None, data_root: str | Path = "data", study: str | None = None
         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, claims) of a ledger as DataFrames, for a notebook: ``runs, claims = book.load()`` (yours, with the
    shipped runs beside yours, unless ``url`` or ``$PGLAB_LEDGER`` names another)."""
    with Ledger(url, data_root) as ledger:
        if is_yours(url):
            with_reference(ledger, data_root)
        return runs(ledger, study), claims(ledger, study)


def find(ledger: Ledger, run: str) -> str:
    """The run id that ``run`` (a whole id, or its random suffix, or a unique prefix) names; LookupError if none
    or several."""
    found = [r[0] for r in ledger.query("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ? OR run_id LIKE ?",
                                        (run, f"%-{run}", f"{run}%"))]
    if len(found) != 1:
        raise LookupError(f"run {run!r}: {'no run' if not found else f'{len(found)} runs'} in the ledger"
                          + (f" ({', '.join(found[:5])})" if found else ""))
    return found[0]
