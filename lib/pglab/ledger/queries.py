"""Five questions a team asks of its ledger, in SQL that SQLite and PostgreSQL answer alike.

They are the parity check between the two engines (``tests/test_ledger.py``) and the benchmark's load
(``bench/ledger_add.py``): plain aggregates only (no engine's own functions), ordered so the answer is one
sequence of rows.
"""

from __future__ import annotations

from typing import Any

from pglab.ledger.backend import Ledger

QUERIES: dict[str, str] = {
    # how many runs of each study ended in each status
    "runs_by_study": "SELECT study, status, COUNT(*) AS n FROM runs GROUP BY study, status ORDER BY study, status",
    # per claim: how many runs judged it each way
    "verdicts_by_claim": "SELECT r.study, c.claim, c.verdict, COUNT(*) AS n FROM claims c JOIN runs r USING (run_id) "
                         "GROUP BY r.study, c.claim, c.verdict ORDER BY r.study, c.claim, c.verdict",
    # per claim: the range of the reproduced value and how many runs reproduced one
    "claim_range": "SELECT c.claim, COUNT(c.reproduced) AS n, MIN(c.reproduced) AS low, MAX(c.reproduced) AS high, "
                   "AVG(c.reproduced) AS mean FROM claims c GROUP BY c.claim ORDER BY c.claim",
    # which machines and PostgreSQL builds made the runs
    "runs_by_machine": "SELECT m.label, r.pg_version, r.pg_family, COUNT(*) AS n FROM runs r JOIN machines m USING "
                       "(machine_key) GROUP BY m.label, r.pg_version, r.pg_family ORDER BY m.label, r.pg_version, "
                       "r.pg_family",
    # what a run costs, per study: wall time, share of it measuring, pglab's own CPU
    "cost_by_study": "SELECT study, COUNT(*) AS n, AVG(wall_s) AS wall_s, AVG(measuring_share) AS share, "
                     "MAX(own_cpu_s) AS own_cpu_s FROM runs GROUP BY study ORDER BY study",
}


def answer(ledger: Ledger, name: str) -> list[tuple[Any, ...]]:
    """The rows of query ``name``, floats rounded to 9 significant digits (the engines sum in different orders)."""
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in ledger.query(QUERIES[name])]
