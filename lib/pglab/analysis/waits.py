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

CLIENT_TYPES = {"client backend"}
REPLICATION_TYPES = {"walsender", "walreceiver", "startup", "logical replication worker",
                     "logical replication launcher"}


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


def wait_note(shares: pd.DataFrame, config: str, baseline: str) -> str:
    """What the samples say of two configurations: their dominant waits (measured, never fixed text)."""
    out = []
    for c in (config, baseline):
        s = shares[shares.config == c].sort_values(["share", "event"], ascending=[False, True], kind="stable")
        if len(s):
            top = ", ".join(f"{r.event} {100 * r.share:.0f}%" for r in s.head(2).itertuples())
            out.append(f"{c}: {top}")
    return "busy backends' top waits: " + "; ".join(out) if out else "waits not sampled"


def fig_waits(shares: pd.DataFrame, out: Path, order: list[str], title: str, name: str = "waits",
              top: int = 6) -> list[Path]:
    """Stacked shares of the most common wait events per configuration (CPU = running, no wait)."""
    s = shares[shares.config.isin(order)]
    events = list(s.groupby("event").share.sum().sort_values(ascending=False).index[:top])
    wide = (s.assign(event=s.event.where(s.event.isin(events), "other"))
            .groupby(["config", "event"]).share.sum().unstack(fill_value=0.0).reindex(order).fillna(0.0))
    return figures.stacked_bars(wide, out, name, title, xlim=(0, 1),
                                xlabel="share of sampled client backends (pg_stat_activity every ~100 ms)")
