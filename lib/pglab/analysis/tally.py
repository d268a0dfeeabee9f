"""Verdicts counted, those made under an emulated property apart (``pglab.nodes.emulation``).

Why apart: a verdict made with the article's disk imitated answers "does the claim hold on a machine like the
article's", not "does it hold on this machine"; a reader adding the two would count a hardware question as a
software answer. A row of comparison.csv was made under an emulation when its ``emulated`` column says which.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

ORDER = ("held", "did not hold", "not resolvable here", "not measurable here")


def emulated(row: Mapping[str, object]) -> str:
    """The emulation a row's verdict was made under, '' on this machine as it is."""
    v = row.get("emulated")
    return v if isinstance(v, str) else ""


def split(comparison: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(the verdicts on this machine as it is, the verdicts under an emulated property)."""
    under = comparison["emulated"].map(lambda v: isinstance(v, str) and bool(v)).astype(bool) \
        if "emulated" in comparison else pd.Series(False, index=comparison.index)
    return comparison.verdict[~under], comparison.verdict[under]


def words(comparison: pd.DataFrame) -> str:
    """'2 held, 3 not measurable here; under an emulated machine property: 2 held, 1 did not hold'."""
    own, under = split(comparison)

    def counted(v: pd.Series) -> str:
        n = v.value_counts()
        return ", ".join(f"{int(n[k])} {k}" for k in ORDER if k in n)

    return "; ".join(x for x in (counted(own), f"under an emulated machine property: {counted(under)}"
                                 if len(under) else "") if x)
