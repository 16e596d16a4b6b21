"""Scanners for MySQL GTID text that accept exactly what mysqld accepts, by version.

Each function is written after the C code it is named for (glibc ``strtoll``,
``Tag::from_cstring``, ``Tsid::from_cstring``, ``Gtid_set::add_gtid_text``,
``Gtid::parse_gtid_from_cstring``), so a string the server takes is taken here with the same
meaning and a string it rejects is rejected.  Canonical text first tries the regex fast path,
which gives the same result as the character scanner and falls back to it for everything else.

``tags`` chooses the syntax: with tags (MySQL 8.3 and later, the 8.4 code) an item after a colon
may be a tag; without (8.0 and 5.7, ``Sid::parse`` then ``parse_gno``) every item after a colon
must be a number, so ``uuid:a`` and ``uuid:1:`` are malformed.
"""

from __future__ import annotations

import re

from consistent.errors import MalformedGtidSet
from consistent.gtid._intervals import _Flat, _flat_union, _normalise

#: Largest usable GNO: mysqld rejects ``LLONG_MAX`` itself (it is also strtoll's overflow value).
MAX_GNO = 2**63 - 2
_LLONG_MAX = 2**63 - 1
_LLONG_MIN = -(2**63)
_GNO_END = MAX_GNO + 1  # exclusive upper bound of every interval
_TAG_MAX_LENGTH = 32  # mysql::gtid::tag_max_length
_UUID_LENGTH = 36

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


def _tsid_from_cstring(text: str, pos: int, tags: bool = True) -> tuple[int, str]:
    """``Tsid::from_cstring``: ``(characters consumed, source key)``; 0 consumed on error.
    Without ``tags`` it is 8.0's ``Sid::parse``: the UUID alone."""
    if _UUID_RE.match(text, pos) is None:
        return 0, ""
    uuid = text[pos : pos + _UUID_LENGTH].lower()
    if not tags:
        return _UUID_LENGTH, uuid
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


def _cut_at_nul(text: str) -> str:
    # The server hands the parser a C string: an embedded NUL ends it.
    nul = text.find("\x00")
    return text if nul < 0 else text[:nul]


def _parse_set_slow(
    text: str, allow_plus: bool, tags: bool = True
) -> tuple[dict[str, list[tuple[int, int]]], bool]:
    """``Gtid_set::add_gtid_text`` of mysqld 8.4 (8.0 without ``tags``), character by
    character."""
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
        used, key = _tsid_from_cstring(text, i, tags)
        if used == 0:
            raise malformed()
        uuid = key[:_UUID_LENGTH]
        i = _skip_ws(text, i + used)
        while i < n and text[i] == ":":
            i += 1
            if tags:
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


def _parse_set_fast(text: str, tags: bool = True) -> dict[str, _Flat] | None:
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
        if not tags or tagged(entry) is None:
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


def _parse_gtid(text: str, tags: bool = True) -> tuple[str, str | None, int] | None:
    """``Gtid::parse_gtid_from_cstring`` of mysqld 8.4 (8.0's ``Gtid::parse`` without
    ``tags``): ``(uuid, tag, gno)`` or None."""
    text = _cut_at_nul(text)
    m = _FAST_GTID_RE.fullmatch(text)
    if m is not None and (tags or m[2] is None):
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
    used, tag = _tag_from_cstring(text, i) if tags else (0, "")
    i = _skip_ws(text, i + used)
    if tag:
        if i >= n or text[i] != ":":
            return None
        i = _skip_ws(text, i + 1)
    gno, i = _parse_gno(text, i)
    if gno <= 0 or _skip_ws(text, i) != n:
        return None
    return uuid, tag or None, gno
