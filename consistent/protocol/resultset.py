"""Text result sets: the column count, ColumnDefinition41 and text rows.

A result set is: column count, one ColumnDefinition41 per column, an EOF (omitted under
``CLIENT_DEPRECATE_EOF``), the rows, then an EOF or, under ``CLIENT_DEPRECATE_EOF``, an OK
with header 0xFE.  Binary rows (prepared statements) are in :mod:`.binary`.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset_column_definition.html
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.binary import TextValue, value_bytes
from consistent.protocol.constants import (
    Capability,
    Charset,
    ColumnFlag,
    ColumnType,
    LenencPrefix,
    ResultsetMetadata,
    ServerStatus,
)
from consistent.protocol.lenenc import Reader, pack_lenenc_bytes, pack_lenenc_int
from consistent.protocol.responses import EofPacket, OkPacket, build_eof, build_ok

__all__ = [
    "ColumnDefinition41",
    "build_column_count",
    "build_column_definition41",
    "build_text_resultset",
    "build_text_row",
    "parse_column_count",
    "parse_column_definition41",
    "parse_text_row",
    "resultset_metadata_follows",
]

_FIXED_FIELDS_LENGTH: Final = 0x0C
_FIXED: Final = struct.Struct(
    "<BHIBHBH"
)  # length marker, charset, length, type, flags, dec, filler
_NULL: Final = bytes((LenencPrefix.NULL,))
_NO_FLAGS: Final = ColumnFlag(0)
_PROTOCOL_41: Final = int(Capability.PROTOCOL_41)
_OPTIONAL_METADATA: Final = int(Capability.OPTIONAL_RESULTSET_METADATA)
_KNOWN_TYPES: Final = frozenset(int(t) for t in ColumnType)


# --- column count --------------------------------------------------------------------------


def parse_column_count(payload: bytes | bytearray | memoryview, capabilities: int) -> int:
    """The number of columns announced by the first packet of a result set."""
    r = Reader(payload)
    count = r.lenenc_int()
    if capabilities & _OPTIONAL_METADATA:
        r.u8()
    if count == 0:
        raise RemoteProtocolError("a result set has at least one column")
    return count


def resultset_metadata_follows(payload: bytes | bytearray | memoryview, capabilities: int) -> bool:
    """Whether column definitions follow the column count (always, unless the connection
    uses ``CLIENT_OPTIONAL_RESULTSET_METADATA`` and the server sent ``RESULTSET_METADATA_NONE``)."""
    r = Reader(payload)
    r.lenenc_int()
    if not capabilities & _OPTIONAL_METADATA:
        return True
    return r.u8() != ResultsetMetadata.NONE


def build_column_count(count: int, capabilities: int, metadata_follows: bool = True) -> bytes:
    """Encode the column-count packet."""
    if count <= 0:
        raise LocalProtocolError(f"a result set has at least one column, got {count}")
    data = pack_lenenc_int(count)
    if capabilities & _OPTIONAL_METADATA:
        return data + bytes((ResultsetMetadata.FULL if metadata_follows else 0,))
    return data


# --- column definition ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnDefinition41:
    """One column of a result set.  ``type`` is a :class:`ColumnType` when known (a plain
    int otherwise, so a new server type does not break parsing).  ``default_value`` exists
    only in COM_FIELD_LIST responses."""

    name: str
    type: int = ColumnType.VAR_STRING
    charset: int = Charset.UTF8MB4_GENERAL_CI
    column_length: int = 0
    flags: ColumnFlag = _NO_FLAGS
    decimals: int = 0
    schema: str = ""
    table: str = ""
    org_table: str = ""
    org_name: str = ""
    catalog: str = "def"
    default_value: bytes | None = None


def _require_41(capabilities: int) -> None:
    if not capabilities & _PROTOCOL_41:
        raise LocalProtocolError("only the CLIENT_PROTOCOL_41 column definition is supported")


def parse_column_definition41(
    payload: bytes | bytearray | memoryview, capabilities: int, field_list: bool = False
) -> ColumnDefinition41:
    """Parse a ColumnDefinition41; ``field_list`` when it answers COM_FIELD_LIST (then a
    default value follows, ``0xFB`` for none)."""
    _require_41(capabilities)
    r = Reader(payload)
    catalog = r.lenenc_text()
    schema = r.lenenc_text()
    table = r.lenenc_text()
    org_table = r.lenenc_text()
    name = r.lenenc_text()
    org_name = r.lenenc_text()
    fixed = r.lenenc_int()
    if fixed != _FIXED_FIELDS_LENGTH:
        raise RemoteProtocolError(f"column definition fixed-field length {fixed}, expected 12")
    charset = r.u16()
    column_length = r.u32()
    column_type = r.u8()
    flags = r.u16()
    decimals = r.u8()
    r.skip(2)
    default_value = None
    if field_list and not r.at_end():
        default_value = r.lenenc_bytes_or_null()
    return ColumnDefinition41(
        name=name,
        type=ColumnType(column_type) if column_type in _KNOWN_TYPES else column_type,
        charset=charset,
        column_length=column_length,
        flags=ColumnFlag(flags),
        decimals=decimals,
        schema=schema,
        table=table,
        org_table=org_table,
        org_name=org_name,
        catalog=catalog,
        default_value=default_value,
    )


def build_column_definition41(
    column: ColumnDefinition41, capabilities: int, field_list: bool = False
) -> bytes:
    """Encode a ColumnDefinition41 (with the default value when ``field_list``)."""
    _require_41(capabilities)
    if column.default_value is not None and not field_list:
        raise LocalProtocolError("a default value is only sent in COM_FIELD_LIST responses")
    try:
        fixed = _FIXED.pack(
            _FIXED_FIELDS_LENGTH,
            column.charset,
            column.column_length,
            column.type,
            int(column.flags),
            column.decimals,
            0,
        )
    except struct.error as e:
        raise LocalProtocolError(f"column definition field out of range: {e}") from e
    parts = [
        pack_lenenc_bytes(column.catalog),
        pack_lenenc_bytes(column.schema),
        pack_lenenc_bytes(column.table),
        pack_lenenc_bytes(column.org_table),
        pack_lenenc_bytes(column.name),
        pack_lenenc_bytes(column.org_name),
        fixed,
    ]
    if field_list:
        value = column.default_value
        parts.append(_NULL if value is None else pack_lenenc_bytes(value))
    return b"".join(parts)


# --- text rows -----------------------------------------------------------------------------


def parse_text_row(payload: bytes | bytearray | memoryview, ncols: int) -> tuple[bytes | None, ...]:
    """Parse a text result-set row of ``ncols`` columns; ``0xFB`` is SQL NULL."""
    r = Reader(payload)
    row = tuple(r.lenenc_bytes_or_null() for _ in range(ncols))
    if not r.at_end():
        raise RemoteProtocolError(f"{r.remaining()} byte(s) after the last column of a row")
    return row


def build_text_row(values: Sequence[TextValue | None]) -> bytes:
    """Encode a text row; ``None`` is NULL, numbers are sent as their decimal text."""
    return b"".join(_NULL if v is None else pack_lenenc_bytes(value_bytes(v)) for v in values)


def build_text_resultset(
    columns: Sequence[ColumnDefinition41],
    rows: Sequence[Sequence[TextValue | None]],
    capabilities: int,
    status: ServerStatus,
) -> list[bytes]:
    """A whole text result set as payloads, in order, as mysqld writes it to a client with
    ``capabilities`` (see the module docstring for where EOFs go)."""
    deprecate_eof = bool(capabilities & Capability.DEPRECATE_EOF)
    payloads = [build_column_count(len(columns), capabilities)]
    payloads.extend(build_column_definition41(c, capabilities) for c in columns)
    if not deprecate_eof:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    payloads.extend(build_text_row(row) for row in rows)
    if deprecate_eof:
        payloads.append(build_ok(OkPacket(status=status, header=0xFE), capabilities))
    else:
        payloads.append(build_eof(EofPacket(0, status), capabilities))
    return payloads
