"""``--tiny``, for every bench script: sizes that run in seconds, to check that a script still works.

Why: a benchmark is run rarely and at its full size takes minutes, so an API change can break it
unnoticed (harness_overhead did). A tiny run says nothing about the goals; options given explicitly
still win over its sizes.
"""

from __future__ import annotations

import argparse
from typing import Any


def parse(ap: argparse.ArgumentParser, argv: list[str] | None, **sizes: Any) -> argparse.Namespace:
    """``ap``'s arguments, with ``--tiny`` making ``sizes`` the defaults."""
    shown = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in sizes.items())
    ap.add_argument("--tiny", action="store_true", help=f"a run of seconds, to check the script works: {shown}")
    first, _ = ap.parse_known_args(argv)
    if first.tiny:
        ap.set_defaults(**sizes)
    return ap.parse_args(argv)
