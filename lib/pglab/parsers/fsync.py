"""pg_test_fsync output: the disk's sync rate explains what synchronous_commit=off saves."""

from __future__ import annotations

import re

from pglab.errors import ParseError

_SECTION = re.compile(r"^(Compare file sync methods using .*|Compare open_sync .*|Test if fsync .*|"
                      r"Non-sync'ed .*):\s*$")
_ROW = re.compile(r"^\s+(\S.*?)\s+([\d.]+) ops/sec\s+(\d+) usecs/op\s*$")


def parse_pg_test_fsync(text: str) -> dict[str, object]:
    """{"sections": {section: {method: ops_per_s}}, "fdatasync_ops_s": ..., "write_ops_s": ...}."""
    sections: dict[str, dict[str, float]] = {}
    current = None
    for line in text.splitlines():
        m = _SECTION.match(line.strip())
        if m:
            current = m.group(1)
            sections[current] = {}
            continue
        r = _ROW.match(line)
        if r and current:
            sections[current][r.group(1).strip()] = float(r.group(2))
    one = next((v for k, v in sections.items() if k.endswith("one 8kB write")), None)
    if not one:
        raise ParseError("not pg_test_fsync output: expected 'Compare file sync methods using one 8kB write:'")
    nosync = next((v for k, v in sections.items() if k.startswith("Non-sync")), {})
    return {"tool": "pg_test_fsync", "sections": sections, "fdatasync_ops_s": one.get("fdatasync"),
            "write_ops_s": nosync.get("write")}
