"""Layer 4, runs: one measured run.

The raw store and the runs index, parameters and preflight, the sweep that owns the loop (plan,
seeded order, progress, resume), the session that deploys nodes, signals, and cleanup of leftovers.
"""
