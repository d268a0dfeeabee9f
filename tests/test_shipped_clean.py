"""The shipped runs were measured alone: from a committed tree, on a machine that sat still.

Why: a verdict the project publishes must describe this machine, not an afternoon of it shared with a test suite or
a second sweep; 16 of 18 shipped runs once shared the CPU with a niced process and nothing said so. So every run of
the pipeline's campaigns (data/raw/<study>, what `make repro` reports on) must record a committed tree (no
``+dirty``), and, where it recorded the machine's probes (every run collected since they exist), no start on a busy
machine and no mark (``pglab.runs.marks.marks``, today's rule). docs/testing.md says how shipped runs are
collected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, pulled_runs
from pglab.runs import campaign
from pglab.runs.marks import marks
from pglab.studies import STUDIES


def members(study: str) -> list[Path]:
    raw = REPO / "data" / "raw" / study
    return campaign.members(raw) if campaign.read(raw) is not None else [raw]


@pytest.mark.parametrize("study", STUDIES)
def test_every_shipped_run_is_from_a_commit_on_a_machine_that_sat_still(study: str) -> None:
    pulled_runs(study)
    for run in members(study):
        m = json.loads((run / "manifest.json").read_text())
        rev = str(m.get("git_revision") or "")
        assert rev and not rev.endswith("+dirty"), f"{study} run {m['run_id']}: collected from {rev or 'no commit'}"
        machine = m.get("machine") or {}
        assert not machine.get("busy_at_start"), f"{study} run {m['run_id']}: busy at its start"
        assert marks(m) == [], f"{study} run {m['run_id']} is marked: {marks(m)}"


def test_the_check_catches_a_busy_or_dirty_record() -> None:
    """The rule the test above applies, on records that break it."""
    probe = {"cpu_loop_ms": 40.0, "flush_ops_s": 5000.0, "boot_id": "a"}
    busy = {"machine": {"before": {"local": probe}, "after": {"local": probe},
                        "busy_at_start": ["host local: other processes took 40% of the CPU (at most 10%)"]}}
    rebooted = {"machine": {"before": {"local": probe}, "after": {"local": {**probe, "boot_id": "b"}}}}
    assert marks(busy) and "rebooted" in marks(rebooted)[0]
