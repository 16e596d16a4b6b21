"""Futures that resolve when ``gtid_executed`` covers a required set.

``WAIT_FOR_EXECUTED_GTID_SET`` must neither poll nor park a thread per caller: each waiter is
an :class:`asyncio.Future` registered with the set it needs, and every growth of
``gtid_executed`` resolves the waiters whose set is now covered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from consistent.gtid import GtidSet

__all__ = ["WaitRegistry"]


@dataclass
class _Waiter:
    required: GtidSet
    future: asyncio.Future[None]


class WaitRegistry:
    """The set of pending waits on one server's ``gtid_executed``."""

    def __init__(self) -> None:
        self._waiters: list[_Waiter] = []

    def __len__(self) -> int:
        return len(self._waiters)

    def wait(self, required: GtidSet, executed: GtidSet) -> asyncio.Future[None]:
        """A future done once ``required`` is a subset of ``gtid_executed``.

        Already done when ``required <= executed``.  Cancel it (or let :meth:`discard` drop it)
        when the caller gives up.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if required.issubset(executed):
            future.set_result(None)
        else:
            self._waiters.append(_Waiter(required, future))
        return future

    def discard(self, future: asyncio.Future[None]) -> None:
        """Forget a waiter (timed out or interrupted)."""
        self._waiters = [w for w in self._waiters if w.future is not future]

    def notify(self, executed: GtidSet) -> int:
        """Resolve every waiter covered by ``executed``; returns how many were resolved."""
        if not self._waiters:
            return 0
        still: list[_Waiter] = []
        resolved = 0
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            if waiter.required.issubset(executed):
                waiter.future.set_result(None)
                resolved += 1
            else:
                still.append(waiter)
        self._waiters = still
        return resolved
