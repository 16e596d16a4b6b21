"""Session-state tracker blocks (reference §1.3 layouts from mysql-server sql/session_tracker.cc,
§1.7 for MariaDB's last_gtid) and the flavour-independent GTID helper."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.errors import RemoteProtocolError
from consistent.gtid import GtidSet, MariaPosition
from consistent.protocol.constants import ServerStatus
from consistent.protocol.responses import OkPacket
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    SessionStateChange,
    StateChange,
    SystemVariable,
    TransactionCharacteristics,
    TransactionState,
    UnknownBlock,
    build_session_state,
    gtid_info,
    parse_session_state,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# --- documented examples (MySQL doc page_protocol_basic_ok_packet, typo-corrected) ---------


def test_doc_system_variables_example() -> None:
    # After SET autocommit = OFF.  The doc prints "0f1" for the entity length: it is 0f.
    wire = h("00 0f 0a") + b"autocommit" + h("03") + b"OFF"
    assert parse_session_state(wire) == (SystemVariable("autocommit", "OFF"),)
    assert build_session_state([SystemVariable("autocommit", "OFF")]) == wire


def test_doc_schema_example() -> None:
    wire = h("01 05 04 74 65 73 74")  # after USE test
    assert parse_session_state(wire) == (Schema("test"),)
    assert build_session_state([Schema("test")]) == wire


def test_doc_state_change_example_is_type_2_not_type_3() -> None:
    # The doc shows "03 02 01 31": 03 is the total length of the blob, the block is 02 01 31.
    blob_with_total = h("03 02 01 31")
    assert blob_with_total[0] == len(blob_with_total) - 1
    assert parse_session_state(blob_with_total[1:]) == (StateChange(True),)
    assert build_session_state([StateChange()]) == h("02 01 31")


# --- layouts of sql/session_tracker.cc -----------------------------------------------------


def test_gtids_block_layout() -> None:
    # 03 len 00 lenenc(text): encoding specification 0, then the set as a lenenc string.
    text = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    wire = build_session_state([Gtids(text)])
    assert wire == bytes([3, 2 + len(text), 0, len(text)]) + text.encode()
    assert parse_session_state(wire) == (Gtids(text),)


def test_transaction_state_block_layout() -> None:
    assert build_session_state([TransactionState("T_______")]) == h("05 09 08") + b"T_______"
    assert parse_session_state(h("05 09 08") + b"I___W_S_") == (TransactionState("I___W_S_"),)


def test_transaction_characteristics_block_layout() -> None:
    sql = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION READ ONLY;"
    wire = build_session_state([TransactionCharacteristics(sql)])
    assert wire == bytes([4, len(sql) + 1, len(sql)]) + sql.encode()
    assert parse_session_state(wire) == (TransactionCharacteristics(sql),)
    assert parse_session_state(h("04 01 00")) == (TransactionCharacteristics(""),)


def test_one_block_per_system_variable_in_order() -> None:
    blocks = [
        SystemVariable("character_set_client", "utf8mb4"),
        SystemVariable("time_zone", "+00:00"),
    ]
    wire = build_session_state(blocks)
    assert parse_session_state(wire) == tuple(blocks)
    assert wire[0] == 0
    assert wire[1] == 1 + 20 + 1 + 7


def test_unknown_types_are_skipped_by_entity_length() -> None:
    # Type 6 (RESP_ATTR in some forks) with a 4-byte entity, between two known blocks.
    wire = h("01 05 04 74 65 73 74") + h("06 04 de ad be ef") + h("02 01 31")
    assert parse_session_state(wire) == (
        Schema("test"),
        UnknownBlock(6, h("de ad be ef")),
        StateChange(True),
    )
    assert build_session_state(parse_session_state(wire)) == wire


def test_type_above_250_uses_lenenc_prefix() -> None:
    wire = h("fc 2c 01 01 aa")
    assert parse_session_state(wire) == (UnknownBlock(300, b"\xaa"),)
    assert build_session_state([UnknownBlock(300, b"\xaa")]) == wire


def test_entity_longer_than_blob_is_malformed() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_session_state(h("01 09 04 74 65 73 74"))
    with pytest.raises(RemoteProtocolError):
        parse_session_state(h("01 02 04 74"))  # the inner string overruns its entity


def test_state_change_zero() -> None:
    assert parse_session_state(h("02 01 30")) == (StateChange(False),)


def test_long_blob_lengths_use_fc() -> None:
    text = "x" * 300
    wire = build_session_state([Schema(text)])
    assert wire[:7] == h("01 fc 2f 01 fc 2c 01")
    assert parse_session_state(wire) == (Schema(text),)


def test_non_utf8_value_round_trips() -> None:
    wire = h("00 09 04") + b"name" + h("03") + b"\xe9t\xe9"
    blocks = parse_session_state(wire)
    assert build_session_state(blocks) == wire


# --- gtid_info ----------------------------------------------------------------------------

STATE = ServerStatus.SESSION_STATE_CHANGED


def ok_with(*blocks: SessionStateChange) -> OkPacket:
    return OkPacket(status=STATE, session_state=blocks)


def test_gtid_info_mysql() -> None:
    text = "00000000-1111-0000-1111-000000000000:3-4,\n11111111-1111-0000-1111-000000000000:1"
    info = gtid_info(ok_with(Schema("test"), Gtids(text), TransactionState("T_______")))
    assert isinstance(info, GtidSet)
    assert info == GtidSet.from_intervals(
        {
            ("00000000-1111-0000-1111-000000000000", None): [(3, 4)],
            ("11111111-1111-0000-1111-000000000000", None): [(1, 1)],
        }
    )


def test_gtid_info_mariadb_last_gtid() -> None:
    # Reference §1.7 wire form: 00 L 09 "last_gtid" 08 "0-1-1000".
    wire = h("00 13 09") + b"last_gtid" + h("08") + b"0-1-1000"
    blocks = parse_session_state(wire)
    assert blocks == (SystemVariable("last_gtid", "0-1-1000"),)
    info = gtid_info(ok_with(*blocks))
    assert isinstance(info, MariaPosition)
    assert info == MariaPosition.parse("0-1-1000")


def test_gtid_info_absent_or_empty() -> None:
    assert gtid_info(OkPacket()) is None
    assert gtid_info(ok_with(Schema("x"), SystemVariable("autocommit", "ON"))) is None
    assert gtid_info(ok_with(SystemVariable("last_gtid", ""))) is None
    assert gtid_info(ok_with(Gtids(""))) is None


def test_gtid_info_malformed_is_remote_error() -> None:
    with pytest.raises(RemoteProtocolError):
        gtid_info(ok_with(Gtids("not a gtid set")))
    with pytest.raises(RemoteProtocolError):
        gtid_info(ok_with(SystemVariable("last_gtid", "zero-one")))


# --- round trips ---------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=40)
blocks = st.one_of(
    st.builds(SystemVariable, text, text),
    st.builds(Schema, text),
    st.builds(StateChange, st.booleans()),
    st.builds(Gtids, text, st.integers(0, 300)),
    st.builds(TransactionCharacteristics, text),
    st.builds(TransactionState, text),
    st.builds(UnknownBlock, st.integers(6, 2**64 - 1), st.binary(max_size=300)),
)


@given(st.lists(blocks, max_size=8))
def test_session_state_round_trip(state: list[SessionStateChange]) -> None:
    assert parse_session_state(build_session_state(state)) == tuple(state)
