"""The flush emulation's fidelity and cost (pglab.nodes.emulation), on this machine, quiet.

For each preset: pglab-flushprobe's fdatasync rate through the library against the rate the preset names
(goal: within 10%), the CPU the emulation adds per flush, and pg_test_fsync's fdatasync line under it (what a
DBA would run). Prints a table; exits 1 when a preset misses the goal.

    python bench/flush_emulation.py [--tiny]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

from pglab.hosts.local import LocalHost
from pglab.nodes import emulation

PG_TEST_FSYNC = "/usr/lib/postgresql/15/bin/pg_test_fsync"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="one preset, no pg_test_fsync (the suite's smoke run)")
    args = ap.parse_args()
    if emulation.problems(emulation.Emulation(("hdd_7200",)), [LocalHost()]):
        print("flush emulation not built: run make setup as root")
        return 1
    presets = ["hdd_7200"] if args.tiny else ["hdd_15k", "hdd_10k", "hdd_7200", "hdd_5400"]
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        ctl = f"{tmp}/disk.ctl"
        disk = emulation.Disk(LocalHost(), ctl, LocalHost().login_user)
        disk.set(0)
        got = disk.measure(presets, f"{tmp}/probe")
        print(f"{'preset':<20} {'named/s':>8} {'probe/s':>8} {'off by':>7} {'CPU us/flush':>13} {'pg_test_fsync':>14}")
        for name, m in got.items():
            off = m["measured_ops_s"] / m["named_ops_s"] - 1
            line = ""
            if not args.tiny:
                disk.set(m["latency_ms"])
                out = subprocess.run([PG_TEST_FSYNC, "-s", "1", "-f", f"{tmp}/fs"], capture_output=True, text=True,
                                     env={**os.environ, **disk.env()}).stdout
                line = re.search(r"^\s+fdatasync\s+([\d.]+) ops/sec", out, re.M)[1]
            print(f"{name:<20} {m['named_ops_s']:>8.1f} {m['measured_ops_s']:>8.1f} {off:>+7.1%} "
                  f"{m['cpu_us_per_flush']:>13.0f} {line:>14}")
            if not m["faithful"]:
                missed.append(name)
        print(f"this disk: {next(iter(got.values()))['own_ops_s']:,.0f} fdatasync/s without the library")
    print(f"goal: every preset within {emulation.FIDELITY:.0%} of the rate it names: "
          + ("met" if not missed else f"missed by {', '.join(missed)}"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
