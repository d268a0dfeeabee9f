"""Writes .dvc/plots/offline.html: DVC's page for `dvc plots show`, with vega inlined so that it renders offline.

Why: DVC's own page loads vega, vega-lite and vega-embed from a CDN, so without a network the two
vega plots of this pipeline are empty boxes. This page carries the versions DVC's renderer names
(dvc_render/vega.py), fetched once from the npm registry and checked against the registry's
integrity hashes; .dvc/config points `plots.html_template` at it. Run it again only to change versions:

    .venv/bin/python scripts/plots_template.py
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import urllib.request
from pathlib import Path

REGISTRY = "https://registry.npmjs.org"
PACKAGES = (("vega", "5.20.2", "build/vega.min.js"), ("vega-lite", "5.2.0", "build/vega-lite.min.js"),
            ("vega-embed", "6.18.2", "build/vega-embed.min.js"))
OUT = Path(__file__).resolve().parents[1] / ".dvc" / "plots" / "offline.html"
PAGE = """<!DOCTYPE html>
<html>
<head>
    {{refresh_tag}}
    <meta charset="utf-8">
    <title>DVC Plot (pglab, offline)</title>
    <!-- written by scripts/plots_template.py: {names} (BSD-3-Clause, (c) the Vega project authors) -->
{scripts}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
</html>
"""


def fetch(name: str, version: str, member: str) -> str:
    meta = json.load(urllib.request.urlopen(f"{REGISTRY}/{name}/{version}", timeout=60))
    tgz = urllib.request.urlopen(meta["dist"]["tarball"], timeout=120).read()
    algo, _, digest = meta["dist"]["integrity"].partition("-")
    assert base64.b64encode(hashlib.new(algo, tgz).digest()).decode() == digest, f"{name}@{version}: bad hash"
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        data = tar.extractfile(f"package/{member}")
        assert data is not None
        return data.read().decode("utf-8")


def main() -> None:
    parts = []
    for name, version, member in PACKAGES:
        code = fetch(name, version, member).replace("</script", "<\\/script")  # cannot end its script element
        parts.append(f"    <script>/* {name}@{version} */\n{code}\n    </script>")
    scripts = "\n".join(parts)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(PAGE.format(names=", ".join(f"{n}@{v}" for n, v, _ in PACKAGES), scripts=scripts))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
