"""A proxy on its own event loop in a background thread, for synchronous tests and benches.

::

    with ProxyThread(config) as proxy:
        conn = pymysql.connect(host="127.0.0.1", port=proxy.port, user="app", password="...")

Leaving the block shuts the proxy down gracefully (sessions drained, monitors stopped).
uvloop is used when installed, as in production.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Final, TypeVar

from consistent.eventloop import new_event_loop
from consistent.policy import ReplicaKnowledge
from consistent.telemetry import Telemetry
from proxy.config import ProxyConfig
from proxy.server import ProxyServer

__all__ = ["ProxyThread", "new_event_loop"]

T = TypeVar("T")
_TIMEOUT: Final = 30.0


class ProxyThread:
    """Runs a :class:`ProxyServer` in a daemon thread (see the module docstring)."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        knowledge: ReplicaKnowledge | None = None,
        telemetry: Telemetry | None = None,
        use_uvloop: bool = True,
        shutdown_timeout: float = 5.0,
    ) -> None:
        self._config = config
        self._knowledge = knowledge
        self._telemetry = telemetry
        self._use_uvloop = use_uvloop
        self._shutdown_timeout = shutdown_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: ProxyServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    @property
    def server(self) -> ProxyServer:
        """The proxy (touch it only through :meth:`call`)."""
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return self._server

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def admin_port(self) -> int | None:
        return self.server.admin_port

    def start(self) -> ProxyThread:
        self._thread = threading.Thread(target=self._run, name="consistent-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(_TIMEOUT):
            raise TimeoutError("the proxy did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = self._loop = new_event_loop(self._use_uvloop)
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = ProxyServer(self._config, knowledge=self._knowledge, telemetry=self._telemetry)
        try:
            await server.start()
        except BaseException as e:
            self._error = e
            self._ready.set()
            await server.shutdown(0)
            return
        self._server = server
        self._ready.set()
        await self._stop.wait()
        await server.shutdown(self._shutdown_timeout)

    def call(self, fn: Callable[[], Awaitable[T]], timeout: float = _TIMEOUT) -> T:
        """Run ``fn()`` (a coroutine function) on the proxy's loop and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the proxy is not running")

        async def wrapper() -> T:
            return await fn()

        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(wrapper(), loop)
        return future.result(timeout)

    def run(self, fn: Callable[[], T], timeout: float = _TIMEOUT) -> T:
        """Run a plain function on the proxy's loop (to read or change its state safely)."""

        async def call() -> T:
            return fn()

        return self.call(call, timeout)

    def stop(self) -> None:
        loop = self._loop
        stop = self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(_TIMEOUT)

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
