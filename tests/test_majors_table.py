"""A study's claims x PostgreSQL majors (pglab.views.majors_table): read from each major's analysed run, drawn into
the study report, shipped as data/majors/<study>.csv beside the runs it rests on (no servers: the shipped runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO
from pglab.app import majors
from pglab.errors import UserError
from pglab.hosts import builds
from pglab.ledger import shipped
from pglab.views import majors_table, report, report_notebook

SHIPPED = ("fdw_overhead", "synchronous_commit")  # issue 37: at least these two, on all six majors


def _fake_majors(root: Path, study: str, majors_: tuple[int, ...]) -> pd.DataFrame:
    """The shipped run of ``study`` laid out as `pglab majors` lays out its runs, once per major, with the major's
    build recorded in its manifest and its comparison's first value scaled (so the majors differ)."""
    raw, derived = REPO / "data/raw" / study, REPO / "data/derived" / study
    if not (raw / "manifest.json").exists():
        pytest.skip("the shipped runs are not checked out (dvc pull)")
    for i, major in enumerate(majors_):
        to = root / f"pg{major}/data"
        (to / "raw" / study).mkdir(parents=True)
        manifest = json.loads((raw / "manifest.json").read_text())
        manifest["postgres_build"] = {"id": f"embedded-{major}", "family": "embedded", "major": major,
                                      "version": builds.resolve(f"embedded-{major}").version}
        (to / "raw" / study / "manifest.json").write_text(json.dumps(manifest))
        c = pd.read_csv(derived / "comparison.csv")
        c.loc[0, ["reproduced", "ci_low", "ci_high"]] *= 1 + i / 10
        (to / "derived" / study).mkdir(parents=True)
        c.to_csv(to / "derived" / study / "comparison.csv", index=False)
    return pd.read_csv(derived / "comparison.csv")


def test_the_matrix_is_each_majors_analysed_run(tmp_path: Path) -> None:
    c = _fake_majors(tmp_path, "fdw_overhead", (13, 18))
    (tmp_path / "pg16/data").mkdir(parents=True)  # a major whose run did not finish: no row, not an error
    m = majors_table.matrix("fdw_overhead", tmp_path)
    assert list(m.major.unique()) == [13, 18] and list(m.version.unique()) == ["13.23", "18.4"]
    assert len(m) == 2 * len(c) and list(m[m.major == 13].claim) == list(c.claim)
    first = m[m.claim == c.claim[0]].set_index("major")
    assert first.reproduced[18] == pytest.approx(c.reproduced[0] * 1.1)
    assert first.low[18] <= first.reproduced[18] <= first.high[18]
    set_aside = m[m.verdict.str.startswith("not measurable")]
    assert set_aside.why.notna().all() and m[m.verdict == "held"].why.isna().all()


def test_the_section_a_row_per_claim_a_column_per_major_and_the_figure(tmp_path: Path) -> None:
    _fake_majors(tmp_path, "fdw_overhead", (13, 15, 18))
    m = majors_table.matrix("fdw_overhead", tmp_path)
    m = m[~((m.major == 15) & (m.claim == m.claim.iloc[0]))]  # a claim a major has no row for
    section = majors_table.section_html("fdw_overhead", m)
    assert "<th>claim</th><th>13 (13.23)</th><th>15 (15.18)</th><th>18 (18.4)</th></tr></thead>" in section
    assert section.count("<tr><th>") == m.claim.nunique() + 1 and "<td>not run</td>" in section
    for verdict, cls in (("held", "held"), ("did not hold", "not"), ("not measurable here", "na")):
        assert (f'class="{cls}"><b>{verdict}</b>' in section) == (m.verdict == verdict).any()
    assert ("data:image/png;base64," in section) == m.reproduced.notna().any()
    assert report_notebook.clean_html(section).count("<td") == section.count("<td")  # nothing the report strips


def test_a_table_read_back_and_a_file_that_is_not_one(tmp_path: Path) -> None:
    _fake_majors(tmp_path, "fdw_overhead", (13, 14))
    m = majors_table.matrix("fdw_overhead", tmp_path)
    m.to_csv(tmp_path / "t.csv", index=False)
    back = majors_table.read(tmp_path / "t.csv")
    assert back is not None and list(back.version.unique()) == ["13.23", "14.23"]
    assert majors_table.read(tmp_path / "none.csv") is None
    m.drop(columns=["verdict"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="not a claims x majors table \\(no verdict\\)"):
        majors_table.read(tmp_path / "bad.csv")


def test_shipping_copies_each_run_and_never_overwrites_one(tmp_path: Path) -> None:
    study = "fdw_overhead"
    _fake_majors(tmp_path / "yours", study, (13, 18))
    m = majors_table.matrix(study, tmp_path / "yours")
    dest = tmp_path / "data/majors"
    dest.mkdir(parents=True)
    shipped_to = majors.ship(study, m, tmp_path / "yours", dest)
    assert shipped_to == [dest / study / "pg13", dest / study / "pg18"]
    assert json.loads((dest / study / "pg18/manifest.json").read_text())["postgres_build"]["major"] == 18
    assert majors_table.read(dest / f"{study}.csv") is not None
    (dest / study / "pg13.dvc").write_text("outs: []\n")
    shutil.rmtree(dest / study / "pg13")  # shipped: the folder is DVC's, the .dvc file in git says so
    with pytest.raises(UserError, match="fdw_overhead/pg13, .*pg18 already shipped"):
        majors.ship(study, m, tmp_path / "yours", dest)


@pytest.mark.parametrize("study", SHIPPED)
def test_the_shipped_matrix_rests_on_shipped_runs_of_every_major(study: str) -> None:
    """data/majors/<study>.csv: the six majors, each at its catalogue version, each run a DVC-tracked folder whose
    contents the in-repository remote holds (so the reference ledger has it: tests/test_shipped_ledger.py)."""
    m = majors_table.read(REPO / "data/majors" / f"{study}.csv")
    assert m is not None, f"no shipped claims x majors table for {study}"
    assert sorted(set(m.major)) == list(majors_table.MAJORS)
    assert {int(k): v for k, v in m.groupby("major").version.first().items()} == \
        {k: builds.resolve(f"embedded-{k}").version for k in majors_table.MAJORS}
    in_remote = {meta["run_id"] for _, meta in shipped.remote_runs(REPO / "data/dvc-remote")}
    for major, run_id in m.groupby("major").run.first().items():
        tracked = yaml.safe_load((REPO / "data/majors" / study / f"pg{major}.dvc").read_text())
        assert tracked["outs"][0]["path"] == f"pg{major}" and tracked["outs"][0]["md5"].endswith(".dir")
        assert run_id in in_remote, f"{study} on {major}: run {run_id} is not in data/dvc-remote (dvc push)"
    assert m.claim.nunique() == len(pd.read_csv(REPO / "data/derived" / study / "comparison.csv"))


def test_the_study_report_shows_its_majors(tmp_path: Path) -> None:
    """write_study draws the table of data/majors/<study>.csv under the verdicts, and nothing without one."""
    study = "fdw_overhead"
    if not (REPO / "reports" / f"{study}.ipynb").exists():
        pytest.skip("the shipped reports are not checked out (dvc pull)")
    for part in ("reports", "data/derived", "data/raw"):
        shutil.copytree(REPO / part / ("" if part == "reports" else study),
                        tmp_path / part / ("" if part == "reports" else study))
    without = report.write_study(study, tmp_path).read_text()
    assert 'id="majors"' not in without
    _fake_majors(tmp_path / "runs", study, (13, 17))
    (tmp_path / "data/majors").mkdir()
    majors_table.matrix(study, tmp_path / "runs").to_csv(tmp_path / "data/majors" / f"{study}.csv", index=False)
    page = report.write_study(study, tmp_path).read_text()
    assert page.index('id="verdicts"') < page.index('id="majors"') < page.index('id="where"')
    assert "<th>13 (13.23)</th><th>17 (17.10)</th>" in page
    start = page.index('<h2 id="majors"')  # the section runs to the next heading (the fidelity table's, or where)
    assert page.replace(page[start:page.index("<h2 ", start + 1)], "") == without
    index = report.index_html(tmp_path)  # and the index links it
    assert f'<a href="{study}.html#majors">on PostgreSQL 13-17</a>' in index
    (tmp_path / "data/majors" / f"{study}.csv").unlink()
    assert "#majors" not in report.index_html(tmp_path)


def test_the_docs_page_gets_the_table_in_its_generated_block(tmp_path: Path) -> None:
    """docs_verdicts writes the claims x majors table into the study page's block; `--check` then sees it."""
    from pglab.views import docs_verdicts

    study = "fdw_overhead"
    if not (REPO / "data/raw" / study / "manifest.json").exists():
        pytest.skip("the shipped runs are not checked out (dvc pull)")
    for part in (f"data/raw/{study}", f"data/derived/{study}"):
        shutil.copytree(REPO / part, tmp_path / part)
    _fake_majors(tmp_path / "runs", study, (13, 18))
    m = majors_table.matrix(study, tmp_path / "runs")
    (tmp_path / "data/majors").mkdir()
    m.to_csv(tmp_path / "data/majors" / f"{study}.csv", index=False)
    lines = docs_verdicts.block(study, tmp_path).splitlines()
    head = lines.index("### Across PostgreSQL majors")
    assert lines[head + 4] == "| claim | 13 (13.23) | 18 (18.4) |" and lines[-1] == docs_verdicts.END
    rows = [ln for ln in lines[head + 6:] if ln.startswith("| ")]
    assert [r.split(" | ")[0][2:] for r in rows] == list(dict.fromkeys(m.claim))
    first = m[m.major == 18].iloc[0]
    assert f"{first.reproduced:.3g} [{first.low:.3g}, {first.high:.3g}]" in rows[0]
