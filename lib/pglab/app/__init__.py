"""Layer 9, app: what a user runs.

The CLI, the narrow collect entry point of DVC's stages, the notebooks' helpers, run comparison and
the summary of ``make repro``.
"""
