"""Statements the proxy answers itself; they never reach a server.

The consistency of a session is controlled with two session variables that exist only in the
proxy::

    SET @@consistent_level = 'read_latest'     -- eventual | read_own_writes |
                                               -- read_all_writes | read_latest | DEFAULT
    SELECT @@consistent_level                  -- one row, one column named @@consistent_level
    SELECT @@consistent_token                  -- the session's token ('' when it needs nothing)
    SET @@consistent_token = 'mariadb:0-1-42'  -- reads now see everything that token stands for

``SESSION.`` may prefix the name (``@@session.consistent_level``); the value may be quoted
with ``'`` or ``"`` or, for the level, be a bare word; ``:=`` works as ``=``; a trailing ``;``
is allowed; keywords are case-insensitive.  Anything else is sent to a server unchanged — the
syntax is kept this small so that it can never shadow a real statement.  A token read from one
proxy and set on a session of another carries causality between them (DESIGN "Consistency
levels").  A per-statement level also works as a leading comment hint, handled by the
classifier: ``/* consistent: level=eventual */ SELECT …``.

``KILL``, ``SELECT CONNECTION_ID()`` and ``SHOW PROCESSLIST`` are answered by the proxy too:
see :mod:`proxy.threads`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

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

__all__ = ["Intercept", "parse_intercept", "single_value_result"]

_NAME: Final = r"@@(?:session\.)?consistent_(?P<var>level|token)"
_SET: Final = re.compile(
    r"\s*SET\s+(?:SESSION\s+)?" + _NAME + r"\s*:?=\s*"
    r"(?:'(?P<sq>[^']*)'|\"(?P<dq>[^\"]*)\"|(?P<word>[A-Za-z_][A-Za-z0-9_\-]*))"
    r"\s*;?\s*\Z",
    re.IGNORECASE,
)
_SELECT: Final = re.compile(r"\s*SELECT\s+" + _NAME + r"\s*;?\s*\Z", re.IGNORECASE)
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)


@dataclass(frozen=True, slots=True)
class Intercept:
    """A recognised statement: ``SET`` (with ``value``) or ``SELECT`` of a variable."""

    action: str
    variable: str
    value: str | None = None
    #: The column name mysqld would give the SELECT (the expression as written).
    column: str = ""


def parse_intercept(sql: bytes) -> Intercept | None:
    """The intercepted statement ``sql`` is, or ``None`` (send it to a server)."""
    if b"@@" not in sql:
        return None
    text = sql.decode("utf-8", "surrogateescape")
    m = _SELECT.match(text)
    if m is not None:
        column = text.strip().rstrip(";").strip()[len("SELECT") :].strip()
        return Intercept("select", m["var"].lower(), column=column)
    m = _SET.match(text)
    if m is not None:
        value = m["sq"] if m["sq"] is not None else m["dq"] if m["dq"] is not None else m["word"]
        return Intercept("set", m["var"].lower(), value)
    return None


def single_value_result(
    column: str, value: str, capabilities: int, status: ServerStatus, seq: int
) -> bytes:
    """A one-row, one-column text result set, framed from sequence id ``seq``, as mysqld
    would send it to a client with ``capabilities``."""
    definition = ColumnDefinition41(
        name=column,
        type=ColumnType.VAR_STRING,
        charset=Charset.UTF8MB4_GENERAL_CI,
        column_length=max(len(value.encode("utf-8")), 1) * 4,
    )
    payloads = [
        build_column_count(1, capabilities),
        build_column_definition41(definition, capabilities),
    ]
    deprecate = bool(capabilities & _DEPRECATE_EOF)
    if not deprecate:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    payloads.append(build_text_row([value]))
    if deprecate:
        payloads.append(build_ok(OkPacket(status=status, header=0xFE), capabilities))
    else:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    parts = []
    for payload in payloads:
        parts.append(frame(payload, seq))
        seq += 1
    return b"".join(parts)
