"""One subpackage per study: ``params`` (the model), ``collect`` (touches hosts), ``analyze`` (pure).

``collect`` and ``analyze`` are separate modules so that DVC can tell them apart: a change in the
analysis re-runs only the analyze stage.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pglab.errors import UserError

STUDIES = ("synchronous_commit", "logical_replication", "fdw_overhead", "streaming_scale_out",
           "cloud_providers")


def module(study: str, part: str) -> ModuleType:
    """``pglab.studies.<study>.<part>`` with a clear error for an unknown study."""
    if study not in STUDIES:
        raise UserError(f"unknown study {study!r} (known: {', '.join(STUDIES)})")
    return importlib.import_module(f"pglab.studies.{study}.{part}")
