"""The studies, and the one registry of them: a study is a folder here, and nothing else lists it.

A study is a subpackage ``pglab.studies.<name>``: ``__init__.py`` (its name), ``declaration.py`` (what it is:
a ``Study``, its question, its article, its own derived tables and figures, its DVC plots), ``params.py`` (the
model), ``collect.py`` (touches hosts), ``analyze.py`` (pure). ``collect`` and ``analyze`` are separate modules
so that DVC can tell them apart: a change in the analysis re-runs only the analyze stage.

``STUDIES`` is every such folder, found on disk (``pkgutil``) and sorted by name; ``module(study, part)`` and
``declaration(study)`` import one module of one study, by string, and are the only imports by string in pglab
(tests/test_layers.py). dvc.yaml is written from the declarations (``python -m pglab.app.pipeline``).

Why the declaration is a module of its own, read only when asked for: a DVC stage depends on every file it
imports, and a collect stage imports its study's package. A question in ``__init__.py`` would re-measure the
study when its wording changes; a registry that imported every declaration (to order them, say) would make
every collect stage depend on every study, and adding a sixth would re-measure the five. So finding the
studies reads no study's file, and a stage loads only the declarations it uses.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

from pglab.errors import UserError

#: the tables every study's analysis writes to data/derived/<study>/ (analysis/result.py), its own come beside them
COMMON_TABLES = ("points.csv", "summary.csv", "ratios.csv", "ratio_lines.csv", "comparison.csv", "failed_points.csv",
                 "waits.csv", "stalls.csv", "details.json")


@dataclass(frozen=True)
class Plot:
    """A ``dvc plots`` line plot of one of the study's derived tables: one line per column named in ``y``."""

    name: str
    title: str
    x: str
    x_label: str
    y_label: str
    y: tuple[str, ...]
    table: str = "ratio_lines.csv"
    #: its kind (``pglab.app.plot_templates.BASES``): ``ratio``, a colour per configuration, a log axis and a rule
    #: at 1; the pipeline writes its template, ``.dvc/plots/<name>.json``, in the study's colours and names
    template: str = "ratio"


@dataclass(frozen=True)
class Study:
    """What a study is, declared once in ``pglab/studies/<name>/declaration.py`` as ``DECLARATION``."""

    #: the folder's name: the study's name everywhere (params/<name>.yaml, notebooks/<name>.ipynb, data/*/<name>)
    name: str
    #: one sentence ending in "?": the first line of its report and its row of the index
    question: str
    #: the article it reproduces: its number (as in docs/ and data/reference/) and title
    article: str
    #: its own derived tables beyond COMMON_TABLES (a file, or a folder of them, in data/derived/<name>/), each with
    #: what it holds
    tables: Mapping[str, str] = field(default_factory=dict)
    #: every figure its analysis draws (figures/<name>/<figure>.png and .svg), listed for ``dvc plots show``
    figures: tuple[str, ...] = ()
    #: its ``dvc plots`` line plots, if any
    plots: tuple[Plot, ...] = ()

    def __post_init__(self) -> None:
        problems = [] if self.name.isidentifier() else [f"name {self.name!r} is not a Python identifier"]
        problems += [] if self.question.rstrip().endswith("?") else ["the question does not end with '?'"]
        problems += [f"table {t!r}: a name in data/derived/{self.name}/, not a path, and not a common table"
                     for t in self.tables if "/" in t or t in COMMON_TABLES or not t]
        problems += [f"figure {f!r}: a file name without its suffix" for f in self.figures if "/" in f or "." in f]
        if problems:
            raise ValueError(f"the declaration of study {self.name!r}: " + "; ".join(problems))


def _found() -> tuple[str, ...]:
    """Every study folder (a subpackage of this package), by name; no study's file is read."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and not m.name.startswith("_")))


STUDIES: tuple[str, ...] = _found()


def module(study: str, part: str) -> ModuleType:
    """``pglab.studies.<study>.<part>`` with a clear error for an unknown study."""
    if study not in STUDIES:
        raise UserError(f"unknown study {study!r} (known: {', '.join(STUDIES)})")
    if not part.isidentifier():
        raise ValueError(f"{part!r} is not a module of a study")
    return importlib.import_module(f"{__name__}.{study}.{part}")


def declaration(study: str) -> Study:
    """The ``Study`` that ``pglab/studies/<study>/declaration.py`` declares (``DECLARATION``)."""
    declared = getattr(module(study, "declaration"), "DECLARATION", None)
    if not isinstance(declared, Study) or declared.name != study:
        raise TypeError(f"pglab/studies/{study}/declaration.py: DECLARATION must be a Study named {study!r}, "
                        f"not {declared!r}")
    return declared
