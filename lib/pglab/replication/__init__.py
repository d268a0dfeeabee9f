"""Layer 3, replication: the systems of the logical_replication study, one module each, one interface (base.py)."""
