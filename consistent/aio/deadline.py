"""A read deadline that costs next to nothing per statement, and nothing to the event loop.

``asyncio.timeout`` schedules and cancels a timer for every statement, which costs more than the
rest of what the asyncio form adds to a statement.  Even one timer kept per connection costs:
while the loop holds a timer, each of its iterations (two per statement) computes its select
timeout and looks for due timers, which a loop without timers skips.  So the deadlines are
watched from outside the loop, by one thread per process (:class:`Sentry`).

A :class:`Watchdog` (one per server connection) notes, in :meth:`Watchdog.arm`, the running task
and when its round trip must end, and forgets it in :meth:`Watchdog.disarm`: two attribute
writes and a clock read.  The sentry sleeps until the earliest deadline it knows of; an arm
wakes it only when its deadline comes earlier than that (in a steady workload, about once per
deadline period).  When it wakes it finds each round trip over (nothing to do), still within
its deadline (it sleeps until then), or late: it asks the task's loop to look
(``call_soon_threadsafe``), and the watchdog, on the loop's thread, cancels the task if the
round trip it finds is still late.  The caller tells that cancellation from its task's own with
:meth:`Watchdog.expired`, which also takes the watchdog's cancellation back
(``Task.uncancel``), as ``asyncio.timeout`` does.

The sentry's thread starts with the first watchdog armed and ends once no watchdog is left (a
watchdog leaves when closed, or with its connection); a forked child starts with none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import sys
import threading
import weakref
from asyncio import current_task
from time import monotonic

# CPython 3.11 implements ``asyncio.current_task`` in Python, around a C dict (a third of
# what an arm costs); from 3.12 it is C, and the dict may not be what it reads.
_current_tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[object]] | None = (
    getattr(asyncio.tasks, "_current_tasks", None) if sys.version_info < (3, 12) else None
)

__all__ = ["Sentry", "Watchdog", "process_sentry"]


class Watchdog:
    """The read deadline of one server connection (see the module's docstring)."""

    __slots__ = ("__weakref__", "_deadline", "_fired", "_reported", "_sentry", "_task", "_watched")

    def __init__(self, sentry: Sentry | None = None) -> None:
        self._sentry = sentry if sentry is not None else process_sentry()
        #: When the round trip under way must end (``time.monotonic()`` seconds).
        self._deadline = 0.0
        self._task: asyncio.Task[object] | None = None
        self._fired = False
        #: Whether the sentry holds this watchdog (only the loop's thread changes it).
        self._watched = False
        #: The last late deadline the sentry reported to the loop (it reports each once).
        self._reported = math.nan

    def arm(self, timeout: float | None) -> None:
        """A round trip of the current task starts; it must end within ``timeout`` seconds
        (``None``: no deadline)."""
        if timeout is None:
            return
        # The deadline first: the sentry reads it before deciding how long to sleep.
        self._deadline = deadline = monotonic() + timeout
        self._fired = False
        self._task = (
            _current_tasks.get(asyncio.get_running_loop())
            if _current_tasks is not None
            else current_task()
        )
        sentry = self._sentry
        if deadline < sentry.wake_at or not self._watched:
            sentry.watch(self)

    def disarm(self) -> None:
        """The round trip ended."""
        self._task = None

    def expired(self) -> bool:
        """True when the watchdog cancelled the task (the caller turns the ``CancelledError``
        it caught into a missed deadline); the cancellation is taken back."""
        if not self._fired:
            return False
        self._fired = False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    def close(self) -> None:
        """No more round trips: leave the sentry."""
        self._task = None
        if self._watched:
            self._sentry.forget(self)

    def _late(self) -> None:
        """On the loop's thread, told by the sentry that the round trip under way looked late
        (it may have ended since, or be another one)."""
        task = self._task
        if task is None or task.done() or monotonic() < self._deadline:
            return
        self._fired = True
        self._task = None
        task.cancel(msg="the server missed its read deadline")


class Sentry:
    """The thread that watches the deadlines of the process's watchdogs (see the module's
    docstring)."""

    def __init__(self) -> None:
        self.start_empty()

    def start_empty(self) -> None:
        """Hold no watchdog and run no thread (as in a forked child, where the parent's thread
        and the state of its lock are not there: the watchdogs armed next join again)."""
        self._cond = threading.Condition(threading.Lock())
        self._dogs: weakref.WeakSet[Watchdog] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        #: When the thread looks next (``time.monotonic()`` seconds); ``inf`` while it plans,
        #: so that any deadline armed meanwhile wakes it.  A watchdog armed with a deadline
        #: before this must call :meth:`watch`.
        self.wake_at = math.inf

    def watch(self, dog: Watchdog) -> None:
        """Hold ``dog`` and make sure the thread wakes by its deadline."""
        with self._cond:
            dog._watched = True
            self._dogs.add(dog)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="consistent-aio-deadlines", daemon=True
                )
                self._thread.start()
            if dog._deadline < self.wake_at:
                self.wake_at = dog._deadline
                self._cond.notify()

    def forget(self, dog: Watchdog) -> None:
        """Stop holding ``dog`` (closed)."""
        with self._cond:
            dog._watched = False
            self._dogs.discard(dog)
            self._cond.notify()

    def _run(self) -> None:
        cond = self._cond
        with cond:
            while self._dogs:
                self.wake_at = math.inf
                now = monotonic()
                wake_at = math.inf
                for dog in list(self._dogs):
                    task = dog._task
                    deadline = dog._deadline
                    if task is None or deadline == dog._reported:
                        continue
                    if deadline > now:
                        wake_at = min(wake_at, deadline)
                        continue
                    dog._reported = deadline
                    with contextlib.suppress(RuntimeError):  # a closed loop waits no more
                        task.get_loop().call_soon_threadsafe(dog._late)
                self.wake_at = wake_at
                cond.wait(None if wake_at == math.inf else wake_at - now)
            self._thread = None


@functools.cache
def process_sentry() -> Sentry:
    """The process's :class:`Sentry`, shared by every watchdog (one thread for all)."""
    sentry = Sentry()
    os.register_at_fork(after_in_child=sentry.start_empty)
    return sentry
