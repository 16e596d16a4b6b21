"""The per-write fast scan of an OK packet's tail agrees with the full codec.

Tails are built with ``consistent.protocol``'s own builders (``build_session_state``,
``pack_lenenc_bytes``), with values long enough at times to need multi-byte lengths, so both
the indexing fast path and the Reader path are exercised."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.dbapi._pymysql import decode_ok_tail, tracked_gtid_text
from consistent.errors import RemoteProtocolError
from consistent.gtid import GtidSet, MariaPosition
from consistent.protocol.lenenc import pack_lenenc_bytes
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    StateChange,
    SystemVariable,
    TransactionState,
    UnknownBlock,
    build_session_state,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"

names = st.sampled_from(["autocommit", "last_gtid", "LAST_GTID", "time_zone", "x" * 300])
values = st.one_of(
    st.sampled_from(["0-1-5", "1-2-300", "", "0-1-9,1-1-2", "ON"]),
    st.text(alphabet="0123456789-", max_size=400),
)
gtid_texts = st.one_of(
    st.sampled_from([f"{A}:1-5", f"{A}:7", ""]),
    st.builds(lambda n: f"{A}:1-{n}", st.integers(1, 10**6)),
    st.just(",\n".join(f"{i:08x}-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-3" for i in range(12))),
)
blocks = st.lists(
    st.one_of(
        st.builds(SystemVariable, names, values),
        st.builds(Schema, st.sampled_from(["test", "s" * 260])),
        st.just(StateChange(True)),
        st.builds(Gtids, gtid_texts),
        st.just(TransactionState("T_R_____")),
        st.builds(UnknownBlock, st.integers(6, 300), st.binary(max_size=300)),
    ),
    max_size=5,
)
infos = st.one_of(st.just(b""), st.binary(max_size=20), st.binary(min_size=251, max_size=300))


def tail_of(info: bytes, state: list[object]) -> bytes:
    return pack_lenenc_bytes(info) + pack_lenenc_bytes(build_session_state(state))  # type: ignore[arg-type]


def codec_answer(tail: bytes) -> str | None:
    """What the full codec says, as text (None when it reports nothing usable)."""
    try:
        decoded = decode_ok_tail(0x4002, tail)
    except RemoteProtocolError:
        return "error"
    if decoded is None or decoded.gtids is None:
        return None
    return decoded.gtids.to_text(",") if hasattr(decoded.gtids, "to_text") else str(decoded.gtids)


def scan_answer(tail: bytes) -> str | None:
    text = tracked_gtid_text(0x4002, tail)
    if text is None:
        return None
    try:
        if ":" in text:
            return GtidSet.parse(text).to_text(",")
        return str(MariaPosition.parse(text))
    except Exception:  # anything the parser refuses counts as an error, as in the codec
        return "error"


@settings(max_examples=400)
@given(infos, blocks)
def test_property_the_fast_scan_agrees_with_the_codec(info: bytes, state: list[object]) -> None:
    tail = tail_of(info, state)
    assert scan_answer(tail) == codec_answer(tail)


@given(infos, blocks, st.data())
def test_property_a_truncated_tail_is_rejected_or_read_alike(
    info: bytes, state: list[object], data: st.DataObject
) -> None:
    tail = tail_of(info, state)
    cut = data.draw(st.integers(1, max(1, len(tail) - 1)))
    short = tail[:cut]
    try:
        fast = tracked_gtid_text(0x4002, short)
    except RemoteProtocolError:
        fast = "error"
    try:
        decoded = decode_ok_tail(0x4002, short)
        slow = "ok"
    except RemoteProtocolError:
        slow = "error"
        decoded = None
    # Both read the same bytes: if the codec accepts the truncated tail, so does the scan.
    if slow == "ok":
        assert fast != "error"
        assert (fast is None) == (decoded is None or decoded.gtids is None)
