"""The one GTID extractor: the fast scan of an OK packet's tail agrees with the full parser.

Tails are built with ``consistent.protocol``'s own builders (``build_session_state``,
``pack_lenenc_bytes``), with values long enough at times to need multi-byte lengths, so both
the indexing fast path and the parser path are exercised.  Blocks repeat and interleave freely:
mysqld never repeats a GTIDS block, but the answer must not depend on which reader sees it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.errors import RemoteProtocolError
from consistent.flavors import MARIADB, MYSQL
from consistent.gtid import GtidSet, MariaPosition
from consistent.protocol.constants import ServerStatus
from consistent.protocol.lenenc import Reader, pack_lenenc_bytes
from consistent.protocol.responses import OkPacket
from consistent.protocol.session_state import (
    ANY_GTIDS,
    MARIADB_GTIDS,
    MYSQL_GTIDS,
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
    gtid_text,
    ok_tail_gtid_text,
    parse_session_state,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
SOURCES = (ANY_GTIDS, MYSQL_GTIDS, MARIADB_GTIDS)

names = st.sampled_from(["autocommit", "last_gtid", "LAST_GTID", "time_zone", "x" * 300])
values = st.one_of(
    st.sampled_from(["0-1-5", "1-2-300", "", "0-1-9,1-1-2", "ON", " 0-3-4 "]),
    st.builds(lambda d, s: f"{d}-1-{s}", st.integers(0, 3), st.integers(1, 10**6)),
    st.text(alphabet="0123456789-", max_size=400),
)
gtid_texts = st.one_of(
    st.sampled_from([f"{A}:1-5", f"{A}:7", f"{B}:3", ""]),
    st.builds(lambda n: f"{A}:1-{n}", st.integers(1, 10**6)),
    st.just(",\n".join(f"{i:08x}-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-3" for i in range(12))),
)
block = st.one_of(
    st.builds(SystemVariable, names, values),
    st.builds(Schema, st.sampled_from(["test", "s" * 260])),
    st.just(StateChange(True)),
    st.builds(Gtids, gtid_texts),
    st.just(TransactionState("T_R_____")),
    st.builds(TransactionCharacteristics, st.sampled_from(["", "START TRANSACTION;"])),
    st.builds(UnknownBlock, st.integers(6, 300), st.binary(max_size=300)),
)
blocks = st.lists(block, max_size=6)
infos = st.one_of(st.just(b""), st.binary(max_size=20), st.binary(min_size=251, max_size=300))


def tail_of(info: bytes, state: list[SessionStateChange]) -> bytes:
    return pack_lenenc_bytes(info) + pack_lenenc_bytes(build_session_state(state))


def parser_answer(tail: bytes, source: int) -> str | None:
    """What the full parser says: the tail's blocks parsed, then :func:`gtid_text`."""
    try:
        reader = Reader(tail)
        reader.lenenc_bytes()
        if reader.at_end():
            return None
        return gtid_text(parse_session_state(reader.lenenc_view()), source)
    except RemoteProtocolError:
        return "error"


def scan_answer(tail: bytes, source: int) -> str | None:
    try:
        return ok_tail_gtid_text(tail, source)
    except RemoteProtocolError:
        return "error"


@settings(max_examples=400)
@given(infos, blocks)
def test_property_the_fast_scan_agrees_with_the_parser(
    info: bytes, state: list[SessionStateChange]
) -> None:
    tail = tail_of(info, state)
    for source in SOURCES:
        assert scan_answer(tail, source) == parser_answer(tail, source)


@settings(max_examples=300)
@given(infos, blocks, st.data())
def test_property_a_truncated_tail_is_an_error_in_both_or_read_alike(
    info: bytes, state: list[SessionStateChange], data: st.DataObject
) -> None:
    tail = tail_of(info, state)
    cut = data.draw(st.integers(1, max(1, len(tail) - 1)))
    short = tail[:cut]
    for source in SOURCES:
        assert scan_answer(short, source) == parser_answer(short, source)


@given(blocks, blocks)
def test_property_repeated_blocks_count_together(
    first: list[SessionStateChange], second: list[SessionStateChange]
) -> None:
    # One packet carrying both lists reports what two packets in a row report, merged.
    both = gtid_text([*first, *second], MYSQL_GTIDS)
    one, two = MYSQL.gtids_from_session_state(first), MYSQL.gtids_from_session_state(second)
    expected = one if two is None else two if one is None else one | two
    assert (None if both is None else GtidSet.parse(both)) == expected
    try:
        merged = MARIADB.gtids_from_session_state([*first, *second])
        one_m = MARIADB.gtids_from_session_state(first)
        two_m = MARIADB.gtids_from_session_state(second)
    except RemoteProtocolError:
        return  # a value that is not a position: the error case is tested below
    if one_m is None or two_m is None:
        assert merged == (one_m if two_m is None else two_m)
    else:
        assert merged == one_m.merge(two_m)


def test_a_repeated_gtids_block_is_a_union_in_every_reader() -> None:
    state = [Gtids(f"{A}:1-3"), Schema("db"), Gtids(""), Gtids(f"{B}:5,\n{A}:7")]
    tail = tail_of(b"", state)
    expected = GtidSet.parse(f"{A}:1-3:7,{B}:5")
    assert GtidSet.parse(ok_tail_gtid_text(tail) or "") == expected
    ok = OkPacket(status=ServerStatus.SESSION_STATE_CHANGED, session_state=tuple(state))
    assert gtid_info(ok) == expected
    assert MYSQL.gtids_from_ok(ok) == expected


def test_a_repeated_last_gtid_merges_positions_per_domain() -> None:
    state = [
        SystemVariable("last_gtid", "0-1-9"),
        SystemVariable("autocommit", "ON"),
        SystemVariable("LAST_GTID", "0-2-4"),
        SystemVariable("last_gtid", "1-1-2"),
    ]
    tail = tail_of(b"", state)
    assert ok_tail_gtid_text(tail) == "0-1-9,1-1-2"
    ok = OkPacket(status=ServerStatus.SESSION_STATE_CHANGED, session_state=tuple(state))
    assert gtid_info(ok) == MariaPosition.parse("0-1-9,1-1-2")
    assert MARIADB.gtids_from_ok(ok) == MariaPosition.parse("0-1-9,1-1-2")


def test_the_sources_pick_their_kind_and_any_prefers_mysql() -> None:
    state = [SystemVariable("last_gtid", "0-1-5"), Gtids(""), Gtids(f"{A}:2")]
    tail = tail_of(b"info", state)
    assert ok_tail_gtid_text(tail, MYSQL_GTIDS) == f"{A}:2"
    assert ok_tail_gtid_text(tail, MARIADB_GTIDS) == "0-1-5"
    assert ok_tail_gtid_text(tail, ANY_GTIDS) == f"{A}:2"
    assert ok_tail_gtid_text(tail_of(b"", state[:2]), ANY_GTIDS) == "0-1-5"


@pytest.mark.parametrize("cut", [1, 3, 10, 20])
def test_truncated_data_is_a_clear_error(cut: int) -> None:
    tail = tail_of(b"", [Schema("db"), Gtids(f"{A}:1-5")])
    short = tail[:-cut]
    with pytest.raises(RemoteProtocolError, match=r"runs past|truncated"):
        ok_tail_gtid_text(short)


def test_text_that_is_not_ascii_is_an_error_in_both_readers() -> None:
    state = [Gtids(f"{A}:1\u00e9")]
    with pytest.raises(RemoteProtocolError, match="ASCII"):
        ok_tail_gtid_text(tail_of(b"", state))
    with pytest.raises(RemoteProtocolError, match="ASCII"):
        gtid_text(state)
