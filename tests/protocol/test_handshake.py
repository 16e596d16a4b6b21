"""Connection-phase packets against the examples of the MySQL documentation
(page_protocol_connection_phase_packets_protocol_handshake_v10 / _handshake_response,
page_protocol_basic_tls), rust_mysql_common's auth-switch vector, and PyMySQL as an
independent implementation of both ends of the handshake."""

from __future__ import annotations

import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysql.protocol import MysqlPacket

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.auth import scramble_native_password
from consistent.protocol.constants import CachingSha2, Capability, MariaDbCapability
from consistent.protocol.handshake import (
    AuthMoreData,
    AuthSwitchRequest,
    HandshakeResponse41,
    HandshakeV10,
    SSLRequest,
    build_auth_more_data,
    build_auth_switch_request,
    build_handshake_response41,
    build_handshake_v10,
    build_ssl_request,
    is_ssl_request,
    parse_auth_more_data,
    parse_auth_switch_request,
    parse_handshake_response41,
    parse_handshake_v10,
    parse_ssl_request,
)

C = Capability


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# MySQL doc: Protocol::HandshakeV10 of a 5.5.2-m2 server (payload, header 36 00 00 00 removed).
DOC_HANDSHAKE = h(
    "0a 35 2e 35 2e 32 2d 6d 32 00 52 00 00 00 22 3d 4e 50 29 75 39 56 00 ff ff 08 02 00"
    "00 00 00 00 00 00 00 00 00 00 00 00 00 29 64 40 52 5c 55 78 7a 7c 21 29 4b 00"
)
# MySQL doc: HandshakeResponse41 of user "pam", schema "test", mysql_native_password.
DOC_RESPONSE = h(
    "8d a6 0f 00 00 00 00 01 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 70 61 6d 00 14 ab 09 ee f6 bc b1 32 3e 61 14 38 65 c0 99 1d 95 7d 75 d4"
    "47 74 65 73 74 00 6d 79 73 71 6c 5f 6e 61 74 69 76 65 5f 70 61 73 73 77 6f 72 64 00"
)
# MySQL doc (page_protocol_basic_tls): the 5.5 client's response and its SSLRequest.
DOC_RESPONSE_55 = h(
    "05 a6 03 00 00 00 00 01 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 72 6f 6f 74 00 14 14 63 6b 70 99 8a b6 9e 96 87 a2 30 9a 40 67 2b 83 38"
    "85 4b"
)
DOC_SSL_REQUEST = h(
    "05 ae 03 00 00 00 00 01 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 0000 00 00 00"
)
# MySQL doc: HandshakeResponse41 of a 5.6.6-m9 client with connection attributes.
DOC_RESPONSE_ATTRS = h(
    "85 a2 1e 00 00 00 00 40 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 72 6f 6f 74 00 14 22 50 79 a2 12 d4 e8 82 e5 b3 f4 1a 97 75 6b c8 be db"
    "9f 80 6d 79 73 71 6c 5f 6e 61 74 69 76 65 5f 70 61 73 73 77 6f 72 64 00 61 03 5f 6f"
    "73 09 64 65 62 69 61 6e 36 2e 30 0c 5f 63 6c 69 65 6e 74 5f 6e 61 6d 65 08 6c 69 62"
    "6d 79 73 71 6c 04 5f 70 69 64 05 32 32 33 34 34 0f 5f 63 6c 69 65 6e 74 5f 76 65 72"
    "73 69 6f 6e 08 35 2e 36 2e 36 2d 6d 39 09 5f 70 6c 61 74 66 6f 72 6d 06 78 38 36 5f"
    "36 34 03 66 6f 6f 03 62 61 72"
)


def test_doc_handshake_v10() -> None:
    assert len(DOC_HANDSHAKE) == 0x36
    hs = parse_handshake_v10(DOC_HANDSHAKE)
    assert hs.server_version == "5.5.2-m2"
    assert hs.connection_id == 0x52
    assert hs.capabilities == 0xFFFF
    assert hs.charset == 8
    assert hs.status == 2
    # Part 2 is 13 bytes; its final NUL is not part of the 20-byte nonce.
    assert hs.auth_plugin_data == b'"=NP)u9V' + b")d@R\\Uxz|!)K"
    assert hs.auth_plugin_name is None
    assert build_handshake_v10(hs) == DOC_HANDSHAKE


def test_doc_handshake_response41() -> None:
    r = parse_handshake_response41(DOC_RESPONSE)
    assert r.capabilities == 0x000FA68D
    assert r.max_packet_size == 16 * 1024 * 1024
    assert r.charset == 8
    assert r.username == "pam"
    assert r.auth_response == DOC_RESPONSE[37:57]
    assert r.database == "test"
    assert r.auth_plugin_name == "mysql_native_password"
    assert r.attributes is None
    assert build_handshake_response41(r) == DOC_RESPONSE


def test_doc_tls_examples() -> None:
    assert is_ssl_request(DOC_SSL_REQUEST)
    assert not is_ssl_request(DOC_RESPONSE_55)
    ssl = parse_ssl_request(DOC_SSL_REQUEST)
    assert ssl == SSLRequest(Capability(0x0003AE05), 16 * 1024 * 1024, 8)
    assert build_ssl_request(ssl) == DOC_SSL_REQUEST
    r = parse_handshake_response41(DOC_RESPONSE_55)
    assert (r.username, r.database, r.auth_plugin_name) == ("root", None, None)
    assert len(r.auth_response) == 20
    assert build_handshake_response41(r) == DOC_RESPONSE_55


def test_doc_response_with_connection_attributes() -> None:
    r = parse_handshake_response41(DOC_RESPONSE_ATTRS)
    assert r.capabilities & C.CONNECT_ATTRS
    assert r.max_packet_size == 1 << 30
    assert r.attributes == (
        ("_os", "debian6.0"),
        ("_client_name", "libmysql"),
        ("_pid", "22344"),
        ("_client_version", "5.6.6-m9"),
        ("_platform", "x86_64"),
        ("foo", "bar"),
    )
    assert build_handshake_response41(r) == DOC_RESPONSE_ATTRS


def test_rust_auth_switch_request_vector() -> None:
    # blackbeam/rust_mysql_common should_parse_auth_switch_request.
    wire = b"\xfemysql_native_password\x00zQg4i6oNy6=rHN/>-b)A\x00"
    req = parse_auth_switch_request(wire)
    assert req == AuthSwitchRequest("mysql_native_password", b"zQg4i6oNy6=rHN/>-b)A\x00")
    assert build_auth_switch_request(req) == wire


def test_auth_more_data_vector() -> None:
    # blackbeam/rust_mysql_common should_parse_auth_more_data: 01 04 = perform full auth.
    more = parse_auth_more_data(b"\x01\x04")
    assert more.data == bytes([CachingSha2.PERFORM_FULL_AUTHENTICATION])
    assert build_auth_more_data(AuthMoreData(b"\x03")) == b"\x01\x03"


def test_old_password_switch_is_not_supported() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_auth_switch_request(b"\xfe")


# --- cross-check with PyMySQL --------------------------------------------------------------

MODERN_SERVER = (
    C.LONG_PASSWORD
    | C.LONG_FLAG
    | C.CONNECT_WITH_DB
    | C.PROTOCOL_41
    | C.TRANSACTIONS
    | C.SECURE_CONNECTION
    | C.MULTI_RESULTS
    | C.PLUGIN_AUTH
    | C.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | C.CONNECT_ATTRS
    | C.SESSION_TRACK
    | C.DEPRECATE_EOF
)


def test_pymysql_reads_our_handshake_and_we_read_its_response() -> None:
    nonce = b"abcdefghijklmnopqrst"
    hs = HandshakeV10("8.0.36", 1234, nonce, MODERN_SERVER, charset=255, status=2)
    conn = pymysql.connections.Connection(
        host="127.0.0.1", user="alice", password="pw", database="shop", defer_connect=True
    )
    conn._read_packet = lambda *a, **k: MysqlPacket(build_handshake_v10(hs), "utf8")
    conn._get_server_information()
    assert conn.server_version == "8.0.36"
    assert conn.server_thread_id == (1234,)
    assert conn.salt == nonce
    assert conn.server_capabilities == MODERN_SERVER
    assert conn.server_language == 255
    assert conn.server_status == 2
    assert conn._auth_plugin_name == "mysql_native_password"

    sent: list[bytes] = []
    conn.write_packet = sent.append
    conn._read_packet = lambda *a, **k: MysqlPacket(bytes.fromhex("00000002000000"), "utf8")
    conn._request_authentication()
    r = parse_handshake_response41(sent[0])
    assert r.username == "alice"
    assert r.database == "shop"
    assert r.auth_plugin_name == "mysql_native_password"
    assert r.auth_response == scramble_native_password(b"pw", nonce)
    assert r.attributes is not None
    assert dict(r.attributes)["_client_name"] == "pymysql"
    assert r.capabilities & C.PLUGIN_AUTH_LENENC_CLIENT_DATA
    assert build_handshake_response41(r) == sent[0]


# --- other layouts -------------------------------------------------------------------------


def test_mariadb_extended_capabilities_in_reserved_bytes() -> None:
    reserved = bytes(6) + (MariaDbCapability.STMT_BULK_OPERATIONS | 1).to_bytes(4, "little")
    caps = MODERN_SERVER & ~C.LONG_PASSWORD  # MariaDB clears CLIENT_MYSQL
    hs = HandshakeV10(
        "5.5.5-10.11.6-MariaDB",
        9,
        bytes(range(1, 21)),
        caps,
        45,
        2,
        "mysql_native_password",
        reserved,
    )
    back = parse_handshake_v10(build_handshake_v10(hs))
    assert back == hs
    assert back.mariadb_capabilities == MariaDbCapability.STMT_BULK_OPERATIONS | 1
    assert HandshakeV10("8.0", 1, bytes(20), MODERN_SERVER).mariadb_capabilities == 0


def test_plugin_name_without_final_nul() -> None:
    # Bug#59453: 5.5 servers before 5.5.10 omit the NUL after the plugin name.
    hs = HandshakeV10("5.5.9", 1, bytes(range(1, 21)), MODERN_SERVER)
    wire = build_handshake_v10(hs)
    assert wire.endswith(b"mysql_native_password\x00")
    assert parse_handshake_v10(wire[:-1]) == hs


def test_auth_plugin_data_len_sizes_part_2() -> None:
    hs = HandshakeV10("8", 1, bytes(range(1, 33)), MODERN_SERVER, auth_plugin_name="x")
    wire = build_handshake_v10(hs)
    # auth_plugin_data_len = 33 (32-byte nonce + NUL); part 2 = 33 - 8 = 25 bytes.
    pos = 1 + 2 + 4 + 8 + 1 + 2 + 1 + 2 + 2
    assert wire[pos] == 33
    assert parse_handshake_v10(wire) == hs


def test_response_with_1_byte_length_and_nul_terminated_auth() -> None:
    secure = HandshakeResponse41(C.PROTOCOL_41 | C.SECURE_CONNECTION, "u", b"\x01\x00\x02")
    assert parse_handshake_response41(build_handshake_response41(secure)) == secure
    legacy = HandshakeResponse41(C.PROTOCOL_41, "u", b"secret")
    assert build_handshake_response41(legacy).endswith(b"u\x00secret\x00")
    assert parse_handshake_response41(build_handshake_response41(legacy)) == legacy


def test_response_zstd_level() -> None:
    r = HandshakeResponse41(
        C.PROTOCOL_41 | C.ZSTD_COMPRESSION_ALGORITHM, "u", zstd_compression_level=3
    )
    assert build_handshake_response41(r)[-1] == 3
    assert parse_handshake_response41(build_handshake_response41(r)) == r


def test_pre_41_response_is_rejected() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_handshake_response41(bytes(32) + b"u\x00\x00")


def test_misuse_is_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        build_handshake_v10(HandshakeV10("8", 1, bytes(20), C.PROTOCOL_41, auth_plugin_name="x"))
    with pytest.raises(LocalProtocolError):
        build_handshake_v10(HandshakeV10("8", 1, bytes(10), MODERN_SERVER))
    with pytest.raises(LocalProtocolError):
        build_handshake_v10(HandshakeV10("8", 2**32, bytes(20), MODERN_SERVER))
    with pytest.raises(LocalProtocolError):
        build_handshake_response41(HandshakeResponse41(C.PROTOCOL_41, "u", database="db"))
    with pytest.raises(LocalProtocolError):
        build_handshake_response41(HandshakeResponse41(C.PROTOCOL_41 | C.CONNECT_WITH_DB, "u"))
    with pytest.raises(LocalProtocolError):
        build_handshake_response41(
            HandshakeResponse41(C.PROTOCOL_41 | C.SECURE_CONNECTION, "u", bytes(256))
        )
    with pytest.raises(LocalProtocolError):
        build_handshake_response41(HandshakeResponse41(C.PROTOCOL_41, "u", b"a\x00b"))
    with pytest.raises(LocalProtocolError):
        build_ssl_request(SSLRequest(C.PROTOCOL_41))


# --- round trips ---------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


@st.composite
def handshakes(draw: st.DrawFn) -> HandshakeV10:
    caps = draw(st.integers(0, 2**32 - 1)) | C.SECURE_CONNECTION
    plugin = draw(text) if caps & C.PLUGIN_AUTH else None
    size = draw(st.integers(20, 60)) if plugin is not None else 20
    nonce = draw(st.binary(min_size=size, max_size=size))
    return HandshakeV10(
        server_version=draw(text),
        connection_id=draw(st.integers(0, 2**32 - 1)),
        auth_plugin_data=nonce,
        capabilities=Capability(caps),
        charset=draw(st.integers(0, 255)),
        status=draw(st.integers(0, 0xFFFF)),
        auth_plugin_name=plugin,
        reserved=draw(st.binary(min_size=10, max_size=10)),
    )


@given(handshakes())
def test_handshake_round_trip(hs: HandshakeV10) -> None:
    assert parse_handshake_v10(build_handshake_v10(hs)) == hs


@st.composite
def responses(draw: st.DrawFn) -> HandshakeResponse41:
    caps = draw(st.integers(0, 2**32 - 1)) | C.PROTOCOL_41
    lenenc = caps & C.PLUGIN_AUTH_LENENC_CLIENT_DATA
    if lenenc:
        auth = draw(st.binary(max_size=300))
    elif caps & C.SECURE_CONNECTION:
        auth = draw(st.binary(max_size=255))
    else:
        auth = draw(st.binary(max_size=40).filter(lambda b: b"\x00" not in b))
    pairs = st.lists(st.tuples(text, text), max_size=5).map(tuple)
    return HandshakeResponse41(
        capabilities=Capability(caps),
        username=draw(text),
        auth_response=auth,
        max_packet_size=draw(st.integers(0, 2**32 - 1)),
        charset=draw(st.integers(0, 255)),
        database=draw(text) if caps & C.CONNECT_WITH_DB else None,
        auth_plugin_name=draw(text) if caps & C.PLUGIN_AUTH else None,
        attributes=draw(pairs) if caps & C.CONNECT_ATTRS else None,
        zstd_compression_level=(
            draw(st.integers(0, 255)) if caps & C.ZSTD_COMPRESSION_ALGORITHM else None
        ),
        reserved=draw(st.binary(min_size=23, max_size=23)),
    )


@given(responses())
def test_handshake_response_round_trip(r: HandshakeResponse41) -> None:
    assert parse_handshake_response41(build_handshake_response41(r)) == r


@given(text, st.binary(max_size=100))
def test_auth_switch_round_trip(plugin: str, data: bytes) -> None:
    req = AuthSwitchRequest(plugin, data)
    assert parse_auth_switch_request(build_auth_switch_request(req)) == req


def test_response_laid_out_by_the_flags_both_sides_have() -> None:
    # PyMySQL declares CONNECT_WITH_DB and CONNECT_ATTRS but writes those fields only when
    # the server offers them; the server's capabilities tell the parser what is really there.
    server = MODERN_SERVER & ~(C.CONNECT_WITH_DB | C.CONNECT_ATTRS)
    nonce = bytes(range(100, 120))
    hs = HandshakeV10("8.0.36", 1, nonce, server)
    conn = pymysql.connections.Connection(
        host="127.0.0.1", user="bob", password="pw", database="shop", defer_connect=True
    )
    conn._read_packet = lambda *a, **k: MysqlPacket(build_handshake_v10(hs), "utf8")
    conn._get_server_information()
    sent: list[bytes] = []
    conn.write_packet = sent.append
    conn._read_packet = lambda *a, **k: MysqlPacket(bytes.fromhex("00000002000000"), "utf8")
    conn._request_authentication()
    assert parse_handshake_response41(sent[0]).capabilities & C.CONNECT_WITH_DB
    r = parse_handshake_response41(sent[0], server)
    assert (r.username, r.database, r.attributes) == ("bob", None, None)
    assert r.auth_plugin_name == "mysql_native_password"
    assert r.auth_response == scramble_native_password(b"pw", nonce)
