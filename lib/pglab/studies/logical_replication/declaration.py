"""What study 1 is: its question, article, own tables and figures, and its DVC plot (pglab.studies.Study)."""

from pglab.studies import Plot, Study
from pglab.studies.logical_replication import STUDY

DECLARATION = Study(
    name=STUDY,
    question=("Which write rate can a subscriber sustain under streaming, built-in logical, pglogical, Slony-I and "
              "Londiste replication, relative to physical streaming?"),
    article="000: On pglogical performance (2ndQuadrant blog, 2016)",
    tables={"systems.csv": "one row per system asked for: measured or not, and its consistency verdict",
            "effects.csv": "sustainable tps over streaming's per system and clients, with its interval"},
    figures=("catchup", "lag_over_time", "published_vs_reproduced", "ratio_to_streaming", "sustainable_tps",
             "waits"),
    plots=(Plot(name="logical_replication_ratio_to_streaming",
                title="logical_replication: sustainable tps / streaming's, by system",
                x="clients", x_label="pgbench clients on the provider", y_label="sustainable tps relative to streaming",
                y=("streaming", "builtin", "pglogical", "slony", "londiste")),),
)
