"""The connection phase with a client: the proxy is the server.

:class:`Authenticator` sends a HandshakeV10 with the proxy's own nonce, upgrades to TLS when
the client sends an SSLRequest, and checks the client against the configured users; there is
no open relay.  Two plugins are served, per user:

* ``mysql_native_password``: the scramble is checked against ``SHA1(SHA1(password))``;
* ``caching_sha2_password``: the fast path checks the scramble against
  ``SHA256(SHA256(password))`` (known at once for users configured with a plaintext password,
  learnt after the first full authentication for users configured with a native hash); a miss
  or a mismatch asks for the full password (AuthMoreData ``0x04``), in clear over TLS, else
  encrypted with the proxy's RSA key, which a client without it requests with ``0x02`` — as
  mysqld does, so that clients which scramble with the wrong nonce (aiomysql, asyncmy) still
  log in, and a wrong password is still refused.  The exchange itself is
  :class:`~consistent.protocol.auth.CachingSha2Server`, shared with the emulator.

A client that starts with another plugin than its user's gets an AuthSwitchRequest with the
same nonce.  Failures are ERR 1045 (SQLSTATE 28000), as mysqld sends them.  The other side,
the proxy logging into its backends, is :mod:`proxy.handshake`.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from consistent.errnos import ER
from consistent.errors import OperationalError, RemoteProtocolError
from consistent.protocol import (
    MYSQL_NATIVE_PASSWORD,
    AuthSwitchRequest,
    CachingSha2Server,
    Capability,
    ErrPacket,
    HandshakeV10,
    RsaKeyPair,
    ServerStatus,
    Verdict,
    build_auth_switch_request,
    build_err,
    build_handshake_v10,
    build_ok,
    caching_sha2_hash,
    is_ssl_request,
    native_password_hash,
    parse_handshake_response41,
    run_caching_sha2,
    verify_native_password,
)
from consistent.protocol.constants import MariaDbCapability
from consistent.protocol.handshake import handshake_reserved, response_mariadb_capabilities
from consistent.protocol.responses import OkPacket
from proxy.config import UserConfig
from proxy.stream import PacketEndpoint, header

__all__ = [
    "RELAYED_MARIADB_CAPABILITIES",
    "AccessDenied",
    "Authenticator",
    "ClientLogin",
    "login_ok",
    "new_nonce",
    "proxy_capabilities",
]

logger = logging.getLogger(__name__)

_NONCE_LENGTH: Final = 20
# Printable ASCII without NUL, as mysqld's scramble: clients may treat part 2 as a C string.
_NONCE_ALPHABET: Final = bytes(range(0x21, 0x7F))

#: What the proxy offers its clients (SSL is added when TLS is configured, LOCAL_FILES when
#: LOCAL INFILE is allowed).  No compression, no query attributes, no optional metadata, and
#: CLIENT_MYSQL (LONG_PASSWORD) set so that MariaDB clients use no extended capabilities,
#: unless some are offered (:data:`RELAYED_MARIADB_CAPABILITIES`).
_FRONT_CAPABILITIES: Final = (
    Capability.LONG_PASSWORD
    | Capability.FOUND_ROWS
    | Capability.LONG_FLAG
    | Capability.CONNECT_WITH_DB
    | Capability.NO_SCHEMA
    | Capability.IGNORE_SPACE
    | Capability.PROTOCOL_41
    | Capability.INTERACTIVE
    | Capability.IGNORE_SIGPIPE
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PS_MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.CONNECT_ATTRS
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Capability.SESSION_TRACK
    | Capability.DEPRECATE_EOF
)

#: MariaDB's extended capabilities the proxy passes through when its primary offers them and
#: the client asks: bulk execution (``COM_STMT_BULK_EXECUTE``, MariaDB Connector/C and
#: Connector/Python's ``executemany``), which changes no packet the proxy reads.  The others
#: change result sets (metadata caching, extended type information) or add packets (progress
#: reports) that the relay and the proxy's own answers would have to speak.
RELAYED_MARIADB_CAPABILITIES: Final = int(MariaDbCapability.STMT_BULK_OPERATIONS)


def proxy_capabilities(*, tls: bool, local_infile: bool) -> Capability:
    """The capabilities the proxy offers its clients."""
    caps = _FRONT_CAPABILITIES
    if tls:
        caps |= Capability.SSL
    if local_infile:
        caps |= Capability.LOCAL_FILES
    return caps


def new_nonce() -> bytes:
    """A fresh 20-byte scramble of printable characters."""
    return bytes(secrets.choice(_NONCE_ALPHABET) for _ in range(_NONCE_LENGTH))


class AccessDenied(OperationalError):
    """A client failed to authenticate (ERR 1045)."""


@dataclass(frozen=True, slots=True)
class ClientLogin:
    """An authenticated client: who, and what it negotiated."""

    user: UserConfig
    capabilities: int
    charset: int
    database: str | None
    tls: bool
    #: Sequence id of the OK that completes the login (the caller sends it).
    next_seq: int
    #: The nonce of the handshake (COM_CHANGE_USER scrambles with it).
    nonce: bytes
    attributes: tuple[tuple[str, str], ...] = ()
    #: MariaDB extended capabilities negotiated (a subset of what the greeting offered).
    mariadb_capabilities: int = 0


def _access_denied(user: str, host: str, used_password: bool) -> AccessDenied:
    using = "YES" if used_password else "NO"
    return AccessDenied(
        ER.ACCESS_DENIED_ERROR,
        f"Access denied for user '{user}'@'{host}' (using password: {using})",
        sqlstate="28000",
    )


class Authenticator:
    """Checks clients against the configured users (see the module docstring).

    ``users`` may be replaced at any time (configuration reload); sessions already
    authenticated are not affected.  The RSA key pair serves caching_sha2_password's full
    authentication without TLS.
    """

    def __init__(self, users: Mapping[str, UserConfig], *, rsa_key_bits: int = 2048) -> None:
        self._users: Mapping[str, UserConfig] = dict(users)
        self._cache: dict[str, bytes] = {}
        self._keys = RsaKeyPair(bits=rsa_key_bits)
        #: caching_sha2_password logins that needed full authentication (a cache miss, or a
        #: scramble that failed the fast check).
        self.full_authentications = 0

    @property
    def users(self) -> Mapping[str, UserConfig]:
        return self._users

    @users.setter
    def users(self, users: Mapping[str, UserConfig]) -> None:
        old = self._users
        self._users = dict(users)
        # A changed account loses its cached caching_sha2 hash.
        for name in list(self._cache):
            if old.get(name) != self._users.get(name):
                del self._cache[name]

    def flush_cache(self) -> None:
        """Forget the caching_sha2_password hashes learnt from full authentications (as
        ``FLUSH PRIVILEGES`` empties mysqld's cache)."""
        self._cache.clear()

    # ----------------------------------------------------------------- password checks

    def _check_password(self, user: UserConfig, password: bytes) -> bool:
        if user.password is not None:
            return hmac.compare_digest(password, user.password.encode("utf-8"))
        if user.password_hash is not None:
            return hmac.compare_digest(
                native_password_hash(password).upper(), user.password_hash.upper()
            )
        return False

    def _native_hash(self, user: UserConfig) -> str:
        if user.password is not None:
            return native_password_hash(user.password.encode("utf-8"))
        return user.password_hash or ""

    def _sha2_hash(self, user: UserConfig) -> bytes | None:
        cached = self._cache.get(user.name)
        if cached is None and user.password is not None:
            cached = caching_sha2_hash(user.password.encode("utf-8"))
            self._cache[user.name] = cached
        return cached

    def _empty_password(self, user: UserConfig) -> bool:
        return user.password == "" or (user.password is None and user.password_hash == "")

    # ----------------------------------------------------------------- the exchange

    async def login(
        self,
        ep: PacketEndpoint,
        *,
        connection_id: int,
        server_version: str,
        charset: int,
        capabilities: Capability,
        default_plugin: str,
        host: str,
        tls_context: ssl.SSLContext | None,
        require_tls: bool,
        timeout: float,
        mariadb_capabilities: int = 0,
    ) -> ClientLogin:
        """Run the whole connection phase with a new client, up to (not including) the final
        OK.  Raises :class:`AccessDenied`, :class:`RemoteProtocolError` or ``TimeoutError``;
        ERR packets for the client are sent here.  ``mariadb_capabilities`` are MariaDB
        extended capabilities to offer (the greeting then clears ``CLIENT_MYSQL``)."""
        async with asyncio.timeout(timeout):
            return await self._login(
                ep,
                connection_id=connection_id,
                server_version=server_version,
                charset=charset,
                capabilities=capabilities,
                default_plugin=default_plugin,
                host=host,
                tls_context=tls_context,
                require_tls=require_tls,
                mariadb_capabilities=mariadb_capabilities,
            )

    async def _login(
        self,
        ep: PacketEndpoint,
        *,
        connection_id: int,
        server_version: str,
        charset: int,
        capabilities: Capability,
        default_plugin: str,
        host: str,
        tls_context: ssl.SSLContext | None,
        require_tls: bool,
        mariadb_capabilities: int,
    ) -> ClientLogin:
        nonce = new_nonce()
        if mariadb_capabilities:
            capabilities &= ~Capability.LONG_PASSWORD  # CLIENT_MYSQL: no extended capabilities
        greeting = HandshakeV10(
            server_version=server_version,
            connection_id=connection_id,
            auth_plugin_data=nonce,
            capabilities=capabilities,
            charset=charset,
            status=ServerStatus.AUTOCOMMIT,
            auth_plugin_name=default_plugin,
            reserved=handshake_reserved(mariadb_capabilities),
        )
        _send(ep, build_handshake_v10(greeting), 0)
        seq, payload = await ep.read_packet(None)
        tls = False
        if is_ssl_request(payload):
            if tls_context is None:
                raise RemoteProtocolError("SSLRequest but TLS is not offered")
            await ep.start_tls(tls_context, server_side=True)
            tls = True
            seq, payload = await ep.read_packet(None)
        caps = int(capabilities)
        try:
            response = parse_handshake_response41(payload, caps)
        except RemoteProtocolError:
            _send_err(ep, ErrPacket(ER.HANDSHAKE_ERROR, "08S01", "Bad handshake"), seq + 1, caps)
            raise
        effective = int(response.capabilities) & caps
        if require_tls and not tls:
            err = ErrPacket(
                ER.SECURE_TRANSPORT_REQUIRED,
                "HY000",
                "Connections using insecure transport are prohibited: use TLS",
            )
            _send_err(ep, err, seq + 1, effective)
            raise AccessDenied(err.errno, err.message, sqlstate=err.sqlstate)
        plugin = response.auth_plugin_name or MYSQL_NATIVE_PASSWORD
        user, seq = await self.authenticate(
            ep,
            username=response.username,
            plugin=plugin,
            auth_response=response.auth_response,
            nonce=nonce,
            seq=seq,
            capabilities=effective,
            tls=tls,
            host=host,
        )
        return ClientLogin(
            user=user,
            capabilities=effective,
            charset=response.charset,
            database=response.database or None,
            tls=tls,
            next_seq=(seq + 1) & 0xFF,
            nonce=nonce,
            attributes=response.attributes or (),
            mariadb_capabilities=mariadb_capabilities
            & int(response_mariadb_capabilities(response.capabilities, response.reserved)),
        )

    async def authenticate(
        self,
        ep: PacketEndpoint,
        *,
        username: str,
        plugin: str,
        auth_response: bytes,
        nonce: bytes,
        seq: int,
        capabilities: int,
        tls: bool,
        host: str,
    ) -> tuple[UserConfig, int]:
        """Check one user's credentials, switching plugin and asking for the full password
        as needed.  ``seq`` is the sequence id of the client's last packet; returns the user
        and the sequence id of the client's last packet (the OK takes the next one).  Sends
        the ERR and raises :class:`AccessDenied` on failure.  ``ep`` must be in packet mode."""
        user = self._users.get(username)
        if user is None:
            denied = _access_denied(username, host, bool(auth_response))
            _send_err(ep, _err_of(denied), seq + 1, capabilities)
            raise denied
        if plugin != user.plugin:
            switch = AuthSwitchRequest(user.plugin, nonce + b"\x00")
            _send(ep, build_auth_switch_request(switch), seq + 1)
            seq, auth_response = await ep.read_packet(None)
        if user.plugin == MYSQL_NATIVE_PASSWORD:
            ok = verify_native_password(auth_response, nonce, self._native_hash(user))
        else:
            ok, seq = await self._caching_sha2(
                ep, user, scramble=auth_response, nonce=nonce, seq=seq, tls=tls
            )
        if not ok:
            denied = _access_denied(username, host, bool(auth_response))
            _send_err(ep, _err_of(denied), seq + 1, capabilities)
            raise denied
        return user, seq

    async def _caching_sha2(
        self,
        ep: PacketEndpoint,
        user: UserConfig,
        *,
        scramble: bytes,
        nonce: bytes,
        seq: int,
        tls: bool,
    ) -> tuple[bool, int]:
        """Drive :class:`CachingSha2Server`: a fast-auth miss or mismatch asks for the
        password (in clear over TLS, else RSA-encrypted); the verified password fills the
        cache."""
        exchange = CachingSha2Server(
            nonce=nonce,
            cached=self._sha2_hash(user),
            secure=tls,
            keys=self._keys,
            check=lambda password: self._check_password(user, password),
            empty_password=self._empty_password(user),
        )

        async def send(reply: bytes) -> None:
            nonlocal seq
            seq = (seq + 1) & 0xFF
            _send(ep, reply, seq)

        async def read() -> bytes:
            nonlocal seq
            seq, packet = await ep.read_packet(None)
            return packet

        try:
            step = await run_caching_sha2(exchange, scramble, send=send, read=read)
        finally:  # counted even when the client goes away during the exchange
            if exchange.full_authentication:
                self.full_authentications += 1
        if step.verdict is not Verdict.ACCEPT:
            return False, seq
        if step.password is not None:
            self._cache[user.name] = caching_sha2_hash(step.password)
        return True, seq


def _err_of(error: OperationalError) -> ErrPacket:
    errno = error.errno or ER.ACCESS_DENIED_ERROR
    return ErrPacket(errno, error.sqlstate, error.msg)


def _send(ep: PacketEndpoint, payload: bytes, seq: int) -> None:
    ep.write(header(len(payload), seq) + payload)


def _send_err(ep: PacketEndpoint, err: ErrPacket, seq: int, capabilities: int) -> None:
    _send(ep, build_err(err, capabilities | Capability.PROTOCOL_41), seq)


def login_ok(capabilities: int) -> bytes:
    """The OK that completes a client's login."""
    return build_ok(OkPacket(status=ServerStatus.AUTOCOMMIT), capabilities)
