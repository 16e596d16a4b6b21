"""``mysql+consistent_async``'s errors, disconnects, a dead replica and a lost primary behave as
``mysql+consistent``'s (``test_dialect.py``) and as ``mysql+aiomysql``'s where that one has an
answer; a consistency timeout is never taken for a disconnect."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.mysql.aiomysql import MySQLDialect_aiomysql

from consistent import errors
from consistent.policy import PRIMARY
from consistent.sqlalchemy._dbapi import raw_connection
from consistent.sqlalchemy.async_dialect import ConsistentAsyncDialect

from .test_dialect import ERRNOS, ERROR_PAIRS

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from .conftest import Backend


@pytest.fixture(scope="module")
def dialects() -> tuple[MySQLDialect_aiomysql, ConsistentAsyncDialect]:
    return (
        MySQLDialect_aiomysql(dbapi=MySQLDialect_aiomysql.import_dbapi()),
        ConsistentAsyncDialect(dbapi=ConsistentAsyncDialect.import_dbapi()),
    )


@pytest.mark.parametrize("errno", ERRNOS)
@pytest.mark.parametrize(("theirs", "ours"), ERROR_PAIRS, ids=lambda c: c.__name__)
def test_is_disconnect_agrees_with_mysql_aiomysql(
    dialects: tuple[MySQLDialect_aiomysql, ConsistentAsyncDialect],
    errno: int,
    theirs: type[Exception],
    ours: type[Exception],
) -> None:
    aiomysql_dialect, dialect = dialects
    message = "Lost connection to server during query"
    expected = aiomysql_dialect.is_disconnect(theirs(errno, message), None, None)  # type: ignore[arg-type]
    assert dialect.is_disconnect(ours(errno, message), None, None) is expected  # type: ignore[arg-type]


def test_a_consistency_timeout_is_never_a_disconnect(
    dialects: tuple[MySQLDialect_aiomysql, ConsistentAsyncDialect],
) -> None:
    _, dialect = dialects
    timeout = errors.ConsistencyTimeout("replica r1 did not reach x; not connected?")
    assert dialect.is_disconnect(timeout, None, None) is False  # type: ignore[arg-type]


def test_the_dbapi_error_tree_is_the_sync_dialects() -> None:
    dbapi: Any = ConsistentAsyncDialect.import_dbapi()
    for name in ("Error", "OperationalError", "IntegrityError", "InterfaceError"):
        assert getattr(dbapi, name) is getattr(errors, name)
    assert issubclass(dbapi.IntegrityError, pymysql.err.IntegrityError)


async def _raw(conn: AsyncConnection) -> Any:
    sync = conn.sync_connection
    assert sync is not None
    raw = raw_connection(sync.connection)
    assert raw is not None
    return raw


def test_server_errors_map_to_sqlalchemy_exceptions(backend: Backend) -> None:
    async def test() -> None:
        async with backend.async_engine() as engine:
            async with engine.begin() as conn:
                await conn.exec_driver_sql("CREATE TABLE u (id INT PRIMARY KEY)")
                await conn.exec_driver_sql("INSERT INTO u VALUES (1)")
            async with engine.connect() as conn:
                with pytest.raises(sa.exc.IntegrityError) as dup:
                    await conn.exec_driver_sql("INSERT INTO u VALUES (1)")
                assert isinstance(dup.value.orig, errors.IntegrityError)
                assert isinstance(dup.value.orig, pymysql.err.IntegrityError)
                assert dup.value.orig.args[0] == 1062
                assert not dup.value.connection_invalidated

    asyncio.run(test())


def test_a_consistency_timeout_leaves_the_pooled_connection_valid(backend: Backend) -> None:
    async def test() -> None:
        url = backend.url("mysql+consistent_async", wait_timeout="0.2", on_timeout="error")
        async with backend.async_engine(url, pool_size=1, max_overflow=0) as engine:
            async with engine.begin() as conn:
                await conn.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            backend.catch_up()
            backend.pause_all()
            try:
                async with engine.connect() as conn:
                    await conn.exec_driver_sql("INSERT INTO t VALUES (1, 10)")
                    await conn.commit()
                    raw_before = await _raw(conn)
                    with pytest.raises(sa.exc.OperationalError) as info:
                        await conn.exec_driver_sql("SELECT v FROM t WHERE id = 1")
                    assert isinstance(info.value.orig, errors.ConsistencyTimeout)
                    assert info.value.connection_invalidated is False
                    assert not conn.invalidated
                    await conn.rollback()
            finally:
                backend.resume_all()
            async with engine.connect() as conn:
                # the same connection came back from the pool, token wiped, and it still works
                assert await _raw(conn) is raw_before
                assert await conn.scalar(sa.text("SELECT v FROM t WHERE id = 1")) == 10

    asyncio.run(test())


@pytest.mark.parametrize("driver", ["mysql+consistent_async", "mysql+aiomysql"])
def test_pre_ping_replaces_a_connection_the_server_killed(backend: Backend, driver: str) -> None:
    """A lost primary, on both dialects: the primary kills the pooled connection; the
    pre-ping notices (a disconnect errno) and the pool opens a new one transparently."""

    async def test() -> None:
        async with backend.async_engine(
            backend.url(driver), pool_size=1, max_overflow=0, pool_pre_ping=True
        ) as engine:
            async with engine.connect() as conn:
                first = await conn.scalar(sa.text("SELECT CONNECTION_ID()"))
            assert isinstance(first, int)
            with contextlib.suppress(Exception):
                backend.primary_query(f"KILL {first}")
            async with engine.connect() as conn:
                second = await conn.scalar(sa.text("SELECT CONNECTION_ID()"))
            assert second != first

    asyncio.run(test())


def test_a_lost_primary_invalidates_the_connection_and_the_pool_recovers(
    backend: Backend,
) -> None:
    async def test() -> None:
        async with backend.async_engine(pool_size=1, max_overflow=0) as engine:
            async with engine.connect() as conn:
                thread_id = await conn.scalar(
                    sa.text("/* consistent: primary */ SELECT CONNECTION_ID()")
                )
                backend.primary_query(f"KILL {int(thread_id)}")
                with pytest.raises(sa.exc.OperationalError) as info:
                    await conn.exec_driver_sql("CREATE TABLE lost (id INT)")
                assert info.value.connection_invalidated
                assert info.value.orig is not None
                assert info.value.orig.args[0] in (2006, 2013)
            async with engine.connect() as conn:
                assert await conn.scalar(sa.text("SELECT 1")) == 1
            assert backend.primary_query("SHOW TABLES LIKE 'lost'") == []

    asyncio.run(test())


def test_a_dead_replica_costs_no_read(backend: Backend) -> None:
    async def test() -> None:
        url = backend.url("mysql+consistent_async", wait_timeout="1")
        async with backend.async_engine(url, pool_size=1, max_overflow=0) as engine:
            async with engine.begin() as conn:
                await conn.exec_driver_sql("CREATE TABLE d (id INT PRIMARY KEY)")
            backend.catch_up()
            async with engine.connect() as conn:
                killed: str | None = None
                for i in range(40):
                    await conn.exec_driver_sql(f"INSERT INTO d VALUES ({i})")
                    await conn.commit()
                    found = await conn.scalar(sa.text(f"SELECT id FROM d WHERE id = {i}"))
                    assert found == i
                    target = (await _raw(conn)).last_decision.target
                    if i == 10:  # kill the replica that serves this connection's reads
                        assert target != PRIMARY
                        killed = target
                        backend.kill(backend.replicas.index(target))
                    elif i > 10:
                        assert target != killed
                assert killed is not None

    asyncio.run(test())
