"""pgbench per-transaction logs (``-l``) for analysis: latencies merged over logs, exact percentiles.

One implementation, in ``pglab.parsers.pgbench`` (streamed in chunks through a compiled loop on every
core, pyarrow's CSV reader for what it refuses, only the successful latencies kept, counted in histograms
for percentiles: 4.3-4.8x `wc -l` and a tenth of the file's size in memory on this 2-core machine when
nothing else runs, up to 8x when other work shares the cores, see bench/parse_speed.py); this module
names what analysis uses of it.
"""

from __future__ import annotations

from pglab.parsers.pgbench import merged_percentiles, transaction_latencies_ms

__all__ = ["merged_percentiles", "transaction_latencies_ms"]
