"""The asyncio form's guarantees at the data level, with many tasks at once, on real MariaDB and
on the emulator: read-your-writes under injected lag (and stale reads without it), a replica
that dies, a primary that is lost, transactions, tokens, errors, cancellation.

The scenarios are the blocking form's (tests/dbapi/test_dbapi_consistency.py,
test_dbapi_routing.py); the deadline scenarios (a black-hole replica, frozen servers) run for
this form in tests/integration/test_deadlines.py."""

from __future__ import annotations

import asyncio
import contextlib

import pymysql
import pytest

from consistent import aio, errors
from consistent.policy import PRIMARY

from .conftest import AsyncBackend, run

#: Concurrent tasks, each a session of its own, and write-then-read rounds per task.
TASKS = 8
ROUNDS = 60


async def write_then_read(
    conn: aio.Connection, table: str, key: int, rounds: int
) -> tuple[int, int]:
    """``rounds`` times: write a new value to row ``key``, read it back.  Returns (reads that
    did not see the write, reads served by replicas)."""
    async with conn.cursor() as cur:
        await cur.execute(f"INSERT INTO {table} VALUES (%s, 0)", (key,))
        wrong = on_replicas = 0
        for i in range(1, rounds + 1):
            await cur.execute(f"UPDATE {table} SET v = %s WHERE k = %s", (i, key))
            await cur.execute(f"SELECT v FROM {table} WHERE k = %s", (key,))
            if await cur.fetchone() != (i,):
                wrong += 1
            decision = conn.last_decision
            assert decision is not None
            if decision.target != PRIMARY:
                on_replicas += 1
    return wrong, on_replicas


async def many_sessions(
    backend: AsyncBackend, table: str, first_key: int, **kwargs: object
) -> tuple[int, int]:
    """:func:`write_then_read` in :data:`TASKS` concurrent tasks; summed results."""
    conns = [await backend.connect(**kwargs) for _ in range(TASKS)]
    results = await asyncio.gather(
        *(write_then_read(c, table, first_key + n, ROUNDS) for n, c in enumerate(conns))
    )
    return sum(r[0] for r in results), sum(r[1] for r in results)


def test_read_your_writes_holds_under_lag_across_tasks_and_eventual_does_not(
    backend: AsyncBackend, table: str
) -> None:
    async def body() -> tuple[int, int, int]:
        with backend.injected_lag(0.06):
            violations, on_replicas = await many_sessions(backend, table, 0, wait_timeout=2.0)
            stale, _ = await many_sessions(backend, table, 1000, level="eventual")
        return violations, on_replicas, stale

    violations, on_replicas, stale = run(backend, body)
    assert violations == 0
    assert on_replicas > TASKS * ROUNDS // 2  # the guarantee did not come from avoiding replicas
    assert stale > 0  # the same workload, unguarded, reads stale data: the test can fail


def test_a_dead_replica_mid_run_costs_no_read_and_no_duplicate_write(
    backend: AsyncBackend, table: str
) -> None:
    async def body() -> tuple[int, int, str | None, aio.Connection]:
        conn = await backend.connect(wait_timeout=1.0)
        cur = conn.cursor()
        failed = wrong = 0
        killed: str | None = None
        for i in range(120):
            if i == 40:  # kill the replica that serves this session's reads
                assert conn.last_decision is not None
                killed = conn.last_decision.target
                backend.kill(backend.replicas.index(killed))
            await cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, i))
            try:
                await cur.execute(f"SELECT v FROM {table} WHERE k = %s", (i,))
            except aio.Error:
                failed += 1
                continue
            if await cur.fetchall() != ((i,),):
                wrong += 1
            if i > 40:
                assert conn.last_decision is not None
                assert conn.last_decision.target != killed
        return failed, wrong, killed, conn

    failed, wrong, killed, conn = run(backend, body)
    assert (failed, wrong) == (0, 0)
    assert killed is not None
    assert conn.policy.knowledge.view(killed).failures >= 1
    assert backend.primary_query(f"SELECT COUNT(*), COUNT(DISTINCT k) FROM {table}") == [(120, 120)]


def test_a_lost_primary_is_a_clear_error_and_the_write_is_not_retried(
    backend: AsyncBackend, table: str
) -> None:
    async def body() -> None:
        conn = await backend.connect()
        cur = conn.cursor()
        backend.primary_query(f"KILL {conn.thread_id()}")
        with pytest.raises(aio.OperationalError) as info:
            await asyncio.wait_for(cur.execute(f"INSERT INTO {table} VALUES (1, 1)"), 30)
        assert info.value.errno in (2006, 2013)
        assert "lost the connection to the primary" in info.value.msg
        assert isinstance(info.value, pymysql.err.OperationalError)
        assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
        with pytest.raises(aio.OperationalError, match="lost the connection to the primary"):
            await cur.execute("SELECT 1")
        assert conn.closed
        # A fresh session on request, keeping the token.
        await conn.ping(reconnect=True)
        await cur.execute(f"SELECT COUNT(*) FROM {table}")
        assert await cur.fetchall() == ((0,),)

    run(backend, body)


def test_a_transaction_runs_on_the_primary_and_commits_or_rolls_back(
    backend: AsyncBackend, table: str
) -> None:
    async def body() -> None:
        conn = await backend.connect()
        async with conn.cursor() as cur:
            await conn.begin()
            await cur.execute(f"INSERT INTO {table} VALUES (1, 10)")
            await cur.execute(f"SELECT v FROM {table} WHERE k = 1")
            assert conn.last_decision is not None
            assert conn.last_decision.target == PRIMARY  # a read in the transaction
            assert conn.get_transaction_status()
            await conn.rollback()
            assert not conn.get_transaction_status()
            await cur.execute(f"SELECT COUNT(*) FROM {table}")
            assert await cur.fetchall() == ((0,),)
            await conn.begin()
            await cur.execute(f"INSERT INTO {table} VALUES (2, 20)")
            await conn.commit()
            await cur.execute(f"SELECT v FROM {table} WHERE k = 2")
            assert await cur.fetchall() == ((20,),)
            assert conn.last_decision is not None
            assert conn.last_decision.target in backend.replicas  # after it: a replica again
            # A read-only transaction runs on one replica.
            await conn.begin(read_only=True)
            await cur.execute(f"SELECT v FROM {table} WHERE k = 2")
            first = conn.last_decision
            await cur.execute(f"SELECT COUNT(*) FROM {table}")
            assert conn.last_decision is not None
            assert first is not None
            assert conn.last_decision.target == first.target != PRIMARY
            await conn.commit()

    run(backend, body)
    assert backend.primary_query(f"SELECT k FROM {table}") == [(2,)]


def test_a_token_carries_causality_to_another_connection(backend: AsyncBackend, table: str) -> None:
    async def body() -> None:
        writer = await backend.connect()
        reader = await backend.connect()
        backend.pause(0)
        backend.pause(1)
        try:
            async with writer.cursor() as cur:
                await cur.execute(f"INSERT INTO {table} VALUES (1, 99)")
            reader.require(writer.token)
            assert reader.token == writer.token != ""
            backend.resume(0)
            async with reader.cursor() as cur:
                await cur.execute(f"SELECT v FROM {table} WHERE k = 1")
                assert await cur.fetchall() == ((99,),)
        finally:
            backend.resume_all()
        garbage = "mysql:garbage" if reader.flavor == "mysql" else "mariadb:garbage"
        with pytest.raises(errors.MalformedGtidSet) as info:
            reader.require(garbage)
        assert info.value.args[0] == 1772
        assert isinstance(info.value, pymysql.err.MySQLError)

    run(backend, body)


def test_errors_are_ours_and_pymysqls(backend: AsyncBackend, table: str) -> None:
    async def body() -> None:
        conn = await backend.connect()
        cur = conn.cursor()
        await cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
        with pytest.raises(pymysql.err.IntegrityError) as dup:
            await cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
        assert isinstance(dup.value, errors.IntegrityError)
        assert dup.value.args[0] == 1062
        with pytest.raises(pymysql.err.ProgrammingError) as missing:
            await cur.execute("SELECT * FROM no_such_table")  # routed to a replica
        assert isinstance(missing.value, errors.ProgrammingError)
        assert missing.value.args[0] == 1146
        await conn.ensure_closed()
        with pytest.raises(pymysql.err.InterfaceError) as closed:
            await cur.execute("SELECT 1")
        assert isinstance(closed.value, errors.InterfaceError)

    run(backend, body)


def test_cancelling_a_read_on_a_replica_drops_only_that_connection(backend: AsyncBackend) -> None:
    async def body() -> None:
        conn = await backend.connect(level="eventual")
        cur = conn.cursor()
        for _ in backend.replicas:  # open a connection to every replica
            await cur.execute("SELECT 1")
        opened = {name: link.raw for name, link in conn._replicas.items()}
        task = asyncio.ensure_future(cur.execute("SELECT SLEEP(5)"))
        await asyncio.sleep(0.3)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert conn.last_decision is not None
        replica = conn.last_decision.target
        assert replica != PRIMARY
        assert conn._replicas[replica].raw is None  # mid-reply: closed, not reused
        before = opened[replica]
        assert before is None or before.closed
        await cur.execute("SELECT 2")  # the logical connection goes on
        assert await cur.fetchall() == ((2,),)
        assert not conn.closed

    run(backend, body)


@pytest.mark.parametrize("routed", [True, False], ids=["routed", "no-replicas"])
def test_cancelling_a_statement_on_the_primary_loses_the_session_visibly(
    backend: AsyncBackend, routed: bool
) -> None:
    async def body() -> None:
        conn = await (backend.connect() if routed else backend.connect(replicas=[]))
        cur = conn.cursor()
        await cur.execute("/* consistent: primary */ SELECT 1")
        task = asyncio.ensure_future(cur.execute("/* consistent: primary */ SELECT SLEEP(5)"))
        await asyncio.sleep(0.3)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()
        with pytest.raises(aio.OperationalError) as info:
            await cur.execute("SELECT 1")
        assert info.value.args[0] == 2013
        assert "cancelled" in info.value.msg
        await conn.ping(reconnect=True)
        await cur.execute("SELECT 3")
        assert await cur.fetchall() == ((3,),)

    run(backend, body)
