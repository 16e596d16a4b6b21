"""Session commands besides COM_QUERY: prepared statements, multi-statements, KILL, reset."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal

import pytest

from consistent.emulator import SqlError
from consistent.emulator.testing import one, q, rows, run, scalar, server
from consistent.protocol.constants import Capability, ServerStatus
from consistent.protocol.session_state import Schema


async def _app():  # type: ignore[no-untyped-def]
    srv = server()
    s = srv.open_session()
    await q(s, "CREATE DATABASE app")
    await q(s, "USE app")
    await q(
        s,
        "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20), "
        "amount DECIMAL(8,2), at DATETIME(6), raw VARBINARY(8))",
    )
    return srv, s


def test_prepared_statement_round_trip() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        insert = s.prepare("INSERT INTO t (name, amount, at, raw) VALUES (?, ?, ?, ?)")
        assert insert.param_count == 4
        moment = dt.datetime(2024, 1, 2, 3, 4, 5, 600000)
        out = await s.execute_prepared(
            insert.stmt_id, ["o'neil", Decimal("1.25"), moment, b"\x00\xff"]
        )
        assert (out.affected_rows, out.last_insert_id) == (1, 1)
        select = s.prepare("SELECT name, amount, at, raw FROM t WHERE id = ?")
        assert [c.name for c in select.columns] == ["name", "amount", "at", "raw"]
        assert select.columns[1].decimals == 2
        with pytest.raises(SqlError) as missing:
            s.prepare("SELECT * FROM nope WHERE a = ?")
        assert missing.value.args[0] == 1146
        out = await s.execute_prepared(select.stmt_id, [1])
        assert out.result is not None
        assert out.result.rows == (("o'neil", Decimal("1.25"), moment, b"\x00\xff"),)
        with pytest.raises(SqlError) as info:
            await s.execute_prepared(select.stmt_id, [])
        assert info.value.args[0] == 1210
        s.close_prepared(select.stmt_id)
        with pytest.raises(SqlError) as info:
            await s.execute_prepared(select.stmt_id, [1])
        assert info.value.args[0] == 1243
        await srv.shutdown()

    run(scenario())


def test_sql_prepare_execute_deallocate() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "PREPARE ins FROM 'INSERT INTO t (name) VALUES (?)'")
        await q(s, "SET @n = 'via-sql'")
        await q(s, "EXECUTE ins USING @n")
        assert await rows(s, "SELECT name FROM t") == [("via-sql",)]
        await q(s, "DEALLOCATE PREPARE ins")
        with pytest.raises(SqlError):
            await q(s, "EXECUTE ins USING @n")
        await srv.shutdown()

    run(scenario())


def test_multi_statement_results_and_error_position() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        outcomes = []
        stream = s.query(
            "INSERT INTO t (name) VALUES ('a'); SELECT name FROM t; SELECT * FROM missing; SELECT 1"
        )
        outcomes.append(await anext(stream))
        outcomes.append(await anext(stream))
        with pytest.raises(SqlError) as info:
            await anext(stream)
        assert info.value.args[0] == 1146
        assert len(outcomes) == 2
        assert outcomes[0].status & ServerStatus.MORE_RESULTS_EXISTS
        assert outcomes[1].result is not None
        assert outcomes[1].result.rows == (("a",),)
        await srv.shutdown()

    run(scenario())


def test_multi_statements_need_the_capability() -> None:
    async def scenario() -> None:
        srv = server()
        caps = int(Capability.PROTOCOL_41 | Capability.SESSION_TRACK)
        s = srv.open_session(client_capabilities=caps)
        with pytest.raises(SqlError) as info:
            await q(s, "SELECT 1; SELECT 2")
        assert info.value.args[0] == 1064
        assert "'; SELECT 2'" in info.value.args[1]
        assert await scalar(s, "SELECT 1;") == 1
        await srv.shutdown()

    run(scenario())


def test_empty_query_is_1065() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, "  -- nothing\n")
        assert info.value.args == (1065, "Query was empty")
        await srv.shutdown()

    run(scenario())


def test_init_db_ping_field_list() -> None:
    async def scenario() -> None:
        srv, _ = await _app()
        other = srv.open_session()
        out = await other.init_db("app")
        assert out.session_state == (Schema("app"),)
        with pytest.raises(SqlError) as info:
            await other.init_db("nope")
        assert info.value.args[0] == 1049
        assert other.ping().result is None
        columns = other.field_list("t", "a%")
        assert [c.name for c in columns] == ["amount", "at"]
        await srv.shutdown()

    run(scenario())


def test_reset_connection_and_change_user() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "SET @x = 1, autocommit = 0")
        await q(s, "CREATE TEMPORARY TABLE tmp (a INT)")
        await q(s, "INSERT INTO t (name) VALUES ('uncommitted')")
        out = await s.reset_connection()
        assert out.status & ServerStatus.AUTOCOMMIT
        assert await scalar(s, "SELECT @x") is None
        assert await scalar(s, "SELECT COUNT(*) FROM t") == 0
        with pytest.raises(SqlError):
            await q(s, "SELECT * FROM tmp")
        assert await scalar(s, "SELECT DATABASE()") == "app"
        await s.change_user("root", None)
        assert await scalar(s, "SELECT DATABASE()") is None
        await srv.shutdown()

    run(scenario())


def test_kill_connection_ends_the_session() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        victim = srv.open_session()
        await q(s, f"KILL {victim.connection_id}")
        assert victim.closed
        with pytest.raises(SqlError) as info:
            await q(victim, "SELECT 1")
        assert info.value.args[0] == 1927
        with pytest.raises(SqlError) as info:
            await q(s, "KILL 9999")
        assert info.value.args == (1094, "Unknown thread id: 9999")
        await srv.shutdown()

    run(scenario())


def test_kill_query_interrupts_sleep_which_returns_one() -> None:
    async def scenario() -> None:
        srv, _ = await _app()
        sleeper = srv.open_session()
        task = asyncio.create_task(scalar(sleeper, "SELECT SLEEP(10)"))
        await asyncio.sleep(0.02)
        await srv.kill(sleeper.connection_id, query_only=True)
        assert await asyncio.wait_for(task, 1) == 1
        assert await scalar(sleeper, "SELECT SLEEP(0)") == 0
        await srv.shutdown()

    run(scenario())


def test_processlist_and_connection_id() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        ids = [r[0] for r in await rows(s, "SHOW PROCESSLIST")]
        assert s.connection_id in ids
        assert await scalar(s, "SELECT CONNECTION_ID()") == s.connection_id
        await srv.shutdown()

    run(scenario())


def test_open_session_with_unknown_database() -> None:
    srv = server()
    with pytest.raises(SqlError) as info:
        srv.open_session("root", "nope")
    assert info.value.args[0] == 1049
    run(srv.shutdown())


def test_accounts_keep_plain_and_native_password() -> None:
    from consistent.emulator import Account

    srv = server(accounts=(Account("app", "secret"),))
    account = srv.users["app"]
    assert account.password == "secret"
    # SHA1(SHA1('secret')) as mysql_native_password stores it
    assert account.native_hash == "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
    run(srv.shutdown())


def test_outcome_status_flags_follow_autocommit_and_transactions() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        out = await one(s, "SELECT 1")
        assert out.status == ServerStatus.AUTOCOMMIT
        out = await one(s, "BEGIN")
        assert out.status == ServerStatus.AUTOCOMMIT | ServerStatus.IN_TRANS
        out = await one(s, "COMMIT")
        assert out.status == ServerStatus.AUTOCOMMIT
        await srv.shutdown()

    run(scenario())


def test_kill_connection_while_waiting_closes_the_session() -> None:
    async def scenario() -> None:
        srv, _ = await _app()
        victim = srv.open_session()
        closed: list[int] = []
        victim.add_close_listener(lambda s: closed.append(s.connection_id))
        task = asyncio.create_task(
            q(
                victim,
                "SELECT WAIT_FOR_EXECUTED_GTID_SET('00000000-1111-0000-1111-000000000000:99')",
            )
        )
        await asyncio.sleep(0.02)
        await srv.kill(victim.connection_id, query_only=False)
        with pytest.raises(SqlError) as info:
            await asyncio.wait_for(task, 1)
        assert info.value.args == (1927, "Connection was killed")
        assert victim.closed
        assert closed == [victim.connection_id]
        assert victim.connection_id not in srv.sessions
        await srv.shutdown()

    run(scenario())
