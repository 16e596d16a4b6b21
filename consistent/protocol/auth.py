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

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_authentication_methods_native_password_authentication.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import NATIVE_PASSWORD_NONCE_LENGTH, CachingSha2

__all__ = [
    "CACHING_SHA2_PASSWORD",
    "MYSQL_NATIVE_PASSWORD",
    "CachingSha2",
    "caching_sha2_hash",
    "decrypt_password_rsa",
    "encrypt_password_rsa",
    "native_password_hash",
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
