"""Study 2: what reaching pgbench tables through postgres_fdw costs, and why."""

STUDY = "fdw_overhead"
#: The study's question in one sentence: the first line of its report.
QUESTION = (
    "How much throughput does reaching pgbench's tables through postgres_fdw cost compared with querying "
    'them directly, and why?')
