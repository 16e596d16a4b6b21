"""Property tests for ``GtidSet``: the set-algebra laws, the text round trip, and agreement with a
naive model (a Python set of ``(uuid, tag, gno)``) that is written here independently of the
interval code under test."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from immutables import Map

from consistent.errors import MalformedGtid, MalformedGtidSet
from consistent.gtid import (
    MAX_GNO,
    Gtid,
    GtidSet,
    _parse_set_fast,
    _parse_set_slow,
    _strtoll,
)

UUIDS = (
    "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
    "0a0b0c0d-1111-2222-3333-444455556666",
    "ffffffff-0000-0000-0000-00000000000f",
)
TAGS: tuple[str | None, ...] = (None, "t", "x1", "_")
SMALL = 40  # GNOs of the naive model stay in 1..SMALL

Model = frozenset[tuple[str, str | None, int]]
Spec = list[tuple[str, str | None, int, int]]  # (uuid, tag, start, end) - end < start is empty

# Applied per test, not as a global profile, so other test modules keep their own settings.
fast = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=50)
thorough = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)


# --------------------------------------------------------------------------------------------
# The naive model.
# --------------------------------------------------------------------------------------------


def model_of(spec: Spec) -> Model:
    return frozenset(
        (uuid, tag, gno) for uuid, tag, start, end in spec for gno in range(start, end + 1)
    )


def model_of_set(s: GtidSet) -> Model:
    out = set()
    for uuid, tag, start, end in s.intervals():
        for gno in range(start, end + 1):
            out.add((uuid, tag, gno))
    return frozenset(out)


def naive_format(model: Iterable[tuple[str, str | None, int]], separator: str = ",\n") -> str:
    """mysqld's format, straight from reference §3.2: UUIDs sorted, untagged GNOs first, then
    each tag in sorted order, runs of consecutive GNOs as ``a-b``."""
    by_uuid: dict[str, dict[str, list[int]]] = {}
    for uuid, tag, gno in model:
        by_uuid.setdefault(uuid, {}).setdefault(tag or "", []).append(gno)
    chunks = []
    for uuid in sorted(by_uuid):
        words = [uuid]
        for tag in sorted(by_uuid[uuid]):
            if tag:
                words.append(tag)
            runs: list[list[int]] = []
            for gno in sorted(by_uuid[uuid][tag]):
                if runs and gno == runs[-1][-1] + 1:
                    runs[-1].append(gno)
                else:
                    runs.append([gno])
            words.extend(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
        chunks.append(":".join(words))
    return separator.join(chunks)


# --------------------------------------------------------------------------------------------
# Strategies.
# --------------------------------------------------------------------------------------------

entries = st.tuples(
    st.sampled_from(UUIDS),
    st.sampled_from(TAGS),
    st.integers(1, SMALL),
    st.integers(0, SMALL),
)
specs = st.lists(entries, max_size=8)

WHITESPACE = st.text(alphabet=" \t\n\r\v\f", max_size=2)


@st.composite
def number_text(draw: st.DrawFn, n: int) -> str:
    """``n`` spelled in one of the ways strtoll(…, 0) reads it."""
    form = draw(st.sampled_from(["dec", "hex", "HEX", "oct", "plus", "ws"]))
    if form == "hex":
        return f"0x{n:x}"
    if form == "HEX":
        return f"0X{n:X}"
    if form == "oct":
        return f"0{n:o}"
    if form == "plus":
        return f"+{n}"
    if form == "ws":
        return draw(WHITESPACE) + str(n)
    return str(n)


@st.composite
def spec_text(draw: st.DrawFn, spec: Spec) -> str:
    """A legal but unusual spelling of ``spec``: any case, blanks, empty entries, any order."""
    parts = []
    for uuid, tag, start, end in draw(st.permutations(spec)):
        ws = [draw(WHITESPACE) for _ in range(6)]
        uuid_text = uuid.upper() if draw(st.booleans()) else uuid
        tag_text = ""
        if tag is not None:
            tag_text = f"{ws[0]}:{ws[1]}{tag.upper() if draw(st.booleans()) else tag}{ws[2]}"
        if start == end and draw(st.booleans()):
            interval = draw(number_text(start))
        else:
            interval = f"{draw(number_text(start))}{ws[3]}-{draw(number_text(end))}"
        parts.append(f"{ws[4]}{uuid_text}{tag_text}{ws[5]}:{interval}{draw(WHITESPACE)}")
        parts.extend("" for _ in range(draw(st.integers(0, 1))))
    return ",".join(parts)


def from_spec(spec: Spec) -> GtidSet:
    grouped: dict[tuple[str, str | None], list[tuple[int, int]]] = {}
    for uuid, tag, start, end in spec:
        grouped.setdefault((uuid, tag), []).append((start, end))
    return GtidSet.from_intervals(grouped)


@st.composite
def sets_with_models(draw: st.DrawFn) -> tuple[GtidSet, Model]:
    spec = draw(specs)
    how = draw(st.sampled_from(["intervals", "text", "gtids"]))
    if how == "text":
        s = GtidSet.parse(draw(spec_text(spec)))
    elif how == "gtids":
        s = GtidSet(Gtid(u, g, t) for u, t, g in model_of(spec))
    else:
        s = from_spec(spec)
    return s, model_of(spec)


sets = sets_with_models().map(lambda pair: pair[0])

big_entries = st.tuples(
    st.sampled_from(UUIDS),
    st.sampled_from(TAGS),
    st.integers(1, MAX_GNO),
    st.integers(0, MAX_GNO),
)
big_sets = st.lists(big_entries, max_size=8).map(from_spec)


# --------------------------------------------------------------------------------------------
# Agreement with the model.
# --------------------------------------------------------------------------------------------


@thorough
@given(sets_with_models())
def test_membership_matches_model(pair: tuple[GtidSet, Model]) -> None:
    s, model = pair
    for uuid in UUIDS:
        for tag in TAGS:
            for gno in range(1, SMALL + 2):
                assert (Gtid(uuid, gno, tag) in s) == ((uuid, tag, gno) in model)
    assert len(s) == len(model)
    assert bool(s) == bool(model)


@fast
@given(sets_with_models())
def test_format_matches_model(pair: tuple[GtidSet, Model]) -> None:
    s, model = pair
    assert str(s) == naive_format(model)
    assert s.to_text() == naive_format(model, ",")


@thorough
@given(sets_with_models(), sets_with_models())
def test_operations_match_model(a: tuple[GtidSet, Model], b: tuple[GtidSet, Model]) -> None:
    (x, mx), (y, my) = a, b
    assert model_of_set(x | y) == mx | my
    assert model_of_set(x & y) == mx & my
    assert model_of_set(x - y) == mx - my
    assert (x <= y) == (mx <= my)
    assert (x < y) == (mx < my)
    assert (x >= y) == (mx >= my)
    assert (x == y) == (mx == my)
    assert x.isdisjoint(y) == mx.isdisjoint(my)


@fast
@given(sets_with_models(), st.sampled_from(UUIDS), st.sampled_from(TAGS))
def test_next_free_gno_matches_model(
    pair: tuple[GtidSet, Model], uuid: str, tag: str | None
) -> None:
    s, model = pair
    expected = 1
    while (uuid, tag, expected) in model:
        expected += 1
    assert s.next_free_gno(uuid, tag) == expected


# --------------------------------------------------------------------------------------------
# Algebra laws.
# --------------------------------------------------------------------------------------------


@fast
@given(sets, sets)
def test_union_and_intersection_commute(a: GtidSet, b: GtidSet) -> None:
    assert a | b == b | a
    assert a & b == b & a


@fast
@given(sets, sets, sets)
def test_union_and_intersection_associate(a: GtidSet, b: GtidSet, c: GtidSet) -> None:
    assert (a | b) | c == a | (b | c)
    assert (a & b) & c == a & (b & c)


@fast
@given(sets, sets, sets)
def test_distributivity(a: GtidSet, b: GtidSet, c: GtidSet) -> None:
    assert a & (b | c) == (a & b) | (a & c)
    assert a - (b | c) == (a - b) - c


@fast
@given(sets, sets)
def test_subset_iff_union_is_the_superset(a: GtidSet, b: GtidSet) -> None:
    assert (a <= b) == (a | b == b)
    assert (a <= b) == (a & b == a)
    assert a.issubset(b) == b.issuperset(a)


@thorough
@given(sets_with_models(), st.data())
def test_one_missing_gtid_breaks_subset(pair: tuple[GtidSet, Model], data: st.DataObject) -> None:
    s, model = pair
    # GNOs next to the set's interval bounds are where off-by-one mistakes live.
    near = sorted({g + d for _, _, g in model for d in (-1, 1)} | {1}) or [1]
    uuid, tag = data.draw(st.sampled_from(UUIDS)), data.draw(st.sampled_from(TAGS))
    gno = data.draw(st.sampled_from([g for g in near if g >= 1]))
    assume((uuid, tag, gno) not in model)
    bigger = s.add(Gtid(uuid, gno, tag))
    assert not bigger <= s
    assert s <= bigger
    assert s < bigger
    assert bigger - s == GtidSet([Gtid(uuid, gno, tag)])


@fast
@given(sets, sets)
def test_difference_laws(a: GtidSet, b: GtidSet) -> None:
    assert ((a - b) & b).is_empty()
    assert a - b <= a
    assert (a - b) | (a & b) == a


@fast
@given(sets, sets)
def test_inclusion_exclusion(a: GtidSet, b: GtidSet) -> None:
    assert len(a | b) + len(a & b) == len(a) + len(b)


@fast
@given(sets)
def test_identities(a: GtidSet) -> None:
    empty = GtidSet()
    assert a | a == a
    assert a & a == a
    assert (a - a).is_empty()
    assert a | empty == a
    assert (a & empty).is_empty()
    assert empty <= a


@fast
@given(sets, sets)
def test_equal_sets_hash_equal(a: GtidSet, b: GtidSet) -> None:
    union1, union2 = a | b, b | a
    assert hash(union1) == hash(union2)
    assert hash(GtidSet.parse(str(a))) == hash(a)


# --------------------------------------------------------------------------------------------
# Text round trips and parser agreement.
# --------------------------------------------------------------------------------------------


@fast
@given(st.one_of(sets, big_sets))
def test_parse_of_str_round_trips(a: GtidSet) -> None:
    assert GtidSet.parse(str(a)) == a
    assert GtidSet.parse(a.to_text()) == a
    assert GtidSet.parse(a.to_text(", ")) == a


@fast
@given(st.data())
def test_unusual_spellings_parse_to_the_model(data: st.DataObject) -> None:
    spec = data.draw(specs)
    text = data.draw(spec_text(spec))
    assert str(GtidSet.parse(text)) == naive_format(model_of(spec))


NOISE = st.text(
    alphabet=st.sampled_from(list("0123456789abcdefxX-:, \t\n+_Tgz\x00\u00e9")),
    max_size=60,
)


@st.composite
def near_miss(draw: st.DrawFn) -> str:
    """Text near the grammar: a valid spelling with a few characters replaced or inserted."""
    text = draw(spec_text(draw(specs)))
    chars = list(text)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(chars)))
        ch = draw(st.sampled_from(list("-:, x0G9+\x00.")))
        if chars and at < len(chars) and draw(st.booleans()):
            chars[at] = ch
        else:
            chars.insert(at, ch)
    return "".join(chars)


def slow_result(text: str) -> str | None:
    try:
        ranges, _ = _parse_set_slow(text.split("\x00", maxsplit=1)[0], allow_plus=False)
    except MalformedGtidSet:
        return None
    return str(GtidSet._from_ranges(ranges))


@thorough
@given(st.one_of(near_miss(), NOISE, st.just("")))
def test_fast_path_agrees_with_character_scanner(text: str) -> None:
    expected = slow_result(text)
    fast = _parse_set_fast(text.split("\x00", maxsplit=1)[0])
    if fast is not None:
        assert GtidSet._wrap(Map(fast)).to_text(",\n") == expected
    try:
        got: str | None = str(GtidSet.parse(text))
    except MalformedGtidSet:
        got = None
    assert got == expected


@fast
@given(st.text(max_size=80))
def test_parse_raises_only_malformed_gtid_set(text: str) -> None:
    error: MalformedGtidSet | None = None
    try:
        GtidSet.parse(text)
    except MalformedGtidSet as e:
        error = e
    assert error is None or error.errno == 1772


@fast
@given(st.text(max_size=60))
def test_gtid_parse_raises_only_malformed_gtid(text: str) -> None:
    error: MalformedGtid | None = None
    try:
        Gtid.parse(text)
    except MalformedGtid as e:
        error = e
    assert error is None or error.errno == 1774


@fast
@given(st.sampled_from(UUIDS), st.integers(1, MAX_GNO), st.sampled_from(TAGS))
def test_gtid_round_trip(uuid: str, gno: int, tag: str | None) -> None:
    g = Gtid(uuid, gno, tag)
    assert Gtid.parse(str(g)) == g
    assert Gtid.parse(str(g).upper()) == g
    assert GtidSet.parse(str(g)) == GtidSet([g])


# --------------------------------------------------------------------------------------------
# Single-element updates.
# --------------------------------------------------------------------------------------------


@fast
@given(st.one_of(sets, big_sets), st.sampled_from(UUIDS), st.sampled_from(TAGS), st.data())
def test_add_is_union_with_singleton(
    a: GtidSet, uuid: str, tag: str | None, data: st.DataObject
) -> None:
    gno = data.draw(st.one_of(st.integers(1, SMALL + 2), st.integers(1, MAX_GNO)))
    g = Gtid(uuid, gno, tag)
    added = a.add(g)
    assert added == a | GtidSet([g])
    assert g in added
    assert GtidSet.parse(str(added)) == added  # still canonical
    assert added.count() - a.count() == (0 if g in a else 1)


@fast
@given(
    sets,
    st.sampled_from(UUIDS),
    st.sampled_from(TAGS),
    st.integers(1, SMALL),
    st.integers(0, SMALL),
)
def test_add_interval_is_union(
    a: GtidSet, uuid: str, tag: str | None, start: int, end: int
) -> None:
    expected = a | from_spec([(uuid, tag, start, end)])
    assert a.add_interval(uuid, start, end, tag) == expected


@fast
@given(st.lists(st.tuples(st.sampled_from(UUIDS), st.integers(1, SMALL)), max_size=60))
def test_adding_one_by_one_builds_the_model(gtids: list[tuple[str, int]]) -> None:
    s = GtidSet()
    for uuid, gno in gtids:
        s = s.add(Gtid(uuid, gno))
    assert model_of_set(s) == {(u, None, g) for u, g in gtids}
    assert s == GtidSet.parse(naive_format((u, None, g) for u, g in gtids))


@pytest.mark.parametrize("count", [1, 7, 50])
def test_generated_gnos_fill_gaps_in_order(count: int) -> None:
    uuid = UUIDS[0]
    s = GtidSet.parse(f"{uuid}:2:4:6:8:10-11")
    taken = []
    for _ in range(count):
        gno = s.next_free_gno(uuid)
        assert Gtid(uuid, gno) not in s
        taken.append(gno)
        s = s.add(Gtid(uuid, gno))
    free = [g for g in range(1, 100) if g not in (2, 4, 6, 8, 10, 11)]
    assert taken == free[:count]


# --------------------------------------------------------------------------------------------
# The number scanner against the C library it imitates.
# --------------------------------------------------------------------------------------------


def libc_strtoll(text: str) -> tuple[int, int]:
    """``strtoll(text, &end, 0)`` from the C library: ``(value, end - text)``."""
    libc = ctypes.CDLL(None)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    buf = ctypes.create_string_buffer(text.encode("ascii"))
    end = ctypes.c_char_p()
    value = libc.strtoll(ctypes.cast(buf, ctypes.c_char_p), ctypes.byref(end), 0)
    end_address = ctypes.cast(end, ctypes.c_void_p).value
    assert end_address is not None
    return value, end_address - ctypes.addressof(buf)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs glibc's strtoll")
@thorough
@given(st.text(alphabet=st.sampled_from(list("0123456789abcdefxXg+- \t\n\v\f\r")), max_size=25))
@example("0x")
@example(" -0Xg")
@example("0x1f-")
@example("08")
@example("+")
@example("99999999999999999999")
@example("-99999999999999999999")
def test_strtoll_matches_the_c_library(text: str) -> None:
    assert _strtoll(text, 0) == libc_strtoll(text)


# --------------------------------------------------------------------------------------------
# The grammar by server version: tags only from 8.3.
# --------------------------------------------------------------------------------------------

untagged_specs = st.lists(entries.map(lambda e: (e[0], None, e[2], e[3])), max_size=8)
tagged_specs = specs.filter(lambda spec: any(tag is not None for _, tag, _, _ in spec))


@fast
@given(st.data())
def test_the_8_0_grammar_reads_untagged_text_as_8_4_does(data: st.DataObject) -> None:
    text = data.draw(spec_text(data.draw(untagged_specs)))
    assert GtidSet.parse(text, tags=False) == GtidSet.parse(text)
    for uuid, _tag, start, _end in GtidSet.parse(text).intervals():
        assert Gtid.parse(f" {uuid.upper()} : {start} ", tags=False) == Gtid(uuid, start)


@fast
@given(st.data())
def test_the_8_0_grammar_refuses_every_tag(data: st.DataObject) -> None:
    text = data.draw(spec_text(data.draw(tagged_specs)))
    with pytest.raises(MalformedGtidSet):
        GtidSet.parse(text, tags=False)
    with pytest.raises(MalformedGtidSet):
        GtidSet.parse_with_plus(text, tags=False)
