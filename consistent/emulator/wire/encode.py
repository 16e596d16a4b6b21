"""Engine results as packet payloads: OK/ERR/EOF, column definitions, text and binary rows.

Pure functions: they take the engine's :class:`~consistent.emulator.results.Outcome` (or an
error) and the capabilities in effect on the connection and return the payloads mysqld would
write, in order, without framing.  What depends on the client's capabilities is decided here:

* under ``CLIENT_DEPRECATE_EOF`` the EOF after the column definitions is omitted and a result
  set ends with an OK whose header is 0xFE (which may carry session state); otherwise it ends
  with a 5-byte EOF, which cannot (``SERVER_SESSION_STATE_CHANGED`` is then cleared);
* without ``CLIENT_SESSION_TRACK`` session state is never written (reference §1.1, §1.5).

Values are rendered the way mysqld's text protocol prints them (``Protocol_text::store_*``),
and converted to the column's binary type for prepared statements.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
from collections.abc import Sequence
from typing import Final

from consistent.emulator.results import (
    Column,
    Outcome,
    PreparedStatement,
    ResultSet,
    server_status,
)
from consistent.errors import LocalProtocolError
from consistent.protocol.binary import (
    BinaryType,
    DateTimeValue,
    InputValue,
    TimeValue,
    build_binary_row,
)
from consistent.protocol.constants import (
    DATETIME_TYPES,
    TIME_TYPES,
    Capability,
    Charset,
    ColumnFlag,
    ColumnType,
    Header,
    ServerStatus,
)
from consistent.protocol.lenenc import pack_lenenc_int
from consistent.protocol.prepared import StmtPrepareOk, build_stmt_prepare_ok
from consistent.protocol.responses import (
    EofPacket,
    ErrPacket,
    OkPacket,
    build_eof,
    build_err,
    build_ok,
)
from consistent.protocol.resultset import (
    ColumnDefinition41,
    build_column_count,
    build_column_definition41,
)

__all__ = [
    "ColumnDefinitions",
    "binary_value",
    "column_definition",
    "encode_outcome",
    "err_payload",
    "field_list_payloads",
    "ok_payload",
    "prepare_payloads",
    "terminator_payload",
    "text_value",
]

#: ``decimals`` of a column whose fractional digits are not fixed (mysqld's NOT_FIXED_DEC).
NOT_FIXED_DEC: Final = 31
_MAX_FSP: Final = 6

# Plain ints for the per-response tests (IntFlag arithmetic costs microseconds a time).
_STATE_CHANGED_BIT: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_SESSION_TRACK: Final = int(Capability.SESSION_TRACK)
_PROTOCOL_41: Final = int(Capability.PROTOCOL_41)
_TRANSACTIONS: Final = int(Capability.TRANSACTIONS)
_NULL_VALUE: Final = b"\xfb"  # NULL in a text row
_ONE_BYTE_LENGTHS: Final = 251  # lengths below this are their own length-encoded prefix
_LENGTH_BYTES: Final = tuple(bytes((n,)) for n in range(_ONE_BYTE_LENGTHS))
_OK_HEADER: Final = b"\x00"
_EOF_HEADER: Final = 0xFE
_U16: Final = struct.Struct("<H")
_U16X2: Final = struct.Struct("<HH")
_EOF_41: Final = struct.Struct("<BHH")
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_INTEGER_TYPES: Final = frozenset(
    {
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.LONG,
        ColumnType.INT24,
        ColumnType.LONGLONG,
        ColumnType.YEAR,
    }
)
_FLOAT_TYPES: Final = frozenset({ColumnType.FLOAT, ColumnType.DOUBLE})
_FLOAT_DIGITS: Final = 6  # FLT_DIG: mysqld prints FLOAT columns with 6 significant digits
_DATETIME_TEXT: Final = re.compile(
    r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?)?\s*$"
)
_TIME_TEXT: Final = re.compile(r"^\s*(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?\s*$")


# --- values -----------------------------------------------------------------------------------


def _fsp(column: Column, value_micro: int) -> int:
    """Fractional digits to print: the column's, or (when not fixed) as many as needed."""
    if 0 <= column.decimals <= _MAX_FSP:
        return column.decimals
    return _MAX_FSP if value_micro else 0


def _fraction(micro: int, fsp: int) -> str:
    return "." + f"{micro:06d}"[:fsp] if fsp else ""


def _format_float(value: float, column: Column) -> str:
    if math.isnan(value) or math.isinf(value):
        # mysqld never stores these; sending NULL-like text would be a silent wrong answer.
        raise LocalProtocolError(f"{value!r} cannot be sent as a MySQL number")
    if 0 <= column.decimals < NOT_FIXED_DEC:
        return f"{value:.{column.decimals}f}"
    # FLOAT columns print FLT_DIG significant digits, DOUBLE the shortest exact form.
    text = f"{value:.{_FLOAT_DIGITS}g}" if column.type == ColumnType.FLOAT else repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text


def _format_timedelta(value: dt.timedelta, column: Column) -> str:
    negative = value < dt.timedelta(0)
    magnitude = -value if negative else value
    total_seconds = magnitude.days * 86400 + magnitude.seconds
    hours, rest = divmod(total_seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    sign = "-" if negative else ""
    fraction = _fraction(magnitude.microseconds, _fsp(column, magnitude.microseconds))
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{fraction}"


def _text(value: object, column: Column) -> str | bytes:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | str):
        return value if isinstance(value, str) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, float):
        return _format_float(value, column)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        stamp = value.strftime("%Y-%m-%d %H:%M:%S")
        return stamp + _fraction(value.microsecond, _fsp(column, value.microsecond))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        stamp = value.strftime("%H:%M:%S")
        return stamp + _fraction(value.microsecond, _fsp(column, value.microsecond))
    if isinstance(value, dt.timedelta):
        return _format_timedelta(value, column)
    raise LocalProtocolError(f"cannot send a {type(value).__name__} value in a result set")


def text_value(column: Column, value: object) -> bytes | None:
    """One value as the text protocol sends it (``None`` is SQL NULL)."""
    if value is None:
        return None
    text = _text(value, column)
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _to_int(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float | decimal.Decimal) and value == int(value):
        return int(value)
    if isinstance(value, str | bytes):
        try:
            return int(value)
        except ValueError:
            pass
    raise LocalProtocolError(f"{value!r} is not an integer")


def _to_float(value: object) -> float:
    if isinstance(value, int | float | decimal.Decimal):
        return float(value)
    if isinstance(value, str | bytes):
        try:
            return float(value)
        except ValueError:
            pass
    raise LocalProtocolError(f"{value!r} is not a number")


def _to_datetime(value: object) -> InputValue:
    if isinstance(value, dt.date):
        return value
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        match = _DATETIME_TEXT.match(value)
        if match is not None:
            y, mo, d, h, mi, s, frac = match.groups()
            micro = int((frac or "").ljust(6, "0"))
            return DateTimeValue(
                int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), micro
            )
    raise LocalProtocolError(f"{value!r} is not a date")


def _to_time(value: object) -> InputValue:
    if isinstance(value, dt.timedelta | dt.time):
        return value
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        match = _TIME_TEXT.match(value)
        if match is not None:
            sign, h, mi, s, frac = match.groups()
            days, hours = divmod(int(h), 24)
            micro = int((frac or "").ljust(6, "0"))
            return TimeValue(sign is not None, days, hours, int(mi), int(s), micro)
    raise LocalProtocolError(f"{value!r} is not a time")


def binary_value(column: Column, value: object) -> InputValue | None:
    """One value converted to what the binary protocol encodes for the column's type."""
    if value is None:
        return None
    t = column.type
    if t in _INTEGER_TYPES:
        return _to_int(value)
    if t in _FLOAT_TYPES:
        return _to_float(value)
    if t in DATETIME_TYPES:
        return _to_datetime(value)
    if t in TIME_TYPES:
        return _to_time(value)
    if t == ColumnType.NULL:
        raise LocalProtocolError(f"a column of type NULL holds {value!r}")
    text = text_value(column, value)
    assert text is not None
    return text


def _binary_type(column: Column) -> BinaryType:
    return BinaryType(int(column.type), bool(column.flags & ColumnFlag.UNSIGNED))


# --- generic responses ------------------------------------------------------------------------


def _status_for(status: ServerStatus, capabilities: int) -> ServerStatus:
    if capabilities & _SESSION_TRACK or not int(status) & _STATE_CHANGED_BIT:
        return status
    return server_status(int(status) & ~_STATE_CHANGED_BIT)


def ok_payload(outcome: Outcome, capabilities: int, *, header: int = Header.OK) -> bytes:
    """The OK packet of an outcome without rows (or, with ``header=0xFE``, the OK that ends a
    result set under ``CLIENT_DEPRECATE_EOF``).  Session state is dropped for a client without
    ``CLIENT_SESSION_TRACK``, as mysqld never writes it then."""
    status = _status_for(outcome.status, capabilities)
    bits = int(status)
    tracked = bool(bits & _STATE_CHANGED_BIT)
    warnings = min(outcome.warnings, 0xFFFF)
    if header == Header.OK and not tracked and not outcome.info and bits <= 0xFFFF:
        # The usual OK, without info or session state: what build_ok writes for it.
        head = _OK_HEADER + pack_lenenc_int(outcome.affected_rows)
        head += pack_lenenc_int(outcome.last_insert_id)
        if capabilities & _PROTOCOL_41:
            return head + _U16X2.pack(bits, warnings)
        if capabilities & _TRANSACTIONS:
            return head + _U16.pack(bits)
        return head
    eof_ok = header == Header.EOF
    return build_ok(
        OkPacket(
            affected_rows=0 if eof_ok else outcome.affected_rows,
            last_insert_id=0 if eof_ok else outcome.last_insert_id,
            status=status,
            warnings=warnings,
            info=b"" if eof_ok else outcome.info.encode("utf-8", "replace"),
            session_state=outcome.session_state if tracked else (),
            header=header,
        ),
        capabilities,
    )


def err_payload(errno: int, sqlstate: str | None, message: str, capabilities: int) -> bytes:
    """An ERR packet (the SQLSTATE is written under ``CLIENT_PROTOCOL_41``)."""
    return build_err(ErrPacket(errno, sqlstate, message), capabilities)


def _eof(status: ServerStatus, warnings: int, capabilities: int) -> bytes:
    # An EOF packet cannot carry session state, so it does not announce any.
    bits = int(status) & ~_STATE_CHANGED_BIT
    if capabilities & _PROTOCOL_41 and 0 <= bits <= 0xFFFF:  # what build_eof writes
        return _EOF_41.pack(_EOF_HEADER, min(warnings, 0xFFFF), bits)
    return build_eof(EofPacket(min(warnings, 0xFFFF), server_status(bits)), capabilities)


def terminator_payload(outcome: Outcome, capabilities: int) -> bytes:
    """What ends a result set: an EOF, or an OK with header 0xFE under
    ``CLIENT_DEPRECATE_EOF``."""
    if capabilities & _DEPRECATE_EOF:
        return ok_payload(outcome, capabilities, header=Header.EOF)
    return _eof(outcome.status, outcome.warnings, capabilities)


# --- result sets ------------------------------------------------------------------------------


def column_definition(column: Column, capabilities: int, *, field_list: bool = False) -> bytes:
    """A ``ColumnDefinition41`` for an engine column."""
    return build_column_definition41(
        ColumnDefinition41(
            name=column.name,
            type=int(column.type),
            charset=int(column.charset),
            column_length=column.length,
            flags=ColumnFlag(column.flags),
            decimals=column.decimals,
            schema=column.schema,
            table=column.table,
            org_table=column.org_table,
            org_name=column.org_name,
        ),
        capabilities,
        field_list=field_list,
    )


class ColumnDefinitions:
    """Encoded column definitions of the column objects seen lately (one connection's).

    The engine hands out the very same :class:`Column` objects each time a remembered
    SELECT runs again, so their definitions are encoded once.  Entries are keyed by the
    object (which they keep alive) and the capabilities; the store is emptied when full.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._entries: dict[int, tuple[Column, int, bytes]] = {}

    def get(self, column: Column, capabilities: int) -> bytes:
        """The ``ColumnDefinition41`` payload of ``column``."""
        entry = self._entries.get(id(column))
        if entry is not None and entry[0] is column and entry[1] == capabilities:
            return entry[2]
        payload = column_definition(column, capabilities)
        if len(self._entries) >= self.capacity:
            self._entries.clear()
        self._entries[id(column)] = (column, capabilities, payload)
        return payload


def _metadata(
    columns: Sequence[Column],
    status: ServerStatus,
    warnings: int,
    capabilities: int,
    definitions: ColumnDefinitions | None = None,
) -> list[bytes]:
    if definitions is None:
        payloads = [column_definition(c, capabilities) for c in columns]
    else:
        payloads = [definitions.get(c, capabilities) for c in columns]
    if not capabilities & _DEPRECATE_EOF:
        payloads.append(_eof(status, warnings, capabilities))
    return payloads


def _rows(result: ResultSet, *, binary: bool) -> list[bytes]:
    columns = result.columns
    if binary:
        types = [_binary_type(c) for c in columns]
        return [
            build_binary_row(types, [binary_value(c, v) for c, v in zip(columns, row, strict=True)])
            for row in result.rows
        ]
    return [_text_row(columns, row) for row in result.rows]


def _text_row(columns: Sequence[Column], row: Sequence[object]) -> bytes:
    """``build_text_row`` of the values' texts, made in place (the per-row path)."""
    parts: list[bytes] = []
    for column, value in zip(columns, row, strict=True):
        data = text_value(column, value)
        if data is None:
            parts.append(_NULL_VALUE)
            continue
        size = len(data)
        parts.append(_LENGTH_BYTES[size] if size < _ONE_BYTE_LENGTHS else pack_lenenc_int(size))
        parts.append(data)
    return b"".join(parts)


def encode_outcome(
    outcome: Outcome,
    capabilities: int,
    *,
    binary: bool = False,
    definitions: ColumnDefinitions | None = None,
) -> list[bytes]:
    """Every payload of one response: an OK, or a whole result set (text rows, or binary rows
    for COM_STMT_EXECUTE).  Raises :class:`LocalProtocolError` if a value does not fit its
    column, before anything is sent.  ``definitions`` reuses encoded column definitions."""
    result = outcome.result
    if result is None:
        return [ok_payload(outcome, capabilities)]
    for row in result.rows:
        if len(row) != len(result.columns):
            raise LocalProtocolError(
                f"a row of {len(row)} values for {len(result.columns)} columns"
            )
    payloads = [build_column_count(len(result.columns), capabilities)]
    payloads += _metadata(
        result.columns, outcome.status, outcome.warnings, capabilities, definitions
    )
    payloads += _rows(result, binary=binary)
    payloads.append(terminator_payload(outcome, capabilities))
    return payloads


def _param_columns(prepared: PreparedStatement) -> tuple[Column, ...]:
    if len(prepared.params) == prepared.param_count:
        return prepared.params
    # mysqld describes an untyped placeholder as a binary VAR_STRING named "?".
    anonymous = Column("?", ColumnType.VAR_STRING, 0, ColumnFlag.BINARY, 0, int(Charset.BINARY))
    return (anonymous,) * prepared.param_count


def prepare_payloads(
    prepared: PreparedStatement, status: ServerStatus, capabilities: int
) -> list[bytes]:
    """COM_STMT_PREPARE_OK, then the parameter and the column definitions, each group ended
    by an EOF unless ``CLIENT_DEPRECATE_EOF``."""
    params = _param_columns(prepared)
    payloads = [
        build_stmt_prepare_ok(
            StmtPrepareOk(
                prepared.stmt_id,
                len(prepared.columns),
                len(params),
                min(prepared.warnings, 0xFFFF),
            ),
            capabilities,
        )
    ]
    if params:
        payloads += _metadata(params, status, prepared.warnings, capabilities)
    if prepared.columns:
        payloads += _metadata(prepared.columns, status, prepared.warnings, capabilities)
    return payloads


def field_list_payloads(
    columns: Sequence[Column], outcome: Outcome, capabilities: int
) -> list[bytes]:
    """The answer to COM_FIELD_LIST: column definitions with a (NULL) default value, then the
    result-set terminator."""
    payloads = [column_definition(c, capabilities, field_list=True) for c in columns]
    payloads.append(terminator_payload(outcome, capabilities))
    return payloads
