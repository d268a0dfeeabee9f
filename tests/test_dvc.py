"""The DVC pipeline in a throwaway copy of the checkout, with the smoke profile.

repro runs collect then analyze; a second repro does nothing; a change in one study's analysis code
re-runs only that study's analyze and gives byte-identical tables and figures; `dvc exp run -S` works
and `dvc exp show` lists it; and no documented workflow (dvc repro, exp run, exp apply, checkout,
git checkout) loses a run that `pglab collect` wrote by hand.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml
from conftest import REPO
from pglab.studies import STUDIES

pytestmark = pytest.mark.servers
BIN = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"
SMALLER = {"synchronous_commit": {"levels": ["on", "off"], "clients": [2], "seconds": 2, "blocks": 1,
                                  "standby_read_blocks": 0, "fsync_test_seconds": 0},
           "logical_replication": {"systems": ["streaming", "builtin"], "clients": [2], "run_seconds": 2},
           "fdw_overhead": {"targets": ["local", "FDW_local"], "rw_clients": [1], "ro_clients": [], "blocks": 1,
                            "round_trip_transactions": 10},
           "streaming_scale_out": {"modes": ["none", "sync_apply"], "standbys": 1, "read_nodes": [1, 2],
                                   "query_types": ["lastpoint"], "devices": 10},
           "cloud_providers": {"blocks": 1, "seconds": 2, "sysbench_seconds": 2, "sysbench_tables": 1,
                               "sysbench_table_size": 200, "wait_sample_ms": 0}}


def sh(cwd: Path, *args: str, timeout: float = 600) -> str:
    env = {**{k: v for k, v in os.environ.items() if k != "PGLAB_WITH_MARKED"},  # the pipeline as it ships
           "PATH": f"{BIN}:{os.environ['PATH']}", "PYTHONPATH": str(cwd / "lib"),
           "GIT_AUTHOR_NAME": "pglab-test", "GIT_AUTHOR_EMAIL": "test@localhost",
           "GIT_COMMITTER_NAME": "pglab-test", "GIT_COMMITTER_EMAIL": "test@localhost"}
    res = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{args}: {res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr


def digests(root: Path, *globs: str) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for g in globs for p in sorted(root.glob(g)) if p.is_file()}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_checkout(tmp_path_factory.mktemp("checkout"))


def copy_checkout(dst: Path) -> Path:
    """The work tree (no runs, no lock) in a new git repository, every profile at SMALLER's size."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if f.startswith("data/majors/") and f.count("/") == 3:  # the majors' shipped runs (.dvc): not these tests'
            continue
        if (REPO / f).is_file() and not f.startswith(("data/raw", "data/runs", "data/interactive", "data/dvc-remote")):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dst / f)
    for lock in ("dvc.lock",):
        (dst / lock).unlink(missing_ok=True)
    for study in STUDIES:  # smoke, made smaller still: these tests are about DVC, not the studies
        params = dst / f"params/{study}.yaml"
        data = yaml.safe_load(params.read_text())
        data["profile"] = "smoke"
        data["profiles"]["smoke"].update(SMALLER[study])
        params.write_text(yaml.safe_dump(data, sort_keys=False))
    sh(dst, "python", "-m", "pglab.app.pipeline")  # collect stages track the active profile's keys: now smoke's
    sh(dst, "git", "init", "-q")
    sh(dst, "git", "add", "-A")
    sh(dst, "git", "commit", "-qm", "copy")
    return dst


def same_outputs(root: Path, before: dict[str, str], saved: Path) -> bool:
    """``outputs(root) == before``; if not, an assertion that shows how each executed notebook differs from
    its copy in ``saved`` (made by ``keep``)."""
    now = outputs(root)
    if now == before:
        return True
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    diffs = []
    for k in changed:
        old = saved / k
        if k.endswith(".ipynb") and old.exists() and (root / k).exists():
            diffs += list(difflib.unified_diff(old.read_text().splitlines(), (root / k).read_text().splitlines(),
                                               k, k, n=2, lineterm=""))[:60]
    raise AssertionError(f"changed: {changed}\n" + "\n".join(diffs))


def keep(root: Path, saved: Path) -> None:
    """A copy of the executed notebooks, for ``same_outputs`` to show a difference."""
    for nb in root.glob("reports/*.ipynb"):
        (saved / "reports").mkdir(parents=True, exist_ok=True)
        shutil.copy2(nb, saved / "reports" / nb.name)


def outputs(checkout: Path) -> dict[str, str]:
    return digests(checkout, *(f"figures/{s}/*" for s in STUDIES), *(f"data/derived/{s}/*.csv" for s in STUDIES),
                   "reports/*.html", "reports/*.ipynb")


@pytest.mark.slow
def test_repro_twice_then_analysis_change(checkout: Path) -> None:
    out = sh(checkout, "dvc", "repro", timeout=1200)
    for study in STUDIES:
        assert f"collect@{study}" in out and f"analyze@{study}" in out
    figs = outputs(checkout)
    saved = checkout.parent / "saved"
    keep(checkout, saved)
    assert any(k.endswith("synchronous_commit/tps_by_clients.png") for k in figs)
    assert any(k.endswith("logical_replication/sustainable_tps.png") for k in figs)
    runs = {s: sorted((checkout / f"data/runs/{s}").iterdir()) for s in STUDIES}
    assert all(len(r) == 1 for r in runs.values())
    for study in STUDIES:  # the pipeline's copy is the archived run
        published = json.loads((checkout / f"data/raw/{study}/manifest.json").read_text())
        assert [published["run_id"]] == [r.name for r in runs[study]]

    out = sh(checkout, "dvc", "repro")
    assert "Running stage" not in out  # nothing changed, nothing runs

    # one study's analysis code changes: its analyze stage alone runs again, and gives the same bytes
    # (every study's analysis is shown deterministic by the fresh-clone test below)
    analyze = checkout / "lib/pglab/studies/synchronous_commit/analyze.py"
    analyze.write_text(analyze.read_text() + "\n# a change in analysis code\n")
    out = sh(checkout, "dvc", "repro")
    assert out.count("Running stage") == 1 and "Running stage 'analyze@synchronous_commit'" in out, out
    for study in STUDIES:
        assert sorted((checkout / f"data/runs/{study}").iterdir()) == runs[study]  # no new measurement
    assert same_outputs(checkout, figs, saved)

    shown = sh(checkout, "dvc", "metrics", "show")
    assert "data/metrics/synchronous_commit.json" in shown and "not_held" in shown
    assert max(len(line) for line in shown.splitlines()) <= 120


def archive(checkout: Path) -> dict[str, str]:
    """Every archived run of synchronous_commit with a digest of all its files."""
    root = checkout / "data/runs/synchronous_commit"
    return {run.name: hashlib.sha256(b"".join(p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()))
            .hexdigest() for run in sorted(root.iterdir())}


def kept(before: dict[str, str], after: dict[str, str]) -> bool:
    return all(after.get(k) == v for k, v in before.items())


def test_no_workflow_loses_a_manual_run(checkout: Path) -> None:
    """On the module's checkout: after the test above its pipeline has run, so this repro has nothing to do
    (run alone, it runs the whole pipeline first)."""
    sh(checkout, "dvc", "repro", timeout=1200)
    sh(checkout, "git", "add", "-A")
    sh(checkout, "git", "commit", "-qm", "after repro")
    locked = json.loads((checkout / "data/raw/synchronous_commit/manifest.json").read_text())["run_id"]
    sh(checkout, "pglab", "collect", "synchronous_commit", "--profile", "smoke", "--quiet")
    runs = archive(checkout)
    manual = max(runs)
    assert len(runs) == 2 and manual != locked

    sh(checkout, "dvc", "checkout", "--force")  # restores the locked run as the pipeline's copy ...
    assert json.loads((checkout / "data/raw/synchronous_commit/manifest.json").read_text())["run_id"] == locked
    assert kept(runs, archive(checkout))  # ... and the manual run is still archived, byte for byte

    sh(checkout, "git", "checkout", "-q", "HEAD~1")
    sh(checkout, "git", "checkout", "-q", "-")
    sh(checkout, "dvc", "checkout", "--force")
    assert kept(runs, archive(checkout))

    out = sh(checkout, "dvc", "repro", "analyze@synchronous_commit")
    assert "Running stage" not in out  # restored to the lock: nothing to do
    assert (checkout / "yours/data/raw/synchronous_commit/manifest.json").exists()  # the first manual run's copy
    # a manual run published into the pipeline's folder (not yours/, pglab collect's default), then adopted
    sh(checkout, "pglab", "collect", "synchronous_commit", "--profile", "smoke", "--quiet", "--publish-root", "data")
    runs = archive(checkout)
    sh(checkout, "dvc", "commit", "-f", "collect@synchronous_commit")  # adopt the manual run (docs/dvc.md)
    out = sh(checkout, "dvc", "repro", "analyze@synchronous_commit")
    assert "Running stage 'analyze@synchronous_commit'" in out and "Running stage 'collect@" not in out
    assert kept(runs, archive(checkout))

    # a parameter the smoke profile does not already have (SMALLER): a real change, so collect runs again
    sh(checkout, "dvc", "exp", "run", "-n", "longer",
       "-S", "params/synchronous_commit.yaml:profiles.smoke.seconds=3")
    table = sh(checkout, "dvc", "exp", "show", "--csv")
    assert "longer" in table and "profiles.smoke.seconds" in table
    after_exp = archive(checkout)
    assert kept(runs, after_exp) and len(after_exp) == len(runs) + 1  # the experiment measured once more
    sh(checkout, "dvc", "exp", "apply", "longer")
    assert kept(after_exp, archive(checkout))
    sh(checkout, "git", "checkout", "-q", "--", ".")
    sh(checkout, "dvc", "checkout", "--force")
    assert kept(after_exp, archive(checkout))


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of the committed checkout with the shipped runs pulled (offline, the remote is in the repo)."""
    clone = tmp_path_factory.mktemp("pulled") / "clone"
    sh(clone.parent, "git", "clone", "-q", str(REPO), str(clone))
    sh(clone, "dvc", "pull", "-q")
    # every test of the clone starts here: the shipped runs up to date with the committed code (each edit
    # below is undone by its test, so this holds for the next one too)
    assert changed_stages(clone) == {}, "the shipped runs are not up to date with the committed code"
    return clone


def changed_stages(clone: Path) -> dict[str, list[str]]:
    """``dvc status``: each stage whose deps or params changed, with the paths that changed."""
    out = json.loads(sh(clone, "dvc", "status", "--json"))
    stages: dict[str, list[str]] = {}
    for stage, changes in out.items():
        for change in changes:
            if isinstance(change, dict):
                for path in {**change.get("changed deps", {}), **change.get("changed params", {})}:
                    stages.setdefault(stage, []).append(path)
    return stages


# (what is edited, the stages that must then be out of date); `{s}` is every study
EDITS = [
    # the first looks of synchronous_commit, fdw_overhead and logical_replication read each point's raw output
    # (pglab.workloads.adaptive)
    ("lib/pglab/parsers/pgbench.py", {"analyze@{s}", "collect@synchronous_commit", "collect@fdw_overhead",
                                      "collect@logical_replication"}),
    ("lib/pglab/studies/logical_replication/claims.py", {"analyze@logical_replication",
                                                         "collect@logical_replication"}),
    ("lib/pglab/studies/fdw_overhead/claims.py", {"analyze@fdw_overhead", "collect@fdw_overhead"}),
    ("lib/pglab/hosts/lab/__init__.py", set()),  # the lab: only `pglab lab` and tests run it
    ("lib/pglab/analysis/figures.py", {"analyze@{s}", "history"}),  # the history page draws with its style
    ("lib/pglab/studies/synchronous_commit/figures.py", {"analyze@synchronous_commit"}),
    ("lib/pglab/app/cli.py", set()),
    ("notebooks/fdw_overhead.ipynb", {"analyze@fdw_overhead"}),
    ("lib/pglab/studies/cloud_providers/collect.py", {"collect@cloud_providers"}),
    ("lib/pglab/replication/slony.py", {"collect@logical_replication"}),
    ("lib/pglab/workloads/pgbench.py", {"collect@{s}"}),
    ("params/synchronous_commit.yaml", {"collect@synchronous_commit"}),
    # a collect stage tracks only the active profile of its params file: another profile's edit re-measures nothing
    ("params/synchronous_commit.yaml:paper", set()),
    ("params/cloud_providers.yaml:smoke", set()),
]


@pytest.mark.parametrize(("edited", "expected"), EDITS, ids=[e[0].rsplit("/", 1)[-1] for e in EDITS])
def test_an_edit_reruns_only_the_stages_that_run_it(pulled: Path, edited: str, expected: set[str]) -> None:
    edited, _, profile = edited.partition(":")
    path = pulled / edited
    original = path.read_bytes()
    try:
        if path.suffix == ".yaml":  # a real parameter change of the profile dvc repro runs (or the one named)
            edit_profile(path, profile)
        elif path.suffix == ".ipynb":
            nb = json.loads(original)
            nb["cells"].append({"cell_type": "markdown", "id": "edit", "metadata": {}, "source": ["an edit"]})
            path.write_text(json.dumps(nb, indent=1) + "\n")
        else:
            path.write_bytes(original + b"\n# an edit\n")
        want = {e.format(s=s) for e in expected for s in STUDIES}
        got = changed_stages(pulled)
        assert set(got) == want, f"editing {edited} changed {sorted(got)}, expected {sorted(want)}"
    finally:
        path.write_bytes(original)


def edit_profile(path: Path, profile: str = "") -> None:
    """A real change of one value of ``profile`` (default: the one the file makes active)."""
    data = yaml.safe_load(path.read_text())
    values = data["profiles"][profile or data["profile"]]
    key = "seconds" if "seconds" in values else "blocks"
    values[key] = values[key] + 1
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_an_edit_to_another_profile_re_measures_nothing(tmp_path: Path) -> None:
    """The collect stages' params as dvc.yaml writes them, in a scratch DVC project whose commands only make their
    output: after a repro, an edit to any profile but the active one leaves every stage up to date; an edit to the
    active one, or a switch of profile, makes its study's collect stage (and only that) out of date."""
    shutil.copytree(REPO / "params", tmp_path / "params")
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["collect"]
    do = {k: v for k, v in spec["do"].items() if k != "deps"}  # the params and the output, not the code
    do["cmd"] = "mkdir -p data/raw/${key} && echo ${key} > data/raw/${key}/run"
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"collect": {**spec, "do": do}}}, sort_keys=False))
    sh(tmp_path, "git", "init", "-q")
    sh(tmp_path, "dvc", "init", "-q")
    sh(tmp_path, "dvc", "repro", "-q")
    assert changed_stages(tmp_path) == {}
    for study in STUDIES:
        data = yaml.safe_load((tmp_path / f"params/{study}.yaml").read_text())
        for profile in data["profiles"]:
            if profile != data["profile"]:
                edit_profile(tmp_path / f"params/{study}.yaml", profile)
    assert changed_stages(tmp_path) == {}, "an edit to a profile dvc repro does not run re-measures"
    edit_profile(tmp_path / "params/fdw_overhead.yaml")
    assert changed_stages(tmp_path) == {"collect@fdw_overhead": ["params/fdw_overhead.yaml"]}
    path = tmp_path / "params/synchronous_commit.yaml"
    path.write_text(path.read_text().replace("profile: quick", "profile: paper", 1))
    assert set(changed_stages(tmp_path)) == {"collect@fdw_overhead", "collect@synchronous_commit"}


@pytest.mark.slow
def test_a_fresh_clone_regenerates_every_figure_from_the_shipped_runs(pulled: Path, tmp_path: Path) -> None:
    """`dvc pull` from the remote inside the repository, offline; then nothing is measured again."""
    clone = pulled
    status = sh(clone, "dvc", "status")
    assert "changed" not in status and "modified" not in status, status
    shipped = outputs(clone)
    keep(clone, tmp_path)
    assert any(k.startswith("figures/logical_replication/") for k in shipped)
    assert {f"reports/{s}.{x}" for s in STUDIES for x in ("html", "ipynb")} | {"reports/index.html"} <= set(shipped)
    for study in STUDIES:
        shutil.rmtree(clone / "figures" / study)
    (clone / "reports" / "index.html").unlink()
    out = sh(clone, "dvc", "repro", timeout=900)
    for study in STUDIES:
        assert f"Running stage 'analyze@{study}'" in out and f"Running stage 'collect@{study}'" not in out
    assert same_outputs(clone, shipped, tmp_path)  # tables, figures, executed notebooks, reports byte-identical
    sh(clone, "python", "-m", "pglab.views.report", "--index")  # dvc restores the index from its cache: made anew
    assert same_outputs(clone, shipped, tmp_path)
    assert "Running stage" not in sh(clone, "dvc", "repro")
    sh(clone, "dvc", "metrics", "diff")
    sh(clone, "dvc", "plots", "diff", "-o", str(tmp_path / "plots"))
    assert (tmp_path / "plots" / "index.html").exists()


def test_dvc_plots_show_every_figure_and_renders_offline(pulled: Path, tmp_path: Path) -> None:
    """The page `dvc plots show` writes (.dvc/plots/offline.html, vega inlined) draws both vega plots with every
    host blocked, and lists every figure every study draws."""
    from browser import open_page

    spec = yaml.safe_load((pulled / "dvc.yaml").read_text())["plots"]
    listed = {p for p in spec if isinstance(p, str)}
    assert listed == {str(p.relative_to(pulled)) for p in pulled.glob("figures/*/*.png")}
    sh(pulled, "dvc", "plots", "show", "-o", str(tmp_path / "plots"))
    page = open_page(tmp_path / "plots" / "index.html", tmp_path)
    assert [u for u in page.requests if not u.startswith(("file:", "data:"))] == []
    assert "cdn.jsdelivr.net" not in (tmp_path / "plots" / "index.html").read_text()
    vega = [p for p in spec if isinstance(p, dict)]
    assert page.dom.count("<canvas") == len(vega) == 2  # drawn by vega-embed, offline
    spec_text = (tmp_path / "plots" / "index.html").read_text()
    for name in ("built-in logical", "Slony-I", "Londiste 3"):  # the reports' names of the systems
        assert name in spec_text, name
    assert page.dom.count("<img") >= len(listed)


def test_every_shipped_report_opens_offline_with_its_verdicts_first(pulled: Path, tmp_path: Path) -> None:
    """`dvc pull` on a fresh clone, then each report and the index in headless Chromium with every host
    blocked: no request leaves the page, the verdict table comes first and says what comparison.csv says."""
    from browser import open_page

    for study in STUDIES:
        page = open_page(pulled / "reports" / f"{study}.html", tmp_path)
        assert [u for u in page.requests if not u.startswith(("file:", "data:"))] == [], study
        first = page.dom.index("<table")
        assert page.dom.index('id="verdicts"') < first < page.dom.index('id="figures"'), study
        table = page.dom[first:page.dom.index("</table>", first)]
        rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S) for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
        shown = [re.sub(r"<[^>]+>", "", row[4]) for row in rows if row]
        assert shown == list(pd.read_csv(pulled / f"data/derived/{study}/comparison.csv").verdict), study
        majors = (pulled / "data/majors" / f"{study}.csv").exists()  # its claims x majors figure (docs/majors.md)
        assert page.dom.count("<img ") == len(list((pulled / "figures" / study).glob("*.png"))) + majors, study
        assert ('id="majors"' in page.dom) == majors, study
        assert (page.dom.index('id="figures"') < page.dom.index('id="details"')
                < page.dom.index("Parameters (papermill)")), study
        pixels = plt.imread(page.screenshot)
        assert pixels.shape[0] > 1000 and pixels.std() > 0.05, f"{study}: a blank screenshot"
    index = open_page(pulled / "reports" / "index.html", tmp_path)
    assert [u for u in index.requests if not u.startswith("file:")] == []
    for study in STUDIES:
        run = json.loads((pulled / f"data/raw/{study}/manifest.json").read_text())["run_id"]
        assert f'href="{study}.html"' in index.dom and run in index.dom, study


def test_every_shipped_verdict_follows_its_stated_rule_and_the_docs_show_it(pulled: Path) -> None:
    """What a reader does to trust a verdict without pglab's code: recompute it from comparison.csv's own
    columns (tests/verdicts.py); and each study's docs page shows exactly those verdicts (generated)."""
    from pglab.views import docs_verdicts
    from verdicts import mismatches

    for study in STUDIES:
        comparison = pd.read_csv(pulled / f"data/derived/{study}/comparison.csv")
        assert len(comparison) and mismatches(comparison) == [], study
        assert comparison.rule.notna().all() and comparison.depends_on.notna().all(), study
    assert docs_verdicts.stale(pulled) == []
    page = (pulled / "docs" / "synchronous_commit.md").read_text()
    run = json.loads((pulled / "data/raw/synchronous_commit/manifest.json").read_text())["run_id"]
    assert f"`{run}`" in page  # the run, or the last of the campaign's runs the page lists
    # and the check could fail: a page showing another verdict is stale
    text = (pulled / "docs" / "fdw_overhead.md").read_text()
    shown = re.search(r"\*\*: \*([a-z ]+)\*\.", text)  # the first verdict, whichever the shipped run gave
    assert shown, "docs/fdw_overhead.md shows no verdict"
    other = "held" if shown.group(1) != "held" else "did not hold"
    (pulled / "docs" / "fdw_overhead.md").write_text(text.replace(shown.group(0), f"**: *{other}*.", 1))
    try:
        assert docs_verdicts.stale(pulled) == ["docs/fdw_overhead.md"]
    finally:
        sh(pulled, "git", "checkout", "--", "docs/fdw_overhead.md")
