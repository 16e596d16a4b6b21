"""The only module that touches PyMySQL internals (STYLE rule 7).

PyMySQL does not parse the session-state part of OK packets, but it can be asked for it: the
``client_flag`` argument is OR-ed into the handshake unmasked, so ``CLIENT.SESSION_TRACK`` makes
the server append tracker data, and PyMySQL then keeps the raw bytes after the warning count in
``OKPacketWrapper.message`` / ``MySQLResult.message`` (reference §7).  Two methods see every OK
packet of a command:

* ``Connection._read_query_result()`` — queries and ``next_result()`` (its ``self._result``);
* ``Connection._read_ok_packet()`` — ``commit()``, ``rollback()``, ``begin()``,
  ``select_db()``, ``autocommit()``, ``ping()`` (callers discard its return value).

:class:`TrackingConnection` overrides both and hands each OK's status and tail to an observer,
decoded with our own codec.  Result sets end in an EOF packet (PyMySQL never sets
``CLIENT.DEPRECATE_EOF``), which carries no state: a ``SELECT`` reports nothing.

``tests/dbapi/test_pymysql_internals.py`` fails loudly if any name or signature used here
changes in PyMySQL.
"""

from __future__ import annotations

import errno as _errno
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pymysql
import pymysql.charset
import pymysql.connections
import pymysql.converters
import pymysql.cursors
import pymysql.err
from pymysql.constants import CLIENT

from consistent import errors
from consistent.dbapi.cursorbase import driver_classes, driver_kind
from consistent.errnos import CR, ER
from consistent.gtid import GtidState
from consistent.protocol.constants import ServerStatus
from consistent.protocol.lenenc import Reader
from consistent.protocol.responses import OkPacket
from consistent.protocol.session_state import (
    Schema,
    ok_tail_gtid_text,
    parse_session_state,
)
from consistent.protocol.session_state import gtid_info as _gtid_info

__all__ = [
    "CURSOR_CLASSES",
    "DISCONNECT_ERRNOS",
    "PYMYSQL_OPTIONS",
    "OkTail",
    "TrackingConnection",
    "charset_known",
    "cursor_kind",
    "decode_ok_tail",
    "encoders_for",
    "executed",
    "force_close",
    "is_disconnect",
    "is_server_error",
    "query_table",
    "query_value",
    "set_read_timeout",
    "tracked_gtid_text",
    "translate_error",
]

logger = logging.getLogger(__name__)

_NAMED: Final = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
#: The keyword arguments ``pymysql.connect`` accepts: ``consistent.connect`` passes any keyword
#: that is not its own to PyMySQL, so a name outside this set is a mistake to report at once
#: (a misspelt ``levle=`` would otherwise surface as a failed connection).
PYMYSQL_OPTIONS: Final = frozenset(
    name
    for name, parameter in inspect.signature(pymysql.connections.Connection).parameters.items()
    if parameter.kind in _NAMED
)

_STATE_CHANGED: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)

#: Client errors that mean the connection is gone (CR_CONNECTION_ERROR 2002,
#: CR_CONN_HOST_ERROR 2003, CR_SERVER_GONE_ERROR 2006, CR_SERVER_LOST 2013, CR_COMMANDS_OUT_OF_
#: SYNC 2014, CR_SERVER_LOST_EXTENDED 2055) and the server's "shutdown in progress" family
#: (ER_SERVER_SHUTDOWN 1053, ER_CON_COUNT_ERROR 1040, ER_CONNECTION_KILLED 1927, 4031 idle
#: timeout).  https://dev.mysql.com/doc/mysql-errors/8.4/en/client-error-reference.html
DISCONNECT_ERRNOS: Final[frozenset[int]] = frozenset(
    {
        CR.CONNECTION_ERROR,
        CR.CONN_HOST_ERROR,
        CR.SERVER_GONE_ERROR,
        CR.SERVER_LOST,
        CR.COMMANDS_OUT_OF_SYNC,
        CR.SERVER_LOST_EXTENDED,
        ER.CON_COUNT_ERROR,
        ER.SERVER_SHUTDOWN,
        ER.CONNECTION_KILLED,
        ER.CLIENT_INTERACTION_TIMEOUT,
    }
)

#: The PyMySQL cursor class behind each (unbuffered, as_dict) combination.
CURSOR_CLASSES: Final[dict[tuple[bool, bool], type[pymysql.cursors.Cursor]]] = driver_classes(
    pymysql.cursors.Cursor,
    pymysql.cursors.SSCursor,
    pymysql.cursors.DictCursor,
    pymysql.cursors.SSDictCursor,
)


def cursor_kind(cls: object) -> tuple[bool, bool] | None:
    """``(unbuffered, as_dict)`` of a PyMySQL cursor class or a subclass of one (as PyMySQL
    builds them: unbuffered from ``SSCursor``, dict rows from ``DictCursorMixin``); ``None``
    for anything else."""
    return driver_kind(
        cls, pymysql.cursors.Cursor, pymysql.cursors.SSCursor, pymysql.cursors.DictCursorMixin
    )


def executed(cursor: pymysql.cursors.Cursor) -> str | bytes | bytearray | None:
    """A PyMySQL cursor's ``_executed``: the last statement it sent, parameters interpolated
    (bytes for the multi-row ``INSERT`` that ``executemany`` builds)."""
    return cursor._executed  # type: ignore[no-any-return]


def encoders_for(conv: Any) -> dict[Any, Any]:
    """The ``encoders`` mapping PyMySQL builds from its ``conv`` option (its default
    conversions when ``None``): the entries keyed by Python type, not by field type."""
    source = pymysql.converters.conversions if conv is None else conv
    return {k: v for k, v in source.items() if type(k) is not int}


def charset_known(charset: str) -> bool:
    """True when PyMySQL knows ``charset`` (``set_character_set`` needs its encoding)."""
    return pymysql.charset.charset_by_name(charset) is not None


_ERROR_CLASSES: Final[dict[type[BaseException], type[errors.Error]]] = {
    pymysql.err.Warning: errors.Error,
    pymysql.err.InterfaceError: errors.InterfaceError,
    pymysql.err.DataError: errors.DataError,
    pymysql.err.OperationalError: errors.OperationalError,
    pymysql.err.IntegrityError: errors.IntegrityError,
    pymysql.err.InternalError: errors.InternalError,
    pymysql.err.ProgrammingError: errors.ProgrammingError,
    pymysql.err.NotSupportedError: errors.NotSupportedError,
    pymysql.err.DatabaseError: errors.DatabaseError,
    pymysql.err.Error: errors.Error,
}


@dataclass(frozen=True, slots=True)
class OkTail:
    """What one OK packet's tail told us."""

    #: The packet's status flags (``ServerStatus`` bits).
    status: int
    #: The GTIDs it reported (OWN/ALL set on MySQL, ``last_gtid`` on MariaDB), if any.
    gtids: GtidState | None
    #: The new default schema, if the schema tracker reported one.
    schema: str | None

    @property
    def in_transaction(self) -> bool:
        """``SERVER_STATUS_IN_TRANS``."""
        return bool(self.status & _IN_TRANS)


def decode_ok_tail(status: int, tail: bytes) -> OkTail | None:
    """Decode the bytes PyMySQL left after an OK packet's warning count (``info`` as a
    length-encoded string, then the session-state blob when ``SESSION_STATE_CHANGED`` is set).
    ``None`` when the packet tracked nothing."""
    if not status & _STATE_CHANGED or not tail:
        return None
    reader = Reader(tail)
    reader.lenenc_bytes()  # the human-readable info ("Rows matched: …")
    if reader.at_end():
        return None
    blocks = parse_session_state(reader.lenenc_view())
    gtids = _gtid_info(OkPacket(status=ServerStatus(status), session_state=blocks))
    schema = None
    for block in blocks:
        if isinstance(block, Schema):
            schema = block.name
    return OkTail(status, gtids, schema)


def tracked_gtid_text(status: int, tail: bytes) -> str | None:
    """The GTID text an OK tail carries, unparsed (MySQL's GTIDS blocks, else MariaDB's
    ``last_gtid``); ``None`` when there is none.  This runs after every write: it builds no
    block objects (:func:`~consistent.protocol.session_state.ok_tail_gtid_text`) and leaves
    parsing the text to the caller.  Raises ``RemoteProtocolError`` on malformed bytes."""
    if not status & _STATE_CHANGED or not tail:
        return None
    return ok_tail_gtid_text(tail)


OkObserver = Callable[[int, bytes], None]

# Called on every statement: a plain function reference is cheaper than ``super()``.
_BASE_READ_QUERY_RESULT: Final = pymysql.connections.Connection._read_query_result


class TrackingConnection(pymysql.connections.Connection):  # type: ignore[misc]
    """A PyMySQL connection that asks for session tracking and hands every OK packet's status
    and raw tail (the bytes after its warning count) to ``observer(status, tail)`` — settable
    later with :meth:`set_observer`.  Decode the tail with :func:`tracked_gtid_text` or
    :func:`decode_ok_tail`."""

    def __init__(self, *args: Any, observer: OkObserver | None = None, **kwargs: Any) -> None:
        self._consistent_observer = observer
        kwargs["client_flag"] = int(kwargs.get("client_flag", 0)) | CLIENT.SESSION_TRACK
        super().__init__(*args, **kwargs)

    def set_observer(self, observer: OkObserver | None) -> None:
        """Where OK packets' tracker data goes from now on."""
        self._consistent_observer = observer

    def _read_ok_packet(self) -> Any:
        ok = super()._read_ok_packet()
        observer = self._consistent_observer
        if observer is not None and ok.message and ok.server_status & _STATE_CHANGED:
            observer(ok.server_status, ok.message)
        return ok

    def _read_query_result(self, unbuffered: bool = False) -> Any:
        rows = _BASE_READ_QUERY_RESULT(self, unbuffered)
        result = self._result
        # ``message`` stays None for result sets (they end in EOF): only OKs get here.
        if result is not None and result.message:
            observer = self._consistent_observer
            status = result.server_status
            if observer is not None and status & _STATE_CHANGED:
                observer(status, result.message)
        return rows

    @property
    def in_transaction(self) -> bool:
        """``SERVER_STATUS_IN_TRANS`` of the last OK packet."""
        return bool(self.server_status & _IN_TRANS)


def query_value(conn: TrackingConnection, sql: str, *, timeout: float | None = None) -> Any:
    """Run a query returning one row and return its first column (``None`` for no row).

    ``timeout`` bounds the time spent reading the answer (the socket's read timeout for this
    query only): a server that does not answer in time costs the connection, never a hang.
    """
    previous = conn._read_timeout
    if timeout is not None:
        conn._read_timeout = timeout
    try:
        conn.query(sql)
        rows = conn._result.rows if conn._result is not None else None
    finally:
        conn._read_timeout = previous
    if not rows:
        return None
    return rows[0][0]


def query_table(
    conn: TrackingConnection, sql: str, *, timeout: float | None = None
) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]:
    """Run a query and return its column names and rows (bounded as :func:`query_value`)."""
    previous = conn._read_timeout
    if timeout is not None:
        conn._read_timeout = timeout
    try:
        conn.query(sql)
        result = conn._result
    finally:
        conn._read_timeout = previous
    if result is None or result.description is None:
        return (), ()
    columns = tuple(str(d[0]) for d in result.description)
    return columns, tuple(tuple(row) for row in result.rows or ())


def set_read_timeout(conn: TrackingConnection, timeout: float | None) -> None:
    """The connection's read deadline from now on (``None``: none); PyMySQL takes it only at
    construction, where it also bounds the greeting."""
    conn._read_timeout = timeout


def force_close(conn: TrackingConnection) -> None:
    """Close the socket without ``COM_QUIT`` (the connection is already broken)."""
    conn._force_close()


def is_disconnect(exc: BaseException) -> bool:
    """True when ``exc``, raised by PyMySQL, means the connection is unusable (as opposed to
    an SQL error).  Our own errors subclass PyMySQL's too, but they are decided where they are
    raised: never a disconnect here."""
    if isinstance(exc, errors.Error):
        return False
    if isinstance(exc, pymysql.err.InterfaceError):
        return True  # PyMySQL raises InterfaceError(0, '') on a closed connection
    if isinstance(exc, pymysql.err.OperationalError | pymysql.err.InternalError):
        code = exc.args[0] if exc.args else None
        if code in DISCONNECT_ERRNOS:
            return True
        # "Packet sequence number wrong": the stream is out of sync, the connection is lost.
        return isinstance(exc, pymysql.err.InternalError) and not isinstance(code, int)
    if isinstance(exc, OSError):
        return exc.errno not in (_errno.EINVAL,)
    return False


def is_server_error(exc: BaseException) -> bool:
    """True for an error the server answered PyMySQL with (an ERR packet), connection
    intact; never one of our own errors."""
    if isinstance(exc, errors.Error):
        return False
    return isinstance(exc, pymysql.err.MySQLError) and not is_disconnect(exc)


def translate_error(exc: BaseException, *, prefix: str = "") -> errors.Error:
    """The ``consistent.errors`` equivalent of a PyMySQL exception: same class name, same
    ``args == (errno, message)`` (``prefix`` prepended to the message), same ``sqlstate``."""
    if isinstance(exc, errors.Error):
        return exc
    cls: type[errors.Error] = errors.OperationalError
    for pymysql_cls in type(exc).__mro__:
        mapped = _ERROR_CLASSES.get(pymysql_cls)
        if mapped is not None:
            cls = mapped
            break
    args = exc.args
    sqlstate = getattr(exc, "sqlstate", None)
    if len(args) >= 2 and isinstance(args[0], int):
        message = f"{prefix}{args[1]}"
        return cls(args[0], message, sqlstate=sqlstate)
    if isinstance(exc, OSError):
        return errors.OperationalError(int(CR.SERVER_LOST), f"{prefix}{exc}")
    text = " ".join(str(a) for a in args if a not in ("", None)) or type(exc).__name__
    return cls(f"{prefix}{text}", sqlstate=sqlstate)
