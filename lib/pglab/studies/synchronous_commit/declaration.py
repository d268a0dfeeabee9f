"""What study 3 is: its question, article, own tables and figures, and its DVC plot (pglab.studies.Study)."""

from pglab.studies import Plot, Study
from pglab.studies.synchronous_commit import STUDY

DECLARATION = Study(
    name=STUDY,
    question=("How much write throughput does each synchronous_commit level cost a primary with one synchronous "
              "standby, and do the standby's reads suffer when the primary is loaded?"),
    article=("002: PostgreSQL streaming replication, part 3: performance compared by replication configuration "
             "(a Japanese company's technical blog, 2014)"),
    tables={"fsync.csv": "pg_test_fsync's operations per second by section and method: the disk's flush rate",
            "latency.csv": "the writes' per-transaction latency by level and client count",
            "flush_ladder.csv": "each level's ratio to on at each emulated flush latency (docs/emulation.md), with "
                                "the flush rate each latency was measured at",
            "fidelity.csv": "under a calibrated emulation: every tps the article published beside the run's (a "
                            "campaign's over its runs), calibration points and predictions (docs/emulation.md)"},
    figures=("published_vs_reproduced", "ratio_to_on", "standby_reads", "tps_by_clients", "waits", "flush_ladder"),
    plots=(Plot(name="synchronous_commit_ratio_to_on", title="synchronous_commit: tps / tps(on) by level",
                x="clients", x_label="pgbench clients", y_label="tps relative to synchronous_commit = on",
                y=("on", "remote_apply", "remote_write", "local", "off")),),
)
