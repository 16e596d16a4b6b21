"""Command-phase packets sent by the client (COM_STMT_EXECUTE is in :mod:`.prepared`).

Every payload starts with a :class:`~consistent.protocol.constants.Command` byte;
:func:`parse_command` splits it off, the ``parse_*`` functions take the whole payload and
check that byte.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_command_phase.html
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import Capability, Command, SetOption
from consistent.protocol.handshake import Attributes, build_attributes, parse_attributes
from consistent.protocol.lenenc import (
    Reader,
    decode_text,
    encode_text,
    pack_lenenc_int,
    pack_nul_bytes,
)
from consistent.protocol.prepared import (
    BinaryParam,
    build_binary_params,
    parse_binary_params,
)

__all__ = [
    "ChangeUser",
    "FieldList",
    "Query",
    "StmtFetch",
    "StmtSendLongData",
    "build_change_user",
    "build_field_list",
    "build_init_db",
    "build_ping",
    "build_process_kill",
    "build_query",
    "build_quit",
    "build_reset_connection",
    "build_set_option",
    "build_stmt_close",
    "build_stmt_fetch",
    "build_stmt_prepare",
    "build_stmt_reset",
    "build_stmt_send_long_data",
    "parse_change_user",
    "parse_command",
    "parse_field_list",
    "parse_init_db",
    "parse_process_kill",
    "parse_query",
    "parse_set_option",
    "parse_stmt_close",
    "parse_stmt_fetch",
    "parse_stmt_prepare",
    "parse_stmt_reset",
    "parse_stmt_send_long_data",
]

_KNOWN_COMMANDS: Final = frozenset(int(c) for c in Command)
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_SEND_LONG_DATA_HEAD: Final = struct.Struct("<BIH")
_FETCH: Final = struct.Struct("<BII")


def parse_command(payload: bytes | bytearray | memoryview) -> tuple[Command, bytes]:
    """Split a command packet into its command and the bytes after the command byte."""
    if not payload:
        raise RemoteProtocolError("empty command packet")
    first = payload[0]
    if first not in _KNOWN_COMMANDS:
        raise RemoteProtocolError(f"unknown command 0x{first:02x}")
    return Command(first), bytes(payload[1:])


def _open(payload: bytes | bytearray | memoryview, command: Command) -> Reader:
    r = Reader(payload)
    first = r.u8()
    if first != command:
        raise RemoteProtocolError(f"expected {command.name}, got command 0x{first:02x}")
    return r


def _pack(fmt: struct.Struct, *values: int) -> bytes:
    try:
        return fmt.pack(*values)
    except struct.error as e:
        raise LocalProtocolError(f"field out of range: {e}") from e


def _closed(r: Reader) -> None:
    if not r.at_end():
        raise RemoteProtocolError(f"{r.remaining()} unexpected trailing byte(s)")


def _text(sql: bytes | str) -> bytes:
    return encode_text(sql) if isinstance(sql, str) else bytes(sql)


# --- COM_QUERY -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Query:
    """COM_QUERY: the statement text (bytes, in the connection's character set) and the
    query attributes sent with it under ``CLIENT_QUERY_ATTRIBUTES``."""

    sql: bytes
    attributes: tuple[BinaryParam, ...] = ()


def build_query(
    sql: bytes | str, query_attributes: bool = False, attributes: Sequence[BinaryParam] = ()
) -> bytes:
    """Encode COM_QUERY.  ``query_attributes`` when the connection negotiated
    ``CLIENT_QUERY_ATTRIBUTES``: then the ``parameter_count``/``parameter_set_count`` prefix
    is always present, with the attributes (if any) in binary-protocol form."""
    head = bytes((Command.QUERY,))
    if not query_attributes:
        if attributes:
            raise LocalProtocolError("query attributes need CLIENT_QUERY_ATTRIBUTES")
        return head + _text(sql)
    prefix = pack_lenenc_int(len(attributes)) + b"\x01"
    if attributes:
        prefix += build_binary_params(attributes, named=True, new_params_bound=True)
    return head + prefix + _text(sql)


def parse_query(
    payload: bytes | bytearray | memoryview, *, query_attributes: bool = False
) -> Query:
    """Parse COM_QUERY (with the attribute prefix when ``query_attributes``)."""
    r = _open(payload, Command.QUERY)
    attributes: tuple[BinaryParam, ...] = ()
    if query_attributes:
        count = r.lenenc_int()
        set_count = r.lenenc_int()
        if set_count != 1:
            raise RemoteProtocolError(f"parameter_set_count must be 1, got {set_count}")
        if count:
            attributes, _ = parse_binary_params(r, count, named=True, previous=None)
    return Query(r.rest(), attributes)


# --- simple commands -----------------------------------------------------------------------


def build_quit() -> bytes:
    """COM_QUIT."""
    return bytes((Command.QUIT,))


def build_ping() -> bytes:
    """COM_PING."""
    return bytes((Command.PING,))


def build_reset_connection() -> bytes:
    """COM_RESET_CONNECTION."""
    return bytes((Command.RESET_CONNECTION,))


def build_init_db(schema: str) -> bytes:
    """COM_INIT_DB (``USE schema``)."""
    return bytes((Command.INIT_DB,)) + encode_text(schema)


def parse_init_db(payload: bytes | bytearray | memoryview) -> str:
    """The schema name of a COM_INIT_DB."""
    return decode_text(_open(payload, Command.INIT_DB).rest_view())


def build_stmt_prepare(sql: bytes | str) -> bytes:
    """COM_STMT_PREPARE."""
    return bytes((Command.STMT_PREPARE,)) + _text(sql)


def parse_stmt_prepare(payload: bytes | bytearray | memoryview) -> bytes:
    """The statement text of a COM_STMT_PREPARE."""
    return _open(payload, Command.STMT_PREPARE).rest()


def _build_id_command(command: Command, value: int) -> bytes:
    return bytes((command,)) + _pack(_U32, value)


def _parse_id_command(payload: bytes | bytearray | memoryview, command: Command) -> int:
    r = _open(payload, command)
    value = r.u32()
    _closed(r)
    return value


def build_stmt_close(statement_id: int) -> bytes:
    """COM_STMT_CLOSE (the server sends no answer)."""
    return _build_id_command(Command.STMT_CLOSE, statement_id)


def parse_stmt_close(payload: bytes | bytearray | memoryview) -> int:
    """The statement id of a COM_STMT_CLOSE."""
    return _parse_id_command(payload, Command.STMT_CLOSE)


def build_stmt_reset(statement_id: int) -> bytes:
    """COM_STMT_RESET."""
    return _build_id_command(Command.STMT_RESET, statement_id)


def parse_stmt_reset(payload: bytes | bytearray | memoryview) -> int:
    """The statement id of a COM_STMT_RESET."""
    return _parse_id_command(payload, Command.STMT_RESET)


def build_process_kill(connection_id: int) -> bytes:
    """COM_PROCESS_KILL."""
    return _build_id_command(Command.PROCESS_KILL, connection_id)


def parse_process_kill(payload: bytes | bytearray | memoryview) -> int:
    """The connection id of a COM_PROCESS_KILL."""
    return _parse_id_command(payload, Command.PROCESS_KILL)


def build_set_option(option: SetOption) -> bytes:
    """COM_SET_OPTION (multi-statements on or off)."""
    return bytes((Command.SET_OPTION,)) + _pack(_U16, option)


def parse_set_option(payload: bytes | bytearray | memoryview) -> SetOption:
    """The option of a COM_SET_OPTION."""
    r = _open(payload, Command.SET_OPTION)
    value = r.u16()
    _closed(r)
    try:
        return SetOption(value)
    except ValueError as e:
        raise RemoteProtocolError(f"unknown COM_SET_OPTION value {value}") from e


@dataclass(frozen=True, slots=True)
class StmtSendLongData:
    """COM_STMT_SEND_LONG_DATA: a chunk of a parameter's value, sent before the execute."""

    statement_id: int
    param_id: int
    data: bytes


def build_stmt_send_long_data(x: StmtSendLongData) -> bytes:
    """Encode COM_STMT_SEND_LONG_DATA."""
    return _pack(_SEND_LONG_DATA_HEAD, Command.STMT_SEND_LONG_DATA, x.statement_id, x.param_id) + (
        x.data
    )


def parse_stmt_send_long_data(payload: bytes | bytearray | memoryview) -> StmtSendLongData:
    """Parse COM_STMT_SEND_LONG_DATA."""
    r = _open(payload, Command.STMT_SEND_LONG_DATA)
    statement_id = r.u32()
    param_id = r.u16()
    return StmtSendLongData(statement_id, param_id, r.rest())


@dataclass(frozen=True, slots=True)
class StmtFetch:
    """COM_STMT_FETCH: rows from an open cursor."""

    statement_id: int
    num_rows: int


def build_stmt_fetch(x: StmtFetch) -> bytes:
    """Encode COM_STMT_FETCH."""
    return _pack(_FETCH, Command.STMT_FETCH, x.statement_id, x.num_rows)


def parse_stmt_fetch(payload: bytes | bytearray | memoryview) -> StmtFetch:
    """Parse COM_STMT_FETCH."""
    r = _open(payload, Command.STMT_FETCH)
    fetch = StmtFetch(r.u32(), r.u32())
    _closed(r)
    return fetch


@dataclass(frozen=True, slots=True)
class FieldList:
    """COM_FIELD_LIST (deprecated): the columns of ``table`` matching ``wildcard``."""

    table: str
    wildcard: bytes = b""


def build_field_list(x: FieldList) -> bytes:
    """Encode COM_FIELD_LIST."""
    return bytes((Command.FIELD_LIST,)) + pack_nul_bytes(x.table) + x.wildcard


def parse_field_list(payload: bytes | bytearray | memoryview) -> FieldList:
    """Parse COM_FIELD_LIST."""
    r = _open(payload, Command.FIELD_LIST)
    table = r.nul_text()
    return FieldList(table, r.rest())


# --- COM_CHANGE_USER -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangeUser:
    """COM_CHANGE_USER.  ``charset`` and what follows are optional on the wire: a field is
    present when it is not ``None`` and its capability (``PLUGIN_AUTH``, ``CONNECT_ATTRS``)
    is on."""

    username: str
    auth_response: bytes = b""
    database: str = ""
    charset: int | None = None
    auth_plugin_name: str | None = None
    attributes: Attributes | None = None


def build_change_user(x: ChangeUser, capabilities: int) -> bytes:
    """Encode COM_CHANGE_USER for a connection with ``capabilities``."""
    if x.auth_plugin_name is not None and not capabilities & Capability.PLUGIN_AUTH:
        raise LocalProtocolError("an auth plugin name needs CLIENT_PLUGIN_AUTH")
    if x.attributes is not None and not capabilities & Capability.CONNECT_ATTRS:
        raise LocalProtocolError("connection attributes need CLIENT_CONNECT_ATTRS")
    if x.charset is None and (x.auth_plugin_name is not None or x.attributes is not None):
        raise LocalProtocolError("the plugin name and attributes come after the charset")
    if (
        x.attributes is not None
        and x.auth_plugin_name is None
        and capabilities & Capability.PLUGIN_AUTH
    ):
        raise LocalProtocolError("attributes under CLIENT_PLUGIN_AUTH need a plugin name first")
    parts = [bytes((Command.CHANGE_USER,)), pack_nul_bytes(x.username)]
    if capabilities & Capability.SECURE_CONNECTION:
        if len(x.auth_response) > 0xFF:
            raise LocalProtocolError("auth response longer than 255 bytes")
        parts.append(bytes((len(x.auth_response),)) + x.auth_response)
    else:
        parts.append(pack_nul_bytes(x.auth_response))
    parts.append(pack_nul_bytes(x.database))
    if x.charset is not None:
        parts.append(_pack(_U16, x.charset))
    if x.auth_plugin_name is not None:
        parts.append(pack_nul_bytes(x.auth_plugin_name))
    if x.attributes is not None:
        parts.append(build_attributes(x.attributes))
    return b"".join(parts)


def parse_change_user(payload: bytes | bytearray | memoryview, capabilities: int) -> ChangeUser:
    """Parse COM_CHANGE_USER sent on a connection with ``capabilities``."""
    r = _open(payload, Command.CHANGE_USER)
    username = r.nul_text()
    if capabilities & Capability.SECURE_CONNECTION:
        auth_response = r.fixed(r.u8())
    else:
        auth_response = r.nul_bytes()
    database = r.nul_text()
    charset = plugin = attributes = None
    if not r.at_end():
        charset = r.u16()
        if capabilities & Capability.PLUGIN_AUTH and not r.at_end():
            plugin = r.nul_text()
        if capabilities & Capability.CONNECT_ATTRS and not r.at_end():
            attributes = parse_attributes(r.lenenc_view())
    return ChangeUser(username, auth_response, database, charset, plugin, attributes)
