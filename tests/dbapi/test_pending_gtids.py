"""GTID texts noted from OK packets and drained into the policy later."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.dbapi.pending import MYSQL_BATCH, PendingGtids, parse_tracked
from consistent.errors import MalformedGtidSet, RemoteProtocolError
from consistent.gtid import GtidSet, MariaPosition
from consistent.protocol.lenenc import pack_lenenc_bytes
from consistent.protocol.session_state import Gtids, SystemVariable, build_session_state

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def test_mysql_texts_are_all_kept_and_parsed_together() -> None:
    pending = PendingGtids("mysql")
    assert not pending
    pending.add("primary", f"{A}:1")
    pending.add("primary", f"{A}:3")
    pending.add("r1:3306", f"{A}:1-9")
    assert pending
    assert dict(pending.drain()) == {
        "primary": GtidSet.parse(f"{A}:1:3"),
        "r1:3306": GtidSet.parse(f"{A}:1-9"),
    }
    assert not pending
    assert list(pending.drain()) == []


def test_mariadb_keeps_the_latest_gtid_per_domain() -> None:
    pending = PendingGtids("mariadb")
    for text in ("0-1-5", "0-1-6", "1-1-2", "0-1-7"):
        pending.add("primary", text)
    assert dict(pending.drain()) == {"primary": MariaPosition.parse("0-1-7,1-1-2")}


def test_a_full_batch_asks_to_be_drained() -> None:
    pending = PendingGtids("mysql")
    asks = [pending.add("primary", f"{A}:{n}") for n in range(1, MYSQL_BATCH + 1)]
    assert asks == [False] * (MYSQL_BATCH - 1) + [True]
    [(_, state)] = pending.drain()
    assert state == GtidSet.parse(f"{A}:1-{MYSQL_BATCH}")


def test_text_that_does_not_parse_is_the_servers_fault() -> None:
    pending = PendingGtids("mariadb")
    pending.add("primary", "zz")
    with pytest.raises(RemoteProtocolError, match="do not parse"):
        list(pending.drain())


def _tail(block: Gtids | SystemVariable) -> bytes:
    return pack_lenenc_bytes(b"") + pack_lenenc_bytes(build_session_state([block]))


def test_ok_tails_are_decoded_when_drained() -> None:
    pending = PendingGtids("mysql")
    pending.add_tail("primary", _tail(Gtids(f"{A}:1")))
    pending.add_tail("primary", _tail(Gtids(f"{A}:2-3")))
    pending.add_tail("r1:3306", _tail(Gtids(f"{A}:1-9")))
    assert pending
    assert dict(pending.drain()) == {
        "primary": GtidSet.parse(f"{A}:1-3"),
        "r1:3306": GtidSet.parse(f"{A}:1-9"),
    }
    assert not pending


def test_a_full_batch_of_tails_asks_to_be_drained() -> None:
    pending = PendingGtids("mysql")
    asks = [pending.add_tail("primary", _tail(Gtids(f"{A}:{n}"))) for n in range(1, 257)]
    assert asks == [False] * 255 + [True]


def test_a_text_noted_after_tails_supersedes_theirs_on_mariadb() -> None:
    """A session's GTIDs in a domain only grow: the last one noted wins, whichever way."""
    pending = PendingGtids("mariadb")
    pending.add_tail("primary", _tail(SystemVariable("last_gtid", "0-1-5")))
    pending.add("primary", "0-1-6")
    assert dict(pending.drain()) == {"primary": MariaPosition.parse("0-1-6")}
    pending.add("primary", "0-1-7")
    pending.add_tail("primary", _tail(SystemVariable("last_gtid", "0-1-8")))
    assert dict(pending.drain()) == {"primary": MariaPosition.parse("0-1-8")}


def test_a_tail_that_does_not_decode_is_logged_and_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = PendingGtids("mariadb")
    pending.add_tail("primary", b"\x05ab")  # the info runs past the tail's end
    pending.add_tail("primary", _tail(SystemVariable("last_gtid", "0-1-5")))
    with caplog.at_level("WARNING", logger="consistent.dbapi.pending"):
        assert dict(pending.drain()) == {"primary": MariaPosition.parse("0-1-5")}
    assert "undecodable session-state data from primary" in caplog.text


_MARIA_TEXT = st.one_of(
    # well-formed single GTIDs, including numbers at and beyond the 32/64-bit limits
    st.tuples(st.integers(0, 2**33), st.integers(0, 2**33), st.integers(0, 2**65)).map(
        lambda t: f"{t[0]}-{t[1]}-{t[2]}"
    ),
    # near misses: signs, spaces, leading zeros, non-ASCII digits, extra parts
    st.text(alphabet="0123456789-+ ,\t²٣x", max_size=14),
)


@given(_MARIA_TEXT)
def test_the_short_mariadb_path_agrees_with_the_general_parser(text: str) -> None:
    try:
        expected: object = MariaPosition.parse(text.strip())
    except MalformedGtidSet as exc:
        expected = type(exc)
    try:
        got: object = parse_tracked(text, "mariadb")
    except MalformedGtidSet as exc:
        got = type(exc)
    assert got == expected


def test_the_short_mariadb_path_is_taken_for_plain_gtids() -> None:
    assert parse_tracked("0-1-10", "mariadb") == MariaPosition.parse("0-1-10")
    assert parse_tracked("007-1-10", "mariadb") == MariaPosition.parse("7-1-10")
    with pytest.raises(MalformedGtidSet):
        parse_tracked(f"{2**32}-1-10", "mariadb")
    assert parse_tracked(f"{A}:1-3", "mysql") == GtidSet.parse(f"{A}:1-3")
