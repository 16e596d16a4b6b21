"""An asyncio event loop in a daemon thread, driven from synchronous code.

:class:`~consistent.emulator.wire.thread.EmulatorThread` (one server) and
:class:`~consistent.emulator.replication.threaded.TopologyThread` (a replication topology) both
run asyncio objects for blocking callers (PyMySQL, SQLAlchemy, pytest, the CLI).  They share
this life cycle: start the thread, build what it serves inside its loop (SQLite connections and
asyncio primitives belong to that loop), report a start-up error to the caller of
:meth:`LoopThread.start`, hand coroutines over with :meth:`LoopThread.call`, and on
:meth:`LoopThread.stop` tear everything down on the loop before joining the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import ClassVar, Final, ParamSpec, Self, TypeVar

from consistent.eventloop import new_event_loop

__all__ = ["DEFAULT_TIMEOUT", "LoopThread"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds allowed for start-up, shutdown and, by default, each :meth:`LoopThread.call`."""


class LoopThread:
    """Base of the threaded runners: subclasses say what to open and close on the loop.

    :meth:`_open` runs on the thread's loop before :meth:`start` returns (an exception it
    raises is re-raised by :meth:`start`); :meth:`_close` runs there when :meth:`stop` is
    called.  ``_label`` names the thread and the messages; ``_error_type`` and
    ``_timeout_error_type`` are what misuse and a slow start-up raise.
    """

    _label: ClassVar[str] = "loop"
    _error_type: ClassVar[type[Exception]] = RuntimeError
    _timeout_error_type: ClassVar[type[Exception]] = TimeoutError

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, fast_loop: bool = False) -> None:
        self.timeout = timeout
        #: Run on uvloop when it is installed (:func:`consistent.eventloop.new_event_loop`).
        self.fast_loop = fast_loop
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # ----- hooks ----------------------------------------------------------------------------------

    async def _open(self) -> None:
        """Build and start what the thread serves (on its loop)."""

    async def _close(self) -> None:
        """Shut down what :meth:`_open` built (on the loop, once :meth:`stop` was called)."""

    # ----- access ---------------------------------------------------------------------------------

    def _running(self, value: T | None) -> T:
        """``value``, or the subclass's error when the thread has not set it up (yet)."""
        if value is None:
            raise self._error_type(f"the {self._label} is not running")
        return value

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The thread's event loop."""
        return self._running(self._loop)

    def call(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``awaitable`` on the thread's loop and return its result; ``timeout`` defaults
        to :attr:`timeout` (on expiry the work is cancelled and ``TimeoutError`` raised)."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
            _as_coroutine(awaitable), self.loop
        )
        try:
            return future.result(self.timeout if timeout is None else timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call a plain function on the thread's loop (to read or change loop-owned state)."""

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return self.call(invoke())

    # ----- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the thread and wait until :meth:`_open` finished (re-raising its error)."""
        if self._thread is not None:
            raise self._error_type(f"the {self._label} thread was already started")
        self._ready.clear()
        self._thread = threading.Thread(
            target=self._main, name=f"consistent-{self._label}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(self.timeout):
            raise self._timeout_error_type(f"the {self._label} did not start in time")
        if self._startup_error is not None:
            self._thread.join(self.timeout)
            raise self._startup_error
        return self

    def stop(self) -> None:
        """Run :meth:`_close` on the loop, end the loop and join the thread."""
        thread = self._thread
        if thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may already have ended
                loop.call_soon_threadsafe(stop.set)
        thread.join(self.timeout)
        if thread.is_alive():
            logger.error("the %s thread did not stop within %s s", self._label, self.timeout)
        self._thread = None
        self._startup_error = None

    def __enter__(self) -> Self:
        if self._thread is None:
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
            with asyncio.Runner(loop_factory=self._new_loop) as runner:
                runner.run(self._amain())
        except BaseException as e:  # reported to start(); the thread must not die silently
            if not self._ready.is_set():
                self._startup_error = e
                self._ready.set()
            else:
                logger.exception("the %s thread failed", self._label)

    def _new_loop(self) -> asyncio.AbstractEventLoop:
        return new_event_loop(use_uvloop=self.fast_loop)

    async def _amain(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self._open()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
