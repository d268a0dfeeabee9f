"""Layer 7, analysis: pure, raw files in, tables and figures out.

Points and their measured window, effects and verdicts, statistics, placement, figures.
"""
