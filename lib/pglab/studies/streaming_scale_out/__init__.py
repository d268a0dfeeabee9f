"""Study 5: what each streaming replication mode costs time-series inserts, and how reads scale out."""

STUDY = "streaming_scale_out"
#: The study's question in one sentence: the first line of its report.
QUESTION = (
    'What does each streaming replication mode cost time-series inserts on the primary, and how do reads '
    'scale out over standbys?')
