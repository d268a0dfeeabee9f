"""What study 2 is: its question, article, own tables and figures (pglab.studies.Study)."""

from pglab.studies import Study
from pglab.studies.fdw_overhead import STUDY

DECLARATION = Study(
    name=STUDY,
    question=("How much throughput does reaching pgbench's tables through postgres_fdw cost compared with querying "
              "them directly, and why?"),
    article="001: postgres_fdw estimated overhead (3manuek.com, 2017)",
    tables={"latency.csv": "per-transaction latency percentiles by target",
            "why": "round_trips.csv and remote_sql.csv: what postgres_fdw sends, and how often",
            "fidelity.csv": "under a calibrated emulation: the article's tps of each workload and target beside "
                            "the run's, calibration points and predictions (docs/emulation.md)"},
    figures=("latency_by_target", "overhead_factor", "published_vs_reproduced", "round_trips", "tps_by_target",
             "waits"),
)
