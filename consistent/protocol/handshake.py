"""Connection-phase packets: the server's HandshakeV10, the client's SSLRequest and
HandshakeResponse41, AuthSwitchRequest and AuthMoreData.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import (
    Capability,
    Charset,
    Header,
    MariaDbCapability,
)
from consistent.protocol.lenenc import Reader, pack_lenenc_bytes, pack_nul_bytes

__all__ = [
    "Attributes",
    "AuthMoreData",
    "AuthSwitchRequest",
    "HandshakeResponse41",
    "HandshakeV10",
    "SSLRequest",
    "build_attributes",
    "build_auth_more_data",
    "build_auth_switch_request",
    "build_handshake_response41",
    "build_handshake_v10",
    "build_ssl_request",
    "handshake_reserved",
    "is_ssl_request",
    "parse_attributes",
    "parse_auth_more_data",
    "parse_auth_switch_request",
    "parse_handshake_response41",
    "parse_handshake_v10",
    "parse_ssl_request",
    "response_mariadb_capabilities",
    "response_reserved",
]

_PROTOCOL_VERSION: Final = 10
_PART1_LENGTH: Final = 8
_PART2_MIN_LENGTH: Final = 13
_HANDSHAKE_RESERVED: Final = 10
_RESPONSE_RESERVED: Final = 23
_SSL_REQUEST_LENGTH: Final = 32
_HEAD: Final = struct.Struct("<IIB")  # client flags, max packet size, charset
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_CAPS_HIGH: Final = struct.Struct("<BHHB")  # charset, status, caps upper half, data length

Attributes = tuple[tuple[str, str], ...]
"""Connection attributes as (key, value) pairs, in wire order."""


# --- HandshakeV10 --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandshakeV10:
    """The server's greeting.  ``auth_plugin_data`` is the whole nonce (part 1 and part 2
    joined, without part 2's trailing NUL).  ``reserved`` holds the 10 reserved bytes as sent:
    MariaDB puts its extended capabilities in the last 4 (see :attr:`mariadb_capabilities`)."""

    server_version: str
    connection_id: int
    auth_plugin_data: bytes
    capabilities: Capability
    charset: int = Charset.UTF8MB4_GENERAL_CI
    status: int = 0
    auth_plugin_name: str | None = "mysql_native_password"
    reserved: bytes = bytes(_HANDSHAKE_RESERVED)

    @property
    def mariadb_capabilities(self) -> MariaDbCapability:
        """MariaDB's extended capabilities; empty unless the server cleared ``CLIENT_MYSQL``."""
        if self.capabilities & Capability.LONG_PASSWORD:
            return MariaDbCapability(0)
        return MariaDbCapability(int.from_bytes(self.reserved[6:10], "little"))


def handshake_reserved(mariadb: int) -> bytes:
    """The reserved bytes of a HandshakeV10 offering MariaDB's extended capabilities
    ``mariadb`` (the greeting must then clear ``CLIENT_MYSQL``)."""
    return bytes(_HANDSHAKE_RESERVED - 4) + _U32.pack(mariadb)


def response_reserved(mariadb: int) -> bytes:
    """The filler of a HandshakeResponse41 (or SSLRequest) asking for MariaDB's extended
    capabilities ``mariadb`` (the response must then clear ``CLIENT_MYSQL``)."""
    return bytes(_RESPONSE_RESERVED - 4) + _U32.pack(mariadb)


def response_mariadb_capabilities(capabilities: int, reserved: bytes) -> MariaDbCapability:
    """The extended capabilities a client's response asks for: the filler's last 4 bytes,
    when the client cleared ``CLIENT_MYSQL``."""
    if capabilities & Capability.LONG_PASSWORD or len(reserved) != _RESPONSE_RESERVED:
        return MariaDbCapability(0)
    return MariaDbCapability(_U32.unpack_from(reserved, _RESPONSE_RESERVED - 4)[0])


def parse_handshake_v10(payload: bytes | bytearray | memoryview) -> HandshakeV10:
    """Parse the server's Protocol::HandshakeV10 (protocol version 10 only).

    Part 2 of the nonce is ``max(13, auth_plugin_data_len - 8)`` bytes, ending in a NUL that
    is not part of the nonce.
    """
    r = Reader(payload)
    version = r.u8()
    if version != _PROTOCOL_VERSION:
        raise RemoteProtocolError(f"unsupported handshake protocol version {version}")
    server_version = r.nul_text()
    connection_id = r.u32()
    part1 = r.fixed(_PART1_LENGTH)
    r.skip(1)
    caps = r.u16()
    charset = r.u8()
    status = r.u16()
    caps |= r.u16() << 16
    data_length = r.u8()
    reserved = r.fixed(_HANDSHAKE_RESERVED)
    part2 = b""
    if caps & Capability.SECURE_CONNECTION:
        part2 = r.fixed(max(_PART2_MIN_LENGTH, data_length - _PART1_LENGTH))
        if part2.endswith(b"\x00"):
            part2 = part2[:-1]
    plugin: str | None = None
    if caps & Capability.PLUGIN_AUTH:
        # Some servers omit the final NUL of the plugin name (the doc's string<NUL>).
        rest = r.rest()
        plugin = rest.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
    return HandshakeV10(
        server_version=server_version,
        connection_id=connection_id,
        auth_plugin_data=part1 + part2,
        capabilities=Capability(caps),
        charset=charset,
        status=status,
        auth_plugin_name=plugin,
        reserved=reserved,
    )


def build_handshake_v10(handshake: HandshakeV10) -> bytes:
    """Encode a HandshakeV10 as mysqld does (``auth_plugin_data_len`` = nonce length + 1)."""
    h = handshake
    caps = int(h.capabilities)
    data = h.auth_plugin_data
    if len(data) < _PART1_LENGTH:
        raise LocalProtocolError("the nonce needs at least 8 bytes")
    if len(h.reserved) != _HANDSHAKE_RESERVED:
        raise LocalProtocolError("the reserved field is exactly 10 bytes")
    if (h.auth_plugin_name is not None) != bool(caps & Capability.PLUGIN_AUTH):
        raise LocalProtocolError("an auth plugin name goes with CLIENT_PLUGIN_AUTH, and only it")
    secure = bool(caps & Capability.SECURE_CONNECTION)
    if not secure and len(data) != _PART1_LENGTH:
        raise LocalProtocolError("without CLIENT_SECURE_CONNECTION the nonce is 8 bytes")
    part2 = data[_PART1_LENGTH:] + b"\x00"
    data_length = len(data) + 1 if caps & Capability.PLUGIN_AUTH else 0
    if secure and len(part2) != max(_PART2_MIN_LENGTH, data_length - _PART1_LENGTH):
        # The reader sizes part 2 as max(13, auth_plugin_data_len - 8).
        raise LocalProtocolError(
            "part 2 of the nonce must be 12 bytes, or longer only with CLIENT_PLUGIN_AUTH"
        )
    if data_length > 0xFF:
        raise LocalProtocolError("the nonce is at most 254 bytes")
    try:
        parts = [
            bytes((_PROTOCOL_VERSION,)),
            pack_nul_bytes(h.server_version),
            _U32.pack(h.connection_id),
            data[:_PART1_LENGTH],
            b"\x00",
            _U16.pack(caps & 0xFFFF),
            _CAPS_HIGH.pack(h.charset, h.status, caps >> 16, data_length),
            h.reserved,
        ]
    except struct.error as e:
        raise LocalProtocolError(f"handshake field out of range: {e}") from e
    if secure:
        parts.append(part2)
    if h.auth_plugin_name is not None:
        parts.append(pack_nul_bytes(h.auth_plugin_name))
    return b"".join(parts)


# --- SSLRequest and HandshakeResponse41 ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class SSLRequest:
    """The first 32 bytes of a HandshakeResponse41, sent alone to start TLS."""

    capabilities: Capability
    max_packet_size: int = 0
    charset: int = Charset.UTF8MB4_GENERAL_CI
    reserved: bytes = bytes(_RESPONSE_RESERVED)


@dataclass(frozen=True, slots=True)
class HandshakeResponse41:
    """The client's answer to the handshake.  The optional fields are present exactly when
    their capability is set in ``capabilities``: ``database`` (``CONNECT_WITH_DB``),
    ``auth_plugin_name`` (``PLUGIN_AUTH``), ``attributes`` (``CONNECT_ATTRS``),
    ``zstd_compression_level`` (``ZSTD_COMPRESSION_ALGORITHM``).  ``reserved`` is the 23-byte
    filler (MariaDB clients put extended capabilities in its last 4 bytes)."""

    capabilities: Capability
    username: str
    auth_response: bytes = b""
    max_packet_size: int = 0
    charset: int = Charset.UTF8MB4_GENERAL_CI
    database: str | None = None
    auth_plugin_name: str | None = None
    attributes: Attributes | None = None
    zstd_compression_level: int | None = None
    reserved: bytes = bytes(_RESPONSE_RESERVED)


def _parse_head(r: Reader) -> SSLRequest:
    caps = r.u32()
    max_packet = r.u32()
    charset = r.u8()
    reserved = r.fixed(_RESPONSE_RESERVED)
    if not caps & Capability.PROTOCOL_41:
        raise RemoteProtocolError("pre-4.1 handshake responses are not supported")
    return SSLRequest(Capability(caps), max_packet, charset, reserved)


def _build_head(caps: int, max_packet_size: int, charset: int, reserved: bytes) -> bytes:
    if not caps & Capability.PROTOCOL_41:
        raise LocalProtocolError("HandshakeResponse41 needs CLIENT_PROTOCOL_41")
    if len(reserved) != _RESPONSE_RESERVED:
        raise LocalProtocolError("the reserved field is exactly 23 bytes")
    try:
        return _HEAD.pack(caps, max_packet_size, charset) + reserved
    except struct.error as e:
        raise LocalProtocolError(f"handshake response field out of range: {e}") from e


def is_ssl_request(payload: bytes | bytearray | memoryview) -> bool:
    """Whether a client's first packet is an SSLRequest rather than a full response."""
    return len(payload) == _SSL_REQUEST_LENGTH and bool(
        int.from_bytes(payload[:4], "little") & Capability.SSL
    )


def parse_ssl_request(payload: bytes | bytearray | memoryview) -> SSLRequest:
    """Parse an SSLRequest (exactly 32 bytes, ``CLIENT_SSL`` set)."""
    r = Reader(payload)
    head = _parse_head(r)
    if not r.at_end() or not head.capabilities & Capability.SSL:
        raise RemoteProtocolError("not an SSLRequest")
    return head


def build_ssl_request(request: SSLRequest) -> bytes:
    """Encode an SSLRequest."""
    if not request.capabilities & Capability.SSL:
        raise LocalProtocolError("an SSLRequest needs CLIENT_SSL")
    return _build_head(
        int(request.capabilities), request.max_packet_size, request.charset, request.reserved
    )


def parse_attributes(data: bytes | bytearray | memoryview) -> Attributes:
    """Parse connection attributes: length-encoded key and value strings, repeated."""
    r = Reader(data)
    pairs: list[tuple[str, str]] = []
    while not r.at_end():
        key = r.lenenc_text()
        pairs.append((key, r.lenenc_text()))
    return tuple(pairs)


def build_attributes(attributes: Sequence[tuple[str, str]]) -> bytes:
    """Encode connection attributes, with the total-length prefix."""
    body = b"".join(pack_lenenc_bytes(k) + pack_lenenc_bytes(v) for k, v in attributes)
    return pack_lenenc_bytes(body)


def parse_handshake_response41(
    payload: bytes | bytearray | memoryview, capabilities: int | None = None
) -> HandshakeResponse41:
    """Parse the client's HandshakeResponse41.

    The layout follows the capabilities the packet declares; pass the server's
    ``capabilities`` to lay it out by the flags both sides have, as clients that set flags the
    server did not offer (PyMySQL sets ``CONNECT_WITH_DB``, ``CONNECT_ATTRS``…) write only the
    fields the server supports.  ``capabilities`` of the result stays what the client sent.
    """
    r = Reader(payload)
    head = _parse_head(r)
    caps = int(head.capabilities)
    if capabilities is not None:
        caps &= int(capabilities)
    username = r.nul_text()
    if caps & Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA:
        auth_response = r.lenenc_bytes()
    elif caps & Capability.SECURE_CONNECTION:
        auth_response = r.fixed(r.u8())
    else:
        auth_response = r.nul_bytes()
    database = r.nul_text() if caps & Capability.CONNECT_WITH_DB else None
    plugin: str | None = None
    if caps & Capability.PLUGIN_AUTH and not r.at_end():
        plugin = r.nul_text()
    attributes: Attributes | None = None
    if caps & Capability.CONNECT_ATTRS and not r.at_end():
        attributes = parse_attributes(r.lenenc_view())
    zstd: int | None = None
    if caps & Capability.ZSTD_COMPRESSION_ALGORITHM and not r.at_end():
        zstd = r.u8()
    return HandshakeResponse41(
        capabilities=head.capabilities,
        username=username,
        auth_response=auth_response,
        max_packet_size=head.max_packet_size,
        charset=head.charset,
        database=database,
        auth_plugin_name=plugin,
        attributes=attributes,
        zstd_compression_level=zstd,
        reserved=head.reserved,
    )


def _check_optional(present: bool, flag: Capability, caps: int) -> None:
    if present != bool(caps & flag):
        raise LocalProtocolError(f"field present iff CLIENT_{flag.name} is set")


def build_handshake_response41(response: HandshakeResponse41) -> bytes:
    """Encode a HandshakeResponse41 for the capabilities it declares."""
    x = response
    caps = int(x.capabilities)
    _check_optional(x.database is not None, Capability.CONNECT_WITH_DB, caps)
    _check_optional(x.auth_plugin_name is not None, Capability.PLUGIN_AUTH, caps)
    _check_optional(x.attributes is not None, Capability.CONNECT_ATTRS, caps)
    _check_optional(
        x.zstd_compression_level is not None, Capability.ZSTD_COMPRESSION_ALGORITHM, caps
    )
    parts = [
        _build_head(caps, x.max_packet_size, x.charset, x.reserved),
        pack_nul_bytes(x.username),
    ]
    if caps & Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA:
        parts.append(pack_lenenc_bytes(x.auth_response))
    elif caps & Capability.SECURE_CONNECTION:
        if len(x.auth_response) > 0xFF:
            raise LocalProtocolError("auth response longer than 255 bytes needs LENENC")
        parts.append(bytes((len(x.auth_response),)) + x.auth_response)
    else:
        parts.append(pack_nul_bytes(x.auth_response))
    if x.database is not None:
        parts.append(pack_nul_bytes(x.database))
    if x.auth_plugin_name is not None:
        parts.append(pack_nul_bytes(x.auth_plugin_name))
    if x.attributes is not None:
        parts.append(build_attributes(x.attributes))
    if x.zstd_compression_level is not None:
        if not 0 <= x.zstd_compression_level <= 0xFF:
            raise LocalProtocolError("the zstd level is a 1-byte field")
        parts.append(bytes((x.zstd_compression_level,)))
    return b"".join(parts)


# --- AuthSwitchRequest and AuthMoreData ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthSwitchRequest:
    """The server asks the client to authenticate with another plugin.  ``data`` is sent as
    is (mysqld appends a NUL to the 20-byte nonce)."""

    plugin_name: str
    data: bytes = b""


def parse_auth_switch_request(payload: bytes | bytearray | memoryview) -> AuthSwitchRequest:
    """Parse ``0xFE plugin_name<NUL> data<EOF>``; the bare 0xFE of the pre-4.1 "old
    password" switch is not supported."""
    r = Reader(payload)
    if r.u8() != Header.AUTH_SWITCH_REQUEST:
        raise RemoteProtocolError("not an AuthSwitchRequest")
    if r.at_end():
        raise RemoteProtocolError("old-password auth switch is not supported")
    plugin = r.nul_text()
    return AuthSwitchRequest(plugin, r.rest())


def build_auth_switch_request(request: AuthSwitchRequest) -> bytes:
    """Encode an AuthSwitchRequest."""
    return bytes((Header.AUTH_SWITCH_REQUEST,)) + pack_nul_bytes(request.plugin_name) + request.data


@dataclass(frozen=True, slots=True)
class AuthMoreData:
    """Extra authentication data from the server: ``0x01`` then the plugin's bytes (for
    caching_sha2_password a one-byte :class:`~consistent.protocol.constants.CachingSha2`
    message or a PEM public key)."""

    data: bytes


def parse_auth_more_data(payload: bytes | bytearray | memoryview) -> AuthMoreData:
    """Parse ``0x01 data<EOF>``."""
    r = Reader(payload)
    if r.u8() != Header.AUTH_MORE_DATA:
        raise RemoteProtocolError("not an AuthMoreData packet")
    return AuthMoreData(r.rest())


def build_auth_more_data(more: AuthMoreData) -> bytes:
    """Encode an AuthMoreData packet."""
    return bytes((Header.AUTH_MORE_DATA,)) + more.data
