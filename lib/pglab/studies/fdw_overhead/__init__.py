"""Study 2: what reaching pgbench tables through postgres_fdw costs, and why."""

STUDY = "fdw_overhead"
