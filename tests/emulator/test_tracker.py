"""session_track_gtids and the other trackers, row by row of reference §2.2.

Expected texts come from the mysql-test results named in reference §2.2
(``binlog_gtid_mix_response_packet.result``, ``binlog_gtid_ok_packet_all_gtids.result``), with
the deterministic UUID U of those tests.
"""

from __future__ import annotations

import pytest

from consistent.emulator import ER, SqlError
from consistent.emulator.testing import U2, U, gtids, one, q, run, server
from consistent.protocol.constants import Capability, ServerStatus
from consistent.protocol.session_state import (
    Schema,
    StateChange,
    SystemVariable,
    TransactionCharacteristics,
    TransactionState,
)

MODES = ("OFF", "OWN_GTID", "ALL_GTIDS")


async def _session(mode: str, *, database: str = "test"):  # type: ignore[no-untyped-def]
    srv = server()
    setup = srv.open_session()
    await q(setup, f"CREATE DATABASE {database}")
    await q(setup, f"CREATE TABLE {database}.t1 (c1 INT)")  # U:1-2
    await setup.close()
    session = srv.open_session("root", database)
    await q(session, f"SET SESSION session_track_gtids = '{mode}'")
    await q(session, "SELECT 1")  # a response after the SET: the new mode is now cached
    return srv, session


def _expected(mode: str, own: str, whole: str) -> str | None:
    return {"OFF": None, "OWN_GTID": own, "ALL_GTIDS": whole}[mode]


@pytest.mark.parametrize("mode", MODES)
def test_ddl_reports_its_gtid(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        out = await one(s, "CREATE TABLE t2 (a INT)")
        assert gtids(out) == _expected(mode, f"{U}:3", f"{U}:1-3")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_autocommit_dml(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        out = await one(s, "INSERT INTO t1 VALUES (1)")
        assert gtids(out) == _expected(mode, f"{U}:3", f"{U}:1-3")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_begin_dml_commit(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        assert gtids(await one(s, "BEGIN")) is None
        assert gtids(await one(s, "INSERT INTO t1 VALUES (1)")) is None
        assert gtids(await one(s, "INSERT INTO t1 VALUES (2)")) is None
        out = await one(s, "COMMIT")
        assert gtids(out) == _expected(mode, f"{U}:3", f"{U}:1-3")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_ddl_inside_open_transaction_reports_two(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t1 VALUES (1)")
        out = await one(s, "CREATE TABLE t3 (a INT)")
        assert gtids(out) == _expected(mode, f"{U}:3-4", f"{U}:1-4")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_select_autocommit(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        await q(s, "INSERT INTO t1 VALUES (1)")
        out = await one(s, "SELECT * FROM t1")
        # The result set ends with an EOF for this client: no state on it…
        assert out.session_state == ()
        # …and with CLIENT_DEPRECATE_EOF the 0xFE OK carries the whole set under ALL_GTIDS.
        s.client_capabilities |= Capability.DEPRECATE_EOF
        out = await one(s, "SELECT * FROM t1")
        assert gtids(out) == _expected(mode, None, f"{U}:1-3")  # type: ignore[arg-type]
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_savepoint_and_rollbacks_report_nothing(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t1 VALUES (1)")
        assert gtids(await one(s, "SAVEPOINT sp")) is None
        await q(s, "INSERT INTO t1 VALUES (2)")
        assert gtids(await one(s, "ROLLBACK TO SAVEPOINT sp")) is None
        assert gtids(await one(s, "ROLLBACK")) is None
        assert str(srv.gtid_state.executed) == f"{U}:1-2"
        await srv.shutdown()

    run(scenario())


def test_set_session_track_gtids_transitions_follow_the_old_mode() -> None:
    """binlog_gtid_ok_packet_all_gtids.result: ALL→* reports U:1-2, OWN/OFF→* nothing."""

    async def scenario() -> None:
        srv = server(system_variables={"session_track_gtids": "ALL_GTIDS"})
        s = srv.open_session()
        out = await one(s, "CREATE DATABASE test")
        assert gtids(out) == f"{U}:1"
        out = await one(s, "CREATE TABLE test.t1 (c1 INT)")
        assert gtids(out) == f"{U}:1-2"
        results = {}
        for old in MODES:
            for new in MODES:
                await q(s, f"SET SESSION session_track_gtids='{old}'")
                results[(old, new)] = gtids(
                    await one(s, f"SET SESSION session_track_gtids='{new}'")
                )
        for (old, _new), text in results.items():
            assert text == (f"{U}:1-2" if old == "ALL_GTIDS" else None), (old, _new)
        await srv.shutdown()

    run(scenario())


def test_first_registration_caches_the_new_mode() -> None:
    """Derived from rpl_context.cc: the collector registered by the first enabling SET caches
    that SET's value, and trans_commit_stmt then collects for it (not a mysql-test result)."""

    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        out = await one(s, "SET session_track_gtids = ALL_GTIDS")
        assert gtids(out) == f"{U}:1"
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_explicit_gtid_next_reports_that_gtid(mode: str) -> None:
    async def scenario() -> None:
        srv, s = await _session(mode)
        upper = U2.upper()
        out = await one(s, f"SET GTID_NEXT = '{upper}:1'")
        assert gtids(out) == _expected(mode, None, f"{U}:1-2")  # type: ignore[arg-type]
        out = await one(s, "CREATE TABLE t4 (a INT)")
        assert gtids(out) == _expected(mode, f"{U2}:1", f"{U}:1-2,\n{U2}:1")
        await q(s, "SET GTID_NEXT = 'AUTOMATIC'")
        await srv.shutdown()

    run(scenario())


def test_text_format_uses_comma_newline_between_uuids() -> None:
    async def scenario() -> None:
        srv, s = await _session("ALL_GTIDS")
        await q(s, f"SET GTID_NEXT='{U2}:7'")
        await q(s, "COMMIT")
        await q(s, "SET GTID_NEXT='AUTOMATIC'")
        out = await one(s, "INSERT INTO t1 VALUES (1)")
        assert gtids(out) == f"{U}:1-3,\n{U2}:7"
        await srv.shutdown()

    run(scenario())


def test_mode_change_inside_transaction_is_1766() -> None:
    async def scenario() -> None:
        srv, s = await _session("OFF")
        await q(s, "BEGIN")
        with pytest.raises(SqlError) as info:
            await q(s, "SET session_track_gtids = OWN_GTID")
        assert info.value.args[0] == ER.VARIABLE_NOT_SETTABLE_IN_TRANSACTION == 1766
        assert "session_track_gtids" in info.value.args[1]
        await q(s, "ROLLBACK")
        await srv.shutdown()

    run(scenario())


def test_mode_change_while_owning_a_gtid_is_3138() -> None:
    async def scenario() -> None:
        srv, s = await _session("OFF")
        await q(s, f"SET GTID_NEXT='{U2}:5'")
        with pytest.raises(SqlError) as info:
            await q(s, "SET session_track_gtids = OWN_GTID")
        assert info.value.args[0] == 3138
        assert f"{U2}:5" in info.value.args[1]
        await q(s, "ROLLBACK")
        await srv.shutdown()

    run(scenario())


def test_collected_set_is_cleared_after_each_response() -> None:
    async def scenario() -> None:
        srv, s = await _session("OWN_GTID")
        outs = await q(s, "INSERT INTO t1 VALUES (1); INSERT INTO t1 VALUES (2); DO 1")
        assert [gtids(o) for o in outs] == [f"{U}:3", f"{U}:4", None]
        assert [bool(o.status & ServerStatus.MORE_RESULTS_EXISTS) for o in outs] == [
            True,
            True,
            False,
        ]
        await srv.shutdown()

    run(scenario())


def test_no_state_without_client_session_track() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session(client_capabilities=int(Capability.PROTOCOL_41))
        await q(s, "SET session_track_gtids = OWN_GTID")
        out = await one(s, "CREATE DATABASE x")
        assert out.session_state == ()
        assert not out.status & ServerStatus.SESSION_STATE_CHANGED
        await srv.shutdown()

    run(scenario())


def test_gtid_mode_off_reports_nothing_for_own_gtid() -> None:
    async def scenario() -> None:
        from consistent.emulator import GtidMode

        srv = server(gtid_mode=GtidMode.OFF)
        s = srv.open_session()
        await q(s, "SET session_track_gtids = OWN_GTID")
        out = await one(s, "CREATE DATABASE x")
        assert gtids(out) is None
        assert srv.gtid_state.executed.is_empty()
        await srv.shutdown()

    run(scenario())


# ----- the other trackers ---------------------------------------------------------------------


def test_schema_tracker_on_use_and_init_db() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, "CREATE DATABASE test")
        out = await one(s, "USE test")
        assert out.session_state == (Schema("test"),)
        assert out.status & ServerStatus.SESSION_STATE_CHANGED
        out = await s.init_db("mysql")
        assert out.session_state == (Schema("mysql"),)
        await q(s, "SET session_track_schema = OFF")
        assert (await one(s, "USE test")).session_state == ()
        await srv.shutdown()

    run(scenario())


def test_system_variable_tracker_defaults_and_order() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        out = await one(s, "SET autocommit = OFF")
        assert out.session_state == (SystemVariable("autocommit", "OFF"),)
        out = await one(s, "SET NAMES latin1")
        assert out.session_state == (
            SystemVariable("character_set_client", "latin1"),
            SystemVariable("character_set_connection", "latin1"),
            SystemVariable("character_set_results", "latin1"),
        )
        out = await one(s, "SET sql_mode = ''")  # not tracked by default
        assert out.session_state == ()
        await q(s, "SET session_track_system_variables = '*'")
        out = await one(s, "SET time_zone = '+02:00', sql_mode = 'ANSI_QUOTES'")
        assert out.session_state == (
            SystemVariable("sql_mode", "ANSI_QUOTES"),
            SystemVariable("time_zone", "+02:00"),
        )
        await srv.shutdown()

    run(scenario())


def test_state_change_tracker() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        out = await one(s, "SET SESSION session_track_state_change = 1")
        assert StateChange(True) not in out.session_state
        out = await one(s, "SET @a = 1")
        assert out.session_state == (StateChange(True),)
        out = await one(s, "SELECT 1")
        assert out.session_state == ()
        await srv.shutdown()

    run(scenario())


def test_transaction_state_and_characteristics() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session(
            client_capabilities=int(
                Capability.PROTOCOL_41 | Capability.SESSION_TRACK | Capability.DEPRECATE_EOF
            )
        )
        await q(s, "CREATE DATABASE test")
        await q(s, "CREATE TABLE test.t (a INT)")
        out = await one(s, "SET session_track_transaction_info = CHARACTERISTICS")
        assert TransactionState("________") in out.session_state
        out = await one(s, "START TRANSACTION READ ONLY")
        assert out.session_state == (
            TransactionState("T_______"),
            TransactionCharacteristics("START TRANSACTION READ ONLY;"),
        )
        out = await one(s, "SELECT * FROM test.t")
        assert out.session_state == (TransactionState("T_R___S_"),)
        out = await one(s, "COMMIT")
        assert out.session_state == (
            TransactionState("________"),
            TransactionCharacteristics(""),
        )
        await q(s, "SET autocommit = 0")
        out = await one(s, "INSERT INTO test.t VALUES (1)")
        assert TransactionState("I___W___") in out.session_state
        await q(s, "ROLLBACK")
        await srv.shutdown()

    run(scenario())


def test_block_order_sysvar_schema_state_gtids() -> None:
    """Session_tracker::store order: SYSVARS, SCHEMA, STATE_CHANGE, GTIDS (reference §1.3)."""

    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, "SET session_track_state_change = ON, session_track_gtids = OWN_GTID")
        await q(s, "CREATE DATABASE d")
        outs = await q(s, "USE d; SET autocommit = 1, @x = 2; CREATE TABLE t (a INT)")
        types = [[type(b).__name__ for b in o.session_state] for o in outs]
        assert types == [["Schema", "StateChange"], ["SystemVariable", "StateChange"], ["Gtids"]]
        srv2 = server()
        s2 = srv2.open_session()
        await q(s2, "SET session_track_state_change = ON, session_track_gtids = OWN_GTID")
        await q(s2, "CREATE DATABASE d")
        # Responses that cannot carry state leave the trackers changed, so the next OK reports
        # the accumulated sysvar, schema and state blocks in mysqld's order; the GTID set, in
        # contrast, is cleared after every response (notify_after_response_packet).
        s2.client_capabilities &= ~int(Capability.SESSION_TRACK)
        await q(s2, "USE d; SET autocommit = 1; CREATE TABLE t (a INT)")
        s2.client_capabilities |= int(Capability.SESSION_TRACK)
        out = await one(s2, "DO 1")
        assert [type(b).__name__ for b in out.session_state] == [
            "SystemVariable",
            "Schema",
            "StateChange",
        ]
        await srv.shutdown()
        await srv2.shutdown()

    run(scenario())
