"""A read deadline that costs next to nothing per statement: one timer per connection.

``asyncio.timeout`` schedules and cancels a timer for every statement, which costs more than the
rest of what the asyncio form adds to a statement.  A :class:`Watchdog` keeps at most one timer
per server connection: :meth:`Watchdog.arm` notes the running task and when its round trip must
end, :meth:`Watchdog.disarm` forgets it, and the timer, when it fires, either finds the round
trip over (and stays off until the next ``arm``), finds it still within its deadline (and is
set again for it), or cancels the task.  The caller tells that cancellation from its task's
own with :meth:`Watchdog.expired`, which also takes the watchdog's cancellation back
(``Task.uncancel``), as ``asyncio.timeout`` does.
"""

from __future__ import annotations

import asyncio
from asyncio import current_task, get_running_loop

__all__ = ["Watchdog"]


class Watchdog:
    """The read deadline of one server connection (see the module's docstring)."""

    __slots__ = ("_deadline", "_fired", "_handle", "_task")

    def __init__(self) -> None:
        self._deadline = 0.0
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False

    def arm(self, timeout: float | None) -> None:
        """A round trip of the current task starts; it must end within ``timeout`` seconds
        (``None``: no deadline)."""
        if timeout is None:
            return
        loop = get_running_loop()
        self._deadline = deadline = loop.time() + timeout
        self._task = current_task(loop)
        self._fired = False
        if self._handle is None:
            self._handle = loop.call_at(deadline, self._check)

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
        """No more round trips: drop the timer."""
        handle, self._handle = self._handle, None
        self._task = None
        if handle is not None:
            handle.cancel()

    def _check(self) -> None:
        self._handle = None
        task = self._task
        if task is None or task.done():
            return
        loop = task.get_loop()
        if loop.time() < self._deadline:
            self._handle = loop.call_at(self._deadline, self._check)
            return
        self._fired = True
        self._task = None
        task.cancel(msg="the server missed its read deadline")
