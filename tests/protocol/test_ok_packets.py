"""OK, ERR and EOF packets against real captures and documented examples (reference §1.1,
§1.2, §1.6), plus round trips over every capability combination that changes the layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.gtid import GtidSet
from consistent.protocol.constants import Capability, ServerStatus
from consistent.protocol.responses import (
    EofPacket,
    ErrPacket,
    OkPacket,
    build_eof,
    build_err,
    build_ok,
    is_eof,
    is_err,
    is_ok,
    parse_eof,
    parse_err,
    parse_ok,
)
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    SessionStateChange,
    StateChange,
    SystemVariable,
    TransactionCharacteristics,
    TransactionState,
    UnknownBlock,
    gtid_info,
)

C = Capability
S = ServerStatus
CAPS41 = C.PROTOCOL_41 | C.TRANSACTIONS
TRACK = CAPS41 | C.SESSION_TRACK
MODERN = TRACK | C.DEPRECATE_EOF
STATE = S.AUTOCOMMIT | S.SESSION_STATE_CHANGED


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# --- vitessio/vitess go/mysql/conn_test.go TestOkPackets (captured from MySQL) -------------

VITESS_UUID = "f27f6971-03e7-11eb-85c5-98af65a6dc4a"
VITESS_GTID = h("00 00 00 02 40 00 00 00 2a 03 28 00 26") + f"{VITESS_UUID}:2".encode()
VITESS_SCHEMA = h("00 00 00 02 40 00 00 00 07 01 05 04 74 65 73 74")
VITESS_SYSVAR_STATE = (
    h("00 00 00 00 40 00 00 00 14 00 0f 0a") + b"autocommit" + b"\x03OFF" + h("02 01 31")
)


def test_vitess_own_gtid_capture() -> None:
    ok = parse_ok(VITESS_GTID, TRACK)
    assert ok == OkPacket(status=STATE, session_state=(Gtids(f"{VITESS_UUID}:2"),))
    assert build_ok(ok, TRACK) == VITESS_GTID
    assert gtid_info(ok) == GtidSet.from_intervals({(VITESS_UUID, None): [(2, 2)]})


def test_vitess_schema_capture() -> None:
    ok = parse_ok(VITESS_SCHEMA, TRACK)
    assert ok.session_state == (Schema("test"),)
    assert ok.info == b""
    assert build_ok(ok, TRACK) == VITESS_SCHEMA
    assert gtid_info(ok) is None


def test_vitess_sysvar_and_state_change_capture() -> None:
    ok = parse_ok(VITESS_SYSVAR_STATE, TRACK)
    assert ok.status == S.SESSION_STATE_CHANGED
    assert ok.session_state == (SystemVariable("autocommit", "OFF"), StateChange(True))
    assert build_ok(ok, TRACK) == VITESS_SYSVAR_STATE


# --- blackbeam/rust_mysql_common src/packets/mod.rs should_parse_ok_packet -----------------

RUST_PLAIN_OK = h("00 01 00 02 00 00 00")
RUST_INFO = b"Read 1 rows, 1.00 B in 0.002 sec., 611.34 rows/sec., 611.34 B/sec."
RUST_FE_OK_WITH_INFO = h("fe 00 00 00 00 00 00 42") + RUST_INFO
RUST_NON_CANONICAL_STATE = h("00 00 00 02 40 00 00 00 04 02 02 01 31")


@pytest.mark.parametrize("caps", [CAPS41, TRACK, MODERN])
def test_rust_plain_ok_with_and_without_session_track(caps: int) -> None:
    # 7 bytes: with CLIENT_SESSION_TRACK the info is absent because the packet ends (pos == end).
    ok = parse_ok(RUST_PLAIN_OK, caps)
    assert ok == OkPacket(affected_rows=1, status=S.AUTOCOMMIT)
    assert build_ok(ok, caps) == RUST_PLAIN_OK


@pytest.mark.parametrize("caps", [MODERN, CAPS41 | C.DEPRECATE_EOF])
def test_rust_long_0xfe_terminator_is_an_ok(caps: int) -> None:
    assert len(RUST_INFO) == 0x42
    assert is_ok(RUST_FE_OK_WITH_INFO, caps)
    assert not is_eof(RUST_FE_OK_WITH_INFO, caps)
    ok = parse_ok(RUST_FE_OK_WITH_INFO, caps)
    assert ok == OkPacket(info=RUST_INFO, header=0xFE)
    assert build_ok(ok, caps) == RUST_FE_OK_WITH_INFO


def test_0xfe_packet_without_deprecate_eof_is_neither_ok_nor_eof_when_long() -> None:
    assert not is_ok(RUST_FE_OK_WITH_INFO, TRACK)
    assert not is_eof(RUST_FE_OK_WITH_INFO, TRACK)


def test_rust_non_canonical_state_change_is_kept_raw() -> None:
    # The crate nests '1' in a lenenc string; mysqld writes 02 01 31.  Kept byte for byte.
    ok = parse_ok(RUST_NON_CANONICAL_STATE, TRACK)
    assert ok.session_state == (UnknownBlock(2, b"\x01\x31"),)
    assert build_ok(ok, TRACK) == RUST_NON_CANONICAL_STATE


# --- the 1,121-byte ALL_GTIDS capture of reference §1.6, rebuilt -----------------------------


def all_gtids_set_text() -> str:
    """26 UUIDs in mysqld's format, 1,091 bytes like the capture: its first two entries are
    the capture's (``0c6c6b4a-…:1-4``, ``13ebf828-…:1-9``), the rest are stand-ins."""
    uuids = ["0c6c6b4a-2de5-11ed-bc7a-a8a15983d5bd", "13ebf828-2de5-11ed-bc7a-a8a15983d5bd"]
    uuids += [f"{0x20000000 + i * 0x01000000:08x}-2de5-11ed-bc7a-a8a15983d5bd" for i in range(24)]
    ranges = ["1-4", "1-9"] + ["1-3"] * 23 + ["1-10"]
    return ",\n".join(f"{u}:{r}" for u, r in zip(uuids, ranges, strict=True))


def test_all_gtids_capture_rebuilt() -> None:
    text = all_gtids_set_text()
    assert len(text) == 1091
    assert str(GtidSet.parse(text)) == text  # it is mysqld's canonical text
    ok = OkPacket(
        status=S.IN_TRANS | S.AUTOCOMMIT | S.SESSION_STATE_CHANGED,
        session_state=(Gtids(text), TransactionState("T_R_____")),
    )
    wire = build_ok(ok, TRACK)
    assert len(wire) == 1121
    assert wire[:19] == h("00 00 00 03 40 00 00 00 fc 56 04 03 fc 47 04 00 fc 43 04")
    assert wire[19:-11] == text.encode()
    assert wire[-11:] == h("05 09 08") + b"T_R_____"
    back = parse_ok(wire, TRACK)
    assert back == ok
    info = gtid_info(back)
    assert isinstance(info, GtidSet)
    assert len(info.uuids()) == 26
    assert len(info) == 4 + 9 + 23 * 3 + 10


# --- DERIVED example of reference §1.6 (OWN_GTID for the mtr uuid) ---------------------------


def test_derived_own_gtid_u4() -> None:
    u = "00000000-1111-0000-1111-000000000000"
    wire = h("00 00 00 02 40 00 00 00 2a 03 28 00 26") + f"{u}:4".encode()
    ok = parse_ok(wire, TRACK)
    assert ok.session_state == (Gtids(f"{u}:4"),)
    assert build_ok(ok, TRACK) == wire
    info = gtid_info(ok)
    assert isinstance(info, GtidSet)
    assert len(info) == 1


# --- documented examples (MySQL doc page_protocol_basic_ok/err/eof_packet) ------------------


def test_doc_ok_example() -> None:
    # "07 00 00 02 | 00 00 00 02 00 00 00": OK, AUTOCOMMIT, no warnings.
    ok = parse_ok(h("00 00 00 02 00 00 00"), CAPS41)
    assert ok == OkPacket(status=S.AUTOCOMMIT)
    assert build_ok(ok, CAPS41) == h("00 00 00 02 00 00 00")


def test_doc_err_example() -> None:
    wire = h("ff 48 04 23 48 59 30 30 30") + b"No tables used"
    assert is_err(wire)
    err = parse_err(wire, CAPS41)
    assert err == ErrPacket(1096, "HY000", "No tables used")
    assert build_err(err, CAPS41) == wire


def test_err_without_protocol_41_has_no_sqlstate() -> None:
    wire = h("ff 15 04") + b"Access denied"
    assert parse_err(wire, 0) == ErrPacket(1045, None, "Access denied")
    # mysqld drops the SQLSTATE for a pre-4.1 client.
    assert build_err(ErrPacket(1045, "28000", "Access denied"), 0) == wire


def test_err_marker_is_optional_under_protocol_41() -> None:
    assert parse_err(h("ff 15 04") + b"x", CAPS41) == ErrPacket(1045, None, "x")


def test_err_sqlstate_must_be_five_characters() -> None:
    with pytest.raises(LocalProtocolError):
        build_err(ErrPacket(1, "HY00", "m"), CAPS41)


def test_doc_eof_example_warnings_then_status() -> None:
    # "05 00 00 05 | fe 00 00 02 00": warnings 0 then status AUTOCOMMIT.
    wire = h("fe 00 00 02 00")
    assert is_eof(wire, TRACK)
    assert not is_eof(wire, MODERN)
    assert parse_eof(wire, CAPS41) == EofPacket(warnings=0, status=S.AUTOCOMMIT)
    assert build_eof(EofPacket(0, S.AUTOCOMMIT), CAPS41) == wire
    # The order matters: 3 warnings, status IN_TRANS.
    assert parse_eof(h("fe 03 00 01 00"), CAPS41) == EofPacket(3, S.IN_TRANS)


def test_eof_before_protocol_41_is_one_byte() -> None:
    assert build_eof(EofPacket(), 0) == b"\xfe"
    assert parse_eof(b"\xfe", 0) == EofPacket()


# --- reader rules of reference §1.2 --------------------------------------------------------


def test_state_changed_without_message_has_empty_info() -> None:
    ok = OkPacket(status=STATE, session_state=(Schema("db"),))
    assert build_ok(ok, TRACK) == h("00 00 00 02 40 00 00 00 05 01 03 02 64 62")


def test_info_without_state_under_session_track() -> None:
    ok = OkPacket(affected_rows=3, status=S.AUTOCOMMIT, info=b"Rows matched: 3")
    wire = build_ok(ok, TRACK)
    assert wire == h("00 03 00 02 00 00 00 0f") + b"Rows matched: 3"
    assert parse_ok(wire, TRACK) == ok


def test_info_without_session_track_is_lenenc() -> None:
    # mysqld writes a lenenc string even though the docs say string<EOF>.
    wire = h("00 01 00 02 00 00 00 05") + b"hello"
    assert parse_ok(wire, CAPS41).info == b"hello"
    assert build_ok(OkPacket(1, 0, S.AUTOCOMMIT, 0, b"hello"), CAPS41) == wire


def test_state_flag_is_ignored_without_session_track() -> None:
    # Without the capability the bytes after the warnings are the info, never state.
    wire = h("00 00 00 00 40 00 00 03") + b"abc"
    assert parse_ok(wire, CAPS41) == OkPacket(status=S.SESSION_STATE_CHANGED, info=b"abc")


def test_state_flag_with_packet_ending_after_info() -> None:
    assert parse_ok(h("00 00 00 00 40 00 00 00"), TRACK).session_state == ()


def test_large_affected_rows_use_long_lenenc() -> None:
    ok = OkPacket(affected_rows=70000, last_insert_id=2**40)
    wire = build_ok(ok, CAPS41)
    assert wire[:1] == b"\x00"
    assert wire[1:5] == h("fd 70 11 01")
    assert wire[5:14] == h("fe 00 00 00 00 00 01 00 00")
    assert parse_ok(wire, CAPS41) == ok


def test_pre_41_ok_with_transactions_has_status_only() -> None:
    wire = h("00 00 00 03 00")
    assert parse_ok(wire, C.TRANSACTIONS) == OkPacket(status=S.IN_TRANS | S.AUTOCOMMIT)
    assert build_ok(OkPacket(status=S.IN_TRANS | S.AUTOCOMMIT), C.TRANSACTIONS) == wire


def test_trailing_bytes_after_state_are_ignored() -> None:
    assert parse_ok(VITESS_SCHEMA + b"\x99", TRACK).session_state == (Schema("test"),)


# --- classifiers (cli_safe_read_with_ok_complete) ------------------------------------------


def test_classifiers() -> None:
    assert is_ok(b"\x00", CAPS41)
    assert not is_ok(b"", MODERN)
    assert not is_ok(b"\xff\x01\x00", MODERN)
    assert is_ok(h("fe 00 00 02 00 00 00"), MODERN)
    assert not is_ok(h("fe 00 00 02 00 00 00"), TRACK)
    assert is_eof(h("fe 00 00 02 00 00 00"), TRACK)  # 7 bytes < 8
    assert not is_eof(h("fe 00 00 02 00 00 00 00"), TRACK)  # 8 bytes: a row
    assert not is_eof(b"", TRACK)
    assert is_err(b"\xff")
    assert not is_err(b"")
    assert not is_err(b"\x00")


def test_huge_0xfe_packet_is_data_not_ok() -> None:
    row = b"\xfe" + bytes(0xFFFFFF)  # longer than MAX_PACKET_LENGTH: a row with a huge value
    assert not is_ok(row, MODERN)
    assert is_ok(row[:-1], MODERN)


def test_classifiers_accept_memoryview() -> None:
    assert is_ok(memoryview(VITESS_GTID), TRACK)
    assert parse_ok(memoryview(VITESS_GTID), TRACK).session_state


# --- misuse --------------------------------------------------------------------------------


def test_build_ok_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(header=0xFE), TRACK)
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(status=S.AUTOCOMMIT, session_state=(Schema("x"),)), TRACK)
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(status=STATE, session_state=(Schema("x"),)), CAPS41)
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(affected_rows=-1), TRACK)
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(warnings=70000), TRACK)
    with pytest.raises(LocalProtocolError):
        build_ok(OkPacket(header=0x01), TRACK)


def test_parse_rejects_wrong_headers() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_ok(b"\xff\x00\x00", TRACK)
    with pytest.raises(RemoteProtocolError):
        parse_err(b"\x00", TRACK)
    with pytest.raises(RemoteProtocolError):
        parse_eof(h("fe 00 00 02 00 00 00 00"), TRACK)


# --- round trips ---------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=40)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 2**64 - 1)

blocks: st.SearchStrategy[SessionStateChange] = st.one_of(
    st.builds(SystemVariable, text, text),
    st.builds(Schema, text),
    st.builds(StateChange, st.booleans()),
    st.builds(Gtids, text, st.integers(0, 300)),
    st.builds(TransactionCharacteristics, text),
    st.builds(TransactionState, text),
    st.builds(UnknownBlock, st.integers(6, 2**64 - 1), st.binary(max_size=300)),
)

# Every combination of the capabilities that change the OK packet layout.
ok_capabilities = st.sampled_from(
    [
        a | b | c | d
        for a in (0, C.PROTOCOL_41)
        for b in (0, C.TRANSACTIONS)
        for c in (0, C.SESSION_TRACK)
        for d in (0, C.DEPRECATE_EOF)
    ]
)


@st.composite
def ok_packets(draw: st.DrawFn, caps: int) -> OkPacket:
    """An OK packet that ``caps`` can carry without loss."""
    has_status = bool(caps & (C.PROTOCOL_41 | C.TRANSACTIONS))
    status = draw(u16) if has_status else 0
    state: tuple[SessionStateChange, ...] = ()
    if caps & C.SESSION_TRACK and status & ServerStatus.SESSION_STATE_CHANGED:
        state = tuple(draw(st.lists(blocks, max_size=6)))
    header = draw(st.sampled_from([0x00, 0xFE])) if caps & C.DEPRECATE_EOF else 0x00
    return OkPacket(
        affected_rows=draw(u64),
        last_insert_id=draw(u64),
        status=ServerStatus(status),
        warnings=draw(u16) if caps & C.PROTOCOL_41 else 0,
        info=draw(st.binary(max_size=300)),
        session_state=state,
        header=header,
    )


@given(st.data(), ok_capabilities)
def test_ok_round_trip(data: st.DataObject, caps: int) -> None:
    ok = data.draw(ok_packets(caps))
    wire = build_ok(ok, caps)
    assert is_ok(wire, caps)
    assert parse_ok(wire, caps) == ok


@given(
    st.integers(0, 0xFFFF),
    st.one_of(st.none(), st.text(st.characters(codec="ascii"), min_size=5, max_size=5)),
    st.text(st.characters(codec="utf-8"), max_size=50),
)
def test_err_round_trip(errno: int, sqlstate: str | None, message: str) -> None:
    err = ErrPacket(errno, sqlstate, message)
    if sqlstate is None and message.startswith("#"):
        return  # without a SQLSTATE a message starting with '#' reads as a marker
    assert parse_err(build_err(err, CAPS41), CAPS41) == err


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_eof_round_trip(warnings: int, status: int) -> None:
    eof = EofPacket(warnings, ServerStatus(status))
    wire = build_eof(eof, CAPS41)
    assert len(wire) == 5
    assert is_eof(wire, CAPS41)
    assert parse_eof(wire, CAPS41) == eof
