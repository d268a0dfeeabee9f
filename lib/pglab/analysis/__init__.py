"""Layer 7, analysis: pure, raw files in, tables and figures out.

Points and their measured window, effects and verdicts, wait events, statistics, placement, figures,
the result every study's analysis returns and writes (``result``), and which runs may be compared at all
(``comparable``: two run records' differences, refused where they change what is measured).
"""
