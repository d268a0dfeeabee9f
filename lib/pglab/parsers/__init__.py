"""Layer 6, parsers: tool output as it was written to the raw store in, plain data out.

One module per tool output: ``pgbench`` (9.5 to 18: summary, progress, ``-r``, ``-i``), ``txlog``
(pgbench's per-transaction logs, read by ``txlog_*``), ``aggregate_log`` (pgbench's aggregate logs),
``sysbench`` (0.5 and 1.0), ``fsync`` (pg_test_fsync); ``text`` holds what pgbench's text parsers share;
``detect`` guesses the format of a file for ``pglab parse``. Nothing here touches a host.
"""
