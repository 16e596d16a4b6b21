"""The connection phase at a backend: the proxy is a client.

:func:`login_backend` logs in with the configured backend credentials, asking for the
capabilities the proxy needs (:data:`BACKEND_CAPABILITIES`) and those its client's session
mirrors (:data:`MIRRORED_CAPABILITIES`): ``mysql_native_password`` or
``caching_sha2_password`` (fast path, or full authentication over TLS or RSA), following
AuthSwitchRequests.  The other side, clients logging into the proxy, is
:mod:`proxy.clientlogin`.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Final

from consistent.errors import OperationalError, RemoteProtocolError
from consistent.protocol import (
    CACHING_SHA2_PASSWORD,
    MYSQL_NATIVE_PASSWORD,
    CachingSha2,
    Capability,
    HandshakeResponse41,
    build_handshake_response41,
    build_ssl_request,
    encrypt_password_rsa,
    parse_auth_switch_request,
    parse_err,
    parse_handshake_v10,
    scramble_caching_sha2,
    scramble_native_password,
)
from consistent.protocol.handshake import SSLRequest, response_reserved
from proxy.stream import PacketEndpoint, header

__all__ = [
    "BACKEND_CAPABILITIES",
    "MIRRORED_CAPABILITIES",
    "BackendLogin",
    "BackendLoginError",
    "login_backend",
]

#: What the proxy always asks of a backend: session state in OK packets, and DEPRECATE_EOF so
#: that result-set terminators carry it too.
BACKEND_CAPABILITIES: Final = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.PLUGIN_AUTH
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Capability.SESSION_TRACK
    | Capability.DEPRECATE_EOF
)

#: Client capabilities that change the server's behaviour, so a session's backend connections
#: mirror them (affected-row counting, multi-statements, wait_timeout class…).
MIRRORED_CAPABILITIES: Final = (
    Capability.FOUND_ROWS
    | Capability.NO_SCHEMA
    | Capability.IGNORE_SPACE
    | Capability.INTERACTIVE
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PS_MULTI_RESULTS
    | Capability.LOCAL_FILES
)


class BackendLoginError(OperationalError):
    """A backend refused the proxy's login (its ERR packet's errno and message)."""


def _send(ep: PacketEndpoint, payload: bytes, seq: int) -> None:
    ep.write(header(len(payload), seq) + payload)


@dataclass(frozen=True, slots=True)
class BackendLogin:
    """What a backend told the proxy during the login."""

    server_version: str
    connection_id: int
    capabilities: int
    status: int
    charset: int
    #: MariaDB extended capabilities: negotiated, and offered by the server.
    mariadb_capabilities: int = 0
    server_mariadb_capabilities: int = 0


async def login_backend(
    ep: PacketEndpoint,
    *,
    user: str,
    password: str,
    database: str | None,
    charset: int | None,
    capabilities: int,
    max_packet_size: int,
    tls_context: ssl.SSLContext | None,
    server_hostname: str | None,
    timeout: float,
    mariadb_capabilities: int = 0,
) -> BackendLogin:
    """Log into a backend as ``user``; ``capabilities`` (and MariaDB extended
    ``mariadb_capabilities``) are the ones wanted (those the server does not offer are
    dropped).  Raises :class:`BackendLoginError` when the server refuses,
    :class:`RemoteProtocolError`, ``ConnectionClosed`` or ``TimeoutError``."""
    async with asyncio.timeout(timeout):
        seq, payload = await ep.read_packet(None)
        if payload[:1] == b"\xff":
            err = parse_err(payload, Capability.PROTOCOL_41)
            raise BackendLoginError(err.errno, err.message, sqlstate=err.sqlstate)
        greeting = parse_handshake_v10(payload)
        server_caps = int(greeting.capabilities)
        caps = capabilities & server_caps
        if database:
            caps |= int(Capability.CONNECT_WITH_DB) & server_caps
        if not caps & Capability.PROTOCOL_41:
            raise RemoteProtocolError("the backend does not speak protocol 4.1")
        use_charset = charset if charset is not None else greeting.charset
        offered = int(greeting.mariadb_capabilities)
        extended = mariadb_capabilities & offered
        if extended:
            caps &= ~int(Capability.LONG_PASSWORD)  # CLIENT_MYSQL off: extended caps follow
        reserved = response_reserved(extended)
        if tls_context is not None:
            if not server_caps & Capability.SSL:
                raise BackendLoginError(2026, "TLS is configured but the backend does not offer it")
            caps |= int(Capability.SSL)
            request = SSLRequest(Capability(caps), max_packet_size, use_charset, reserved)
            seq += 1
            _send(ep, build_ssl_request(request), seq)
            await ep.start_tls(tls_context, server_side=False, server_hostname=server_hostname)
        nonce = greeting.auth_plugin_data
        plugin = greeting.auth_plugin_name or MYSQL_NATIVE_PASSWORD
        if plugin not in (MYSQL_NATIVE_PASSWORD, CACHING_SHA2_PASSWORD):
            plugin = MYSQL_NATIVE_PASSWORD  # the server will switch us if it disagrees
        secret = password.encode("utf-8")
        response = HandshakeResponse41(
            capabilities=Capability(caps),
            username=user,
            auth_response=_scramble(plugin, secret, nonce),
            max_packet_size=max_packet_size,
            charset=use_charset,
            database=database if caps & Capability.CONNECT_WITH_DB else None,
            auth_plugin_name=plugin if caps & Capability.PLUGIN_AUTH else None,
            reserved=reserved,
        )
        seq += 1
        _send(ep, build_handshake_response41(response), seq)
        tls = tls_context is not None
        while True:
            seq, payload = await ep.read_packet(None)
            first = payload[:1]
            if first == b"\x00":
                status = int.from_bytes(payload[3:5], "little") if len(payload) >= 5 else 0
                return BackendLogin(
                    server_version=greeting.server_version,
                    connection_id=greeting.connection_id,
                    capabilities=caps,
                    status=status,
                    charset=use_charset,
                    mariadb_capabilities=extended,
                    server_mariadb_capabilities=offered,
                )
            if first == b"\xff":
                err = parse_err(payload, caps)
                raise BackendLoginError(err.errno, err.message, sqlstate=err.sqlstate)
            if first == b"\xfe":
                switch = parse_auth_switch_request(payload)
                plugin = switch.plugin_name
                nonce = switch.data.rstrip(b"\x00") or nonce
                seq += 1
                _send(ep, _scramble(plugin, secret, nonce), seq)
                continue
            if first == b"\x01":
                seq = await _caching_sha2_more(
                    ep, payload[1:], seq=seq, secret=secret, nonce=nonce, tls=tls
                )
                continue
            raise RemoteProtocolError(f"unexpected packet 0x{payload[0]:02x} during login")


def _scramble(plugin: str, password: bytes, nonce: bytes) -> bytes:
    if plugin == CACHING_SHA2_PASSWORD:
        return scramble_caching_sha2(password, nonce)
    if plugin == MYSQL_NATIVE_PASSWORD:
        return scramble_native_password(password, nonce)
    raise BackendLoginError(2059, f"authentication plugin {plugin!r} is not supported")


async def _caching_sha2_more(
    ep: PacketEndpoint, data: bytes, *, seq: int, secret: bytes, nonce: bytes, tls: bool
) -> int:
    """One AuthMoreData of caching_sha2_password on the client side; returns the last seq."""
    if data == bytes((CachingSha2.FAST_AUTH_SUCCESS,)):
        return seq
    if data != bytes((CachingSha2.PERFORM_FULL_AUTHENTICATION,)):
        raise RemoteProtocolError("unexpected AuthMoreData from the backend")
    if tls:
        seq += 1
        _send(ep, secret + b"\x00", seq)
        return seq
    seq += 1
    _send(ep, bytes((CachingSha2.REQUEST_PUBLIC_KEY,)), seq)
    seq, payload = await ep.read_packet(None)
    if payload[:1] != b"\x01":
        raise RemoteProtocolError("expected the backend's public key")
    seq += 1
    _send(ep, encrypt_password_rsa(secret, nonce, payload[1:]), seq)
    return seq
