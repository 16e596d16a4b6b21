"""A server that is up for the kernel and dead for the protocol: a loopback TCP listener that
accepts every connection and never sends a byte.

A client's TCP connect succeeds at once, then its wait for the server's greeting (or for any
answer) lasts until its own deadline: what a hung ``mysqld``, a wedged load balancer or a
half-open network path look like.  For tests and benches of deadlines::

    with BlackHole() as hole:
        conn = consistent.connect(primary=..., replicas=[hole.name, ...])

It binds 127.0.0.1 on a free port; connections it accepted are held open until :meth:`close`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Final

__all__ = ["BlackHole"]

_LOOPBACK: Final = "127.0.0.1"
# How often the accepting thread looks whether it must stop.
_POLL_SECONDS: Final = 0.05


class BlackHole:
    """See the module docstring."""

    def __init__(self) -> None:
        self._listener = socket.create_server((_LOOPBACK, 0), backlog=128)
        self._listener.settimeout(_POLL_SECONDS)
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="black-hole", daemon=True)
        #: Connections accepted so far.
        self.accepted = 0

    @property
    def host(self) -> str:
        return _LOOPBACK

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def name(self) -> str:
        """``host:port``, as a replica is named."""
        return f"{self.host}:{self.port}"

    def start(self) -> BlackHole:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._held.append(conn)
                self.accepted += 1

    def close(self) -> None:
        """Stop accepting and close every connection (the clients then see them end)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            held, self._held = self._held, []
        for conn in held:
            with contextlib.suppress(OSError):
                conn.close()

    def __enter__(self) -> BlackHole:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
