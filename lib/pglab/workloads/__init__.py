"""Workloads (layer 4): what runs against targets from a chosen client host, raw output recorded first.

``pgbench`` runs pgbench; ``cpu`` samples the CPU shares (steal) of a host around a measurement.
"""
