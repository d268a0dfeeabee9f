"""Layer 2, nodes: PostgreSQL on a host.

Workspaces, nodes (init, start, stop, base backup, promote, query with deadlines), targets (anything a
workload connects to) and topologies built from nodes.
"""
