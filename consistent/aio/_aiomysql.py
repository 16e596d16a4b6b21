"""The only module of the asyncio form that touches aiomysql internals.

aiomysql is PyMySQL's protocol code made asynchronous: it reuses PyMySQL's packet classes
(``OKPacketWrapper`` keeps the bytes after an OK packet's warning count in ``message``), its
converters and its ``pymysql.err`` exceptions.  So the OK-packet decoding, the error translation
and the disconnect test of :mod:`consistent.dbapi._pymysql` apply unchanged; this module adds
what differs:

* :class:`TrackingConnection` asks for ``CLIENT.SESSION_TRACK`` and hands every OK packet's
  status and tail to an observer, from the two coroutines that see them:
  ``Connection._read_query_result()`` (queries; its buffered branch, which reads a
  ``MySQLResult``, is inlined) and ``Connection._read_ok_packet()``
  (``commit()``, ``rollback()``, ``begin()``, ``select_db()``, ``autocommit()``, ``ping()``),
  as :class:`consistent.dbapi._pymysql.TrackingConnection` does for PyMySQL;
* :func:`driver_options` maps the PyMySQL keywords a configuration holds onto aiomysql's.

``tests/aio/test_aiomysql_internals.py`` fails loudly if a name used here changes in aiomysql.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import aiomysql
import aiomysql.connection
import aiomysql.cursors
import pymysql.charset
import pymysql.converters
import pymysql.err
from aiomysql.connection import MySQLResult
from pymysql.constants import CLIENT
from pymysql.protocol import OKPacketWrapper

from consistent import errors
from consistent.dbapi.cursorbase import driver_classes, driver_kind
from consistent.protocol.constants import ServerStatus

__all__ = [
    "CURSOR_CLASSES",
    "TrackingConnection",
    "cursor_kind",
    "driver_options",
    "query_value",
    "set_character_set",
]

_STATE_CHANGED: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)

#: PyMySQL keywords aiomysql takes under the same name.
_SAME: Final = frozenset(
    {
        "user",
        "password",
        "charset",
        "sql_mode",
        "read_default_file",
        "conv",
        "use_unicode",
        "client_flag",
        "init_command",
        "connect_timeout",
        "read_default_group",
        "autocommit",
        "local_infile",
        "ssl",
        "auth_plugin",
        "program_name",
        "server_public_key",
    }
)
#: PyMySQL keywords the asyncio form applies itself (its deadlines), not aiomysql.
_OURS: Final = frozenset({"read_timeout", "write_timeout"})
#: What ``database`` is called in aiomysql.
_RENAMED: Final = {"database": "db"}

#: The aiomysql cursor class behind each (unbuffered, as_dict) combination.
CURSOR_CLASSES: Final[dict[tuple[bool, bool], type[aiomysql.cursors.Cursor]]] = driver_classes(
    aiomysql.cursors.Cursor,
    aiomysql.cursors.SSCursor,
    aiomysql.cursors.DictCursor,
    aiomysql.cursors.SSDictCursor,
)


def cursor_kind(cls: object) -> tuple[bool, bool] | None:
    """``(unbuffered, as_dict)`` of an aiomysql cursor class or a subclass of one; ``None`` for
    anything else."""
    return driver_kind(
        cls, aiomysql.cursors.Cursor, aiomysql.cursors.SSCursor, aiomysql.cursors._DictCursorMixin
    )


def driver_options(options: Mapping[str, Any], server: str) -> dict[str, Any]:
    """aiomysql's keywords for the PyMySQL ``options`` of ``server`` (``host`` and ``port``
    included); :class:`~consistent.errors.NotSupportedError` for a PyMySQL option aiomysql does
    not have, set to anything but its default (rather than ignoring it)."""
    result: dict[str, Any] = {"host": options["host"], "port": options["port"]}
    unsupported = []
    for name, value in options.items():
        if name in ("host", "port") or name in _OURS:
            continue
        if name in _SAME:
            result[name] = value
        elif name in _RENAMED:
            result[_RENAMED[name]] = value
        elif value is None or value is False or (name == "ssl_disabled" and value):
            continue  # PyMySQL's default, which is aiomysql's behaviour anyway
        else:
            unsupported.append(name)
    if unsupported:
        raise errors.NotSupportedError(
            f"{server}: option(s) {sorted(unsupported)} are PyMySQL's and aiomysql, which "
            "consistent.aio runs on, has no equivalent"
        )
    if result.get("charset") is None:
        result.pop("charset", None)
    return result


OkObserver = Any  # Callable[[int, bytes], None]; Any keeps the attribute cheap to call

_BASE_READ_QUERY_RESULT: Final = aiomysql.connection.Connection._read_query_result
_SEQUENCES: Final = (tuple, list, set, frozenset)
# A tuple, not ``bytes | bytearray``: that expression builds a union object at every call.
_BINARY: Final = (bytes, bytearray)


class TrackingConnection(aiomysql.connection.Connection):  # type: ignore[misc]
    """An aiomysql connection that asks for session tracking and hands every OK packet's
    status and raw tail to ``observer(status, tail)`` (see
    :class:`consistent.dbapi._pymysql.TrackingConnection`, its blocking twin)."""

    def __init__(self, *args: Any, observer: OkObserver | None = None, **kwargs: Any) -> None:
        self._consistent_observer = observer
        kwargs["client_flag"] = int(kwargs.get("client_flag", 0)) | CLIENT.SESSION_TRACK
        super().__init__(*args, **kwargs)

    async def _read_ok_packet(self) -> bool:
        # aiomysql's own body (it keeps the packet to itself), plus the observer.
        pkt = await self._read_packet()
        if not pkt.is_ok_packet():
            raise pymysql.err.OperationalError(2014, "Command Out of Sync")
        ok = OKPacketWrapper(pkt)
        self.server_status = ok.server_status
        observer = self._consistent_observer
        if observer is not None and ok.message and ok.server_status & _STATE_CHANGED:
            observer(ok.server_status, ok.message)
        return True

    async def _read_query_result(self, unbuffered: bool = False) -> None:
        if unbuffered:
            await _BASE_READ_QUERY_RESULT(self, unbuffered)
        else:
            # aiomysql's buffered branch, inlined: every statement takes it, and the call to
            # the base coroutine would be one more coroutine per statement.
            self._result = None
            result = MySQLResult(self)
            await result.read()
            self._result = result
            self._affected_rows = result.affected_rows
            if result.server_status is not None:
                self.server_status = result.server_status
        result = self._result
        # ``message`` stays None for result sets (they end in EOF): only OKs get here.
        if result is not None and result.message:
            observer = self._consistent_observer
            status = result.server_status
            if observer is not None and status & _STATE_CHANGED:
                observer(status, result.message)

    def escape(self, obj: Any) -> str:
        """Escape a parameter as PyMySQL 1.2's ``Connection.escape`` does.

        aiomysql 0.3's own ``escape`` relies on two things PyMySQL 1.2 removed: it calls
        ``escape_bytes_prefixed`` (now a string, so every ``bytes`` parameter failed with
        ``TypeError``) and lets ``escape_item`` expand sequences (now refused, so
        ``IN %s`` with a tuple failed).  Bytes become a hexadecimal literal (valid under any
        character set and ``NO_BACKSLASH_ESCAPES``); a tuple, list or set becomes a
        parenthesised list of its escaped items."""
        if isinstance(obj, str):
            return f"'{self.escape_string(obj)}'"
        if isinstance(obj, _BINARY):
            return f"X'{obj.hex()}'"
        # ``type(...) in``, not ``isinstance``: a struct_time is a tuple subclass, not a list.
        if type(obj) in _SEQUENCES:
            return "(" + ",".join([self.escape(item) for item in obj]) + ")"
        return pymysql.converters.escape_item(obj, self._charset)  # type: ignore[no-any-return]

    @property
    def in_transaction(self) -> bool:
        """``SERVER_STATUS_IN_TRANS`` of the last OK packet."""
        return bool(self.server_status & _IN_TRANS)

    @property
    def open(self) -> bool:
        """True while the socket is open (PyMySQL's name)."""
        return self._writer is not None


async def query_value(conn: TrackingConnection, sql: str) -> Any:
    """Run a query returning one row and return its first column (``None`` for no row)."""
    await conn.query(sql)
    result = conn._result
    rows = result.rows if result is not None else None
    if not rows:
        return None
    return rows[0][0]


async def set_character_set(
    conn: TrackingConnection, charset: str, collation: str | None = None
) -> None:
    """``SET NAMES charset [COLLATE collation]`` and the connection's encoding with it."""
    encoding = pymysql.charset.charset_by_name(charset).encoding
    sql = f"SET NAMES {charset}" + (f" COLLATE {collation}" if collation else "")
    await conn.query(sql)
    conn._charset = charset
    conn._encoding = encoding
