"""The flush emulation's fidelity and cost (pglab.nodes.emulation), on this machine, quiet.

For each preset: pglab-flushprobe's fdatasync rate through the library against the rate the preset names
(goal: within 10%), the CPU the emulation adds per flush, and pg_test_fsync's fdatasync line under it (what a
DBA would run). It is `pglab emulation --pg-test-fsync` (pglab.app.emulation_cli) as a benchmark: a table, and
exit 1 when a preset misses the goal (2 when the emulation is not built here).

    python bench/flush_emulation.py [--tiny]
"""

from __future__ import annotations

import argparse
import sys

from pglab.app.emulation_cli import PG_TEST_FSYNC, cmd_emulation
from pglab.emulated import PRESETS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="one preset, no pg_test_fsync (the suite's smoke run)")
    tiny = ap.parse_args().tiny
    levels = ["hdd_7200"] if tiny else [p for p in PRESETS if p != "own"]
    return cmd_emulation(argparse.Namespace(levels=levels, pg_test_fsync=not tiny, pg_test_fsync_bin=PG_TEST_FSYNC))


if __name__ == "__main__":
    sys.exit(main())
