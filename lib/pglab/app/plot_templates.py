"""``dvc plots show`` in the reports' words and colours: a vega-lite template per ratio plot, written beside dvc.yaml.

Why: the shared template (``.dvc/plots/ratio.json``) coloured the lines with vega's own palette and named them by
the table's columns (``builtin``, ``slony``), while every report figure names them ``built-in logical``,
``Slony-I`` in the study's colour-blind palette. Each plot's template (``.dvc/plots/<plot>.json``) is the shared one
with the study's colour for each column (``PALETTE`` of its figures module) and the display name its figures give
(``label``), so a line is the same colour and name in ``dvc plots show`` as in the report. Written and checked
with dvc.yaml by ``python -m pglab.app.pipeline`` (``--check``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pglab.studies import STUDIES, Plot, declaration, module

PLOTS = Path(".dvc") / "plots"
#: the kinds of plot (``Plot.template``): ``ratio``, a colour per configuration (DVC's own colour by revision is
#: the dash), a log axis for ratios and a grey rule at 1, where the baseline's own column lies
BASES: dict[str, dict[str, Any]] = {"ratio": {
    "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
    "data": {"values": "<DVC_METRIC_DATA>"},
    "title": {"text": "<DVC_METRIC_TITLE>", "anchor": "middle"},
    "width": 420,
    "height": 300,
    "layer": [
        {"mark": {"type": "line", "point": True, "tooltip": {"content": "data"}},
         "encoding": {
             "x": {"field": "<DVC_METRIC_X>", "type": "quantitative", "title": "<DVC_METRIC_X_LABEL>"},
             "y": {"field": "<DVC_METRIC_Y>", "type": "quantitative", "title": "<DVC_METRIC_Y_LABEL>",
                   "scale": {"type": "log"}},
             "color": {"field": "field", "type": "nominal", "title": "configuration"},
             "strokeDash": {"field": "rev", "type": "nominal", "title": "revision"}}},
        {"mark": {"type": "rule", "color": "grey", "strokeDash": [4, 4]}, "encoding": {"y": {"datum": 1}}},
    ]}}


def _hex(colour: Any) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour)


def _label_expr(names: dict[str, str]) -> str:
    """A vega expression giving each column its display name (a ternary chain: no object literal needed)."""
    expr = "datum.label"
    for column, name in reversed(names.items()):
        expr = f"datum.label == {json.dumps(column)} ? {json.dumps(name)} : ({expr})"
    return expr


def template(base: dict[str, Any], plot: Plot, palette: dict[str, Any], label: Callable[[str], str]) -> dict[str, Any]:
    """``base`` with the plot's columns in the study's colours and names (pure: same inputs, same template)."""
    out = json.loads(json.dumps(base))
    line = out["layer"][0]["encoding"]
    line["color"] = {**line["color"],
                     "scale": {"domain": list(plot.y), "range": [_hex(palette[c]) for c in plot.y]}}
    renamed = {c: label(c) for c in plot.y if label(c) != c}
    if renamed:  # a legend of the columns' own names needs no expression
        line["color"]["legend"] = {"labelExpr": _label_expr(renamed)}
    return out


def templates() -> dict[Path, str]:
    """Each study's ratio plots: the template's path (relative to the checkout) -> its text."""
    out: dict[Path, str] = {}
    for study in STUDIES:
        plots = declaration(study).plots
        if not plots:
            continue
        figures = module(study, "figures")
        palette, label = getattr(figures, "PALETTE", {}), getattr(figures, "label", lambda c: c)
        for plot in plots:
            made = template(BASES[plot.template], plot, palette, label)
            out[PLOTS / f"{plot.name}.json"] = json.dumps(made, indent=2) + "\n"
    return out
