"""Leave packages out of requirements.lock that a dependency pulls in but nothing pglab runs uses.

Why: ``rfc3987-syntax`` (with ``lark``) comes with jupyter-events' ``jsonschema[format-nongpl]``. It builds an
Earley parser when imported, and jsonschema imports it whenever it is installed: 3 s of CPU at the start of
every papermill, nbconvert and Jupyter process (measured: ``import papermill`` 4.2 s with it, 1.6 s without).
It only checks the syntax of the JSON-schema formats ``iri`` and ``iri-reference``, which jsonschema skips
when the package is absent; nothing pglab runs validates them. ``pip check`` stays clean (an extra's
packages are not a requirement of the package that names the extra).

Usage (``make lock`` runs it): ``python scripts/lock_prune.py requirements.lock``
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LEFT_OUT = ("lark", "rfc3987-syntax")
NOTE = "# left out by scripts/lock_prune.py (see there why): " + ", ".join(LEFT_OUT) + "\n"


def prune(text: str) -> str:
    """The lock without the blocks (pin line and its `# via` lines) of LEFT_OUT, with a note saying so."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        pin = re.match(r"^([A-Za-z0-9._-]+)==", line)
        if pin:
            skipping = pin.group(1).lower() in LEFT_OUT
        elif not line.startswith("    "):
            skipping = False
        if not skipping and line != NOTE:
            out.append(line)
    body = "".join(out)
    return body.replace("#    make lock\n#\n", "#    make lock\n#\n" + NOTE, 1)


if __name__ == "__main__":
    path = Path(sys.argv[1])
    path.write_text(prune(path.read_text()))
