"""The front-end's pure parts: engine outcomes to payloads, execute packets to values.

Expected bytes and texts come from mysqld's behaviour as the reference records it (§1.1 for
OK/EOF layouts, §1.3 for session-state blocks) and from what ``mysql`` prints for values
(``Protocol_text::store_*`` in ``mysql/mysql-server sql/protocol_classic.cc``); each payload is
decoded back with the project's codec rather than compared with itself.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.emulator.results import Column, Outcome, PreparedStatement, ResultSet
from consistent.emulator.wire import encode
from consistent.emulator.wire.params import parse_execute
from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol import (
    BinaryParam,
    BinaryType,
    Capability,
    Charset,
    ColumnFlag,
    ColumnType,
    DateTimeValue,
    Schema,
    ServerStatus,
    StmtExecute,
    TimeValue,
    build_stmt_execute,
    is_eof,
    is_ok,
    parse_binary_row,
    parse_column_count,
    parse_column_definition41,
    parse_eof,
    parse_ok,
    parse_stmt_prepare_ok,
    parse_text_row,
)

BASE = int(Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION | Capability.TRANSACTIONS)
TRACK = BASE | int(Capability.SESSION_TRACK)
DEPRECATE = TRACK | int(Capability.DEPRECATE_EOF)
NO_FLAGS = ColumnFlag(0)


def col(
    name: str,
    type_: ColumnType,
    *,
    decimals: int = 0,
    flags: ColumnFlag = NO_FLAGS,
    charset: int = Charset.UTF8MB4_0900_AI_CI,
) -> Column:
    return Column(name, type_, 20, flags, decimals, charset)


# --- text values ----------------------------------------------------------------------------------

TEXT_CASES = [
    # (column type, decimals, value, what mysql prints)
    (ColumnType.LONGLONG, 0, 42, b"42"),
    (ColumnType.LONGLONG, 0, -7, b"-7"),
    (ColumnType.TINY, 0, True, b"1"),
    (ColumnType.DOUBLE, 31, 0.1, b"0.1"),
    (ColumnType.DOUBLE, 31, 3.0, b"3"),
    (ColumnType.DOUBLE, 31, 1e20, b"1e20"),
    (ColumnType.DOUBLE, 31, 1.5e-7, b"1.5e-7"),
    (ColumnType.DOUBLE, 2, 1.5, b"1.50"),  # DOUBLE(10,2): fixed decimals
    (ColumnType.FLOAT, 31, 3.14159265, b"3.14159"),  # FLT_DIG significant digits
    (ColumnType.NEWDECIMAL, 2, decimal.Decimal("1.50"), b"1.50"),
    (ColumnType.NEWDECIMAL, 0, decimal.Decimal("1E+2"), b"100"),
    (ColumnType.VAR_STRING, 31, "héllo", "héllo".encode()),
    (ColumnType.BLOB, 0, b"\x00\xff", b"\x00\xff"),
    (ColumnType.DATETIME, 0, dt.datetime(2024, 1, 2, 3, 4, 5, 123456), b"2024-01-02 03:04:05"),
    (
        ColumnType.DATETIME,
        6,
        dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
        b"2024-01-02 03:04:05.123456",
    ),
    (ColumnType.DATETIME, 3, dt.datetime(2024, 1, 2, 3, 4, 5, 120000), b"2024-01-02 03:04:05.120"),
    (ColumnType.DATE, 0, dt.date(2024, 2, 29), b"2024-02-29"),
    (ColumnType.TIME, 0, dt.timedelta(hours=-838, minutes=-59, seconds=-59), b"-838:59:59"),
    (ColumnType.TIME, 0, dt.timedelta(days=1, seconds=5), b"24:00:05"),
    (ColumnType.TIME, 2, dt.timedelta(seconds=1, microseconds=500000), b"00:00:01.50"),
]


@pytest.mark.parametrize(("type_", "decimals", "value", "expected"), TEXT_CASES)
def test_text_value_prints_like_mysql(
    type_: ColumnType, decimals: int, value: object, expected: bytes
) -> None:
    assert encode.text_value(col("c", type_, decimals=decimals), value) == expected


def test_text_value_null_and_unsendable() -> None:
    assert encode.text_value(col("c", ColumnType.LONGLONG), None) is None
    with pytest.raises(LocalProtocolError):
        encode.text_value(col("c", ColumnType.DOUBLE, decimals=31), float("nan"))
    with pytest.raises(LocalProtocolError):
        encode.text_value(col("c", ColumnType.VAR_STRING), object())


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_reads_back_exactly(value: float) -> None:
    text = encode.text_value(col("c", ColumnType.DOUBLE, decimals=31), value)
    assert text is not None
    assert float(text) == value


# --- binary values --------------------------------------------------------------------------------


def test_binary_row_round_trips_through_the_codec() -> None:
    unsigned = ColumnFlag.UNSIGNED | ColumnFlag.NUM
    columns = (
        col("u", ColumnType.LONGLONG, flags=unsigned),
        col("i", ColumnType.LONG),
        col("d", ColumnType.DOUBLE, decimals=31),
        col("s", ColumnType.VAR_STRING, decimals=31),
        col("n", ColumnType.NEWDECIMAL, decimals=2),
        col("ts", ColumnType.DATETIME),
        col("zero", ColumnType.DATETIME),
        col("t", ColumnType.TIME),
        col("tt", ColumnType.TIME),
        col("null", ColumnType.VAR_STRING),
    )
    row = (
        2**64 - 1,
        "-5",  # text from the engine for an integer column is converted, not sent as text
        2.5,
        "x",
        decimal.Decimal("9.99"),
        dt.datetime(2020, 5, 6, 7, 8, 9),
        "0000-00-00 00:00:00",
        dt.timedelta(hours=-1, minutes=-2, seconds=-3),
        "-01:02:03",
        None,
    )
    outcome = Outcome(result=ResultSet(columns, (row,)))
    payloads = encode.encode_outcome(outcome, DEPRECATE, binary=True)
    # column count, 10 definitions, 1 row, 0xFE OK (no EOF after metadata under DEPRECATE_EOF)
    assert len(payloads) == 13
    assert parse_column_count(payloads[0], DEPRECATE) == 10
    types = [BinaryType.of(parse_column_definition41(p, DEPRECATE)) for p in payloads[1:11]]
    assert parse_binary_row(payloads[11], types) == (
        2**64 - 1,
        -5,
        2.5,
        b"x",
        b"9.99",
        DateTimeValue(2020, 5, 6, 7, 8, 9),
        DateTimeValue(),
        TimeValue(True, 0, 1, 2, 3),
        TimeValue(True, 0, 1, 2, 3),
        None,
    )
    assert payloads[12][0] == 0xFE
    assert is_ok(payloads[12], DEPRECATE)


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        (ColumnType.LONG, 1.5),
        (ColumnType.LONG, "abc"),
        (ColumnType.TINY, 1000),
        (ColumnType.DATETIME, "not a date"),
        (ColumnType.NULL, 1),
    ],
)
def test_binary_value_that_does_not_fit_is_refused(type_: ColumnType, value: object) -> None:
    outcome = Outcome(result=ResultSet((col("c", type_),), ((value,),)))
    with pytest.raises(LocalProtocolError):
        encode.encode_outcome(outcome, BASE, binary=True)


def test_row_width_must_match_columns() -> None:
    outcome = Outcome(result=ResultSet((col("a", ColumnType.LONG),), ((1, 2),)))
    with pytest.raises(LocalProtocolError):
        encode.encode_outcome(outcome, BASE)


# --- OK, EOF and session state --------------------------------------------------------------------

STATE = Outcome(
    affected_rows=3,
    last_insert_id=7,
    status=ServerStatus.AUTOCOMMIT | ServerStatus.SESSION_STATE_CHANGED,
    info="Rows matched: 3",
    session_state=(Schema("test"),),
)


def test_ok_carries_session_state_for_a_tracking_client() -> None:
    ok = parse_ok(encode.ok_payload(STATE, TRACK), TRACK)
    assert (ok.affected_rows, ok.last_insert_id) == (3, 7)
    assert ok.status & ServerStatus.SESSION_STATE_CHANGED
    assert ok.session_state == (Schema("test"),)
    assert ok.info == b"Rows matched: 3"


def test_ok_drops_session_state_without_client_session_track() -> None:
    payload = encode.ok_payload(STATE, BASE)
    ok = parse_ok(payload, BASE)
    assert ok.status == ServerStatus.AUTOCOMMIT
    assert ok.session_state == ()
    # §1.1: without CLIENT_SESSION_TRACK the info is a lenenc string and nothing follows it.
    assert payload.endswith(b"\x0fRows matched: 3")


def test_plain_ok_is_seven_bytes() -> None:
    # §1.1 / rust_mysql_common's vector: 00 01 00 02 00 00 00 (1 affected row, AUTOCOMMIT).
    payload = encode.ok_payload(Outcome(affected_rows=1), TRACK)
    assert payload == bytes.fromhex("00010002000000")


SELECT_ONE = Outcome(
    result=ResultSet((col("1", ColumnType.LONGLONG),), ((1,),)),
    status=ServerStatus.AUTOCOMMIT | ServerStatus.SESSION_STATE_CHANGED,
    session_state=(Schema("d"),),
)


def test_result_set_with_classic_eof() -> None:
    payloads = encode.encode_outcome(SELECT_ONE, TRACK)
    # count, definition, EOF, row, EOF
    assert len(payloads) == 5
    assert is_eof(payloads[2], TRACK)
    assert is_eof(payloads[4], TRACK)
    assert parse_text_row(payloads[3], 1) == (b"1",)
    # §1.5: an EOF cannot carry state, so it does not claim any (reference §1.1 example bytes).
    assert payloads[4] == bytes.fromhex("fe00000200")
    assert parse_eof(payloads[4], TRACK).status == ServerStatus.AUTOCOMMIT


def test_result_set_under_deprecate_eof_ends_with_ok_carrying_state() -> None:
    payloads = encode.encode_outcome(SELECT_ONE, DEPRECATE)
    assert len(payloads) == 4  # count, definition, row, 0xFE OK
    end = parse_ok(payloads[3], DEPRECATE)
    assert end.header == 0xFE
    assert end.session_state == (Schema("d"),)


def test_more_results_flag_reaches_the_terminator() -> None:
    outcome = Outcome(
        result=SELECT_ONE.result, status=ServerStatus.AUTOCOMMIT | ServerStatus.MORE_RESULTS_EXISTS
    )
    payloads = encode.encode_outcome(outcome, BASE)
    assert parse_eof(payloads[-1], BASE).status & ServerStatus.MORE_RESULTS_EXISTS


def test_prepare_payloads_with_and_without_deprecate_eof() -> None:
    param = Column("?", ColumnType.VAR_STRING, 0, ColumnFlag.BINARY, 0, Charset.BINARY)
    prepared = PreparedStatement(
        stmt_id=9,
        param_count=2,
        params=(param, param),
        columns=(col("a", ColumnType.LONG), col("b", ColumnType.VAR_STRING)),
    )
    classic = encode.prepare_payloads(prepared, ServerStatus.AUTOCOMMIT, BASE)
    assert len(classic) == 1 + 2 + 1 + 2 + 1
    ok = parse_stmt_prepare_ok(classic[0], BASE)
    assert (ok.statement_id, ok.num_params, ok.num_columns) == (9, 2, 2)
    assert is_eof(classic[3], BASE)
    assert is_eof(classic[6], BASE)
    modern = encode.prepare_payloads(prepared, ServerStatus.AUTOCOMMIT, DEPRECATE)
    assert len(modern) == 1 + 2 + 2


def test_prepare_without_parameter_definitions_describes_them() -> None:
    prepared = PreparedStatement(stmt_id=1, param_count=1, params=(), columns=())
    payloads = encode.prepare_payloads(prepared, ServerStatus.AUTOCOMMIT, DEPRECATE)
    assert len(payloads) == 2
    assert parse_column_definition41(payloads[1], DEPRECATE).name == "?"


def test_field_list_definitions_have_a_default_value() -> None:
    done = Outcome()
    payloads = encode.field_list_payloads([col("a", ColumnType.LONG)], done, BASE)
    definition = parse_column_definition41(payloads[0], BASE, field_list=True)
    assert definition.name == "a"
    assert definition.default_value is None
    assert is_eof(payloads[1], BASE)


# --- COM_STMT_EXECUTE parameters ------------------------------------------------------------------


def test_execute_parameters_become_engine_values() -> None:
    params = (
        BinaryParam(ColumnType.LONGLONG, 5),
        BinaryParam(ColumnType.VAR_STRING, "é"),
        BinaryParam(ColumnType.BLOB, b"\x00\x01"),
        BinaryParam(ColumnType.NEWDECIMAL, "1.25"),
        BinaryParam(ColumnType.DATETIME, dt.datetime(2021, 1, 2, 3, 4, 5)),
        BinaryParam(ColumnType.DATE, dt.date(2021, 1, 2)),
        BinaryParam(ColumnType.TIME, dt.timedelta(hours=-2)),
        BinaryParam(ColumnType.DOUBLE, 0.5),
        BinaryParam(ColumnType.LONG, None),
    )
    payload = build_stmt_execute(StmtExecute(3, params), BASE)
    request = parse_execute(payload, len(params), None, {})
    assert request.statement_id == 3
    assert request.values == (
        5,
        "é",
        b"\x00\x01",
        decimal.Decimal("1.25"),
        dt.datetime(2021, 1, 2, 3, 4, 5),
        dt.date(2021, 1, 2),
        dt.timedelta(hours=-2),
        0.5,
        None,
    )
    # A later execute may omit the types: the previous ones are reused.
    again = build_stmt_execute(StmtExecute(3, params, new_params_bound=False), BASE)
    assert parse_execute(again, len(params), request.types, {}).values == request.values
    with pytest.raises(RemoteProtocolError):
        parse_execute(again, len(params), None, {})


def test_long_data_parameter_has_no_value_in_the_execute_packet() -> None:
    # libmysqlclient's cli_stmt_execute skips store_param() for a long-data parameter, so the
    # packet holds the value of parameter 0 only; parameter 1 comes from SEND_LONG_DATA.
    full = build_stmt_execute(
        StmtExecute(1, (BinaryParam(ColumnType.LONG, 7), BinaryParam(ColumnType.STRING, ""))),
        BASE,
    )
    without_second = full[:-1]  # drop the empty lenenc string of parameter 1
    request = parse_execute(without_second, 2, None, {1: b"long text"})
    assert request.values == (7, "long text")
    with pytest.raises(RemoteProtocolError):
        parse_execute(full, 2, None, {1: b"x"})  # a stray value is not protocol


@given(
    st.lists(
        st.one_of(st.none(), st.binary(max_size=300), st.sampled_from([b"x" * 70_000])),
        min_size=1,
        max_size=6,
    )
)
def test_text_rows_read_back_with_the_codec(values: list[bytes | None]) -> None:
    """NULLs, empty values, and lengths on both sides of the one-byte (251) and two-byte
    (65,536) length prefixes."""
    columns = tuple(col(f"c{i}", ColumnType.BLOB) for i in range(len(values)))
    outcome = Outcome(result=ResultSet(columns, (tuple(values),)))
    payloads = encode.encode_outcome(outcome, DEPRECATE)
    row = payloads[1 + len(values)]
    assert parse_text_row(row, len(values)) == tuple(values)
