"""MySQL's GTIDs: one transaction id (:class:`Gtid`) and an immutable set of them
(:class:`GtidSet`) with mysqld's text format and set algebra."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from immutables import Map

from consistent.errnos import ER
from consistent.errors import DataError, MalformedGtid, MalformedGtidSet
from consistent.gtid._intervals import (
    _Flat,
    _flat_add,
    _flat_difference,
    _flat_intersection,
    _flat_len,
    _flat_subset,
    _flat_union,
    _normalise,
)
from consistent.gtid._scan import (
    _TAG_RE,
    _UUID_LENGTH,
    _UUID_RE,
    MAX_GNO,
    _cut_at_nul,
    _parse_gtid,
    _parse_set_fast,
    _parse_set_slow,
    _source_key,
)

__all__ = ["MAX_GNO", "TAGS_SINCE", "Gtid", "GtidSet", "gtid_tags_in"]

#: The first MySQL version whose GTIDs may carry a tag (``uuid:tag:gno``, WL#15294): 8.3.0.
TAGS_SINCE = (8, 3, 0)

# ER_GNO_EXHAUSTED, raised by Gtid_state::get_automatic_gno when a source has no GNO left.
_GNO_EXHAUSTED_MESSAGE = (
    "Impossible to generate Global Transaction Identifier: the integer component reached the "
    "maximal value. Restart the server with a new server_uuid."
)


def gtid_tags_in(server_version: str | bytes | None) -> bool:
    """Whether a MySQL server of ``server_version`` (``"8.0.36-log"``, ``"8.4.3"``) writes and
    reads tagged GTIDs: from 8.3 on.  A version that does not start with numbers is taken for
    the newest syntax, which also reads every untagged text."""
    if isinstance(server_version, bytes):
        server_version = server_version.decode("ascii", "replace")
    if not server_version:
        return True
    numbers: list[int] = []
    for part in server_version.split("-", 1)[0].split(".")[:3]:
        digits = part[: len(part) - len(part.lstrip("0123456789"))]
        if not digits:
            break
        numbers.append(int(digits))
    if not numbers:
        return True
    numbers += [0] * (3 - len(numbers))
    return tuple(numbers) >= TAGS_SINCE


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
    def parse(cls, text: str, *, tags: bool = True) -> Gtid:
        """Parse one GTID as ``SET gtid_next`` does; raises :class:`MalformedGtid` (1774).

        ``tags=False`` reads the syntax of servers before 8.3, where ``uuid:tag:gno`` is
        malformed."""
        parsed = _parse_gtid(text, tags)
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
    def parse(cls, text: str, *, tags: bool = True) -> GtidSet:
        """Parse GTID-set text exactly as mysqld does; raises :class:`MalformedGtidSet` (1772).

        The empty or all-whitespace string is the empty set.  A leading ``+`` is not accepted
        here; see :meth:`parse_with_plus` for ``SET GTID_PURGED = '+…'``.  ``tags=False``
        reads the syntax of servers before 8.3 (:func:`gtid_tags_in`): an item after a colon
        must be a number, so ``uuid:a`` is malformed there.
        """
        text = _cut_at_nul(text)
        flats = _parse_set_fast(text, tags)
        if flats is None:
            ranges, _ = _parse_set_slow(text, allow_plus=False, tags=tags)
            return cls._from_ranges(ranges)
        return cls._wrap(Map(flats))

    @classmethod
    def parse_with_plus(cls, text: str, *, tags: bool = True) -> tuple[GtidSet, bool]:
        """Parse text that may start with ``+`` (``SET GTID_PURGED``); returns the set and whether
        the ``+`` was there."""
        ranges, plus = _parse_set_slow(_cut_at_nul(text), allow_plus=True, tags=tags)
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
            raise DataError(int(ER.GNO_EXHAUSTED), _GNO_EXHAUSTED_MESSAGE, sqlstate="HY000")
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
