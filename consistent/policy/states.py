"""Flavour-agnostic operations on a session's required set and a replica's executed state.

MySQL speaks of GTID sets (``uuid:1-5``), MariaDB of positions (one ``domain-server-seq`` per
domain); the policy only needs four things from either: merge two states, ask whether one covers
another, compute what is still missing, and estimate how far apart two states are.

Tokens
------
A consistency token is the required set as text, tagged with its flavour so a MySQL token is not
fed to a MariaDB session by accident::

    mysql:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4b2a…:1-3
    mariadb:0-1-1042,1-2-17

The tag is optional when reading (the two syntaxes are disjoint, so the flavour follows from the
text), always written when the set is non-empty, and the empty token ``""`` requires nothing on
either flavour.  A token of the wrong flavour, or text that is neither, raises
:class:`~consistent.errors.MalformedGtidSet` (errno 1772), the error mysqld gives for a bad set.
So does a token longer than :data:`MAX_TOKEN_LENGTH`, before any of it is parsed: parsing costs
about a microsecond a byte (MariaDB positions), and a session's token is read on the statement
path, so its size is bounded.
"""

from __future__ import annotations

from typing import Final

from consistent.errors import InterfaceError, MalformedGtid, MalformedGtidSet
from consistent.gtid import GtidSet, GtidState, MariaGtid, MariaPosition
from consistent.vocabulary import FlavorName

__all__ = [
    "MAX_TOKEN_LENGTH",
    "FlavorName",
    "covers",
    "distance",
    "empty_state",
    "flavor_of",
    "format_state",
    "format_token",
    "merge",
    "missing",
    "parse_state",
    "parse_token",
    "parse_tracked",
]

#: The longest token accepted, in characters: a MySQL set of about 1,400 server UUIDs with one
#: interval each, or a MariaDB position of about 3,000 domains.
MAX_TOKEN_LENGTH: Final = 64 * 1024

_PREFIXES: dict[str, FlavorName] = {"mysql:": "mysql", "mariadb:": "mariadb"}
# Immutable empty states, returned when nothing is missing.
_NO_GTIDS = GtidSet()
_NO_POSITION = MariaPosition()


def flavor_of(state: GtidState) -> FlavorName:
    """``"mysql"`` for a :class:`GtidSet`, ``"mariadb"`` for a :class:`MariaPosition`."""
    return "mysql" if isinstance(state, GtidSet) else "mariadb"


def empty_state(flavor: FlavorName) -> GtidState:
    """The state that requires nothing, in ``flavor``'s type."""
    return GtidSet() if flavor == "mysql" else MariaPosition()


def parse_state(text: str, flavor: FlavorName, *, tags: bool = True) -> GtidState:
    """Parse server text (``gtid_executed``, ``gtid_binlog_pos``…) in ``flavor``'s syntax
    (``tags=False``: a MySQL server before 8.3, whose GTIDs have no tags)."""
    if flavor == "mysql":
        return GtidSet.parse(text, tags=tags)
    return MariaPosition.parse(text.strip())


def parse_tracked(text: str, flavor: FlavorName, *, tags: bool = True) -> GtidState:
    """A GTID text from an OK packet, parsed in ``flavor``'s syntax (raises
    :class:`~consistent.errors.MalformedGtidSet`); ``tags=False`` for a MySQL server before
    8.3, which has no tagged GTIDs.

    MariaDB's ``last_gtid`` is one plain ``domain-server-seq``: for that shape, splitting and
    three ``int()`` take half the time of the general parser, which follows MariaDB's
    character-level grammar.  The result is the same (a property test checks it); anything
    else, out-of-range numbers included, goes through the general parser.
    """
    if flavor == "mariadb":
        parts = text.split("-")
        if len(parts) == 3 and text.isascii() and all(part.isdigit() for part in parts):
            try:
                return MariaPosition((MariaGtid(int(parts[0]), int(parts[1]), int(parts[2])),))
            except MalformedGtid:
                pass  # out of range: the general parser rejects it with the right error
    return parse_state(text, flavor, tags=tags)


def _mismatch(a: GtidState, b: GtidState) -> InterfaceError:
    return InterfaceError(
        f"cannot combine a {flavor_of(a)} state with a {flavor_of(b)} state ({a!s} / {b!s})"
    )


def _same_flavor(a: GtidState, b: GtidState) -> None:
    if type(a) is not type(b):
        raise _mismatch(a, b)


def merge(a: GtidState | None, b: GtidState | None) -> GtidState | None:
    """Union of two states (per-domain maximum on MariaDB); ``None`` means "nothing known"."""
    if a is None:
        return b
    if b is None:
        return a
    _same_flavor(a, b)
    if isinstance(a, GtidSet):
        assert isinstance(b, GtidSet)
        return a | b
    assert isinstance(b, MariaPosition)
    return a.merge(b)


def covers(known: GtidState | None, required: GtidState) -> bool:
    """True when a server known to have executed ``known`` has certainly executed ``required``."""
    if not required:
        return True
    if known is None:
        return False
    # Every read ranks every replica with this: the flavor check is the type tests themselves.
    if isinstance(required, MariaPosition):
        if isinstance(known, MariaPosition):
            return known.covers(required)
    elif isinstance(known, GtidSet):
        return required <= known
    raise _mismatch(known, required)


def missing(required: GtidState, known: GtidState | None) -> GtidState:
    """The part of ``required`` a server known to have ``known`` may still lack: a set
    difference on MySQL, the domains whose seq_no is not reached yet on MariaDB.  Waiting for
    the result and then for nothing else is enough to cover ``required``."""
    if known is None or not required:
        return required
    _same_flavor(required, known)
    if isinstance(required, GtidSet):
        assert isinstance(known, GtidSet)
        return _NO_GTIDS if required <= known else required - known
    assert isinstance(known, MariaPosition)
    behind = []
    for gtid in required.gtids():
        have = known.get(gtid.domain)
        if have is None or have.seq_no < gtid.seq_no:
            behind.append(gtid)
    if not behind:
        return _NO_POSITION
    return required if len(behind) == len(required) else MariaPosition(behind)


def distance(required: GtidState, known: GtidState | None) -> int:
    """How many transactions of ``required`` a server at ``known`` may still have to apply
    (0 when covered).  Used only to rank replicas, so an estimate is enough on MariaDB."""
    if covers(known, required):
        return 0
    lacking = missing(required, known)
    if isinstance(lacking, GtidSet):
        return len(lacking)
    total = 0
    for gtid in lacking.gtids():
        have = known.get(gtid.domain) if isinstance(known, MariaPosition) else None
        total += gtid.seq_no - (have.seq_no if have is not None else 0)
    return total


def format_state(state: GtidState) -> str:
    """``state``'s canonical one-line text (no flavour tag); :func:`parse_state` reads it back."""
    if isinstance(state, GtidSet):
        return state.to_text(",")
    return str(state)


def format_token(state: GtidState | None) -> str:
    """The token for ``state``: ``""`` when nothing is required, else ``flavour:text``."""
    if not state:
        return ""
    return f"{flavor_of(state)}:{format_state(state)}"


def parse_token(token: object, flavor: FlavorName) -> GtidState:
    """Parse a token for a session of ``flavor``.

    Raises :class:`MalformedGtidSet` (1772) for text that is not a token of that flavour, or
    is longer than :data:`MAX_TOKEN_LENGTH`.
    """
    if not isinstance(token, str):
        raise MalformedGtidSet(repr(token))
    if len(token) > MAX_TOKEN_LENGTH:
        raise MalformedGtidSet(token[:200])
    text = token.strip()
    lowered = text[:8].lower()
    tagged: FlavorName | None = None
    for prefix, name in _PREFIXES.items():
        if lowered.startswith(prefix):
            tagged = name
            text = text[len(prefix) :].strip()
            break
    if tagged is not None and tagged != flavor:
        raise MalformedGtidSet(token)
    if not text:
        return empty_state(flavor)
    try:
        return parse_state(text, flavor)
    except ValueError as e:  # a number past int()'s digit limit
        raise MalformedGtidSet(token) from e
