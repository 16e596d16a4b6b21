"""Generic response packets: OK, ERR and EOF, and the classifiers that tell them apart.

The layouts follow what mysqld writes (``net_send_ok``, ``net_send_error_packet``,
``write_eof_packet`` in ``sql/protocol_classic.cc``) and what libmysqlclient reads
(``read_ok_ex`` and ``cli_safe_read_with_ok_complete`` in ``sql-common/client.cc``), which
in places differ from the prose of the documentation; reference §1.1 and §1.2.

``capabilities`` arguments are the capabilities in effect on the connection (what the client
asked for and the server offered).

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_ok_packet.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_err_packet.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_eof_packet.html
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import (
    MAX_PACKET_PAYLOAD,
    Capability,
    Header,
    ServerStatus,
)
from consistent.protocol.lenenc import (
    Reader,
    decode_text,
    encode_text,
    pack_lenenc_bytes,
    pack_lenenc_int,
)
from consistent.protocol.session_state import (
    SessionStateChange,
    build_session_state,
    parse_session_state,
)

__all__ = [
    "EofPacket",
    "ErrPacket",
    "OkPacket",
    "build_eof",
    "build_err",
    "build_ok",
    "is_eof",
    "is_err",
    "is_ok",
    "parse_eof",
    "parse_err",
    "parse_ok",
]

_OK: Final = int(Header.OK)
_EOF: Final = int(Header.EOF)
_ERR: Final = int(Header.ERR)
_PROTOCOL_41: Final = int(Capability.PROTOCOL_41)
_TRANSACTIONS: Final = int(Capability.TRANSACTIONS)
_SESSION_TRACK: Final = int(Capability.SESSION_TRACK)
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_STATE_CHANGED: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_EOF_MAX_LENGTH: Final = 8
_MIN_OK_41: Final = 7  # header, two 1-byte lenencs, status, warnings
_LENENC_1: Final = 0xFB  # below this a length-encoded integer is one byte
_SQLSTATE_MARKER: Final = 0x23  # '#'
_SQLSTATE_LENGTH: Final = 5

_NO_STATUS: Final = ServerStatus(0)
_U16: Final = struct.Struct("<H")
_U16X2: Final = struct.Struct("<HH")
_ERR_HEAD: Final = struct.Struct("<BH")
_EOF_41: Final = struct.Struct("<BHH")


@dataclass(frozen=True, slots=True)
class OkPacket:
    """OK_Packet.  ``header`` is ``0xFE`` when the OK ends a result set under
    ``CLIENT_DEPRECATE_EOF``; ``info`` is the human-readable message (b"" when absent)."""

    affected_rows: int = 0
    last_insert_id: int = 0
    status: ServerStatus = _NO_STATUS
    warnings: int = 0
    info: bytes = b""
    session_state: tuple[SessionStateChange, ...] = ()
    header: int = _OK


@dataclass(frozen=True, slots=True)
class ErrPacket:
    """ERR_Packet.  ``sqlstate`` is ``None`` when the packet has no ``#`` marker."""

    errno: int
    sqlstate: str | None
    message: str


@dataclass(frozen=True, slots=True)
class EofPacket:
    """EOF_Packet (only without ``CLIENT_DEPRECATE_EOF``); it never carries session state."""

    warnings: int = 0
    status: ServerStatus = _NO_STATUS


# --- classifiers ---------------------------------------------------------------------------


def is_err(payload: bytes | bytearray | memoryview) -> bool:
    """Whether the payload is an ERR packet (first byte 0xFF), in any context."""
    return len(payload) > 0 and payload[0] == _ERR


def is_ok(payload: bytes | bytearray | memoryview, capabilities: int) -> bool:
    """Whether a response the client expects to be OK-or-data is an OK packet.

    As ``cli_safe_read_with_ok_complete``: a 0x00 header is an OK; a 0xFE header is an OK of
    any length below 16 MiB when ``CLIENT_DEPRECATE_EOF`` is on (longer is a huge data row).
    Inside a result set a row may also start with 0x00: the caller knows the context.
    """
    if not payload:
        return False
    first = payload[0]
    if first == _OK:
        return True
    return (
        first == _EOF
        and bool(int(capabilities) & _DEPRECATE_EOF)
        and len(payload) <= MAX_PACKET_PAYLOAD
    )


def is_eof(payload: bytes | bytearray | memoryview, capabilities: int) -> bool:
    """Whether the payload is an EOF packet: 0xFE header, shorter than 8 bytes, and only when
    ``CLIENT_DEPRECATE_EOF`` is off (with it, 0xFE starts an OK or a data row)."""
    return (
        not int(capabilities) & _DEPRECATE_EOF
        and 0 < len(payload) < _EOF_MAX_LENGTH
        and payload[0] == _EOF
    )


# --- OK ------------------------------------------------------------------------------------


def parse_ok(payload: bytes | bytearray | memoryview, capabilities: int) -> OkPacket:
    """Parse an OK packet with a 0x00 or 0xFE header, as ``read_ok_ex`` does.

    With ``CLIENT_SESSION_TRACK`` the info string is read only if bytes remain, and the
    session state only when ``SERVER_SESSION_STATE_CHANGED`` is set; without it the info, if
    any, is a length-encoded string.  Bytes after the last field are ignored, as by
    libmysqlclient.
    """
    caps = int(capabilities)  # int & int: IntFlag's own operators are slow
    n = len(payload)
    if (
        n >= _MIN_OK_41
        and caps & _PROTOCOL_41
        and payload[1] < _LENENC_1
        and payload[2] < _LENENC_1
    ):
        # The common case: one-byte affected rows and insert id, read without a Reader.
        header = payload[0]
        affected_rows = payload[1]
        last_insert_id = payload[2]
        status, warnings = _U16X2.unpack_from(payload, 3)
        r = Reader(payload, _MIN_OK_41)
    else:
        r = Reader(payload)
        header = r.u8()
        affected_rows = r.lenenc_int()
        last_insert_id = r.lenenc_int()
        status = 0
        warnings = 0
        if caps & _PROTOCOL_41:
            status = r.u16()
            warnings = r.u16()
        elif caps & _TRANSACTIONS:
            status = r.u16()
    if header not in (_OK, _EOF):
        raise RemoteProtocolError(f"not an OK packet: header 0x{header:02x}")
    info = b""
    state: tuple[SessionStateChange, ...] = ()
    if not r.at_end():
        info = r.lenenc_bytes()
        if caps & _SESSION_TRACK and status & _STATE_CHANGED and not r.at_end():
            state = parse_session_state(r.lenenc_view())
    return OkPacket(
        affected_rows,
        last_insert_id,
        ServerStatus(status),
        warnings,
        info,
        state,
        header,
    )


def build_ok(ok: OkPacket, capabilities: int) -> bytes:
    """Encode an OK packet the way ``net_send_ok`` does for a client with ``capabilities``.

    Session state needs ``CLIENT_SESSION_TRACK`` and ``SERVER_SESSION_STATE_CHANGED`` in
    ``ok.status``; a 0xFE header needs ``CLIENT_DEPRECATE_EOF``.
    """
    capabilities = int(capabilities)
    if ok.header not in (_OK, _EOF):
        raise LocalProtocolError(f"OK header must be 0x00 or 0xFE, got {ok.header:#x}")
    if ok.header == _EOF and not capabilities & _DEPRECATE_EOF:
        raise LocalProtocolError("a 0xFE-headed OK needs CLIENT_DEPRECATE_EOF")
    status = int(ok.status)
    state_changed = bool(status & _STATE_CHANGED) and bool(capabilities & _SESSION_TRACK)
    if ok.session_state and not state_changed:
        raise LocalProtocolError(
            "session state needs CLIENT_SESSION_TRACK and SERVER_SESSION_STATE_CHANGED"
        )
    if not 0 <= status <= 0xFFFF or not 0 <= ok.warnings <= 0xFFFF:
        raise LocalProtocolError("status and warnings are 2-byte fields")
    parts = [
        bytes((ok.header,)),
        pack_lenenc_int(ok.affected_rows),
        pack_lenenc_int(ok.last_insert_id),
    ]
    if capabilities & _PROTOCOL_41:
        parts.append(_U16X2.pack(status, ok.warnings))
    elif capabilities & _TRANSACTIONS:
        parts.append(_U16.pack(status))
    if capabilities & _SESSION_TRACK:
        if state_changed or ok.info:
            parts.append(pack_lenenc_bytes(ok.info))
        if state_changed:
            parts.append(pack_lenenc_bytes(build_session_state(ok.session_state)))
    elif ok.info:
        # mysqld writes a length-encoded string here too, despite the documented string<EOF>.
        parts.append(pack_lenenc_bytes(ok.info))
    return b"".join(parts)


# --- ERR -----------------------------------------------------------------------------------


def parse_err(payload: bytes | bytearray | memoryview, capabilities: int) -> ErrPacket:
    """Parse an ERR packet; the ``#`` + SQLSTATE part is recognised under
    ``CLIENT_PROTOCOL_41`` and is optional even then, as in libmysqlclient."""
    r = Reader(payload)
    header = r.u8()
    if header != _ERR:
        raise RemoteProtocolError(f"not an ERR packet: header 0x{header:02x}")
    errno = r.u16()
    sqlstate: str | None = None
    if capabilities & _PROTOCOL_41 and not r.at_end() and r.peek() == _SQLSTATE_MARKER:
        r.skip(1)
        raw = r.fixed(_SQLSTATE_LENGTH)
        sqlstate = raw.decode("ascii", "surrogateescape")
    return ErrPacket(errno, sqlstate, decode_text(r.rest_view()))


def build_err(err: ErrPacket, capabilities: int) -> bytes:
    """Encode an ERR packet.  The SQLSTATE is written only under ``CLIENT_PROTOCOL_41``, as
    mysqld does: older clients cannot receive it."""
    if not 0 <= err.errno <= 0xFFFF:
        raise LocalProtocolError(f"errno is a 2-byte field: {err.errno}")
    head = _ERR_HEAD.pack(_ERR, err.errno)
    message = encode_text(err.message)
    if err.sqlstate is None or not capabilities & _PROTOCOL_41:
        return head + message
    state = encode_text(err.sqlstate)
    if len(state) != _SQLSTATE_LENGTH:
        raise LocalProtocolError(f"SQLSTATE must be 5 characters: {err.sqlstate!r}")
    return head + b"#" + state + message


# --- EOF -----------------------------------------------------------------------------------


def parse_eof(payload: bytes | bytearray | memoryview, capabilities: int) -> EofPacket:
    """Parse an EOF packet: ``FE warnings(2) status(2)`` under ``CLIENT_PROTOCOL_41`` —
    warnings first, the reverse of the OK packet."""
    r = Reader(payload)
    header = r.u8()
    if header != _EOF or len(payload) >= _EOF_MAX_LENGTH:
        raise RemoteProtocolError("not an EOF packet")
    if capabilities & _PROTOCOL_41:
        warnings = r.u16()
        status = r.u16()
        return EofPacket(warnings, ServerStatus(status))
    return EofPacket()


def build_eof(eof: EofPacket, capabilities: int) -> bytes:
    """Encode an EOF packet (5 bytes under ``CLIENT_PROTOCOL_41``, else the bare 0xFE)."""
    if capabilities & _PROTOCOL_41:
        status = int(eof.status)
        if not 0 <= status <= 0xFFFF or not 0 <= eof.warnings <= 0xFFFF:
            raise LocalProtocolError("status and warnings are 2-byte fields")
        return _EOF_41.pack(_EOF, eof.warnings, status)
    return bytes((_EOF,))
