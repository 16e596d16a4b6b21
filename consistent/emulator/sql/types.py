"""MySQL column types: what the protocol says about them and how values come back.

For each MySQL type the table gives the ``enum_field_types`` code of its column definitions,
the display length mysqld reports, the SQLite storage class used underneath, and the Python
type a row value is converted to.  Result-set metadata must be right for clients to decode
values (PyMySQL picks its converter from the type code and the charset: 63 means bytes).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import Enum
from types import MappingProxyType
from typing import Final

from consistent.protocol.constants import Charset, ColumnFlag, ColumnType

__all__ = [
    "BINARY_CHARSET",
    "DEFAULT_CHARSET",
    "TYPES",
    "Family",
    "TypeInfo",
    "TypeSpec",
    "convert_value",
    "format_datetime",
    "parse_temporal",
]

BINARY_CHARSET: Final = int(Charset.BINARY)
DEFAULT_CHARSET: Final = int(Charset.UTF8MB4_0900_AI_CI)
MBMAXLEN: Final = 4
UINT32_MAX: Final = 2**32 - 1


class Family(Enum):
    """How a type stores and converts values."""

    INT = "int"
    DECIMAL = "decimal"
    FLOAT = "float"
    BIT = "bit"
    DATE = "date"
    DATETIME = "datetime"
    TIME = "time"
    YEAR = "year"
    TEXT = "text"
    BINARY = "binary"
    ENUM = "enum"
    SET = "set"
    JSON = "json"
    NULL = "null"


@dataclass(frozen=True)
class TypeInfo:
    """Static facts of one MySQL type name."""

    name: str
    column_type: ColumnType
    family: Family
    length: int = 0
    unsigned_length: int = 0
    blob: bool = False


def _int(name: str, ct: ColumnType, length: int, ulength: int) -> TypeInfo:
    return TypeInfo(name, ct, Family.INT, length, ulength)


_TYPE_LIST: Final = (
    _int("tinyint", ColumnType.TINY, 4, 3),
    _int("smallint", ColumnType.SHORT, 6, 5),
    _int("mediumint", ColumnType.INT24, 9, 8),
    _int("int", ColumnType.LONG, 11, 10),
    _int("bigint", ColumnType.LONGLONG, 20, 20),
    TypeInfo("decimal", ColumnType.NEWDECIMAL, Family.DECIMAL),
    TypeInfo("float", ColumnType.FLOAT, Family.FLOAT, 12, 12),
    TypeInfo("double", ColumnType.DOUBLE, Family.FLOAT, 22, 22),
    TypeInfo("bit", ColumnType.BIT, Family.BIT, 1, 1),
    TypeInfo("date", ColumnType.DATE, Family.DATE, 10, 10),
    TypeInfo("datetime", ColumnType.DATETIME, Family.DATETIME, 19, 19),
    TypeInfo("timestamp", ColumnType.TIMESTAMP, Family.DATETIME, 19, 19),
    TypeInfo("time", ColumnType.TIME, Family.TIME, 10, 10),
    TypeInfo("year", ColumnType.YEAR, Family.YEAR, 4, 4),
    TypeInfo("char", ColumnType.STRING, Family.TEXT, 1, 1),
    TypeInfo("varchar", ColumnType.VAR_STRING, Family.TEXT),
    TypeInfo("binary", ColumnType.STRING, Family.BINARY, 1, 1),
    TypeInfo("varbinary", ColumnType.VAR_STRING, Family.BINARY),
    TypeInfo("tinytext", ColumnType.BLOB, Family.TEXT, 255, 255, True),
    TypeInfo("text", ColumnType.BLOB, Family.TEXT, 65535, 65535, True),
    TypeInfo("mediumtext", ColumnType.BLOB, Family.TEXT, 16777215, 16777215, True),
    TypeInfo("longtext", ColumnType.BLOB, Family.TEXT, UINT32_MAX, UINT32_MAX, True),
    TypeInfo("tinyblob", ColumnType.BLOB, Family.BINARY, 255, 255, True),
    TypeInfo("blob", ColumnType.BLOB, Family.BINARY, 65535, 65535, True),
    TypeInfo("mediumblob", ColumnType.BLOB, Family.BINARY, 16777215, 16777215, True),
    TypeInfo("longblob", ColumnType.BLOB, Family.BINARY, UINT32_MAX, UINT32_MAX, True),
    TypeInfo("enum", ColumnType.STRING, Family.ENUM),
    TypeInfo("set", ColumnType.STRING, Family.SET),
    TypeInfo("json", ColumnType.JSON, Family.JSON, UINT32_MAX, UINT32_MAX, True),
)

TYPES: Final = MappingProxyType({t.name: t for t in _TYPE_LIST})

#: Synonyms mysqld accepts in column definitions.
ALIASES: Final = MappingProxyType(
    {
        "integer": "int",
        "int1": "tinyint",
        "int2": "smallint",
        "int3": "mediumint",
        "int4": "int",
        "int8": "bigint",
        "middleint": "mediumint",
        "dec": "decimal",
        "numeric": "decimal",
        "fixed": "decimal",
        "real": "double",
        "float8": "double",
        "float4": "float",
        "character": "char",
        "nchar": "char",
        "nvarchar": "varchar",
        "long": "mediumtext",
    }
)

#: The SQLite column type (STRICT table) each family is stored as.
SQLITE_STORAGE: Final = MappingProxyType(
    {
        Family.INT: "INTEGER",
        Family.DECIMAL: "REAL",
        Family.FLOAT: "REAL",
        Family.BIT: "INTEGER",
        Family.DATE: "TEXT",
        Family.DATETIME: "TEXT",
        Family.TIME: "TEXT",
        Family.YEAR: "INTEGER",
        Family.TEXT: "TEXT",
        Family.BINARY: "ANY",
        Family.ENUM: "TEXT",
        Family.SET: "TEXT",
        Family.JSON: "TEXT",
        Family.NULL: "ANY",
    }
)

_NUMERIC_FAMILIES: Final = frozenset(
    {Family.INT, Family.DECIMAL, Family.FLOAT, Family.BIT, Family.YEAR}
)
_BINARY_CHARSET_FAMILIES: Final = _NUMERIC_FAMILIES | {
    Family.DATE,
    Family.DATETIME,
    Family.TIME,
    Family.BINARY,
    Family.JSON,
    Family.NULL,
}


@dataclass(frozen=True)
class TypeSpec:
    """A concrete type: name plus length/precision, scale/fsp, sign and charset."""

    name: str
    length: int | None = None
    scale: int | None = None
    unsigned: bool = False
    zerofill: bool = False
    values: tuple[str, ...] = ()
    charset: str | None = None
    collation: str | None = None

    @property
    def info(self) -> TypeInfo:
        """The static type facts."""
        return TYPES[self.name]

    @property
    def family(self) -> Family:
        """The value family."""
        return self.info.family

    @property
    def sqlite_type(self) -> str:
        """Storage class of the column in the STRICT SQLite table."""
        return SQLITE_STORAGE[self.family]

    def sql(self) -> str:
        """The type as SHOW CREATE TABLE prints it in MySQL 8.0 (no integer display widths
        except ``tinyint(1)``)."""
        name = self.name
        family = self.family
        if family is Family.INT:
            text = "tinyint(1)" if name == "tinyint" and self.length == 1 else name
        elif family is Family.DECIMAL:
            text = f"decimal({self.length or 10},{self.scale or 0})"
        elif family is Family.FLOAT and self.length is not None:
            text = f"{name}({self.length},{self.scale or 0})"
        elif family in (Family.DATETIME, Family.TIME) and self.scale:
            text = f"{name}({self.scale})"
        elif name in ("char", "varchar", "binary", "varbinary", "bit"):
            text = f"{name}({self.length if self.length is not None else 1})"
        elif family in (Family.ENUM, Family.SET):
            quoted = ",".join("'" + v.replace("'", "''") + "'" for v in self.values)
            text = f"{name}({quoted})"
        else:
            text = name
        if self.unsigned:
            text += " unsigned"
        if self.zerofill:
            text += " zerofill"
        return text

    def display_length(self) -> int:
        """``length`` of the column definition, as mysqld computes it."""
        info = self.info
        family = info.family
        if family is Family.INT:
            if self.name == "tinyint" and self.length == 1:
                return 1
            return info.unsigned_length if self.unsigned else info.length
        if family is Family.DECIMAL:
            precision = self.length or 10
            scale = self.scale or 0
            return precision + (1 if scale else 0) + (0 if self.unsigned else 1)
        if family in (Family.DATETIME, Family.TIME):
            return info.length + ((self.scale or 0) + 1 if self.scale else 0)
        if family is Family.BIT:
            return self.length or 1
        if family is Family.TEXT:
            chars = info.length if info.blob else (self.length or info.length or 1)
            return min(chars * MBMAXLEN, UINT32_MAX)
        if family is Family.BINARY:
            return info.length if info.blob else (self.length or info.length or 1)
        if family in (Family.ENUM, Family.SET):
            if family is Family.ENUM:
                chars = max((len(v) for v in self.values), default=0)
            else:
                chars = sum(len(v) for v in self.values) + max(len(self.values) - 1, 0)
            return chars * MBMAXLEN
        return info.length

    def decimals(self) -> int:
        """``decimals`` of the column definition."""
        family = self.family
        if family is Family.DECIMAL:
            return self.scale or 0
        if family in (Family.DATETIME, Family.TIME):
            return self.scale or 0
        if family is Family.FLOAT:
            return self.scale if self.scale is not None else 31
        if family in (Family.TEXT, Family.ENUM, Family.SET):
            return 0
        return 0

    def charset_id(self) -> int:
        """Collation id sent with the column: 63 for binary data, else utf8mb4's default."""
        if self.family in _BINARY_CHARSET_FAMILIES:
            return BINARY_CHARSET
        return DEFAULT_CHARSET

    def base_flags(self) -> ColumnFlag:
        """Flags that follow from the type alone."""
        flags = ColumnFlag(0)
        family = self.family
        if self.unsigned:
            flags |= ColumnFlag.UNSIGNED
        if self.zerofill:
            flags |= ColumnFlag.ZEROFILL
        if self.charset_id() == BINARY_CHARSET and family is not Family.NULL:
            flags |= ColumnFlag.BINARY
        if self.info.blob:
            flags |= ColumnFlag.BLOB
        if family is Family.ENUM:
            flags |= ColumnFlag.ENUM
        if family is Family.SET:
            flags |= ColumnFlag.SET
        if family is Family.YEAR:
            flags |= ColumnFlag.UNSIGNED | ColumnFlag.ZEROFILL
        if self.name == "timestamp":
            flags |= ColumnFlag.TIMESTAMP
        return flags


def format_datetime(value: dt.datetime, fsp: int) -> str:
    """``YYYY-MM-DD HH:MM:SS[.f…]`` with ``fsp`` fractional digits."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if fsp:
        text += "." + f"{value.microsecond:06d}"[:fsp]
    return text


def parse_temporal(family: Family, value: str) -> object:
    """Text stored in SQLite back to ``date``/``datetime``/``timedelta``; the text itself
    when it is not a valid value (zero dates and the like, which PyMySQL also keeps as str)."""
    text = value.strip()
    try:
        if family is Family.DATE:
            return dt.date.fromisoformat(text[:10])
        if family is Family.DATETIME:
            return dt.datetime.fromisoformat(text.replace("T", " "))
        if family is Family.TIME:
            return _parse_time(text)
    except ValueError:
        return value
    return value


def _parse_time(text: str) -> dt.timedelta:
    negative = text.startswith("-")
    body = text[1:] if negative else text
    fraction = 0
    if "." in body:
        body, frac = body.split(".", 1)
        fraction = int((frac + "000000")[:6])
    parts = [int(p) for p in body.split(":")]
    while len(parts) < 3:
        parts.append(0)
    delta = dt.timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2], microseconds=fraction)
    return -delta if negative else delta


def _to_decimal(value: object, scale: int) -> object:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return value
    if scale >= 0:
        return number.quantize(Decimal(1).scaleb(-scale))
    return number


def convert_value(spec: TypeSpec, value: object) -> object:
    """A value read from SQLite, as the Python object a MySQL client would decode."""
    if value is None:
        return None
    family = spec.family
    if family in (Family.INT, Family.YEAR):
        if isinstance(value, int | float):
            return int(value)
        try:
            return int(str(value))
        except ValueError:
            return value
    if family is Family.DECIMAL:
        return _to_decimal(value, spec.scale or 0)
    if family is Family.FLOAT:
        return float(value) if isinstance(value, int | float) else value
    if family is Family.BIT:
        if isinstance(value, int):
            return value.to_bytes(max(((spec.length or 1) + 7) // 8, 1), "big")
        return value
    if family in (Family.DATE, Family.DATETIME, Family.TIME):
        return parse_temporal(family, value) if isinstance(value, str) else value
    if family is Family.BINARY:
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, int | float):
            return str(value).encode()
        return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and family is Family.TEXT and value.is_integer():
        return str(value)
    return str(value) if not isinstance(value, str) else value
