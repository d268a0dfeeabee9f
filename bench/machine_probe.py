"""How still the machine probe is: the drift it reports between two probes of an idle machine, one timing against
the probe as pglab takes it.

Why: a run is marked when its start and end probes (``pglab.hosts.machine_state``) differ by more than ``DRIFT`` (a
factor of 2 in the CPU loop's time, 1.5 in the disk's flush rate), and a marked run is left out of the verdicts. A
probe noisier than that marks runs of a machine that sat still: one timing of the CPU loop moved 27-58 ms within a
minute on this project's VM, and 7 of 10 shipped runs were marked by one-shot probes. This script takes ``--probes``
probes of the local host back to back (nothing else of pglab running; the statement probe on a server of its
own, ``pglab.workloads.statement_probe``) and prints, for one timing (``repeats`` 1) and
for the probe as pglab takes it (the median of ``REPEATS`` loops, the best of ``REPEATS_FLUSH`` flush windows): each
quantity's median, its range, the largest ratio of two consecutive probes and the share of consecutive pairs that
would mark a run. Goal: no pair of pglab's probes of an idle machine would mark a run (a figure to read, not a test:
it depends on the machine).

Run from the project root on an idle machine::

    .venv/bin/python bench/machine_probe.py               # 20 probes
    .venv/bin/python bench/machine_probe.py --tiny        # seconds: does the script still work?
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import tiny
from pglab.hosts import machine_state
from pglab.hosts.inventory import load_inventory
from pglab.hosts.local import LocalHost
from pglab.runs.session import session
from pglab.workloads import statement_probe


def _marks(values: list[float], factor: float) -> float:
    pairs = [(a, b) for a, b in zip(values, values[1:], strict=False) if a and b]
    return sum(max(a, b) / min(a, b) > factor for a, b in pairs) / max(1, len(pairs))


def _line(name: str, values: list[float]) -> str:
    v = [x for x in values if x]
    if not v:
        return f"  {name:<34} not measured"
    factor = machine_state.DRIFT["cpu_loop_ms" if name.startswith("CPU") else "statement_us"
                                 if name.startswith("statement") else "flush_ops_s"]
    pairs = [max(a, b) / min(a, b) for a, b in zip(v, v[1:], strict=False)]
    return (f"  {name:<34} median {statistics.median(v):>9,.1f}  range {min(v):,.1f}-{max(v):,.1f}  "
            f"largest pair {max(pairs, default=1):.2f}x  pairs past {factor:g}x: {_marks(v, factor):.0%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", type=int, default=20, help="probes taken back to back")
    args = tiny.parse(ap, argv, probes=3)
    host = LocalHost()
    rows: dict[str, list[float]] = {"CPU loop, one timing (ms)": [], "CPU loop, pglab's probe (ms)": [],
                                    "flush rate, one window (/s)": [], "flush rate, pglab's probe (/s)": [],
                                    "statement, one batch (us)": [], "statement, pglab's probe (us)": []}
    with tempfile.TemporaryDirectory(prefix="pglab-probe-") as workdir, session(load_inventory(None)) as s:
        node = s.deploy.node("probe", "local").start()  # a real server for the statement probe, stopped at the end
        for _ in range(args.probes):
            rows["CPU loop, one timing (ms)"].append(machine_state.cpu_loop_ms(host, repeats=1) or 0)
            rows["CPU loop, pglab's probe (ms)"].append(machine_state.cpu_loop_ms(host) or 0)
            rows["flush rate, one window (/s)"].append(machine_state.flush_rate(host, workdir, repeats=1) or 0)
            rows["flush rate, pglab's probe (/s)"].append(machine_state.flush_rate(host, workdir) or 0)
            rows["statement, one batch (us)"].append(statement_probe.per_statement_us(node, repeats=1) or 0)
            rows["statement, pglab's probe (us)"].append(statement_probe.per_statement_us(node) or 0)
    print(f"{args.probes} probes of this machine, back to back; a run is marked past a factor of "
          f"{machine_state.DRIFT['cpu_loop_ms']:g} (CPU), {machine_state.DRIFT['flush_ops_s']:g} (flush) or "
          f"{machine_state.DRIFT['statement_us']:g} (statement, SELECT 1 x {statement_probe.statements()}, "
          f"median of {statement_probe.REPEATS} batches)")
    for name, values in rows.items():
        print(_line(name, values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
