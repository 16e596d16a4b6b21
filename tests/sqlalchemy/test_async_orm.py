"""``mysql+consistent_async`` through SQLAlchemy's asyncio ORM, on the emulator and on MariaDB.

Read-your-writes under injected lag with concurrent tasks (and the ``eventual`` control that
reads stale data with the same workload), the token of an ``AsyncSession`` across pool
checkouts and across sessions, transactions, and the engine made from its URL through the
entry point.  Each test runs its own event loop (``asyncio.run``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

import consistent.sqlalchemy as csa
from consistent.errors import InterfaceError
from consistent.policy import PRIMARY
from consistent.sqlalchemy._dbapi import raw_connection
from consistent.sqlalchemy.async_dialect import (
    ConsistentAsyncDialect,
    ConsistentAsyncMariaDBDialect,
)

from .conftest import declared_dialects

if TYPE_CHECKING:
    from .conftest import Backend

#: Write-then-read iterations per task and backend (an emulator round trip costs about ten
#: times a MariaDB one: its servers run in the test process).
ITERATIONS = {"mariadb": 60, "emulator": 25}
TASKS = 4


class Base(orm.DeclarativeBase):
    pass


class Counter(Base):
    __tablename__ = "async_counters"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    value: orm.Mapped[int] = orm.mapped_column()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


async def create_schema(engine: AsyncEngine, backend: Backend) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    backend.catch_up()


async def raw_of(session: AsyncSession) -> Any:
    """The ``consistent.aio`` connection the session's transaction holds."""
    connection = await session.connection()
    assert connection.sync_connection is not None
    raw = raw_connection(connection.sync_connection.connection)
    assert raw is not None
    return raw


async def last_target(session: AsyncSession) -> str:
    """Where the session's last statement ran (the ``consistent.aio`` connection's decision)."""
    decision = (await raw_of(session)).last_decision
    assert decision is not None
    return str(decision.target)


async def read_back(session: AsyncSession, counter: int) -> int | None:
    return await session.scalar(sa.select(Counter.value).where(Counter.id == counter))


async def write_then_read(
    sessions: async_sessionmaker[AsyncSession], counter: int, iterations: int
) -> tuple[int, int]:
    """One task: ``iterations`` times commit a new value, then read it back in the next
    transaction.  Returns (stale reads, reads on a replica)."""
    stale = on_replicas = 0
    async with sessions() as session:
        row = Counter(id=counter, value=0)
        session.add(row)
        await session.commit()
        for i in range(1, iterations + 1):
            row.value = i
            await session.commit()
            if await read_back(session, counter) != i:
                stale += 1
            if await last_target(session) != PRIMARY:
                on_replicas += 1
            await session.commit()
            await asyncio.sleep(0)  # let the other tasks interleave between transactions
    return stale, on_replicas


async def concurrent_workload(engine: AsyncEngine, backend: Backend) -> tuple[int, int, int]:
    """:data:`TASKS` concurrent tasks under injected lag: (stale reads, reads on replicas,
    reads)."""
    iterations = ITERATIONS[backend.name]
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    with backend.injected_lag():
        results = await asyncio.gather(
            *(write_then_read(sessions, task, iterations) for task in range(TASKS))
        )
    return sum(r[0] for r in results), sum(r[1] for r in results), TASKS * iterations


def test_concurrent_tasks_read_their_writes_under_lag(backend: Backend) -> None:
    async def test() -> None:
        url = backend.url("mysql+consistent_async", wait_timeout="2")
        async with backend.async_engine(url, pool_size=TASKS + 2) as engine:
            await create_schema(engine, backend)
            stale, on_replicas, reads = await concurrent_workload(engine, backend)
        assert stale == 0
        assert on_replicas > reads // 2  # the guarantee did not come from avoiding replicas

    run(test)


def test_the_eventual_level_reads_stale_data_with_the_same_workload(backend: Backend) -> None:
    async def test() -> None:
        url = backend.url("mysql+consistent_async", level="eventual")
        async with backend.async_engine(url, pool_size=TASKS + 2) as engine:
            await create_schema(engine, backend)
            stale, on_replicas, reads = await concurrent_workload(engine, backend)
        assert on_replicas == reads  # eventual never waits and never falls back
        assert stale > 0

    run(test)


def test_an_async_session_keeps_its_token_across_checkouts(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine(pool_size=3) as engine:
            await create_schema(engine, backend)
            raws: set[int] = set()
            held: list[Any] = []
            async with AsyncSession(engine) as session:
                assert csa.token(session) == ""
                for i in range(4):
                    session.add(Counter(id=i, value=i))
                    await session.commit()
                    token = csa.token(session)
                    assert token
                    assert session.sync_session.info[csa.TOKEN_KEY] == token
                    # someone else holds the connection just checked in: the next
                    # transaction gets another one, which must be told the session's token
                    held.append(await engine.connect())
                    backend.pause_all()
                    timer = backend.resume_all_later()
                    try:
                        assert await read_back(session, i) == i
                    finally:
                        timer.join()
                    assert await last_target(session) != PRIMARY
                    raws.add(id(await raw_of(session)))
                    await session.commit()
                    if len(held) > 1:
                        await held.pop(0).close()
            for conn in held:
                await conn.close()
            assert len(raws) > 1  # the token crossed pooled connections

    run(test)


def test_the_token_carries_a_write_to_another_async_session(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine(pool_size=2) as engine:
            await create_schema(engine, backend)
            backend.pause_all()
            async with AsyncSession(engine) as writer:
                writer.add(Counter(id=7, value=70))
                await writer.commit()
                token = csa.token(writer)
            async with AsyncSession(engine) as stranger:
                assert await read_back(stranger, 7) is None  # a replica without the write
            timer = backend.resume_all_later()
            try:
                async with AsyncSession(engine) as reader:
                    csa.require(reader, token)
                    assert await read_back(reader, 7) == 70
                    assert await last_target(reader) != PRIMARY
                    assert csa.token(reader) == token
            finally:
                timer.join()

    run(test)


def test_an_async_connection_has_the_token_of_its_writes(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine() as engine:
            await create_schema(engine, backend)
            async with engine.connect() as conn:
                assert csa.token(conn) == ""
                await conn.execute(sa.insert(Counter).values(id=1, value=1))
                await conn.commit()
                token = csa.token(conn)
                assert token
            backend.pause_all()
            timer = backend.resume_all_later()
            try:
                async with engine.connect() as other:
                    csa.require(other, token)
                    value = await other.scalar(sa.select(Counter.value).where(Counter.id == 1))
                    assert value == 1
            finally:
                timer.join()
            with pytest.raises(InterfaceError, match="not started"):
                csa.token(engine.connect())

    run(test)


def test_a_rolled_back_transaction_leaves_nothing(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine() as engine:
            await create_schema(engine, backend)
            async with AsyncSession(engine) as session:
                session.add(Counter(id=1, value=1))
                await session.commit()
                row = await session.get(Counter, 1)
                assert row is not None
                row.value = 2
                session.add(Counter(id=2, value=2))
                await session.flush()
                # inside the write transaction the reads see its own uncommitted rows
                assert await read_back(session, 2) == 2
                assert await last_target(session) == PRIMARY
                await session.rollback()
                assert await read_back(session, 1) == 1
                assert await read_back(session, 2) is None
            backend.catch_up()
            assert backend.primary_query("SELECT id, value FROM async_counters") == [(1, 1)]

    run(test)


def test_a_savepoint_rolls_back_alone(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine() as engine:
            await create_schema(engine, backend)
            async with AsyncSession(engine) as session:
                session.add(Counter(id=1, value=1))
                nested = await session.begin_nested()
                session.add(Counter(id=2, value=2))
                await nested.rollback()
                await session.commit()
                assert csa.token(session)
            rows = backend.primary_query("SELECT id FROM async_counters ORDER BY id")
            assert rows == [(1,)]

    run(test)


def test_a_read_only_transaction_sends_no_begin_and_reads_on_a_replica(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine() as engine:
            await create_schema(engine, backend)
            async with AsyncSession(engine) as session, session.begin():
                assert await read_back(session, 1) is None
                assert await last_target(session) != PRIMARY
                assert not (await raw_of(session)).policy.in_transaction

    run(test)


def test_the_url_selects_the_dialect_through_its_entry_point(backend: Backend) -> None:
    entries = declared_dialects()
    assert entries["mysql.consistent_async"] == (
        "consistent.sqlalchemy.async_dialect:ConsistentAsyncDialect"
    )
    assert entries["mariadb.consistent_async"] == (
        "consistent.sqlalchemy.async_dialect:ConsistentAsyncMariaDBDialect"
    )

    drivers: list[tuple[str, type[ConsistentAsyncDialect]]] = [
        ("mysql+consistent_async", ConsistentAsyncDialect)
    ]
    if backend.name == "mariadb":  # SQLAlchemy's MariaDB dialect refuses a MySQL server
        drivers.append(("mariadb+consistent_async", ConsistentAsyncMariaDBDialect))

    async def test() -> None:
        for driver, dialect in drivers:
            async with backend.async_engine(backend.url(driver)) as engine:
                assert type(engine.dialect) is dialect
                assert engine.dialect.is_async
                async with engine.connect() as conn:
                    assert await conn.scalar(sa.text("SELECT 1")) == 1

    run(test)
