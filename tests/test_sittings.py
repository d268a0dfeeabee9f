"""Sittings (pglab.runs.marks.sittings, pglab.analysis.over_runs.decide_sittings, ``pglab collect --add-sitting``):
runs of one boot and stretch of time are one sitting; a verdict across two or more has two levels, and says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, pulled_runs
from pglab.analysis import over_runs
from pglab.analysis.claims import comparison_frame, comparison_row, direction
from pglab.app.collect import joinable, load_params
from pglab.errors import UserError
from pglab.hosts.inventory import Inventory
from pglab.runs import campaign
from pglab.runs.marks import sittings

INV = Inventory()  # the boot is read on the run's host, here the local one

CLAIM = direction("a is faster than b", 1.2)


def manifest(start: str, end: str, boot: str = "boot-one") -> dict:
    return {"start": start, "end": end, "machine": {"before": {"local": {"boot_id": boot}}}}


def test_a_sitting_is_one_boot_without_an_hours_pause() -> None:
    m = {"r1": manifest("2026-12-01T10:00:00+00:00", "2026-12-01T10:03:00+00:00"),
         "r2": manifest("2026-12-01T10:03:30+00:00", "2026-12-01T10:06:00+00:00"),
         "r3": manifest("2026-12-01T11:30:00+00:00", "2026-12-01T11:33:00+00:00"),  # 84 min later
         "r4": manifest("2026-12-01T11:34:00+00:00", "2026-12-01T11:37:00+00:00", boot="boot-two")}
    s = sittings(m)
    assert s["r1"] == s["r2"] != s["r3"] != s["r4"] and len(set(s.values())) == 3
    assert s["r1"].startswith("sitting of 2026-12-01 10:00") and "boot boot-one" in s["r1"]


def frames(values: list[float]) -> dict[str, pd.DataFrame]:
    out = {}
    for i, v in enumerate(values):
        row = comparison_row(CLAIM, [v, v * 1.01], aa=[1.0, 1.0])
        out[f"20261201T0{i:05d}Z-r{i}"] = comparison_frame([row])
    return out


def test_a_verdict_across_two_sittings_is_over_their_means_and_says_so() -> None:
    f = frames([1.50, 1.52, 1.49, 1.51, 1.50, 1.48, 1.47, 1.49, 1.48, 1.47])
    ids = list(f)
    labels = {i: "sitting A" if n < 5 else "sitting B" for n, i in enumerate(ids)}
    row = over_runs.comparison(f, sittings=labels).iloc[0]
    means = [math.exp(sum(math.log(v * 1.005) for v in vs) / 5) for vs in ([1.50, 1.52, 1.49, 1.51, 1.50],
                                                                            [1.48, 1.47, 1.49, 1.48, 1.47])]
    _, lo, hi = over_runs.log_t_interval(means)
    assert row["scope"] == "across 2 sittings" and "two levels" in row["note"] and "sitting A: 5 runs" in row["note"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), abs=2e-3)
    assert row["verdict"] == "held"  # two sittings alike, far from the bound: decided even with 1 degree of freedom
    apart = over_runs.comparison(frames([1.50, 1.52, 1.49, 1.51, 1.50, 1.10, 1.12, 1.11, 1.13, 1.10]),
                                 sittings=dict(zip(list(f), labels.values(), strict=True))).iloc[0]
    assert apart["verdict"] == "not resolvable here"  # each sitting alone would decide; together they disagree
    one = over_runs.comparison({i: f[i] for i in ids[:5]}).iloc[0]
    assert one["scope"] == "this sitting" and f"{over_runs.ONE_SITTING_COVERAGE:.0%}" in one["note"]
    thin = over_runs.comparison(f, sittings={i: ("A" if n < 8 else "B") for n, i in enumerate(ids)}).iloc[0]
    assert thin["verdict"] == "not resolvable here"  # sitting B has 2 runs: fewer than a verdict needs


def published_campaign(root: Path, study: str, profile: str, parameters: dict, end: str) -> Path:
    """A published campaign of one run: the shipped run's manifest with ``parameters`` and ``end``, on this boot."""
    pulled_runs(study)
    dest = root / "raw" / study
    dest.mkdir(parents=True)
    m = json.loads((REPO / "data" / "raw" / study / "manifest.json").read_text())
    m.update(parameters=parameters, end=end)
    m["machine"]["before"]["local"]["boot_id"] = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    (dest / "manifest.json").write_text(json.dumps(m))
    campaign.write(dest, campaign.record_of([{"run_id": m["run_id"], "seed": 1, "status": "complete"}], study,
                                            profile, 1))
    return dest


def test_add_sitting_is_refused_before_anything_starts(tmp_path: Path) -> None:
    study = "synchronous_commit"
    name, p, _ = load_params(study, None, "quick")
    with pytest.raises(UserError, match="holds no synchronous_commit campaign"):
        joinable(tmp_path / "raw" / study, study, name, p, INV)
    dest = published_campaign(tmp_path, study, name, {**p.model_dump(mode="json"), "seed": 7},
                              "2020-01-01T00:00:00+00:00")
    assert joinable(dest, study, name, p, INV) == [campaign.read(dest)["runs"][0]["run_id"]]  # long ago: another
    with pytest.raises(UserError, match="profile smoke"):
        joinable(dest, study, "smoke", p, INV)
    with pytest.raises(UserError, match="differ in blocks"):
        joinable(dest, study, name, p.model_copy(update={"blocks": p.blocks + 1}), INV)
    soon = published_campaign(tmp_path / "b", study, name, p.model_dump(mode="json"),
                              pd.Timestamp.now(tz="UTC").isoformat())
    with pytest.raises(UserError, match="less than an hour ago on this boot"):
        joinable(soon, study, name, p, INV)
