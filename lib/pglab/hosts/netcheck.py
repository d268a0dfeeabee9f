"""``pglab check`` across hosts: each data address is its host's, and every host reaches every other.

For every inventory host: its ``data_address`` must be one of its own addresses (``ip -o addr`` on
the host lists it), since PostgreSQL listens there. Then every host must open a TCP connection to
every other host's data address, arriving *from its own data address* (pg_hba admits exactly the data
addresses of a run's hosts): a short-lived listener runs on a free port of each host, bound to its
data address, answering each connection with a token and the peer address it saw; every other host
connects to it (python3 one-liners: python3 is on every Debian host); the listeners are stopped by
their PID (``Host.start``/``Background.stop``).
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import shlex
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pglab.errors import PglabError
from pglab.hosts.base import Background, Host
from pglab.hosts.inventory import Inventory

CONNECT_TIMEOUT_S = 3.0
LISTEN_TIMEOUT_S = 5.0  # for a listener to say it listens
LISTENER_LIFE_S = 30.0  # a listener that is not stopped ends by itself

# argv: address low high token expected life_s. Binds a free port in [low, high) of ``address``, says
# "listening <port>", answers each connection with "<token> <peer address>", and ends after ``expected``
# connections (or life_s seconds).
LISTENER = r"""
import errno, random, socket, sys, time
addr, low, high, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
expected, life = int(sys.argv[5]), float(sys.argv[6])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
for _ in range(500):
    port = random.randrange(low, high)
    if port == 5432:
        continue
    try:
        s.bind((addr, port))
        break
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
else:
    sys.exit("no free port in %d-%d on %s" % (low, high, addr))
s.listen(64)
print("listening", port, flush=True)
end = time.monotonic() + life
while expected > 0 and time.monotonic() < end:
    s.settimeout(max(0.01, end - time.monotonic()))
    try:
        c, peer = s.accept()
    except socket.timeout:
        break
    expected -= 1
    try:
        c.sendall(f"{token} {peer[0]}\n".encode())
    except OSError:
        pass
    c.close()
"""

# argv: JSON [[key, address, port], ...] timeout_s. One JSON line per target: [key, "ok", answer] or
# [key, "error", why]; the targets are tried at the same time.
PROBE = r"""
import json, socket, sys, threading
targets, timeout = json.loads(sys.argv[1]), float(sys.argv[2])
out, lock = [], threading.Lock()
def probe(key, addr, port):
    try:
        with socket.create_connection((addr, port), timeout=timeout) as c:
            c.settimeout(timeout)
            got = b""
            while not got.endswith(b"\n") and len(got) < 200:
                b = c.recv(200)
                if not b:
                    break
                got += b
        r = [key, "ok", got.decode(errors="replace").strip()]
    except OSError as e:
        r = [key, "error", f"{type(e).__name__}: {e}"]
    with lock:
        out.append(r)
ts = [threading.Thread(target=probe, args=t) for t in targets]
for t in ts:
    t.start()
for t in ts:
    t.join()
for r in out:
    print(json.dumps(r))
"""


@dataclass
class Line:
    """One result: ``ok`` or a failure, in ``pglab check`` wording (without the ok/FAIL prefix)."""

    ok: bool
    text: str


def host_addresses(host: Host) -> set[str] | None:
    """The addresses ``ip -o addr`` lists on ``host`` (None if it cannot be run there)."""
    res = host.run(["ip", "-o", "addr", "show"], check=False, timeout=20)
    if res.exit_code != 0:
        return None
    found = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        for i, word in enumerate(parts[:-1]):
            if word in ("inet", "inet6"):
                found.add(_normal(parts[i + 1].split("/")[0]))
    return found


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.split("%")[0]))
    except ValueError:
        return address


@dataclass
class _Listener:
    host: str
    address: str
    port: int
    token: str
    proc: Background


def _address_line(name: str, host: Host, address: str) -> Line:
    """Is ``address`` one of ``host``'s own addresses?"""
    try:
        found = host_addresses(host)
    except PglabError as exc:
        return Line(False, f"net {name}: cannot list its addresses: {exc}")
    if found is None:
        return Line(False, f"net {name}: cannot list its addresses (`ip -o addr` failed: install iproute2)")
    if address in found or (host.is_local and ipaddress.ip_address(address).is_loopback):
        return Line(True, f"net {name}: data address {address} is an address of this host")
    return Line(False, f"net {name}: data address {address} is not an address of {name} (`ip -o addr` there "
                       f"lists {', '.join(sorted(found)) or 'none'}); fix data_address in the inventory")


def _start_listener(name: str, host: Host, address: str, port_range: tuple[int, int], tmp: str,
                    expected: int) -> tuple[_Listener | None, str]:
    """A listener bound to ``address`` on a free port in ``port_range`` of ``host``."""
    token = secrets.token_hex(8)
    out = f"{tmp}/listener.out"
    proc = host.start(["python3", "-c", LISTENER, address, str(port_range[0]), str(port_range[1]), token,
                       str(expected), f"{LISTENER_LIFE_S:g}"], out, f"{tmp}/listener.err")
    q = shlex.quote
    ticks = int(LISTEN_TIMEOUT_S / 0.02)
    wait = (f"i=0; while ! grep -q '^listening' {q(out)} 2>/dev/null && [ ! -e {q(proc.rc_path)} ]; do "
            f"sleep 0.02; i=$((i+1)); [ $i -gt {ticks} ] && break; done; cat {q(out)}; "
            f"[ -e {q(proc.rc_path)} ] && {{ echo ended; tail -n 3 {q(proc.stderr_path)}; }}; true")
    state = host.run(["sh", "-c", wait], timeout=LISTEN_TIMEOUT_S + 30).stdout
    first = state.splitlines()[0].split() if state.strip() else []
    if first[:1] == ["listening"] and len(first) == 2 and first[1].isdigit():
        return _Listener(name, address, int(first[1]), token, proc), ""
    if "ended" in state.splitlines():
        return None, state.strip().splitlines()[-1]
    _end_listener(host, proc, tmp)
    return None, f"not listening after {LISTEN_TIMEOUT_S:g} s"


def _end_listener(host: Host, proc: Background | None, tmp: str) -> None:
    """Stop the listener's session by its PID if it has not ended by itself, and remove its folder.

    While the session's shell has not written its exit code, the session leader lives, so its PID
    (the process group) is still ours.
    """
    q = shlex.quote
    script = ""
    if proc is not None:
        rc, pgid = q(proc.rc_path), str(int(proc.pid))
        script = (f"if [ ! -e {rc} ]; then kill -TERM -- -{pgid} 2>/dev/null; i=0; "
                  f"while kill -0 -- -{pgid} 2>/dev/null && [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; "
                  f"kill -KILL -- -{pgid} 2>/dev/null; fi; ")
    host.run(["sh", "-c", script + f"rm -rf --one-file-system {q(tmp)}"], timeout=30)


def _probe(host: Host, targets: list[list[object]], timeout_s: float) -> tuple[dict[str, tuple[str, str]], str]:
    """Connect from ``host`` to every ``[key, address, port]`` at once: ``{key: (outcome, detail)}``."""
    res = host.run(["python3", "-c", PROBE, json.dumps(targets), f"{timeout_s:g}"], timeout=timeout_s * 2 + 20,
                   check=False)
    answers = {}
    for raw in res.stdout.splitlines():
        try:
            key, outcome, detail = json.loads(raw)
        except ValueError:
            continue
        answers[key] = (outcome, detail)
    return answers, f"exit {res.exit_code}: {res.stderr.strip()[-200:]}"


def check(inventory: Inventory, hosts: Mapping[str, Host], timeout_s: float = CONNECT_TIMEOUT_S) -> list[Line]:
    """Check the data addresses of ``hosts`` (connected hosts of ``inventory``) and TCP between them.

    Each step runs on all hosts at once (one thread per host: every host has its own connection).
    """
    names = list(hosts)
    if not names:
        return []
    data = {n: _normal(inventory.entry(n).data_ip) for n in names}
    with ThreadPoolExecutor(max_workers=min(16, len(names))) as pool:
        lines = list(pool.map(lambda n: _address_line(n, hosts[n], data[n]), names))
        good = [n for n, line in zip(names, lines, strict=True) if line.ok]
        if len(good) < 2:
            return lines
        tmps: dict[str, str] = {}
        listeners: dict[str, _Listener] = {}

        def start(name: str) -> Line | None:
            host, entry = hosts[name], inventory.entry(name)
            try:
                tmps[name] = host.run(["mktemp", "-d", f"{entry.workdir.rstrip('/')}/pglab-net-XXXXXX"]).stdout.strip()
                listener, why = _start_listener(name, host, data[name], entry.port_range, tmps[name], len(good) - 1)
            except PglabError as exc:
                listener, why = None, str(exc)
            if listener is None:
                return Line(False, f"net {name}: cannot listen on {data[name]}: {why}")
            listeners[name] = listener
            return None

        def probe(src: str) -> list[Line]:
            targets = [[dst, lis.address, lis.port] for dst, lis in listeners.items() if dst != src]
            if not targets:
                return []
            try:
                answers, why = _probe(hosts[src], targets, timeout_s)
            except PglabError as exc:
                return [Line(False, f"net {src}: cannot run the connection probe: {exc}")]
            out = []
            for dst in sorted(str(t[0]) for t in targets):
                lis = listeners[dst]
                where = f"net {src} -> {dst} {_hostport(lis.address, lis.port)}"
                outcome, detail = answers.get(dst, ("error", f"no answer from the probe ({why})"))
                token, _, peer = detail.partition(" ")
                if outcome != "ok":
                    out.append(Line(False, f"{where}: cannot connect: {detail}"))
                elif token != lis.token:
                    out.append(Line(False, f"{where}: connected, but something else answers there ({detail[:60]!r})"))
                elif _normal(peer) != data[src]:
                    out.append(Line(False, f"{where}: connected, but from {peer}, not {src}'s data address "
                                           f"{data[src]} (pg_hba admits the data addresses only)"))
                else:
                    out.append(Line(True, f"{where}: connected (from {peer})"))
            return out

        def end(name: str) -> Line | None:
            lis = listeners.get(name)
            try:
                _end_listener(hosts[name], lis.proc if lis else None, tmps[name])
            except PglabError as exc:
                return Line(False, f"net {name}: cannot stop the listener or remove {tmps[name]}: {exc}")
            return None

        try:
            lines += [line for line in pool.map(start, good) if line is not None]
            for out in pool.map(probe, good):
                lines += out
        finally:
            lines += [line for line in pool.map(end, list(tmps)) if line is not None]
    return lines


def _hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
