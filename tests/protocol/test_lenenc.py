"""Length-encoded integers and strings (MySQL doc page_protocol_basic_dt_integers: < 251 one
byte, 0xFC + 2 bytes, 0xFD + 3 bytes, 0xFE + 8 bytes; 0xFB is NULL in rows, 0xFF invalid)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.lenenc import (
    Reader,
    decode_text,
    encode_text,
    lenenc_int_size,
    pack_lenenc_bytes,
    pack_lenenc_int,
    pack_nul_bytes,
)

# Boundaries of each encoding, written out by hand from the documented table.
BOUNDARIES = [
    (0, "00"),
    (250, "fa"),
    (251, "fc fb 00"),
    (0xFFFF, "fc ff ff"),
    (0x10000, "fd 00 00 01"),
    (0xFFFFFF, "fd ff ff ff"),
    (0x1000000, "fe 00 00 00 01 00 00 00 00"),
    (2**64 - 1, "fe ff ff ff ff ff ff ff ff"),
]


@pytest.mark.parametrize(("value", "wire"), BOUNDARIES)
def test_pack_lenenc_int_boundaries(value: int, wire: str) -> None:
    assert pack_lenenc_int(value) == bytes.fromhex(wire)
    assert lenenc_int_size(value) == len(bytes.fromhex(wire))


@pytest.mark.parametrize(("value", "wire"), BOUNDARIES)
def test_read_lenenc_int_boundaries(value: int, wire: str) -> None:
    r = Reader(bytes.fromhex(wire))
    assert r.lenenc_int() == value
    assert r.at_end()


@pytest.mark.parametrize("bad", [-1, 2**64, -(2**70)])
def test_pack_lenenc_int_out_of_range_is_local_error(bad: int) -> None:
    with pytest.raises(LocalProtocolError):
        pack_lenenc_int(bad)


def test_non_canonical_lenenc_is_accepted() -> None:
    # libmysqlclient's net_field_length accepts 0xFC + 2 bytes for small numbers too.
    assert Reader(bytes.fromhex("fc 05 00")).lenenc_int() == 5


def test_0xfb_is_null_only_where_null_is_allowed() -> None:
    with pytest.raises(RemoteProtocolError):
        Reader(b"\xfb").lenenc_int()
    assert Reader(b"\xfb").lenenc_int_or_null() is None
    assert Reader(b"\xfb").lenenc_bytes_or_null() is None
    with pytest.raises(RemoteProtocolError):
        Reader(b"\xfb").lenenc_bytes()


def test_0xff_is_never_a_lenenc_int() -> None:
    for method in (Reader.lenenc_int, Reader.lenenc_int_or_null, Reader.lenenc_bytes_or_null):
        with pytest.raises(RemoteProtocolError):
            method(Reader(b"\xff\x00\x00"))


@pytest.mark.parametrize("wire", ["", "fc", "fc 01", "fd 01 02", "fe 01 02 03 04 05 06 07"])
def test_truncated_lenenc_int(wire: str) -> None:
    with pytest.raises(RemoteProtocolError):
        Reader(bytes.fromhex(wire)).lenenc_int()


def test_lenenc_string_longer_than_packet() -> None:
    with pytest.raises(RemoteProtocolError):
        Reader(b"\x05abc").lenenc_bytes()


def test_lenenc_string_of_251_bytes_uses_fc_prefix() -> None:
    data = bytes(range(251))
    assert pack_lenenc_bytes(data)[:3] == b"\xfc\xfb\x00"
    assert pack_lenenc_bytes(data)[3:] == data


def test_fixed_width_integers_are_little_endian() -> None:
    r = Reader(bytes.fromhex("01 0201 030201 04030201 0807060504030201 aabb"))
    assert r.u8() == 0x01
    assert r.u16() == 0x0102
    assert r.u24() == 0x010203
    assert r.u32() == 0x01020304
    assert r.u64() == 0x0102030405060708
    assert r.uint(2) == 0xBBAA
    assert r.at_end()
    with pytest.raises(RemoteProtocolError):
        r.u8()


def test_nul_terminated_strings() -> None:
    r = Reader(b"root\x00\x00rest")
    assert r.nul_bytes() == b"root"
    assert r.nul_text() == ""
    assert r.rest() == b"rest"
    with pytest.raises(RemoteProtocolError):
        Reader(b"no terminator").nul_bytes()
    assert pack_nul_bytes("root") == b"root\x00"
    with pytest.raises(LocalProtocolError):
        pack_nul_bytes(b"a\x00b")


def test_nul_bytes_inside_a_view() -> None:
    # A reader over a slice of a larger buffer must not find a NUL outside its slice.
    outer = memoryview(b"xx" + b"abc" + b"\x00yy")
    r = Reader(outer[2:5])
    with pytest.raises(RemoteProtocolError):
        r.nul_bytes()
    assert Reader(outer[2:6]).nul_bytes() == b"abc"


def test_text_round_trips_non_utf8_bytes() -> None:
    raw = b"caf\xe9"  # latin-1, not UTF-8
    assert encode_text(decode_text(raw)) == raw


def test_encoding_a_lone_surrogate_that_did_not_come_from_bytes_fails_locally() -> None:
    with pytest.raises(LocalProtocolError):
        encode_text("\udfff\ud800")


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_lenenc_int_round_trip(n: int) -> None:
    wire = pack_lenenc_int(n)
    # Independent check of the layout: prefix then little-endian value of the right width.
    if n < 251:
        assert wire == bytes([n])
    else:
        width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[wire[0]]
        assert len(wire) == 1 + width
        assert int.from_bytes(wire[1:], "little") == n
        assert n >= 1 << (8 * {2: 0, 3: 2, 8: 3}[width]) or width == 2
    r = Reader(wire + b"tail")
    assert r.lenenc_int() == n
    assert r.rest() == b"tail"


@given(st.binary(max_size=70000))
def test_lenenc_bytes_round_trip(data: bytes) -> None:
    r = Reader(pack_lenenc_bytes(data))
    assert r.lenenc_bytes() == data
    assert r.at_end()
