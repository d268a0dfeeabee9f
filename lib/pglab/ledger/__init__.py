"""The ledger: every run of every study, on any machine, in one queryable store (above the studies).

A run folder is the truth; the ledger is an index of run records (``pglab.runs.record``) and of their
analyses: runs, the machines that made them, points and claims, each row linked to its raw run (run id,
DVC hash, git revision). SQLite by default (a file, no set-up), PostgreSQL for a team (a URL), the same
schema and the same answers. It is filled after a run or an analysis, never while one measures; adding
the same run twice changes nothing, and ledgers of several machines merge without conflict.
"""
