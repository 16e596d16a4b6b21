"""Password scrambles and their server-side checks.  Three independent oracles: the formulas
written out step by step with hashlib, PyMySQL's ``pymysql._auth``, and the golden vectors of
go-sql-driver/mysql ``auth_test.go``."""

from __future__ import annotations

import asyncio
import hashlib
from functools import cache

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql import _auth as pymysql_auth

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.auth import (
    CachingSha2,
    CachingSha2Server,
    RsaKeyPair,
    Sha2Step,
    Verdict,
    caching_sha2_hash,
    decrypt_password_rsa,
    encrypt_password_rsa,
    native_password_hash,
    run_caching_sha2,
    scramble_caching_sha2,
    scramble_native_password,
    verify_caching_sha2,
    verify_native_password,
    xor_password,
)


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


NONCE = bytes(range(1, 21))

# go-sql-driver/mysql auth_test.go TestAuthFastNativePassword / ...CachingSHA256PasswordCached /
# ...FullRSA / TestScrambleSHA256Pass, all with password "secret" (the byte lists in hex).
GO_NATIVE = (
    bytes.fromhex("46725c5e01260b743f7217657e671a5f51111815"),
    bytes.fromhex("35b18c9ffbbd7f356dfcac32d3c0f0a41a30cf2d"),
)
GO_SHA2 = [
    (
        bytes.fromhex("5a694a7e1e3025380317737f45162954207b2b76"),
        bytes.fromhex("662005238fa18cf1abe8388b2b0e6bc4f9aa933cdccc78b2d60fb8961a3d39eb"),
    ),
    (
        bytes.fromhex("065160720e2a321e4c2f015f7e513e5e53503455"),
        bytes.fromhex("abc98a92599f0baa0043a531af5eda44b16d6e5622212cbe43f0466e288b7c29"),
    ),
    (
        bytes.fromhex("0a2f4a6f4b492230584c724a250d035052021715"),
        bytes.fromhex("f490e76f66d9d86665ce54d98c78d0acfe2fb0b08b423da807144873d30b312c"),
    ),
]


# --- mysql_native_password -----------------------------------------------------------------


def test_native_scramble_spelled_out() -> None:
    password = b"secret"
    stage1 = hashlib.sha1(password).digest()
    stage2 = hashlib.sha1(stage1).digest()
    expected = xor(stage1, hashlib.sha1(NONCE + stage2).digest())
    assert scramble_native_password(password, NONCE) == expected


def test_native_scramble_go_vector() -> None:
    nonce, expected = GO_NATIVE
    assert scramble_native_password(b"secret", nonce) == expected


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=20, max_size=21))
def test_native_scramble_matches_pymysql(password: bytes, nonce: bytes) -> None:
    assert scramble_native_password(password, nonce) == pymysql_auth.scramble_native_password(
        password, nonce
    )


def test_native_empty_password_sends_nothing() -> None:
    assert scramble_native_password(b"", NONCE) == b""
    assert native_password_hash(b"") == ""
    assert verify_native_password(b"", NONCE, "")
    assert not verify_native_password(b"x" * 20, NONCE, "")


def test_native_password_hash_is_mysql_password_function() -> None:
    # PASSWORD('secret') in MySQL 5.7: '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'
    expected = "*" + hashlib.sha1(hashlib.sha1(b"secret").digest()).hexdigest().upper()
    assert native_password_hash(b"secret") == expected
    assert expected == "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"


def test_native_verification() -> None:
    stored = native_password_hash(b"secret")
    scramble = scramble_native_password(b"secret", NONCE)
    assert verify_native_password(scramble, NONCE, stored)
    assert verify_native_password(scramble, NONCE + b"\x00", stored.lower())
    assert verify_native_password(scramble, NONCE, bytes.fromhex(stored[1:]))
    assert not verify_native_password(scramble_native_password(b"Secret", NONCE), NONCE, stored)
    assert not verify_native_password(scramble, bytes(20), stored)
    assert not verify_native_password(scramble[:-1], NONCE, stored)
    with pytest.raises(LocalProtocolError):
        verify_native_password(scramble, NONCE, "*nothex")


def test_short_nonce_is_remote_error() -> None:
    with pytest.raises(RemoteProtocolError):
        scramble_native_password(b"pw", b"short")


# --- caching_sha2_password -----------------------------------------------------------------


def test_caching_sha2_scramble_spelled_out() -> None:
    # XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)) + nonce)), sql/auth/sha2_password_common.cc.
    password = b"secret"
    stage1 = hashlib.sha256(password).digest()
    stage2 = hashlib.sha256(stage1).digest()
    expected = xor(stage1, hashlib.sha256(stage2 + NONCE).digest())
    assert scramble_caching_sha2(password, NONCE) == expected


@pytest.mark.parametrize(("nonce", "expected"), GO_SHA2)
def test_caching_sha2_go_vectors(nonce: bytes, expected: bytes) -> None:
    assert scramble_caching_sha2(b"secret", nonce) == expected


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=20, max_size=20))
def test_caching_sha2_matches_pymysql(password: bytes, nonce: bytes) -> None:
    assert scramble_caching_sha2(password, nonce) == pymysql_auth.scramble_caching_sha2(
        password, nonce
    )


def test_caching_sha2_fast_auth_check() -> None:
    cached = caching_sha2_hash(b"secret")
    assert cached == hashlib.sha256(hashlib.sha256(b"secret").digest()).digest()
    assert verify_caching_sha2(scramble_caching_sha2(b"secret", NONCE), NONCE, cached)
    assert not verify_caching_sha2(scramble_caching_sha2(b"other", NONCE), NONCE, cached)
    assert not verify_caching_sha2(scramble_caching_sha2(b"secret", bytes(20)), NONCE, cached)
    assert not verify_caching_sha2(b"", NONCE, cached)
    with pytest.raises(LocalProtocolError):
        verify_caching_sha2(b"x" * 32, NONCE, b"short")


def test_caching_sha2_messages() -> None:
    assert (
        CachingSha2.REQUEST_PUBLIC_KEY,
        CachingSha2.FAST_AUTH_SUCCESS,
        CachingSha2.PERFORM_FULL_AUTHENTICATION,
    ) == (2, 3, 4)


# --- full authentication over RSA ----------------------------------------------------------


@cache
def key_pair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def test_xor_password_repeats_the_nonce() -> None:
    password = b"p" * 25  # longer than the nonce: it wraps around
    data = password + b"\x00"
    expected = bytes(b ^ NONCE[i % 20] for i, b in enumerate(data))
    assert xor_password(password, NONCE) == expected


def test_our_ciphertext_decrypts_with_plain_cryptography() -> None:
    private_pem, public_pem = key_pair()
    ciphertext = encrypt_password_rsa(b"secret", NONCE, public_pem)
    key = serialization.load_pem_private_key(private_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    plain = key.decrypt(ciphertext, oaep)
    assert xor(plain, (NONCE * 2)[: len(plain)]) == b"secret\x00"


def test_pymysql_ciphertext_decrypts_with_ours() -> None:
    private_pem, public_pem = key_pair()
    ciphertext = pymysql_auth.sha2_rsa_encrypt(b"secret", NONCE, public_pem)
    assert decrypt_password_rsa(ciphertext, NONCE, private_pem) == b"secret"


@settings(max_examples=20, deadline=None)
@given(st.binary(max_size=100))
def test_rsa_round_trip(password: bytes) -> None:
    private_pem, public_pem = key_pair()
    ciphertext = encrypt_password_rsa(password, NONCE, public_pem)
    assert decrypt_password_rsa(ciphertext, NONCE, private_pem) == password


def test_rsa_errors() -> None:
    private_pem, public_pem = key_pair()
    with pytest.raises(RemoteProtocolError):
        encrypt_password_rsa(b"pw", NONCE, b"-----BEGIN PUBLIC KEY-----\nnope\n")
    with pytest.raises(RemoteProtocolError):
        decrypt_password_rsa(b"\x00" * 256, NONCE, private_pem)
    with pytest.raises(LocalProtocolError):
        decrypt_password_rsa(b"\x00" * 256, NONCE, b"not a key")
    with pytest.raises(LocalProtocolError):
        encrypt_password_rsa(b"p" * 300, NONCE, public_pem)  # too long for OAEP in 2048 bits
    # With the wrong nonce the terminator comes out as 0x00 ^ NONCE[6] = 0x07, not NUL.
    ciphertext = encrypt_password_rsa(b"secret", NONCE, public_pem)
    with pytest.raises(RemoteProtocolError):
        decrypt_password_rsa(ciphertext, bytes(20), private_pem)


# --- the server side: CachingSha2Server --------------------------------------------------


def _server(
    *, cached: bytes | None, secure: bool, password: bytes = b"secret"
) -> CachingSha2Server:
    private_pem, _public = key_pair()
    return CachingSha2Server(
        nonce=NONCE,
        cached=cached,
        secure=secure,
        keys=RsaKeyPair(private_pem),
        check=lambda given: given == password,
        empty_password=not password,
    )


FAST_SUCCESS = b"\x01\x03"
FULL = b"\x01\x04"


def test_sha2_server_fast_path() -> None:
    server = _server(cached=caching_sha2_hash(b"secret"), secure=False)
    step = server.start(scramble_caching_sha2(b"secret", NONCE))
    assert step == Sha2Step(Verdict.ACCEPT, FAST_SUCCESS)


def test_sha2_server_cache_miss_asks_for_the_password_in_clear_over_tls() -> None:
    server = _server(cached=None, secure=True)
    assert server.start(scramble_caching_sha2(b"secret", NONCE)) == Sha2Step(Verdict.READ, FULL)
    assert server.receive(b"secret\x00") == Sha2Step(Verdict.ACCEPT, password=b"secret")
    wrong = _server(cached=None, secure=True)
    wrong.start(scramble_caching_sha2(b"secret", NONCE))
    assert wrong.receive(b"guess\x00").verdict is Verdict.DENY


def test_sha2_server_mismatch_falls_back_to_full_authentication_over_rsa() -> None:
    # aiomysql and asyncmy scramble with the AuthSwitchRequest's nonce and its trailing NUL:
    # the fast check fails, and the password is then proven in full, as with mysqld.
    server = _server(cached=caching_sha2_hash(b"secret"), secure=False)
    scramble = pymysql_auth.scramble_caching_sha2(b"secret", NONCE + b"\x00")
    assert not verify_caching_sha2(scramble, NONCE, caching_sha2_hash(b"secret"))
    assert server.start(scramble) == Sha2Step(Verdict.READ, FULL)
    step = server.receive(bytes((CachingSha2.REQUEST_PUBLIC_KEY,)))
    assert step.verdict is Verdict.READ
    assert step.reply is not None
    assert step.reply.startswith(b"\x01-----BEGIN PUBLIC KEY-----")
    ciphertext = pymysql_auth.sha2_rsa_encrypt(b"secret", NONCE + b"\x00", step.reply[1:])
    assert server.receive(ciphertext) == Sha2Step(Verdict.ACCEPT, password=b"secret")


def test_sha2_server_never_accepts_a_wrong_password() -> None:
    cached = caching_sha2_hash(b"secret")
    server = _server(cached=cached, secure=False)
    assert server.start(scramble_caching_sha2(b"guess", NONCE)).verdict is Verdict.READ
    public = server.receive(bytes((CachingSha2.REQUEST_PUBLIC_KEY,))).reply
    assert public is not None
    assert server.receive(encrypt_password_rsa(b"guess", NONCE, public[1:])).verdict is (
        Verdict.DENY
    )
    # Without TLS a cleartext password is refused, even the right one.
    plain = _server(cached=None, secure=False)
    plain.start(scramble_caching_sha2(b"secret", NONCE))
    assert plain.receive(b"secret\x00").verdict is Verdict.DENY
    # The key is sent once; a second request is not a ciphertext.
    twice = _server(cached=None, secure=False)
    twice.start(scramble_caching_sha2(b"secret", NONCE))
    assert twice.receive(b"\x02").verdict is Verdict.READ
    assert twice.receive(b"\x02").verdict is Verdict.DENY
    # Nothing more is read after a verdict.
    assert twice.receive(b"secret\x00").verdict is Verdict.DENY


def test_sha2_server_empty_password() -> None:
    assert _server(cached=None, secure=False, password=b"").start(b"").verdict is Verdict.ACCEPT
    assert _server(cached=None, secure=False).start(b"").verdict is Verdict.DENY
    assert _server(cached=None, secure=False).start(b"\x00").verdict is Verdict.DENY


# --- run_caching_sha2: the exchange over two coroutines ------------------------------------


def _run(
    server: CachingSha2Server, scramble: bytes, client: list[bytes]
) -> tuple[Sha2Step, list[bytes]]:
    sent: list[bytes] = []
    packets = iter(client)

    async def send(reply: bytes) -> None:
        sent.append(reply)

    async def read() -> bytes:
        return next(packets)

    step = asyncio.run(run_caching_sha2(server, scramble, send=send, read=read))
    return step, sent


def test_run_sends_every_reply_and_reads_until_the_verdict() -> None:
    fast = _server(cached=caching_sha2_hash(b"secret"), secure=False)
    assert _run(fast, scramble_caching_sha2(b"secret", NONCE), []) == (
        Sha2Step(Verdict.ACCEPT, FAST_SUCCESS),
        [FAST_SUCCESS],
    )
    assert not fast.full_authentication
    full = _server(cached=None, secure=True)
    step, sent = _run(full, scramble_caching_sha2(b"secret", NONCE), [b"secret\x00"])
    assert step == Sha2Step(Verdict.ACCEPT, password=b"secret")
    assert sent == [FULL]
    assert full.full_authentication
    wrong = _server(cached=None, secure=True)
    step, sent = _run(wrong, scramble_caching_sha2(b"secret", NONCE), [b"guess\x00", b"unread"])
    assert step.verdict is Verdict.DENY
    assert sent == [FULL]
