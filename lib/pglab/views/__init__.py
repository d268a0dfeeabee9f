"""Layer 10, views: every page, table and printed summary a reader meets, drawn from the verdicts the analysis
and the ledger keep.

The study report and the index (``report``, ``takeaway``, ``verdict_table``, ``fidelity_html``, ``where_ran``,
``report_notebook``), your run beside the reference (``beside``, ``side_by_side``), the claims x majors table
(``majors_table``), the history page (``history``, ``history_figures``), the ledger's campaign lines
(``ledger_views``), tables for people (``frames``), the docs' generated blocks (``docs_verdicts``), an SLO
campaign's page (``slo_report``) and ``make repro``'s closing summary (``summary``). Why a room of their own: a
view that computed its own verdict once told a different story from the next one; here every view reads a
verdict, none decides one, and the commands above (``pglab.app``) only choose which view to draw.
"""
