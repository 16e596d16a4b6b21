"""The shared backend pool's bookkeeping (proxy/pool.py), without servers: which idle
connection a session gets, follow-up reservations, limits, the wait and its deadline, reaping."""

from __future__ import annotations

import asyncio

import pytest

from consistent.protocol import ServerStatus
from proxy.backends import BackendConnection
from proxy.config import Address
from proxy.errors import PoolExhausted
from proxy.pool import (
    FOLLOW_UP,
    OPEN_CURSOR,
    TRANSACTION,
    ConnectionPool,
    Fit,
    PoolSettings,
    charset_names,
    pin_reasons,
)

ADDRESS = Address("127.0.0.1", 3306)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def new_conn(thread: int = 0) -> BackendConnection:
    return BackendConnection("primary", ADDRESS, max_payload=1 << 24)


class Opener:
    """What a session passes to ``borrow`` to open a connection; remembers what it opened."""

    def __init__(self) -> None:
        self.opened: list[BackendConnection] = []

    async def __call__(self) -> BackendConnection:
        conn = new_conn()
        self.opened.append(conn)
        return conn


def pool_with(clock: Clock | None = None, **settings: float) -> ConnectionPool:
    values = {
        "max_connections": 2,
        "wait_timeout": 0.2,
        "idle_timeout": 60.0,
        "ping_after": 30.0,
        "hold_prepared": 1.0,
    }
    values.update(settings)
    return ConnectionPool(
        "primary 127.0.0.1:3306 as app",
        PoolSettings(
            max_connections=int(values["max_connections"]),
            wait_timeout=values["wait_timeout"],
            idle_timeout=values["idle_timeout"],
            ping_after=values["ping_after"],
            hold_prepared=values["hold_prepared"],
        ),
        clock=clock or Clock(),
    )


def lent(pool: ConnectionPool, owner: int, key: object = "k") -> BackendConnection:
    """A connection added to the pool for ``owner`` and given back in state ``key``."""
    conn = new_conn()
    pool.add(conn, owner)
    pool.give_back(conn, state_key=key, follow_up=False)
    return conn


def test_the_session_gets_its_own_connection_back_before_a_matching_one() -> None:
    pool = pool_with()
    mine = lent(pool, owner=1, key="a")
    other = lent(pool, owner=2, key="b")  # the most recently given back
    found = pool.pick(1, "b", schema=True)
    assert found == (mine, Fit.OWN)
    assert pool.idle == 1
    assert pool.borrowed == 1
    assert pool.pick(3, "b", schema=True) == (other, Fit.MATCH)


def test_another_sessions_state_is_reset_and_a_matching_state_is_not() -> None:
    pool = pool_with()
    conn = lent(pool, owner=2, key="state of 2")
    assert pool.pick(1, "state of 1", schema=True) == (conn, Fit.RESET)
    pool.give_back(conn, state_key="state of 1", follow_up=False)
    assert pool.pick(3, "state of 1", schema=True) == (conn, Fit.MATCH)


def test_an_unknown_state_never_matches() -> None:
    pool = pool_with()
    conn = lent(pool, owner=2, key=None)
    assert pool.pick(1, None, schema=True) == (conn, Fit.RESET)


def test_a_session_without_schema_does_not_get_a_connection_that_had_one() -> None:
    pool = pool_with()
    conn = lent(pool, owner=2, key="x")
    conn.has_schema = True
    assert pool.pick(1, "y", schema=False) is None
    assert pool.pick(1, "y", schema=True) == (conn, Fit.RESET)


def test_a_follow_up_reservation_keeps_the_connection_for_its_session() -> None:
    pool = pool_with()
    conn = new_conn()
    pool.add(conn, 1)
    pool.give_back(conn, state_key="k", follow_up=True)
    assert conn.reserved_for == 1
    assert pool.pick(2, "k", schema=True) is None  # another session opens its own
    assert not pool.take_own(2, conn)
    assert pool.take_own(1, conn)
    assert conn.reserved_for == 0
    assert pool.borrowed == 1


def test_take_own_only_takes_an_idle_connection_still_in_the_sessions_state() -> None:
    pool = pool_with(max_connections=3)
    conn = lent(pool, owner=1)
    assert pool.pick(2, "other", schema=True) == (conn, Fit.RESET)
    conn.owner = 2  # what the borrowing session records
    pool.give_back(conn, state_key="other", follow_up=False)
    assert not pool.take_own(1, conn)
    assert pool.take_own(2, conn)
    assert not pool.take_own(2, conn)  # already borrowed


def test_a_connection_idle_past_ping_after_is_not_taken_on_the_fast_path() -> None:
    clock = Clock()
    pool = pool_with(clock, ping_after=5.0)
    conn = lent(pool, owner=1)
    clock.now += 5.0
    assert not pool.take_own(1, conn)
    assert pool.idle == 1
    assert conn.owner == 1


def test_a_busy_connection_given_back_is_closed_not_lent() -> None:
    pool = pool_with()
    conn = new_conn()
    pool.add(conn, 1)
    conn._pending.append(object())  # type: ignore[arg-type]
    pool.give_back(conn, state_key="k", follow_up=False)
    assert pool.idle == 0
    assert pool.borrowed == 0


def test_a_closed_connection_leaves_the_pool() -> None:
    pool = pool_with()
    conn = lent(pool, owner=1)
    assert pool.size == 1
    conn.connection_lost(None)
    assert pool.size == 0
    assert pool.idle == 0


def test_reaping_closes_only_connections_idle_past_the_timeout() -> None:
    clock = Clock()
    pool = pool_with(clock, idle_timeout=10.0)
    old = lent(pool, owner=1)
    clock.now += 6.0
    young = lent(pool, owner=2)
    clock.now += 4.0
    assert pool.reap() == 1
    assert pool.idle_connections() == [young]
    assert old not in pool.idle_connections()
    assert pool.reaped == 1


def test_a_connection_with_prepared_statements_stays_its_sessions_while_the_pool_can_grow() -> None:
    clock = Clock()
    pool = pool_with(clock, max_connections=3)
    held = lent(pool, owner=2, key="k")
    held.statements[1] = 7  # session 2's statement 1 is statement 7 on this connection
    plain = lent(pool, owner=3, key="k")
    assert pool.pick(1, "k", schema=True, hold=True) == (plain, Fit.MATCH)
    pool.give_back(plain, state_key="k", follow_up=False)
    plain.statements[1] = 8
    assert pool.pick(1, "k", schema=True, hold=True) is None  # both held: open another
    assert pool.pick(1, "k", schema=True) == (plain, Fit.MATCH)  # at the limit: lent anyway
    pool.give_back(plain, state_key="k", follow_up=False)
    clock.now += 0.5
    assert pool.pick(1, "k", schema=True, hold=True) is None
    assert pool.pick(2, "k", schema=True, hold=True) == (held, Fit.OWN)  # its own, always
    clock.now += 0.6  # plain came back 1.1 s ago
    assert pool.pick(1, "k", schema=True, hold=True) == (plain, Fit.MATCH)


def test_borrow_opens_a_connection_rather_than_take_a_held_one_then_takes_it_at_the_limit() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=2, wait_timeout=1.0)
        opener = Opener()
        opened = opener.opened

        first, _ = await pool.borrow(1, "k", opener, schema=True)
        first.statements[1] = 5
        pool.give_back(first, state_key="k", follow_up=False)
        second, fit = await pool.borrow(2, "k", opener, schema=True)
        assert (second is not first, fit) == (True, Fit.FRESH)
        second.statements[1] = 6
        pool.give_back(second, state_key="k", follow_up=False)
        third, fit = await pool.borrow(3, "k", opener, schema=True)  # at the limit
        assert (third in (first, second), fit) == (True, Fit.MATCH)
        assert len(opened) == 2

    asyncio.run(scenario())


def test_borrow_opens_up_to_the_limit_then_a_waiter_gets_a_returned_connection() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=2, wait_timeout=5.0)
        opener = Opener()
        opened = opener.opened

        a, fit_a = await pool.borrow(1, "s1", opener, schema=True)
        b, fit_b = await pool.borrow(2, "s2", opener, schema=True)
        assert (fit_a, fit_b) == (Fit.FRESH, Fit.FRESH)
        assert pool.size == 2
        waiter = asyncio.ensure_future(pool.borrow(3, "s3", opener, schema=True))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        assert pool.waiting == 1
        pool.give_back(a, state_key="s1", follow_up=False)
        conn, fit = await asyncio.wait_for(waiter, 1.0)
        assert conn is a
        assert fit is Fit.RESET
        assert len(opened) == 2
        assert pool.waiting == 0
        assert b in (c for c in opened)

    asyncio.run(scenario())


def _limits(max_connections: int) -> PoolSettings:
    return PoolSettings(
        max_connections=max_connections, wait_timeout=5.0, idle_timeout=60.0, ping_after=30.0
    )


def test_a_lowered_maximum_closes_idle_connections_now_and_borrowed_ones_when_given_back() -> None:
    pool = pool_with(max_connections=4)
    oldest, newest = lent(pool, 1), lent(pool, 2)
    first, second = new_conn(), new_conn()
    pool.add(first, owner=3)
    pool.add(second, owner=4)
    assert pool.size == 4
    pool.configure(_limits(3))
    assert pool.settings.max_connections == 3
    assert pool.idle_connections() == [newest]  # the longest idle closed first
    assert oldest not in pool.idle_connections()
    pool.configure(_limits(1))
    assert (pool.size, pool.idle, pool.borrowed) == (2, 0, 2)
    pool.give_back(first, state_key="k", follow_up=False)
    assert (pool.size, pool.idle) == (1, 0)  # over the new maximum: closed, not kept
    pool.give_back(second, state_key="k", follow_up=False)
    assert pool.idle_connections() == [second]  # within it: kept
    assert pool.status()["max_connections"] == 1


def test_a_raised_maximum_lets_a_waiting_session_open_a_connection_at_once() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=1, wait_timeout=5.0)
        opener = Opener()

        held, _ = await pool.borrow(1, "s1", opener, schema=True)
        waiter = asyncio.ensure_future(pool.borrow(2, "s2", opener, schema=True))
        await asyncio.sleep(0.01)
        assert pool.waiting == 1
        pool.configure(_limits(2))
        conn, fit = await asyncio.wait_for(waiter, 1.0)
        assert conn is not held
        assert fit is Fit.FRESH
        assert (pool.size, pool.borrowed) == (2, 2)

    asyncio.run(scenario())


def test_an_exhausted_pool_answers_1040_after_its_wait_timeout() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=1, wait_timeout=0.05)
        opener = Opener()

        await pool.borrow(1, "s", opener, schema=True)
        with pytest.raises(PoolExhausted) as caught:
            await pool.borrow(2, "s", opener, schema=True)
        assert pool.name in caught.value.reason
        assert "Too many connections" in caught.value.reason
        assert pool.exhausted == 1
        assert pool.waiting == 0

    asyncio.run(scenario())


def test_a_full_pool_revokes_a_follow_up_reservation_rather_than_wait() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=1, wait_timeout=0.05)
        opener = Opener()

        conn, _ = await pool.borrow(1, "s", opener, schema=True)
        pool.give_back(conn, state_key="s", follow_up=True)
        again, fit = await pool.borrow(2, "s", opener, schema=True)
        assert again is conn
        assert fit is Fit.MATCH
        assert conn.reserved_for == 0
        assert pool.revoked == 1

    asyncio.run(scenario())


def test_a_failing_opener_frees_its_slot() -> None:
    async def scenario() -> None:
        pool = pool_with(max_connections=1)

        async def broken() -> BackendConnection:
            raise OSError("refused")

        with pytest.raises(OSError):
            await pool.borrow(1, "s", broken, schema=True)
        assert pool.size == 0

    asyncio.run(scenario())


def test_pin_reasons() -> None:
    assert pin_reasons((), in_transaction=False, status=int(ServerStatus.AUTOCOMMIT)) == []
    assert pin_reasons(("temporary_table",), in_transaction=False, status=0) == ["temporary_table"]
    assert pin_reasons((), in_transaction=False, status=int(ServerStatus.IN_TRANS)) == [TRANSACTION]
    assert pin_reasons((), in_transaction=True, status=int(ServerStatus.CURSOR_EXISTS)) == [
        TRANSACTION,
        OPEN_CURSOR,
    ]
    assert FOLLOW_UP not in pin_reasons(("user_variable",), in_transaction=False, status=0)


def test_charset_names() -> None:
    assert charset_names(45) == ("utf8mb4", "utf8mb4_general_ci")
    assert charset_names(8) == ("latin1", "latin1_swedish_ci")
    assert charset_names(100000) is None
