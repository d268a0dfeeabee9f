"""Every script in bench/ runs at its ``--tiny`` size, so an API change cannot break a benchmark unseen.

A tiny run checks that the script works end to end (servers started and stopped, figures printed); it
says nothing about the goals: ``make bench`` runs the scripts at their real sizes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, pulled_analyses, pulled_runs, workspaces
from pglab.studies import STUDIES

SCRIPTS = sorted(p.name for p in (REPO / "bench").glob("*.py") if p.name not in ("common.py", "tiny.py"))


def test_every_bench_script_is_here() -> None:
    assert {"parse_speed.py", "parse_command.py", "analyze_speed.py", "harness_overhead.py",
            "lag_sampler_overhead.py", "wait_sampler_cost.py", "tsbs_loader.py", "ledger_add.py",
            "raw_size.py", "slo_search.py"} <= set(SCRIPTS)


@pytest.mark.servers
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_tiny_run_prints_its_figures(script: str, tmp_path: Path) -> None:
    before = workspaces()
    extra = []
    if script == "analyze_speed.py":  # it analyzes the shipped run (read only; a fresh clone pulls it first)
        pulled_runs("cloud_providers")
        extra = ["--data-root", str(REPO / "data")]
    elif script == "ledger_add.py":  # it copies the five shipped runs' records (a fresh clone pulls them first)
        pulled_analyses(*STUDIES)
        extra = ["--data-root", str(REPO / "data")]
    elif script == "raw_size.py":  # it sizes the five shipped runs' raw files (read only; thinned in a temp copy)
        pulled_runs(*STUDIES)
        extra = ["--data-root", str(REPO / "data")]
    res = subprocess.run([sys.executable, f"bench/{script}", "--tiny", *extra], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    # exit 1 with its figures printed: a goal not met, which a tiny size under a loaded suite may miss;
    # what must not happen is a crash (a traceback) or any other exit
    assert res.returncode in (0, 1), f"{script} --tiny: exit {res.returncode}\n{res.stderr[-2000:]}"
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert any(ch.isdigit() for ch in res.stdout), f"{script} printed no figure:\n{res.stdout}"
    assert workspaces() == before  # whatever it started, it stopped and removed
