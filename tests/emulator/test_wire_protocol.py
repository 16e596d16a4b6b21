"""The front-end byte for byte: a raw client built on the project's codec talks to it over TCP.

Covers what PyMySQL cannot show: the authentication exchanges (fast and full
caching_sha2_password with the RSA key, AuthSwitchRequest, mysql_native_password), sequence
ids, the binary protocol of prepared statements, DEPRECATE_EOF, COM_* commands PyMySQL never
sends, malformed and oversized packets, and shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import pymysql
import pytest

from consistent.emulator.config import Account, ServerConfig
from consistent.emulator.server import EmulatedServer
from consistent.emulator.wire import SERVER_CAPABILITIES, EmulatorThread, WireConfig, serve
from consistent.protocol import (
    CACHING_SHA2_PASSWORD,
    MYSQL_NATIVE_PASSWORD,
    BinaryParam,
    BinaryType,
    CachingSha2,
    Capability,
    ChangeUser,
    ColumnDefinition41,
    ColumnType,
    Command,
    ErrPacket,
    FieldList,
    Gtids,
    HandshakeResponse41,
    HandshakeV10,
    OkPacket,
    PacketDecoder,
    Schema,
    ServerStatus,
    SetOption,
    StmtExecute,
    StmtSendLongData,
    build_change_user,
    build_field_list,
    build_handshake_response41,
    build_init_db,
    build_ping,
    build_process_kill,
    build_query,
    build_quit,
    build_reset_connection,
    build_set_option,
    build_stmt_close,
    build_stmt_execute,
    build_stmt_prepare,
    build_stmt_reset,
    build_stmt_send_long_data,
    encrypt_password_rsa,
    frame_packets,
    is_eof,
    is_err,
    is_ok,
    parse_auth_more_data,
    parse_auth_switch_request,
    parse_binary_row,
    parse_column_count,
    parse_column_definition41,
    parse_eof,
    parse_err,
    parse_handshake_v10,
    parse_ok,
    parse_stmt_prepare_ok,
    parse_text_row,
    scramble_caching_sha2,
    scramble_native_password,
)

CLIENT_CAPS = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Capability.CONNECT_ATTRS
)
DEPRECATE_CAPS = CLIENT_CAPS | Capability.DEPRECATE_EOF | Capability.SESSION_TRACK

NO_STATUS = ServerStatus(0)

ACCOUNTS = (
    Account("root", ""),
    Account("alice", "wonder land", plugin=CACHING_SHA2_PASSWORD),
    Account("bob", "builder", plugin=MYSQL_NATIVE_PASSWORD),
    Account("carol", "", plugin=MYSQL_NATIVE_PASSWORD),
)


# --- a raw client ---------------------------------------------------------------------------------


class Closed(Exception):
    """The server closed the connection."""


@dataclass
class Result:
    """One response of a command: an OK, an ERR, or a result set and its terminator."""

    ok: OkPacket | None = None
    err: ErrPacket | None = None
    columns: list[ColumnDefinition41] = field(default_factory=list)
    rows: list[tuple[object, ...]] = field(default_factory=list)
    end_status: ServerStatus = NO_STATUS
    end_payload: bytes = b""


class RawClient:
    """A blocking MySQL client made of the codec's builders and parsers; it checks every
    sequence id the server sends."""

    opened: ClassVar[list[RawClient]] = []

    def __init__(self, port: int, caps: Capability = CLIENT_CAPS) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        RawClient.opened.append(self)
        self.decoder = PacketDecoder()
        self.pending: deque[tuple[int, bytes, int]] = deque()
        self.caps = int(caps)
        self.seq = 0
        self.trace: list[bytes] = []
        self.handshake: HandshakeV10 = parse_handshake_v10(self.read())

    def close(self) -> None:
        self.sock.close()

    def read(self) -> bytes:
        while not self.pending:
            data = self.sock.recv(1 << 16)
            if not data:
                raise Closed
            self.pending.extend((p.seq, p.payload, p.next_seq) for p in self.decoder.feed(data))
        seq, payload, next_seq = self.pending.popleft()
        assert seq == self.seq, f"server sent sequence id {seq}, expected {self.seq}"
        self.seq = next_seq
        self.trace.append(payload)
        return payload

    def write(self, payload: bytes) -> None:
        data, self.seq = frame_packets(payload, self.seq)
        self.sock.sendall(data)

    def command(self, payload: bytes) -> None:
        self.seq = 0
        self.write(payload)

    def is_closed(self) -> bool:
        """Whether the server closed the connection (waiting up to the socket timeout)."""
        try:
            while True:
                if not self.sock.recv(1 << 16):
                    return True
        except (ConnectionError, TimeoutError):
            return True

    # -- authentication

    def login(
        self,
        user: str,
        password: str,
        *,
        plugin: str = CACHING_SHA2_PASSWORD,
        database: str | None = None,
        public_key: bytes | None = None,
    ) -> bytes:
        """Authenticate; returns the final OK or ERR payload (the exchange is in ``trace``)."""
        nonce = self.handshake.auth_plugin_data
        caps = self.caps | (Capability.CONNECT_WITH_DB if database is not None else 0)
        response = HandshakeResponse41(
            capabilities=Capability(caps),
            username=user,
            auth_response=_scramble(plugin, password, nonce),
            max_packet_size=1 << 24,
            database=database,
            auth_plugin_name=plugin,
            attributes=(("_client_name", "raw-test"),),
        )
        self.write(build_handshake_response41(response))
        return self._auth_loop(password, nonce, plugin, public_key)

    def _auth_loop(self, password: str, nonce: bytes, plugin: str, key: bytes | None) -> bytes:
        while True:
            payload = self.read()
            if payload[0] in (0x00, 0xFF):
                return payload
            if payload[0] == 0xFE:
                switch = parse_auth_switch_request(payload)
                plugin, nonce = switch.plugin_name, switch.data.rstrip(b"\x00")
                self.write(_scramble(plugin, password, nonce))
                continue
            more = parse_auth_more_data(payload).data
            if more == bytes((CachingSha2.FAST_AUTH_SUCCESS,)):
                continue
            if more == bytes((CachingSha2.PERFORM_FULL_AUTHENTICATION,)):
                if key is None:
                    self.write(bytes((CachingSha2.REQUEST_PUBLIC_KEY,)))
                    key = parse_auth_more_data(self.read()).data
                self.write(encrypt_password_rsa(password.encode(), nonce, key))
                continue
            raise AssertionError(f"unexpected auth packet {payload!r}")

    # -- responses

    def result(self, *, binary: bool = False) -> Result:
        """Read one response (OK, ERR, or a whole result set)."""
        first = self.read()
        if is_err(first):
            return Result(err=parse_err(first, self.caps))
        if first[0] == 0x00:
            return Result(ok=parse_ok(first, self.caps))
        count = parse_column_count(first, self.caps)
        res = Result(
            columns=[parse_column_definition41(self.read(), self.caps) for _ in range(count)]
        )
        if not self.caps & Capability.DEPRECATE_EOF:
            assert is_eof(self.read(), self.caps)
        types = [BinaryType.of(c) for c in res.columns]
        while True:
            payload = self.read()
            if is_err(payload):
                res.err = parse_err(payload, self.caps)
                return res
            if is_eof(payload, self.caps):
                res.end_status = parse_eof(payload, self.caps).status
                res.end_payload = payload
                return res
            if payload[0] == 0xFE and is_ok(payload, self.caps):
                res.end_status = parse_ok(payload, self.caps).status
                res.end_payload = payload
                return res
            res.rows.append(
                parse_binary_row(payload, types) if binary else parse_text_row(payload, count)
            )

    def results(self, *, binary: bool = False) -> list[Result]:
        """Every response of a (multi-statement) command."""
        out = [self.result(binary=binary)]
        while _more(out[-1]):
            out.append(self.result(binary=binary))
        return out

    def query(self, sql: str) -> list[Result]:
        self.command(build_query(sql))
        return self.results()

    def ok(self, sql: str) -> OkPacket:
        [res] = self.query(sql)
        assert res.err is None, res.err
        assert res.ok is not None
        return res.ok


def _more(res: Result) -> bool:
    status = res.ok.status if res.ok is not None else res.end_status
    return res.err is None and bool(status & ServerStatus.MORE_RESULTS_EXISTS)


def _scramble(plugin: str, password: str, nonce: bytes) -> bytes:
    if plugin == MYSQL_NATIVE_PASSWORD:
        return scramble_native_password(password.encode(), nonce)
    return scramble_caching_sha2(password.encode(), nonce)


def _login(port: int, user: str = "root", password: str = "", **kw: object) -> RawClient:
    client = RawClient(port, **kw)  # type: ignore[arg-type]
    final = client.login(user, password)
    assert final[0] == 0x00, parse_err(final, client.caps)
    return client


@pytest.fixture(autouse=True)
def _close_raw_clients() -> Iterator[None]:
    yield
    while RawClient.opened:
        RawClient.opened.pop().close()


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    config = ServerConfig(accounts=ACCOUNTS)
    wire = WireConfig(max_allowed_packet=1 << 20, shutdown_timeout=2.0)
    with EmulatorThread(config, wire_config=wire) as emulator:
        yield emulator


@pytest.fixture
def client(emu: EmulatorThread) -> Iterator[RawClient]:
    c = _login(emu.port)
    yield c
    c.close()


# --- handshake and authentication -----------------------------------------------------------------


def test_handshake_announces_mysql8_and_the_capabilities(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    h = c.handshake
    assert h.server_version.startswith("8.0.")
    assert h.auth_plugin_name == CACHING_SHA2_PASSWORD
    assert len(h.auth_plugin_data) == 20
    assert b"\x00" not in h.auth_plugin_data
    for flag in (
        Capability.PROTOCOL_41,
        Capability.SECURE_CONNECTION,
        Capability.PLUGIN_AUTH,
        Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA,
        Capability.CONNECT_WITH_DB,
        Capability.CONNECT_ATTRS,
        Capability.TRANSACTIONS,
        Capability.MULTI_STATEMENTS,
        Capability.MULTI_RESULTS,
        Capability.PS_MULTI_RESULTS,
        Capability.SESSION_TRACK,
        Capability.DEPRECATE_EOF,
        Capability.LONG_PASSWORD,
        Capability.LONG_FLAG,
        Capability.FOUND_ROWS,
    ):
        assert h.capabilities & flag, flag
    assert not h.capabilities & (Capability.SSL | Capability.COMPRESS)
    assert h.capabilities == SERVER_CAPABILITIES
    c.close()


def test_handshake_connection_id_is_connection_id(emu: EmulatorThread) -> None:
    c = _login(emu.port)
    [res] = c.query("SELECT CONNECTION_ID()")
    assert res.rows == [(str(c.handshake.connection_id).encode(),)]
    c.close()


def test_caching_sha2_full_then_fast_authentication(emu: EmulatorThread) -> None:
    emu.run(emu.wire.auth.flush_cache)
    first = RawClient(emu.port)
    assert first.login("alice", "wonder land")[0] == 0x00
    # Cache miss: 0x01 0x04, key request answered with a PEM, then OK.
    assert first.trace[1] == b"\x01\x04"
    assert first.trace[2].startswith(b"\x01-----BEGIN PUBLIC KEY-----")
    assert first.seq == 7  # handshake 0, response 1, 0x04 2, 0x02 3, key 4, RSA 5, OK 6
    first.close()
    second = RawClient(emu.port)
    assert second.login("alice", "wonder land")[0] == 0x00
    assert second.trace[1:] == [b"\x01\x03", second.trace[-1]]  # fast auth success, then OK
    assert is_ok(second.trace[-1], second.caps)
    second.close()


def test_caching_sha2_client_with_the_key_skips_the_request(emu: EmulatorThread) -> None:
    emu.run(emu.wire.auth.flush_cache)
    key = emu.wire.auth.public_key_pem
    c = RawClient(emu.port)
    assert c.login("alice", "wonder land", public_key=key)[0] == 0x00
    assert c.trace[1] == b"\x01\x04"
    assert len(c.trace) == 3
    c.close()


def test_caching_sha2_wrong_password_is_1045(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    err = parse_err(c.login("alice", "wrong"), c.caps)
    assert (err.errno, err.sqlstate) == (1045, "28000")
    assert err.message == "Access denied for user 'alice'@'localhost' (using password: YES)"
    assert c.is_closed()


def test_switch_to_native_password_for_a_native_account(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    assert c.login("bob", "builder")[0] == 0x00
    switch = parse_auth_switch_request(c.trace[1])
    assert switch.plugin_name == MYSQL_NATIVE_PASSWORD
    assert switch.data == c.handshake.auth_plugin_data + b"\x00"  # mysqld keeps the scramble
    c.close()


def test_native_client_switched_to_caching_sha2(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    assert c.login("alice", "wonder land", plugin=MYSQL_NATIVE_PASSWORD)[0] == 0x00
    assert parse_auth_switch_request(c.trace[1]).plugin_name == CACHING_SHA2_PASSWORD
    c.close()


def test_native_wrong_password_and_unknown_user(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    err = parse_err(c.login("bob", "x", plugin=MYSQL_NATIVE_PASSWORD), c.caps)
    assert err.errno == 1045
    assert "'bob'@'localhost' (using password: YES)" in err.message
    c = RawClient(emu.port)
    err = parse_err(c.login("nobody", "", plugin=MYSQL_NATIVE_PASSWORD), c.caps)
    assert err.message == "Access denied for user 'nobody'@'localhost' (using password: NO)"


def test_empty_passwords(emu: EmulatorThread) -> None:
    for user, plugin in (("root", CACHING_SHA2_PASSWORD), ("carol", MYSQL_NATIVE_PASSWORD)):
        c = RawClient(emu.port)
        assert c.login(user, "", plugin=plugin)[0] == 0x00, user
        c.close()
    c = RawClient(emu.port)
    err = parse_err(c.login("alice", ""), c.caps)
    assert err.message.endswith("(using password: NO)")


def test_unknown_database_at_connect_is_1049(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    err = parse_err(c.login("root", "", database="no_such_db"), c.caps)
    assert (err.errno, err.sqlstate, err.message) == (
        1049,
        "42000",
        "Unknown database 'no_such_db'",
    )


def test_connect_with_database(emu: EmulatorThread, client: RawClient) -> None:
    client.ok("CREATE DATABASE IF NOT EXISTS wire_db")
    c = RawClient(emu.port)
    assert c.login("root", "", database="wire_db")[0] == 0x00
    [res] = c.query("SELECT DATABASE()")
    assert res.rows == [(b"wire_db",)]
    c.close()


def test_ssl_request_is_refused(emu: EmulatorThread) -> None:
    c = RawClient(emu.port)
    c.write(int(CLIENT_CAPS | Capability.SSL).to_bytes(4, "little") + bytes(28))
    err = parse_err(c.read(), c.caps)
    assert (err.errno, err.sqlstate) == (1043, "08S01")


# --- commands -------------------------------------------------------------------------------------


def test_query_ping_init_db(client: RawClient) -> None:
    [res] = client.query("SELECT 1 + 1 AS two")
    assert [c.name for c in res.columns] == ["two"]
    assert res.rows == [(b"2",)]
    client.command(build_ping())
    assert client.result().ok is not None
    client.ok("CREATE DATABASE IF NOT EXISTS initdb_test")
    client.command(build_init_db("initdb_test"))
    assert client.result().ok is not None
    client.command(build_init_db("missing_db"))
    err = client.result().err
    assert err is not None
    assert err.errno == 1049


def test_unknown_command_is_1047_and_the_connection_lives(client: RawClient) -> None:
    for command in (0x00, Command.STATISTICS, 0x7F, Command.BINLOG_DUMP):
        client.command(bytes((command,)))
        err = client.result().err
        assert err is not None
        assert (err.errno, err.sqlstate, err.message) == (1047, "08S01", "Unknown command")
    client.command(build_ping())
    assert client.result().ok is not None


def test_multi_statement_query_sets_more_results(client: RawClient) -> None:
    results = client.query("SELECT 1; SELECT 2, 3; DO 0")
    assert [r.rows for r in results] == [[(b"1",)], [(b"2", b"3")], []]
    assert results[0].end_status & ServerStatus.MORE_RESULTS_EXISTS
    assert results[1].end_status & ServerStatus.MORE_RESULTS_EXISTS
    assert results[2].ok is not None
    assert not results[2].ok.status & ServerStatus.MORE_RESULTS_EXISTS


def test_error_midway_stops_the_multi_statement(client: RawClient) -> None:
    client.ok("CREATE DATABASE IF NOT EXISTS midway")
    client.ok("DROP TABLE IF EXISTS midway.t")
    client.ok("CREATE TABLE midway.t (id INT PRIMARY KEY)")
    results = client.query(
        "INSERT INTO midway.t VALUES (1); SELECT * FROM midway.nope;"
        " INSERT INTO midway.t VALUES (2)"
    )
    assert len(results) == 2
    assert results[0].ok is not None
    assert results[0].ok.status & ServerStatus.MORE_RESULTS_EXISTS
    assert results[1].err is not None
    assert results[1].err.errno == 1146
    [res] = client.query("SELECT id FROM midway.t")
    assert res.rows == [(b"1",)]


def test_set_option_turns_multi_statements_off_and_on(client: RawClient) -> None:
    client.command(build_set_option(SetOption.MULTI_STATEMENTS_OFF))
    assert is_eof(client.read(), client.caps)  # mysqld answers COM_SET_OPTION with EOF
    [res] = client.query("SELECT 1; SELECT 2")
    assert res.err is not None
    assert res.err.errno == 1064
    client.command(build_set_option(SetOption.MULTI_STATEMENTS_ON))
    assert is_eof(client.read(), client.caps)
    assert len(client.query("SELECT 1; SELECT 2")) == 2
    client.command(bytes((Command.SET_OPTION, 9, 0)))
    err = client.result().err
    assert err is not None
    assert err.errno == 1047


def test_deprecate_eof_and_session_track(emu: EmulatorThread) -> None:
    c = _login(emu.port, caps=DEPRECATE_CAPS)
    c.ok("CREATE DATABASE IF NOT EXISTS tracked")
    ok = c.ok("USE tracked")
    assert ok.status & ServerStatus.SESSION_STATE_CHANGED
    assert Schema("tracked") in ok.session_state
    [res] = c.query("SELECT 1")
    assert res.rows == [(b"1",)]
    assert res.end_payload[0] == 0xFE  # an OK, not an EOF
    assert len(res.end_payload) >= 7
    # Reference §2.2: under ALL_GTIDS a SELECT reports the whole gtid_executed; only the 0xFE
    # OK of DEPRECATE_EOF can carry it.
    c.ok("SET SESSION session_track_gtids = ALL_GTIDS")
    [res] = c.query("SELECT 2")
    end = parse_ok(res.end_payload, c.caps)
    [executed] = [b.text for b in end.session_state if isinstance(b, Gtids)]
    assert executed.startswith("00000000-1111-0000-1111-000000000000:1-")
    c.ok("SET SESSION session_track_gtids = OFF")
    [res] = c.query("SELECT @@GLOBAL.gtid_executed")
    assert res.rows == [(executed.encode(),)]
    c.close()


def test_field_list(client: RawClient) -> None:
    client.ok("CREATE DATABASE IF NOT EXISTS fl")
    client.ok("USE fl")
    client.ok("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY, name VARCHAR(20), other INT)")
    client.command(build_field_list(FieldList("t", b"")))
    names = []
    while True:
        payload = client.read()
        if is_eof(payload, client.caps):
            break
        names.append(parse_column_definition41(payload, client.caps, field_list=True).name)
    assert names == ["id", "name", "other"]
    client.command(build_field_list(FieldList("missing", b"")))
    err = client.result().err
    assert err is not None
    assert err.errno == 1146


def test_reset_connection_forgets_session_state(client: RawClient) -> None:
    client.ok("SET @v = 5")
    client.command(build_reset_connection())
    assert client.result().ok is not None
    [res] = client.query("SELECT @v")
    assert res.rows == [(None,)]


def test_change_user(emu: EmulatorThread, client: RawClient) -> None:
    nonce = client.handshake.auth_plugin_data
    change = ChangeUser(
        "bob",
        scramble_native_password(b"builder", nonce),
        "",
        charset=255,
        auth_plugin_name=MYSQL_NATIVE_PASSWORD,
    )
    client.command(build_change_user(change, client.caps))
    assert client.result().ok is not None
    [res] = client.query("SELECT CURRENT_USER()")
    assert res.rows[0][0] in (b"bob@localhost", b"bob@%")
    # A wrong password is refused and the connection keeps its user.
    bad = ChangeUser("alice", b"x" * 32, "", charset=255, auth_plugin_name=CACHING_SHA2_PASSWORD)
    client.command(build_change_user(bad, client.caps))
    payload = client.read()
    while not is_err(payload):  # a full-auth exchange may come first
        if payload == b"\x01\x04":
            client.write(b"\x02")
        elif payload.startswith(b"\x01-----BEGIN"):
            client.write(encrypt_password_rsa(b"wrong", nonce, payload[1:]))
        payload = client.read()
    assert parse_err(payload, client.caps).errno == 1045


def test_process_kill_closes_the_target(emu: EmulatorThread, client: RawClient) -> None:
    victim = _login(emu.port)
    client.command(build_process_kill(victim.handshake.connection_id))
    assert client.result().ok is not None
    assert victim.is_closed()
    client.command(build_process_kill(999_999))
    err = client.result().err
    assert err is not None
    assert err.errno == 1094


def test_sql_kill_closes_an_idle_connection(emu: EmulatorThread, client: RawClient) -> None:
    victim = _login(emu.port)
    client.ok(f"KILL {victim.handshake.connection_id}")
    assert victim.is_closed()


def test_session_wait_timeout_disconnects_an_idle_client(client: RawClient) -> None:
    client.ok("SET SESSION wait_timeout = 1")
    started = time.monotonic()
    # mysqld writes this ERR unprompted, with sequence id 0 (which is why PyMySQL reports
    # "Packet sequence number wrong - got 0 expected 1" on its next command).
    client.seq = 0
    err = parse_err(client.read(), client.caps)
    assert (err.errno, err.sqlstate) == (4031, "HY000")
    assert "inactivity" in err.message
    assert 0.9 < time.monotonic() - started < 5
    assert client.is_closed()


def test_quit_closes(client: RawClient) -> None:
    client.command(build_quit())
    assert client.is_closed()


# --- prepared statements (binary protocol) --------------------------------------------------------


def _prepare(client: RawClient, sql: str) -> tuple[int, int, list[ColumnDefinition41]]:
    client.command(build_stmt_prepare(sql))
    first = client.read()
    assert not is_err(first), parse_err(first, client.caps)
    ok = parse_stmt_prepare_ok(first, client.caps)
    deprecate = client.caps & Capability.DEPRECATE_EOF
    for _ in range(ok.num_params):
        client.read()
    if ok.num_params and not deprecate:
        assert is_eof(client.read(), client.caps)
    columns = [parse_column_definition41(client.read(), client.caps) for _ in range(ok.num_columns)]
    if ok.num_columns and not deprecate:
        assert is_eof(client.read(), client.caps)
    return ok.statement_id, ok.num_params, columns


def test_prepared_statement_round_trip(client: RawClient) -> None:
    client.ok("CREATE DATABASE IF NOT EXISTS ps")
    client.ok("DROP TABLE IF EXISTS ps.t")
    client.ok("CREATE TABLE ps.t (id BIGINT PRIMARY KEY, name VARCHAR(50), score DOUBLE)")
    stmt, nparams, columns = _prepare(client, "INSERT INTO ps.t VALUES (?, ?, ?)")
    assert nparams == 3
    assert columns == []
    params = (
        BinaryParam(ColumnType.LONGLONG, 1),
        BinaryParam(ColumnType.VAR_STRING, "ünï"),
        BinaryParam(ColumnType.DOUBLE, 2.5),
    )
    client.command(build_stmt_execute(StmtExecute(stmt, params), client.caps))
    res = client.result()
    assert res.ok is not None
    assert res.ok.affected_rows == 1
    client.command(build_stmt_close(stmt))  # no answer: the next command is answered normally

    select, nparams, columns = _prepare(client, "SELECT id, name, score FROM ps.t WHERE id = ?")
    assert nparams == 1
    # mysqld describes the columns at prepare time; the engine may leave that to the execute.
    assert [c.name for c in columns] in ([], ["id", "name", "score"])
    client.command(
        build_stmt_execute(StmtExecute(select, (BinaryParam(ColumnType.LONGLONG, 1),)), client.caps)
    )
    res = client.result(binary=True)
    assert [c.name for c in res.columns] == ["id", "name", "score"]
    assert [c.type for c in res.columns] == [
        ColumnType.LONGLONG,
        ColumnType.VAR_STRING,
        ColumnType.DOUBLE,
    ]
    assert res.rows == [(1, "ünï".encode(), 2.5)]
    assert res.end_status & ServerStatus.AUTOCOMMIT


def test_send_long_data_and_reset(client: RawClient) -> None:
    stmt, nparams, _ = _prepare(client, "SELECT CONCAT(?, ?)")
    assert nparams == 2
    for chunk in (b"hello ", b"world"):
        client.command(build_stmt_send_long_data(StmtSendLongData(stmt, 1, chunk)))
    # libmysqlclient sends no value for the long-data parameter in COM_STMT_EXECUTE.
    packet = build_stmt_execute(
        StmtExecute(
            stmt, (BinaryParam(ColumnType.VAR_STRING, ">"), BinaryParam(ColumnType.STRING, ""))
        ),
        client.caps,
    )[:-1]
    client.command(packet)
    assert client.result(binary=True).rows == [(b">hello world",)]
    client.command(build_stmt_send_long_data(StmtSendLongData(stmt, 1, b"dropped")))
    client.command(build_stmt_reset(stmt))
    assert client.result().ok is not None
    client.command(build_stmt_reset(12345))
    err = client.result().err
    assert err is not None
    assert err.errno == 1243


def test_execute_of_an_unknown_statement_is_1243(client: RawClient) -> None:
    client.command(build_stmt_execute(StmtExecute(4242), client.caps))
    err = client.result().err
    assert err is not None
    assert err.errno == 1243
    assert "mysqld_stmt_execute" in err.message


# --- misbehaving clients --------------------------------------------------------------------------


def test_malformed_packet_closes_only_that_session(
    emu: EmulatorThread, client: RawClient, caplog: pytest.LogCaptureFixture
) -> None:
    bad = _login(emu.port)
    bad.command(bytes((Command.STMT_CLOSE, 1)))  # statement id cut short
    assert bad.is_closed()
    assert any("malformed" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert client.ok("DO 1") is not None
    fresh = _login(emu.port)
    assert fresh.ok("DO 1") is not None
    fresh.close()


def test_garbage_handshake_response_closes_only_that_session(
    emu: EmulatorThread, client: RawClient
) -> None:
    bad = RawClient(emu.port)
    bad.write(b"\x01\x02\x03")
    assert bad.is_closed()
    assert client.ok("DO 1") is not None


def test_packets_out_of_order(emu: EmulatorThread) -> None:
    c = _login(emu.port)
    c.seq = 5
    c.write(build_ping())
    c.seq = 6
    err = parse_err(c.read(), c.caps)
    assert (err.errno, err.sqlstate) == (1156, "08S01")
    assert c.is_closed()


def test_packet_bigger_than_max_allowed_packet(emu: EmulatorThread, client: RawClient) -> None:
    big = _login(emu.port)
    big.command(build_query("SELECT '" + "x" * (1 << 20) + "'"))
    err = parse_err(big.read(), big.caps)
    assert (err.errno, err.sqlstate) == (1153, "08S01")
    assert err.message == "Got a packet bigger than 'max_allowed_packet' bytes"
    assert big.is_closed()
    assert client.ok("DO 1") is not None


def test_pymysql_sees_1153_for_an_oversized_query(emu: EmulatorThread) -> None:
    conn = pymysql.connect(host="127.0.0.1", port=emu.port, user="root")
    with pytest.raises(pymysql.err.MySQLError) as info, conn.cursor() as cur:
        cur.execute("SELECT '" + "y" * (3 << 19) + "'")
    assert info.value.args[0] == 1153


def test_large_result_rows_are_split_into_packets(client: RawClient) -> None:
    size = (1 << 24) + 10  # more than one 16 MiB physical packet
    [res] = client.query(f"SELECT REPEAT('a', {size})")
    assert res.err is None
    assert res.rows == [(b"a" * size,)]


# --- reading: deadlines, pipelining, half-close ---------------------------------------------------


@pytest.fixture(params=[False, True], ids=["asyncio", "uvloop"])
def quick_timeouts(request: pytest.FixtureRequest) -> Iterator[EmulatorThread]:
    """A server whose net_read_timeout is 0.3 s and wait_timeout 1.2 s, on either loop."""
    wire = WireConfig(net_read_timeout=0.3, wait_timeout=1.2, shutdown_timeout=2.0)
    config = ServerConfig(accounts=ACCOUNTS)
    with EmulatorThread(config, wire_config=wire, fast_loop=request.param) as emulator:
        yield emulator


def test_a_packet_left_unfinished_is_dropped_after_net_read_timeout(
    quick_timeouts: EmulatorThread,
) -> None:
    c = _login(quick_timeouts.port)
    data, _ = frame_packets(build_query("SELECT 1"), 0)
    started = time.monotonic()
    c.sock.sendall(data[:7])  # the header and part of the payload
    assert c.is_closed()
    assert 0.25 < time.monotonic() - started < 1.0  # net_read_timeout, not wait_timeout


def test_the_idle_deadline_outlives_an_earlier_packets_deadline(
    quick_timeouts: EmulatorThread,
) -> None:
    """A packet that arrives in two parts arms the 0.3 s net_read_timeout; the wait for the
    next command that follows must still last wait_timeout (1.2 s), not end at 0.3 s."""
    c = _login(quick_timeouts.port)
    data, _ = frame_packets(build_query("SELECT 7"), 0)
    c.sock.sendall(data[:6])
    time.sleep(0.1)
    c.sock.sendall(data[6:])
    c.seq = 1
    [res] = c.results()
    assert res.rows == [(b"7",)]
    idle_from = time.monotonic()
    c.seq = 0
    err = parse_err(c.read(), c.caps)
    assert err.errno == 4031
    assert 1.1 < time.monotonic() - idle_from < 3.0
    assert c.is_closed()


def test_a_client_that_keeps_talking_is_never_timed_out(quick_timeouts: EmulatorThread) -> None:
    """Commands 0.4 s apart, for longer than wait_timeout in all: each wait is bounded on its
    own, so none of them times out."""
    c = _login(quick_timeouts.port)
    for i in range(5):
        [res] = c.query(f"SELECT {i}")
        assert res.rows == [(str(i).encode(),)]
        time.sleep(0.4)
    assert c.ok("DO 1") is not None


def test_pipelined_commands_are_all_answered_in_order(emu: EmulatorThread) -> None:
    """A client that writes many commands before reading (more than the server buffers before
    it stops reading) gets every answer, in order."""
    c = _login(emu.port)
    count = 3000
    filler = "x" * 100
    packets = []
    for i in range(count):
        data, _ = frame_packets(build_query(f"SELECT {i}, '{filler}'"), 0)
        packets.append(data)
    sender = threading.Thread(target=c.sock.sendall, args=(b"".join(packets),))
    sender.start()
    try:
        for i in range(count):
            c.seq = 1
            [res] = c.results()
            assert res.rows == [(str(i).encode(), filler.encode())]
    finally:
        sender.join(30)
    assert c.ok("DO 1") is not None


def test_a_crash_drops_the_idle_connections_at_once() -> None:
    """``EmulatedServer.restart`` without a shutdown is a crash: every client connection is
    dropped then, not at its next command."""
    with EmulatorThread(ServerConfig(accounts=ACCOUNTS)) as emulator:
        idle = [_login(emulator.port) for _ in range(3)]
        emulator.run(emulator.server.restart)
        for c in idle:
            c.sock.settimeout(3)
            with contextlib.suppress(ConnectionError):  # a reset is a close too
                assert c.sock.recv(1 << 16) == b""  # not a timeout: closed by the server
        fresh = _login(emulator.port)
        assert fresh.ok("DO 1") is not None


def test_a_query_followed_by_a_half_close_is_still_answered(emu: EmulatorThread) -> None:
    c = _login(emu.port)
    c.command(build_query("SELECT 42"))
    c.sock.shutdown(socket.SHUT_WR)
    [res] = c.results()
    assert res.rows == [(b"42",)]
    assert c.is_closed()


# --- concurrency and shutdown ---------------------------------------------------------------------


def test_concurrent_raw_sessions(emu: EmulatorThread) -> None:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            c = _login(emu.port)
            for _ in range(5):
                [res] = c.query(f"SELECT {i}")
                assert res.rows == [(str(i).encode(),)]
            c.close()
        except BaseException as e:  # collected for the main thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]


def test_graceful_shutdown_closes_sessions() -> None:
    async def scenario() -> None:
        server = EmulatedServer(ServerConfig(accounts=ACCOUNTS))
        await server.start()
        wire = await serve(server, config=WireConfig(shutdown_timeout=1.0))
        loop = asyncio.get_running_loop()
        idle = await loop.run_in_executor(None, _login, wire.port)
        busy = await loop.run_in_executor(None, _login, wire.port)
        busy.command(build_query("SELECT SLEEP(30)"))
        deadline = time.monotonic() + 5
        while not any(c.busy for c in wire.connections.values()):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert len(server.sessions) == 2
        started = time.monotonic()
        wire.close()
        await wire.wait_closed()
        assert time.monotonic() - started < 5  # the sleeping command was cancelled
        assert server.sessions == {}
        assert await loop.run_in_executor(None, idle.is_closed)
        assert await loop.run_in_executor(None, busy.is_closed)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", wire.port), timeout=1).recv(1)
        await server.shutdown()
        server.close()

    asyncio.run(scenario())


def test_emulator_thread_reports_startup_errors() -> None:
    def broken() -> EmulatedServer:
        raise ValueError("no engine today")

    emulator = EmulatorThread(factory=broken, timeout=10)
    with pytest.raises(ValueError, match="no engine today"):
        emulator.start()
    emulator.stop()


def test_emulator_thread_runs_calls_on_its_loop(emu: EmulatorThread) -> None:
    async def where() -> object:
        return asyncio.get_running_loop()

    assert emu.call(where()) is emu.loop
    assert emu.run(lambda: threading.current_thread().name) == "consistent-emulator"
    with pytest.raises(TimeoutError):
        emu.call(asyncio.sleep(5), timeout=0.05)
    assert emu.call(asyncio.sleep(0, result=7)) == 7  # the loop is still serving
