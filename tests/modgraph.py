"""The import graph of lib/pglab, for the tests: the library's (``pglab.app.modgraph``, which the pipeline
generator ``python -m pglab.app.pipeline`` uses to write each DVC stage's deps).

tests/test_dvc_deps.py uses it to prove that a DVC stage's deps are exactly the modules it runs;
tests/test_layers.py to prove that no layer imports from a layer above it.
"""

from __future__ import annotations

from pglab.app.modgraph import (  # noqa: F401
    BASE,
    LAYERS,
    LIB,
    closure,
    direct_imports,
    layer_of,
    module_file,
    module_name,
    modules,
    source_imports,
)
