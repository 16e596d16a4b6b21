"""Connection ids as clients see them: the proxy's own, ``KILL``, ``CONNECTION_ID()`` and
``SHOW PROCESSLIST``.

One scheme (README "Connection ids and KILL"):

* every session has a proxy id, drawn at random from ``[2**30, 2**31)``: not sequential, not
  guessable, within the signed 32-bit range ``CONNECTION_ID()`` has, and far above the
  servers' own thread ids, which count up from 1, so that the two can never be confused;
* the handshake announces it, ``SELECT CONNECTION_ID()`` answers it, ``SHOW [FULL]
  PROCESSLIST`` lists the sessions of the same proxy user under it, and ``KILL`` takes it;
* ``CONNECTION_ID()`` inside any other statement runs on the primary (the classifier sends it
  there) and gives the thread id of the session's primary connection; ``KILL`` takes that id
  too and maps it back to its session;
* ``KILL`` and ``KILL QUERY`` act only on the sessions of the same proxy user, else 1095, as
  the servers answer; ``KILL QUERY`` interrupts what that one session runs on its own backend
  connections, never another session that shares the backend account.  No ``KILL`` ever
  reaches a server as the client wrote it: forms the proxy cannot honour this way
  (``KILL QUERY ID``, an expression, ``KILL`` in a multi-statement or a prepared statement)
  are refused.

This module parses those statements and builds the proxy's answers; the session
(:mod:`proxy.sessioncommands`) carries them out.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Final

from consistent.classify import Classification, PrimaryReason
from consistent.classify.lexer import Token, TokenType, full_tokens, unquote_identifier
from consistent.protocol import (
    Charset,
    ColumnDefinition41,
    ColumnFlag,
    ColumnType,
    ServerStatus,
    build_text_resultset,
)
from proxy.stream import frame

__all__ = [
    "ID_FLOOR",
    "THREAD_REASONS",
    "ConnectionIdQuery",
    "Kill",
    "ProcessList",
    "ProcessRow",
    "Refusal",
    "ThreadStatement",
    "connection_id_result",
    "kill_in_prepare",
    "last_insert_id_result",
    "new_session_id",
    "parse_last_insert_id",
    "parse_thread_statement",
    "processlist_result",
]

#: Proxy ids are drawn from ``[ID_FLOOR, 2 * ID_FLOOR)``.
ID_FLOOR: Final = 1 << 30
#: The classifier's reasons of the statements this module may answer (a cheap first filter).
THREAD_REASONS: Final = frozenset(
    {PrimaryReason.ADMIN, PrimaryReason.SERVER_STATE, PrimaryReason.CONNECTION_ID}
)
_INFO_LENGTH: Final = 100  # SHOW PROCESSLIST without FULL truncates Info to this


def new_session_id(taken: Container[int]) -> int:
    """A random proxy id that no live session (``taken``) has."""
    while True:
        candidate = ID_FLOOR + secrets.randbelow(ID_FLOOR)
        if candidate not in taken:
            return candidate


@dataclass(frozen=True, slots=True)
class Kill:
    """``KILL [HARD|SOFT] [CONNECTION|QUERY] id`` or ``KILL … USER name``."""

    #: A proxy id, or a server thread id of a session's primary connection.
    thread_id: int | None
    query_only: bool
    #: ``KILL USER``: the proxy user named (``None``: the caller's own, ``CURRENT_USER``).
    user: str | None = None
    by_user: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """A ``KILL`` the proxy will not send to a server, and why (ERR 1235 or 1295)."""

    what: str


@dataclass(frozen=True, slots=True)
class ConnectionIdQuery:
    """``SELECT CONNECTION_ID() [[AS] alias]``: ``column`` is the name mysqld would give."""

    column: str


@dataclass(frozen=True, slots=True)
class ProcessList:
    """``SHOW [FULL] PROCESSLIST``."""

    full: bool


ThreadStatement = Kill | Refusal | ConnectionIdQuery | ProcessList


def parse_thread_statement(stmt: Classification, text: str) -> ThreadStatement | None:
    """What the proxy answers itself for ``text`` (classified as ``stmt``), or ``None``:
    send it to a server."""
    if stmt.primary_reason not in THREAD_REASONS:
        return None
    if stmt.is_multi_statement:
        if any(part.first_keyword == "KILL" for part in stmt.parts):
            return Refusal("KILL in a multi-statement")
        return None
    keyword = stmt.first_keyword
    if keyword == "KILL":
        return _kill(_tokens(text))
    if keyword == "SHOW":
        return _processlist(_tokens(text))
    if keyword == "SELECT" and stmt.primary_reason == PrimaryReason.CONNECTION_ID:
        return _connection_id(_tokens(text), text)
    return None


def kill_in_prepare(stmt: Classification) -> bool:
    """Whether a statement to prepare is or holds a ``KILL`` (refused: the proxy would not
    see its id when it runs)."""
    if stmt.first_keyword == "KILL":
        return True
    return any(part.first_keyword == "KILL" for part in stmt.parts)


def _tokens(text: str) -> list[Token]:
    tokens = full_tokens(text)
    if tokens and tokens[-1].type == TokenType.PUNCT and tokens[-1].text == ";":
        tokens.pop()
    return tokens


def _kill(tokens: Sequence[Token]) -> ThreadStatement:
    i = 1
    if i < len(tokens) and tokens[i].is_word("HARD", "SOFT"):
        i += 1
    query_only = False
    if i < len(tokens) and tokens[i].is_word("CONNECTION", "QUERY"):
        query_only = tokens[i].upper == "QUERY"
        i += 1
        if query_only and i < len(tokens) and tokens[i].is_word("ID"):
            return Refusal("KILL QUERY ID through the proxy (query ids are the servers')")
    rest = tokens[i:]
    if len(rest) == 1 and rest[0].type == TokenType.NUMBER and rest[0].text.isdigit():
        return Kill(int(rest[0].text), query_only)
    if rest and rest[0].is_word("USER"):
        name = _user_name(rest[1:])
        if name is not None:
            return Kill(None, query_only, user=name or None, by_user=True)
    return Refusal("KILL of anything but a connection id or USER through the proxy")


def _user_name(tokens: Sequence[Token]) -> str | None:
    """``name``, ``'name'@'host'``, ``CURRENT_USER[()]``: the user part ('' for the
    current user); ``None`` if it is none of these."""
    if not tokens:
        return None
    first = tokens[0]
    rest = list(tokens[1:])
    if first.is_word("CURRENT_USER"):
        if [t.text for t in rest] in ([], ["(", ")"]):
            return ""
        return None
    if first.type == TokenType.STRING:
        name = first.text[1:-1].replace(first.text[0] * 2, first.text[0])
    elif first.type == TokenType.BACKTICK:
        name = unquote_identifier(first.text)
    elif first.type == TokenType.WORD:
        name = first.text
    else:
        return None
    # An @host part (lexed as a user variable) does not narrow anything at the proxy.
    if rest and rest[0].type == TokenType.USERVAR:
        rest = rest[1:]
    return name if not rest else None


def _processlist(tokens: Sequence[Token]) -> ProcessList | None:
    words = [t.upper for t in tokens]
    if words == ["SHOW", "PROCESSLIST"]:
        return ProcessList(full=False)
    if words == ["SHOW", "FULL", "PROCESSLIST"]:
        return ProcessList(full=True)
    return None


def _connection_id(tokens: Sequence[Token], text: str) -> ConnectionIdQuery | None:
    if len(tokens) < 4 or not tokens[1].is_word("CONNECTION_ID"):
        return None
    if [t.text for t in tokens[2:4]] != ["(", ")"]:
        return None
    column = text[tokens[1].start : tokens[3].end]
    alias = list(tokens[4:])
    if alias and alias[0].is_word("AS"):
        alias = alias[1:]
        if not alias:
            return None
    if not alias:
        return ConnectionIdQuery(column)
    if len(alias) != 1 or alias[0].type not in (TokenType.WORD, TokenType.BACKTICK):
        return None
    if alias[0].type == TokenType.WORD and alias[0].upper in _NOT_ALIASES:
        return None
    return ConnectionIdQuery(unquote_identifier(alias[0].text))


# Words after ``SELECT CONNECTION_ID()`` that start a clause, not an alias.
_NOT_ALIASES: Final = frozenset(
    {"FROM", "WHERE", "INTO", "LIMIT", "FOR", "LOCK", "UNION", "ORDER", "GROUP", "HAVING"}
)


# ----------------------------------------------------------------- answers


def _frame_all(payloads: Sequence[bytes], seq: int) -> bytes:
    parts = []
    for payload in payloads:
        parts.append(frame(payload, seq))
        seq += 1
    return b"".join(parts)


_LAST_INSERT_ID: Final = re.compile(
    r"\s*SELECT\s+(LAST_INSERT_ID\s*\(\s*\))(?:\s+(?:AS\s+)?(`(?:[^`]|``)+`|[A-Za-z_][\w$]*))?"
    r"(?:\s+FROM\s+DUAL)?(?:\s+LIMIT\s+1)?\s*;?\s*",
    re.IGNORECASE,
)


def parse_last_insert_id(text: str) -> str | None:
    """The column name of a bare ``SELECT LAST_INSERT_ID() [[AS] alias] [FROM DUAL] [LIMIT 1]``
    (what mysqld would name it), else ``None``: anything more (another column, an argument, a
    table) goes to a server."""
    if len(text) > 200:
        return None
    match = _LAST_INSERT_ID.fullmatch(text)
    if match is None:
        return None
    alias = match.group(2)
    if alias is None:
        return match.group(1)  # as written, as mysqld names the column
    if alias.upper() in _NOT_ALIASES:
        return None
    if alias.startswith("`"):
        return alias[1:-1].replace("``", "`")
    return alias


def last_insert_id_result(
    column: str, value: int, capabilities: int, status: ServerStatus, seq: int
) -> bytes:
    """``SELECT LAST_INSERT_ID()``'s result set, typed as the server types it (BIGINT
    UNSIGNED, not null)."""
    definition = ColumnDefinition41(
        name=column,
        type=ColumnType.LONGLONG,
        charset=Charset.BINARY,
        column_length=21,
        flags=ColumnFlag.NOT_NULL | ColumnFlag.UNSIGNED | ColumnFlag.BINARY | ColumnFlag.NUM,
    )
    payloads = build_text_resultset([definition], [[value]], capabilities, status)
    return _frame_all(payloads, seq)


def connection_id_result(
    column: str, session_id: int, capabilities: int, status: ServerStatus, seq: int
) -> bytes:
    """``SELECT CONNECTION_ID()``'s result set, typed as MariaDB types it (INT, not null)."""
    definition = ColumnDefinition41(
        name=column,
        type=ColumnType.LONG,
        charset=Charset.BINARY,
        column_length=10,
        flags=ColumnFlag.NOT_NULL | ColumnFlag.BINARY | ColumnFlag.NUM,
    )
    payloads = build_text_resultset([definition], [[session_id]], capabilities, status)
    return _frame_all(payloads, seq)


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One session as ``SHOW PROCESSLIST`` lists it."""

    id: int
    user: str
    host: str
    db: str | None
    command: str
    time: int
    state: str
    info: str | None


def _text(name: str, length: int, *, nullable: bool = True) -> ColumnDefinition41:
    flags = ColumnFlag(0) if nullable else ColumnFlag.NOT_NULL
    return ColumnDefinition41(
        name=name,
        type=ColumnType.VAR_STRING,
        charset=Charset.UTF8MB4_GENERAL_CI,
        column_length=length,
        flags=flags,
    )


def _number(name: str, kind: ColumnType, length: int, decimals: int = 0) -> ColumnDefinition41:
    return ColumnDefinition41(
        name=name,
        type=kind,
        charset=Charset.BINARY,
        column_length=length,
        flags=ColumnFlag.NOT_NULL | ColumnFlag.BINARY | ColumnFlag.NUM,
        decimals=decimals,
    )


def processlist_result(
    rows: Sequence[ProcessRow],
    *,
    full: bool,
    mariadb: bool,
    capabilities: int,
    status: ServerStatus,
    seq: int,
) -> bytes:
    """``SHOW [FULL] PROCESSLIST``'s result set with the columns (and types) of the
    servers' own: MariaDB adds ``Progress``."""
    columns = [
        _number("Id", ColumnType.LONGLONG, 11),
        _text("User", 512, nullable=False),
        _text("Host", 256, nullable=False),
        _text("db", 256),
        _text("Command", 64, nullable=False),
        _number("Time", ColumnType.LONG, 7),
        _text("State", 120),
        _text("Info", 400 if not full else 0xFFFFFF),
    ]
    if mariadb:
        columns.append(_number("Progress", ColumnType.NEWDECIMAL, 7, decimals=3))
    values: list[list[str | int | None]] = []
    for row in rows:
        info = row.info if full or row.info is None else row.info[:_INFO_LENGTH]
        value: list[str | int | None] = [
            row.id,
            row.user,
            row.host,
            row.db,
            row.command,
            row.time,
            row.state,
            info,
        ]
        if mariadb:
            value.append("0.000")
        values.append(value)
    return _frame_all(build_text_resultset(columns, values, capabilities, status), seq)
