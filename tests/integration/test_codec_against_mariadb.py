"""Our wire codec drives a raw socket to the real MariaDB primary.

Every byte sent is built by ``consistent.protocol`` and every byte received is parsed by it:
handshake, ``mysql_native_password``, COM_QUERY with ``last_gtid`` tracking, OK packets whose
GTID ``SELECT @@last_gtid`` confirms, result sets read to their end (with and without
``CLIENT_DEPRECATE_EOF``), and ERR packets with their SQLSTATE.  The socket loop lives in this
test on purpose: the codec itself does no I/O.
"""

from __future__ import annotations

import collections
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from consistent.flavors import MARIADB, detect_flavor
from consistent.gtid import MariaPosition
from consistent.protocol import (
    Capability,
    ColumnDefinition41,
    ColumnFlag,
    ColumnType,
    EofPacket,
    ErrPacket,
    HandshakeResponse41,
    HandshakeV10,
    OkPacket,
    Packet,
    PacketDecoder,
    Schema,
    ServerStatus,
    build_handshake_response41,
    build_ok,
    build_ping,
    build_query,
    build_quit,
    frame_packets,
    is_eof,
    is_err,
    is_ok,
    parse_column_count,
    parse_column_definition41,
    parse_eof,
    parse_err,
    parse_handshake_v10,
    parse_ok,
    parse_text_row,
    scramble_native_password,
)
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from consistent.vocabulary import Tracking

pytestmark = pytest.mark.mariadb

NATIVE = "mysql_native_password"
# LONG_PASSWORD doubles as MariaDB's CLIENT_MYSQL bit: it says "a MySQL-protocol client", so
# the server does not expect MariaDB's extended capabilities in the reserved bytes.
BASE_CAPS = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.PLUGIN_AUTH
    | Capability.CONNECT_WITH_DB
    | Capability.SESSION_TRACK
)


@dataclass(frozen=True)
class ResultSet:
    columns: tuple[ColumnDefinition41, ...]
    rows: tuple[tuple[bytes | None, ...], ...]
    end: OkPacket | EofPacket


Response = OkPacket | ErrPacket | ResultSet


class RawClient:
    """A blocking socket loop around the sans-I/O codec, just enough for these tests."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.decoder = PacketDecoder()
        self.pending: collections.deque[Packet] = collections.deque()
        self.seq = 0
        self.caps = Capability(0)

    def read(self) -> Packet:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.pending.extend(self.decoder.feed(data))
        packet = self.pending.popleft()
        assert packet.seq == self.seq, f"sequence id {packet.seq}, expected {self.seq}"
        self.seq = (packet.seq + 1) & 0xFF
        return packet

    def send(self, payload: bytes) -> None:
        wire, self.seq = frame_packets(payload, self.seq)
        self.sock.sendall(wire)

    def command(self, payload: bytes) -> None:
        self.seq = 0  # every command starts a new sequence
        self.send(payload)

    def greeting(self) -> HandshakeV10:
        return parse_handshake_v10(self.read().payload)

    def login(
        self, handshake: HandshakeV10, user: str, password: str, database: str, caps: Capability
    ) -> OkPacket | ErrPacket:
        self.caps = caps & handshake.capabilities | Capability.LONG_PASSWORD
        response = HandshakeResponse41(
            capabilities=self.caps,
            username=user,
            auth_response=scramble_native_password(password.encode(), handshake.auth_plugin_data),
            max_packet_size=1 << 24,
            database=database,
            auth_plugin_name=NATIVE,
        )
        self.send(build_handshake_response41(response))
        reply = self.read().payload
        if is_err(reply):
            return parse_err(reply, self.caps)
        assert reply[0] == 0x00, f"expected OK after auth, got {reply[:1].hex()}"
        return parse_ok(reply, self.caps)

    def query(self, sql: str) -> Response:
        self.command(build_query(sql))
        first = self.read().payload
        if is_err(first):
            return parse_err(first, self.caps)
        if is_ok(first, self.caps):
            return parse_ok(first, self.caps)
        count = parse_column_count(first, self.caps)
        columns = tuple(
            parse_column_definition41(self.read().payload, self.caps) for _ in range(count)
        )
        deprecate_eof = bool(self.caps & Capability.DEPRECATE_EOF)
        if not deprecate_eof:
            assert is_eof(self.read().payload, self.caps), "column definitions end in an EOF"
        rows: list[tuple[bytes | None, ...]] = []
        while True:
            payload = self.read().payload
            if is_err(payload):
                raise AssertionError(f"error inside a result set: {parse_err(payload, self.caps)}")
            if deprecate_eof and payload[0] == 0xFE and is_ok(payload, self.caps):
                return ResultSet(columns, tuple(rows), parse_ok(payload, self.caps))
            if not deprecate_eof and is_eof(payload, self.caps):
                return ResultSet(columns, tuple(rows), parse_eof(payload, self.caps))
            rows.append(parse_text_row(payload, count))

    def raw_query(self, sql: str) -> bytes:
        """Send a statement that answers with a single packet; return its payload as is."""
        self.command(build_query(sql))
        return self.read().payload

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.command(build_quit())
        self.sock.close()


def ok(response: Response) -> OkPacket:
    assert isinstance(response, OkPacket), response
    return response


def result(response: Response) -> ResultSet:
    assert isinstance(response, ResultSet), response
    return response


@pytest.fixture(params=[False, True], ids=["eof", "deprecate_eof"])
def client(request: pytest.FixtureRequest, mariadb_database: CleanDatabase) -> Iterator[RawClient]:
    """A logged-in raw client on the primary, with or without CLIENT_DEPRECATE_EOF."""
    topology = mariadb_database.topology
    caps = BASE_CAPS | (Capability.DEPRECATE_EOF if request.param else Capability(0))
    raw = RawClient(topology.primary.port)
    try:
        handshake = raw.greeting()
        reply = raw.login(
            handshake, topology.app_user, topology.app_password, mariadb_database.name, caps
        )
        login = ok(reply)
        # CONNECT_WITH_DB: the session-state tracker reports the schema we asked for.
        assert Schema(mariadb_database.name) in login.session_state
        yield raw
    finally:
        raw.close()


def test_handshake_announces_mariadb_and_native_password(
    mariadb_topology: MariaDBTopology,
) -> None:
    raw = RawClient(mariadb_topology.primary.port)
    try:
        handshake = raw.greeting()
    finally:
        raw.sock.close()
    assert raw.seq == 1
    assert handshake.server_version.startswith("5.5.5-10.")
    assert "MariaDB" in handshake.server_version
    assert detect_flavor(handshake.server_version) is MARIADB
    assert handshake.auth_plugin_name == NATIVE
    assert len(handshake.auth_plugin_data) == 20
    for needed in (Capability.PROTOCOL_41, Capability.SESSION_TRACK, Capability.PLUGIN_AUTH):
        assert handshake.capabilities & needed
    assert handshake.connection_id > 0


def test_a_wrong_password_is_an_err_packet_with_sqlstate(
    mariadb_topology: MariaDBTopology,
) -> None:
    raw = RawClient(mariadb_topology.primary.port)
    try:
        handshake = raw.greeting()
        reply = raw.login(
            handshake, mariadb_topology.app_user, "not-the-password", "mysql", BASE_CAPS
        )
    finally:
        raw.sock.close()
    assert isinstance(reply, ErrPacket)
    assert (reply.errno, reply.sqlstate) == (1045, "28000")
    assert mariadb_topology.app_user in reply.message


def test_the_insert_ok_packet_carries_the_gtid_that_last_gtid_confirms(
    client: RawClient, mariadb_topology: MariaDBTopology
) -> None:
    probe = result(client.query(MARIADB.tracking_probe()))
    (current,) = probe.rows[0]
    assert current is not None
    statement = MARIADB.tracking_statement(Tracking.OWN, current)
    assert statement is not None
    ok(client.query(statement))

    created = ok(client.query("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))"))
    assert created.status & ServerStatus.SESSION_STATE_CHANGED
    first = MARIADB.gtids_from_ok(created)
    assert isinstance(first, MariaPosition)

    raw_insert = client.raw_query("INSERT INTO t (v) VALUES ('a'), (NULL)")
    inserted = parse_ok(raw_insert, client.caps)
    assert (inserted.affected_rows, inserted.last_insert_id) == (2, 1)
    assert inserted.info.startswith(b"Records: 2")
    assert inserted.status & ServerStatus.AUTOCOMMIT
    # Our encoder writes the server's bytes back exactly.
    assert build_ok(inserted, client.caps) == raw_insert
    tracked = MARIADB.gtids_from_ok(inserted)
    assert isinstance(tracked, MariaPosition)
    (gtid,) = tracked.gtids()
    (before,) = first.gtids()
    assert (gtid.domain, gtid.server_id) == (0, mariadb_topology.primary.server_id)
    assert gtid.seq_no == before.seq_no + 1

    confirm = result(client.query("SELECT @@last_gtid"))
    assert confirm.rows == ((str(gtid).encode(),),)
    assert mariadb_topology.primary_position() == str(gtid)


def test_a_select_result_set_is_read_to_its_end(client: RawClient) -> None:
    ok(client.query("CREATE TABLE r (id INT NOT NULL PRIMARY KEY, v VARCHAR(10), n BIGINT)"))
    ok(client.query("INSERT INTO r VALUES (1, 'a', NULL), (2, NULL, -5), (3, '', 9)"))

    rs = result(client.query("SELECT id, v, n AS total FROM r ORDER BY id"))
    assert [c.name for c in rs.columns] == ["id", "v", "total"]
    assert [c.org_name for c in rs.columns] == ["id", "v", "n"]
    assert {c.table for c in rs.columns} == {"r"}
    assert [c.type for c in rs.columns] == [
        ColumnType.LONG,
        ColumnType.VAR_STRING,
        ColumnType.LONGLONG,
    ]
    assert rs.columns[0].flags & ColumnFlag.PRI_KEY
    assert rs.columns[0].flags & ColumnFlag.NOT_NULL
    assert not rs.columns[1].flags & ColumnFlag.NOT_NULL
    assert rs.rows == ((b"1", b"a", None), (b"2", None, b"-5"), (b"3", b"", b"9"))
    if client.caps & Capability.DEPRECATE_EOF:
        assert isinstance(rs.end, OkPacket)
    else:
        assert isinstance(rs.end, EofPacket)
    assert not rs.end.status & ServerStatus.MORE_RESULTS_EXISTS

    empty = result(client.query("SELECT id FROM r WHERE id > 100"))
    assert empty.rows == ()
    # The connection is in step after reading to the end: a ping answers OK.
    client.command(build_ping())
    assert is_ok(client.read().payload, client.caps)


@pytest.mark.parametrize(
    ("sql", "errno", "sqlstate"),
    [
        ("SELECT * FROM no_such_table", 1146, "42S02"),
        ("SELEKT 1", 1064, "42000"),
        ("SELECT no_such_column FROM dual", 1054, "42S22"),
    ],
)
def test_errors_come_back_as_err_packets_with_sqlstate(
    client: RawClient, sql: str, errno: int, sqlstate: str
) -> None:
    err = client.query(sql)
    assert isinstance(err, ErrPacket)
    assert (err.errno, err.sqlstate) == (errno, sqlstate)
    assert err.message
    # An error does not break the session.
    assert result(client.query("SELECT 1")).rows == ((b"1",),)


def test_a_duplicate_key_is_an_integrity_sqlstate(client: RawClient) -> None:
    ok(client.query("CREATE TABLE u (id INT PRIMARY KEY)"))
    ok(client.query("INSERT INTO u VALUES (1)"))
    err = client.query("INSERT INTO u VALUES (1)")
    assert isinstance(err, ErrPacket)
    assert (err.errno, err.sqlstate) == (1062, "23000")


def test_quit_closes_the_connection(client: RawClient) -> None:
    client.command(build_quit())
    assert client.sock.recv(1) == b""
