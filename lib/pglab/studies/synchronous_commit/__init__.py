"""Study 3: what each synchronous_commit level costs a primary with a synchronous standby."""

STUDY = "synchronous_commit"
#: The study's question in one sentence: the first line of its report.
QUESTION = (
    'How much write throughput does each synchronous_commit level cost a primary with one synchronous '
    "standby, and do the standby's reads suffer when the primary is loaded?")
