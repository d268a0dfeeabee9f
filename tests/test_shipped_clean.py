"""The shipped runs were measured alone: from a committed tree, on a machine that sat still.

Why: a verdict the project publishes must describe this machine, not an afternoon of it shared with a test suite or
a second sweep; 16 of 18 shipped runs once shared the CPU with a niced process and nothing said so. So every run of
the pipeline's campaigns (data/raw/<study>, what `make repro` reports on) must record a committed tree (no
``+dirty``), and, where it recorded the machine's probes (every run collected since they exist), no start on a busy
machine; a run marked since (``pglab.runs.marks.marks``, today's rule: its machine moved) is shipped only as one the
campaign's verdicts left out. docs/testing.md says how shipped runs are
collected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, pulled_analyses
from pglab.runs import campaign
from pglab.runs.marks import marks
from pglab.studies import STUDIES


def members(study: str) -> list[Path]:
    raw = REPO / "data" / "raw" / study
    return campaign.members(raw) if campaign.read(raw) is not None else [raw]


@pytest.mark.parametrize("study", STUDIES)
def test_every_shipped_run_is_from_a_commit_on_a_machine_that_sat_still(study: str) -> None:
    pulled_analyses(study)
    comparison = pd.read_csv(REPO / "data" / "derived" / study / "comparison.csv")
    left_out = comparison["left_out"].fillna("").astype(str) if "left_out" in comparison else []
    for run in members(study):
        m = json.loads((run / "manifest.json").read_text())
        rev = str(m.get("git_revision") or "")
        assert rev and not rev.endswith("+dirty"), f"{study} run {m['run_id']}: collected from {rev or 'no commit'}"
        machine = m.get("machine") or {}
        assert not machine.get("busy_at_start"), f"{study} run {m['run_id']}: busy at its start"
        if marks(m):  # a run the machine moved under decides nothing: the campaign's verdicts left it out
            assert m["run_id"] in " ".join(left_out), f"{study} run {m['run_id']} is marked but counted: {marks(m)}"


def test_the_check_catches_a_busy_or_dirty_record() -> None:
    """The rule the test above applies, on records that break it."""
    probe = {"cpu_loop_ms": 40.0, "flush_ops_s": 5000.0, "boot_id": "a"}
    busy = {"machine": {"before": {"local": probe}, "after": {"local": probe},
                        "busy_at_start": ["host local: other processes took 40% of the CPU (at most 10%)"]}}
    rebooted = {"machine": {"before": {"local": probe}, "after": {"local": {**probe, "boot_id": "b"}}}}
    assert marks(busy) and "rebooted" in marks(rebooted)[0]


MAJORS = [s for s in STUDIES if (REPO / "data" / "majors" / f"{s}.csv").exists()]


def majors_problems(study: str) -> list[str]:
    """What breaks the rule in the runs of ``study``'s shipped majors table, read from the in-repository remote where
    `dvc push` put them: a dirty tree, no probe before (where the run records the machine at all), a busy start, a
    point measured twice beside another load, or a major whose runs the remote lacks."""
    import yaml
    from pglab.ledger import shipped

    hashes = {int(p.stem.removeprefix("pg")): yaml.safe_load(p.read_text())["outs"][0]["md5"]
              for p in sorted((REPO / "data" / "majors" / study).glob("pg*.dvc"))}
    found: dict[int, list[dict]] = {}
    for member, m in shipped.remote_runs(REPO / "data" / "dvc-remote", skip=lambda _: None):
        for major, top in hashes.items():
            if member.partition("#")[0] == top:
                found.setdefault(major, []).append(m)
    out = [f"{study} on PostgreSQL {major}: its runs are not in data/dvc-remote" for major in hashes
           if major not in found]
    for major, runs in found.items():
        for m in runs:
            rev, machine = str(m.get("git_revision") or ""), m.get("machine") or {}
            where = f"{study} on PostgreSQL {major}, run {m['run_id']}"
            broken = {"collected from " + (rev or "no commit"): not rev or rev.endswith("+dirty"),
                      "the machine was not probed before it ran": bool(machine) and not machine.get("before"),
                      "busy at its start": bool(machine.get("busy_at_start")),
                      "points measured beside another load": bool(machine.get("busy_points"))}
            out += [f"{where}: {what}" for what, yes in broken.items() if yes]
    return out


@pytest.mark.parametrize("study", MAJORS)
def test_every_shipped_majors_run_is_from_a_commit_on_a_machine_that_sat_still(study: str) -> None:
    """The claims x majors tables (data/majors/<study>.csv, docs/majors.md) rest on runs of their own: each one, read
    from the in-repository remote where `dvc push` put it, was collected from a commit, with the machine probed
    before it started (where it records the machine at all) and not busy then, and no point of it measured twice
    beside another load."""
    assert not majors_problems(study)
