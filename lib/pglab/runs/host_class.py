"""A host fact without what changes between two runs of one machine: what ``pglab compare`` and the ledger's
machine key both compare, so that they never disagree on what one machine is."""

from __future__ import annotations

import re
from typing import Any


def disk(value: Any) -> Any:
    """``disk_tmp`` without its free space (which changes between any two runs)."""
    return re.sub(r",?\s*\d+ KiB free", "", value) if isinstance(value, str) else value


def kernel_release(value: Any) -> Any:
    """``Linux 6.18.44 x86_64`` of ``Linux 6.18.44-fc-v669 x86_64``: the release, without the build suffix
    (a VM's kernel is rebuilt without a release change; the suffix stays in the table, as a note)."""
    m = re.fullmatch(r"(\S+) (\d+(?:\.\d+)*)\S* (\S+)", value) if isinstance(value, str) else None
    return f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else value
