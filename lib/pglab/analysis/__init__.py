"""Layer 7, analysis: pure, raw files in, tables and figures out.

Points and their measured window, effects and verdicts, wait events, statistics, placement, figures,
and the result every study's analysis returns and writes (``result``).
"""
