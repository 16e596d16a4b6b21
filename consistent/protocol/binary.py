"""Binary-protocol values: the encoding of prepared-statement parameters (COM_STMT_EXECUTE,
query attributes of COM_QUERY) and of binary result-set rows.

Parsed values are plain Python values in one canonical form per type, so that
``parse(build(x)) == x``: integers for the integer types (signed or unsigned as declared),
``float`` for FLOAT and DOUBLE, ``bytes`` for every length-encoded type (strings, blobs,
DECIMAL text, JSON, BIT, GEOMETRY…), :class:`DateTimeValue` for DATE/DATETIME/TIMESTAMP and
:class:`TimeValue` for TIME — these two also hold the zero dates and out-of-range times that
:mod:`datetime` cannot.  Builders additionally accept ``str``, :class:`decimal.Decimal`,
``bool`` and the :mod:`datetime` types.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_binary_resultset.html
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import DATETIME_TYPES, TIME_TYPES, ColumnFlag, ColumnType
from consistent.protocol.lenenc import Reader, encode_text, pack_lenenc_bytes

if TYPE_CHECKING:
    from consistent.protocol.resultset import ColumnDefinition41

__all__ = [
    "PARAM_NULL_BITMAP_OFFSET",
    "ROW_NULL_BITMAP_OFFSET",
    "BinaryType",
    "BinaryValue",
    "DateTimeValue",
    "InputValue",
    "TextValue",
    "TimeValue",
    "build_binary_row",
    "build_null_bitmap",
    "decode_binary_value",
    "encode_binary_value",
    "parse_binary_row",
    "parse_null_bitmap",
    "value_bytes",
]

ROW_NULL_BITMAP_OFFSET: Final = 2
PARAM_NULL_BITMAP_OFFSET: Final = 0
_ROW_HEADER: Final = 0x00


@dataclass(frozen=True, slots=True)
class DateTimeValue:
    """A DATE, DATETIME or TIMESTAMP as sent on the wire (zero dates included)."""

    year: int = 0
    month: int = 0
    day: int = 0
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    @classmethod
    def from_python(cls, value: datetime.date) -> DateTimeValue:
        """From a :class:`datetime.date` or :class:`datetime.datetime`."""
        if isinstance(value, datetime.datetime):
            return cls(
                value.year,
                value.month,
                value.day,
                value.hour,
                value.minute,
                value.second,
                value.microsecond,
            )
        return cls(value.year, value.month, value.day)

    def as_datetime(self) -> datetime.datetime | None:
        """The value as a naive :class:`datetime.datetime`, or ``None`` for a zero or
        otherwise unrepresentable date."""
        try:
            return datetime.datetime(
                self.year,
                self.month,
                self.day,
                self.hour,
                self.minute,
                self.second,
                self.microsecond,
            )
        except (ValueError, OverflowError):
            return None


@dataclass(frozen=True, slots=True)
class TimeValue:
    """A TIME as sent on the wire: a sign, days, and a time of day (may exceed 24 hours)."""

    negative: bool = False
    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: int = 0
    microseconds: int = 0

    @classmethod
    def from_python(cls, value: datetime.timedelta | datetime.time) -> TimeValue:
        """From a :class:`datetime.timedelta` (signed duration) or :class:`datetime.time`."""
        if isinstance(value, datetime.time):
            return cls(False, 0, value.hour, value.minute, value.second, value.microsecond)
        negative = value < datetime.timedelta(0)
        magnitude = -value if negative else value
        hours, rest = divmod(magnitude.seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        return cls(negative, magnitude.days, hours, minutes, seconds, magnitude.microseconds)

    def as_timedelta(self) -> datetime.timedelta:
        """The value as a signed :class:`datetime.timedelta`."""
        magnitude = datetime.timedelta(
            days=self.days,
            hours=self.hours,
            minutes=self.minutes,
            seconds=self.seconds,
            microseconds=self.microseconds,
        )
        return -magnitude if self.negative else magnitude


BinaryValue = int | float | bytes | DateTimeValue | TimeValue
"""What parsers return for a non-NULL binary value."""

InputValue = (
    BinaryValue
    | str
    | bytearray
    | memoryview
    | decimal.Decimal
    | datetime.date
    | datetime.time
    | datetime.timedelta
)
"""What builders accept for a non-NULL binary value."""

TextValue = bytes | bytearray | memoryview | str | int | float | decimal.Decimal
"""What :func:`~consistent.protocol.resultset.build_text_row` accepts for a non-NULL column."""


@dataclass(frozen=True, slots=True)
class BinaryType:
    """The type of a binary value: a column type and whether an integer is unsigned."""

    type: int
    unsigned: bool = False

    @classmethod
    def of(cls, column: ColumnDefinition41) -> BinaryType:
        """The binary type of a result-set column."""
        return cls(column.type, bool(column.flags & ColumnFlag.UNSIGNED))


_Codec = tuple[struct.Struct, struct.Struct]
_INTS: Final[dict[int, _Codec]] = {
    ColumnType.TINY: (struct.Struct("<b"), struct.Struct("<B")),
    ColumnType.SHORT: (struct.Struct("<h"), struct.Struct("<H")),
    ColumnType.YEAR: (struct.Struct("<h"), struct.Struct("<H")),
    ColumnType.LONG: (struct.Struct("<i"), struct.Struct("<I")),
    ColumnType.INT24: (struct.Struct("<i"), struct.Struct("<I")),
    ColumnType.LONGLONG: (struct.Struct("<q"), struct.Struct("<Q")),
}
_FLOATS: Final[dict[int, struct.Struct]] = {
    ColumnType.FLOAT: struct.Struct("<f"),
    ColumnType.DOUBLE: struct.Struct("<d"),
}
_DATE_PART: Final = struct.Struct("<BHBB")
_DATETIME_PART: Final = struct.Struct("<BHBBBBB")
_DATETIME_MICRO: Final = struct.Struct("<BHBBBBBI")
_TIME_PART: Final = struct.Struct("<BBIBBB")
_TIME_MICRO: Final = struct.Struct("<BBIBBBI")


# --- encoding ------------------------------------------------------------------------------


def _encode_datetime(value: object) -> bytes:
    if isinstance(value, datetime.date):
        value = DateTimeValue.from_python(value)
    if not isinstance(value, DateTimeValue):
        raise LocalProtocolError(f"expected a date or datetime, got {type(value).__name__}")
    v = value
    if v.hour == v.minute == v.second == v.microsecond == 0:
        if v.year == v.month == v.day == 0:
            return b"\x00"
        return _DATE_PART.pack(4, v.year, v.month, v.day)
    if v.microsecond == 0:
        return _DATETIME_PART.pack(7, v.year, v.month, v.day, v.hour, v.minute, v.second)
    return _DATETIME_MICRO.pack(
        11, v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond
    )


def _encode_time(value: object) -> bytes:
    if isinstance(value, datetime.timedelta | datetime.time):
        value = TimeValue.from_python(value)
    if not isinstance(value, TimeValue):
        raise LocalProtocolError(f"expected a time or timedelta, got {type(value).__name__}")
    v = value
    if v.microseconds == 0:
        if not v.negative and v.days == v.hours == v.minutes == v.seconds == 0:
            return b"\x00"
        return _TIME_PART.pack(8, v.negative, v.days, v.hours, v.minutes, v.seconds)
    return _TIME_MICRO.pack(12, v.negative, v.days, v.hours, v.minutes, v.seconds, v.microseconds)


def value_bytes(value: object) -> bytes | bytearray | memoryview:
    """The bytes of a length-encoded value: bytes as they are, text as UTF-8, numbers as
    their decimal text (how mysqld sends DECIMAL, and every value in text rows)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return value
    if isinstance(value, str):
        return encode_text(value)
    if isinstance(value, decimal.Decimal | int | float) and not isinstance(value, bool):
        return str(value).encode("ascii")
    raise LocalProtocolError(f"cannot send {type(value).__name__} as a string value")


def encode_binary_value(binary_type: BinaryType, value: InputValue) -> bytes:
    """Encode one non-NULL value of ``binary_type`` (NULLs live in the NULL bitmap)."""
    t = binary_type.type
    try:
        codec = _INTS.get(t)
        if codec is not None:
            if not isinstance(value, int):
                raise LocalProtocolError(f"expected an integer, got {type(value).__name__}")
            return codec[binary_type.unsigned].pack(value)
        packer = _FLOATS.get(t)
        if packer is not None:
            if not isinstance(value, int | float | decimal.Decimal):
                raise LocalProtocolError(f"expected a number, got {type(value).__name__}")
            return packer.pack(float(value))
        if t in DATETIME_TYPES:
            return _encode_datetime(value)
        if t in TIME_TYPES:
            return _encode_time(value)
        if t == ColumnType.NULL:
            raise LocalProtocolError("a value of type NULL must be None")
        return pack_lenenc_bytes(value_bytes(value))
    except (struct.error, OverflowError) as e:
        raise LocalProtocolError(f"value {value!r} does not fit type {t}: {e}") from e


def build_null_bitmap(values: Sequence[object], offset: int) -> bytes:
    """The NULL bitmap for ``values``: bit ``i + offset`` is set when ``values[i] is None``
    (offset 2 for result rows, 0 for COM_STMT_EXECUTE parameters)."""
    bitmap = bytearray((len(values) + offset + 7) // 8)
    for i, value in enumerate(values):
        if value is None:
            bit = i + offset
            bitmap[bit >> 3] |= 1 << (bit & 7)
    return bytes(bitmap)


def build_binary_row(types: Sequence[BinaryType], values: Sequence[InputValue | None]) -> bytes:
    """Encode a binary result-set row: 0x00, NULL bitmap (offset 2), the non-NULL values."""
    if len(types) != len(values):
        raise LocalProtocolError(f"{len(values)} values for {len(types)} columns")
    parts = [bytes((_ROW_HEADER,)), build_null_bitmap(values, ROW_NULL_BITMAP_OFFSET)]
    parts.extend(
        encode_binary_value(t, v) for t, v in zip(types, values, strict=True) if v is not None
    )
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------


def _decode_datetime(r: Reader) -> DateTimeValue:
    length = r.u8()
    if length == 0:
        return DateTimeValue()
    if length not in (4, 7, 11):
        raise RemoteProtocolError(f"invalid DATETIME length {length}")
    year = r.u16()
    month = r.u8()
    day = r.u8()
    if length == 4:
        return DateTimeValue(year, month, day)
    hour = r.u8()
    minute = r.u8()
    second = r.u8()
    micro = r.u32() if length == 11 else 0
    return DateTimeValue(year, month, day, hour, minute, second, micro)


def _decode_time(r: Reader) -> TimeValue:
    length = r.u8()
    if length == 0:
        return TimeValue()
    if length not in (8, 12):
        raise RemoteProtocolError(f"invalid TIME length {length}")
    negative = r.u8()
    if negative > 1:
        raise RemoteProtocolError(f"invalid TIME sign byte {negative}")
    days = r.u32()
    hours = r.u8()
    minutes = r.u8()
    seconds = r.u8()
    micro = r.u32() if length == 12 else 0
    return TimeValue(bool(negative), days, hours, minutes, seconds, micro)


def decode_binary_value(r: Reader, binary_type: BinaryType) -> BinaryValue:
    """Read one non-NULL value of ``binary_type`` from ``r``."""
    t = binary_type.type
    codec = _INTS.get(t)
    if codec is not None:
        unpacker = codec[binary_type.unsigned]
        value: int = unpacker.unpack(r.view(unpacker.size))[0]
        return value
    unpack_float = _FLOATS.get(t)
    if unpack_float is not None:
        number: float = unpack_float.unpack(r.view(unpack_float.size))[0]
        return number
    if t in DATETIME_TYPES:
        return _decode_datetime(r)
    if t in TIME_TYPES:
        return _decode_time(r)
    if t == ColumnType.NULL:
        raise RemoteProtocolError("a NULL-typed value must be flagged in the NULL bitmap")
    return r.lenenc_bytes()


def parse_null_bitmap(r: Reader, count: int, offset: int) -> list[bool]:
    """Read a NULL bitmap for ``count`` values; ``True`` marks NULL."""
    bitmap = r.view((count + offset + 7) // 8)
    return [bool(bitmap[(i + offset) >> 3] & (1 << ((i + offset) & 7))) for i in range(count)]


def parse_binary_row(
    payload: bytes | bytearray | memoryview, types: Sequence[BinaryType]
) -> tuple[BinaryValue | None, ...]:
    """Parse a binary result-set row for columns of ``types``."""
    r = Reader(payload)
    header = r.u8()
    if header != _ROW_HEADER:
        raise RemoteProtocolError(f"binary row must start with 0x00, got 0x{header:02x}")
    nulls = parse_null_bitmap(r, len(types), ROW_NULL_BITMAP_OFFSET)
    row = tuple(
        None if is_null else decode_binary_value(r, t)
        for t, is_null in zip(types, nulls, strict=True)
    )
    if not r.at_end():
        raise RemoteProtocolError(f"{r.remaining()} byte(s) after the last column of a row")
    return row
