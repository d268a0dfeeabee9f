"""What study 5 is: its question, article, own tables and figures (pglab.studies.Study)."""

from pglab.studies import Study
from pglab.studies.streaming_scale_out import STUDY

DECLARATION = Study(
    name=STUDY,
    question=("What does each streaming replication mode cost time-series inserts on the primary, and how do reads "
              "scale out over standbys?"),
    article=("004: A detailed tutorial on scaling PostgreSQL with streaming replication (with performance "
             "measurements) (TimescaleDB's developers, 2018 or later)"),
    tables={"lag.csv": "each standby's replay lag during each load",
            "reads.csv": "queries/s, speed-up and latency per layout, query type and node count"},
    figures=("lag_during_load", "published_vs_reproduced", "reads_by_nodes", "rows_by_mode", "waits"),
)
