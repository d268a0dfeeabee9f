"""pgbench per-transaction logs (``-l``) for analysis: latencies merged over logs, exact percentiles.

One implementation, in ``pglab.parsers.pgbench`` (streamed in chunks through pyarrow's CSV reader,
only the successful latencies kept: about 23x `wc -l` and under 1x the file's size in memory on this
machine, see bench/parse_speed.py); this module names what analysis uses of it.
"""

from __future__ import annotations

from pglab.parsers.pgbench import merged_percentiles, transaction_latencies_ms

__all__ = ["merged_percentiles", "transaction_latencies_ms"]
