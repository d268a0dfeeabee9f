"""Replication systems for the logical_replication study: one module each, one interface (base.py)."""
