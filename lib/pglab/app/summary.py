"""Printed at the end of `make repro`: where each study's figures, tables and report are."""

from __future__ import annotations

import json
from pathlib import Path

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
            print(f"  run     : data/raw/{study}/ = data/runs/{study}/{m.get('run_id')} (profile {m.get('profile')})")
            for k in ("tps_at_clients_max", "ratio_to_on", "standby_read_tps", "fdatasync_ops_s",
                      "sustainable_tps_at_clients_max", "ratio_to_streaming_at_clients_max", "consistency",
                      "overhead_factor", "rows_per_s", "ratio_to_none", "ranking"):
                if k in m:
                    print(f"  {k:<34}: {m[k]}")
            for claim, verdict in (m.get("verdicts") or {}).items():
                print(f"  verdict: {claim}: {verdict}")


if __name__ == "__main__":
    main()
