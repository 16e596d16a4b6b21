"""Table tests for the MySQL flavour of ``consistent.gtid``.

Expected values come from mysqld itself where a capture exists:

* ``UTILS``: ``mysql/mysql-server mysql-test/suite/binlog_gtid/r/binlog_gtid_utils.result``
  (GTID_SUBSET / GTID_SUBTRACT and the stored functions of ``include/gtid_utils.inc``);
* ``ERRORS``: ``mysql/mysql-server mysql-test/suite/binlog_gtid/r/binlog_gtid_errors.result``
  (``SET GTID_NEXT``, reference §3.3);
* ``TAG_T``: ``mysql/mysql-server unittest/gunit/binlogevents/gtid_tag-t.cc`` and
  ``gtids-t.cc`` (``Tag::from_cstring``, ``Tsid::from_cstring``);
* ``BUG116789``: the ``gtid_executed`` a MySQL 9.1 server printed in bugs.mysql.com #116789.

The other rows are derived from reading ``Gtid_set::add_gtid_text`` (reference §3.1) and
glibc ``strtoll``; each says which rule it pins.
"""

from __future__ import annotations

import pickle
import sys

import pytest

from consistent.errors import DataError, MalformedGtid, MalformedGtidSet
from consistent.gtid import (
    MAX_GNO,
    Gtid,
    GtidSet,
    _tag_from_cstring,
    _tsid_from_cstring,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
C = "cccccccc-cccc-cccc-cccc-cccccccccccc"
U1 = "11111111-1111-1111-1111-111111111111"


def P(text: str) -> GtidSet:
    return GtidSet.parse(text)


# --------------------------------------------------------------------------------------------
# §3.1 parser: accepted inputs and the canonical text mysqld prints for them.
# --------------------------------------------------------------------------------------------

PARSE_OK = [
    # empty / whitespace / empty entries
    ("", ""),
    (" \t\n\r\v\f", ""),
    (",,,", ""),
    (f",,{A}:1,,", f"{A}:1"),
    (f"  {A}:1  ", f"{A}:1"),
    (f"{A}:1 , , {B}:2", f"{A}:1,\n{B}:2"),
    (f"{A} : 1 - 3 : 5", f"{A}:1-3:5"),
    (f"{A}:\n1\t-\t3", f"{A}:1-3"),
    # a UUID without intervals is allowed and adds nothing
    (A, ""),
    (f"{A},{B}:1", f"{B}:1"),
    # strtoll base 0: hex, octal, sign
    (f"{A}:0x10", f"{A}:16"),
    (f"{A}:0X1f", f"{A}:31"),
    (f"{A}:010", f"{A}:8"),
    (f"{A}:+5", f"{A}:5"),
    (f"{A}:1-+3", f"{A}:1-3"),
    (f"{A}:1-0x3", f"{A}:1-3"),
    (f"{A}:0x10-020", f"{A}:16"),
    # end < start: ignored, no error
    (f"{A}:5-4", ""),
    (f"{A}:5-3,{B}:1", f"{B}:1"),
    (f"{A}:1-0", ""),
    (f"{A}:3-", ""),  # strtoll converts nothing: end 0 < start
    (f"{A}:3- ,{B}:1", f"{B}:1"),
    (f"{A}:2--0", ""),
    # merging, sorting, case
    (f"{A}:1-3:4-5", f"{A}:1-5"),
    (f"{A}:1-5:3-7", f"{A}:1-7"),
    (f"{A}:3:2:1", f"{A}:1-3"),
    (f"{A}:1,{A}:3", f"{A}:1:3"),
    (f"{B}:1,{A}:1", f"{A}:1,\n{B}:1"),
    (f"{A.upper()}:7", f"{A}:7"),
    ("3E11FA47-71CA-11E1-9E33-C80AA9429562:23", "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"),
    # GNO range
    (f"{A}:1-9223372036854775806", f"{A}:1-9223372036854775806"),
    (f"{A}:9223372036854775806", f"{A}:9223372036854775806"),
    (f"{A}:1-0x7ffffffffffffffe", f"{A}:1-9223372036854775806"),
    # tags (8.3+): lower-cased, untagged first, then tags in byte order
    (f"{A}:TAG:1-3", f"{A}:tag:1-3"),
    (f"{A}:tag", ""),
    (f"{A}:1:tag:2:3", f"{A}:1:tag:2-3"),
    (f"{A} :  tag  : 1", f"{A}:tag:1"),
    (f"{A}:t1:1,{A}:1", f"{A}:1:t1:1"),
    (f"{A}:b:1:a:2,{A}:3", f"{A}:3:a:2:b:1"),
    (f"{A}:_:1", f"{A}:_:1"),
    (f"{A}:{'x' * 32}:1", f"{A}:{'x' * 32}:1"),
    (f"{A}:t:1:2:u:3", f"{A}:t:1-2:u:3"),
    (f"{A}:tag:1,{B}:1", f"{A}:tag:1,\n{B}:1"),
    (f"{A}: tag ,{B}:1", f"{B}:1"),  # a tag may end at a comma
    (f"{A}:1: tag\t, {B}:1", f"{A}:1,\n{B}:1"),
    (f"{A} :tag,{B}:1", f"{B}:1"),
    # Tag::from_cstring consumes whitespace before a valid end, so a blank item is an empty tag
    # (the untagged source): mysqld 8.4 accepts these, 8.0 did not.
    (f"{A}: ", ""),
    (f"{A}:1: ", f"{A}:1"),
    (f"{A}:t:1: :2", f"{A}:2:t:1"),
    # the server parses a C string: text after a NUL is not seen
    (f"{A}:1\x00garbage", f"{A}:1"),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_OK)
def test_parse_accepts_what_mysqld_accepts(text: str, expected: str) -> None:
    assert str(GtidSet.parse(text)) == expected


def test_parse_tagged_set_as_mysql_91_prints_it() -> None:
    # BUG116789: SET GLOBAL gtid_purged to this text, then gtid_executed shows the second one.
    text = (
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_1:1-3:15-21, \n"
        "    3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_2:8-52"
    )
    expected = "3e11fa47-71ca-11e1-9e33-c80aa9429562:domain_1:1-3:15-21:domain_2:8-52"
    assert str(GtidSet.parse(text)) == expected


def test_tagged_grouping_keeps_untagged_then_sorted_tags() -> None:
    # The grouping go-mysql documents for PREVIOUS_GTIDS events of a tagged server
    # (go-mysql-org/go-mysql commit b2d723a), printed single-line.
    u1 = "896e7882-18fe-11ef-ab88-22222d34d411"
    u2 = "896e7882-18fe-11ef-ab88-22222d34d412"
    text = f"{u1}:1-4:aaaa:1:abc:1-3:bbbbb:1:bbbbbb:1:x:1,{u2}:1-2"
    shuffled = f"{u2}:1-2,{u1}:x:1,{u1}:bbbbbb:1:bbbbb:1:abc:1-3:aaaa:1,{u1}:1-4"
    assert GtidSet.parse(shuffled).to_text() == text
    assert str(GtidSet.parse(shuffled)) == text.replace(",", ",\n")


PARSE_ERRORS = [
    # UTILS: min / max values
    (f"{A}:0-1", f"{A}:0-1"),
    (f"{A}:0", f"{A}:0"),
    (f"{A}:1-9223372036854775807", f"{A}:1-9223372036854775807"),
    # missing or malformed numbers
    (f"{A}:", f"{A}:"),
    (f"{A}::1", f"{A}::1"),
    (f"{A}:1:", f"{A}:1:"),
    (f"{A}:-1", f"{A}:-1"),
    (f"{A}:1--2", f"{A}:1--2"),
    (f"{A}:1-x", f"{A}:1-x"),
    (f"{A}:x-1", f"{A}:x-1"),
    (f"{A}:1 2", f"{A}:1 2"),
    (f"{A}:08", f"{A}:08"),  # octal: converts "0", which is not a GNO
    (f"{A}:1-08", f"{A}:1-08"),  # octal: end "0", then "8" is garbage
    (f"{A}:0x", f"{A}:0x"),
    (f"{A}:9223372036854775807", f"{A}:9223372036854775807"),  # LLONG_MAX
    (f"{A}:9223372036854775808", f"{A}:9223372036854775808"),  # overflow saturates
    (f"{A}:0x7fffffffffffffff", f"{A}:0x7fffffffffffffff"),
    (f"{A}:-0", f"{A}:-0"),
    (f"{A}:1.5", f"{A}:1.5"),
    (f"{A}:\uff11", f"{A}:\uff11"),  # a non-ASCII digit
    (f"{A}:\u00a01", f"{A}:\u00a01"),  # a non-ASCII space
    # separators
    (f"{A}:1;{B}:2", f"{A}:1;{B}:2"),
    (f"{A}:1 {B}:2", f"{A}:1 {B}:2"),
    (f"{A}:1,x", f"{A}:1,x"),
    (f"+{A}:1", f"+{A}:1"),
    # UUIDs: exactly 36 hyphenated hex characters
    ("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa:1", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa:1"),
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1"),
    ("{" + A + "}:1", "{" + A + "}:1"),
    ("gaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1", "gaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1"),
    ("aaaaaaaa_aaaa-aaaa-aaaa-aaaaaaaaaaaa:1", "aaaaaaaa_aaaa-aaaa-aaaa-aaaaaaaaaaaa:1"),
    (f"{A}x:1", f"{A}x:1"),
    (f"{A}-1", f"{A}-1"),
    # tags
    (f"{A}:{'x' * 33}:1", f"{A}:{'x' * 33}:1"),
    (f"{A}:1tag:1", f"{A}:1tag:1"),
    (f"{A}:ta-g:1", f"{A}:ta-g:1"),
    (f"{A}:tag 1", f"{A}:tag 1"),
    (f"{A}:ta g:1", f"{A}:ta g:1"),
    # the message shows the text from its first non-blank character (add_gtid_text: text = s)
    (f"  \n{A}:0", f"{A}:0"),
]


@pytest.mark.parametrize(("text", "shown"), PARSE_ERRORS)
def test_parse_rejects_what_mysqld_rejects(text: str, shown: str) -> None:
    with pytest.raises(MalformedGtidSet) as info:
        GtidSet.parse(text)
    assert info.value.args == (1772, f"Malformed GTID set specification '{shown}'.")
    assert info.value.errno == 1772
    assert info.value.sqlstate == "HY000"


def test_error_message_is_cut_at_200_characters() -> None:
    text = f"{A}:1," * 40 + "x"
    with pytest.raises(MalformedGtidSet) as info:
        GtidSet.parse(text)
    assert info.value.msg == f"Malformed GTID set specification '{text[:200]}'."


def test_utils_result_golden_error_message() -> None:
    # UTILS: SELECT GTID_SUBSET(CONCAT('aaaaaaaa-...:1-', (1 << 63) - 1), '')
    with pytest.raises(MalformedGtidSet) as info:
        GtidSet.parse(f"{A}:1-{(1 << 63) - 1}")
    assert str(info.value.msg) == (
        "Malformed GTID set specification "
        "'aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-9223372036854775807'."
    )


def test_parse_with_plus_reports_the_prefix() -> None:
    parsed, plus = GtidSet.parse_with_plus(f"  + {A}:1-2")
    assert plus is True
    assert str(parsed) == f"{A}:1-2"
    parsed, plus = GtidSet.parse_with_plus(f"{A}:3")
    assert plus is False
    assert str(parsed) == f"{A}:3"
    with pytest.raises(MalformedGtidSet):
        GtidSet.parse_with_plus(f"++{A}:1")


# --------------------------------------------------------------------------------------------
# mysqld's own tokenisers, with their unit tests' cases (TAG_T).
# --------------------------------------------------------------------------------------------

TAGS_VALID = [
    ("a2345678901234567890123456789012", "a2345678901234567890123456789012"),
    ("aDmiN123", "admin123"),
    ("aDmiN123_", "admin123_"),
    ("aDmiN123                           ", "admin123"),
    ("    aDmiN123", "admin123"),
    ("", ""),
    ("_aDmiN123", "_admin123"),
]
TAGS_INVALID = [
    "12345678901234567890123456789012",
    "0DmiN123",
    "a23456789012345678901234567890120",
    "aDmiN123.",
    "aDmiN1-23",
    "aDmiN123                        a",
    "    aDmiN 123 ",
]


@pytest.mark.parametrize(("text", "tag"), TAGS_VALID)
def test_tag_from_cstring_valid(text: str, tag: str) -> None:
    assert _tag_from_cstring(text, 0) == (len(text), tag)


@pytest.mark.parametrize("text", TAGS_INVALID)
def test_tag_from_cstring_invalid(text: str) -> None:
    assert _tag_from_cstring(text, 0)[0] == 0


def test_tsid_from_cstring_consumes_tag_and_whitespace() -> None:
    # TAG_T (GtidsTest.AddInterval): from_cstring("<uuid>  :   tag") == TEXT_LENGTH + 2 + 1 + 3 + 3
    text = f"{A}  :   tag"
    assert _tsid_from_cstring(text, 0) == (36 + 2 + 1 + 3 + 3, f"{A}:tag")


# --------------------------------------------------------------------------------------------
# §3.2 formatter.
# --------------------------------------------------------------------------------------------


def test_format_empty_set_is_empty_string() -> None:
    assert str(GtidSet()) == ""
    assert GtidSet().to_text() == ""


def test_format_separates_uuids_with_comma_newline() -> None:
    # UTILS: GTID_SYMMETRIC_DIFFERENCE(A:1-3, B:1-3) prints "A:1-3,\nB:1-3"
    a, b = P(f"{A}:1-3"), P(f"{B}:1-3")
    assert str((a - b) | (b - a)) == f"{A}:1-3,\n{B}:1-3"


def test_to_text_is_single_line_with_chosen_separator() -> None:
    s = P(f"{C}:5,{A}:1-3:7,{B}:2")
    assert s.to_text() == f"{A}:1-3:7,{B}:2,{C}:5"
    assert s.to_text(", ") == f"{A}:1-3:7, {B}:2, {C}:5"
    assert str(s) == f"{A}:1-3:7,\n{B}:2,\n{C}:5"


def test_format_single_element_intervals_print_one_number() -> None:
    assert str(P(f"{A}:5-5:7-8")) == f"{A}:5:7-8"


# --------------------------------------------------------------------------------------------
# §3.3 functions, with the results mysqld printed (UTILS).
# --------------------------------------------------------------------------------------------

MAX_SET = f"{A}:1-{(1 << 63) - 2}"


def subtract_uuid(g: str, u: str) -> GtidSet:
    # The result file removes the whole range (MAX_SET minus its UUID is empty); an older
    # gtid_utils.inc subtracted only 1 << 62.
    return P(g) - P(f"{u}:1-{(1 << 63) - 2}")


def intersection_with_uuid(g: str, u: str) -> GtidSet:
    return P(g) - subtract_uuid(g, u)


def test_gtid_subset_max_values() -> None:
    assert (P(MAX_SET) <= P("")) is False
    assert (P("") <= P(MAX_SET)) is True


def test_gtid_subtract_canonicalises() -> None:
    assert str(P(MAX_SET) - P("")) == "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa:1-9223372036854775806"
    assert str(P("") - P(MAX_SET)) == ""


@pytest.mark.parametrize(
    ("g1", "g2", "equal"),
    [
        (f"{A}:1,{B}:3:2:1", f"{B}:1-3,{A}:1", True),
        (f"{A}:1,{B}:3:2:1", f"{B}:1:3,{A}:1", False),
    ],
)
def test_gtid_is_equal(g1: str, g2: str, equal: bool) -> None:
    assert (P(g1) == P(g2)) is equal
    assert (P(g1) <= P(g2) and P(g2) <= P(g1)) is equal


@pytest.mark.parametrize(
    ("g1", "g2", "disjoint"),
    [
        (f"{A}:2", f"{B}:2,{A}:1:3", True),
        (f"{A}:2", f"{B}:2,{A}:1-3", False),
    ],
)
def test_gtid_is_disjoint(g1: str, g2: str, disjoint: bool) -> None:
    assert P(g1).isdisjoint(P(g2)) is disjoint
    assert (P(g1) <= P(g1) - P(g2)) is disjoint


@pytest.mark.parametrize(
    ("g1", "g2", "total", "expected"),
    [
        (f"{A}:2,{B}:1", f"{A}:1:3", f"{A}:1-3,{B}:1", True),
        (f"{A}:2,{B}:1", f"{A}:1-3", f"{A}:1-3,{B}:1", False),
        (f"{A}:2,{B}:1", f"{A}:1", f"{A}:1-3,{B}:1", False),
    ],
)
def test_gtid_is_disjoint_union(g1: str, g2: str, total: str, expected: bool) -> None:
    a, b, s = P(g1), P(g2), P(total)
    assert (s - a == b and s - b == a) is expected


@pytest.mark.parametrize(
    ("g1", "g2", "expected"),
    [
        (f"{A}:1-3", f"{A}:5-7", ""),
        (f"{A}:1-3:5-7", f"{A}:3-5", f"{A}:3:5"),
        (f"{A}:1-3", f"{A}:1:2:3", f"{A}:1-3"),
        (f"{B}:1-3", f"{A}:1-3", ""),
    ],
)
def test_gtid_intersection(g1: str, g2: str, expected: str) -> None:
    assert str(P(g1) & P(g2)) == expected
    # gtid_utils.inc defines it as GTID_SUBTRACT(g1, GTID_SUBTRACT(g1, g2))
    assert str(P(g1) - (P(g1) - P(g2))) == expected


@pytest.mark.parametrize(
    ("g1", "g2", "expected"),
    [
        (f"{A}:1:3", f"{A}:1:3", f"{A}:1:3"),
        (f"{A}:1-3", f"{A}:1:3", f"{A}:1-3"),
        (f"{A}:1:3", f"{A}:2:4", f"{A}:1-4"),
    ],
)
def test_gtid_union(g1: str, g2: str, expected: str) -> None:
    assert str(P(g1) | P(g2)) == expected
    # gtid_utils.inc defines it as GTID_SUBTRACT(CONCAT(g1, ',', g2), '')
    assert str(P(f"{g1},{g2}")) == expected


@pytest.mark.parametrize(
    ("g1", "g2", "expected"),
    [
        (f"{A}:1-3", f"{A}:3-5", f"{A}:1-2:4-5"),
        (f"{A}:1-3", f"{A}:4-5", f"{A}:1-5"),
        (f"{A}:1-3", f"{B}:1-3", f"{A}:1-3,\n{B}:1-3"),
    ],
)
def test_gtid_symmetric_difference(g1: str, g2: str, expected: str) -> None:
    a, b = P(g1), P(g2)
    assert str((a - b) | (b - a)) == expected


@pytest.mark.parametrize(
    ("g", "u", "expected"),
    [
        (f"{A}:1-3,{B}:1-3,{C}:1-3", B, f"{A}:1-3,\n{C}:1-3"),
        (f"{A}:1-3,{C}:1-3", B, f"{A}:1-3,\n{C}:1-3"),
        (f"{B}:1-3", B, ""),
        (MAX_SET, A, ""),
    ],
)
def test_gtid_subtract_uuid(g: str, u: str, expected: str) -> None:
    assert str(subtract_uuid(g, u)) == expected


@pytest.mark.parametrize(
    ("g", "u", "expected"),
    [
        (f"{A}:1-3,{B}:1-3,{C}:1-3", B, f"{B}:1-3"),
        (f"{A}:1-3,{C}:1-3", B, ""),
        (f"{B}:1-3", B, f"{B}:1-3"),
        (MAX_SET, A, f"{A}:1-9223372036854775806"),
    ],
)
def test_gtid_intersection_with_uuid(g: str, u: str, expected: str) -> None:
    assert str(intersection_with_uuid(g, u)) == expected


@pytest.mark.parametrize(
    ("g", "count"),
    [
        ("", 0),
        (f"{A}:1", 1),
        (f"{A}:1-3", 3),
        (f"{A}:1-3:4-5", 5),
        (f"{A}:1-3:5-5", 4),
        (f"{A}:1-3:5-4", 3),
        (f"{A}:1-3:5-4,{B}:1:3,", 5),
    ],
)
def test_gtid_count(g: str, count: int) -> None:
    assert len(P(g)) == count
    assert P(g).count() == count


@pytest.mark.parametrize(
    ("g", "u", "expected"),
    [
        (f"{B}:1", A, 1),
        ("", A, 1),
        (f"{A}:1", A, 2),
        (f"{A}:2", A, 1),
        (f"{A}:1-3", A, 4),
        (f"{A}:5:1-3", A, 4),
        (f"{A}:1-3,{U1}:1", A, 4),
        (f"{A}:2-3,{U1}:1", A, 1),
    ],
)
def test_gtid_next_generated(g: str, u: str, expected: int) -> None:
    assert P(g).next_free_gno(u) == expected


def generate(executed: GtidSet, uuid: str, count: int) -> GtidSet:
    """GTID_NEXT_GENERATED_MULTIPLE of gtid_utils.inc: assign ``count`` GNOs one by one."""
    generated = GtidSet()
    for _ in range(count):
        gtid = Gtid(uuid, executed.next_free_gno(uuid))
        executed = executed.add(gtid)
        generated = generated.add(gtid)
    return generated


@pytest.mark.parametrize(
    ("g", "u", "n", "expected"),
    [
        (f"{A}:1", A, 0, ""),
        (f"{B}:1", A, 4, f"{A}:1-4"),
        ("", A, 4, f"{A}:1-4"),
        (f"{A}:2:4:6:8:10-11", A, 10, f"{A}:1:3:5:7:9:12-16"),
        (f"{A}:1:3:5:7:9-11", A, 10, f"{A}:2:4:6:8:12-17"),
    ],
)
def test_gtid_next_generated_multiple(g: str, u: str, n: int, expected: str) -> None:
    assert str(generate(P(g), u, n)) == expected


def test_next_free_gno_for_a_tag_ignores_untagged_gnos() -> None:
    s = P(f"{A}:1-5:tag:1-2")
    assert s.next_free_gno(A) == 6
    assert s.next_free_gno(A, "tag") == 3
    assert s.next_free_gno(A, "other") == 1


def test_next_free_gno_exhausted_is_error_1775() -> None:
    with pytest.raises(DataError) as info:
        P(MAX_SET).next_free_gno(A)
    assert info.value.errno == 1775
    assert info.value.sqlstate == "HY000"
    assert P(f"{A}:2-{MAX_GNO}").next_free_gno(A) == 1


# --------------------------------------------------------------------------------------------
# Single GTIDs (§3.3, ERRORS).
# --------------------------------------------------------------------------------------------

GTID_OK = [
    (f"{A}:10", f"{A}:10"),
    (f"\n    {A} \t : \t 10\n    ", f"{A}:10"),
    (f"{A}:0x10", f"{A}:16"),
    (f"{A}:010", f"{A}:8"),
    (f"{A.upper()}:1", f"{A}:1"),
    (f"{A}:9223372036854775806", f"{A}:9223372036854775806"),
    (f"{A}:TAG:5", f"{A}:tag:5"),
    (f"{A} : tag : 5", f"{A}:tag:5"),
]

GTID_ERRORS = [
    f"{A}:10#",
    f"{A}:1-10",
    f"{A}:1:3",
    f"{A}:1,{A}:3",
    "10",
    f"{A}:",
    f"{A}:0",
    f"{A}:0x8000000000000000",
    f"{A}:-33",
    f"{A}:66-33",
    f"{A}:33 33",
    f"{A}-33",
    "",
    f"{A}:9223372036854775807",
    f"{A}:tag",
    f"{A}:tag:0",
    f"{A}:1:tag",
    f"{A}:tag,5",
    f"{A}:tag:1:2",
    f"{A}:{'x' * 33}:1",
]


@pytest.mark.parametrize(("text", "expected"), GTID_OK)
def test_gtid_parse_accepts(text: str, expected: str) -> None:
    assert str(Gtid.parse(text)) == expected


@pytest.mark.parametrize("text", GTID_ERRORS)
def test_gtid_parse_rejects_with_1774(text: str) -> None:
    with pytest.raises(MalformedGtid) as info:
        Gtid.parse(text)
    assert info.value.args == (1774, f"Malformed GTID specification '{text}'.")
    assert info.value.sqlstate == "HY000"


def test_gtid_parse_fields() -> None:
    g = Gtid.parse(f"{A}:Tag1:42")
    assert (g.uuid, g.tag, g.gno) == (A, "tag1", 42)
    assert g.source == f"{A}:tag1"


def test_gtid_constructor_canonicalises_and_validates() -> None:
    assert Gtid(A.upper(), 3) == Gtid(A, 3)
    assert Gtid(A, 3, "TaG") == Gtid(A, 3, "tag")
    assert Gtid(A, 3, "").tag is None
    assert str(Gtid(A, 3, "x")) == f"{A}:x:3"
    for bad in [("nope", 1, None), (A, 0, None), (A, MAX_GNO + 1, None), (A, 1, "1x")]:
        with pytest.raises(MalformedGtid):
            Gtid(*bad)
    with pytest.raises(MalformedGtid):
        Gtid(A, True)


# --------------------------------------------------------------------------------------------
# API behaviour.
# --------------------------------------------------------------------------------------------


def test_add_returns_new_set_and_leaves_original() -> None:
    s = P(f"{A}:1:3")
    t = s.add(Gtid(A, 2))
    assert str(t) == f"{A}:1-3"
    assert str(s) == f"{A}:1:3"
    assert s.add(Gtid(A, 3)) is s


@pytest.mark.parametrize(
    ("start", "gno", "expected"),
    [
        (f"{A}:5-7", 4, f"{A}:4-7"),
        (f"{A}:5-7", 8, f"{A}:5-8"),
        (f"{A}:5-7", 9, f"{A}:5-7:9"),
        (f"{A}:5-7", 1, f"{A}:1:5-7"),
        (f"{A}:5-7:9", 8, f"{A}:5-9"),
        (f"{B}:1", 1, f"{A}:1,\n{B}:1"),
        ("", MAX_GNO, f"{A}:{MAX_GNO}"),
    ],
)
def test_add_merges_neighbours(start: str, gno: int, expected: str) -> None:
    assert str(P(start).add(Gtid(A, gno))) == expected


def test_add_tagged() -> None:
    assert str(P(f"{A}:1").add(Gtid(A, 1, "t"))) == f"{A}:1:t:1"


def test_add_interval() -> None:
    s = P(f"{A}:1-3")
    assert str(s.add_interval(A, 5, 9)) == f"{A}:1-3:5-9"
    assert str(s.add_interval(A, 4, 9)) == f"{A}:1-9"
    assert str(s.add_interval(A.upper(), 2, 3, tag="T")) == f"{A}:1-3:t:2-3"
    assert s.add_interval(A, 2, 3) is s
    assert s.add_interval(A, 9, 8) is s
    for args in [(A, 0, 5), (A, 1, MAX_GNO + 1), ("x", 1, 2)]:
        with pytest.raises(MalformedGtidSet):
            s.add_interval(*args)
    with pytest.raises(MalformedGtidSet):
        s.add_interval(A, 1, 2, tag="bad tag")


def test_from_intervals() -> None:
    s = GtidSet.from_intervals(
        {(B, None): [(5, 7), (1, 2), (3, 4)], (A.upper(), "T"): [(9, 9), (4, 3)], (C, None): []}
    )
    assert str(s) == f"{A}:t:9,\n{B}:1-7"
    with pytest.raises(MalformedGtidSet):
        GtidSet.from_intervals({("nope", None): [(1, 2)]})
    with pytest.raises(MalformedGtidSet):
        GtidSet.from_intervals({(A, None): [(0, 2)]})


def test_constructor_from_gtids() -> None:
    s = GtidSet([Gtid(B, 2), Gtid(A, 1), Gtid(B, 1), Gtid(A, 7, "x")])
    assert str(s) == f"{A}:1:x:7,\n{B}:1-2"
    assert GtidSet() == P("")


def test_queries() -> None:
    s = P(f"{B}:1-3:7,{A}:tag:2,{A}:5")
    assert s.uuids() == (A, B)
    assert s.sources() == ((A, None), (A, "tag"), (B, None))
    assert list(s.intervals()) == [
        (A, None, 5, 5),
        (A, "tag", 2, 2),
        (B, None, 1, 3),
        (B, None, 7, 7),
    ]
    assert s.last_gno(B) == 7
    assert s.last_gno(C) == 0
    assert Gtid(B, 2) in s
    assert Gtid(B, 4) not in s
    assert Gtid(A, 2, "tag") in s
    assert Gtid(A, 2) not in s
    assert s.contains(B, 7)
    assert not s.contains(C, 1)
    # lookups accept any case, like the parser
    assert s.contains(B.upper(), 7)
    assert s.contains(A.upper(), 2, "TAG")
    assert s.last_gno(A, "Tag") == 2
    assert s.next_free_gno(B.upper()) == 4
    with pytest.raises(TypeError):
        f"{B}:2" in s  # noqa: B015


def test_truthiness_and_emptiness() -> None:
    assert not GtidSet()
    assert GtidSet().is_empty()
    assert P(f"{A}:1")
    assert not P(f"{A}:1").is_empty()
    assert not P(f"{A}:5-4")


def test_len_of_huge_set_needs_count() -> None:
    s = P(f"{A}:1-{MAX_GNO},{B}:1-{MAX_GNO}")
    assert s.count() == 2 * MAX_GNO
    assert s.count() > sys.maxsize
    with pytest.raises(OverflowError):
        len(s)


def test_comparisons() -> None:
    small, big = P(f"{A}:1-3"), P(f"{A}:1-5,{B}:1")
    assert small <= big
    assert small < big
    assert big >= small
    assert big > small
    assert not big <= small
    same = P(f"{A}:3:1-2")
    assert small <= same
    assert not small < same
    assert small.issubset(big)
    assert big.issuperset(small)
    other = P(f"{A}:1-2:4")
    assert not other <= P(f"{A}:1-3")
    assert not P(f"{C}:1") <= big
    assert (small == f"{A}:1-3") is False


@pytest.mark.parametrize(
    ("small", "big", "expected"),
    [
        (f"{A}:1-4", f"{A}:1-3", False),
        (f"{A}:1-3", f"{A}:1-4", True),
        (f"{A}:2-4", f"{A}:1-4", True),
        (f"{A}:1-4", f"{A}:2-4", False),
        (f"{A}:1-3:5", f"{A}:1-5", True),
        (f"{A}:1-3:6", f"{A}:1-5", False),
        (f"{A}:1:3", f"{A}:1-2:4", False),
        (f"{A}:4", f"{A}:1-2:4", True),
        (f"{A}:3-4", f"{A}:1-2:4-5", False),
        (f"{A}:t:1", f"{A}:1", False),
        (f"{A}:1", f"{A}:1:t:1", True),
        (f"{A}:1,{B}:1", f"{A}:1-9", False),
        ("", "", True),
    ],
)
def test_subset_edges(small: str, big: str, expected: bool) -> None:
    assert (P(small) <= P(big)) is expected


def test_hash_and_equality_ignore_spelling() -> None:
    a = P(f"{B}:3:1-2,{A.upper()}:TAG:7")
    b = P(f"{A}:tag:7,{B}:1-3")
    assert a == b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a != P(f"{B}:1-3")


def test_pickle_and_repr_round_trip() -> None:
    s = P(f"{B}:1-3,{A}:t:7")
    assert pickle.loads(pickle.dumps(s)) == s
    assert repr(s) == f"GtidSet.parse('{A}:t:7,{B}:1-3')"
    assert eval(repr(s), {"GtidSet": GtidSet}) == s


def test_operations_return_an_operand_when_it_is_the_answer() -> None:
    big, small = P(f"{A}:1-9,{B}:1-9"), P(f"{A}:2-3")
    assert big | small is big
    assert small | big is big
    assert big - P(f"{C}:1") is big
    assert big & small is small
    assert small & big is small
    assert str(big & P(f"{A}:2-3,{C}:1")) == f"{A}:2-3"


def test_add_shares_every_other_source() -> None:
    # Adding to one source must not copy the others: the cost stays logarithmic in the number
    # of sources, which run into the thousands after many failovers.
    uuids = [f"{i:08x}-0000-0000-0000-000000000000" for i in range(3000)]
    s = GtidSet.from_intervals({(u, None): [(1, 10), (20, 30)] for u in uuids})
    t = s.add(Gtid(uuids[1234], 15))
    assert t.count() == s.count() + 1
    changed = uuids[1234]
    for u in uuids[::97]:
        if u != changed:
            assert t._map[u] is s._map[u]
