"""PEP 249 type objects and constructors.

Type objects compare equal to the column type codes PyMySQL puts in ``cursor.description``
(``enum_field_types``, https://dev.mysql.com/doc/dev/mysql-server/latest/field__types_8h.html).
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from consistent.protocol.constants import ColumnType

__all__ = [
    "BINARY",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "DBAPITypeObject",
    "Date",
    "DateFromTicks",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
]


class DBAPITypeObject(frozenset[int]):
    """A set of column type codes that compares equal to each of its members."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return other in self
        return frozenset.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return frozenset.__hash__(self)


_C = ColumnType
STRING = DBAPITypeObject({_C.ENUM, _C.STRING, _C.VAR_STRING, _C.VARCHAR, _C.SET, _C.JSON})
BINARY = DBAPITypeObject({_C.BLOB, _C.LONG_BLOB, _C.MEDIUM_BLOB, _C.TINY_BLOB, _C.GEOMETRY, _C.BIT})
NUMBER = DBAPITypeObject(
    {
        _C.DECIMAL,
        _C.NEWDECIMAL,
        _C.DOUBLE,
        _C.FLOAT,
        _C.INT24,
        _C.LONG,
        _C.LONGLONG,
        _C.TINY,
        _C.SHORT,
        _C.YEAR,
    }
)
DATETIME = DBAPITypeObject({_C.TIMESTAMP, _C.DATETIME, _C.DATE, _C.NEWDATE, _C.TIME})
ROWID = DBAPITypeObject()

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:  # noqa: N802 - PEP 249 name
    """The local date of a POSIX timestamp."""
    return datetime.date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:  # noqa: N802 - PEP 249 name
    """The local time of day of a POSIX timestamp."""
    return datetime.time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:  # noqa: N802 - PEP 249 name
    """The local date and time of a POSIX timestamp."""
    return datetime.datetime(*time.localtime(ticks)[:6])


def Binary(value: Any) -> bytes:  # noqa: N802 - PEP 249 name
    """A binary string (``bytes``)."""
    return bytes(value)
