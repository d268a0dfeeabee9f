"""Parts of a report's "Where it ran": what the run imitated of the article's machine, and what its profile allowed
the servers to run. Views of the run record only (no host is touched)."""

from __future__ import annotations

import html
from typing import Any

from pglab import server_settings
from pglab.runs import record
from pglab.studies import module


def emulation_html(manifest: dict[str, Any]) -> str:
    """What the run imitated of the article's machine, as asked and as measured (``pglab.nodes.emulation``)."""
    e = manifest.get("emulation") or {}
    if not e:
        return ""
    disks = "; ".join(f"{html.escape(', '.join(d.get('nodes') or []))}: {html.escape(str(d.get('measured', '')))}"
                      for d in (e.get("disks") or {}).values())
    cpu = "; ".join(f"{html.escape(k)}: {float(g.get('share', 1)):.0%} of {g.get('cores', 1)} core(s), throttled in "
                    f"{g.get('throttled') or 0:,} of {g.get('periods') or 0:,} periods of "
                    f"{g.get('period_us', 0) / 1000:g} ms"
                    for k, g in (e.get("cpu") or {}).items() if isinstance(g, dict))
    cal = (e.get("calibration") or {}).get("said")
    return (f"<p><b>Emulated:</b> {html.escape(str(e.get('said', '')))}"
            + (f". Flush levels measured before the run (pglab-flushprobe, fdatasync/s): {disks}" if disks else "")
            + (f". CPU (a cgroup quota): {cpu}" if cpu else "")
            + (f". The calibration, before the first block: {html.escape(str(cal))}" if cal else "")
            + ". One machine all the same: memory, kernel and the real disk are shared.</p>")


def allowed_html(study: str, manifest: dict[str, Any]) -> str:
    """The settings that run a command or load code which the profile allowed (``allow_command_settings``)."""
    try:
        given = server_settings.allowed_in_run(record.parameters(manifest, module(study, "params").Params).model_dump())
    except record.ManifestError:  # parameters today's model refuses: the report's other parts say so
        return ""
    return (f"<p class=\"warn\"><b>Allowed by the profile to run a command or load code on the server:</b> "
            f"{html.escape('; '.join(given))}</p>") if given else ""


def _state(s: dict[str, Any]) -> str:
    flush = f", flush {s['flush_ops_s']:,.0f}/s" if s.get("flush_ops_s") else ""
    loop = f", CPU probe {s['cpu_loop_ms']:g} ms" if s.get("cpu_loop_ms") else ""
    return (f"others {s.get('others', 0):.0%} of the CPU (niced {s.get('nice', 0):.0%}), "
            f"steal {s.get('steal', 0):.0%}, load {s.get('load1', 0):.1f} on {s.get('cores', '?')} cores{loop}{flush}")


def _us(v: Any) -> str:
    return f"{float(v):,.0f} us" if v else "not measured"


def machine_html(manifest: dict[str, Any]) -> str:
    """The machine as probed before and after the run (``pglab.runs.machine``), and why the run is marked."""
    m = manifest.get("machine") or {}
    if not m:
        return ""
    rows = []
    for when in ("before", "after"):
        for host, s in (m.get(when) or {}).items():
            rows.append(f"{when} ({html.escape(str(s.get('at', '')))}), {html.escape(host)}: {html.escape(_state(s))}")
    st = m.get("statement_us") or {}
    nodes = dict.fromkeys([*(st.get("before") or {}), *(st.get("after") or {})])
    if nodes:
        rows.append("a statement (SELECT 1 from one client on the node's core and CPU share) took " + ", ".join(
            f"{html.escape(n)} {_us((st.get('before') or {}).get(n))} before the first point and "
            f"{_us((st.get('after') or {}).get(n))} after the last" for n in nodes))
    marked = m.get("marked") or []
    out = "<p class=\"meta\"><b>The machine:</b> " + "; ".join(rows) + ".</p>"
    if marked:
        out += ("<p class=\"warn\"><b>Marked: this run is no run of a machine sitting still</b> (left out of verdicts "
                "unless asked): " + html.escape("; ".join(marked)) + ".</p>")
    return out
