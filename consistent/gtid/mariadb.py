"""MariaDB's GTIDs: one ``domain-server_id-seq_no`` id (:class:`MariaGtid`) and a position
holding one per replication domain (:class:`MariaPosition`), with the scanners of MariaDB's
``sql/rpl_gtid.cc``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from consistent.errors import MalformedGtid, MalformedGtidSet
from consistent.gtid._scan import _DEC

__all__ = ["MariaGtid", "MariaPosition"]

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


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
