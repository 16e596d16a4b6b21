"""An emulated server on its own event loop in a background thread, for synchronous callers.

Tests, benchmarks and examples use blocking clients (PyMySQL, SQLAlchemy, a subprocess); they
run the emulator next to them with::

    with EmulatorThread() as emu:
        conn = pymysql.connect(host="127.0.0.1", port=emu.port, user="root")
        emu.call(emu.server.flush_binary_logs())

The engine is built inside the thread (its SQLite connections and asyncio primitives belong to
that loop); everything that touches it from outside goes through :meth:`EmulatorThread.call`
or :meth:`EmulatorThread.run`.  Leaving the ``with`` block closes the front-end, shuts the
engine down and releases its data directory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Final, ParamSpec, TypeVar

from consistent.emulator.config import Clock, ServerConfig
from consistent.emulator.server import EmulatedServer
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.server import DEFAULT_HOST, WireServer, serve

__all__ = ["EmulatorThread"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

_DEFAULT_TIMEOUT: Final = 30.0


class EmulatorThread:
    """Runs an :class:`EmulatedServer` and its :class:`WireServer` in a daemon thread.

    ``factory`` builds the engine (default: ``EmulatedServer(config, clock=clock)``); it runs
    in the emulator's thread.  ``timeout`` bounds start-up, shutdown and, by default, each
    :meth:`call`.
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        clock: Clock = time.time,
        factory: Callable[[], EmulatedServer] | None = None,
        wire_config: WireConfig | None = None,
        host: str = DEFAULT_HOST,
        port: int = 0,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> None:
        self._factory = factory or (lambda: EmulatedServer(config, clock=clock))
        self._wire_config = wire_config
        self._host = host
        self._port = port
        self.timeout = timeout
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._server: EmulatedServer | None = None
        self._wire: WireServer | None = None

    # ----- access -----------------------------------------------------------------------------

    @property
    def server(self) -> EmulatedServer:
        """The engine (touch it only through :meth:`call` / :meth:`run`)."""
        if self._server is None:
            raise RuntimeError("the emulator is not running")
        return self._server

    @property
    def wire(self) -> WireServer:
        """The TCP front-end."""
        if self._wire is None:
            raise RuntimeError("the emulator is not running")
        return self._wire

    @property
    def host(self) -> str:
        """The address clients connect to."""
        return self.wire.host

    @property
    def port(self) -> int:
        """The TCP port clients connect to."""
        return self.wire.port

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The emulator's event loop."""
        if self._loop is None:
            raise RuntimeError("the emulator is not running")
        return self._loop

    def call(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``awaitable`` (e.g. ``emu.server.flush_binary_logs()``) on the emulator's loop
        and return its result; ``timeout`` defaults to :attr:`timeout`."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
            _as_coroutine(awaitable), self.loop
        )
        try:
            return future.result(self.timeout if timeout is None else timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call a plain function on the emulator's loop (e.g. ``emu.run(emu.server.restart)``)."""

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return self.call(invoke())

    # ----- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread and wait until the server listens (re-raising a start-up error)."""
        if self._thread is not None:
            raise RuntimeError("the emulator thread was already started")
        self._thread = threading.Thread(target=self._main, name="consistent-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.timeout):
            raise TimeoutError("the emulator did not start in time")
        if self._startup_error is not None:
            self._thread.join(self.timeout)
            raise self._startup_error

    def stop(self) -> None:
        """Close the front-end, shut the engine down, and join the thread."""
        thread = self._thread
        if thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may already have ended
                loop.call_soon_threadsafe(stop.set)
        thread.join(self.timeout)
        if thread.is_alive():
            logger.error("the emulator thread did not stop within %s s", self.timeout)

    def __enter__(self) -> EmulatorThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _main(self) -> None:
        try:
            asyncio.run(self._amain())
        except BaseException as e:  # reported to start(); the thread must not die silently
            if not self._ready.is_set():
                self._startup_error = e
                self._ready.set()
            else:
                logger.exception("the emulator thread failed")

    async def _amain(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = self._factory()
        try:
            await server.start()
            wire = await serve(server, self._host, self._port, config=self._wire_config)
        except BaseException:
            server.close()
            raise
        self._server, self._wire = server, wire
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            wire.close()
            await wire.wait_closed()
            try:
                await server.shutdown()
            finally:
                server.close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
