"""Pins every PyMySQL internal that ``consistent/dbapi/_pymysql.py`` relies on.

If PyMySQL renames a method, changes a signature, or stops leaving the OK packet's tail in
``message``, these tests fail with the name of what changed (reference §7, PyMySQL 1.2).
"""

from __future__ import annotations

import contextlib
import inspect
import struct

import pymysql
import pymysql.charset
import pymysql.connections
import pymysql.cursors
import pymysql.protocol
import pytest
from pymysql.constants import CLIENT

from consistent.dbapi import _pymysql
from consistent.dbapi._pymysql import OkTail, TrackingConnection, decode_ok_tail
from consistent.errors import RemoteProtocolError
from consistent.gtid import GtidSet, MariaPosition

# vitessio/vitess go/mysql/conn_test.go TestOkPackets, captured from MySQL (reference §1.6): an
# OK with status 0x4002 carrying a GTIDS block "f27f6971-03e7-11eb-85c5-98af65a6dc4a:2".
VITESS_GTID_OK = (
    bytes.fromhex("00000002400000002a032800")
    + b"\x26"
    + (b"f27f6971-03e7-11eb-85c5-98af65a6dc4a:2")
)
# Same source: SCHEMA "test".
VITESS_SCHEMA_OK = bytes.fromhex("000000024000000007010504") + b"test"
# MariaDB's last_gtid through the system-variable tracker (reference §1.7:
# MariaDB/server mysql-test/main/session_tracker_last_gtid.result), with an empty info string.
MARIADB_LAST_GTID_OK = (
    bytes.fromhex("0001000240000000")
    + bytes([0x15, 0x00, 0x13, 0x09])
    + b"last_gtid"
    + b"\x080-1-1000"
)


def _signature(obj: object) -> list[str]:
    return list(inspect.signature(obj).parameters)  # type: ignore[arg-type]


def test_the_connection_methods_we_override_exist_with_their_signatures() -> None:
    conn_cls = pymysql.connections.Connection
    assert _signature(conn_cls._read_ok_packet) == ["self"]
    params = inspect.signature(conn_cls._read_query_result).parameters
    assert list(params) == ["self", "unbuffered"]
    assert params["unbuffered"].default is False
    assert "client_flag" in inspect.signature(conn_cls.__init__).parameters
    for name in ("query", "commit", "rollback", "begin", "select_db", "autocommit", "ping"):
        assert callable(getattr(conn_cls, name)), name


def test_the_commands_that_read_an_ok_packet_go_through_read_ok_packet() -> None:
    for name in ("commit", "rollback", "begin", "select_db", "_send_autocommit_mode"):
        source = inspect.getsource(getattr(pymysql.connections.Connection, name))
        assert "self._read_ok_packet()" in source, name
    source = inspect.getsource(pymysql.connections.Connection.query)
    assert "self._read_query_result(" in source
    source = inspect.getsource(pymysql.connections.Connection.next_result)
    assert "self._read_query_result(" in source


def test_the_instance_attributes_we_use_exist() -> None:
    conn = pymysql.connections.Connection(defer_connect=True)
    for name in ("_read_timeout", "_result", "_force_close", "client_flag"):
        assert hasattr(conn, name), name
    # Set from the handshake, then from every OK packet.
    assert "self.server_status" in inspect.getsource(pymysql.connections.Connection)
    assert "self._read_timeout" in inspect.getsource(pymysql.connections.Connection._read_packet)
    result = pymysql.connections.MySQLResult(conn)
    for name in ("message", "server_status", "rows", "has_next"):
        assert hasattr(result, name), name


def test_session_track_is_the_documented_capability_bit() -> None:
    assert CLIENT.SESSION_TRACK == 1 << 23
    assert not CLIENT.CAPABILITIES & CLIENT.DEPRECATE_EOF  # result sets still end in EOF


def test_the_tracking_connection_asks_for_session_track() -> None:
    conn = TrackingConnection(defer_connect=True)
    assert conn.client_flag & CLIENT.SESSION_TRACK
    other = TrackingConnection(defer_connect=True, client_flag=CLIENT.FOUND_ROWS)
    assert other.client_flag & CLIENT.SESSION_TRACK
    assert other.client_flag & CLIENT.FOUND_ROWS


def _ok_wrapper(payload: bytes) -> pymysql.protocol.OKPacketWrapper:
    packet = pymysql.protocol.MysqlPacket(payload, "utf8")
    assert packet.is_ok_packet()
    return pymysql.protocol.OKPacketWrapper(packet)


def test_pymysql_leaves_the_raw_tail_in_message() -> None:
    ok = _ok_wrapper(VITESS_GTID_OK)
    assert ok.server_status == 0x4002
    assert ok.message == VITESS_GTID_OK[7:]


def test_a_mysql_gtids_block_decodes_to_its_set() -> None:
    ok = _ok_wrapper(VITESS_GTID_OK)
    tail = decode_ok_tail(ok.server_status, ok.message)
    assert tail == OkTail(
        0x4002, GtidSet.parse("f27f6971-03e7-11eb-85c5-98af65a6dc4a:2"), schema=None
    )
    assert not tail.in_transaction


def test_a_schema_block_decodes_without_gtids() -> None:
    ok = _ok_wrapper(VITESS_SCHEMA_OK)
    assert decode_ok_tail(ok.server_status, ok.message) == OkTail(0x4002, None, "test")


def test_mariadb_last_gtid_decodes_to_a_position() -> None:
    ok = _ok_wrapper(MARIADB_LAST_GTID_OK)
    tail = decode_ok_tail(ok.server_status, ok.message)
    assert tail is not None
    assert tail.gtids == MariaPosition.parse("0-1-1000")


def test_the_fast_scan_finds_the_same_gtid_text() -> None:
    mysql = _ok_wrapper(VITESS_GTID_OK)
    assert (
        _pymysql.tracked_gtid_text(mysql.server_status, mysql.message)
        == "f27f6971-03e7-11eb-85c5-98af65a6dc4a:2"
    )
    maria = _ok_wrapper(MARIADB_LAST_GTID_OK)
    assert _pymysql.tracked_gtid_text(maria.server_status, maria.message) == "0-1-1000"
    schema = _ok_wrapper(VITESS_SCHEMA_OK)
    assert _pymysql.tracked_gtid_text(schema.server_status, schema.message) is None


def test_the_fast_scan_skips_other_variables_and_rejects_truncation() -> None:
    blob = (
        bytes([0x00, 0x0F, 0x0A])
        + b"autocommit"
        + b"\x03OFF"
        + bytes([0x00, 0x13, 0x09])
        + b"last_gtid"
        + b"\x080-2-1234"
    )
    tail = b"\x00" + bytes([len(blob)]) + blob
    assert _pymysql.tracked_gtid_text(0x4002, tail) == "0-2-1234"
    with pytest.raises(RemoteProtocolError):
        _pymysql.tracked_gtid_text(0x4002, tail[:-3])


@pytest.mark.parametrize(
    ("status", "tail"),
    [
        (0x0002, b""),  # nothing after the warnings
        (0x0002, b"\x05hello"),  # info only, state not changed
        (0x4002, b""),  # flag set but no bytes (never sent by mysqld; tolerated)
        (0x4002, b"\x00"),  # info present, no state blob
    ],
)
def test_ok_packets_without_tracker_data_report_nothing(status: int, tail: bytes) -> None:
    assert decode_ok_tail(status, tail) is None
    assert _pymysql.tracked_gtid_text(status, tail) is None


def test_query_value_sets_the_read_timeout_for_one_query_only() -> None:
    class Recorder:
        def __init__(self) -> None:
            self._read_timeout = 7.0
            self.seen: list[float | None] = []
            self._result = type("R", (), {"rows": ((42,),)})()

        def query(self, sql: str) -> None:
            self.seen.append(self._read_timeout)

    conn = Recorder()
    assert _pymysql.query_value(conn, "SELECT 42", timeout=1.5) == 42  # type: ignore[arg-type]
    assert conn.seen == [1.5]
    assert conn._read_timeout == 7.0


def test_pymysql_errors_translate_to_ours_with_errno_and_sqlstate() -> None:
    exc = pymysql.err.ProgrammingError(1146, "Table 'x.y' doesn't exist", sqlstate="42S02")
    ours = _pymysql.translate_error(exc)
    assert type(ours).__name__ == "ProgrammingError"
    assert ours.args == (1146, "Table 'x.y' doesn't exist")
    assert ours.sqlstate == "42S02"
    lost = _pymysql.translate_error(pymysql.err.OperationalError(2013, "Lost"), prefix="p: ")
    assert lost.args == (2013, "p: Lost")


@pytest.mark.parametrize(
    ("exc", "lost"),
    [
        (pymysql.err.OperationalError(2013, "Lost connection"), True),
        (pymysql.err.OperationalError(2003, "Can't connect"), True),
        (pymysql.err.InterfaceError(0, ""), True),
        (pymysql.err.OperationalError(1205, "Lock wait timeout"), False),
        (pymysql.err.ProgrammingError(1064, "syntax"), False),
        (ConnectionResetError(104, "reset"), True),
    ],
)
def test_disconnects_are_told_apart_from_sql_errors(exc: BaseException, lost: bool) -> None:
    assert _pymysql.is_disconnect(exc) is lost


# --- against the real server ------------------------------------------------------------------


@pytest.mark.mariadb
def test_a_real_ok_tail_reaches_the_observer(mariadb_database: object) -> None:
    params = mariadb_database.params()  # type: ignore[attr-defined]
    seen: list[OkTail] = []

    def observe(status: int, tail: bytes) -> None:
        decoded = decode_ok_tail(status, tail)
        assert decoded is not None
        seen.append(decoded)
        assert _pymysql.tracked_gtid_text(status, tail) == (
            str(decoded.gtids) if decoded.gtids is not None else None
        )

    conn = TrackingConnection(observer=observe, autocommit=True, **params.pymysql_kwargs())
    with contextlib.closing(conn):
        conn.query(
            "SET SESSION session_track_system_variables = "
            "CONCAT_WS(',', @@SESSION.session_track_system_variables, 'last_gtid')"
        )
        conn.query("CREATE TABLE t (a INT)")
        seen.clear()
        conn.query("INSERT INTO t VALUES (1)")  # through _read_query_result
        [after_insert] = [t.gtids for t in seen if t.gtids is not None]
        conn.query("SELECT @@last_gtid")
        assert conn._result.rows[0][0] == str(after_insert)
        seen.clear()
        conn.begin()
        conn.query("INSERT INTO t VALUES (2)")
        assert [t.gtids for t in seen if t.gtids is not None] == []  # nothing until commit
        conn.commit()  # through _read_ok_packet
        [after_commit] = [t.gtids for t in seen if t.gtids is not None]
        assert isinstance(after_commit, MariaPosition)
        assert isinstance(after_insert, MariaPosition)
        assert after_commit.covers(after_insert)
        assert after_commit != after_insert


@pytest.mark.mariadb
def test_a_wait_answer_slower_than_the_read_timeout_costs_the_connection(
    mariadb_database: object,
) -> None:
    params = mariadb_database.params()  # type: ignore[attr-defined]
    conn = TrackingConnection(**params.pymysql_kwargs())
    with pytest.raises(pymysql.err.OperationalError) as info:
        _pymysql.query_value(conn, "SELECT SLEEP(2)", timeout=0.2)
    assert _pymysql.is_disconnect(info.value)
    assert not conn.open


def test_the_tracking_connection_is_a_pymysql_connection() -> None:
    assert issubclass(TrackingConnection, pymysql.connections.Connection)
    assert struct.calcsize("<HH") == 4  # OKPacketWrapper reads status and warnings this way
    assert 'read_struct("<HH")' in inspect.getsource(pymysql.protocol.OKPacketWrapper)
    assert "self.message = self.packet.read_all()" in inspect.getsource(
        pymysql.protocol.OKPacketWrapper
    )


def test_the_cursor_and_charset_internals_we_read_exist() -> None:
    conn = pymysql.connections.Connection(defer_connect=True)
    cursor = pymysql.cursors.Cursor(conn)
    assert cursor._executed is None
    assert "self._executed = query" in inspect.getsource(pymysql.cursors.Cursor.execute)
    assert _pymysql.executed(cursor) is None
    # cursor_kind() tells the kinds apart by these bases.
    assert issubclass(pymysql.cursors.DictCursor, pymysql.cursors.DictCursorMixin)
    assert issubclass(pymysql.cursors.SSDictCursor, pymysql.cursors.DictCursorMixin)
    assert issubclass(pymysql.cursors.SSDictCursor, pymysql.cursors.SSCursor)
    assert _pymysql.cursor_kind(pymysql.cursors.SSDictCursor) == (True, True)
    assert _pymysql.cursor_kind(dict) is None
    # encoders_for() builds the mapping as the connection does.
    assert _pymysql.encoders_for(None) == conn.encoders
    assert pymysql.charset.charset_by_name("latin1").encoding == "cp1252"
    assert not _pymysql.charset_known("no-such-charset")
