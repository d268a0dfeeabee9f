"""A local port forwarded over an SSH transport, that survives a channel which fails to open.

fabric's ``forward_local`` serves each accepted connection from one thread that dies on the first
``open_channel`` error: the connection being opened is dropped (psycopg: "server closed the connection
unexpectedly") and so is every later one, since nothing accepts any more. Seen on a loaded machine in a
lab run. Here a failed open is tried again, then only that connection is closed, and the reason is kept
(``last_error``) so the error a user sees can name it. Its listen backlog is 64, not 1, and data moves in
64 KiB chunks, not 1 KiB.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
OPEN_TRIES = 3
OPEN_TIMEOUT_S = 15.0


class Forward:
    """``127.0.0.1:port`` here to ``remote`` as seen from the SSH server; ``close`` ends all its connections."""

    def __init__(self, transport: Any, remote: tuple[str, int]):
        self.transport = transport
        self.remote = remote
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))  # the kernel's free port: no gap between choosing and binding
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._pumps: list[threading.Thread] = []
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pump = threading.Thread(target=self._serve, args=(sock, peer), daemon=True,
                                    name=f"forward-{self.port}-{peer[1]}")
            with self._lock:
                self._pumps = [t for t in self._pumps if t.is_alive()]
                self._pumps.append(pump)
            pump.start()

    def _channel(self, peer: tuple[str, int]) -> Any | None:
        """A direct-tcpip channel, tried ``OPEN_TRIES`` times; None (and ``last_error`` set) if none opened."""
        for attempt in range(OPEN_TRIES):
            try:
                return self.transport.open_channel("direct-tcpip", self.remote, peer, timeout=OPEN_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001  (paramiko raises SSHException, ChannelException, EOFError)
                self.last_error = f"{type(exc).__name__}: {exc}".rstrip(": ")
                log.warning("forward %s -> %s:%s: channel did not open (try %d of %d): %s", self.port,
                            *self.remote, attempt + 1, OPEN_TRIES, self.last_error)
                if self._stop.is_set() or not self.transport.is_active():
                    return None
                time.sleep(0.2 * (attempt + 1))
        return None

    def _serve(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        channel = self._channel(peer)
        if channel is None:
            sock.close()
            return
        with self._lock:
            self._open.update((sock, channel))
        reading = [sock, channel]  # an end that said EOF is passed on as a half-close and not read again
        try:
            while reading and not self._stop.is_set():
                ready, _, _ = select.select(reading, [], [], 0.5)
                if sock in ready:
                    data = sock.recv(CHUNK)
                    if data:
                        channel.sendall(data)
                    else:
                        channel.shutdown_write()
                        reading.remove(sock)
                if channel in ready:
                    data = channel.recv(CHUNK)
                    if data:
                        sock.sendall(data)
                    else:
                        sock.shutdown(socket.SHUT_WR)
                        reading.remove(channel)
        except OSError:
            pass  # either side went away: the other is closed below, as a real connection would be
        finally:
            channel.close()
            sock.close()
            with self._lock:
                self._open.difference_update((sock, channel))

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._acceptor.join(timeout=5)
        with self._lock:
            pumps, still_open = list(self._pumps), list(self._open)
        for end in still_open:  # a pump blocked in sendall is freed by closing its ends
            try:
                end.close()
            except Exception:  # noqa: BLE001  (closing an end the pump closed already)
                pass
        for pump in pumps:
            pump.join(timeout=5)
