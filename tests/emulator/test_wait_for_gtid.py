"""WAIT_FOR_EXECUTED_GTID_SET, every rule of reference §3.4."""

from __future__ import annotations

import asyncio
import time

import pytest

from consistent.emulator import GtidMode, SqlError
from consistent.emulator.testing import U2, U, q, run, scalar, server


def test_already_executed_and_empty_set_return_zero() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        assert await scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1')") == 0
        assert await scalar(s, "SELECT WAIT_FOR_EXECUTED_GTID_SET('')") == 0
        assert await scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1', 1)") == 0
        await srv.shutdown()

    run(scenario())


def test_fractional_timeout_returns_one() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        started = time.monotonic()
        assert await scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1', 0.05)") == 1
        elapsed = time.monotonic() - started
        assert 0.04 <= elapsed < 1.0
        assert len(srv.gtid_state.waiters) == 0
        await srv.shutdown()

    run(scenario())


def test_returns_when_another_session_commits() -> None:
    async def scenario() -> None:
        srv = server()
        waiter = srv.open_session()
        writer = srv.open_session()

        async def write_later() -> None:
            await asyncio.sleep(0.02)
            await q(writer, "CREATE DATABASE a")
            await asyncio.sleep(0.02)
            await q(writer, "CREATE DATABASE b")

        task = asyncio.create_task(write_later())
        value = await scalar(waiter, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1-2', 5)")
        await task
        assert value == 0
        assert str(srv.gtid_state.executed) == f"{U}:1-2"
        await srv.shutdown()

    run(scenario())


def test_no_timeout_and_zero_wait_forever_until_gtid_purged() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        admin = srv.open_session()
        for sql in (
            f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U2}:1')",
            f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U2}:2', 0)",
        ):
            task = asyncio.create_task(scalar(s, sql))
            await asyncio.sleep(0.05)
            assert not task.done()
            gno = 1 if ":1'" in sql else 2
            await q(admin, f"SET GLOBAL gtid_purged = '+{U2}:{gno}'")
            assert await asyncio.wait_for(task, 1) == 0
        await srv.shutdown()

    run(scenario())


def test_gtids_owned_by_others_do_not_satisfy_the_wait() -> None:
    async def scenario() -> None:
        srv = server()
        owner = srv.open_session()
        s = srv.open_session()
        await q(owner, f"SET GTID_NEXT = '{U2}:1'")
        assert await scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U2}:1', 0.02)") == 1
        await q(owner, "COMMIT")
        assert await scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U2}:1', 0.02)") == 0
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize(
    ("sql", "errno", "message"),
    [
        (
            "SELECT WAIT_FOR_EXECUTED_GTID_SET(NULL)",
            1772,
            "Malformed GTID set specification 'NULL'.",
        ),
        (
            "SELECT WAIT_FOR_EXECUTED_GTID_SET(NULL, -1)",
            1772,
            "Malformed GTID set specification 'NULL'.",
        ),
        (
            f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1', NULL)",
            1210,
            "Incorrect arguments to WAIT_FOR_EXECUTED_GTID_SET.",
        ),
        (
            f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1', -1)",
            1210,
            "Incorrect arguments to WAIT_FOR_EXECUTED_GTID_SET.",
        ),
        (
            "SELECT WAIT_FOR_EXECUTED_GTID_SET('junk', -1)",
            1210,
            "Incorrect arguments to WAIT_FOR_EXECUTED_GTID_SET.",
        ),
        (
            "SELECT WAIT_FOR_EXECUTED_GTID_SET('junk', 1)",
            1772,
            "Malformed GTID set specification 'junk'.",
        ),
        (
            "SELECT WAIT_FOR_EXECUTED_GTID_SET()",
            1582,
            "Incorrect parameter count in the call to native function 'WAIT_FOR_EXECUTED_GTID_SET'",
        ),
        (
            f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1', 1, 2)",
            1582,
            "Incorrect parameter count in the call to native function 'WAIT_FOR_EXECUTED_GTID_SET'",
        ),
    ],
)
def test_argument_errors_in_order(sql: str, errno: int, message: str) -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, sql)
        assert info.value.args == (errno, message)
        await srv.shutdown()

    run(scenario())


def test_gtid_mode_off_is_3062_after_argument_checks() -> None:
    async def scenario() -> None:
        srv = server(gtid_mode=GtidMode.OFF)
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, "SELECT WAIT_FOR_EXECUTED_GTID_SET('junk')")
        assert info.value.args == (
            3062,
            "Cannot use WAIT_FOR_EXECUTED_GTID_SET when GTID_MODE = OFF.",
        )
        with pytest.raises(SqlError) as info:
            await q(s, "SELECT WAIT_FOR_EXECUTED_GTID_SET('x', -5)")
        assert info.value.args[0] == 1210
        await srv.shutdown()

    run(scenario())


def test_waiting_for_an_owned_gtid_is_3173() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, f"SET GTID_NEXT = '{U2}:4'")
        with pytest.raises(SqlError) as info:
            await q(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U2}:1-9', 1)")
        assert info.value.args == (
            3173,
            f"The client holds ownership of the GTID {U2}:4. Therefore, "
            "WAIT_FOR_EXECUTED_GTID_SET cannot wait for this GTID.",
        )
        await q(s, "ROLLBACK")
        await srv.shutdown()

    run(scenario())


def test_applier_thread_gets_null() -> None:
    async def scenario() -> None:
        srv = server()
        applier = srv.open_session(system=True)
        assert await scalar(applier, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:9', 1)") is None
        await srv.shutdown()

    run(scenario())


def test_kill_query_interrupts_with_1317() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        killer = srv.open_session()
        task = asyncio.create_task(q(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:1')"))
        await asyncio.sleep(0.02)
        await q(killer, f"KILL QUERY {s.connection_id}")
        with pytest.raises(SqlError) as info:
            await asyncio.wait_for(task, 1)
        assert info.value.args == (1317, "Query execution was interrupted")
        assert info.value.sqlstate == "70100"
        assert len(srv.gtid_state.waiters) == 0
        # the session is still usable
        assert await scalar(s, "SELECT 1") == 1
        await srv.shutdown()

    run(scenario())


def test_many_waiters_resolve_without_polling() -> None:
    async def scenario() -> None:
        srv = server()
        sessions = [srv.open_session() for _ in range(20)]
        writer = srv.open_session()
        tasks = [
            asyncio.create_task(
                scalar(s, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:{i % 5 + 1}', 5)")
            )
            for i, s in enumerate(sessions)
        ]
        await asyncio.sleep(0.01)
        assert len(srv.gtid_state.waiters) == 20
        for n in range(5):
            await q(writer, f"CREATE DATABASE d{n}")
        assert await asyncio.gather(*tasks) == [0] * 20
        assert len(srv.gtid_state.waiters) == 0
        await srv.shutdown()

    run(scenario())
