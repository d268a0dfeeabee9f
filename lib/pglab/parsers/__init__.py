"""Layer 6, parsers: tool output as it was written to the raw store in, plain data out.

One module per tool: ``pgbench`` (9.5 to 18: summary, progress, ``-i``, per-transaction and aggregate
logs), ``sysbench`` (0.5 and 1.0), ``fsync`` (pg_test_fsync); ``detect`` guesses the format of a file
for ``pglab parse``. Nothing here touches a host.
"""
