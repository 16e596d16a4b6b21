"""The demo's parts in processes of their own, and their teardown.

The topology, the proxy and the clients each run in a child process (``multiprocessing``,
*spawn*: a fresh interpreter, so that no thread of the parent is copied half-way), so that
none of them starves another of the GIL: emulated lag is then the lag model, not CPU
contention.

A child is started by :meth:`Children.start` with a target ``target(channel, stop, *args)``:
it sends one message on ``channel`` once it is ready (its ports, …) and runs until ``stop``
(a :class:`threading.Event`) is set, which happens when the parent asks, closes its end
of the request pipe, or dies.  Teardown is always the parent's job:

* children ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone decides to
  stop, in order);
* :class:`Children` stops every child on exit, however the parent leaves the ``with`` block
  (an error, Ctrl-C): ``stop`` first, then SIGTERM, then SIGKILL;
* a child asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), so even a
  parent killed with SIGKILL leaves no orphan behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Final

from consistent.errors import OperationalError

__all__ = ["Child", "ChildFailed", "Children", "child_main", "shared_counters"]

logger = logging.getLogger(__name__)

_CONTEXT: Final = multiprocessing.get_context("spawn")
_PR_SET_PDEATHSIG: Final = 1
#: Seconds a child has to stop after ``stop`` is set, then after SIGTERM.
_STOP_GRACE: Final = 10.0
_TERM_GRACE: Final = 3.0


class ChildFailed(OperationalError):
    """A part of the demo failed to start or died while the demo ran."""


def shared_counters(size: int) -> Any:
    """``size`` 64-bit integers, zero, in memory a child started by :class:`Children` shares
    (pass them among its arguments); unlocked: each is written by one process only."""
    return _CONTEXT.Array("q", size, lock=False)


def _die_with_parent(parent: int) -> None:
    """Have the kernel send SIGKILL to this process when its parent exits (Linux); exit at
    once if the parent is already gone."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _stop_on_word(requests: multiprocessing.connection.Connection) -> threading.Event:
    """An event set when the parent asks to stop (or closes its end, or dies): a pipe rather
    than a ``multiprocessing.Event``, whose semaphore the resource tracker would report as
    leaked when the parent leaves on Ctrl-C."""
    stop = threading.Event()

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            requests.recv()
        stop.set()

    threading.Thread(target=watch, name="consistent-demo-stop", daemon=True).start()
    return stop


def child_main(
    target: Callable[..., None],
    parent: int,
    channel: multiprocessing.connection.Connection,
    requests: multiprocessing.connection.Connection,
    args: tuple[Any, ...],
) -> None:
    """What a child runs: the safety settings above, then ``target(channel, stop, *args)``
    (``stop``: a :class:`threading.Event` set when the parent asks); an error is sent to
    the parent as ``("error", text)`` before the child exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    stop = _stop_on_word(requests)
    try:
        target(channel, stop, *args)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            channel.send(("error", f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        channel.close()


@dataclass
class Child:
    """A running child: its name, its process, the parent's end of its channel."""

    name: str
    process: BaseProcess
    channel: multiprocessing.connection.Connection
    #: The parent's end of the pipe on which it asks the child to stop.
    requests: multiprocessing.connection.Connection

    def request_stop(self) -> None:
        """Ask the child to stop (it sets its ``stop`` event); idempotent."""
        if not self.requests.closed:
            with contextlib.suppress(OSError):
                self.requests.send("stop")
            self.requests.close()

    @property
    def pid(self) -> int:
        """The child's process id."""
        assert self.process.pid is not None
        return self.process.pid

    def receive(self, timeout: float) -> Any:
        """The next message of the child (its ``("ready", …)`` or its result); raises
        :class:`ChildFailed` when it reports an error, exits or says nothing in time."""
        if not self.channel.poll(timeout):
            alive = self.process.is_alive()
            raise ChildFailed(
                f"the demo's {self.name} "
                + ("did not answer in time" if alive else f"exited ({self.process.exitcode})")
            )
        try:
            kind, payload = self.channel.recv()
        except EOFError:
            raise ChildFailed(f"the demo's {self.name} exited ({self.process.exitcode})") from None
        if kind == "error":
            raise ChildFailed(f"the demo's {self.name} failed: {payload}")
        return payload

    def check(self) -> None:
        """Raise :class:`ChildFailed` if the child has died."""
        if not self.process.is_alive():
            raise ChildFailed(f"the demo's {self.name} exited ({self.process.exitcode})")

    def finish(self, timeout: float) -> Any:
        """Ask the child to stop and return its last message (its result)."""
        self.request_stop()
        return self.receive(timeout)

    def stop(self) -> None:
        """Ask the child to stop; SIGTERM, then SIGKILL, if it does not."""
        self.request_stop()
        self.process.join(_STOP_GRACE)
        if self.process.is_alive():
            logger.warning("the demo's %s did not stop: terminating it", self.name)
            self.process.terminate()
            self.process.join(_TERM_GRACE)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(_TERM_GRACE)
        self.channel.close()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while a child starts, so that it is ignored there from its first
    instruction (an ignored signal stays ignored across ``exec``); main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Children:
    """The demo's child processes; leaving the ``with`` block stops them all, the last
    started first."""

    def __init__(self) -> None:
        self._children: list[Child] = []

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_all()

    def start(self, name: str, target: Callable[..., None], *args: Any) -> Child:
        """Start ``target(channel, stop, *args)`` (a module-level function: it is pickled)
        in a child process named ``name``."""
        ours, theirs = _CONTEXT.Pipe()
        listener, asker = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=child_main,
            args=(target, os.getpid(), theirs, listener, args),
            name=f"consistent-demo-{name}",
            daemon=True,
        )
        with _sigint_ignored():
            process.start()
        theirs.close()
        listener.close()
        child = Child(name, process, ours, asker)
        self._children.append(child)
        return child

    @property
    def pids(self) -> tuple[int, ...]:
        """The process ids of the children started and not stopped."""
        return tuple(child.pid for child in self._children)

    def check(self) -> None:
        """Raise :class:`ChildFailed` if a child has died."""
        for child in self._children:
            child.check()

    def stop_all(self) -> None:
        """Stop every child, the last started first (all are asked at once, so that they
        stop together)."""
        for child in self._children:
            child.request_stop()
        while self._children:
            child = self._children.pop()
            try:
                child.stop()
            except Exception:  # keep stopping the others
                logger.exception("stopping the demo's %s failed", child.name)
