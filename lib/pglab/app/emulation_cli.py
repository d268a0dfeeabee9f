"""``pglab emulation``: is the article's disk imitated faithfully on this machine? (``pglab.nodes.emulation``)

Each flush level is measured the way a run measures it before it starts (pglab-flushprobe, with the library and
without), and, with ``--pg-test-fsync``, by PostgreSQL's own pg_test_fsync run under the library: the number a
DBA would check a disk with. Exit 1 when a level is not within 10% of the rate it names, 2 when the emulation
is not built here.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from typing import Any

from pglab.emulated import PRESETS, label, latency_ms
from pglab.errors import UserError
from pglab.hosts.local import LocalHost
from pglab.nodes import emulation

PG_TEST_FSYNC = "/usr/lib/postgresql/15/bin/pg_test_fsync"


def add_parser(sub: Any) -> None:
    e = sub.add_parser("emulation", help="measure the flush emulation here: each level's fdatasync rate against "
                                         "the rate it names, its CPU per flush, and pg_test_fsync under it")
    e.add_argument("levels", nargs="*", default=[p for p in PRESETS if p != "own"],
                   help=f"flush levels: presets ({', '.join(PRESETS)}) or milliseconds (default: every preset)")
    e.add_argument("--pg-test-fsync", action="store_true", help="also run pg_test_fsync -s 1 under each level "
                                                                "(16 methods: about 20 s a level)")
    e.add_argument("--pg-test-fsync-bin", default=PG_TEST_FSYNC, help="the pg_test_fsync to run")
    e.set_defaults(func=cmd_emulation)


def _level(text: str) -> str | float:
    try:
        return float(text)
    except ValueError:
        return text


def cmd_emulation(a: argparse.Namespace) -> int:
    host = LocalHost()
    problems = emulation.problems(emulation.Emulation(("hdd_7200",)), [host])
    if problems:
        print("\n".join(problems))
        return 2
    levels = [_level(x) for x in a.levels]
    for lv in levels:
        try:
            latency_ms(lv)  # a bad level is named before anything runs
        except ValueError as exc:
            raise UserError(str(exc)) from None
    missed = []
    with tempfile.TemporaryDirectory(prefix="pglab-emulation-") as tmp:
        disk = emulation.Disk(host, f"{tmp}/disk.ctl", host.login_user)
        disk.set(0)
        measured = disk.measure(levels, f"{tmp}/probe")
        print(f"{'level':<22}{'names /s':>10}{'probe /s':>10}{'off by':>8}{'CPU us/flush':>14}"
              + (f"{'pg_test_fsync fdatasync /s':>28}" if a.pg_test_fsync else ""))
        for lv in levels:
            m = measured[label(lv)]
            line = (f"{label(lv):<22}{m['named_ops_s']:>10.1f}{m['measured_ops_s']:>10.1f}"
                    f"{m['measured_ops_s'] / m['named_ops_s'] - 1:>+8.1%}{m['cpu_us_per_flush']:>14.0f}")
            if a.pg_test_fsync:
                disk.set(lv)
                out = host.run([a.pg_test_fsync_bin, "-s", "1", "-f", f"{tmp}/pg_test_fsync.tmp"], env=disk.env(),
                               timeout=600).stdout
                found = re.search(r"^\s+fdatasync\s+([\d.]+) ops/sec", out, re.M)
                line += f"{found[1] if found else 'not found':>28}"
            print(line)
            if m["faithful"] is False:
                missed.append(label(lv))
        print(f"this machine's disk without the library: {next(iter(measured.values()))['own_ops_s']:,.0f} "
              "fdatasync/s (pglab-flushprobe, 8 kB writes)")
    print(f"within {emulation.FIDELITY:.0%} of the rate each level names: "
          + ("every level" if not missed else f"not {', '.join(missed)}"))
    return 1 if missed else 0
