"""The ledger's tables: one DDL for SQLite and PostgreSQL (types both read the same way).

``DOUBLE PRECISION`` is REAL in SQLite and float8 in PostgreSQL (PostgreSQL's ``REAL`` is float4, which
would round the numbers and break parity). JSON is kept as TEXT: both engines return it unchanged.
"""

from __future__ import annotations

SCHEMA_VERSION = 5
#: version -> the columns it added, by table (``backend`` adds them to an older ledger when it opens it)
ADDED: dict[int, dict[str, tuple[str, ...]]] = {
    2: {"claims": ("bound_low", "bound_high", "here_verdict")},  # a verdict over runs needs the rule's region
    # the article's machine imitated (pglab.nodes.emulation): runs of another emulation are never pooled, and a
    # verdict made under one is counted apart
    3: {"runs": ("emulation",), "claims": ("emulated",)},
    # why a run is marked (busy at its start, or its machine moved: pglab.runs.marks.marks): list, compare and the
    # history leave such runs out unless asked; NULL in a row added before (its marks unknown)
    4: {"runs": ("marked",)},
}
#: version -> the tables it added (an older ledger gains them, empty, when it is opened to be written)
ADDED_TABLES: dict[int, tuple[str, ...]] = {
    # a campaign as a campaign: its runs and its verdicts over them, the ones every view of it tells
    5: ("campaigns", "campaign_claims"),
}

#: table -> (columns in order, primary key)
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "meta": (("key", "value"), ("key",)),
    "machines": (("machine_key", "label", "hosts", "cores", "cpu_model", "mem_gib", "kernel", "os", "disk",
                  "facts"), ("machine_key",)),
    "runs": (("run_id", "study", "profile", "status", "started", "ended", "wall_s", "measured_s",
              "measuring_share", "own_cpu_s", "seed", "blocks", "points_total", "points_failed", "git_revision",
              "dvc_hash", "machine_key", "hostname", "pg_version", "pg_family", "record_format", "parameters",
              "emulation", "marked"),
             ("run_id",)),
    "analyses": (("run_id", "digest", "analysed_at", "code_revision", "n_points", "n_claims"), ("run_id",)),
    "points": (("run_id", "point", "kind", "block", "grp", "config", "copy", "clients", "tps", "latency_avg_ms",
                "window_s", "stalls", "failed", "extra"), ("run_id", "point")),
    "claims": (("run_id", "claim", "published", "reproduced", "ci_low", "ci_high", "coverage", "blocks", "verdict",
                "rule", "aa_median", "aa_low", "aa_high", "aa_blocks", "noise_floor", "stopped", "note", "bound_low",
                "bound_high", "here_verdict", "emulated"), ("run_id", "claim")),
    # campaign_id: its last run's id (the campaign's folder is that run's); run_ids: JSON, oldest first
    "campaigns": (("campaign_id", "study", "profile", "started", "ended", "run_ids", "left_out", "scope", "digest",
                   "analysed_at", "code_revision"), ("campaign_id",)),
    "campaign_claims": (("campaign_id", "claim", "published", "reproduced", "ci_low", "ci_high", "verdict", "rule",
                         "bound_low", "bound_high", "n_runs", "scope", "note", "here_verdict", "emulated"),
                        ("campaign_id", "claim")),
}

REAL = {"wall_s", "measured_s", "measuring_share", "own_cpu_s", "mem_gib", "tps", "latency_avg_ms", "window_s",
        "published", "reproduced", "ci_low", "ci_high", "coverage", "aa_median", "aa_low", "aa_high", "noise_floor",
        "bound_low", "bound_high"}
INTEGER = {"cores", "seed", "blocks", "points_total", "points_failed", "record_format", "n_points", "n_claims",
           "block", "copy", "clients", "stalls", "failed", "aa_blocks", "hosts", "n_runs"}


def ddl(sqlite: bool = False) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` for every table, and the indexes the history and the list read by. In
    SQLite the tables are clustered on their key (``WITHOUT ROWID``): the key is stored once, not again in an
    index, a tenth of the file (the reference ledger is in git)."""
    out = []
    for table, (cols, key) in TABLES.items():
        typed = [f"{c} {column_type(c)}" + (" NOT NULL" if c in key else "") for c in cols]
        out.append(f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(typed)}, PRIMARY KEY ({', '.join(key)}))"
                   + (" WITHOUT ROWID" if sqlite else ""))
    out.append("CREATE INDEX IF NOT EXISTS runs_study ON runs (study, started)")
    out.append("CREATE INDEX IF NOT EXISTS claims_claim ON claims (claim)")
    return out


def column_type(column: str) -> str:
    return "DOUBLE PRECISION" if column in REAL else "BIGINT" if column in INTEGER else "TEXT"
