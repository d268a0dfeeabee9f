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

