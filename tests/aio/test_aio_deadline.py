"""The watchdog behind the asyncio form's read deadlines, and the deadline of a connection with
no replicas (whose statements skip the routing)."""

from __future__ import annotations

import asyncio
import time

import pytest

from consistent import aio
from consistent.aio.deadline import Sentry, Watchdog

from .conftest import AsyncBackend, run


async def _round_trip(watchdog: Watchdog, timeout: float, takes: float) -> str:
    watchdog.arm(timeout)
    try:
        await asyncio.sleep(takes)
    except asyncio.CancelledError:
        if watchdog.expired():
            return "missed"
        raise
    finally:
        watchdog.disarm()
    return "done"


def test_the_watchdog_cancels_only_a_round_trip_past_its_deadline() -> None:
    async def body() -> list[str]:
        watchdog = Watchdog()
        outcomes = [await _round_trip(watchdog, 0.2, 0.01) for _ in range(30)]  # 0.3 s in all
        started = time.monotonic()
        outcomes.append(await _round_trip(watchdog, 0.1, 5.0))
        assert time.monotonic() - started < 2.0
        outcomes.append(await _round_trip(watchdog, 0.5, 0.01))  # usable again, not cancelled
        current = asyncio.current_task()
        assert current is not None
        assert current.cancelling() == 0  # its cancellation was taken back
        watchdog.close()
        return outcomes

    outcomes = asyncio.run(body())
    assert outcomes == ["done"] * 30 + ["missed", "done"]


def test_the_watchdog_leaves_a_cancellation_of_the_task_alone() -> None:
    async def body() -> None:
        watchdog = Watchdog()
        task = asyncio.ensure_future(_round_trip(watchdog, 5.0, 5.0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        watchdog.close()

    asyncio.run(body())


def test_an_earlier_deadline_wakes_the_sentry_and_its_thread_ends_with_the_last_watchdog() -> None:
    sentry = Sentry()

    async def body() -> list[str]:
        slow, fast = Watchdog(sentry), Watchdog(sentry)
        outcomes = [await _round_trip(fast, 30.0, 0.01)]  # both are known to the sentry...
        # ...which sleeps until the slow round trip's deadline, 30 s away...
        long_trip = asyncio.ensure_future(_round_trip(slow, 30.0, 0.5))
        await asyncio.sleep(0.05)
        # ...until a deadline comes earlier, on the other connection.
        outcomes.append(await _round_trip(fast, 0.1, 5.0))
        outcomes.append(await long_trip)
        fast.close()
        # Closed, then used again (a link reconnects): it joins the sentry again.
        outcomes.append(await _round_trip(fast, 0.1, 5.0))
        slow.close()
        fast.close()
        return outcomes

    assert asyncio.run(body()) == ["done", "missed", "done", "missed"]
    thread = sentry._thread
    if thread is not None:
        thread.join(10.0)
        assert not thread.is_alive()  # no watchdog left: the thread is gone


@pytest.mark.mariadb
@pytest.mark.parametrize("backend", ["mariadb"], indirect=True)
def test_a_frozen_primary_without_replicas_costs_its_read_timeout(
    backend: AsyncBackend, table: str
) -> None:
    assert backend.freeze is not None
    assert backend.thaw is not None

    async def body() -> None:
        conn = await backend.connect(replicas=[], read_timeout=1.0)
        cur = conn.cursor()
        await cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
        assert backend.freeze is not None
        backend.freeze(None)
        started = time.monotonic()
        try:
            with pytest.raises(aio.OperationalError) as info:
                await cur.execute(f"UPDATE {table} SET v = 2 WHERE k = 1")
        finally:
            assert backend.thaw is not None
            backend.thaw(None)
        assert time.monotonic() - started < 1.0 + 2.0
        assert info.value.args[0] == 2013
        assert "lost the connection to the primary" in info.value.msg
        with pytest.raises(aio.OperationalError):
            await cur.execute("SELECT 1")

    run(backend, body)
