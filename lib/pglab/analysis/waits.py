"""Wait events in analysis: the samples a point's ``waits.csv`` holds, as shares, notes and a figure.

The sampler (``pglab.workloads.waits``) only writes raw samples while a point runs; everything computed
from them lives here, so that collecting never imports analysis code and an edit to a share or a figure
re-measures nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pglab.analysis import figures
from pglab.workloads.waits import CSV

#: a frame's ``attrs`` key naming what its numbers are: ``"share"`` (fractions of a whole) is shown as a
#: percentage in every table a reader meets (``pglab.views.frames``)
UNIT_ATTR = "pglab_unit"

CLIENT_TYPES = {"client backend"}
REPLICATION_TYPES = {"walsender", "walreceiver", "startup", "logical replication worker",
                     "logical replication launcher"}
# One colour per wait_event_type (CPU: running, no wait), the same in every study's figure (colour-blind
# safe: seaborn's "colorblind" and a purple); events of one class differ by hatch, "other" is grey.
WAIT_CLASS_COLOURS = {"CPU": "#029e73", "IO": "#0173b2", "LWLock": "#ece133", "Lock": "#d55e00", "IPC": "#cc78bc",
                      "Client": "#ca9161", "Activity": "#56b4e9", "Timeout": "#de8f05", "BufferPin": "#fbafe4",
                      "Extension": "#6a3d9a", "other": "#949494"}


def load(path: str | Path) -> pd.DataFrame:
    """A point's raw samples (empty strings, not NaN, where a backend had no state or wait)."""
    return pd.read_csv(path, dtype={"state": str, "wait_event_type": str, "wait_event": str, "backends": int},
                       keep_default_na=False)


def event(df: pd.DataFrame) -> pd.Series:
    """``type:event`` of each sample, ``CPU`` for an active backend that waits for nothing."""
    named = df.wait_event_type.astype(str) + ":" + df.wait_event.astype(str)
    return named.where(df.wait_event.astype(str) != "", "CPU")


def backend_groups(df: pd.DataFrame) -> pd.Series:
    """``client`` (the workload's backends), ``replication`` (walsender, walreceiver, apply) or ``background``."""
    kinds = df.backend_type.astype(str)
    return pd.Series(["client" if k in CLIENT_TYPES else "replication" if k in REPLICATION_TYPES else "background"
                      for k in kinds], index=df.index, dtype=object)


def shares(df: pd.DataFrame, by: Sequence[str] = ("node",)) -> pd.DataFrame:
    """Per group: backend samples in each wait event and their share of the group's backend samples."""
    cols = [*by, "event", "samples", "share"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    d = df.assign(event=event(df))
    counts = d.groupby([*by, "event"]).backends.sum().rename("samples").reset_index()
    totals = counts.groupby(list(by)).samples.transform("sum")
    counts["share"] = counts.samples / totals
    return counts.sort_values([*by, "samples", "event"], ascending=[*[True] * len(by), False, True],
                              kind="stable").reset_index(drop=True)[cols]


def dominant(df: pd.DataFrame) -> tuple[str, float]:
    """The most frequent wait event of these samples and its share (("", 0.0) without samples)."""
    if df.empty:
        return "", 0.0
    counts = df.assign(event=event(df)).groupby("event").backends.sum().sort_values(ascending=False, kind="stable")
    return str(counts.index[0]), float(counts.iloc[0] / counts.sum())


def wait_shares(run_dir: Path, points: pd.DataFrame, node: str | None = None,
                backend_group: str = "client") -> pd.DataFrame:
    """Per configuration: the share of sampled backends in each wait event, over all its points.

    Read from each point's raw ``waits.csv``; ``node`` keeps one node's samples.
    """
    frames = []
    for _, p in points.iterrows():
        path = Path(run_dir) / p.point / CSV
        if not path.exists():
            continue
        df = load(path)
        if node is not None:
            df = df[df.node == node]
        frames.append(df.assign(config=p.config, kind=p.kind))
    cols = ["kind", "config", "event", "samples", "share"]
    if not frames:
        return pd.DataFrame(columns=cols)
    allw = pd.concat(frames, ignore_index=True)
    allw = allw[backend_groups(allw) == backend_group]
    sh = shares(allw, by=["kind", "config"])
    return sh[cols].sort_values(["kind", "config", "share"], ascending=[True, True, False],
                                kind="stable").reset_index(drop=True)


def top_events_table(shares: pd.DataFrame, by: Sequence[str] = ("config",), n: int = 3) -> pd.DataFrame:
    """One row per group, a column per event that is among some group's ``n`` largest: each group's real
    share of it. A 0 is a share measured as 0 (never an event left out of a group's own top ``n``); a
    group with no samples at all has no row."""
    by = list(by)
    if shares.empty:
        return pd.DataFrame()
    ranked = shares.sort_values([*by, "share", "event"], ascending=[*[True] * len(by), False, True], kind="stable")
    events = sorted(set(ranked.groupby(by).head(n).event), key=lambda e: (-shares[shares.event == e].share.max(), e))
    wide = shares.pivot_table(index=by, columns="event", values="share", aggfunc="sum", fill_value=0.0)
    top = wide[events].round(3)
    top.attrs[UNIT_ATTR] = "share"
    return top


def wait_note(shares: pd.DataFrame, config: str, baseline: str) -> str:
    """What the samples say of two configurations: their dominant waits (measured, never fixed text)."""
    out = []
    for c in (config, baseline):
        s = shares[shares.config == c].sort_values(["share", "event"], ascending=[False, True], kind="stable")
        if len(s):
            top = ", ".join(f"{r.event} {100 * r.share:.0f}%" for r in s.head(2).itertuples())
            out.append(f"{c}: {top}")
    return "busy backends' top waits: " + "; ".join(out) if out else "waits not sampled"


def wait_class(event_name: str) -> str:
    """``LWLock`` of ``LWLock:WALWrite``; ``CPU`` and ``other`` are their own class; an unknown type is other."""
    cls = event_name.split(":", 1)[0]
    return cls if cls in WAIT_CLASS_COLOURS else "other"


HATCHES = ("", "//", "..", "xx", "\\\\", "++")  # the 1st, 2nd, ... event of one class in a figure


def wait_colours(events: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """Event -> its class's colour (WAIT_CLASS_COLOURS): a class reads as one colour in every study."""
    from matplotlib.colors import to_rgb

    return {e: to_rgb(WAIT_CLASS_COLOURS[wait_class(e)]) for e in events}


def wait_hatches(events: Sequence[str]) -> dict[str, str]:
    """Event -> hatch: none for the first event of a class, then //, .., xx in the order given, so that two
    events of one class (LWLock:WALWrite, LWLock:BufferContent) differ without leaving their colour."""
    seen: dict[str, int] = {}
    out = {}
    for e in events:
        k = seen[wait_class(e)] = seen.get(wait_class(e), -1) + 1
        out[e] = HATCHES[min(k, len(HATCHES) - 1)]
    return out


def fig_waits(shares: pd.DataFrame, out: Path, order: list[str], title: str, name: str = "waits",
              top: int = 6) -> list[Path]:
    """Stacked shares of the most common wait events per configuration (CPU = running, no wait), coloured by
    wait class (``wait_colours``) and grouped by class, largest first, so classes compare across studies."""
    s = shares[shares.config.isin(order)]
    total = s.groupby("event").share.sum()
    events = list(total.sort_values(ascending=False, kind="stable").index[:top])
    wide = (s.assign(event=s.event.where(s.event.isin(events), "other"))
            .groupby(["config", "event"]).share.sum().unstack(fill_value=0.0).reindex(order).fillna(0.0))
    classes = list(WAIT_CLASS_COLOURS)
    columns = sorted(wide.columns, key=lambda e: (classes.index(wait_class(e)), -total.get(e, 0.0), e))
    return figures.stacked_bars(wide[columns], out, name, title, xlim=(0, 1), colours=wait_colours(columns),
                                hatches=wait_hatches(columns),
                                xlabel="share of sampled client backends (pg_stat_activity every ~100 ms)")
