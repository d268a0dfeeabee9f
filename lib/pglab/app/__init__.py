"""Layer 11, app: what a user runs.

The CLI and its commands, the narrow collect entry point of DVC's stages, the notebooks' helpers, campaigns,
``make repro``, the majors sweep, the SLO search and the DVC pipeline's writer. What a reader sees is drawn
by the views below (``pglab.views``).
"""
