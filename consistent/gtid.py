"""GTIDs and GTID sets of both flavours: MySQL's ``uuid[:tag]:intervals`` and MariaDB's
``domain-server-seq`` positions.

The MySQL parser accepts exactly what mysqld 8.4 accepts (``Gtid_set::add_gtid_text`` in
``sql/rpl_gtid_set.cc`` with ``Tsid``/``Tag::from_cstring`` from ``libs/mysql/gtid``), including its
oddities: whitespace almost anywhere, empty entries, ``strtoll`` base-0 numbers (``0x10``,
``010``), silently dropped ``end < start`` intervals, and 8.4's blank item after a colon that
counts as "no tag" (``uuid:1: `` parses; 8.0 rejected it).  Canonical text takes a regex fast
path; everything else goes through a character scanner written after the C code.  ``str()``
prints what mysqld prints, so a set read from an OK packet, a server variable or our own code has
one canonical text.

A :class:`GtidSet` is immutable.  It maps each transaction source (the UUID, or ``uuid:tag``) to a
sorted tuple of half-open intervals inside a HAMT (:class:`immutables.Map`), so adding a GTID or
testing membership costs ``O(log U)`` in the number of sources plus a binary search (and, for
``add``, a C-level copy) of that one source's intervals.  Sets with thousands of UUIDs, common
after many failovers, stay cheap; unchanged sources are shared between sets.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from immutables import Map

from consistent.errors import DataError, MalformedGtid, MalformedGtidSet

__all__ = [
    "MAX_GNO",
    "Gtid",
    "GtidSet",
    "GtidState",
    "MariaGtid",
    "MariaPosition",
]

#: Largest usable GNO: mysqld rejects ``LLONG_MAX`` itself (it is also strtoll's overflow value).
MAX_GNO = 2**63 - 2
_LLONG_MAX = 2**63 - 1
_LLONG_MIN = -(2**63)
_GNO_END = MAX_GNO + 1  # exclusive upper bound of every interval
_TAG_MAX_LENGTH = 32  # mysql::gtid::tag_max_length
_UUID_LENGTH = 36

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1

# ER_GNO_EXHAUSTED, raised by Gtid_state::get_automatic_gno when a source has no GNO left.
_ER_GNO_EXHAUSTED = 1775
_GNO_EXHAUSTED_MESSAGE = (
    "Impossible to generate Global Transaction Identifier: the integer component reached the "
    "maximal value. Restart the server with a new server_uuid."
)

# mysqld's SKIP_WHITESPACE / std::isspace in the C locale: ASCII whitespace only.
_WS_CHARS = " \t\n\v\f\r"
_WS = frozenset(_WS_CHARS)
_DEC = frozenset("0123456789")
_OCT = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")
_TAG_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")

_UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_TAG_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,31}"
_GNO_PATTERN = r"[1-9][0-9]{0,18}"  # decimal without leading zeros; range checked after int()
_UUID_RE = re.compile(_UUID_PATTERN)
_TAG_RE = re.compile(_TAG_PATTERN)
# The common shapes of one comma-separated entry (no inner whitespace, plain decimal numbers).
# Anything else goes through the character scanner, which also reports the errors.
_FAST_UNTAGGED_RE = re.compile(rf"{_UUID_PATTERN}(?::{_GNO_PATTERN}(?:-{_GNO_PATTERN})?)*")
_FAST_ENTRY_RE = re.compile(
    rf"{_UUID_PATTERN}(?::(?:{_GNO_PATTERN}(?:-{_GNO_PATTERN})?|{_TAG_PATTERN}))*"
)
_FAST_GTID_RE = re.compile(rf"({_UUID_PATTERN})(?::({_TAG_PATTERN}))?:({_GNO_PATTERN})")

# One source's intervals: (start0, stop0, start1, stop1, ...), half-open [start, stop), sorted,
# disjoint and never adjacent (stop_i < start_{i+1}).  A GNO g is in it iff
# bisect_right(flat, g) is odd.
_Flat: TypeAlias = tuple[int, ...]


# --------------------------------------------------------------------------------------------
# Low-level scanners reproducing the C functions mysqld uses.
# --------------------------------------------------------------------------------------------


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in _WS:
        pos += 1
    return pos


def _strtoll(text: str, pos: int) -> tuple[int, int]:
    """glibc ``strtoll(s, &end, 0)``: returns ``(value, end)``; ``end == pos`` when nothing was
    converted.  Out-of-range values saturate at LLONG_MAX / LLONG_MIN like the C function."""
    n = len(text)
    j = _skip_ws(text, pos)
    negative = False
    if j < n and text[j] in "+-":
        negative = text[j] == "-"
        j += 1
    if text.startswith(("0x", "0X"), j) and j + 2 < n and text[j + 2] in _HEX:
        j += 2
        digits, base = _HEX, 16
    elif text.startswith("0", j):
        digits, base = _OCT, 8
    else:
        digits, base = _DEC, 10
    k = j
    while k < n and text[k] in digits:
        k += 1
    if k == j:
        return 0, pos
    value = int(text[j:k], base)
    if negative:
        value = -value
    return max(_LLONG_MIN, min(_LLONG_MAX, value)), k


def _parse_gno(text: str, pos: int) -> tuple[int, int]:
    """``parse_gno``: strtoll, with negative numbers and LLONG_MAX (overflow) mapped to -1."""
    value, end = _strtoll(text, pos)
    if value < 0 or value == _LLONG_MAX:
        return -1, pos
    return value, end


def _tag_from_cstring(text: str, pos: int) -> tuple[int, str]:
    """``Tag::from_cstring``: ``(characters consumed, lower-cased tag)``; ``(0, "")`` when the
    text there is not a tag followed by ``:``, ``,`` or the end.  Whitespace around the tag is
    consumed, so whitespace alone followed by a valid end counts as an empty tag."""
    n = len(text)
    p = _skip_ws(text, pos)
    start = p
    while (
        p < n
        and p - start < _TAG_MAX_LENGTH
        and (text[p] in _TAG_FIRST or (p > start and text[p] in _DEC))
    ):
        p += 1
    end = p
    p = _skip_ws(text, p)
    if p < n and text[p] not in ":,":
        return 0, ""
    return p - pos, text[start:end].lower()


def _source_key(uuid: str, tag: str | None) -> str:
    return f"{uuid}:{tag}" if tag else uuid


def _tsid_from_cstring(text: str, pos: int) -> tuple[int, str]:
    """``Tsid::from_cstring``: ``(characters consumed, source key)``; 0 consumed on error."""
    if _UUID_RE.match(text, pos) is None:
        return 0, ""
    uuid = text[pos : pos + _UUID_LENGTH].lower()
    p = _skip_ws(text, pos + _UUID_LENGTH)
    if p >= len(text) or text[p] == ",":
        return p - pos, uuid
    if text[p] != ":":
        return 0, ""
    after = _skip_ws(text, p + 1)
    used, tag = _tag_from_cstring(text, after)
    if not tag:
        return p - pos, uuid
    return after + used - pos, _source_key(uuid, tag)


def _normalise(pairs: list[tuple[int, int]]) -> _Flat:
    """Sorted, merged flat tuple from half-open ``(start, stop)`` pairs."""
    pairs.sort()
    out: list[int] = []
    for start, stop in pairs:
        if out and start <= out[-1]:
            out[-1] = max(out[-1], stop)
        else:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _cut_at_nul(text: str) -> str:
    # The server hands the parser a C string: an embedded NUL ends it.
    nul = text.find("\x00")
    return text if nul < 0 else text[:nul]


def _parse_set_slow(text: str, allow_plus: bool) -> tuple[dict[str, list[tuple[int, int]]], bool]:
    """``Gtid_set::add_gtid_text`` of mysqld 8.4, character by character."""
    n = len(text)
    i = _skip_ws(text, 0)
    plus = False
    if allow_plus and i < n and text[i] == "+":
        plus = True
        i = _skip_ws(text, i + 1)
    ranges: dict[str, list[tuple[int, int]]] = {}
    if i >= n:
        return ranges, plus
    shown = text[i:]  # mysqld reports the text from here on

    def malformed() -> MalformedGtidSet:
        return MalformedGtidSet(shown)

    while True:
        while i < n and text[i] == ",":
            i = _skip_ws(text, i + 1)
        if i >= n:
            return ranges, plus
        used, key = _tsid_from_cstring(text, i)
        if used == 0:
            raise malformed()
        uuid = key[:_UUID_LENGTH]
        i = _skip_ws(text, i + used)
        while i < n and text[i] == ":":
            i += 1
            used, tag = _tag_from_cstring(text, i)
            i = _skip_ws(text, i + used)
            if used > 0:
                key = _source_key(uuid, tag)
                continue
            start, i = _parse_gno(text, i)
            if start <= 0:
                raise malformed()
            i = _skip_ws(text, i)
            if i < n and text[i] == "-":
                end, i = _parse_gno(text, i + 1)
                if end < 0:
                    raise malformed()
                i = _skip_ws(text, i)
                stop = end + 1
            else:
                stop = start + 1
            if stop > start:
                ranges.setdefault(key, []).append((start, stop))
        if i < n and text[i] != ",":
            raise malformed()


def _fast_entry_flat(entry: str) -> _Flat | None:
    """Intervals of one validated, untagged entry ``uuid:a-b:c…`` as a flat tuple; None when a
    number is out of range (the slow scanner then reports the error)."""
    if len(entry) == _UUID_LENGTH:
        return ()
    out: list[int] = []
    previous = 0
    for part in entry[_UUID_LENGTH + 1 :].split(":"):
        first, _, last = part.partition("-")
        start = int(first)
        stop = int(last) + 1 if last else start + 1
        if start <= previous or stop <= start:
            return _fast_entry_unsorted(entry)
        out.append(start)
        out.append(stop)
        previous = stop
    # Sorted, so the last stop bounds every number.
    return tuple(out) if previous <= _GNO_END else None


def _fast_entry_unsorted(entry: str) -> _Flat | None:
    pairs = []
    for part in entry[_UUID_LENGTH + 1 :].split(":"):
        first, _, last = part.partition("-")
        start = int(first)
        end = int(last) if last else start
        if start > MAX_GNO or end > MAX_GNO:
            return None
        if end >= start:
            pairs.append((start, end + 1))
    return _normalise(pairs)


def _parse_set_fast(text: str) -> dict[str, _Flat] | None:
    """The common shapes, with the same result as the slow scanner; None when the text needs
    the slow scanner (which also produces the error for malformed text)."""
    out: dict[str, _Flat] = {}
    untagged = _FAST_UNTAGGED_RE.fullmatch
    tagged = _FAST_ENTRY_RE.fullmatch
    for raw in text.split(","):
        entry = raw.strip(_WS_CHARS)
        if not entry:
            continue
        key = entry[:_UUID_LENGTH].lower()
        if untagged(entry) is not None:
            flat = _fast_entry_flat(entry)
            if flat is None:
                return None
            if not flat:
                continue
            have = out.get(key)
            out[key] = flat if have is None else _flat_union(have, flat)
            continue
        if tagged(entry) is None:
            return None
        found = _fast_tagged_entry(entry, key)
        if found is None:
            return None
        for source, flat in found.items():
            have = out.get(source)
            out[source] = flat if have is None else _flat_union(have, flat)
    return out


def _fast_tagged_entry(entry: str, uuid: str) -> dict[str, _Flat] | None:
    """A validated entry that names tags: walk its items, switching source at each tag."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    key = uuid
    for part in entry.split(":")[1:]:
        if part[0] in _DEC:
            first, _, last = part.partition("-")
            start = int(first)
            end = int(last) if last else start
            if start > MAX_GNO or end > MAX_GNO:
                return None
            if end >= start:
                ranges.setdefault(key, []).append((start, end + 1))
        else:
            key = f"{uuid}:{part.lower()}"
    return {k: _normalise(pairs) for k, pairs in ranges.items()}


def _parse_gtid(text: str) -> tuple[str, str | None, int] | None:
    """``Gtid::parse_gtid_from_cstring`` of mysqld 8.4: ``(uuid, tag, gno)`` or None."""
    text = _cut_at_nul(text)
    m = _FAST_GTID_RE.fullmatch(text)
    if m is not None:
        gno = int(m[3])
        if gno > MAX_GNO:
            return None
        tag = m[2]
        return m[1].lower(), tag.lower() if tag else None, gno
    n = len(text)
    i = _skip_ws(text, 0)
    if _UUID_RE.match(text, i) is None:
        return None
    uuid = text[i : i + _UUID_LENGTH].lower()
    i = _skip_ws(text, i + _UUID_LENGTH)
    if i >= n or text[i] != ":":
        return None
    i = _skip_ws(text, i + 1)
    used, tag = _tag_from_cstring(text, i)
    i = _skip_ws(text, i + used)
    if tag:
        if i >= n or text[i] != ":":
            return None
        i = _skip_ws(text, i + 1)
    gno, i = _parse_gno(text, i)
    if gno <= 0 or _skip_ws(text, i) != n:
        return None
    return uuid, tag or None, gno


# --------------------------------------------------------------------------------------------
# Interval algebra on flat tuples.
# --------------------------------------------------------------------------------------------


def _flat_union(a: _Flat, b: _Flat) -> _Flat:
    if a[-1] < b[0]:
        return a + b
    if b[-1] < a[0]:
        return b + a
    out: list[int] = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na or j < nb:
        if j >= nb or (i < na and a[i] <= b[j]):
            start, stop = a[i], a[i + 1]
            i += 2
        else:
            start, stop = b[j], b[j + 1]
            j += 2
        if out and start <= out[-1]:
            out[-1] = max(out[-1], stop)
        else:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _flat_intersection(a: _Flat, b: _Flat) -> _Flat:
    out: list[int] = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        start = max(a[i], b[j])
        stop = min(a[i + 1], b[j + 1])
        if start < stop:
            out.append(start)
            out.append(stop)
        if a[i + 1] < b[j + 1]:
            i += 2
        else:
            j += 2
    return tuple(out)


def _flat_difference(a: _Flat, b: _Flat) -> _Flat:
    out: list[int] = []
    j = 0
    nb = len(b)
    for i in range(0, len(a), 2):
        start, stop = a[i], a[i + 1]
        while j < nb and b[j + 1] <= start:
            j += 2
        k = j
        while k < nb and b[k] < stop:
            if b[k] > start:
                out.append(start)
                out.append(b[k])
            start = b[k + 1]  # > start: b's intervals are sorted and never touch
            if start >= stop:
                break
            k += 2
        if start < stop:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _flat_subset(a: _Flat, b: _Flat) -> bool:
    """Every interval of ``a`` lies inside one interval of ``b`` (binary search each)."""
    nb = len(b)
    lo = 0
    for i in range(0, len(a), 2):
        k = bisect_right(b, a[i], lo, nb)
        if not k & 1 or a[i + 1] > b[k]:
            return False
        lo = k - 1
    return True


def _flat_add(flat: _Flat, gno: int) -> _Flat:
    """``flat`` with one more GNO; the same object when it is already there."""
    i = bisect_right(flat, gno)
    if i & 1:
        return flat
    joins_left = i > 0 and flat[i - 1] == gno
    joins_right = i < len(flat) and flat[i] == gno + 1
    if joins_left and joins_right:
        return flat[: i - 1] + flat[i + 1 :]
    if joins_left:
        return (*flat[: i - 1], gno + 1, *flat[i:])
    if joins_right:
        return (*flat[:i], gno, *flat[i + 1 :])
    return (*flat[:i], gno, gno + 1, *flat[i:])


def _flat_len(flat: _Flat) -> int:
    return sum(flat[1::2]) - sum(flat[0::2])


# --------------------------------------------------------------------------------------------
# MySQL flavour.
# --------------------------------------------------------------------------------------------


def _canonical_uuid(uuid: object) -> str | None:
    """Lower-cased UUID, None when ``uuid`` is not 36-character hyphenated hex."""
    if not isinstance(uuid, str) or _UUID_RE.fullmatch(uuid) is None:
        return None
    return uuid.lower()


def _canonical_tag(tag: object) -> str | None:
    """Lower-cased tag, ``""`` for no tag, None when ``tag`` is not a valid tag."""
    if tag is None or tag == "":
        return ""
    if not isinstance(tag, str) or _TAG_RE.fullmatch(tag) is None:
        return None
    return tag.lower()


@dataclass(frozen=True, slots=True)
class Gtid:
    """One MySQL transaction id, ``uuid:gno`` or (MySQL 8.3+) ``uuid:tag:gno``.

    The UUID and tag are stored in mysqld's canonical lower case, so equal GTIDs compare equal
    whatever case they were written in.  An empty tag means no tag.
    """

    uuid: str
    gno: int
    tag: str | None = None

    def __post_init__(self) -> None:
        uuid = _canonical_uuid(self.uuid)
        tag = _canonical_tag(self.tag)
        if uuid is None or tag is None or type(self.gno) is not int or not 1 <= self.gno <= MAX_GNO:
            parts = [str(self.uuid)] + ([str(self.tag)] if self.tag else []) + [str(self.gno)]
            raise MalformedGtid(":".join(parts))
        if uuid != self.uuid:
            object.__setattr__(self, "uuid", uuid)
        if (tag or None) != self.tag:
            object.__setattr__(self, "tag", tag or None)

    @classmethod
    def parse(cls, text: str) -> Gtid:
        """Parse one GTID as ``SET gtid_next`` does; raises :class:`MalformedGtid` (1774)."""
        parsed = _parse_gtid(text)
        if parsed is None:
            raise MalformedGtid(text)
        uuid, tag, gno = parsed
        return cls(uuid, gno, tag)

    @property
    def source(self) -> str:
        """The transaction source id: ``uuid`` or ``uuid:tag``."""
        return _source_key(self.uuid, self.tag)

    def __str__(self) -> str:
        return f"{self.source}:{self.gno}"


class GtidSet:
    """An immutable, hashable set of MySQL GTIDs with mysqld's text format and set algebra.

    ``GtidSet()`` is empty; ``GtidSet(gtids)`` holds the given :class:`Gtid` objects.  Use
    :meth:`parse` for text.  Operators: ``|`` ``&`` ``-`` ``<=`` ``<`` ``>=`` ``>`` ``==``,
    ``gtid in s``; ``len(s)`` is the number of transactions (see :meth:`count` for sets too big
    for ``len``).
    """

    __slots__ = ("_hash", "_map", "_text")

    _map: Map[str, _Flat]
    _hash: int | None
    _text: str | None

    def __init__(self, gtids: Iterable[Gtid] = ()) -> None:
        ranges: dict[str, list[tuple[int, int]]] = {}
        for gtid in gtids:
            ranges.setdefault(gtid.source, []).append((gtid.gno, gtid.gno + 1))
        self._map = Map({key: _normalise(pairs) for key, pairs in ranges.items()})
        self._hash = None
        self._text = None

    @classmethod
    def _wrap(cls, mapping: Map[str, _Flat]) -> GtidSet:
        new = object.__new__(cls)
        new._map = mapping
        new._hash = None
        new._text = None
        return new

    # ----- construction -------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """Parse GTID-set text exactly as mysqld does; raises :class:`MalformedGtidSet` (1772).

        The empty or all-whitespace string is the empty set.  A leading ``+`` is not accepted
        here; see :meth:`parse_with_plus` for ``SET GTID_PURGED = '+…'``.
        """
        text = _cut_at_nul(text)
        flats = _parse_set_fast(text)
        if flats is None:
            ranges, _ = _parse_set_slow(text, allow_plus=False)
            return cls._from_ranges(ranges)
        return cls._wrap(Map(flats))

    @classmethod
    def parse_with_plus(cls, text: str) -> tuple[GtidSet, bool]:
        """Parse text that may start with ``+`` (``SET GTID_PURGED``); returns the set and whether
        the ``+`` was there."""
        ranges, plus = _parse_set_slow(_cut_at_nul(text), allow_plus=True)
        return cls._from_ranges(ranges), plus

    @classmethod
    def _from_ranges(cls, ranges: dict[str, list[tuple[int, int]]]) -> GtidSet:
        return cls._wrap(Map({key: _normalise(pairs) for key, pairs in ranges.items() if pairs}))

    @classmethod
    def from_intervals(
        cls, intervals: Mapping[tuple[str, str | None], Iterable[tuple[int, int]]]
    ) -> GtidSet:
        """Build a set from ``{(uuid, tag): [(start, end_inclusive), ...]}``.

        Intervals may overlap or touch; ones with ``end < start`` are empty (as in the text
        format).  An invalid UUID or tag, or a bound outside ``1..MAX_GNO``, raises
        :class:`MalformedGtidSet` naming the offending entry.
        """
        ranges: dict[str, list[tuple[int, int]]] = {}
        for (uuid, tag), pairs in intervals.items():
            key = _checked_key(uuid, tag, "")
            bucket = ranges.setdefault(key, [])
            for start, end in pairs:
                _check_bounds(key, start, end)
                if end >= start:
                    bucket.append((start, end + 1))
        return cls._from_ranges(ranges)

    # ----- text ---------------------------------------------------------------------------

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = self.to_text(",\n")
        return text

    def to_text(self, separator: str = ",") -> str:
        """The set in mysqld's format with ``separator`` between UUIDs (``str()`` uses
        ``",\\n"`` like the server; the default here gives a single line)."""
        out: list[str] = []
        append = out.append
        previous = ""
        for key, flat in sorted(self._map.items()):  # keys are unique: flats never compared
            uuid = key[:_UUID_LENGTH]
            if uuid != previous:
                if previous:
                    append(separator)
                append(key)
                previous = uuid
            else:
                append(key[_UUID_LENGTH:])
            for i in range(0, len(flat), 2):
                start, stop = flat[i], flat[i + 1]
                append(f":{start}" if stop == start + 1 else f":{start}-{stop - 1}")
        return "".join(out)

    def __repr__(self) -> str:
        return f"GtidSet.parse({self.to_text()!r})"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (GtidSet.parse, (self.to_text(),))

    # ----- identity -----------------------------------------------------------------------

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self._map)
        return h

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        if self is other:
            return True
        if self._hash is not None and other._hash is not None and self._hash != other._hash:
            return False
        return self._map == other._map

    def __bool__(self) -> bool:
        return len(self._map) > 0

    def is_empty(self) -> bool:
        """True when the set holds no GTID."""
        return len(self._map) == 0

    def count(self) -> int:
        """Number of transactions; unlike ``len()`` it works above ``sys.maxsize``."""
        return sum(_flat_len(flat) for flat in self._map.values())

    def __len__(self) -> int:
        return self.count()

    # ----- queries ------------------------------------------------------------------------

    def __contains__(self, gtid: object) -> bool:
        if not isinstance(gtid, Gtid):
            raise TypeError(f"GtidSet membership needs a Gtid, not {type(gtid).__name__}")
        flat = self._map.get(gtid.source)
        return flat is not None and bisect_right(flat, gtid.gno) & 1 == 1

    def contains(self, uuid: str, gno: int, tag: str | None = None) -> bool:
        """``Gtid(uuid, gno, tag) in self`` without building (and validating) a Gtid."""
        flat = self._map.get(_query_key(uuid, tag))
        return flat is not None and bisect_right(flat, gno) & 1 == 1

    def intervals(self) -> Iterator[tuple[str, str | None, int, int]]:
        """``(uuid, tag, start, end_inclusive)`` in the order mysqld prints them."""
        mapping = self._map
        for key in sorted(mapping):
            uuid, tag = _split_key(key)
            flat = mapping[key]
            for i in range(0, len(flat), 2):
                yield uuid, tag, flat[i], flat[i + 1] - 1

    def sources(self) -> tuple[tuple[str, str | None], ...]:
        """The ``(uuid, tag)`` pairs present, sorted as mysqld prints them."""
        return tuple(_split_key(key) for key in sorted(self._map))

    def uuids(self) -> tuple[str, ...]:
        """The distinct UUIDs present, sorted."""
        return tuple(sorted({key[:_UUID_LENGTH] for key in self._map}))

    def last_gno(self, uuid: str, tag: str | None = None) -> int:
        """Highest GNO of that source, 0 when it has none (``Gtid_set::get_last_gno``)."""
        flat = self._map.get(_query_key(uuid, tag))
        return 0 if flat is None else flat[-1] - 1

    def next_free_gno(self, uuid: str, tag: str | None = None) -> int:
        """The GNO mysqld would assign next for that source: the smallest unused one >= 1.

        Raises :class:`consistent.errors.DataError` 1775 (ER_GNO_EXHAUSTED) when none is left.
        """
        flat = self._map.get(_query_key(uuid, tag))
        if flat is None or flat[0] > 1:
            return 1
        if flat[1] > MAX_GNO:
            raise DataError(_ER_GNO_EXHAUSTED, _GNO_EXHAUSTED_MESSAGE, sqlstate="HY000")
        return flat[1]

    # ----- single-element updates ---------------------------------------------------------

    def add(self, gtid: Gtid) -> GtidSet:
        """A set with ``gtid`` added (``self`` when it is already in)."""
        key = gtid.source
        flat = self._map.get(key)
        if flat is None:
            return GtidSet._wrap(self._map.set(key, (gtid.gno, gtid.gno + 1)))
        new = _flat_add(flat, gtid.gno)
        if new is flat:
            return self
        return GtidSet._wrap(self._map.set(key, new))

    def add_interval(self, uuid: str, start: int, end: int, tag: str | None = None) -> GtidSet:
        """A set with GNOs ``start..end`` (inclusive) of that source added; ``end < start`` adds
        nothing.  Invalid arguments raise :class:`MalformedGtidSet`."""
        key = _checked_key(uuid, tag, f":{start}-{end}")
        _check_bounds(key, start, end)
        if end < start:
            return self
        flat = self._map.get(key)
        piece = (start, end + 1)
        if flat is None:
            return GtidSet._wrap(self._map.set(key, piece))
        new = _flat_union(flat, piece)
        if new == flat:
            return self
        return GtidSet._wrap(self._map.set(key, new))

    # ----- algebra ------------------------------------------------------------------------

    def union(self, other: GtidSet) -> GtidSet:
        """All GTIDs in either set.  Walks the smaller operand and updates a copy of the larger
        one, so unchanged sources are shared; returns the larger operand itself when the
        smaller adds nothing."""
        big, small = (self, other) if len(self._map) >= len(other._map) else (other, self)
        if not small._map:
            return big
        base = big._map
        changed = False
        with base.mutate() as mutation:
            for key, flat in small._map.items():
                mine = base.get(key)
                if mine is None:
                    mutation[key] = flat
                    changed = True
                elif mine is not flat and mine != flat:
                    merged = _flat_union(mine, flat)
                    if merged != mine:
                        mutation[key] = merged
                        changed = True
            result = mutation.finish()
        return GtidSet._wrap(result) if changed else big

    def intersection(self, other: GtidSet) -> GtidSet:
        """GTIDs in both sets; the smaller operand itself when it is the answer."""
        small, big = (self, other) if len(self._map) <= len(other._map) else (other, self)
        theirs_map = big._map
        out: dict[str, _Flat] = {}
        whole = True
        for key, flat in small._map.items():
            theirs = theirs_map.get(key)
            if theirs is None:
                whole = False
                continue
            if theirs is flat or theirs == flat:
                out[key] = flat
                continue
            common = _flat_intersection(flat, theirs)
            if common != flat:
                whole = False
            if common:
                out[key] = common
        return small if whole else GtidSet._wrap(Map(out))

    def difference(self, other: GtidSet) -> GtidSet:
        """GTIDs of ``self`` that are not in ``other`` (``GTID_SUBTRACT``)."""
        a, b = self._map, other._map
        if not a or not b:
            return self
        changed = False
        with a.mutate() as mutation:
            for key in b if len(b) <= len(a) else a:
                mine = a.get(key)
                theirs = b.get(key)
                if mine is None or theirs is None:
                    continue
                rest = () if mine is theirs or mine == theirs else _flat_difference(mine, theirs)
                if rest != mine:
                    changed = True
                    if rest:
                        mutation[key] = rest
                    else:
                        del mutation[key]
            result = mutation.finish()
        return GtidSet._wrap(result) if changed else self

    def issubset(self, other: GtidSet) -> bool:
        """Every GTID of ``self`` is in ``other`` (``GTID_SUBSET(self, other)``)."""
        a, b = self._map, other._map
        if a is b:
            return True
        if len(a) > len(b):
            return False
        for key, flat in a.items():
            theirs = b.get(key)
            if theirs is None:
                return False
            if theirs is not flat and theirs != flat and not _flat_subset(flat, theirs):
                return False
        return True

    def issuperset(self, other: GtidSet) -> bool:
        """Every GTID of ``other`` is in ``self``."""
        return other.issubset(self)

    def isdisjoint(self, other: GtidSet) -> bool:
        """No GTID in common."""
        small, big = self._map, other._map
        if len(small) > len(big):
            small, big = big, small
        for key, flat in small.items():
            theirs = big.get(key)
            if theirs is not None and _flat_intersection(flat, theirs):
                return False
        return True

    def __or__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.union(other)

    def __and__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.intersection(other)

    def __sub__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.difference(other)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.issubset(other)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self != other and self.issubset(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return other.issubset(self)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self != other and other.issubset(self)


def _query_key(uuid: str, tag: str | None) -> str:
    # Lookups accept any case, like the parser; no validation: a bad UUID simply is not there.
    return f"{uuid.lower()}:{tag.lower()}" if tag else uuid.lower()


def _split_key(key: str) -> tuple[str, str | None]:
    return key[:_UUID_LENGTH], key[_UUID_LENGTH + 1 :] or None


def _checked_key(uuid: str, tag: str | None, rest: str) -> str:
    canonical = _canonical_uuid(uuid)
    checked_tag = _canonical_tag(tag)
    if canonical is None or checked_tag is None:
        raise MalformedGtidSet(f"{uuid}{':' + str(tag) if tag else ''}{rest}")
    return _source_key(canonical, checked_tag)


def _check_bounds(key: str, start: int, end: int) -> None:
    if (
        type(start) is not int
        or type(end) is not int
        or not 1 <= start <= MAX_GNO
        or not 0 <= end <= MAX_GNO
    ):
        raise MalformedGtidSet(f"{key}:{start}-{end}")


# --------------------------------------------------------------------------------------------
# MariaDB flavour.
# --------------------------------------------------------------------------------------------


def _strtoll10(text: str, pos: int) -> tuple[int, int] | None:
    """MariaDB's ``my_strtoll10`` as ``gtid_parser_helper`` uses it: spaces and tabs, an
    optional ``+``, decimal digits up to 2^64-1.  None for no digits, a ``-`` sign (which the
    helper treats as an error) or overflow."""
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    if pos < n and text[pos] == "+":
        pos += 1
    elif pos < n and text[pos] == "-":
        return None
    end = pos
    while end < n and text[end] in _DEC:
        end += 1
    if end == pos:
        return None
    value = int(text[pos:end])
    if value > _U64_MAX:
        return None
    return value, end


def _parse_maria_gtid(text: str, pos: int) -> tuple[MariaGtid, int] | None:
    """``gtid_parser_helper`` (MariaDB ``sql/rpl_gtid.cc``): ``domain-server-seq`` at ``pos``."""
    numbers: list[int] = []
    for index in range(3):
        parsed = _strtoll10(text, pos)
        if parsed is None:
            return None
        value, pos = parsed
        if index < 2:
            if value > _U32_MAX or pos >= len(text) or text[pos] != "-":
                return None
            pos += 1
        numbers.append(value)
    return MariaGtid(numbers[0], numbers[1], numbers[2]), pos


@dataclass(frozen=True, slots=True)
class MariaGtid:
    """One MariaDB GTID ``domain-server_id-seq_no`` (unsigned 32, 32 and 64 bits)."""

    domain: int
    server_id: int
    seq_no: int

    def __post_init__(self) -> None:
        for value, top in ((self.domain, _U32_MAX), (self.server_id, _U32_MAX)):
            if type(value) is not int or not 0 <= value <= top:
                raise MalformedGtid(f"{self.domain}-{self.server_id}-{self.seq_no}")
        if type(self.seq_no) is not int or not 0 <= self.seq_no <= _U64_MAX:
            raise MalformedGtid(f"{self.domain}-{self.server_id}-{self.seq_no}")

    @classmethod
    def parse(cls, text: str) -> MariaGtid:
        """Parse ``0-1-10``; raises :class:`MalformedGtid`."""
        parsed = _parse_maria_gtid(text, 0)
        if parsed is None or parsed[1] != len(text):
            raise MalformedGtid(text)
        return parsed[0]

    def __str__(self) -> str:
        return f"{self.domain}-{self.server_id}-{self.seq_no}"


class MariaPosition:
    """An immutable MariaDB GTID position: at most one :class:`MariaGtid` per replication domain,
    as in ``gtid_slave_pos`` or ``MASTER_GTID_WAIT``'s argument."""

    __slots__ = ("_by_domain", "_gtids", "_hash")

    _by_domain: dict[int, MariaGtid]
    _gtids: tuple[MariaGtid, ...]
    _hash: int | None

    def __init__(self, gtids: Iterable[MariaGtid] = ()) -> None:
        """Position holding ``gtids``; two of them in one domain raise :class:`MalformedGtidSet`
        (MariaDB refuses that too: ER_DUPLICATE_GTID_DOMAIN, 1947)."""
        by_domain: dict[int, MariaGtid] = {}
        for gtid in gtids:
            if gtid.domain in by_domain:
                raise MalformedGtidSet(",".join(str(g) for g in (*by_domain.values(), gtid)))
            by_domain[gtid.domain] = gtid
        self._set(by_domain)

    def _set(self, by_domain: dict[int, MariaGtid]) -> None:
        self._by_domain = by_domain
        self._gtids = tuple(by_domain[d] for d in sorted(by_domain))
        self._hash = None

    @classmethod
    def _wrap(cls, by_domain: dict[int, MariaGtid]) -> MariaPosition:
        new = object.__new__(cls)
        new._set(by_domain)
        return new

    @classmethod
    def parse(cls, text: str) -> MariaPosition:
        """Parse ``0-1-10,1-2-5`` as ``gtid_parse_string_to_list`` does; the empty string is the
        empty position.  Malformed text or a repeated domain raises :class:`MalformedGtidSet`."""
        if text == "":
            return cls()
        gtids: list[MariaGtid] = []
        pos = 0
        n = len(text)
        while True:
            parsed = _parse_maria_gtid(text, pos)
            if parsed is None:
                raise MalformedGtidSet(text)
            gtid, pos = parsed
            gtids.append(gtid)
            if pos == n:
                break
            if text[pos] != ",":
                raise MalformedGtidSet(text)
            pos += 1
        domains = {g.domain for g in gtids}
        if len(domains) != len(gtids):
            raise MalformedGtidSet(text)
        return cls(gtids)

    def __str__(self) -> str:
        return ",".join(str(g) for g in self._gtids)

    def __repr__(self) -> str:
        return f"MariaPosition.parse({str(self)!r})"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (MariaPosition.parse, (str(self),))

    def gtids(self) -> tuple[MariaGtid, ...]:
        """The GTIDs, sorted by domain."""
        return self._gtids

    @property
    def domains(self) -> tuple[int, ...]:
        """The domains present, sorted."""
        return tuple(g.domain for g in self._gtids)

    def get(self, domain: int) -> MariaGtid | None:
        """The GTID of ``domain``, if any."""
        return self._by_domain.get(domain)

    def __iter__(self) -> Iterator[MariaGtid]:
        return iter(self._gtids)

    def __len__(self) -> int:
        return len(self._gtids)

    def __bool__(self) -> bool:
        return bool(self._gtids)

    def is_empty(self) -> bool:
        """True when no domain is present."""
        return not self._gtids

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MariaPosition):
            return NotImplemented
        return self._gtids == other._gtids

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self._gtids)
        return h

    def covers(self, other: MariaPosition) -> bool:
        """For every domain of ``other`` we are at least at its seq_no (what
        ``MASTER_GTID_WAIT(other)`` waits for).  Server ids do not matter."""
        mine = self._by_domain
        for gtid in other._gtids:
            have = mine.get(gtid.domain)
            if have is None or have.seq_no < gtid.seq_no:
                return False
        return True

    def merge(self, other: MariaPosition | Iterable[MariaGtid]) -> MariaPosition:
        """Per domain, the GTID with the highest seq_no (ties go to the higher server_id, so
        merging is commutative)."""
        gtids = other._gtids if isinstance(other, MariaPosition) else tuple(other)
        by_domain = dict(self._by_domain)
        changed = False
        for gtid in gtids:
            have = by_domain.get(gtid.domain)
            if have is None or (gtid.seq_no, gtid.server_id) > (have.seq_no, have.server_id):
                by_domain[gtid.domain] = gtid
                changed = True
        return MariaPosition._wrap(by_domain) if changed else self

    def add(self, gtid: MariaGtid) -> MariaPosition:
        """``merge`` of a single GTID."""
        return self.merge((gtid,))


#: Either flavour's GTID state, for code that does not care which server it talks to.
GtidState: TypeAlias = GtidSet | MariaPosition
