"""Time for replication topologies: real time for the demo, virtual time for tests.

Every wait in the emulator is an asyncio wait (``asyncio.sleep``, ``asyncio.wait`` with a
timeout, ``WAIT_FOR_EXECUTED_GTID_SET``'s timeout), so one piece decides how time passes: the
event loop.  :class:`VirtualTimeLoop` is an asyncio event loop whose clock is virtual: whenever
no callback is ready it jumps straight to the next timer instead of blocking, so a topology
with 30 s of replication lag runs in milliseconds and always in the same order.  The servers'
wall clocks (commit timestamps, performance_schema columns) are :class:`VirtualClock` objects
that read that loop's time, optionally skewed per server.

Use it with :func:`run_virtual`::

    async def scenario(clock: VirtualClock) -> None:
        topology = await start_topology_async(spec, clock=clock)
        ...
        await clock.sleep(2.5)        # everything due in the next 2.5 virtual seconds happens

    run_virtual(scenario)

A virtual loop must not serve real sockets to other threads: it would race ahead of them.
Real time is the default everywhere else (:class:`RealClock`).
"""

from __future__ import annotations

import asyncio
import math
import selectors
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final, Protocol, TypeVar

__all__ = [
    "DEFAULT_EPOCH",
    "RealClock",
    "SkewedClock",
    "TopologyClock",
    "VirtualClock",
    "VirtualTimeLoop",
    "run_virtual",
]

T = TypeVar("T")

#: Where virtual wall-clock time starts: 2023-11-14 22:13:20 UTC, a whole second.
DEFAULT_EPOCH: Final = 1_700_000_000.0
_SETTLE_ROUNDS: Final = 64


class TopologyClock(Protocol):
    """A wall clock (seconds since the epoch, UTC) whose waits are asyncio waits."""

    def __call__(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (on the running loop)."""
        ...


class RealClock:
    """:func:`time.time` and :func:`asyncio.sleep`: the demo and the TCP tests run on it."""

    def __call__(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of real time."""
        await asyncio.sleep(max(seconds, 0.0))

    def __repr__(self) -> str:
        return "RealClock()"


class _VirtualSelector(selectors.BaseSelector):
    """A selector that never waits for a timer: it advances the loop's virtual time instead.

    ``select(None)`` (nothing scheduled) still blocks on real file descriptors, so a thread
    that wakes the loop with ``call_soon_threadsafe`` is served.
    """

    def __init__(self, advance: Callable[[float], None]) -> None:
        self._real = selectors.DefaultSelector()
        self._advance = advance

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            return self._real.select(None)
        ready = self._real.select(0)
        if not ready and timeout > 0:
            self._advance(timeout)
        return ready

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose :meth:`time` only moves when every task waits for a timer.

    Starts at 0; :attr:`advanced` counts the virtual seconds skipped.
    """

    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(selector=_VirtualSelector(self._advance))

    def _advance(self, seconds: float) -> None:
        self._virtual_now += seconds

    def time(self) -> float:
        return self._virtual_now

    @property
    def advanced(self) -> float:
        """Virtual seconds elapsed since the loop was made."""
        return self._virtual_now


class VirtualClock:
    """A wall clock reading the running :class:`VirtualTimeLoop`: ``epoch + loop.time()``.

    The loop is found on first use (it must be running then) and kept, so the clock can also
    be read from callbacks of that loop.  Reading it before any loop runs gives ``epoch``.
    """

    def __init__(self, epoch: float = DEFAULT_EPOCH) -> None:
        self.epoch = epoch
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bound(self) -> asyncio.AbstractEventLoop | None:
        if self._loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return None
            if not isinstance(loop, VirtualTimeLoop):
                raise RuntimeError("VirtualClock needs a VirtualTimeLoop (see run_virtual)")
            self._loop = loop
        return self._loop

    def __call__(self) -> float:
        loop = self._bound()
        return self.epoch if loop is None else self.epoch + loop.time()

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass; every task due before then runs first."""
        self._bound()
        await asyncio.sleep(max(seconds, 0.0))

    async def sleep_until(self, when: float) -> None:
        """Sleep until the wall clock reads ``when``."""
        await self.sleep(when - self())

    async def settle(self) -> None:
        """Run every callback that is ready now, without letting virtual time move."""
        self._bound()
        for _ in range(_SETTLE_ROUNDS):
            await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"VirtualClock(epoch={self.epoch!r}, now={self()!r})"


class SkewedClock:
    """Another clock shifted by ``skew`` seconds: a server whose clock is off (WL#7319 F6)."""

    def __init__(self, base: TopologyClock, skew: float) -> None:
        self.base = base
        self.skew = skew

    def __call__(self) -> float:
        return self.base() + self.skew

    async def sleep(self, seconds: float) -> None:
        """Durations are not skewed: sleep on the base clock."""
        await self.base.sleep(seconds)

    def __repr__(self) -> str:
        return f"SkewedClock({self.base!r}, skew={self.skew!r})"


def run_virtual(
    main: Callable[[VirtualClock], Coroutine[Any, Any, T]], *, epoch: float = DEFAULT_EPOCH
) -> T:
    """Run ``main(clock)`` to completion on a fresh :class:`VirtualTimeLoop`."""
    if not math.isfinite(epoch):
        raise ValueError("epoch must be finite")
    clock = VirtualClock(epoch)
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main(clock))
