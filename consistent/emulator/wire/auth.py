"""The connection phase: Handshake v10 and password authentication, as mysqld 8.0 does it.

Two plugins are served, chosen per account (:attr:`Account.plugin`):

* ``mysql_native_password``: one scramble, checked against ``SHA1(SHA1(password))``;
* ``caching_sha2_password``: the fast path checks the scramble against the server's cache of
  ``SHA256(SHA256(password))`` and answers AuthMoreData ``0x03``; a miss (the cache starts
  empty, like mysqld's after a restart) or a mismatch answers ``0x04`` and asks for the
  password.  TLS is not offered, so the password must come RSA-encrypted: a client without
  the key asks with ``0x02`` and receives the public key as AuthMoreData.  A successful full
  authentication fills the cache.  The exchange is
  :class:`~consistent.protocol.auth.CachingSha2Server`, shared with the proxy.

When the client starts with another plugin than the account's, the server sends an
AuthSwitchRequest carrying the same nonce (mysqld keeps the handshake's scramble).  A failure
is ERR 1045 ``Access denied for user '…'@'…' (using password: YES|NO)``, SQLSTATE 28000.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from consistent.emulator.config import Account
from consistent.emulator.errors import ER, SPECS
from consistent.emulator.wire.stream import PacketStream
from consistent.protocol.auth import (
    CACHING_SHA2_PASSWORD,
    MYSQL_NATIVE_PASSWORD,
    CachingSha2Server,
    RsaKeyPair,
    Verdict,
    caching_sha2_hash,
    run_caching_sha2,
    verify_native_password,
)
from consistent.protocol.constants import (
    NATIVE_PASSWORD_NONCE_LENGTH,
    Capability,
    Charset,
    ServerStatus,
)
from consistent.protocol.handshake import (
    AuthSwitchRequest,
    HandshakeV10,
    build_auth_switch_request,
)
from consistent.protocol.responses import ErrPacket

__all__ = ["SERVER_CAPABILITIES", "Attempt", "Authenticator", "access_denied", "new_nonce"]

logger = logging.getLogger(__name__)

#: What the emulator offers: no SSL, no compression, no query attributes.
SERVER_CAPABILITIES: Final = (
    Capability.LONG_PASSWORD
    | Capability.FOUND_ROWS
    | Capability.LONG_FLAG
    | Capability.CONNECT_WITH_DB
    | Capability.PROTOCOL_41
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

_DEFAULT_PLUGIN: Final = CACHING_SHA2_PASSWORD
_NONCE_FORBIDDEN: Final = frozenset({0, ord("$")})  # as mysqld's generate_user_salt


def access_denied(user: str, host: str, password_used: bool) -> ErrPacket:
    """ERR 1045 as mysqld words it."""
    spec = SPECS[ER.ACCESS_DENIED_ERROR]
    message = spec.template % (user, host, "YES" if password_used else "NO")
    return ErrPacket(int(ER.ACCESS_DENIED_ERROR), spec.sqlstate, message)


def new_nonce() -> bytes:
    """20 random bytes without NUL or ``$``: clients treat the nonce as a C string."""
    out = bytearray()
    while len(out) < NATIVE_PASSWORD_NONCE_LENGTH:
        b = secrets.randbits(7)
        if b not in _NONCE_FORBIDDEN:
            out.append(b)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One authentication attempt: who, with which plugin the client started, what it sent."""

    user: str
    client_plugin: str
    response: bytes
    nonce: bytes
    host: str


_Verifier = Callable[["Authenticator", PacketStream, "Account | None", Attempt], Awaitable[bool]]


class Authenticator:
    """The server side of authentication, shared by every connection of one front-end: the
    accounts, the RSA key pair and the caching_sha2_password cache."""

    def __init__(
        self,
        accounts: Callable[[], Mapping[str, Account]],
        *,
        timeout: float,
        rsa_key_bits: int = 2048,
        rsa_private_key_pem: bytes | None = None,
    ) -> None:
        self._accounts = accounts
        self._timeout = timeout
        self._keys = RsaKeyPair(rsa_private_key_pem, bits=rsa_key_bits)
        self._sha2_cache: dict[str, bytes] = {}

    @property
    def public_key_pem(self) -> bytes:
        """The RSA public key a client asks for to encrypt its password (the key pair is
        made when first needed: most clients never ask)."""
        return self._keys.public_pem

    def handshake(self, connection_id: int, nonce: bytes, server_version: str) -> HandshakeV10:
        """The greeting of a new connection."""
        return HandshakeV10(
            server_version=server_version,
            connection_id=connection_id,
            auth_plugin_data=nonce,
            capabilities=SERVER_CAPABILITIES,
            charset=Charset.UTF8MB4_0900_AI_CI,
            status=ServerStatus.AUTOCOMMIT,
            auth_plugin_name=_DEFAULT_PLUGIN,
        )

    def flush_cache(self) -> None:
        """Forget the caching_sha2_password cache (``FLUSH PRIVILEGES`` does this on mysqld)."""
        self._sha2_cache.clear()

    def cached(self, user: str) -> bool:
        """Whether ``user`` would pass caching_sha2_password's fast path."""
        return user in self._sha2_cache

    async def authenticate(self, stream: PacketStream, attempt: Attempt) -> bool:
        """Run the exchange after the client's first response; True if the password is right.

        Writes AuthSwitchRequest / AuthMoreData packets as needed (the caller sends the final
        OK or ERR).
        """
        account = self._accounts().get(attempt.user)
        plugin = account.plugin if account is not None else _known(attempt.client_plugin)
        verifier = _VERIFIERS.get(plugin)
        if verifier is None:
            logger.warning("account %r uses unsupported plugin %r", attempt.user, plugin)
            return False
        if attempt.client_plugin != plugin:
            await stream.send(
                build_auth_switch_request(AuthSwitchRequest(plugin, attempt.nonce + b"\x00"))
            )
            response = await stream.read(self._timeout)
            attempt = Attempt(attempt.user, plugin, response, attempt.nonce, attempt.host)
        return await verifier(self, stream, account, attempt)

    async def _native(self, stream: PacketStream, account: Account | None, a: Attempt) -> bool:
        if account is None:
            return False
        return verify_native_password(a.response, a.nonce, account.native_hash)

    async def _caching_sha2(
        self, stream: PacketStream, account: Account | None, a: Attempt
    ) -> bool:
        stored = caching_sha2_hash(account.password.encode()) if account is not None else None
        cached = self._sha2_cache.get(a.user)
        exchange = CachingSha2Server(
            nonce=a.nonce,
            # The cache counts only while it matches the account (mysqld drops an entry
            # when the password changes).
            cached=cached if cached is not None and cached == stored else None,
            secure=False,
            keys=self._keys,
            check=lambda password: (
                account is not None and hmac.compare_digest(password, account.password.encode())
            ),
            empty_password=account is not None and account.password == "",
        )
        step = await run_caching_sha2(
            exchange, a.response, send=stream.send, read=lambda: stream.read(self._timeout)
        )
        if step.verdict is not Verdict.ACCEPT:
            return False
        if step.password is not None:
            self._sha2_cache[a.user] = caching_sha2_hash(step.password)
        return True


def _known(plugin: str) -> str:
    return plugin if plugin in _VERIFIERS else _DEFAULT_PLUGIN


_VERIFIERS: Final[Mapping[str, _Verifier]] = MappingProxyType(
    {
        MYSQL_NATIVE_PASSWORD: Authenticator._native,
        CACHING_SHA2_PASSWORD: Authenticator._caching_sha2,
    }
)
