"""What one emulated command answers: column definitions, result sets and outcomes.

An :class:`Outcome` is exactly one response of mysqld: either an OK packet or a result set
followed by its terminator.  Its ``session_state`` holds the tracker blocks mysqld would put in
that OK (or in the 0xFE OK that ends a result set under ``CLIENT_DEPRECATE_EOF``); it is empty
when the response cannot carry them, so a front-end writes what it gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from consistent.protocol.constants import Charset, ColumnFlag, ColumnType, ServerStatus
from consistent.protocol.session_state import SessionStateChange

__all__ = [
    "Column",
    "Outcome",
    "PreparedStatement",
    "ResultSet",
    "StmtResult",
    "Warning_",
    "bigint_column",
    "double_column",
    "null_column",
    "server_status",
    "text_column",
]

_STATUSES: dict[int, ServerStatus] = {}


def server_status(bits: int) -> ServerStatus:
    """``ServerStatus(bits)``, remembered: building a flag value costs microseconds, and a
    server answers with the same few status words again and again."""
    status = _STATUSES.get(bits)
    if status is None:
        status = ServerStatus(bits)
        if len(_STATUSES) < 4096:
            _STATUSES[bits] = status
    return status


#: Bytes per character of utf8mb4, used for the ``length`` of text columns as mysqld reports it.
UTF8MB4_MAXLEN = 4


@dataclass(frozen=True)
class Column:
    """One column definition (``ColumnDefinition41``) as mysqld would send it."""

    name: str
    type: ColumnType
    length: int
    flags: ColumnFlag
    decimals: int
    charset: int
    table: str = ""
    org_table: str = ""
    schema: str = ""
    org_name: str = ""


@dataclass(frozen=True)
class ResultSet:
    """Rows with their columns.  Values are Python objects: ``None``, ``int``, ``float``,
    ``Decimal``, ``str``, ``bytes``, ``datetime``, ``date`` or ``timedelta`` (for TIME)."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[object, ...], ...]


@dataclass(frozen=True)
class Warning_:  # noqa: N801 - PEP 249 already owns the name Warning
    """One row of ``SHOW WARNINGS`` (named with a trailing underscore: ``Warning`` is PEP 249's)."""

    level: str
    code: int
    message: str


@dataclass(frozen=True)
class Outcome:
    """One response: an OK (``result is None``) or a result set and its terminator.

    ``status`` already includes ``SESSION_STATE_CHANGED`` when mysqld would set it in the OK, and
    ``MORE_RESULTS_EXISTS`` on every response of a multi-statement query but the last.  For a
    result set ended by a classic EOF packet (client without ``CLIENT_DEPRECATE_EOF``) the engine
    leaves ``session_state`` empty and ``SESSION_STATE_CHANGED`` clear, as mysqld does.  The
    flag can also be set with an empty ``session_state``: mysqld does that when only an empty
    GTID set was collected (ALL_GTIDS on a server with no GTIDs); the OK then carries an empty
    session-state string.

    Row values are ``None``, ``int``, ``float``, ``Decimal``, ``str``, ``bytes``, ``datetime``,
    ``date`` or ``timedelta``; a temporal column holding a value that is not a valid date (a
    zero date) comes back as its ``str``, as PyMySQL would return it.
    """

    result: ResultSet | None = None
    affected_rows: int = 0
    last_insert_id: int = 0
    status: ServerStatus = ServerStatus.AUTOCOMMIT
    warnings: int = 0
    info: str = ""
    session_state: tuple[SessionStateChange, ...] = field(default=())

    def with_status(self, status: ServerStatus) -> Outcome:
        """A copy with another status word."""
        return replace(self, status=status)


@dataclass
class StmtResult:
    """What one statement produced, before the session turns it into an :class:`Outcome`."""

    result: ResultSet | None = None
    affected_rows: int = 0
    last_insert_id: int = 0
    info: str = ""


@dataclass(frozen=True)
class PreparedStatement:
    """What COM_STMT_PREPARE answers: the id, the parameters and the result columns."""

    stmt_id: int
    param_count: int
    params: tuple[Column, ...]
    columns: tuple[Column, ...]
    warnings: int = 0


def text_column(name: str, length: int = 64, *, nullable: bool = True, table: str = "") -> Column:
    """A VARCHAR column in utf8mb4, as mysqld describes SHOW output and string expressions."""
    flags = ColumnFlag(0) if nullable else ColumnFlag.NOT_NULL
    return Column(
        name=name,
        type=ColumnType.VAR_STRING,
        length=length * UTF8MB4_MAXLEN,
        flags=flags,
        decimals=31,
        charset=int(Charset.UTF8MB4_0900_AI_CI),
        table=table,
        org_name=name if table else "",
    )


def bigint_column(name: str, *, unsigned: bool = False, nullable: bool = True) -> Column:
    """A BIGINT column (what mysqld reports for integer expressions)."""
    flags = ColumnFlag.NUM | ColumnFlag.BINARY
    if unsigned:
        flags |= ColumnFlag.UNSIGNED
    if not nullable:
        flags |= ColumnFlag.NOT_NULL
    return Column(name, ColumnType.LONGLONG, 21, flags, 0, int(Charset.BINARY))


def double_column(name: str) -> Column:
    """A DOUBLE column."""
    return Column(
        name, ColumnType.DOUBLE, 23, ColumnFlag.NUM | ColumnFlag.BINARY, 31, int(Charset.BINARY)
    )


def null_column(name: str) -> Column:
    """The column of a bare ``NULL`` expression: type NULL, binary charset."""
    return Column(name, ColumnType.NULL, 0, ColumnFlag.BINARY, 0, int(Charset.BINARY))
