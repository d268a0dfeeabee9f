"""Study 5: what each streaming replication mode costs time-series inserts, and how reads scale out."""

STUDY = "streaming_scale_out"
