"""A page opened in headless Chromium (Debian's ``chromium``) with every host blocked: what it asked the
network for, the DOM it rendered, and a screenshot.

Why not a driver (Selenium, Playwright): two plain runs of the browser say all the report test needs.
Chromium's net log records every request with the page's network isolation key, so the page's own
requests (key ``file://``) are told apart from the browser's background ones (updates, accounts), which
the host resolver rules stop all the same.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--host-resolver-rules=MAP * ~NOTFOUND"]  # no name resolves: nothing leaves this machine


@dataclass
class Page:
    requests: list[str]  # every URL the page itself asked for (file:// ones included)
    dom: str
    screenshot: Path


def _run(args: list[str], profile: Path) -> str:
    res = subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, f"chromium {args[-1]}: {res.stderr[-2000:]}"
    return res.stdout


def page_requests(netlog: Path) -> list[str]:
    """The URLs requested on behalf of a file:// page, from a Chromium net log."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [e["params"]["url"] for e in log["events"]
            if e["type"] == start and "file://" in str(e.get("params", {}).get("network_isolation_key", ""))]


def open_page(html: Path, shots: Path, width: int = 1280, height: int = 2400) -> Page:
    """Load ``html`` twice (DOM with the net log, then a screenshot into ``shots``)."""
    with tempfile.TemporaryDirectory(prefix="pglab-chromium-") as tmp:
        profile, netlog = Path(tmp) / "profile", Path(tmp) / "net.json"
        # the DOM once the page's scripts have run (vega draws its plots after load)
        dom = _run([f"--log-net-log={netlog}", "--virtual-time-budget=5000", "--dump-dom", html.resolve().as_uri()],
                   profile)
        shot = shots / f"{html.stem}.png"
        _run([f"--screenshot={shot}", f"--window-size={width},{height}", html.resolve().as_uri()], profile)
        return Page(page_requests(netlog), dom, shot)


def layout_width(html: Path, width: int = 390) -> int:
    """How wide ``html`` lays itself out on a ``width`` px screen: ``width`` plus what its body overflows by (over
    ``width``, a phone scrolls the whole page sideways). Headless Chromium keeps its window at least 500 px wide, so
    the copy measured sets its root element ``width`` px wide and a script writes the body's overflow into the DOM
    (the page's own policy forbids scripts; the copy's ``<base>`` keeps its images where they are)."""
    text = re.sub(r"<meta http-equiv=\"Content-Security-Policy\"[^>]*>", "", html.read_text(encoding="utf-8"))
    probe = ("<script>window.addEventListener('load', () => document.body.setAttribute('data-overflow', "
             "document.body.scrollWidth - document.body.clientWidth))</script>")
    head = f"<head><base href=\"{html.resolve().parent.as_uri()}/\"><style>html{{width:{width}px !important}}</style>"
    text = text.replace("<head>", head, 1)
    text = text.replace("</body>", probe + "</body>", 1) if "</body>" in text else text + probe
    with tempfile.TemporaryDirectory(prefix="pglab-chromium-") as tmp:
        copy = Path(tmp) / html.name
        copy.write_text(text, encoding="utf-8")
        dom = _run(["--window-size=800,800", "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
                   Path(tmp) / "profile")
    found = re.search(r'data-overflow="(-?\d+)"', dom)
    assert found, f"{html}: the width probe did not run"
    return width + max(int(found.group(1)), 0)
