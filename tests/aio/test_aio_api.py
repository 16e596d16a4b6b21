"""The asyncio form's API: aiomysql's, so that code written for aiomysql (and SQLAlchemy's
aiomysql adapter) runs on it, plus the blocking form's own (levels, tokens, URL, options)."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import aiomysql
import aiomysql.connection
import aiomysql.cursors
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from consistent import aio, errors, trace
from consistent.aio import _aiomysql
from consistent.policy import PRIMARY, Level, Reason

from .conftest import AsyncBackend, Traced, run


def test_the_cursor_api(backend: AsyncBackend, table: str) -> None:
    async def body() -> None:
        async with aio.connect(**backend.params()) as conn:
            cur = await conn.cursor()
            rows = [(k, k * 10) for k in range(1, 6)]
            assert await cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows) == 5
            await cur.execute(f"SELECT k, v FROM {table} ORDER BY k")
            assert conn.last_decision is not None
            assert conn.last_decision.target in backend.replicas
            assert [d[0] for d in cur.description or ()] == ["k", "v"]
            assert cur.rowcount == 5
            assert await cur.fetchone() == (1, 10)
            assert await cur.fetchmany(2) == ((2, 20), (3, 30))
            assert list(await cur.fetchall()) == [(4, 40), (5, 50)]
            await cur.execute(f"SELECT k FROM {table} WHERE k < %(top)s ORDER BY k", {"top": 3})
            assert [row async for row in cur] == [(1,), (2,)]
            assert cur.mogrify("SELECT %s", ("it's",)) == "SELECT 'it\\'s'"
            await cur.close()
            assert cur.closed
            async with conn.cursor(aio.DictCursor) as dcur:
                await dcur.execute(f"SELECT k, v FROM {table} WHERE k = 2")
                assert await dcur.fetchall() == [{"k": 2, "v": 20}]
            async with conn.cursor(aio.SSCursor) as scur:
                await scur.execute(f"SELECT k FROM {table} ORDER BY k")
                assert conn.last_decision is not None
                assert conn.last_decision.target in backend.replicas
                assert await scur.fetchone() == (1,)
                assert len(await scur.fetchall()) == 4
            async with conn.cursor() as wcur:
                await wcur.execute("CREATE TABLE auto_t (id INT AUTO_INCREMENT PRIMARY KEY, x INT)")
                await wcur.execute("INSERT INTO auto_t (x) VALUES (7)")
                assert wcur.lastrowid == 1
                assert conn.insert_id() == 1
        assert conn.closed

    run(backend, body)


def test_aiomysql_cursor_classes_and_subclasses_are_accepted(backend: AsyncBackend) -> None:
    class Quiet(aiomysql.cursors.Cursor):  # as SQLAlchemy's adapter subclasses it
        async def _show_warnings(self, conn: Any) -> None:
            return None

    async def body() -> None:
        conn = await backend.connect()
        async with conn.cursor(Quiet) as cur:
            assert isinstance(cur, aio.Cursor)
            await cur.execute("SELECT 1 AS one")
            assert await cur.fetchall() == ((1,),)
        async with conn.cursor(aiomysql.cursors.SSDictCursor) as cur:
            assert isinstance(cur, aio.SSDictCursor)
            await cur.execute("SELECT 1 AS one")
            assert await cur.fetchall() == [{"one": 1}]
        async with conn.cursor(aiomysql.cursors.DictCursor, aiomysql.cursors.SSCursor) as cur:
            assert isinstance(cur, aio.SSDictCursor)
        with pytest.raises(errors.NotSupportedError):
            conn.cursor(int)

    run(backend, body)


def test_connection_methods_follow_aiomysql(backend: AsyncBackend, table: str) -> None:
    async def body() -> None:
        conn = await backend.connect()
        assert conn.get_autocommit() is True
        assert not conn.closed
        assert conn.character_set_name() == conn.charset != ""
        assert conn.get_server_info()
        assert conn.thread_id() > 0
        await conn.ping()
        await conn.ping(False)
        await conn.autocommit(False)
        assert conn.get_autocommit() is False
        async with conn.cursor() as cur:
            await cur.execute(f"SELECT COUNT(*) FROM {table}")
            assert conn.last_decision is not None
            assert conn.last_decision.target == PRIMARY  # autocommit off: everything there
            await conn.rollback()
            await conn.autocommit(True)
            await cur.execute(f"SELECT COUNT(*) FROM {table}")
            assert conn.last_decision is not None
            assert conn.last_decision.target in backend.replicas
            # Level switching, as the blocking form's.
            conn.level = "eventual"
            await cur.execute("SELECT 1")
            assert conn.level is Level.EVENTUAL
            assert conn.last_decision is not None
            assert conn.last_decision.reason is Reason.EVENTUAL
            conn.level = Level.READ_OWN_WRITES
            # select_db follows the session onto replicas.
            await conn.select_db(backend.database)
            await cur.execute("SELECT DATABASE()")
            assert await cur.fetchall() == ((backend.database,),)
        conn.close()
        assert conn.closed
        with pytest.raises(errors.InterfaceError):
            conn.cursor()
        await conn.ensure_closed()  # closing again does nothing, as aiomysql

    run(backend, body)


def test_the_url_form_and_bad_arguments(backend: AsyncBackend) -> None:
    replicas = "&".join(f"replica={r}" for r in backend.replicas)
    url = (
        f"mysql://{backend.user}:{backend.password}@{backend.primary}/{backend.database}"
        f"?{replicas}&level=read_latest&wait_timeout=2"
    )

    async def body() -> None:
        own = {k: v for k, v in backend.params().items() if k in ("knowledge", "acknowledged")}
        conn = await aio.connect(url, **own)
        backend.opened.append(conn)
        assert conn.level is Level.READ_LATEST
        assert conn.replicas == tuple(backend.replicas)
        async with conn.cursor() as cur:
            await cur.execute("SELECT 5")
            assert await cur.fetchall() == ((5,),)

    run(backend, body)
    # The same validation as the blocking form, raised before anything is awaited.
    with pytest.raises(errors.ProgrammingError, match="levle"):
        aio.connect(primary=backend.primary, levle="eventual")
    with pytest.raises(errors.InterfaceError):
        aio.connect(primary=backend.primary, level="sometimes")
    with pytest.raises(errors.NotSupportedError, match="defer_connect"):
        aio.connect(primary=backend.primary, defer_connect=True)


def test_pymysql_options_aiomysql_lacks_are_refused_by_name() -> None:
    options = {"host": "h", "port": 1, "user": "u", "database": "d", "read_timeout": 3.0}
    assert _aiomysql.driver_options(options, "h:1") == {
        "host": "h",
        "port": 1,
        "user": "u",
        "db": "d",
    }
    # Defaults are what aiomysql does anyway.
    assert "bind_address" not in _aiomysql.driver_options({**options, "bind_address": None}, "s")
    with pytest.raises(errors.NotSupportedError, match="bind_address"):
        _aiomysql.driver_options({**options, "bind_address": "10.0.0.1"}, "s")


def test_sqlalchemys_aiomysql_adapter_drives_the_connection(
    backend: AsyncBackend, table: str
) -> None:
    """SQLAlchemy's own ``mysql+aiomysql`` dialect with our ``connect`` as its creator: every
    call its adapter makes is one this API answers."""

    async def body() -> None:
        engine = create_async_engine(
            "mysql+aiomysql://", async_creator=lambda: aio.connect(**backend.params())
        )
        try:
            async with engine.begin() as sa:
                await sa.execute(text(f"INSERT INTO {table} VALUES (1, 11)"))
            async with engine.connect() as sa:
                assert (await sa.execute(text(f"SELECT v FROM {table}"))).all() == [(11,)]
                raw = await sa.get_raw_connection()
                conn = raw.driver_connection
                assert isinstance(conn, aio.Connection)
                assert conn.last_decision is not None
                assert conn.last_decision.target in backend.replicas
                stream = await sa.stream(text(f"SELECT k FROM {table}"))
                assert [tuple(r) async for r in stream] == [(1,)]
        finally:
            await engine.dispose()

    run(backend, body)


def test_statements_make_the_blocking_forms_spans(
    backend: AsyncBackend, table: str, traced: Traced
) -> None:
    async def body() -> aio.Connection:
        conn = await backend.connect(telemetry=traced.telemetry)
        async with conn.cursor() as cur:
            await cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
            await cur.execute(f"SELECT v FROM {table} WHERE k = 1")
            assert await cur.fetchall() == ((1,),)
        await conn.begin()
        await conn.commit()
        return conn

    conn = run(backend, body)
    spans = traced.spans(conn)
    kinds = [s[trace.STATEMENT_KIND] for s in spans]
    assert kinds == ["write", "read", "transaction_begin", "commit"]
    write, read = spans[0], spans[1]
    assert write[trace.ROUTE_TARGET] == PRIMARY
    assert write[trace.GTID_PRODUCED]
    decision = conn.last_decision
    assert decision is not None
    assert read[trace.ROUTE_TARGET] in backend.replicas
    assert read[trace.GTID_REQUIRED] == write[trace.GTID_PRODUCED]


def test_the_aiomysql_internals_we_use_exist() -> None:
    """aiomysql's names :mod:`consistent.aio._aiomysql` overrides or reads."""
    conn_cls = aiomysql.connection.Connection
    for name in ("_read_ok_packet", "_read_query_result", "_read_packet", "_connect"):
        assert inspect.iscoroutinefunction(getattr(conn_cls, name)), name
    assert list(inspect.signature(conn_cls._read_query_result).parameters) == [
        "self",
        "unbuffered",
    ]
    source = inspect.getsource(conn_cls)
    for attribute in (
        "self._result",
        "self._writer",
        "self.server_status",
        "self._charset",
        "self._affected_rows",
    ):
        assert f"{attribute} = " in source, attribute
    # The buffered branch of _read_query_result, which TrackingConnection inlines.
    assert "result = MySQLResult(self)\n            await result.read()" in source
    assert inspect.iscoroutinefunction(aiomysql.connection.MySQLResult.read)
    assert {"affected_rows", "server_status"} <= set(vars(aiomysql.connection.MySQLResult(None)))
    assert issubclass(aiomysql.cursors.DictCursor, aiomysql.cursors._DictCursorMixin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _aiomysql.cursor_kind(aiomysql.cursors.SSDictCursor) == (True, True)


def test_bytes_parameters_round_trip(backend: AsyncBackend, table: str) -> None:
    """aiomysql 0.3 escapes ``bytes`` with a PyMySQL function that PyMySQL 1.2 no longer has;
    the wrapper escapes them itself, alone, in ``executemany`` and inside a sequence."""
    blobs = [b"", b"plain", b"it's \\ \x00 \xff\xfe", bytearray(b"\x01\x02'")]

    async def body() -> None:
        async with aio.connect(**backend.params()) as conn, conn.cursor() as cur:
            await cur.execute("CREATE TABLE blobs (k INT PRIMARY KEY, b VARBINARY(64))")
            await cur.execute("INSERT INTO blobs VALUES (%s, %s)", (0, blobs[0]))
            await cur.executemany(
                "INSERT INTO blobs VALUES (%s, %s)", [(k, b) for k, b in enumerate(blobs) if k]
            )
            await cur.execute("SELECT k, b FROM blobs ORDER BY k")
            assert [bytes(b) for _, b in await cur.fetchall()] == [bytes(b) for b in blobs]
            pair = (blobs[1], blobs[2])
            await cur.execute("SELECT k FROM blobs WHERE b IN %s ORDER BY k", (pair,))
            assert await cur.fetchall() == ((1,), (2,))
            assert cur.mogrify("SELECT %s", (b"a'b",)) == "SELECT X'612762'"
            assert cur.mogrify("SELECT %s IN %s", (1, [2, "x"])) == "SELECT 1 IN (2,'x')"

    run(backend, body)
