"""Prepared statements in the binary protocol: COM_STMT_EXECUTE and its parameters (also
used by COM_QUERY's query attributes), and the COM_STMT_PREPARE_OK answer.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_execute.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_prepare.html
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.binary import (
    PARAM_NULL_BITMAP_OFFSET,
    BinaryType,
    BinaryValue,
    InputValue,
    build_null_bitmap,
    decode_binary_value,
    encode_binary_value,
    parse_null_bitmap,
)
from consistent.protocol.constants import (
    Capability,
    ColumnType,
    Command,
    CursorFlag,
    ResultsetMetadata,
)
from consistent.protocol.lenenc import Reader, pack_lenenc_bytes, pack_lenenc_int

__all__ = [
    "BinaryParam",
    "StmtExecute",
    "StmtPrepareOk",
    "build_binary_params",
    "build_stmt_execute",
    "build_stmt_prepare_ok",
    "parse_binary_params",
    "parse_stmt_execute",
    "parse_stmt_prepare_ok",
]

_KNOWN_TYPES: Final = frozenset(int(t) for t in ColumnType)
_UNSIGNED_PARAM: Final = 0x80
_QUERY_ATTRIBUTES: Final = int(Capability.QUERY_ATTRIBUTES)
_PARAMETER_COUNT_AVAILABLE: Final = int(CursorFlag.PARAMETER_COUNT_AVAILABLE)
_OPTIONAL_METADATA: Final = int(Capability.OPTIONAL_RESULTSET_METADATA)
_EXECUTE_HEAD: Final = struct.Struct("<BIBI")
_PREPARE_OK: Final = struct.Struct("<BIHHBH")


def _pack(fmt: struct.Struct, *values: int) -> bytes:
    try:
        return fmt.pack(*values)
    except struct.error as e:
        raise LocalProtocolError(f"field out of range: {e}") from e


# --- binary parameters (COM_STMT_EXECUTE and query attributes) -----------------------------


@dataclass(frozen=True, slots=True)
class BinaryParam:
    """One bound parameter or query attribute: type, value (``None`` is NULL), and the name
    that only query attributes carry."""

    type: int
    value: BinaryValue | InputValue | None
    unsigned: bool = False
    name: str = ""

    @property
    def binary_type(self) -> BinaryType:
        """The type as :func:`~consistent.protocol.binary.encode_binary_value` wants it."""
        return BinaryType(self.type, self.unsigned)


def build_binary_params(
    params: Sequence[BinaryParam], named: bool, new_params_bound: bool
) -> bytes:
    parts = [
        build_null_bitmap([p.value for p in params], PARAM_NULL_BITMAP_OFFSET),
        b"\x01" if new_params_bound else b"\x00",
    ]
    if new_params_bound:
        for p in params:
            if not 0 <= p.type <= 0xFF:
                raise LocalProtocolError(f"parameter type out of range: {p.type}")
            parts.append(bytes((p.type, _UNSIGNED_PARAM if p.unsigned else 0)))
            if named:
                parts.append(pack_lenenc_bytes(p.name))
            elif p.name:
                raise LocalProtocolError("parameter names need CLIENT_QUERY_ATTRIBUTES")
    parts.extend(encode_binary_value(p.binary_type, p.value) for p in params if p.value is not None)
    return b"".join(parts)


def parse_binary_params(
    r: Reader, count: int, named: bool, previous: Sequence[BinaryParam] | None
) -> tuple[tuple[BinaryParam, ...], bool]:
    nulls = parse_null_bitmap(r, count, PARAM_NULL_BITMAP_OFFSET)
    new_params_bound = r.u8()
    if new_params_bound > 1:
        raise RemoteProtocolError(f"new_params_bind_flag must be 0 or 1, got {new_params_bound}")
    types: list[tuple[int, bool, str]] = []
    if new_params_bound:
        for _ in range(count):
            type_code = r.u8()
            flag = r.u8()
            name = r.lenenc_text() if named else ""
            column_type = ColumnType(type_code) if type_code in _KNOWN_TYPES else type_code
            types.append((column_type, bool(flag & _UNSIGNED_PARAM), name))
    elif previous is None or len(previous) != count:
        raise RemoteProtocolError("parameters not re-bound, but no earlier types to reuse")
    else:
        types = [(p.type, p.unsigned, p.name) for p in previous]
    params = tuple(
        BinaryParam(
            t, None if is_null else decode_binary_value(r, BinaryType(t, unsigned)), unsigned, n
        )
        for (t, unsigned, n), is_null in zip(types, nulls, strict=True)
    )
    return params, bool(new_params_bound)


# --- prepared statements -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StmtPrepareOk:
    """COM_STMT_PREPARE_OK; parameter and column definitions follow it."""

    statement_id: int
    num_columns: int
    num_params: int
    warnings: int = 0
    metadata_follows: bool = True


def build_stmt_prepare_ok(ok: StmtPrepareOk, capabilities: int) -> bytes:
    """Encode COM_STMT_PREPARE_OK (``metadata_follows`` only under
    ``CLIENT_OPTIONAL_RESULTSET_METADATA``)."""
    data = _pack(_PREPARE_OK, 0, ok.statement_id, ok.num_columns, ok.num_params, 0, ok.warnings)
    if capabilities & _OPTIONAL_METADATA:
        return data + bytes((ResultsetMetadata.FULL if ok.metadata_follows else 0,))
    if not ok.metadata_follows:
        raise LocalProtocolError("omitting metadata needs CLIENT_OPTIONAL_RESULTSET_METADATA")
    return data


def parse_stmt_prepare_ok(
    payload: bytes | bytearray | memoryview, capabilities: int
) -> StmtPrepareOk:
    """Parse COM_STMT_PREPARE_OK (the warning count is optional, as for old servers)."""
    r = Reader(payload)
    if r.u8() != 0:
        raise RemoteProtocolError("not a COM_STMT_PREPARE_OK")
    statement_id = r.u32()
    num_columns = r.u16()
    num_params = r.u16()
    r.skip(1)
    warnings = 0 if r.at_end() else r.u16()
    metadata = True
    if capabilities & _OPTIONAL_METADATA and not r.at_end():
        metadata = r.u8() != ResultsetMetadata.NONE
    return StmtPrepareOk(statement_id, num_columns, num_params, warnings, metadata)


@dataclass(frozen=True, slots=True)
class StmtExecute:
    """COM_STMT_EXECUTE.  When ``new_params_bound`` is false the client reuses the types of
    the previous execute, so :func:`parse_stmt_execute` needs them."""

    statement_id: int
    params: tuple[BinaryParam, ...] = ()
    flags: CursorFlag = CursorFlag.NO_CURSOR
    iteration_count: int = 1
    new_params_bound: bool = True


def _named(capabilities: int, flags: int) -> bool:
    # The count and the names are on the wire only with both (libmysql sets the flag whenever
    # the server offers CLIENT_QUERY_ATTRIBUTES).
    return bool(capabilities & _QUERY_ATTRIBUTES) and bool(flags & _PARAMETER_COUNT_AVAILABLE)


def build_stmt_execute(x: StmtExecute, capabilities: int) -> bytes:
    """Encode COM_STMT_EXECUTE; values use the binary protocol, NULL bitmap offset 0."""
    flags = int(x.flags)
    named = _named(capabilities, flags)
    parts = [_pack(_EXECUTE_HEAD, Command.STMT_EXECUTE, x.statement_id, flags, x.iteration_count)]
    if named:
        parts.append(pack_lenenc_int(len(x.params)))
    if x.params:
        parts.append(build_binary_params(x.params, named, x.new_params_bound))
    return b"".join(parts)


def parse_stmt_execute(
    payload: bytes | bytearray | memoryview,
    capabilities: int,
    num_params: int,
    previous: Sequence[BinaryParam] | None = None,
) -> StmtExecute:
    """Parse COM_STMT_EXECUTE for a statement prepared with ``num_params`` parameters.

    The packet does not say how many parameters it holds unless the connection uses query
    attributes and the ``PARAMETER_COUNT_AVAILABLE`` flag is set, so the caller supplies the
    statement's count; ``previous`` are the parameters of the last execute, whose types are
    reused when the client does not re-bind them.
    """
    r = Reader(payload)
    if r.u8() != Command.STMT_EXECUTE:
        raise RemoteProtocolError("not a COM_STMT_EXECUTE")
    statement_id = r.u32()
    flags = r.u8()
    iteration_count = r.u32()
    named = _named(capabilities, flags)
    count = r.lenenc_int() if named else num_params
    params: tuple[BinaryParam, ...] = ()
    bound = True
    if count:
        params, bound = parse_binary_params(r, count, named, previous)
    return StmtExecute(statement_id, params, CursorFlag(flags), iteration_count, bound)
