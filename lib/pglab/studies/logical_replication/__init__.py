"""Study 1 (article 000): sustainable throughput of five replication systems."""

STUDY = "logical_replication"
