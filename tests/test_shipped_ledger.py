"""The shipped (reference) ledger (``data/ledger/reference.sqlite.gz``) is what the repository's DVC remote gives.

Every run the in-repository remote holds is in it, linked by its DVC hash, and its claims are what today's
analysis says of that run: re-analysing one from the remote gives the ledger's rows. When an analysis
changes, ``pglab ledger import-dvc --reanalyse --ledger data/ledger/reference.sqlite.gz`` (about 3 minutes) brings
the ledger up to date.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO
from pglab.ledger import book, rows, shipped
from pglab.ledger.backend import Ledger

LEDGER = REPO / "data" / "ledger" / "reference.sqlite.gz"
REMOTE = REPO / "data" / "dvc-remote"


def test_every_run_of_the_dvc_remote_is_in_the_shipped_ledger() -> None:
    remote: dict[str, set[str]] = {}  # a run of a campaign published twice (another sitting) is in two .dirs
    for h, m in shipped.remote_runs(REMOTE):
        remote.setdefault(m["run_id"], set()).add(h)
    assert len(remote) >= 42
    before = LEDGER.read_bytes()
    with Ledger(LEDGER) as db:  # kept gzipped; reading it never writes it
        held = dict(db.query("SELECT run_id, dvc_hash FROM runs"))
        analysed = {r[0] for r in db.query("SELECT run_id FROM analyses WHERE n_claims > 0")}
    assert LEDGER.read_bytes() == before
    missing = sorted(set(remote) - set(held))
    assert not missing, f"runs of the DVC remote not in the shipped ledger: {missing}"
    wrong = {r: held[r] for r in remote if held[r] not in remote[r]}
    assert not wrong, f"a run's DVC hash in the ledger is not one of its .dirs in the remote: {wrong}"
    assert set(remote) <= analysed, sorted(set(remote) - analysed)


def _claims(ledger: Ledger, run_id: str) -> pd.DataFrame:
    c = book.frame(ledger, "SELECT * FROM claims WHERE run_id = ? ORDER BY claim", (run_id,))
    return c.drop(columns=["run_id"]).reset_index(drop=True)


@pytest.mark.parametrize("study", ["cloud_providers", "logical_replication"])
def test_the_ledger_claims_are_todays_analysis_of_the_remote_run(study: str, tmp_path: Path) -> None:
    """The oldest archived run of the study, taken out of the remote and analysed now, gives the ledger's claims."""
    dir_hash, manifest = next((h, m) for h, m in shipped.remote_runs(REMOTE) if m["study"] == study)
    run = shipped.materialize(REMOTE, dir_hash, tmp_path / manifest["run_id"])
    from pglab.studies import module

    module(study, "analyze").analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data" / "reference")
    now = pd.DataFrame(rows.claims(manifest["run_id"], tmp_path / "derived")).drop(columns=["run_id"])
    now = now.sort_values("claim").reset_index(drop=True)
    with Ledger(f"sqlite:///{LEDGER}") as ledger:
        held = _claims(ledger, manifest["run_id"])
    assert list(held["claim"]) == list(now["claim"])
    for col in now.columns:
        for a, b in zip(held[col], now[col], strict=True):
            same = (a is None or (isinstance(a, float) and math.isnan(a))) and pd.isna(b) or a == b
            assert same, (f"{study} {manifest['run_id']}: the ledger's {col} {a!r} is not today's analysis {b!r}; "
                          "run `pglab ledger import-dvc --reanalyse --ledger data/ledger/reference.sqlite.gz`, "
                          "and commit it")
