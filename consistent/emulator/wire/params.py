"""Prepared-statement parameters: COM_STMT_EXECUTE's values as Python objects for the engine.

The codec's :func:`~consistent.protocol.prepared.parse_stmt_execute` reads a value for every
non-NULL parameter; but a parameter whose value came in COM_STMT_SEND_LONG_DATA packets has no
value in the execute packet (libmysqlclient's ``cli_stmt_execute`` skips it, mysqld's
``Item_param`` in state ``LONG_DATA_VALUE`` does not read it).  So the execute packet is read
here, with the codec's primitives, knowing which parameters have long data.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_execute.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_send_long_data.html
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from consistent.errors import RemoteProtocolError
from consistent.protocol.binary import (
    PARAM_NULL_BITMAP_OFFSET,
    BinaryType,
    BinaryValue,
    DateTimeValue,
    TimeValue,
    decode_binary_value,
    parse_null_bitmap,
)
from consistent.protocol.constants import ColumnType, Command, CursorFlag
from consistent.protocol.lenenc import Reader, decode_text

__all__ = ["ExecuteRequest", "execute_statement_id", "parse_execute", "python_value"]

_UNSIGNED_PARAM: Final = 0x80
_TEXT_TYPES: Final = frozenset(
    {
        ColumnType.VARCHAR,
        ColumnType.VAR_STRING,
        ColumnType.STRING,
        ColumnType.ENUM,
        ColumnType.SET,
        ColumnType.JSON,
    }
)
_DECIMAL_TYPES: Final = frozenset({ColumnType.DECIMAL, ColumnType.NEWDECIMAL})
_DATE_TYPES: Final = frozenset({ColumnType.DATE, ColumnType.NEWDATE})


@dataclass(frozen=True, slots=True)
class ExecuteRequest:
    """A parsed COM_STMT_EXECUTE: the statement, its cursor flags, the parameter values as
    Python objects, and the parameter types (kept for the next execute, which may omit them)."""

    statement_id: int
    flags: CursorFlag
    values: tuple[object, ...]
    types: tuple[BinaryType, ...]


def execute_statement_id(payload: bytes) -> int:
    """The statement id of a COM_STMT_EXECUTE (needed to know its parameter count)."""
    r = Reader(payload)
    if r.u8() != Command.STMT_EXECUTE:
        raise RemoteProtocolError("not a COM_STMT_EXECUTE")
    return r.u32()


def _text(data: bytes) -> str:
    return decode_text(data)


def python_value(binary_type: BinaryType, value: BinaryValue) -> object:
    """A decoded binary value as the engine takes it: ``str`` for character types,
    ``Decimal`` for DECIMAL, ``date``/``datetime``/``timedelta`` for temporal types (zero
    dates as mysqld's text), ``bytes`` for the rest of the length-encoded types."""
    t = binary_type.type
    if isinstance(value, bytes):
        if t in _TEXT_TYPES:
            return _text(value)
        if t in _DECIMAL_TYPES:
            try:
                return decimal.Decimal(value.decode("ascii"))
            except (decimal.InvalidOperation, UnicodeDecodeError) as e:
                raise RemoteProtocolError(f"DECIMAL parameter {value!r} is not a number") from e
        return value
    if isinstance(value, DateTimeValue):
        if t in _DATE_TYPES:
            try:
                return dt.date(value.year, value.month, value.day)
            except ValueError:
                return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        moment = value.as_datetime()
        if moment is not None:
            return moment
        return (
            f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        )
    if isinstance(value, TimeValue):
        return value.as_timedelta()
    return value


def _long_data_value(binary_type: BinaryType, data: bytes) -> object:
    if binary_type.type in _TEXT_TYPES:
        return _text(data)
    return data


def _read_types(r: Reader, count: int) -> tuple[BinaryType, ...]:
    types = []
    for _ in range(count):
        type_code = r.u8()
        flag = r.u8()
        types.append(BinaryType(type_code, bool(flag & _UNSIGNED_PARAM)))
    return tuple(types)


def parse_execute(
    payload: bytes,
    num_params: int,
    previous_types: Sequence[BinaryType] | None,
    long_data: Mapping[int, bytes],
) -> ExecuteRequest:
    """Parse COM_STMT_EXECUTE for a statement with ``num_params`` parameters.

    ``previous_types`` are the types bound by the previous execute (reused when the client
    does not re-bind); ``long_data`` maps parameter index to the bytes sent for it with
    COM_STMT_SEND_LONG_DATA, which take the place of the value in the packet.
    """
    r = Reader(payload)
    if r.u8() != Command.STMT_EXECUTE:
        raise RemoteProtocolError("not a COM_STMT_EXECUTE")
    statement_id = r.u32()
    flags = r.u8()
    r.u32()  # iteration count, always 1
    if num_params == 0:
        return ExecuteRequest(statement_id, CursorFlag(flags), (), ())
    nulls = parse_null_bitmap(r, num_params, PARAM_NULL_BITMAP_OFFSET)
    bound = r.u8()
    if bound > 1:
        raise RemoteProtocolError(f"new_params_bind_flag must be 0 or 1, got {bound}")
    if bound:
        types = _read_types(r, num_params)
    elif previous_types is not None and len(previous_types) == num_params:
        types = tuple(previous_types)
    else:
        raise RemoteProtocolError("parameters were never bound")
    values: list[object] = []
    for index, (binary_type, is_null) in enumerate(zip(types, nulls, strict=True)):
        if index in long_data:
            values.append(_long_data_value(binary_type, long_data[index]))
        elif is_null or binary_type.type == ColumnType.NULL:
            values.append(None)
        else:
            values.append(python_value(binary_type, decode_binary_value(r, binary_type)))
    if not r.at_end():
        raise RemoteProtocolError(f"{r.remaining()} unexpected byte(s) after the parameters")
    return ExecuteRequest(statement_id, CursorFlag(flags), tuple(values), types)
