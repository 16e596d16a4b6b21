"""Password authentication: ``mysql_native_password`` and ``caching_sha2_password``, client
and server side.

mysql_native_password (``sql/auth/password.cc``)::

    scramble = SHA1(password) XOR SHA1(nonce + SHA1(SHA1(password)))

The server stores ``SHA1(SHA1(password))`` (shown as ``*`` + 40 upper-case hex digits), XORs
the scramble with ``SHA1(nonce + stored)`` to recover ``SHA1(password)``, and checks that its
SHA1 is the stored hash.

caching_sha2_password fast path (``sql/auth/sha2_password_common.cc``, ``Generate_scramble``)::

    scramble = SHA256(password) XOR SHA256(SHA256(SHA256(password)) + nonce)

The server's cache holds ``SHA256(SHA256(password))`` and verifies the same way.  When the
cache misses, the server answers AuthMoreData ``0x04`` (perform full authentication); over an
insecure channel the client then sends the password encrypted with the server's RSA key
(RSA-OAEP with SHA-1 over ``(password + NUL) XOR nonce``), after asking for the key with
``0x02`` if it has none.  An empty password is sent as an empty response in every case.

The server's side of that exchange is :class:`CachingSha2Server`, a sans-I/O state machine
that the emulator and the proxy both drive (``sql/auth/sha2_password.cc``,
``caching_sha2_password_authenticate``): a scramble that fails the fast check, whether the
cache missed or the scramble is wrong, is answered with full authentication, never with a
refusal, because some clients scramble with the wrong nonce (aiomysql and asyncmy hash the
nonce of an AuthSwitchRequest with its trailing NUL) and then prove the password in full.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_authentication_methods_native_password_authentication.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import NATIVE_PASSWORD_NONCE_LENGTH, CachingSha2
from consistent.protocol.handshake import AuthMoreData, build_auth_more_data

__all__ = [
    "CACHING_SHA2_PASSWORD",
    "MYSQL_NATIVE_PASSWORD",
    "CachingSha2",
    "CachingSha2Server",
    "RsaKeyPair",
    "Sha2Step",
    "Verdict",
    "caching_sha2_hash",
    "decrypt_password_rsa",
    "encrypt_password_rsa",
    "native_password_hash",
    "run_caching_sha2",
    "scramble_caching_sha2",
    "scramble_native_password",
    "verify_caching_sha2",
    "verify_native_password",
    "xor_password",
]

MYSQL_NATIVE_PASSWORD: Final = "mysql_native_password"
CACHING_SHA2_PASSWORD: Final = "caching_sha2_password"

_SHA1_LENGTH: Final = 20
_SHA256_LENGTH: Final = 32
_NATIVE_HASH_PREFIX: Final = "*"


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _nonce(nonce: bytes) -> bytes:
    # Servers send the nonce with a trailing NUL (AuthSwitchRequest data, part 2 of the
    # handshake); the scramble uses its first 20 bytes only.
    if len(nonce) < NATIVE_PASSWORD_NONCE_LENGTH:
        raise RemoteProtocolError(f"nonce of {len(nonce)} bytes, expected 20")
    return nonce[:NATIVE_PASSWORD_NONCE_LENGTH]


# --- mysql_native_password -----------------------------------------------------------------


def scramble_native_password(password: bytes, nonce: bytes) -> bytes:
    """The client's 20-byte auth response for ``mysql_native_password`` (empty if the
    password is empty)."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password).digest()
    stage2 = hashlib.sha1(stage1).digest()
    return _xor(stage1, hashlib.sha1(_nonce(nonce) + stage2).digest())


def native_password_hash(password: bytes) -> str:
    """What mysqld stores for a ``mysql_native_password`` account: ``*`` + upper-case hex of
    ``SHA1(SHA1(password))``; empty for an empty password."""
    if not password:
        return ""
    stage2 = hashlib.sha1(hashlib.sha1(password).digest()).digest()
    return _NATIVE_HASH_PREFIX + stage2.hex().upper()


def _native_stage2(stored_hash: str | bytes) -> bytes:
    if isinstance(stored_hash, bytes):
        if len(stored_hash) != _SHA1_LENGTH:
            raise LocalProtocolError("a raw stored hash is 20 bytes")
        return stored_hash
    text = stored_hash.removeprefix(_NATIVE_HASH_PREFIX)
    try:
        raw = bytes.fromhex(text)
    except ValueError as e:
        raise LocalProtocolError(f"stored hash is not hex: {stored_hash!r}") from e
    if len(raw) != _SHA1_LENGTH:
        raise LocalProtocolError(f"stored hash is not a SHA1: {stored_hash!r}")
    return raw


def verify_native_password(scramble: bytes, nonce: bytes, stored_hash: str | bytes) -> bool:
    """Server side: whether ``scramble`` proves knowledge of the password whose double SHA1
    is ``stored_hash`` (``*HEX`` text as :func:`native_password_hash` returns, or 20 raw
    bytes).  An empty stored hash accepts only an empty scramble."""
    if not stored_hash:
        return not scramble
    stage2 = _native_stage2(stored_hash)
    if len(scramble) != _SHA1_LENGTH:
        return False
    stage1 = _xor(scramble, hashlib.sha1(_nonce(nonce) + stage2).digest())
    return hmac.compare_digest(hashlib.sha1(stage1).digest(), stage2)


# --- caching_sha2_password -----------------------------------------------------------------


def scramble_caching_sha2(password: bytes, nonce: bytes) -> bytes:
    """The client's 32-byte fast-auth response for ``caching_sha2_password`` (empty if the
    password is empty)."""
    if not password:
        return b""
    stage1 = hashlib.sha256(password).digest()
    stage2 = hashlib.sha256(stage1).digest()
    return _xor(stage1, hashlib.sha256(stage2 + _nonce(nonce)).digest())


def caching_sha2_hash(password: bytes) -> bytes:
    """What the server's fast-auth cache holds for a password: ``SHA256(SHA256(password))``."""
    return hashlib.sha256(hashlib.sha256(password).digest()).digest()


def verify_caching_sha2(scramble: bytes, nonce: bytes, cached_hash: bytes) -> bool:
    """Server side fast-auth check of ``scramble`` against the cached
    ``SHA256(SHA256(password))`` (``Validate_scramble``)."""
    if len(cached_hash) != _SHA256_LENGTH:
        raise LocalProtocolError("the cached hash is a 32-byte SHA256")
    if len(scramble) != _SHA256_LENGTH:
        return False
    stage1 = _xor(scramble, hashlib.sha256(cached_hash + _nonce(nonce)).digest())
    return hmac.compare_digest(hashlib.sha256(stage1).digest(), cached_hash)


# --- full authentication over RSA ----------------------------------------------------------

_OAEP: Final = padding.OAEP(
    mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None
)


def _xor_repeat(data: bytes, nonce: bytes) -> bytes:
    key = _nonce(nonce)
    return bytes(b ^ key[i % NATIVE_PASSWORD_NONCE_LENGTH] for i, b in enumerate(data))


def xor_password(password: bytes, nonce: bytes) -> bytes:
    """``(password + NUL) XOR nonce``, the nonce repeated as needed: the plaintext that full
    authentication encrypts."""
    return _xor_repeat(password + b"\x00", nonce)


def encrypt_password_rsa(password: bytes, nonce: bytes, public_key_pem: bytes) -> bytes:
    """Client side of full authentication: encrypt the password with the server's public key
    (which the server sent as a PEM in AuthMoreData)."""
    try:
        key = serialization.load_pem_public_key(public_key_pem)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise RemoteProtocolError(f"the server's public key is not a PEM RSA key: {e}") from e
    if not isinstance(key, rsa.RSAPublicKey):
        raise RemoteProtocolError("the server's public key is not an RSA key")
    try:
        return key.encrypt(xor_password(password, nonce), _OAEP)
    except ValueError as e:
        raise LocalProtocolError(f"password too long for the server's RSA key: {e}") from e


def decrypt_password_rsa(ciphertext: bytes, nonce: bytes, private_key_pem: bytes) -> bytes:
    """Server side of full authentication: recover the password the client encrypted."""
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise LocalProtocolError(f"not a PEM RSA private key: {e}") from e
    if not isinstance(key, rsa.RSAPrivateKey):
        raise LocalProtocolError("not an RSA private key")
    try:
        plain = key.decrypt(ciphertext, _OAEP)
    except ValueError as e:
        raise RemoteProtocolError("the encrypted password does not decrypt") from e
    full = _xor_repeat(plain, nonce)
    if not full.endswith(b"\x00"):
        raise RemoteProtocolError("the decrypted password is not NUL-terminated")
    return full[:-1]


# --- server side of caching_sha2_password ---------------------------------------------------


class RsaKeyPair:
    """The server's RSA key for full authentication without TLS: generated when first
    needed (tens of milliseconds that most servers never spend), or given as a PEM."""

    def __init__(self, private_pem: bytes | None = None, *, bits: int = 2048) -> None:
        self._bits = bits
        self._key: rsa.RSAPrivateKey | None = None
        self._public_pem = b""
        if private_pem is not None:
            self._load(private_pem)

    def _load(self, private_pem: bytes) -> rsa.RSAPrivateKey:
        # The key is ours: checking its numbers again would cost tens of milliseconds.
        try:
            key = serialization.load_pem_private_key(
                private_pem, password=None, unsafe_skip_rsa_key_validation=True
            )
        except (ValueError, TypeError, UnsupportedAlgorithm) as e:
            raise LocalProtocolError(f"not a PEM RSA private key: {e}") from e
        if not isinstance(key, rsa.RSAPrivateKey):
            raise LocalProtocolError("not an RSA private key")
        self._key = key
        self._public_pem = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return key

    def _private(self) -> rsa.RSAPrivateKey:
        key = self._key
        if key is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=self._bits)
            self._key = key
            self._public_pem = key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        return key

    @property
    def public_pem(self) -> bytes:
        """The public key, as the server sends it in AuthMoreData."""
        self._private()
        return self._public_pem

    def private_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM."""
        return self._private().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def decrypt_password(self, ciphertext: bytes, nonce: bytes) -> bytes:
        """The password a client encrypted with :func:`encrypt_password_rsa`; raises
        :class:`RemoteProtocolError` when the ciphertext is not one."""
        try:
            plain = self._private().decrypt(ciphertext, _OAEP)
        except ValueError as e:
            raise RemoteProtocolError("the encrypted password does not decrypt") from e
        full = _xor_repeat(plain, nonce)
        if not full.endswith(b"\x00"):
            raise RemoteProtocolError("the decrypted password is not NUL-terminated")
        return full[:-1]


class Verdict(IntEnum):
    """Where a :class:`CachingSha2Server` exchange stands after a step."""

    #: Send :attr:`Sha2Step.reply`, then hand the client's next packet to ``receive``.
    READ = 1
    #: The password is proven: send the reply (if any), then the final OK.
    ACCEPT = 2
    #: The password is wrong (or the exchange broken): send ERR 1045.
    DENY = 3


@dataclass(frozen=True, slots=True)
class Sha2Step:
    """One step of the server side: what to send, and what comes next."""

    verdict: Verdict
    #: An AuthMoreData payload to send first (``None``: nothing).
    reply: bytes | None = None
    #: After a successful full authentication: the password, whose hash fills the cache.
    password: bytes | None = None


_EMPTY_RESPONSES: Final = frozenset({b"", b"\x00"})
_REQUEST_PUBLIC_KEY: Final = bytes((CachingSha2.REQUEST_PUBLIC_KEY,))


def _more(message: CachingSha2) -> bytes:
    return build_auth_more_data(AuthMoreData(bytes((message,))))


class CachingSha2Server:
    """The server side of ``caching_sha2_password`` for one login, without I/O.

    ``start`` takes the client's scramble; each step says what to send and whether to read
    the client's next packet (``receive``), accept or deny.  ``cached`` is the server's
    ``SHA256(SHA256(password))`` for the account if the cache holds one; ``secure`` says the
    connection is TLS (the password may then come in clear); ``check`` tells whether a
    cleartext password is the account's (False for an unknown account: the exchange still
    runs to the end, as mysqld's does); ``empty_password`` whether the account has none.
    """

    def __init__(
        self,
        *,
        nonce: bytes,
        cached: bytes | None,
        secure: bool,
        keys: RsaKeyPair,
        check: Callable[[bytes], bool],
        empty_password: bool,
    ) -> None:
        self._nonce = nonce
        self._cached = cached
        self._secure = secure
        self._keys = keys
        self._check = check
        self._empty_password = empty_password
        self._full = False
        self._key_sent = False
        #: Whether the fast path failed and the password itself was asked for.
        self.full_authentication = False

    def start(self, scramble: bytes) -> Sha2Step:
        """The client's first answer (in its HandshakeResponse or after an AuthSwitch)."""
        if scramble in _EMPTY_RESPONSES:
            return Sha2Step(Verdict.ACCEPT if self._empty_password else Verdict.DENY)
        cached = self._cached
        if cached is not None and verify_caching_sha2(scramble, self._nonce, cached):
            return Sha2Step(Verdict.ACCEPT, _more(CachingSha2.FAST_AUTH_SUCCESS))
        # A cache miss and a wrong scramble alike: ask for the password itself.
        self._full = self.full_authentication = True
        return Sha2Step(Verdict.READ, _more(CachingSha2.PERFORM_FULL_AUTHENTICATION))

    def receive(self, packet: bytes) -> Sha2Step:
        """The client's next packet during full authentication."""
        if not self._full:
            return Sha2Step(Verdict.DENY)
        if self._secure:
            password = packet[:-1] if packet.endswith(b"\x00") else packet
        elif packet == _REQUEST_PUBLIC_KEY and not self._key_sent:
            self._key_sent = True
            return Sha2Step(Verdict.READ, build_auth_more_data(AuthMoreData(self._keys.public_pem)))
        else:
            # Without TLS only an RSA-encrypted password is taken: a cleartext one would
            # have crossed the network readable.
            try:
                password = self._keys.decrypt_password(packet, self._nonce)
            except RemoteProtocolError:
                return Sha2Step(Verdict.DENY)
        self._full = False
        if not password or not self._check(password):
            return Sha2Step(Verdict.DENY)
        return Sha2Step(Verdict.ACCEPT, password=password)


async def run_caching_sha2(
    exchange: CachingSha2Server,
    scramble: bytes,
    *,
    send: Callable[[bytes], Awaitable[None]],
    read: Callable[[], Awaitable[bytes]],
) -> Sha2Step:
    """Run ``exchange`` from the client's ``scramble`` to its verdict: each reply goes to
    ``send``, each packet the exchange waits for comes from ``read``.  Returns the last step
    (:attr:`Verdict.ACCEPT` or :attr:`Verdict.DENY`); the caller sends the final OK or ERR, and
    learns the hash of :attr:`Sha2Step.password` when there is one."""
    step = exchange.start(scramble)
    while True:
        if step.reply is not None:
            await send(step.reply)
        if step.verdict is not Verdict.READ:
            return step
        step = exchange.receive(await read())
