"""Statements the proxy answers itself; they never reach a server.

The consistency of a session is controlled with two session variables that exist only in the
proxy::

    SET @@consistent_level = 'read_latest'     -- eventual | read_own_writes |
                                               -- read_all_writes | read_latest | DEFAULT
    SELECT @@consistent_level                  -- one row, one column named @@consistent_level
    SELECT @@consistent_token                  -- the session's token ('' when it needs nothing)
    SET @@consistent_token = 'mariadb:0-1-42'  -- reads now see everything that token stands for
    SELECT @@consistent_level, @@consistent_token AS token   -- one row, two columns

As for any session variable, the name may be written ``consistent_level``, ``@@consistent_level``,
``@@session.consistent_level`` or ``@@local.…``, after ``SET [SESSION | LOCAL]``; the value may be
quoted with ``'`` or ``"`` (with the server's escapes: ``\\'``, ``''``, ``\\\\``…, as client
libraries escape parameters) or, for the level, be a bare word; ``:=`` works as ``=``; a trailing
``;`` is allowed; keywords are case-insensitive.  A ``SELECT`` lists one or more of the two
variables, each optionally with an alias.  Anything else is sent to a server unchanged — the
syntax is kept this small so that it can never shadow a real statement.  A token read from one
proxy and set on a session of another carries causality between them (DESIGN "Consistency
levels").  A per-statement level also works as a leading comment hint, handled by the
classifier: ``/* consistent: level=eventual */ SELECT …``.

Parsing is linear in the statement's length and bounded: a statement longer than
:data:`MAX_INTERCEPT_LENGTH` is recognised from its first bytes only.  A ``SET`` of the token
that long is answered with error 1772 without reading its value (the token could not be longer
than :data:`~consistent.policy.MAX_TOKEN_LENGTH` anyway), one of the level with 1231; a
``SELECT`` that long goes to a server.

``KILL``, ``SELECT CONNECTION_ID()`` and ``SHOW PROCESSLIST`` are answered by the proxy too:
see :mod:`proxy.threads`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from consistent.policy import MAX_TOKEN_LENGTH
from consistent.protocol import (
    Capability,
    Charset,
    ColumnDefinition41,
    ColumnType,
    EofPacket,
    OkPacket,
    ServerStatus,
    build_column_count,
    build_column_definition41,
    build_eof,
    build_ok,
    build_text_row,
)
from proxy.stream import frame

__all__ = [
    "MAX_INTERCEPT_LENGTH",
    "NOT_FIXED_DEC_MARIADB",
    "NOT_FIXED_DEC_MYSQL",
    "Intercept",
    "mentions_variable",
    "parse_intercept",
    "result_set",
]

#: Statements longer than this (bytes) are recognised from their first bytes only.
MAX_INTERCEPT_LENGTH: Final = MAX_TOKEN_LENGTH + 1024
#: How far into a statement the variable's name must appear for it to be looked at.
_MENTION_WINDOW: Final = 512
#: Characters of an oversized value quoted in the error message (mysqld quotes 200).
_QUOTED: Final = 200

_MENTION: Final = re.compile(rb"consistent_(?:level|token)", re.IGNORECASE)
_NAME: Final = rb"(?:@@(?:(?:SESSION|LOCAL)\.)?)?consistent_(?P<var>level|token)\b"
_SET_HEAD: Final = re.compile(
    rb"\s*SET\s+(?:(?:SESSION|LOCAL)\s+)?" + _NAME + rb"\s*:?=\s*", re.IGNORECASE
)
_SELECT_HEAD: Final = re.compile(rb"\s*SELECT\s+", re.IGNORECASE)
_ITEM: Final = re.compile(
    rb"@@(?:(?:SESSION|LOCAL)\.)?consistent_(?P<var>level|token)\b"
    rb"(?:\s+(?:AS\s+)?(?:`(?P<bq>[^`]{1,64})`|'(?P<sq>[^'\\]{1,64})'|\"(?P<dq>[^\"\\]{1,64})\""
    rb"|(?P<word>[A-Za-z_][A-Za-z0-9_$]{0,63}\b)))?",
    re.IGNORECASE,
)
_COMMA: Final = re.compile(rb"\s*,\s*")
_WORD: Final = re.compile(rb"[A-Za-z_][A-Za-z0-9_\-]*")
_END: Final = re.compile(rb"\s*;?\s*")
#: What stops the scan of a quoted value: its quote, or a backslash when escapes are on.
_STOPS: Final = {
    (q, esc): re.compile(re.escape(bytes((q,))) + (rb"|\\" if esc else b""))
    for q in b"'\""
    for esc in (False, True)
}
#: mysqld's backslash escapes (the manual's "String Literals"); any other ``\x`` is ``x``,
#: except ``\%`` and ``\_``, which keep their backslash.
_ESCAPES: Final = {
    ord("0"): b"\x00",
    ord("'"): b"'",
    ord('"'): b'"',
    ord("b"): b"\x08",
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
    ord("Z"): b"\x1a",
    ord("\\"): b"\\",
    ord("%"): b"\\%",
    ord("_"): b"\\_",
}
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
#: ``decimals`` of a string column (``NOT_FIXED_DEC``): 39 in MariaDB, 31 in MySQL.
NOT_FIXED_DEC_MARIADB: Final = 39
NOT_FIXED_DEC_MYSQL: Final = 31


@dataclass(frozen=True, slots=True)
class Intercept:
    """A recognised statement: ``SET`` of a variable (with ``value``), or ``SELECT`` of
    ``columns``, each ``(variable, column name)`` in the order written."""

    action: str
    variable: str = ""
    value: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    #: A ``SET`` longer than :data:`MAX_INTERCEPT_LENGTH`: ``value`` holds only the start of
    #: what follows the ``=`` (for the error message).
    oversized: bool = False


def mentions_variable(sql: bytes) -> bool:
    """Whether ``sql`` names one of the proxy's variables near its start: the cheap test
    that decides whether :func:`parse_intercept` is worth calling."""
    return _MENTION.search(sql, 0, _MENTION_WINDOW) is not None


def parse_intercept(
    sql: bytes, *, length: int | None = None, backslash_escapes: bool = True
) -> Intercept | None:
    """The intercepted statement ``sql`` is, or ``None`` (send it to a server).

    ``sql`` may be the first bytes of a longer statement of ``length`` bytes (one that is
    still arriving).  ``backslash_escapes`` is false under ``NO_BACKSLASH_ESCAPES``.
    """
    total = len(sql) if length is None else length
    head = _SET_HEAD.match(sql)
    if head is not None:
        variable = head["var"].decode().lower()
        if total > MAX_INTERCEPT_LENGTH or len(sql) < total:
            start = head.end()
            if sql[start : start + 1] in (b"'", b'"'):
                start += 1
            quoted = sql[start : start + _QUOTED].decode("utf-8", "replace")
            return Intercept("set", variable, quoted, oversized=True)
        return _set_value(sql, head.end(), variable, backslash_escapes)
    if total > MAX_INTERCEPT_LENGTH or len(sql) < total:
        return None
    select = _SELECT_HEAD.match(sql)
    if select is None:
        return None
    return _select_items(sql, select.end())


def _set_value(sql: bytes, pos: int, variable: str, escapes: bool) -> Intercept | None:
    quote = sql[pos] if pos < len(sql) else 0
    if quote in (0x27, 0x22):  # ' or "
        literal = _literal(sql, pos + 1, quote, escapes)
        if literal is None:
            return None
        raw, pos = literal
    else:
        word = _WORD.match(sql, pos)
        if word is None:
            return None
        raw, pos = word[0], word.end()
    if _END.fullmatch(sql, pos) is None:
        return None
    return Intercept("set", variable, raw.decode("utf-8", "surrogateescape"))


def _literal(sql: bytes, pos: int, quote: int, escapes: bool) -> tuple[bytes, int] | None:
    """The value of the string literal whose opening quote is just before ``pos``, and the
    position after its closing quote; ``None`` when it is not closed.  Each step jumps to the
    next quote or backslash, so the scan is linear."""
    stops = _STOPS[quote, escapes]
    out = bytearray()
    n = len(sql)
    while True:
        found = stops.search(sql, pos)
        if found is None:
            return None
        at = found.start()
        out += sql[pos:at]
        if sql[at] == quote:
            if at + 1 < n and sql[at + 1] == quote:  # a doubled quote stands for one
                out.append(quote)
                pos = at + 2
                continue
            return bytes(out), at + 1
        if at + 1 >= n:
            return None
        escaped = sql[at + 1]
        out += _ESCAPES.get(escaped, sql[at + 1 : at + 2])
        pos = at + 2


def _select_items(sql: bytes, pos: int) -> Intercept | None:
    columns: list[tuple[str, str]] = []
    while True:
        item = _ITEM.match(sql, pos)
        if item is None:
            return None
        variable = item["var"].decode().lower()
        alias = item["bq"] or item["sq"] or item["dq"] or item["word"]
        if alias is not None:
            name = alias.decode("utf-8", "surrogateescape")
        else:
            name = sql[item.start() : item.end()].decode("utf-8", "surrogateescape")
        columns.append((variable, name))
        pos = item.end()
        comma = _COMMA.match(sql, pos)
        if comma is None:
            break
        pos = comma.end()
    if _END.fullmatch(sql, pos) is None:
        return None
    return Intercept("select", columns=tuple(columns))


def result_set(
    columns: list[tuple[str, str]],
    capabilities: int,
    status: ServerStatus,
    seq: int,
    *,
    charset: int = Charset.UTF8MB4_GENERAL_CI,
    decimals: int = NOT_FIXED_DEC_MARIADB,
) -> bytes:
    """A one-row text result set of ``(column name, value)`` pairs, framed from sequence id
    ``seq``, as the server sends ``SELECT @@a, @@b`` of string variables to a client with
    ``capabilities``: nullable ``VAR_STRING`` columns in the connection's ``charset``, four
    bytes a character long, with the server's "not fixed" decimals (MariaDB 39, MySQL 31)."""
    payloads = [build_column_count(len(columns), capabilities)]
    for name, value in columns:
        definition = ColumnDefinition41(
            name=name,
            type=ColumnType.VAR_STRING,
            charset=charset,
            column_length=max(len(value), 1) * 4,
            decimals=decimals,
        )
        payloads.append(build_column_definition41(definition, capabilities))
    deprecate = bool(capabilities & _DEPRECATE_EOF)
    if not deprecate:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    payloads.append(build_text_row([value for _name, value in columns]))
    if deprecate:
        payloads.append(build_ok(OkPacket(status=status, header=0xFE), capabilities))
    else:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    parts = []
    for payload in payloads:
        parts.append(frame(payload, seq))
        seq += 1
    return b"".join(parts)
