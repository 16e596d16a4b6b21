"""GTID assignment and GTID variables of one emulated server (reference §2-§3)."""

from __future__ import annotations

import pytest

from consistent.emulator import ER, GtidMode, SqlError
from consistent.emulator.binlog import UNDEFINED_COMMIT_TIMESTAMP
from consistent.emulator.testing import U2, FakeClock, U, one, q, run, scalar, server
from consistent.gtid import GtidSet


async def _ready(**config: object):  # type: ignore[no-untyped-def]
    srv = server(**config)
    s = srv.open_session()
    await q(s, "CREATE DATABASE test")  # U:1
    await q(s, "USE test")
    await q(s, "CREATE TABLE t (a INT PRIMARY KEY)")  # U:2
    return srv, s


def test_ddl_and_dml_get_consecutive_gtids() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, "INSERT INTO t VALUES (1)")
        await q(s, "UPDATE t SET a = 2")
        await q(s, "DELETE FROM t")
        assert str(srv.gtid_state.executed) == f"{U}:1-5"
        await srv.shutdown()

    run(scenario())


def test_statements_that_change_nothing_get_no_gtid() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, "UPDATE t SET a = 2 WHERE a = 99")
        await q(s, "DELETE FROM t WHERE a = 99")
        await q(s, "SELECT * FROM t")
        await q(s, "BEGIN")
        await q(s, "COMMIT")
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t VALUES (1)")
        await q(s, "ROLLBACK")
        assert str(srv.gtid_state.executed) == f"{U}:1-2"
        await srv.shutdown()

    run(scenario())


def test_implicit_commit_before_ddl_commits_first() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t VALUES (1)")
        await q(s, "CREATE TABLE u (b INT)")
        binlog = srv.binlog
        assert binlog is not None
        last_two = list(binlog.transactions())[-2:]
        assert [str(t.gtid) for t in last_two] == [f"{U}:3", f"{U}:4"]
        assert last_two[0].statements[0].sql == "INSERT INTO t VALUES (1)"
        assert last_two[1].is_ddl
        await srv.shutdown()

    run(scenario())


def test_automatic_gno_fills_gaps_first() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, f"SET GLOBAL gtid_purged = '+{U}:2:4:6-7'")
        for name in ("a", "b", "c"):
            await q(s, f"CREATE DATABASE {name}")
        assert str(srv.gtid_state.executed) == f"{U}:1-7"
        binlog = srv.binlog
        assert binlog is not None
        assert [t.gtid.gno for t in binlog.transactions() if t.gtid] == [1, 3, 5]
        await srv.shutdown()

    run(scenario())


def test_gtid_next_assigned_then_undefined() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, f"SET GTID_NEXT = '{U2}:10'")
        assert await scalar(s, "SELECT @@SESSION.gtid_owned") == f"{U2}:10"
        await q(s, "INSERT INTO t VALUES (1)")
        assert f"{U2}:10" in str(srv.gtid_state.executed)
        with pytest.raises(SqlError) as info:
            await q(s, "INSERT INTO t VALUES (2)")
        assert info.value.args[0] == ER.GTID_NEXT_TYPE_UNDEFINED_GTID == 1837
        assert f"'{U2}:10'" in info.value.args[1]
        assert await scalar(s, "SELECT @@gtid_next") == f"{U2}:10"
        await q(s, "SET GTID_NEXT = 'AUTOMATIC'")
        await q(s, "INSERT INTO t VALUES (2)")
        assert str(srv.gtid_state.executed) == f"{U}:1-3,\n{U2}:10"
        await srv.shutdown()

    run(scenario())


def test_empty_transaction_with_gtid_next() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, f"SET GTID_NEXT = '{U2}:3'")
        await q(s, "BEGIN")
        await q(s, "COMMIT")
        await q(s, "SET GTID_NEXT = 'AUTOMATIC'")
        assert f"{U2}:3" in str(srv.gtid_state.executed)
        await srv.shutdown()

    run(scenario())


def test_gtid_next_of_executed_gtid_skips_the_transaction() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, f"SET GTID_NEXT = '{U}:1'")
        out = await one(s, "INSERT INTO t VALUES (42)")
        assert out.affected_rows == 0
        assert await scalar(s, "SELECT COUNT(*) FROM t") == 0
        await q(s, "SET GTID_NEXT = AUTOMATIC")
        await srv.shutdown()

    run(scenario())


def test_rollback_releases_an_owned_gtid() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, f"SET GTID_NEXT = '{U2}:1'")
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t VALUES (1)")
        await q(s, "ROLLBACK")
        assert srv.gtid_state.owned.is_empty()
        assert f"{U2}" not in str(srv.gtid_state.executed)
        await q(s, "SET GTID_NEXT = AUTOMATIC")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize(
    "value",
    [
        "a:10#",
        f"{U}:1-10",
        f"{U}:1:3",
        f"{U}:1,{U}:3",
        "10",
        f"{U}:",
        f"{U}:0",
        f"{U}:0x8000000000000000",
        f"{U}:-33",
        f"{U}:66-33",
        f"{U}:33 33",
        f"{U}-33",
    ],
)
def test_malformed_gtid_next_is_1774(value: str) -> None:
    """The invalid forms of binlog_gtid_errors.result (reference §3.3)."""

    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, f"SET GTID_NEXT = '{value}'")
        assert info.value.args == (1774, f"Malformed GTID specification '{value}'.")
        await srv.shutdown()

    run(scenario())


def test_gtid_next_parsing_quirks() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, f"SET GTID_NEXT = '\\n    {U2} \\t : \\t 10\\n    '")
        assert await scalar(s, "SELECT @@gtid_next") == f"{U2}:10"
        await q(s, "ROLLBACK")
        await q(s, f"SET GTID_NEXT = '{U2}:0x10'")
        assert await scalar(s, "SELECT @@gtid_next") == f"{U2}:16"
        await q(s, "ROLLBACK")
        with pytest.raises(SqlError) as info:
            await q(s, "SET GTID_NEXT = NULL")
        assert info.value.args[0] == 1231
        with pytest.raises(SqlError) as info:
            await q(s, "SET GTID_NEXT = 10")
        assert info.value.args[0] == 1232
        await srv.shutdown()

    run(scenario())


def test_gtid_next_errors_1790_1782_1781() -> None:
    """1782 ANONYMOUS under GTID_MODE=ON, 1781 UUID:NUMBER under OFF (mysqld_error.h)."""

    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, f"SET GTID_NEXT = '{U2}:1'")
        with pytest.raises(SqlError) as info:
            await q(s, f"SET GTID_NEXT = '{U2}:2'")
        assert info.value.args[0] == 1790
        await q(s, "ROLLBACK")
        with pytest.raises(SqlError) as info:
            await q(s, "SET GTID_NEXT = 'ANONYMOUS'")
        assert info.value.args == (
            1782,
            "@@SESSION.GTID_NEXT cannot be set to ANONYMOUS when @@GLOBAL.GTID_MODE = ON.",
        )
        await srv.shutdown()
        off = server(gtid_mode=GtidMode.OFF)
        s = off.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, f"SET GTID_NEXT = '{U2}:1'")
        assert info.value.args == (
            1781,
            "@@SESSION.GTID_NEXT cannot be set to UUID:NUMBER when @@GLOBAL.GTID_MODE = OFF.",
        )
        await off.shutdown()

    run(scenario())


def test_gtid_purged_forms() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, f"SET GLOBAL gtid_purged = '{U2}:1-5'")
        assert await scalar(s, "SELECT @@GLOBAL.gtid_purged") == f"{U2}:1-5"
        assert await scalar(s, "SELECT @@GLOBAL.gtid_executed") == f"{U2}:1-5"
        await q(s, f"SET GLOBAL gtid_purged = '+{U2}:7'")
        assert await scalar(s, "SELECT @@gtid_purged") == f"{U2}:1-5:7"
        with pytest.raises(SqlError) as info:
            await q(s, f"SET GLOBAL gtid_purged = '{U2}:9'")
        assert info.value.args == (
            3546,
            "@@GLOBAL.GTID_PURGED cannot be changed: the new value must be a superset "
            "of the old value",
        )
        with pytest.raises(SqlError) as info:
            await q(s, f"SET GLOBAL gtid_purged = '+{U2}:3'")
        assert "must not overlap with @@GLOBAL.GTID_EXECUTED" in info.value.args[1]
        with pytest.raises(SqlError) as info:
            await q(s, "SET GLOBAL gtid_purged = 'garbage'")
        assert info.value.args[0] == 1772
        with pytest.raises(SqlError) as info:
            await q(s, f"SET gtid_purged = '{U2}:1-9'")
        assert info.value.args[0] == 1229
        await srv.shutdown()

    run(scenario())


def test_read_only_and_scope_errors() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        for sql, errno in [
            ("SET GLOBAL gtid_executed = ''", 1238),
            ("SET @@GLOBAL.server_uuid = 'x'", 1238),
            ("SELECT @@SESSION.gtid_executed", 1238),
            ("SET GLOBAL gtid_next = 'AUTOMATIC'", 1228),
            ("SET no_such_variable = 1", 1193),
            ("SELECT @@no_such_variable", 1193),
            ("SET session_track_gtids = 'SOMETIMES'", 1231),
            ("SET autocommit = 1.5", 1232),
        ]:
            with pytest.raises(SqlError) as info:
                await q(s, sql)
            assert info.value.args[0] == errno, sql
        assert await scalar(s, "SELECT @@server_uuid") == U
        await srv.shutdown()

    run(scenario())


def test_gtid_mode_steps_one_at_a_time() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, "SET GLOBAL gtid_mode = OFF")
        assert info.value.args[0] == 1788
        await q(s, "SET GLOBAL gtid_mode = ON_PERMISSIVE")
        await q(s, "SET GLOBAL gtid_mode = OFF_PERMISSIVE")
        await q(s, "CREATE DATABASE anon")
        assert srv.gtid_state.executed.is_empty()
        binlog = srv.binlog
        assert binlog is not None
        assert list(binlog.transactions())[-1].gtid is None
        assert await scalar(s, "SELECT @@GLOBAL.gtid_mode") == "OFF_PERMISSIVE"
        await srv.shutdown()

    run(scenario())


def test_original_commit_timestamp() -> None:
    """WL#7319 F1: range [0, 2^55], default 2^55, consumed by the next commit, reset on
    rollback; binlog records original and immediate timestamps in microseconds."""

    async def scenario() -> None:
        clock = FakeClock(1_700_000_000.25)
        srv = server(clock)
        s = srv.open_session()
        assert await scalar(s, "SELECT @@session.original_commit_timestamp") == 2**55
        await q(s, "CREATE DATABASE d")
        binlog = srv.binlog
        assert binlog is not None
        first = list(binlog.transactions())[-1]
        assert first.original_commit_timestamp == first.immediate_commit_timestamp
        assert first.immediate_commit_timestamp == 1_700_000_000_250_000
        await q(s, "SET @@session.original_commit_timestamp = 1600000000000000")
        clock.advance(1)
        await q(s, "CREATE TABLE d.t (a INT)")
        second = list(binlog.transactions())[-1]
        assert second.original_commit_timestamp == 1_600_000_000_000_000
        assert second.immediate_commit_timestamp == 1_700_000_001_250_000
        assert await scalar(s, "SELECT @@original_commit_timestamp") == UNDEFINED_COMMIT_TIMESTAMP
        await q(s, "BEGIN")
        await q(s, "SET @@session.original_commit_timestamp = 5")
        await q(s, "ROLLBACK")
        assert await scalar(s, "SELECT @@original_commit_timestamp") == 2**55
        await q(s, "SET @@session.original_commit_timestamp = 0")
        with pytest.raises(SqlError) as info:
            await q(s, "SET GLOBAL original_commit_timestamp = 1")
        assert info.value.args[0] == 1228
        await q(s, f"SET @@session.original_commit_timestamp = {2**55 + 10}")
        assert await scalar(s, "SELECT @@original_commit_timestamp") == 2**55
        await srv.shutdown()

    run(scenario())


def test_gtid_functions() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        assert await scalar(s, f"SELECT GTID_SUBSET('{U}:1-2', '{U}:1-5')") == 1
        assert await scalar(s, f"SELECT GTID_SUBSET('{U}:1-7', '{U}:1-5')") == 0
        assert await scalar(s, "SELECT GTID_SUBSET(NULL, '')") is None
        assert await scalar(s, f"SELECT GTID_SUBTRACT('{U}:1-10', '{U}:3-4')") == f"{U}:1-2:5-10"
        assert await scalar(s, f"SELECT GTID_SUBTRACT('{U2}:1,{U}:2', '')") == f"{U}:2,\n{U2}:1"
        assert await scalar(s, "SELECT GTID_SUBTRACT('', NULL)") is None
        with pytest.raises(SqlError) as info:
            await q(s, "SELECT GTID_SUBSET('nonsense', '')")
        assert info.value.args == (1772, "Malformed GTID set specification 'nonsense'.")
        await srv.shutdown()

    run(scenario())


def test_reset_master_empties_everything() -> None:
    async def scenario() -> None:
        srv, s = await _ready()
        await q(s, "RESET MASTER")
        assert srv.gtid_state.executed.is_empty()
        assert await scalar(s, "SELECT @@GLOBAL.gtid_purged") == ""
        assert srv.gtid_table_rows() == []
        await q(s, "CREATE TABLE t2 (a INT)")
        assert srv.gtid_state.executed == GtidSet.parse(f"{U}:1")
        await q(s, "RESET BINARY LOGS AND GTIDS")
        assert srv.gtid_state.executed.is_empty()
        await srv.shutdown()

    run(scenario())
