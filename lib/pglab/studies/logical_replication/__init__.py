"""Study 1 (article 000): sustainable throughput of five replication systems."""

STUDY = "logical_replication"
#: The study's question in one sentence: the first line of its report.
QUESTION = (
    'Which write rate can a subscriber sustain under streaming, built-in logical, pglogical, Slony-I and '
    'Londiste replication, relative to physical streaming?')
