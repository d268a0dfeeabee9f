"""What study 4 is: its question, article, own tables and figures (pglab.studies.Study)."""

from pglab.studies import Study
from pglab.studies.cloud_providers import STUDY

DECLARATION = Study(
    name=STUDY,
    question=("How do named database targets compare under the AWS pgbench and sysbench procedure the article "
              "applied to Aurora, RDS and Cloud SQL?"),
    article="003: Benchmarking Managed PostgreSQL Cloud Solutions - Part Three: Google Cloud (Severalnines, 2019)",
    tables={"init_phases.csv": "pgbench -i's phases per target",
            "sysbench.csv": "per target: tps, writes/s, p95, errors, reconnects"},
    figures=("article_context", "init_phases", "published_vs_reproduced", "ranking", "sysbench", "tps_over_time",
             "waits"),
)
