"""Every figure of every study, drawn from the shipped runs, has no text over text, no text beyond the canvas and
no legend over its data (``pglab.analysis.layout``); every waits figure colours a wait class as the others do.

The figures are drawn by the studies' own ``analyze`` (what the notebooks and the DVC stages run), with
``figures.save`` replaced by the check: each figure is drawn once and nothing is written to figures/.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from conftest import REPO, pulled_runs  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from pglab.analysis import figures, layout  # noqa: E402
from pglab.analysis.waits import WAIT_CLASS_COLOURS, wait_class, wait_hatches  # noqa: E402
from pglab.studies import STUDIES, module  # noqa: E402


# -- the checker on figures made to collide, and on a clean one -------------------------------------------
def _fig(layout_name: str = "none", **kw: Any) -> tuple[plt.Figure, Any]:
    """A figure with the layout given (not the rcParams a study's style() may have set in this process)."""
    return plt.subplots(layout=layout_name, **kw)


def _problems(fig: plt.Figure) -> list[str]:
    try:
        return layout.problems(fig)
    finally:
        plt.close(fig)


def test_a_clean_figure_passes() -> None:
    fig, (ax1, ax2) = _fig("constrained", ncols=2, figsize=(8, 3.5))
    for ax in (ax1, ax2):
        ax.bar(["local", "FDW_local"], [3.0, 7.0], label="tps")
        ax.set_title("a panel")
        ax.set_xlabel("target")
        ax.set_ylabel("throughput (tps)")
        ax.text(0, 1.0, "")  # empty text: ignored
        ax.text(0, 1.0, "hidden", visible=False)
    figures.outside_legend(ax2)
    fig.suptitle("A title above both panels")
    assert _problems(fig) == []


def test_two_texts_on_one_spot_collide() -> None:
    fig, ax = _fig()
    ax.text(0.5, 0.5, "a note", transform=ax.transAxes)
    ax.text(0.52, 0.5, "another note", transform=ax.transAxes)
    found = _problems(fig)
    assert any("'a note' overlaps" in p and "'another note'" in p for p in found), found


def test_tick_labels_of_one_axis_running_together_collide() -> None:
    fig, ax = _fig(figsize=(3, 3))
    ax.set_xticks(range(4), ["sync_write", "remote_write", "sync_apply", "per_transaction"])
    found = _problems(fig)
    assert any("x tick label 'sync_write' overlaps" in p and "x tick label 'remote_write'" in p
               for p in found), found


def test_a_suptitle_over_the_panel_titles_collides() -> None:
    fig, (ax1, ax2) = _fig(ncols=2)
    ax1.set_title("left panel's title")
    ax2.set_title("right panel's title")
    fig.suptitle("a long suptitle printed right on top of both panel titles", y=0.9)
    found = _problems(fig)
    assert any(p.startswith("suptitle overlaps") and "left panel's title" in p for p in found), found


def test_an_offset_text_over_the_panel_above_is_found() -> None:
    fig, (ax1, ax2) = _fig(nrows=2, sharex=True, figsize=(4, 3), gridspec_kw={"hspace": 0.05})
    ax1.plot([0, 1], [0.0, 1.0])
    ax2.plot([0, 1], [1e6, 2e6])  # "1e6" above the lower panel: in the upper one
    found = _problems(fig)
    # (whether the panels' touching tick labels also collide depends on the fonts and the style in force)
    assert "panel 1: y offset text '1e6' runs into panel 0" in found, found


def test_text_beyond_the_canvas_is_found() -> None:
    fig, ax = _fig(figsize=(4, 3))
    fig.text(0.6, 0.02, "a note much too long to fit in what is left of the figure's width")
    found = _problems(fig)
    assert any(p.startswith("figure text 'a note much") and "leaves the canvas" in p for p in found), found


def test_tick_labels_spilling_into_the_next_panel_are_found() -> None:
    fig, (ax1, ax2) = _fig(ncols=2, figsize=(5, 3), gridspec_kw={"wspace": 0.0})
    ax2.set_ylim(1000, 2000000)
    ax2.ticklabel_format(axis="y", style="plain")
    found = _problems(fig)
    assert any("panel 1: y tick label" in p and "runs into panel 0" in p for p in found), found


def test_a_legend_over_a_bar_is_found() -> None:
    fig, ax = _fig(figsize=(4, 3))
    ax.bar([0, 1, 2], [10, 9, 10], label="p99")
    ax.legend(loc="upper left")
    found = _problems(fig)
    assert any("legend covers 1 bar(s)" in p for p in found), found


# -- every figure of every study, from the shipped runs -----------------------------------------------------
Bar = tuple[str, tuple[float, float, float], str, list[tuple[tuple[float, float, float], str]]]


@dataclass
class Drawn:
    """One study's figures as its analysis drew them: the problems of each, and its waits figure's bars."""

    study: str
    problems: dict[str, list[str]] = field(default_factory=dict)
    wait_bars: list[Bar] = field(default_factory=list)
    bar_axes: dict[str, list[str]] = field(default_factory=dict)


def _wait_bars(fig: plt.Figure) -> list[Bar]:
    """(event, its legend colour and hatch, the colour and hatch of each of its bar segments) of a waits figure."""
    ax = fig.axes[0]
    leg = ax.get_legend()
    bars = {c.get_label(): [(to_rgb(p.get_facecolor()), p.get_hatch() or "") for p in c.patches]
            for c in ax.containers}
    return [(t.get_text(), to_rgb(h.get_facecolor()), h.get_hatch() or "", bars.get(t.get_text(), []))
            for h, t in zip(leg.legend_handles, leg.get_texts(), strict=True)]


def _bar_axes(fig: plt.Figure) -> list[str]:
    """Each panel drawing bars whose value axis is not linear from 0: a bar's length is its value, so a truncated
    or log axis misreads it (such values are drawn as points)."""
    found = []
    for i, ax in enumerate(fig.axes):
        for c in ax.containers:
            if isinstance(c, BarContainer) and c.patches:
                scale, lim = (ax.get_yscale(), ax.get_ylim()) if c.orientation == "vertical" else \
                    (ax.get_xscale(), ax.get_xlim())
                if scale != "linear" or min(lim) != 0:
                    found.append(f"panel {i}: bars on a {scale} axis from {min(lim):g}")
    return found


@pytest.fixture(scope="module", params=STUDIES)
def drawn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drawn]:
    study = request.param
    pulled_runs(study)
    out = Drawn(study)

    def check(fig: plt.Figure, folder: str | Path, name: str) -> list[Path]:
        out.problems[name] = layout.problems(fig)
        out.bar_axes[name] = _bar_axes(fig)
        if name == "waits":
            out.wait_bars = _wait_bars(fig)
        plt.close(fig)
        return [Path(folder) / f"{name}.png", Path(folder) / f"{name}.svg"]

    tmp = tmp_path_factory.mktemp(study)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "save", check)
        module(study, "analyze").analyze(REPO / "data" / "raw" / study, tmp / "derived", tmp / "figures",
                                         REPO / "data" / "reference")
    yield out


def test_no_text_collides_or_leaves_the_canvas(drawn: Drawn) -> None:
    bad = {name: found for name, found in drawn.problems.items() if found}
    assert not bad, "\n".join(f"{drawn.study}/{name}.png:\n  " + "\n  ".join(found) for name, found in bad.items())


def test_every_bar_starts_at_zero_on_a_linear_axis(drawn: Drawn) -> None:
    bad = {name: found for name, found in drawn.bar_axes.items() if found}
    assert not bad, bad


def test_every_shipped_figure_is_checked(drawn: Drawn) -> None:
    shipped = {p.stem for p in (REPO / "figures" / drawn.study).glob("*.png")}
    assert shipped <= set(drawn.problems), f"shipped but not drawn here: {sorted(shipped - set(drawn.problems))}"


def test_the_waits_figure_colours_each_wait_class_as_every_study_does(drawn: Drawn) -> None:
    """Every event in the colour of its class, from the one mapping (WAIT_CLASS_COLOURS); within a class the
    events differ by hatch; the legend shows what the bars are."""
    assert drawn.wait_bars, f"{drawn.study}: no waits figure drawn"
    hatches = wait_hatches([e for e, _, _, _ in drawn.wait_bars])
    for event, colour, hatch, bars in drawn.wait_bars:
        assert colour == pytest.approx(to_rgb(WAIT_CLASS_COLOURS[wait_class(event)])), (drawn.study, event)
        assert hatch == hatches[event], (drawn.study, event)
        assert bars and all(c == pytest.approx(colour) and h == hatch for c, h in bars), (drawn.study, event, bars)


def test_every_wait_class_has_a_colour_of_its_own() -> None:
    classes = ["CPU", "IO", "LWLock", "Lock", "IPC", "Client", "Activity", "Timeout", "BufferPin", "Extension"]
    assert set(classes) < set(WAIT_CLASS_COLOURS)
    assert len({to_rgb(c) for c in WAIT_CLASS_COLOURS.values()}) == len(WAIT_CLASS_COLOURS)
    assert wait_class("LWLock:WALWrite") == "LWLock" and wait_class("CPU") == "CPU"
    assert wait_class("NewType:Thing") == "other"
    assert wait_hatches(["LWLock:BufferContent", "CPU", "LWLock:WALWrite"]) == {
        "LWLock:BufferContent": "", "CPU": "", "LWLock:WALWrite": "//"}


def test_steal_flagged_points_are_marked_and_left_out_of_the_summary(tmp_path: Path) -> None:
    """A point flagged for CPU steal is drawn with a cross (and a legend entry), and left out of the absolute
    tps summary as of every ratio: the figure shows what the numbers do not use."""
    import pandas as pd
    from pglab.analysis import tables
    from pglab.studies.synchronous_commit import figures as sc_figures

    pulled_runs("synchronous_commit")
    points, _ = tables.points_table(REPO / "data" / "raw" / "synchronous_commit")
    writes = points[points.kind == "write"].copy()
    flagged = writes[(writes.config == "off") & (writes["copy"] == 1)].index[:1]  # one of the shipped run's 2 blocks
    writes["steal_flag"] = False
    writes.loc[flagged, "steal_flag"] = True
    summary = tables.tps_summary(writes, ["clients", "config"]).rename(columns={"config": "level"})
    clean = tables.tps_summary(writes.drop(index=flagged), ["clients", "config"]).rename(columns={"config": "level"})
    pd.testing.assert_frame_equal(summary, clean)
    drawn: list[plt.Figure] = []
    real_save = figures.save
    figures.save = lambda fig, out, name: drawn.append(fig) or []  # type: ignore[assignment]
    try:
        sc_figures.fig_tps_by_clients(summary, writes, tmp_path)
    finally:
        figures.save = real_save
    ax = drawn[0].axes[0]
    crosses = [c for c in ax.collections if c.get_label() == figures.STEAL_LABEL]
    assert len(crosses) == 1 and len(crosses[0].get_offsets()) == 1
    assert figures.STEAL_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_a_position_below_zero_is_drawn_at_the_edge_not_refused(tmp_path: Path) -> None:
    """streaming_scale_out's "in between" is a position that can be negative (a smoke run's median once was):
    the published-vs-reproduced figure draws it at the log axis' left edge with its value."""
    import pandas as pd
    from pglab.analysis import claims, tables

    rows = [claims.comparison_row(claims.within("between", 1.0, 0.5, 1.5), [-0.9, -0.3, 1.2]),
            claims.comparison_row(claims.direction("faster", 1.2), [1.1, 1.2, 1.3])]
    drawn: list[plt.Figure] = []
    real_save = figures.save
    figures.save = lambda fig, out, name: drawn.append(fig) or []  # type: ignore[assignment]
    try:
        tables.fig_comparison(pd.DataFrame(rows), tmp_path, "t")
    finally:
        figures.save = real_save
    texts = [t.get_text() for t in drawn[0].axes[0].texts]
    assert any(t.startswith("to -0.9, median -0.3") for t in texts), texts
    plt.close("all")
