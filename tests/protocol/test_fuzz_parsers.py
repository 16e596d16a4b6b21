"""Every parser, fed random bytes and damaged copies of valid packets, either returns a value or
raises RemoteProtocolError: never IndexError, struct.error, UnicodeDecodeError, ValueError…"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consistent.errors import RemoteProtocolError
from consistent.protocol import binary, commands, handshake, prepared, responses, resultset
from consistent.protocol.auth import (
    decrypt_password_rsa,
    encrypt_password_rsa,
    verify_caching_sha2,
    verify_native_password,
)
from consistent.protocol.binary import BinaryType, DateTimeValue, TimeValue
from consistent.protocol.constants import Capability, ColumnType, CursorFlag, ServerStatus
from consistent.protocol.framing import PacketDecoder, frame_packet
from consistent.protocol.lenenc import Reader
from consistent.protocol.session_state import (
    Gtids,
    Schema,
    StateChange,
    SystemVariable,
    TransactionState,
    build_session_state,
    gtid_info,
    parse_session_state,
)

C = Capability
T = ColumnType
PLAIN = C.PROTOCOL_41 | C.TRANSACTIONS | C.SECURE_CONNECTION
FULL = (
    PLAIN
    | C.SESSION_TRACK
    | C.DEPRECATE_EOF
    | C.PLUGIN_AUTH
    | C.CONNECT_ATTRS
    | C.QUERY_ATTRIBUTES
    | C.OPTIONAL_RESULTSET_METADATA
)
CAPS = {"none": 0, "plain": PLAIN, "full": FULL}
ROW_TYPES = [
    BinaryType(T.TINY),
    BinaryType(T.LONGLONG, True),
    BinaryType(T.DOUBLE),
    BinaryType(T.FLOAT),
    BinaryType(T.DATETIME),
    BinaryType(T.TIME),
    BinaryType(T.VAR_STRING),
    BinaryType(T.NULL),
]
PREVIOUS = (prepared.BinaryParam(T.LONG, 1), prepared.BinaryParam(T.BLOB, b"x"))


_KEY = rsa.generate_private_key(public_exponent=65537, key_size=1024)
PRIVATE_PEM = _KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)
PUBLIC_PEM = _KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
NONCE = bytes(range(1, 21))


def _walk_reader(data: bytes) -> object:
    r = Reader(data)
    out: list[object] = []
    readers = [r.lenenc_int_or_null, r.lenenc_bytes_or_null, r.nul_bytes, r.u24, r.u64]
    i = 0
    while not r.at_end():
        out.append(readers[i % len(readers)]())
        i += 1
    return out


def _decoder(data: bytes) -> object:
    return PacketDecoder(max_payload=64).feed(data)


def _ok_and_gtids(caps: int) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        return gtid_info(responses.parse_ok(data, caps))

    return parse


def _binary_values(data: bytes) -> object:
    return [binary.decode_binary_value(Reader(data), t) for t in ROW_TYPES if t.type != T.NULL]


PARSERS: dict[str, Callable[[bytes], object]] = {
    "reader": _walk_reader,
    "decoder": _decoder,
    "session_state": parse_session_state,
    "binary_values": _binary_values,
    "binary_row": lambda d: binary.parse_binary_row(d, ROW_TYPES),
    "text_row": lambda d: resultset.parse_text_row(d, 3),
    "handshake_v10": handshake.parse_handshake_v10,
    "handshake_response41": handshake.parse_handshake_response41,
    "ssl_request": handshake.parse_ssl_request,
    "is_ssl_request": handshake.is_ssl_request,
    "attributes": handshake.parse_attributes,
    "auth_switch": handshake.parse_auth_switch_request,
    "auth_more_data": handshake.parse_auth_more_data,
    "command": commands.parse_command,
    "query": commands.parse_query,
    "query_attributes": lambda d: commands.parse_query(d, query_attributes=True),
    "init_db": commands.parse_init_db,
    "stmt_prepare": commands.parse_stmt_prepare,
    "stmt_close": commands.parse_stmt_close,
    "stmt_reset": commands.parse_stmt_reset,
    "process_kill": commands.parse_process_kill,
    "set_option": commands.parse_set_option,
    "send_long_data": commands.parse_stmt_send_long_data,
    "stmt_fetch": commands.parse_stmt_fetch,
    "field_list": commands.parse_field_list,
    "verify_native": lambda d: verify_native_password(d[:20], d[20:], "*" + "AB" * 20),
    "verify_sha2": lambda d: verify_caching_sha2(d[:32], d[32:], bytes(32)),
    "rsa_ciphertext": lambda d: decrypt_password_rsa(d, NONCE, PRIVATE_PEM),
    "rsa_public_key": lambda d: encrypt_password_rsa(b"pw", NONCE, d),
}
for caps_name, caps in CAPS.items():
    PARSERS |= {
        f"ok[{caps_name}]": _ok_and_gtids(caps),
        f"err[{caps_name}]": lambda d, c=caps: responses.parse_err(d, c),
        f"eof[{caps_name}]": lambda d, c=caps: responses.parse_eof(d, c),
        f"classify[{caps_name}]": lambda d, c=caps: (
            responses.is_ok(d, c),
            responses.is_eof(d, c),
            responses.is_err(d),
        ),
        f"column_count[{caps_name}]": lambda d, c=caps: (
            resultset.parse_column_count(d, c),
            resultset.resultset_metadata_follows(d, c),
        ),
        f"change_user[{caps_name}]": lambda d, c=caps: commands.parse_change_user(d, c),
        f"prepare_ok[{caps_name}]": lambda d, c=caps: prepared.parse_stmt_prepare_ok(d, c),
        f"execute0[{caps_name}]": lambda d, c=caps: prepared.parse_stmt_execute(d, c, 0),
        f"execute2[{caps_name}]": lambda d, c=caps: prepared.parse_stmt_execute(d, c, 2, PREVIOUS),
    }
for field_list in (False, True):
    PARSERS[f"column_definition[{field_list}]"] = lambda d, f=field_list: (
        resultset.parse_column_definition41(d, PLAIN, f)
    )


# Valid packets of every kind, to damage.
STATE = ServerStatus.SESSION_STATE_CHANGED | ServerStatus.AUTOCOMMIT
SEEDS: dict[str, bytes] = {
    "ok": responses.build_ok(
        responses.OkPacket(
            1,
            2,
            STATE,
            0,
            b"info",
            (
                SystemVariable("last_gtid", "0-1-10"),
                Schema("s"),
                StateChange(),
                Gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
                TransactionState("T_______"),
            ),
        ),
        FULL,
    ),
    "err": responses.build_err(responses.ErrPacket(1062, "23000", "Duplicate entry"), PLAIN),
    "eof": responses.build_eof(responses.EofPacket(1, ServerStatus.AUTOCOMMIT), PLAIN),
    "session_state": build_session_state(
        [Schema("db"), Gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:7")]
    ),
    "column_count": resultset.build_column_count(3, FULL),
    "column_definition": resultset.build_column_definition41(
        resultset.ColumnDefinition41("c", T.LONG, schema="s", table="t", default_value=b"1"),
        PLAIN,
        field_list=True,
    ),
    "text_row": resultset.build_text_row([b"1", None, b"x" * 260]),
    "binary_row": binary.build_binary_row(
        ROW_TYPES,
        [-1, 2**64 - 1, 1.5, 2.5, DateTimeValue(2020, 1, 2, 3, 4, 5, 6), TimeValue(), b"s", None],
    ),
    "handshake_v10": handshake.build_handshake_v10(
        handshake.HandshakeV10("8.0.36", 5, bytes(range(1, 21)), Capability(FULL | 0xFFFF))
    ),
    "handshake_response41": handshake.build_handshake_response41(
        handshake.HandshakeResponse41(
            Capability(FULL | C.CONNECT_WITH_DB | C.PLUGIN_AUTH_LENENC_CLIENT_DATA),
            "root",
            bytes(20),
            database="db",
            auth_plugin_name="caching_sha2_password",
            attributes=(("_client_name", "x"),),
        )
    ),
    "ssl_request": handshake.build_ssl_request(handshake.SSLRequest(Capability(PLAIN | C.SSL))),
    "auth_switch": handshake.build_auth_switch_request(handshake.AuthSwitchRequest("x", bytes(21))),
    "auth_more_data": handshake.build_auth_more_data(handshake.AuthMoreData(b"\x03")),
    "query": commands.build_query(
        "select 1", True, [prepared.BinaryParam(T.DATETIME, DateTimeValue(1, 2, 3), name="a")]
    ),
    "init_db": commands.build_init_db("db"),
    "stmt_prepare": commands.build_stmt_prepare("select ?"),
    "stmt_close": commands.build_stmt_close(1),
    "set_option": commands.build_set_option(commands.SetOption.MULTI_STATEMENTS_ON),
    "send_long_data": commands.build_stmt_send_long_data(commands.StmtSendLongData(1, 0, b"d")),
    "stmt_fetch": commands.build_stmt_fetch(commands.StmtFetch(1, 5)),
    "field_list": commands.build_field_list(commands.FieldList("t", b"%")),
    "change_user": commands.build_change_user(
        commands.ChangeUser("u", bytes(20), "db", 45, "mysql_native_password", (("k", "v"),)),
        FULL,
    ),
    "prepare_ok": prepared.build_stmt_prepare_ok(prepared.StmtPrepareOk(1, 2, 2, 1, True), FULL),
    "execute": prepared.build_stmt_execute(
        prepared.StmtExecute(
            1,
            (prepared.BinaryParam(T.LONG, 7), prepared.BinaryParam(T.BLOB, None, name="n")),
            CursorFlag.PARAMETER_COUNT_AVAILABLE,
        ),
        FULL,
    ),
    "execute_plain": prepared.build_stmt_execute(prepared.StmtExecute(1, PREVIOUS), PLAIN),
    "frames": frame_packet(b"\x03select 1", 0) + frame_packet(b"", 1),
    "rsa_ciphertext": encrypt_password_rsa(b"secret", NONCE, PUBLIC_PEM),
    "rsa_public_key": PUBLIC_PEM,
}
# Which seed each parser is most likely to get deep into; by default the one of its name.
KIND = {
    "reader": "ok",
    "decoder": "frames",
    "binary_values": "binary_row",
    "is_ssl_request": "ssl_request",
    "attributes": "session_state",
    "command": "query",
    "query_attributes": "query",
    "stmt_reset": "stmt_close",
    "process_kill": "stmt_close",
    "verify_native": "handshake_v10",
    "verify_sha2": "handshake_v10",
    "classify": "ok",
    "execute0": "execute_plain",
    "execute2": "execute",
}


def seeds_for(name: str) -> list[bytes]:
    base = name.split("[", maxsplit=1)[0]
    kind = KIND.get(base, base)
    return [SEEDS[kind], SEEDS["execute_plain" if kind == "execute" else kind]]


def _run(parser: Callable[[bytes], object], data: bytes) -> None:
    try:
        parser(data)
    except RemoteProtocolError as e:
        message = str(e)
    else:
        return
    assert message  # every error says what was wrong


@st.composite
def damaged(draw: st.DrawFn, name: str) -> bytes:
    seeds = st.sampled_from(seeds_for(name)) | st.sampled_from(sorted(SEEDS.values()))
    data = bytearray(draw(seeds))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "set"]))
        pos = draw(st.integers(0, len(data)))
        if action == "truncate":
            del data[pos:]
        elif action == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif data and pos < len(data):
            if action == "flip":
                data[pos] ^= 1 << draw(st.integers(0, 7))
            elif action == "delete":
                del data[pos]
            else:
                data[pos] = draw(st.sampled_from([0x00, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF]))
    return bytes(data)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=120))
def test_random_bytes(name: str, data: bytes) -> None:
    _run(PARSERS[name], data)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_packets(name: str, data: st.DataObject) -> None:
    _run(PARSERS[name], data.draw(damaged(name)))


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_every_truncation_of_every_seed(kind: str) -> None:
    data = SEEDS[kind]
    parsers = [parser for name, parser in PARSERS.items() if data in seeds_for(name)]
    assert parsers
    for parser in parsers:
        for end in range(len(data)):
            _run(parser, data[:end])
