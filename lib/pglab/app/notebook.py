"""What a study notebook calls: its variables in, an ``Analysis`` out. Keeps notebooks thin.

A notebook's parameters cell has the run-level keys (``profile``, ``collect``, ``data_root``,
``figures_root``, ``inventory``) and one line per study parameter whose default is ``None``: "the
profile's value". So ``papermill -p profile quick`` runs the quick profile's values, and
``-p repetitions 5`` overrides one value of it. papermill only warns about a name the notebook does
not declare and injects it anyway, so the library refuses every name it does not know, naming the
nearest known one, before anything starts.

Collecting is ``pglab.app.notebook_collect``, which a notebook imports only when it measures
(``collecting``): this module reads runs and never touches a host, so the analyze stages do not depend on the
host layer.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pglab.analysis import placement
from pglab.analysis.text import escape_text
from pglab.app import campaign
from pglab.app.paths import repo_root
from pglab.errors import ParameterError, PglabError, UserError, first_line
from pglab.runs.params import profile_values, validate
from pglab.runs.reading import analysis_run, archive_dir, load_manifest, pipeline_dir
from pglab.studies import module

# The run-level parameters every study notebook declares (besides the study's own).
RUN_KEYS = ("profile", "collect", "data_root", "figures_root", "inventory")
# Where a notebook run as stored keeps its data: inside the checkout, ignored by git and DVC.
INTERACTIVE_ROOT = "data/interactive"
# A data root whose runs (raw/<study>) a notebook run as stored analyzes instead of collecting: `make test`
# sets it for nbval, which then checks every notebook against the shipped runs in seconds.
ANALYZE_ONLY_ENV = "PGLAB_NOTEBOOK_RUNS"
#: study -> the run ``notebook_collect.collect`` published in this process, for ``run`` to analyze
COLLECTED: dict[str, Path] = {}


def _one_message(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
    """pglab's own errors say everything in their message: in a notebook (and in papermill's error) they
    show as that message alone, not below a traceback through the library."""
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def _short_errors_in_ipython() -> None:
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is not None and PglabError not in getattr(shell, "custom_exceptions", ()):
        shell.set_custom_exc((PglabError,), _one_message)


_short_errors_in_ipython()

def _tables_as_html() -> None:
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is not None:
        import pandas as pd

        from pglab.views.frames import frame_html

        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)


_tables_as_html()


def resolve(path: str | Path, root: Path) -> Path:
    """A path from the notebook's parameters: as given when absolute, else under the checkout ``root``."""
    p = Path(path)
    return p if p.is_absolute() else root / p


def _analyze_only(namespace: dict[str, Any]) -> dict[str, Any]:
    """The namespace as run: a notebook run as stored under ``ANALYZE_ONLY_ENV`` (nbval) analyzes that data root's
    runs instead of collecting."""
    runs_root = os.environ.get(ANALYZE_ONLY_ENV, "").strip()
    if runs_root and not namespace.get("data_root"):
        return {**namespace, "collect": False, "data_root": runs_root}
    return namespace


def data_folder(namespace: dict[str, Any], root: Path) -> Path:
    """Where the notebook's runs are: ``data_root``, else ``INTERACTIVE_ROOT`` in the checkout."""
    return resolve(_analyze_only(namespace).get("data_root") or INTERACTIVE_ROOT, root)


def collecting(study: str, namespace: dict[str, Any]) -> bool:
    """Whether the notebook measures now: ``collect`` (default True) and no analyze-only data root
    (``ANALYZE_ONLY_ENV``). The study's parameters are validated first: a bad name or value is refused before
    anything is imported for collecting."""
    parameters(study, namespace)
    return _collects(namespace)


def _collects(namespace: dict[str, Any]) -> bool:
    return bool(_analyze_only(namespace).get("collect", True))


def _user_names(namespace: dict[str, Any]) -> set[str]:
    """Names the user (or papermill's injected cell) assigned: not IPython's own, not imports or functions."""
    hidden: set[str] = set()
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        shell = ipython.get_ipython()
        if shell is not None:
            hidden = set(shell.user_ns_hidden)
    return {k for k, v in namespace.items()
            if not k.startswith("_") and k not in hidden
            and not isinstance(v, (types.ModuleType, type)) and not callable(v)}


def _is_container(annotation: Any) -> bool:
    """True for list / dict / nested-model fields: values papermill's ``-p`` cannot express."""
    for t in (annotation, *typing.get_args(annotation)):
        origin = typing.get_origin(t) or t
        if origin in (list, dict, tuple) or (isinstance(origin, type) and hasattr(origin, "model_fields")):
            return True
    return False


def parameters(study: str, namespace: dict[str, Any], root: Path | None = None
               ) -> tuple[str, dict[str, Any], dict[str, Any], str | None]:
    """(profile name, the values to run, the overridden ones, the inventory the params file names).

    Raises ParameterError for a name the notebook does not know, a profile the params file does not
    have, or a list given as text (``papermill -p``).
    """
    root = root or repo_root()
    fields = module(study, "params").Params.model_fields
    known = set(fields) | set(RUN_KEYS)
    problems = []
    for name in sorted(_user_names(namespace) - known):
        near = difflib.get_close_matches(name, sorted(known), n=1)
        problems.append(f"{name}: unknown parameter" + (f" (did you mean {near[0]!r}?)" if near else "")
                        + f"; known: {', '.join(sorted(known))}")
    overrides = {k: namespace[k] for k in fields if namespace.get(k) is not None}
    for name, value in overrides.items():
        if isinstance(value, str) and _is_container(fields[name].annotation):
            problems.append(f"{name}: got the text {value!r}; papermill's -p passes text, so give lists and "
                            f"dicts with -y, e.g. -y '{name}: [1, 4]'")
    source = f"notebooks/{study}.ipynb parameters"
    profile = str(namespace.get("profile") or "")
    if problems:  # the values are checked too, so that one run names every problem
        texts = {k for k, v in overrides.items() if isinstance(v, str) and _is_container(fields[k].annotation)}
        problems += _value_problems(study, root, profile, {k: v for k, v in overrides.items() if k not in texts})
        raise ParameterError(source, problems)
    name, values, inventory = profile_values(root / "params" / f"{study}.yaml", profile or None)
    # every value checked here, before anything starts, and named as the notebook's (papermill's -p/-y)
    validate(module(study, "params").Params, {**values, **overrides},
             f"{source} (profile {name} of params/{study}.yaml, with {', '.join(sorted(overrides)) or 'no'} "
             "overrides)")
    return name, {**values, **overrides}, overrides, inventory


def _value_problems(study: str, root: Path, profile: str, overrides: dict[str, Any]) -> list[str]:
    """What ``validate`` would say of the profile with ``overrides`` (a bad profile name included)."""
    try:
        _, values, _ = profile_values(root / "params" / f"{study}.yaml", profile or None)
        validate(module(study, "params").Params, {**values, **overrides}, "")
    except ParameterError as exc:
        return exc.problems
    return []


def run(study: str, namespace: dict[str, Any], *, progress: bool = True) -> Any:
    """Validate the notebook's parameters, then analyze the run: the one ``notebook_collect.collect`` just published
    when collecting, else the data root's (``runs.reading.analysis_run``); returns the Analysis. ``progress``
    is the collect's (kept for callers that pass it)."""
    root = repo_root()
    parameters(study, namespace, root)
    if os.environ.get(ANALYZE_ONLY_ENV, "").strip() and not namespace.get("data_root"):  # e.g. by nbval
        print(f"pglab: {ANALYZE_ONLY_ENV}={os.environ[ANALYZE_ONLY_ENV].strip()}: analyzing the {study} run there, "
              "not collecting")
    data = data_folder(namespace, root)
    figs = resolve(namespace["figures_root"], root) if namespace.get("figures_root") else data / "figures"
    if _collects(namespace) and COLLECTED.pop(study, None) is None:
        raise UserError(f"collect=True, but no {study} run was collected: call "
                        f"pglab.app.notebook_collect.collect({study!r}, globals()) first (the notebook's first code "
                        "cell does), or set collect=False to analyze the run under data_root")
    run_dir = analysis_run(data, study)
    if run_dir is None:
        raise UserError(f"collect=False but there is no run under {pipeline_dir(data, study)} or "
                        f"{archive_dir(data, study)}: run `pglab collect {study}` or `dvc pull` first")
    load_manifest(run_dir, study=study)  # a run of another study, or a broken manifest: one line naming it
    # a campaign of several runs: the verdicts are decided over them
    return campaign.analyze_any(study, run_dir, data / "derived" / study, figs / study, root / "data" / "reference")


def assert_every_point_measured(result: Any) -> None:
    """The check cell's last word: a run with a failed point is not a result (AssertionError naming them)."""
    failed = result.failed
    if len(failed):
        lines = [f"  {r.point}: {r.status}: {first_line(r.error)}"
                 for r in failed.head(10).itertuples()]
        more = f"\n  ... and {len(failed) - 10} more (failed_points.csv)" if len(failed) > 10 else ""
        raise AssertionError(f"{len(failed)} point(s) failed; the verdicts above rest on an incomplete run:\n"
                             + "\n".join(lines) + more)
    print(f"{len(result.points)} points measured, none failed")


def where_nodes_ran(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node and client: the notebook must say where everything ran, on which machine."""
    return placement.nodes_table(manifest)


def where_hosts_were(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per host of the run, with its machine identity."""
    return placement.hosts_table(manifest)


def where_summary(manifest: dict[str, Any]) -> str:
    """The placement sentence as markdown: inventory host names shown as text, never as markup."""
    return placement.summary(manifest, escape_text)


def compare_runs(run_a: str | Path, run_b: str | Path, allow_mixed: bool = False, *, data_root: str | Path = "data",
                 reference_dir: str | Path | None = None) -> dict[str, Any] | None:
    """Two runs side by side, as ``pglab compare`` prints them: differences, hosts, placement, tools, parameters,
    effects. A run is a folder or a run id under ``<data_root>/runs/<study>/``.

    Runs that differ in what the measurement depends on are refused (NotComparableError) unless
    ``allow_mixed``; the facts side by side are shown first all the same. In a notebook the tables are
    displayed (and None returned); elsewhere they are returned.
    """
    from pglab.analysis import comparable
    from pglab.views import side_by_side

    root = repo_root()
    # a folder relative to the working directory or to the checkout (notebooks run in notebooks/), else a run id
    runs = [comparable.find_run(resolve(data_root, root), resolve(r, root) if not Path(r).exists()
                                and (resolve(r, root) / "manifest.json").exists() else r) for r in (run_a, run_b)]
    manifests = [load_manifest(r) for r in runs]
    diffs = comparable.differences(*manifests)
    refused = bool(comparable.refused(diffs)) and not allow_mixed
    tables: dict[str, Any] = {"differences": comparable.differences_table(diffs)}
    tables.update(side_by_side.side_by_side(*runs, reference_dir=reference_dir or root / "data" / "reference",
                                          effects=not refused))
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is not None:
        from IPython.display import Markdown, display

        mixing = comparable.mixing_message(diffs) if allow_mixed else ""
        display(Markdown(f"**a**: {escape_text(runs[0])}; **b**: {escape_text(runs[1])}"
                         + (f"  \n**{escape_text(mixing)}**" if mixing else "")))
        for name, table in tables.items():
            sources = table.attrs.get("sources")
            display(Markdown(f"**{escape_text(name)}**" + (
                f" (a: {escape_text(sources['a'])}; b: {escape_text(sources['b'])})" if sources else "")))
            display(table)
    if refused:
        comparable.check_comparable(*manifests)  # raises, naming every refused field
    return None if shell is not None else tables
