"""MariaDB GTIDs and positions.

The accepted syntax follows ``gtid_parser_helper`` / ``gtid_parse_string_to_list`` in MariaDB's
``sql/rpl_gtid.cc`` and the ``my_strtoll10`` they call (``strings/my_strtoll10.c``): blanks
and tabs before each number, an optional ``+``, decimal digits, ``-`` directly after the first two
numbers, ``,`` directly after the third; domain and server id are 32-bit, seq_no 64-bit.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.errors import MalformedGtid, MalformedGtidSet
from consistent.gtid import GtidSet, GtidState, MariaGtid, MariaPosition

U32 = 2**32 - 1
U64 = 2**64 - 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-1-10", (0, 1, 10)),
        ("4294967295-4294967295-18446744073709551615", (U32, U32, U64)),
        ("+1-+2-+3", (1, 2, 3)),
        (" 1-\t2- 3", (1, 2, 3)),
        ("007-008-009", (7, 8, 9)),
    ],
)
def test_maria_gtid_parse(text: str, expected: tuple[int, int, int]) -> None:
    g = MariaGtid.parse(text)
    assert (g.domain, g.server_id, g.seq_no) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0-1",
        "0-1-",
        "0--1-2",
        "-0-1-2",
        "0-1--2",  # my_strtoll10 flags a negative number, which the helper refuses
        "0 -1-2",  # nothing may follow a number but its separator
        "0-1-2 ",
        "0-1-2,",
        "0-1-2,3-4-5",
        "a-1-2",
        "0x1-1-2",
        "4294967296-1-2",
        "0-4294967296-2",
        "0-1-18446744073709551616",
        "0:1:2",
        "\n0-1-2",  # my_strtoll10 skips only blanks and tabs
        "0-\r1-2",
    ],
)
def test_maria_gtid_parse_rejects(text: str) -> None:
    with pytest.raises(MalformedGtid) as info:
        MariaGtid.parse(text)
    assert info.value.args == (1774, f"Malformed GTID specification '{text}'.")


def test_maria_gtid_str_and_validation() -> None:
    assert str(MariaGtid(0, 1, 10)) == "0-1-10"
    for bad in [(-1, 1, 1), (U32 + 1, 1, 1), (0, U32 + 1, 1), (0, 1, U64 + 1), (0, 1, -1)]:
        with pytest.raises(MalformedGtid):
            MariaGtid(*bad)
    with pytest.raises(MalformedGtid):
        MariaGtid(0, 1, True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("0-1-10", "0-1-10"),
        ("1-2-5,0-1-10", "0-1-10,1-2-5"),
        ("0-1-10, 1-2-5", "0-1-10,1-2-5"),
        ("10-1-1,2-1-1,1-1-1", "1-1-1,2-1-1,10-1-1"),
        ("0-1-0", "0-1-0"),
    ],
)
def test_position_parse_and_format(text: str, expected: str) -> None:
    assert str(MariaPosition.parse(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        " ",
        ",",
        "0-1-10,",
        ",0-1-10",
        "0-1-10,,1-2-5",
        "0-1-10 ,1-2-5",
        "0-1-10;1-2-5",
        "0-1-10,0-2-11",  # two GTIDs in one domain (MariaDB: ER_DUPLICATE_GTID_DOMAIN)
        "0-1",
        "x",
        "4294967296-1-1",
        "0-1-18446744073709551616",
        "0-1-1,\n1-1-1",
    ],
)
def test_position_parse_rejects(text: str) -> None:
    with pytest.raises(MalformedGtidSet) as info:
        MariaPosition.parse(text)
    assert info.value.args == (1772, f"Malformed GTID set specification '{text}'.")


def test_position_accessors() -> None:
    pos = MariaPosition.parse("3-9-7,0-1-10")
    assert pos.gtids() == (MariaGtid(0, 1, 10), MariaGtid(3, 9, 7))
    assert pos.domains == (0, 3)
    assert pos.get(3) == MariaGtid(3, 9, 7)
    assert pos.get(1) is None
    assert list(pos) == [MariaGtid(0, 1, 10), MariaGtid(3, 9, 7)]
    assert len(pos) == 2
    assert pos
    assert not MariaPosition()
    assert MariaPosition().is_empty()
    assert not pos.is_empty()


def test_position_constructor_rejects_duplicate_domain() -> None:
    with pytest.raises(MalformedGtidSet):
        MariaPosition([MariaGtid(0, 1, 1), MariaGtid(0, 2, 2)])


@pytest.mark.parametrize(
    ("mine", "theirs", "covers"),
    [
        ("0-1-10", "0-1-10", True),
        ("0-1-10", "0-1-9", True),
        ("0-1-10", "0-1-11", False),
        ("0-1-10", "0-2-5", True),  # server ids do not matter
        ("0-1-10", "", True),
        ("", "0-1-1", False),
        ("0-1-10", "1-1-1", False),  # a domain we have never seen
        ("0-1-10,1-1-5", "1-1-5", True),
        ("0-1-10,1-1-5", "0-1-3,1-1-6", False),
    ],
)
def test_covers(mine: str, theirs: str, covers: bool) -> None:
    assert MariaPosition.parse(mine).covers(MariaPosition.parse(theirs)) is covers


@pytest.mark.parametrize(
    ("a", "b", "merged"),
    [
        ("0-1-10", "0-1-5", "0-1-10"),
        ("0-1-5", "0-2-10", "0-2-10"),
        ("0-1-10,2-1-1", "1-1-3", "0-1-10,1-1-3,2-1-1"),
        ("", "0-1-1", "0-1-1"),
        ("0-1-7", "0-2-7", "0-2-7"),  # tie on seq_no: the higher server id, either way round
        ("0-2-7", "0-1-7", "0-2-7"),
    ],
)
def test_merge(a: str, b: str, merged: str) -> None:
    assert str(MariaPosition.parse(a).merge(MariaPosition.parse(b))) == merged


def test_add_and_merge_return_self_when_unchanged() -> None:
    pos = MariaPosition.parse("0-1-10")
    assert pos.add(MariaGtid(0, 1, 9)) is pos
    assert str(pos.add(MariaGtid(0, 1, 11))) == "0-1-11"
    assert str(pos.add(MariaGtid(5, 1, 1))) == "0-1-10,5-1-1"
    assert str(pos) == "0-1-10"


def test_equality_hash_pickle_repr() -> None:
    a = MariaPosition.parse("1-2-5,0-1-10")
    b = MariaPosition.parse("0-1-10,1-2-5")
    assert a == b
    assert hash(a) == hash(b)
    assert a != MariaPosition.parse("0-1-10")
    assert a != "0-1-10,1-2-5"
    assert pickle.loads(pickle.dumps(a)) == a
    assert repr(a) == "MariaPosition.parse('0-1-10,1-2-5')"


def test_gtid_state_alias_covers_both_flavours() -> None:
    states: list[GtidState] = [GtidSet(), MariaPosition()]
    assert [type(s).__name__ for s in states] == ["GtidSet", "MariaPosition"]


# --------------------------------------------------------------------------------------------
# Properties, against a naive model: a dict domain -> (seq_no, server_id).
# --------------------------------------------------------------------------------------------

gtids = st.builds(
    MariaGtid,
    st.integers(0, 4),
    st.integers(0, U32),
    st.one_of(st.integers(0, 20), st.integers(0, U64)),
)
positions = st.lists(gtids, max_size=5, unique_by=lambda g: g.domain).map(MariaPosition)


def naive(pos: MariaPosition) -> dict[int, tuple[int, int]]:
    return {g.domain: (g.seq_no, g.server_id) for g in pos}


@settings(deadline=None)
@given(positions)
def test_position_round_trip(pos: MariaPosition) -> None:
    assert MariaPosition.parse(str(pos)) == pos


@settings(deadline=None)
@given(positions, positions)
def test_merge_matches_model_and_commutes(a: MariaPosition, b: MariaPosition) -> None:
    expected = dict(naive(a))
    for domain, value in naive(b).items():
        expected[domain] = max(expected.get(domain, value), value)
    assert naive(a.merge(b)) == expected
    assert a.merge(b) == b.merge(a)


@settings(deadline=None)
@given(positions, positions, positions)
def test_covers_laws(a: MariaPosition, b: MariaPosition, c: MariaPosition) -> None:
    assert a.covers(a)
    merged = a.merge(b)
    assert merged.covers(a)
    assert merged.covers(b)
    if a.covers(b) and b.covers(c):
        assert a.covers(c)
    expected = all(d in naive(a) and naive(a)[d][0] >= s for d, (s, _) in naive(b).items())
    assert a.covers(b) is expected
