"""The article's five claims about postgres_fdw's overhead, and which workloads and targets an open one needs.

One place for both uses: the analysis decides each claim from the run's per-block ratios, and the collect's
first look (``pglab.workloads.adaptive``) asks which (workload, target) pairs the blocks it adds must measure.
Imported by the collect stage, so it holds the claims and their per-block values, nothing that draws or
reads files.

Every value is taken at 1 client, the article's client count (every client count of the workload when 1 was
not run), and every per-block value over the blocks that measured everything it needs: a block added for one
open claim (RO only, say) never enters another claim as a half-measured block. Each size claim is centred on the
article's table (its factors from its mean tps), and each claim names what it depends on: the commit cost for
what RW weighs, the per-query CPU for what RO weighs (``FdwClaim.depends``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pglab.analysis import claims, effects
from pglab.analysis.claims import Claim
from pglab.analysis.effects import AA

FOREIGN_RW = ("FDW_local", "FDW_external")
FOREIGN = ("FDW_local", "FDW_external", "FDW_ext_ro")
#: the article's overhead factors, tps(local) / tps(target) from its mean tps (data/reference/fdw_overhead.csv,
#: which the analysis reads; tests/test_fdw_first_look.py checks the two agree). The first look needs them for
#: the bounds that depend on the article's numbers (each size claim is centred on them).
ARTICLE: dict[tuple[str, str], float] = {
    ("RW", "FDW_local"): 219.2062 / 133.1675, ("RW", "FDW_external"): 219.2062 / 124.5781,
    ("RO", "FDW_local"): 11475.249 / 1476.397, ("RO", "FDW_external"): 11475.249 / 1519.091,
    ("RO", "FDW_ext_ro"): 11475.249 / 1507.400,
}
#: the points of the article's table an emulation is calibrated on (``pglab.workloads.calibrate``): the local
#: instance at 1 client, RO for the CPU (87 us a transaction), then RW for the disk's flush (4.6 ms); no claim is
#: about either alone (each is a foreign target over local)
CALIBRATION = {"RO": ("cpu", 11475.249), "RW": ("flush", 219.2062)}
RO_CLIENTS = 1  # the article's numbers are at 1 client: every claim is judged there when it was run
RW_CLIENTS = 1
#: what a claim's answer depends on: "commit" (a local RW transaction's cost, mostly its flush) for what RW weighs,
#: "cpu" (a local RO transaction's cost, CPU per query) for what RO weighs
COMMIT, CPU = "commit", "cpu"


@dataclass(frozen=True)
class FdwClaim:
    """A claim, what its per-block value is, the (workload, target) pairs that value needs, and the machine
    properties its answer depends on."""

    key: str
    claim: Claim
    how: str  # what comparison.csv's note says the per-block value is
    needs: tuple[tuple[str, str], ...]
    depends: tuple[str, ...] = ()


def _geo(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def claim_set(factors: Mapping[tuple[str, str], float] = ARTICLE) -> dict[str, FdwClaim]:
    """The six claims, each with its published value from ``factors`` (the article's, by default), and each size
    claim centred on it: the article's table, not its words (its "6.5x" for RO is 7.6x in its table)."""
    pub_rw = _geo([factors["RW", t] for t in FOREIGN_RW])
    pub_ro = _geo([factors["RO", t] for t in FOREIGN])
    pub_rel = _geo([factors["RO", t] for t in FOREIGN_RW]) / pub_rw  # as per block: the targets RW ran through
    pub_ext_ro = factors["RO", "FDW_external"] / factors["RO", "FDW_ext_ro"]
    pub_ext = _geo([factors[w, "FDW_local"] / factors[w, "FDW_external"] for w in ("RW", "RO")])
    both = tuple((w, t) for w in ("RW", "RO") for t in FOREIGN_RW)
    rel_how = "per block: RO factor / RW factor (FDW_local and FDW_external, the same block number), at 1 client"
    return {c.key: c for c in (
        FdwClaim("RW", claims.about(f"RW through postgres_fdw is about {pub_rw:.2g}x slower than local", pub_rw,
                                    pub_rw),
                 "per block: geometric mean over FDW_local and FDW_external of tps(local) / tps(target), RW at 1 "
                 "client", tuple(("RW", t) for t in FOREIGN_RW), (COMMIT,)),
        FdwClaim("RO", claims.about(f"RO through postgres_fdw is about {pub_ro:.2g}x slower than local", pub_ro,
                                    pub_ro),
                 "per block: geometric mean over the foreign targets of tps(local) / tps(target), RO at 1 client",
                 tuple(("RO", t) for t in FOREIGN), (CPU,)),
        FdwClaim("RO/RW", claims.direction("the RO overhead factor is above the RW factor", pub_rel), rel_how, both,
                 (CPU, COMMIT)),
        FdwClaim("RO/RW size", claims.about(f"the RO overhead factor is about {pub_rel:.2g}x the RW factor", pub_rel,
                                            pub_rel), rel_how, both, (CPU, COMMIT)),
        FdwClaim("ext_ro", claims.no_worse("FDW_ext_ro is no faster than FDW_external", pub_ext_ro,
                                           higher_is_better=False),
                 "per block: tps(FDW_ext_ro) / tps(FDW_external), RO at 1 client",
                 (("RO", "FDW_external"), ("RO", "FDW_ext_ro")), (CPU,)),
        FdwClaim("external", claims.no_worse("FDW_external is no slower than FDW_local", pub_ext),
                 "per block: tps(FDW_external) / tps(FDW_local), geometric mean over RW and RO, each at 1 client",
                 both, (COMMIT, CPU)),
    )}


@dataclass(frozen=True)
class Blocks:
    """The run's ratios per block: RW and RO, each at 1 client (the article's; every client count of the workload
    without it)."""

    rw: pd.DataFrame
    ro1: pd.DataFrame

    @classmethod
    def of(cls, ratios: pd.DataFrame, planned: Mapping[str, Sequence[int]] | None = None) -> Blocks:
        """``ratios``: ``effects.block_ratios`` of the main variant (columns kind and clients among them);
        ``planned``: the client counts the run planned per workload (``rw_clients``, ``ro_clients``). A claim about
        1 client falls back to another count only where 1 was not planned: where its points were measured and left
        out (CPU steal, another load), the claim has no value, never the 5-client one in its place."""
        planned = planned or {}
        return cls(_per_block(ratios, "RW", RW_CLIENTS, planned.get("RW")),
                   _per_block(ratios, "RO", RO_CLIENTS, planned.get("RO")))

    def aa(self) -> pd.Series:
        """One A/A per block: the geometric mean of RW's and RO's (each at 1 client) where both ran."""
        aa = pd.concat([self.rw.get(AA, pd.Series(dtype=float)), self.ro1.get(AA, pd.Series(dtype=float))])
        return np.exp(np.log(aa).groupby(level=0).mean()) if len(aa) else aa

    def noise_floor(self) -> float:
        return effects.noise_floor(pd.concat([self.rw.get(AA, pd.Series(dtype=float)),
                                              self.ro1.get(AA, pd.Series(dtype=float))]))

    def values(self, key: str) -> pd.Series:
        """The per-block values of claim ``key`` (empty when the run measured nothing it needs)."""
        if key == "RW":
            return _geo_cols(self.rw, FOREIGN_RW)
        if key == "RO":
            return _geo_cols(self.ro1, FOREIGN)
        if key in ("RO/RW", "RO/RW size"):
            both = pd.concat([_geo_cols(self.ro1, FOREIGN_RW).rename("ro"),
                              _geo_cols(self.rw, FOREIGN_RW).rename("rw")], axis=1).dropna()
            return both.ro / both.rw
        if key == "ext_ro":
            if not {"FDW_ext_ro", "FDW_external"} <= set(self.ro1):
                return pd.Series(dtype=float)
            return (self.ro1["FDW_external"] / self.ro1["FDW_ext_ro"]).dropna()
        if key == "external":
            per = [t["FDW_local"] / t["FDW_external"] for t in (self.rw, self.ro1) if set(FOREIGN_RW) <= set(t)]
            if not per:  # the workloads the run measured both in; a block needs each of them
                return pd.Series(dtype=float)
            both = pd.concat(per, axis=1).dropna()
            return np.exp(np.log(both).mean(axis=1))
        raise KeyError(key)


def _per_block(ratios: pd.DataFrame, kind: str, clients: int | None = None,
               planned: Sequence[int] | None = None) -> pd.DataFrame:
    r = ratios[ratios.kind == kind]
    if clients is not None and ((planned is not None and clients in planned) or (r.clients == clients).any()):
        r = r[r.clients == clients]
    return effects.per_block(r)


def _geo_cols(df: pd.DataFrame, cols: tuple[str, ...]) -> pd.Series:
    """Per block: the geometric mean over those of ``cols`` the run measured; only the blocks that measured
    every one of them (a block added for another claim may lack some)."""
    present = [c for c in cols if c in df]
    if not present:
        return pd.Series(dtype=float)
    return np.exp(np.log(df[present]).mean(axis=1, skipna=False)).dropna()


def open_pairs(ratios: pd.DataFrame, planned: Mapping[str, Sequence[int]] | None = None) -> set[str]:
    """The first look: the ``workload:target`` pairs (``RO:FDW_ext_ro``) that a claim still open at 95% needs.
    A claim decided, or not measurable in this run, needs nothing more."""
    blocks = Blocks.of(ratios, planned)
    aa = blocks.aa()
    run = {f"{k}:{t}" for k, t in zip(ratios.kind, ratios.config, strict=True)} if len(ratios) else set()
    needed: set[str] = set()
    for c in claim_set().values():
        x = blocks.values(c.key)
        if claims.is_open(c.claim, x, aa):
            needed.update(f"{w}:{t}" for w, t in c.needs)
    return needed & run  # a pair the run does not measure (a target it left out) is no block's business
