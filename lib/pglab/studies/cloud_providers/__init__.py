"""Study 4: named database targets (local or managed) under the AWS pgbench + sysbench procedure (article 003)."""

STUDY = "cloud_providers"
#: The study's question in one sentence: the first line of its report.
QUESTION = (
    'How do named database targets compare under the AWS pgbench and sysbench procedure the article '
    'applied to Aurora, RDS and Cloud SQL?')
