"""Command packets (MySQL doc page_protocol_command_phase and the COM_* pages) and prepared
statements.  Bytes marked "layout" are written out by hand from the documented field list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.binary import DateTimeValue, TimeValue
from consistent.protocol.commands import (
    ChangeUser,
    FieldList,
    Query,
    StmtFetch,
    StmtSendLongData,
    build_change_user,
    build_field_list,
    build_init_db,
    build_ping,
    build_process_kill,
    build_query,
    build_quit,
    build_reset_connection,
    build_set_option,
    build_stmt_close,
    build_stmt_fetch,
    build_stmt_prepare,
    build_stmt_reset,
    build_stmt_send_long_data,
    parse_change_user,
    parse_command,
    parse_field_list,
    parse_init_db,
    parse_process_kill,
    parse_query,
    parse_set_option,
    parse_stmt_close,
    parse_stmt_fetch,
    parse_stmt_prepare,
    parse_stmt_reset,
    parse_stmt_send_long_data,
)
from consistent.protocol.constants import Capability, ColumnType, Command, CursorFlag, SetOption
from consistent.protocol.prepared import (
    BinaryParam,
    StmtExecute,
    StmtPrepareOk,
    build_stmt_execute,
    build_stmt_prepare_ok,
    parse_stmt_execute,
    parse_stmt_prepare_ok,
)

C = Capability
T = ColumnType
CAPS41 = C.PROTOCOL_41 | C.TRANSACTIONS | C.SECURE_CONNECTION
QA = CAPS41 | C.QUERY_ATTRIBUTES


def h(text: str) -> bytes:
    return bytes.fromhex(text)


def test_simple_commands_are_one_byte() -> None:
    assert build_quit() == b"\x01"
    assert build_ping() == b"\x0e"
    assert build_reset_connection() == b"\x1f"
    assert parse_command(build_reset_connection()) == (Command.RESET_CONNECTION, b"")


def test_parse_command_splits_the_body() -> None:
    assert parse_command(b"\x03select 1") == (Command.QUERY, b"select 1")
    assert parse_command(memoryview(b"\x02db")) == (Command.INIT_DB, b"db")
    with pytest.raises(RemoteProtocolError):
        parse_command(b"")
    with pytest.raises(RemoteProtocolError):
        parse_command(b"\x60")


def test_com_query_without_attributes() -> None:
    # "14 00 00 00 03 select * from posts" (MySQL doc COM_QUERY example, header removed)
    wire = b"\x03select * from posts"
    assert build_query("select * from posts") == wire
    assert build_query(b"select * from posts") == wire
    assert parse_query(wire) == Query(b"select * from posts")


def test_com_query_with_attributes_capability_but_none_sent() -> None:
    # layout: parameter_count 0, parameter_set_count 1, then the statement.
    wire = build_query("select 1", True)
    assert wire == h("03 00 01") + b"select 1"
    assert parse_query(wire, query_attributes=True) == Query(b"select 1")


def test_com_query_with_one_attribute() -> None:
    attr = BinaryParam(T.LONG, 5, name="a")
    wire = build_query("select 1", True, [attr])
    # layout: count 1, set count 1, bitmap 00, bound 01, type 03 00, name 01 'a', value 4 bytes
    assert wire == h("03 01 01 00 01 03 00 01 61 05 00 00 00") + b"select 1"
    assert parse_query(wire, query_attributes=True) == Query(b"select 1", (attr,))


def test_com_query_attribute_null_and_unsigned() -> None:
    attrs = (
        BinaryParam(T.NULL, None, name="n"),
        BinaryParam(T.LONGLONG, 2**64 - 1, unsigned=True, name="big"),
    )
    wire = build_query(b"x", True, attrs)
    assert wire[3] == 0b01  # NULL bitmap, offset 0: first attribute NULL
    # 03 | count 02 | sets 01 | bitmap 01 | bound 01 | 06 00 01 'n' | 08 80 03 'big' | value
    assert wire[3:13] == h("01 01 06 00 01 6e 08 80 03 62")
    assert parse_query(wire, query_attributes=True) == Query(b"x", attrs)


def test_com_query_attribute_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        build_query("x", False, [BinaryParam(T.LONG, 1, name="a")])
    with pytest.raises(RemoteProtocolError):
        parse_query(h("03 00 02") + b"x", query_attributes=True)  # two parameter sets


def test_init_db() -> None:
    assert build_init_db("shop") == b"\x02shop"
    assert parse_init_db(b"\x02shop") == "shop"
    with pytest.raises(RemoteProtocolError):
        parse_init_db(b"\x03shop")


def test_statement_id_commands() -> None:
    assert build_stmt_close(1) == h("19 01 00 00 00")
    assert parse_stmt_close(h("19 01 00 00 00")) == 1
    assert build_stmt_reset(0x01020304) == h("1a 04 03 02 01")
    assert parse_stmt_reset(h("1a 04 03 02 01")) == 0x01020304
    assert build_process_kill(77) == h("0c 4d 00 00 00")
    assert parse_process_kill(h("0c 4d 00 00 00")) == 77
    with pytest.raises(RemoteProtocolError):
        parse_stmt_close(h("19 01 00 00 00 00"))
    with pytest.raises(LocalProtocolError):
        build_stmt_close(2**32)


def test_stmt_prepare() -> None:
    assert build_stmt_prepare("SELECT CONCAT(?, ?) AS col1") == b"\x16SELECT CONCAT(?, ?) AS col1"
    assert parse_stmt_prepare(b"\x16SELECT ?") == b"SELECT ?"


def test_set_option_and_fetch_and_long_data_and_field_list() -> None:
    assert build_set_option(SetOption.MULTI_STATEMENTS_OFF) == h("1b 01 00")
    assert parse_set_option(h("1b 00 00")) is SetOption.MULTI_STATEMENTS_ON
    with pytest.raises(RemoteProtocolError):
        parse_set_option(h("1b 02 00"))
    fetch = StmtFetch(1, 10)
    assert build_stmt_fetch(fetch) == h("1c 01 00 00 00 0a 00 00 00")
    assert parse_stmt_fetch(build_stmt_fetch(fetch)) == fetch
    chunk = StmtSendLongData(1, 2, b"blob")
    assert build_stmt_send_long_data(chunk) == h("18 01 00 00 00 02 00") + b"blob"
    assert parse_stmt_send_long_data(build_stmt_send_long_data(chunk)) == chunk
    fields = FieldList("orders", b"c%")
    assert build_field_list(fields) == b"\x04orders\x00c%"
    assert parse_field_list(b"\x04orders\x00c%") == fields


# --- COM_STMT_EXECUTE ----------------------------------------------------------------------


def test_doc_stmt_execute_example() -> None:
    # MySQL doc COM_STMT_EXECUTE example "12 00 00 00 | 17 01 00 00 00 00 01 00 00 00 00 01 0f
    # 00 03 66 6f 6f": statement 1, no cursor, 1 iteration, VARCHAR 'foo'.
    wire = h("17 01 00 00 00 00 01 00 00 00 00 01 0f 00 03 66 6f 6f")
    ex = parse_stmt_execute(wire, CAPS41, num_params=1)
    assert ex == StmtExecute(1, (BinaryParam(T.VARCHAR, b"foo"),))
    assert build_stmt_execute(ex, CAPS41) == wire


def test_stmt_execute_without_params() -> None:
    wire = build_stmt_execute(StmtExecute(7), CAPS41)
    assert wire == h("17 07 00 00 00 00 01 00 00 00")
    assert parse_stmt_execute(wire, CAPS41, num_params=0) == StmtExecute(7)


def test_stmt_execute_reuses_previous_types() -> None:
    first = StmtExecute(3, (BinaryParam(T.LONG, 1), BinaryParam(T.VAR_STRING, b"a")))
    again = StmtExecute(
        3, (BinaryParam(T.LONG, 2), BinaryParam(T.VAR_STRING, None)), new_params_bound=False
    )
    wire = build_stmt_execute(again, CAPS41)
    # layout: bitmap 02 (second NULL), bound flag 00, no types, the LONG value only.
    assert wire[10:] == h("02 00 02 00 00 00")
    assert parse_stmt_execute(wire, CAPS41, 2, previous=first.params) == again
    with pytest.raises(RemoteProtocolError):
        parse_stmt_execute(wire, CAPS41, 2)


def test_stmt_execute_with_query_attributes() -> None:
    ex = StmtExecute(
        5,
        (BinaryParam(T.LONG, 10), BinaryParam(T.VAR_STRING, b"trace-1", name="traceparent")),
        flags=CursorFlag.PARAMETER_COUNT_AVAILABLE,
    )
    wire = build_stmt_execute(ex, QA)
    # layout: flags 08, then parameter_count 02 before the bitmap; names follow each type.
    assert wire[5] == 0x08
    assert wire[10:14] == h("02 00 01 03")
    assert wire[14:16] == h("00 00")  # unsigned flag byte, then an empty name
    assert parse_stmt_execute(wire, QA, num_params=1) == ex
    # The count comes from the packet, even zero.
    empty = StmtExecute(5, flags=CursorFlag.PARAMETER_COUNT_AVAILABLE)
    assert build_stmt_execute(empty, QA) == h("17 05 00 00 00 08 01 00 00 00 00")
    assert parse_stmt_execute(build_stmt_execute(empty, QA), QA, 0) == empty


def test_stmt_execute_names_need_query_attributes() -> None:
    with pytest.raises(LocalProtocolError):
        build_stmt_execute(StmtExecute(1, (BinaryParam(T.LONG, 1, name="x"),)), CAPS41)


def test_stmt_execute_temporal_params() -> None:
    ex = StmtExecute(
        9,
        (
            BinaryParam(T.DATETIME, DateTimeValue(2010, 10, 17, 19, 27, 30, 1)),
            BinaryParam(T.TIME, TimeValue(True, 120, 19, 27, 30, 1)),
            BinaryParam(T.DATE, DateTimeValue(2010, 10, 17)),
        ),
    )
    wire = build_stmt_execute(ex, CAPS41)
    assert h("0b da 07 0a 11 13 1b 1e 01 00 00 00") in wire
    assert h("0c 01 78 00 00 00 13 1b 1e 01 00 00 00") in wire
    assert wire.endswith(h("04 da 07 0a 11"))
    assert parse_stmt_execute(wire, CAPS41, 3) == ex


def test_stmt_prepare_ok() -> None:
    # layout of page_protocol_com_stmt_prepare for SELECT CONCAT(?, ?) AS col1.
    ok = StmtPrepareOk(statement_id=1, num_columns=1, num_params=2)
    wire = build_stmt_prepare_ok(ok, CAPS41)
    assert wire == h("00 01 00 00 00 01 00 02 00 00 00 00")
    assert parse_stmt_prepare_ok(wire, CAPS41) == ok
    opt = CAPS41 | C.OPTIONAL_RESULTSET_METADATA
    none = StmtPrepareOk(2, 1, 0, warnings=3, metadata_follows=False)
    assert build_stmt_prepare_ok(none, opt) == h("00 02 00 00 00 01 00 00 00 00 03 00 00")
    assert parse_stmt_prepare_ok(build_stmt_prepare_ok(none, opt), opt) == none
    with pytest.raises(LocalProtocolError):
        build_stmt_prepare_ok(none, CAPS41)
    # Servers before 4.1 stop after the filler byte.
    assert parse_stmt_prepare_ok(h("00 01 00 00 00 01 00 02 00 00"), CAPS41) == ok


# --- COM_CHANGE_USER -----------------------------------------------------------------------

FULL = CAPS41 | C.PLUGIN_AUTH | C.CONNECT_ATTRS


def test_change_user_layout() -> None:
    cu = ChangeUser("bob", b"\x01\x02", "shop", 45, "mysql_native_password", (("k", "v"),))
    wire = build_change_user(cu, FULL)
    assert wire == (
        b"\x11bob\x00\x02\x01\x02shop\x00\x2d\x00mysql_native_password\x00" + h("04 01 6b 01 76")
    )
    assert parse_change_user(wire, FULL) == cu


def test_change_user_minimal_and_legacy() -> None:
    cu = ChangeUser("bob", b"pw", "")
    assert build_change_user(cu, CAPS41) == b"\x11bob\x00\x02pw\x00"
    assert parse_change_user(b"\x11bob\x00\x02pw\x00", CAPS41) == cu
    legacy = build_change_user(cu, C.PROTOCOL_41)
    assert legacy == b"\x11bob\x00pw\x00\x00"
    assert parse_change_user(legacy, C.PROTOCOL_41) == cu


def test_change_user_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        build_change_user(ChangeUser("u", auth_plugin_name="p", charset=8), CAPS41)
    with pytest.raises(LocalProtocolError):
        build_change_user(ChangeUser("u", auth_plugin_name="p"), FULL)
    with pytest.raises(LocalProtocolError):
        build_change_user(ChangeUser("u", charset=8, attributes=()), FULL)


# --- round trips ---------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
params = st.one_of(
    st.builds(BinaryParam, st.just(T.LONG), st.integers(-(2**31), 2**31 - 1)),
    st.builds(BinaryParam, st.just(T.LONGLONG), st.integers(0, 2**64 - 1), st.just(True)),
    st.builds(BinaryParam, st.just(T.DOUBLE), st.floats(allow_nan=False)),
    st.builds(BinaryParam, st.just(T.BLOB), st.binary(max_size=100)),
    st.builds(BinaryParam, st.sampled_from([T.NULL, T.VAR_STRING]), st.none()),
)


@given(st.lists(params, max_size=10), st.lists(names, min_size=10, max_size=10), names)
def test_query_attributes_round_trip(attrs: list[BinaryParam], labels: list[str], sql: str) -> None:
    named = tuple(
        BinaryParam(a.type, a.value, a.unsigned, n) for a, n in zip(attrs, labels, strict=False)
    )
    assert parse_query(build_query(sql, True, named), query_attributes=True) == Query(
        sql.encode(), named
    )


@given(
    st.integers(0, 2**32 - 1),
    st.lists(params, max_size=10),
    st.sampled_from([CursorFlag.NO_CURSOR, CursorFlag.READ_ONLY]),
    st.booleans(),
)
def test_stmt_execute_round_trip(
    stmt: int, values: list[BinaryParam], flags: CursorFlag, bound: bool
) -> None:
    ex = StmtExecute(stmt, tuple(values), flags, 1, bound or not values)
    wire = build_stmt_execute(ex, CAPS41)
    assert parse_stmt_execute(wire, CAPS41, len(values), previous=ex.params) == ex


@given(
    names,
    st.binary(max_size=255),
    names,
    st.one_of(st.none(), st.integers(0, 0xFFFF)),
    st.data(),
)
def test_change_user_round_trip(
    user: str, auth: bytes, db: str, charset: int | None, data: st.DataObject
) -> None:
    plugin = attrs = None
    if charset is not None:
        plugin = data.draw(st.one_of(st.none(), names))
        if plugin is not None:
            attrs = data.draw(st.one_of(st.none(), st.lists(st.tuples(names, names)).map(tuple)))
    cu = ChangeUser(user, auth, db, charset, plugin, attrs)
    assert parse_change_user(build_change_user(cu, FULL), FULL) == cu
