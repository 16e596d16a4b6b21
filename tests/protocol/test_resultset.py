"""Result sets: column count, ColumnDefinition41, text rows and binary rows, against the
examples of the MySQL documentation (page_protocol_com_stmt_prepare,
page_protocol_basic_compression_packet, page_protocol_binary_resultset,
page_protocol_command_phase_sp) and PyMySQL's own column-definition reader."""

from __future__ import annotations

import datetime
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysql.protocol import FieldDescriptorPacket

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.binary import (
    BinaryType,
    DateTimeValue,
    TimeValue,
    build_binary_row,
    decode_binary_value,
    encode_binary_value,
    parse_binary_row,
)
from consistent.protocol.constants import (
    Capability,
    Charset,
    ColumnFlag,
    ColumnType,
    ServerStatus,
)
from consistent.protocol.framing import PacketDecoder
from consistent.protocol.lenenc import Reader
from consistent.protocol.responses import EofPacket, OkPacket, parse_eof, parse_ok
from consistent.protocol.resultset import (
    ColumnDefinition41,
    build_column_count,
    build_column_definition41,
    build_text_row,
    parse_column_count,
    parse_column_definition41,
    parse_text_row,
    resultset_metadata_follows,
)

C = Capability
T = ColumnType
CAPS41 = C.PROTOCOL_41 | C.TRANSACTIONS


def h(text: str) -> bytes:
    return bytes.fromhex(text)


def packets(wire: bytes) -> list[bytes]:
    return [p.payload for p in PacketDecoder().feed(wire)]


# --- documented result sets -----------------------------------------------------------------


def test_doc_prepare_ok_column_definitions() -> None:
    # SELECT CONCAT(?, ?) AS col1: the parameter definition and the column definition.
    param = parse_column_definition41(
        h("03 64 65 66 00 00 00 01 3f 00 0c 3f 00 00 00 00 00 fd 80 00 00 00 00"), CAPS41
    )
    assert param == ColumnDefinition41(
        name="?", type=T.VAR_STRING, charset=Charset.BINARY, flags=ColumnFlag.BINARY
    )
    col1_wire = h("03 64 65 66 00 00 00 04 63 6f 6c 31 00 0c 3f 00 00 00 00 00 fd 80 00 1f 00 00")
    col1 = parse_column_definition41(col1_wire, CAPS41)
    assert (col1.name, col1.catalog, col1.decimals) == ("col1", "def", 0x1F)
    assert build_column_definition41(col1, CAPS41) == col1_wire


def test_doc_text_resultset_repeat_a() -> None:
    # SELECT repeat("a", 50): column count, definition, EOF, one row, EOF.
    wire = (
        h(
            "01 00 00 01 01"
            "25 00 00 02 03 64 65 66 00 00 00 0f 72 65 70 65 61 74 28 22 61 22 2c 20 35 30 29 00"
            "0c 08 00 32 00 00 00 fd 01 00 1f 00 00"
            "05 00 00 03 fe 00 00 02 00"
            "33 00 00 04 32"
        )
        + b"a" * 50
        + h("05 00 00 05 fe 00 00 02 00")
    )
    count, column, eof1, row, eof2 = packets(wire)
    assert parse_column_count(count, CAPS41) == 1
    col = parse_column_definition41(column, CAPS41)
    assert col.name == 'repeat("a", 50)'
    assert (col.charset, col.column_length, col.type) == (8, 50, T.VAR_STRING)
    assert col.flags == ColumnFlag.NOT_NULL
    assert build_column_definition41(col, CAPS41) == column
    assert parse_eof(eof1, CAPS41) == EofPacket(0, ServerStatus.AUTOCOMMIT)
    assert parse_text_row(row, 1) == (b"a" * 50,)
    assert build_text_row([b"a" * 50]) == row
    assert parse_eof(eof2, CAPS41) == EofPacket(0, ServerStatus.AUTOCOMMIT)


def test_doc_binary_resultset_foobar() -> None:
    wire = h(
        "01 00 00 01 01"
        "1a 00 00 02 03 64 65 66 00 00 00 04 63 6f 6c 31 00 0c 08 00 06 00 00 00 fd 00 00 1f 00 00"
        "05 00 00 03 fe 00 00 02 00"
        "09 00 00 04 00 00 06 66 6f 6f 62 61 72"
        "05 00 00 05 fe 00 00 02 00"
    )
    _, column, _, row, _ = packets(wire)
    col = parse_column_definition41(column, CAPS41)
    types = [BinaryType.of(col)]
    assert parse_binary_row(row, types) == (b"foobar",)
    assert build_binary_row(types, [b"foobar"]) == row


def test_doc_call_multi_resultsets() -> None:
    # CALL multi(): two one-row result sets with MORE_RESULTS_EXISTS, then the closing OK.
    wire = h(
        "01 00 00 01 01"
        "17 00 00 02 03 64 65 66 00 00 00 01 31 00 0c 3f 00 01 00 00 00 08 81 00 00 00 00"
        "05 00 00 03 fe 00 00 0a 00"
        "02 00 00 04 01 31"
        "05 00 00 05 fe 00 00 0a 00"
        "01 00 00 06 01"
        "17 00 00 07 03 64 65 66 00 00 00 01 31 00 0c 3f 00 01 00 00 00 08 81 00 00 00 00"
        "05 00 00 08 fe 00 00 0a 00"
        "02 00 00 09 01 31"
        "05 00 00 0a fe 00 00 0a 00"
        "07 00 00 0b 00 01 00 02 00 00 00"
    )
    p = packets(wire)
    assert len(p) == 11
    col = parse_column_definition41(p[1], CAPS41)
    assert (col.name, col.type, col.column_length) == ("1", T.LONGLONG, 1)
    assert col.flags == ColumnFlag.NOT_NULL | ColumnFlag.BINARY
    assert parse_text_row(p[3], 1) == (b"1",)
    more = ServerStatus.AUTOCOMMIT | ServerStatus.MORE_RESULTS_EXISTS
    assert parse_eof(p[4], CAPS41).status == more
    assert parse_ok(p[10], CAPS41) == OkPacket(affected_rows=1, status=ServerStatus.AUTOCOMMIT)


# --- column definitions --------------------------------------------------------------------


def test_pymysql_reads_our_column_definition() -> None:
    col = ColumnDefinition41(
        name="total",
        type=T.NEWDECIMAL,
        charset=Charset.BINARY,
        column_length=12,
        flags=ColumnFlag.NOT_NULL | ColumnFlag.UNSIGNED,
        decimals=2,
        schema="shop",
        table="o",
        org_table="orders",
        org_name="amount",
    )
    f = FieldDescriptorPacket(build_column_definition41(col, CAPS41), "utf8")
    assert f.catalog == b"def"
    assert f.db == b"shop"
    assert (f.table_name, f.org_table, f.name, f.org_name) == ("o", "orders", "total", "amount")
    assert (f.charsetnr, f.length, f.type_code, f.flags, f.scale) == (63, 12, 246, 0x21, 2)


def test_field_list_default_values() -> None:
    with_default = ColumnDefinition41(name="c", default_value=b"42")
    wire = build_column_definition41(with_default, CAPS41, field_list=True)
    assert wire.endswith(b"\x0242")
    assert parse_column_definition41(wire, CAPS41, field_list=True) == with_default
    no_default = ColumnDefinition41(name="c")
    wire = build_column_definition41(no_default, CAPS41, field_list=True)
    assert wire.endswith(b"\x00\x00\xfb")
    assert parse_column_definition41(wire, CAPS41, field_list=True) == no_default
    with pytest.raises(LocalProtocolError):
        build_column_definition41(with_default, CAPS41)


def test_column_definition_fixed_length_must_be_12() -> None:
    wire = bytearray(build_column_definition41(ColumnDefinition41(name="c"), CAPS41))
    wire[wire.index(0x0C)] = 0x0B
    with pytest.raises(RemoteProtocolError):
        parse_column_definition41(bytes(wire), CAPS41)


def test_unknown_column_type_is_kept_as_int() -> None:
    col = ColumnDefinition41(name="c", type=0x77)
    back = parse_column_definition41(build_column_definition41(col, CAPS41), CAPS41)
    assert back.type == 0x77
    assert not isinstance(back.type, ColumnType)


def test_column_definition_needs_protocol_41() -> None:
    with pytest.raises(LocalProtocolError):
        build_column_definition41(ColumnDefinition41(name="c"), 0)


# --- column count --------------------------------------------------------------------------


def test_column_count() -> None:
    assert build_column_count(3, CAPS41) == b"\x03"
    assert build_column_count(300, CAPS41) == h("fc 2c 01")
    assert parse_column_count(h("fc 2c 01"), CAPS41) == 300
    with pytest.raises(RemoteProtocolError):
        parse_column_count(b"\xfb", CAPS41)  # 0xFB here is a LOCAL INFILE request
    with pytest.raises(LocalProtocolError):
        build_column_count(0, CAPS41)


def test_column_count_with_optional_metadata() -> None:
    caps = CAPS41 | C.OPTIONAL_RESULTSET_METADATA
    assert build_column_count(2, caps) == h("02 01")
    assert build_column_count(2, caps, metadata_follows=False) == h("02 00")
    assert parse_column_count(h("02 00"), caps) == 2
    assert not resultset_metadata_follows(h("02 00"), caps)
    assert resultset_metadata_follows(h("02 01"), caps)
    assert resultset_metadata_follows(h("02"), CAPS41)


# --- text rows -----------------------------------------------------------------------------


def test_text_row_null_and_values() -> None:
    wire = build_text_row([b"1", None, "é", 42, 1.5])
    assert wire == h("01 31 fb 02 c3 a9 02 34 32 03 31 2e 35")
    assert parse_text_row(wire, 5) == (b"1", None, "é".encode(), b"42", b"1.5")


def test_text_row_length_mismatch() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_text_row(h("01 31 01 32"), 1)  # a second column nobody announced
    with pytest.raises(RemoteProtocolError):
        parse_text_row(h("01 31"), 2)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=10))
def test_text_row_round_trip(values: list[bytes | None]) -> None:
    assert parse_text_row(build_text_row(values), len(values)) == tuple(values)


# --- binary values (MySQL doc page_protocol_binary_resultset examples) ---------------------

DOC_VALUES = [
    (BinaryType(T.LONGLONG), 1, "01 00 00 00 00 00 00 00"),
    (BinaryType(T.LONG), 1, "01 00 00 00"),
    (BinaryType(T.SHORT), 1, "01 00"),
    (BinaryType(T.TINY), 1, "01"),
    (BinaryType(T.DOUBLE), 10.2, "66 66 66 66 66 66 24 40"),
    (BinaryType(T.DATE), DateTimeValue(2010, 10, 17), "04 da 07 0a 11"),
    (
        BinaryType(T.DATETIME),
        DateTimeValue(2010, 10, 17, 19, 27, 30, 1),
        "0b da 07 0a 11 13 1b 1e 01 00 00 00",
    ),
    (
        BinaryType(T.TIMESTAMP),
        DateTimeValue(2010, 10, 17, 19, 27, 30, 1),
        "0b da 07 0a 11 13 1b 1e 01 00 00 00",
    ),
    (
        BinaryType(T.TIME),
        TimeValue(True, 120, 19, 27, 30, 1),
        "0c 01 78 00 00 00 13 1b 1e 01 00 00 00",
    ),
    (BinaryType(T.TIME), TimeValue(True, 120, 19, 27, 30), "08 01 78 00 00 00 13 1b 1e"),
    (BinaryType(T.VAR_STRING), b"foo", "03 66 6f 6f"),
]


@pytest.mark.parametrize(("binary_type", "value", "wire"), DOC_VALUES)
def test_doc_binary_values(binary_type: BinaryType, value: object, wire: str) -> None:
    assert encode_binary_value(binary_type, value) == h(wire)  # type: ignore[arg-type]
    r = Reader(h(wire))
    assert decode_binary_value(r, binary_type) == value
    assert r.at_end()


def test_doc_float_example() -> None:
    # "33 33 23 41 -- float = 10.2": single precision, so compare as float32.
    value = decode_binary_value(Reader(h("33 33 23 41")), BinaryType(T.FLOAT))
    assert isinstance(value, float)
    assert math.isclose(value, 10.2, rel_tol=1e-6)
    assert encode_binary_value(BinaryType(T.FLOAT), 10.2) == h("33 33 23 41")


def test_shortest_datetime_forms() -> None:
    dt = BinaryType(T.DATETIME)
    assert encode_binary_value(dt, DateTimeValue()) == b"\x00"
    assert encode_binary_value(dt, DateTimeValue(2010, 10, 17, 19, 27, 30)) == h(
        "07 da 07 0a 11 13 1b 1e"
    )
    assert encode_binary_value(BinaryType(T.TIME), TimeValue()) == b"\x00"
    # A reader accepts the longer forms too, with the omitted parts zero.
    for wire, value in [
        ("00", DateTimeValue()),
        ("04 da 07 0a 11", DateTimeValue(2010, 10, 17)),
        ("07 da 07 0a 11 00 00 00", DateTimeValue(2010, 10, 17)),
        ("0b da 07 0a 11 00 00 00 00 00 00 00", DateTimeValue(2010, 10, 17)),
    ]:
        assert decode_binary_value(Reader(h(wire)), dt) == value
    with pytest.raises(RemoteProtocolError):
        decode_binary_value(Reader(h("05 01 02 03 04 05")), dt)
    with pytest.raises(RemoteProtocolError):
        decode_binary_value(Reader(h("01 00")), BinaryType(T.TIME))


def test_python_values_are_accepted_and_converted() -> None:
    stamp = datetime.datetime(2024, 2, 29, 23, 59, 58, 999999)
    wire = encode_binary_value(BinaryType(T.DATETIME), stamp)
    value = decode_binary_value(Reader(wire), BinaryType(T.DATETIME))
    assert isinstance(value, DateTimeValue)
    assert value.as_datetime() == stamp
    span = -datetime.timedelta(days=3, hours=4, minutes=5, seconds=6, microseconds=7)
    wire = encode_binary_value(BinaryType(T.TIME), span)
    value = decode_binary_value(Reader(wire), BinaryType(T.TIME))
    assert isinstance(value, TimeValue)
    assert value == TimeValue(True, 3, 4, 5, 6, 7)
    assert value.as_timedelta() == span
    assert DateTimeValue().as_datetime() is None  # the zero date has no datetime


def test_signedness_comes_from_the_type() -> None:
    assert encode_binary_value(BinaryType(T.TINY, unsigned=True), 255) == b"\xff"
    assert decode_binary_value(Reader(b"\xff"), BinaryType(T.TINY)) == -1
    assert decode_binary_value(Reader(b"\xff" * 8), BinaryType(T.LONGLONG, True)) == 2**64 - 1
    with pytest.raises(LocalProtocolError):
        encode_binary_value(BinaryType(T.TINY), 200)
    with pytest.raises(LocalProtocolError):
        encode_binary_value(BinaryType(T.LONG), "1")
    with pytest.raises(LocalProtocolError):
        encode_binary_value(BinaryType(T.NULL), 1)


def test_null_bitmap_offset_two_for_rows() -> None:
    # Nine columns, the ninth NULL: bit 8 + 2 = 10, i.e. bitmap bytes 00 04.
    types = [BinaryType(T.TINY)] * 9
    row = build_binary_row(types, [1, 2, 3, 4, 5, 6, 7, 8, None])
    assert row[:3] == h("00 00 04")
    assert parse_binary_row(row, types) == (1, 2, 3, 4, 5, 6, 7, 8, None)
    assert build_binary_row([BinaryType(T.TINY)], [None]) == h("00 04")


# --- binary rows: round trips over every type ----------------------------------------------

INT_RANGES = {
    T.TINY: 8,
    T.SHORT: 16,
    T.YEAR: 16,
    T.LONG: 32,
    T.INT24: 32,
    T.LONGLONG: 64,
}
LENENC_TYPES = [
    T.DECIMAL,
    T.NEWDECIMAL,
    T.VARCHAR,
    T.VAR_STRING,
    T.STRING,
    T.ENUM,
    T.SET,
    T.TINY_BLOB,
    T.MEDIUM_BLOB,
    T.LONG_BLOB,
    T.BLOB,
    T.GEOMETRY,
    T.BIT,
    T.JSON,
    T.VECTOR,
]
datetimes = st.builds(
    DateTimeValue,
    st.integers(0, 9999),
    st.integers(0, 12),
    st.integers(0, 31),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999999),
)
times = st.builds(
    TimeValue,
    st.booleans(),
    st.integers(0, 34),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999999),
)


@st.composite
def typed_values(draw: st.DrawFn) -> tuple[BinaryType, object]:
    kind = draw(st.sampled_from(["int", "float", "double", "datetime", "time", "lenenc"]))
    if kind == "int":
        t = draw(st.sampled_from(sorted(INT_RANGES)))
        unsigned = draw(st.booleans())
        bits = INT_RANGES[t]
        lo, hi = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return BinaryType(t, unsigned), draw(st.integers(lo, hi))
    if kind == "float":
        return BinaryType(T.FLOAT), draw(st.floats(width=32, allow_nan=False))
    if kind == "double":
        return BinaryType(T.DOUBLE), draw(st.floats(allow_nan=False))
    if kind == "datetime":
        t = draw(st.sampled_from([T.DATE, T.DATETIME, T.TIMESTAMP]))
        return BinaryType(t), draw(datetimes)
    if kind == "time":
        return BinaryType(T.TIME), draw(times)
    return BinaryType(draw(st.sampled_from(LENENC_TYPES))), draw(st.binary(max_size=300))


@given(st.lists(st.tuples(typed_values(), st.booleans()), max_size=20))
def test_binary_row_round_trip(columns: list[tuple[tuple[BinaryType, object], bool]]) -> None:
    types = [t for (t, _), _ in columns]
    values = [None if is_null else v for (_, v), is_null in columns]
    row = build_binary_row(types, values)  # type: ignore[arg-type]
    assert parse_binary_row(row, types) == tuple(values)
