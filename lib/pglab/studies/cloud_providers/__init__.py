"""Study 4: named database targets (local or managed) under the AWS pgbench + sysbench procedure (article 003)."""

STUDY = "cloud_providers"
