"""logical_replication's first look (``pglab.workloads.adaptive``): blocks of streaming and pglogical alone while
"pglogical is close to streaming up to 8 clients" is open.

The look's decision against the analysis of the shipped run, on made-up blocks, the block it plans, and one
real run that adds a block.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, pulled_runs
from pglab.analysis.effects import AA
from pglab.errors import ParameterError
from pglab.runs.params import validate
from pglab.studies.logical_replication.claims import interim_per_block, open_systems
from pglab.studies.logical_replication.collect import added_block
from pglab.studies.logical_replication.params import Params

SMOKE = yaml.safe_load((REPO / "params/logical_replication.yaml").read_text())["profiles"]["smoke"]
CLAIM = "pglogical is close to streaming up to 8 clients"


def test_the_first_look_reads_what_the_analysis_reads(tmp_path: Path) -> None:
    """On the shipped quick run: pglogical's per-block values are the analysis's, and the look keeps pglogical
    exactly when the analysis leaves the claim open."""
    from pglab.studies.logical_replication import analyze

    pulled_runs("logical_replication")
    run = REPO / "data" / "raw" / "logical_replication"
    table = interim_per_block(run, "streaming")
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data" / "reference")
    row = a.comparison.set_index("claim").loc[CLAIM]
    x = table["pglogical"].dropna()
    assert len(x) == row["blocks"]
    assert round(float(np.median(x)), 4) == pytest.approx(row["reproduced"], abs=1e-4)
    here = row["here_verdict"] or row["verdict"]  # on one machine not judged: the interval's verdict is kept apart
    assert open_systems(table, "streaming") == ({"pglogical"} if here == "not resolvable here" else set())


def _table(pglogical: list[float], aa: list[float] | None = None) -> pd.DataFrame:
    n = len(pglogical)
    return pd.DataFrame({AA: aa or [1.0 + 0.01 * (-1) ** b for b in range(n)], "pglogical": pglogical,
                         "slony": [0.7] * n}, index=pd.Index(range(1, n + 1), name="block"))


def test_the_look_keeps_pglogical_only_while_the_claim_is_open() -> None:
    assert open_systems(_table([0.80, 0.85, 0.90, 0.95, 1.00, 1.05]), "streaming") == {"pglogical"}  # straddles 0.909
    assert open_systems(_table([0.70, 0.72, 0.75, 0.74, 0.71, 0.73]), "streaming") == set()  # did not hold
    assert open_systems(_table([0.98, 1.00, 1.02, 0.99, 1.01, 1.03]), "streaming") == set()  # held
    biased = [1.10, 1.12, 1.15, 1.11, 1.13, 1.14]  # the baseline differs from itself: no verdict, so open
    assert open_systems(_table([0.98, 1.00, 1.02, 0.99, 1.01, 1.03], biased), "streaming") == {"pglogical"}
    assert open_systems(_table([0.98, 1.00]), "streaming") == {"pglogical"}  # two blocks decide nothing
    assert open_systems(_table([0.80, 0.85, 0.90, 0.95, 1.00, 1.05]), "builtin") == set()  # not streaming's claim
    assert open_systems(_table([0.9] * 6).drop(columns="pglogical"), "streaming") == set()  # pglogical not run


def test_an_added_block_has_streaming_twice_and_pglogical_only() -> None:
    p = validate(Params, {**SMOKE, "clients": [1, 8], "blocks": 6, "max_blocks": 10}, "test")
    points = added_block(p, "streaming", 7, {"pglogical"})
    assert {pl.block for pl in points} == {7}
    assert sorted((pl.group.name, pl.config, pl.copy) for pl in points) == sorted(
        (g, c, k) for g in ("c001", "c008") for c, k in (("streaming", 1), ("streaming", 2), ("pglogical", 1)))
    assert [pl.id for pl in points] == [pl.id for pl in added_block(p, "streaming", 7, {"pglogical"})]  # seeded
    with pytest.raises(ParameterError, match="max_blocks=4 is below blocks=6"):
        validate(Params, {**SMOKE, "blocks": 6, "max_blocks": 4}, "test")


@pytest.mark.servers
@pytest.mark.slow
@pytest.mark.xdist_group("adaptive")
def test_a_real_run_adds_a_block_of_streaming_and_pglogical(tmp_path: Path) -> None:
    """One planned block decides nothing (a verdict needs 6), so the look keeps pglogical and adds a block
    without builtin; the analysis counts it for the claim and says why it stopped."""
    from pglab.studies.logical_replication import analyze, collect

    params = {**SMOKE, "systems": ["streaming", "builtin", "pglogical"], "clients": [2], "run_seconds": 2,
              "blocks": 1, "max_blocks": 2, "catchup_timeout_s": 30}
    run = collect.collect(params, data_root=tmp_path / "data", profile="test", progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    record = manifest["plan"]["adaptive"]
    assert record["first_look"] == 1 and record["blocks_added"] == 1 and record["stopped"] == "max_blocks"
    assert record["looks"][0]["open"] == ["pglogical"]
    assert sorted(p.name for p in run.glob("b02-*")) == ["b02-c002-pglogical", "b02-c002-streaming",
                                                          "b02-c002-streaming-aa"]
    assert manifest["points"]["ok"] == manifest["points"]["total"]
    assert all(s.get("closing_check", {}).get("consistent") for s in manifest["systems"].values())
    a = analyze.analyze(run, tmp_path / "derived", tmp_path / "figures", REPO / "data" / "reference")
    row = a.comparison.set_index("claim").loc[CLAIM]
    assert row["blocks"] == 2 and "1 blocks added, then max_blocks reached" in row["stopped"]
    systems = a.systems.set_index("system")
    assert systems.loc["builtin", "points_ok"] == 1 and systems.loc["pglogical", "points_ok"] == 2
