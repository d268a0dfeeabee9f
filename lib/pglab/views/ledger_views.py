"""What the ledger commands say of campaigns: a campaign's verdicts over its runs, as its report tells them.

Why: a campaign's report decides each claim over its runs; its runs' own verdicts (each over its few blocks)
are mostly "not resolvable here". A ledger view that showed only those would contradict the report about the
same runs, so ``pglab ledger list`` names each run's campaign and gives the campaign's verdicts in one line, and
``pglab ledger show`` gives them before the run's own (``pglab.ledger.book.campaigns``: the one place they are
read from, as history.html reads them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pglab.ledger import book
from pglab.ledger.backend import Ledger
from pglab.ledger.locations import printable

#: the short words ``pglab ledger list`` counts verdicts in, a run's and a campaign's alike (``measured``: a
#: ``pglab slo`` rate, ``pglab.app.slo_ledger.MEASURED``)
SHORT = {"held": "held", "did not hold": "not", "not measurable here": "n.a.", "not resolvable here": "n.r.",
         "measured (no published claim)": "measured"}
TALLIED = ("held", "not", "open", "n.r.", "n.a.", "measured", "?")  # in this order


def _suffix(run_id: Any) -> str:
    return str(run_id).rsplit("-", 1)[-1]


def short_campaign(ledger: Ledger) -> Mapping[str, str]:
    """run id -> the random suffix of the campaign it is one of (its latest, if several)."""
    out: dict[str, str] = {}
    for key, ids in ledger.query("SELECT campaign_id, run_ids FROM campaigns ORDER BY started"):
        for run_id in json.loads(ids or "[]"):
            out[run_id] = _suffix(key)
    return out


def tally(verdicts: pd.Series) -> str:
    """Verdicts counted, as ``2 held, 1 not, 3 n.a.`` (another word: ``open``; none: ``?``)."""
    counts = verdicts.map(lambda v: SHORT.get(v, "open" if isinstance(v, str) else "?")).value_counts()
    return ", ".join(f"{counts[k]} {k}" for k in TALLIED if k in counts)


def tallies(claims: pd.DataFrame) -> pd.Series:
    """Per run: its verdicts counted (``tally``)."""
    return claims.groupby("run_id")["verdict"].agg(tally) if len(claims) else pd.Series(dtype=str)


def _what(k: pd.DataFrame) -> str:
    first = k.iloc[0]
    runs = len(json.loads(first["run_ids"] or "[]"))
    left = f"; left out: {first['left_out']}" if isinstance(first["left_out"], str) and first["left_out"] else ""
    scope = f"; {first['campaign_scope']}" if isinstance(first["campaign_scope"], str) else ""
    return f"{first['study']}, {first['profile']}, {runs} runs{scope}{left}"


def campaign_lines(ledger: Ledger, study: str | None) -> list[str]:
    """One line per campaign: its runs, scope and verdicts over the runs (what its report and the index say)."""
    c = book.campaigns(ledger, study)
    out = []
    for key, k in c.groupby("campaign_id", sort=False):
        out.append(printable(f"campaign {_suffix(key)} ({_what(k)}): {tally(k['verdict'])} over its runs "
                             f"(`pglab ledger show {_suffix(key)}`)", 400))
    return out


def campaign_block(campaigns: pd.DataFrame, campaign_id: str) -> list[str]:
    """The campaign's verdicts over its runs, a line per claim, for ``pglab ledger show`` (``campaigns``:
    ``book.campaigns``, read once by the command)."""
    k = campaigns[campaigns["campaign_id"] == campaign_id]
    if k.empty:
        return []
    out = [f"\ncampaign {campaign_id} ({_what(k)}): the verdicts over its runs, as its report tells them:"]
    for r in k.to_dict("records"):
        interval = "" if pd.isna(r["ci_low"]) or pd.isna(r["ci_high"]) else f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]"
        value = "-" if pd.isna(r["reproduced"]) else f"{r['reproduced']:.3g}{interval}"
        out.append(printable(f"  {r['claim']}: {r['verdict']}, {value}"
                             + ("" if pd.isna(r["n_runs"]) else f" over {int(r['n_runs'])} runs"), 400))
    return out


def campaigns_within(campaigns: pd.DataFrame, run_ids: list[str]) -> list[str]:
    """The stored verdicts of every campaign whose runs are all among ``run_ids``, for ``pglab ledger compare``:
    where a group is (or holds) a campaign, the campaign's own verdicts come first, as its report tells them."""
    shown = set(run_ids)
    out: list[str] = []
    for key, k in campaigns.groupby("campaign_id", sort=False):  # oldest first
        runs = set(json.loads(k["run_ids"].iloc[0] or "[]"))
        if runs and runs <= shown:
            out += campaign_block(k, key)
    return out


def decided_over(over: pd.DataFrame, group: Any) -> str:
    """The group's claims decided over its runs (``over``: ``analysis.over_runs.comparison``, which the command
    computes, empty where the group cannot be pooled: a view tells a verdict, never decides one), one line each,
    and what pooling them means: runs of one machine class, build and profile, but of their own code revision and
    day."""
    if over.empty:
        return ""
    revisions = group["git_revision"].dropna().astype(str).str[:12].unique()
    lines = ["decided over these runs (95% t interval over the runs' medians; a verdict needs 3 runs and must "
             "survive leaving one out)" + (f"; pooled across {len(revisions)} code revisions, so indicative"
                                            if len(revisions) > 1 else "") + ":"]
    for r in over.to_dict("records"):
        interval = f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" if not pd.isna(r["ci_low"]) else ""
        value = f"{r['reproduced']:.3g}{interval}" if not pd.isna(r["reproduced"]) else "-"
        settle = f"; to settle it: {r['settle']}" if isinstance(r.get("settle"), str) and r["settle"] else ""
        lines.append(f"  {r['claim']}: {r['verdict']}, {value} over {r['runs']} runs{settle}")
    return "\n".join(lines) + "\n"
