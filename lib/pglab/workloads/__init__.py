"""Layer 5, workloads: what runs against targets from a chosen client host, raw output recorded first.

``pgbench`` and ``sysbench`` run their tools; ``cpu`` samples the CPU shares (steal) of a host around a
measurement; ``waits`` samples wait events; ``tsbs`` is the time-series loader and query runner.
"""
