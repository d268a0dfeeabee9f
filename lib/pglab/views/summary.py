"""Printed at the end of `make repro`: where each study's figures, tables and report are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pglab.runs import campaign, record
from pglab.studies import STUDIES


def main() -> None:
    for study in STUDIES:
        figs = sorted(Path("figures", study).glob("*.png"))
        metrics = Path("data/derived", study, "details.json")
        print(f"\n{study}:")
        print(f"  figures : {', '.join(str(f) for f in figs) or 'none'}")
        print(f"  tables  : data/derived/{study}/")
        print(f"  report  : reports/{study}.html (executed notebook: reports/{study}.ipynb)")
        if metrics.exists():
            m = json.loads(metrics.read_text())
            n = len(campaign.members(Path("data/raw", study)))
            print(f"  run     : data/raw/{study}/ = data/runs/{study}/{m.get('run_id')} (profile {m.get('profile')})"
                  + (f", the last of a campaign of {n} runs" if n > 1 else ""))
            print(f"  {'time':<34}: {cost(Path('data/raw', study, 'manifest.json'))}")
            for k in ("tps_at_clients_max", "ratio_to_on", "standby_read_tps", "fdatasync_ops_s",
                      "sustainable_tps_at_clients_max", "ratio_to_streaming_at_clients_max", "consistency",
                      "overhead_factor", "rows_per_s", "ratio_to_none", "ranking"):
                if k in m:
                    print(f"  {k:<34}: {m[k]}")
            for claim, verdict in (m.get("verdicts") or {}).items():
                print(f"  verdict: {claim}: {verdict}")


def cost(manifest: Path) -> str:
    """What the run cost: its wall time, the share of it spent measuring (goal 0.85 at quick) and pglab's
    own CPU (goal at most 0.5% of the machine)."""
    if not manifest.exists():
        return "no manifest"
    wall, share, cpu = costs(*published(manifest.parent))
    own = "?" if cpu is None else f"{cpu:.2%}"
    return (f"{wall:.0f} s wall, measuring {'?' if share is None else f'{share:.0%}'} of it (goal 85%), "
            f"pglab's own CPU {own} of the machine (goal 0.5%)")


def costs(*manifests: dict[str, Any]) -> tuple[float, float | None, float | None]:
    """(collect wall time in s, measurement share, pglab's own CPU as a share of the machine) of one run's manifest,
    or of a campaign's runs together, over every attempt and every sweep (a first look's added blocks are sweeps
    of their own)."""
    cpu = [c for m in manifests for c in m.get("pglab_cpu") or []]
    used, machine = sum(c["process_cpu_s"] for c in cpu), sum(c["cores"] * c["wall_s"] for c in cpu)
    walls = [float(sum(m.get("collect_s") or m.get("wall_s") or [])) for m in manifests]
    shares = [m.get("measurement_share") for m in manifests]
    share = (sum(w * s for w, s in zip(walls, shares, strict=True)) / sum(walls)
             if sum(walls) and all(s is not None for s in shares) else None)
    return sum(walls), share, used / machine if machine else None


def published(folder: Path) -> list[dict[str, Any]]:
    """The manifests of the runs a pipeline folder holds: a campaign's runs in order, or the one run."""
    return [record.read(run) for run in campaign.members(folder)]


if __name__ == "__main__":
    main()
