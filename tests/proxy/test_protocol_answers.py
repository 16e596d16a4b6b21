"""What the proxy answers, through real clients on real MariaDB: oversized statements streamed
to the primary, a server's 1153 for a packet above its ``max_allowed_packet``, the intercepted
variables as client libraries send them (escaped tokens, ``SET`` without ``@@``, several
columns), and MariaDB's bulk execution passed through (Connector/Python's ``executemany``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from consistent.classify import MAX_CLASSIFIED_LENGTH
from consistent.errnos import ER
from consistent.policy import MAX_TOKEN_LENGTH
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.testing import ProxyThread

from .conftest import connect

mariadb = pytest.importorskip("mariadb")

ER_MALFORMED_GTID_SET_SPECIFICATION = 1772
MIB = 1024 * 1024


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def error_of(conn: Any, sql: str, args: Any = None) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        rows(conn, sql, args)
    errno, message = info.value.args
    return errno, message


def streamed(proxy: ProxyThread) -> int:
    return proxy.run(lambda: proxy.server.metrics.streamed_commands)


def routed(proxy: ProxyThread) -> int:
    return proxy.run(lambda: sum(proxy.server.metrics.routed.values()))


@pytest.fixture
def packet_limit(mariadb_topology: MariaDBTopology) -> Iterator[Callable[[int], None]]:
    """Set the servers' max_allowed_packet (for new connections); restored afterwards."""
    primary = mariadb_topology.primary
    before = primary.query("SELECT @@GLOBAL.max_allowed_packet AS v")[0]["v"]

    def limit(value: int) -> None:
        for server in mariadb_topology.servers:
            server.query(f"SET GLOBAL max_allowed_packet = {value}")

    yield limit
    limit(int(before))


def test_an_oversized_statement_streams_to_the_primary(
    make_proxy: Callable[..., ProxyThread],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
    packet_limit: Callable[[int], None],
) -> None:
    packet_limit(64 * MIB)
    proxy = make_proxy()
    conn = connect(proxy, mariadb_database, max_allowed_packet=64 * MIB)
    try:
        rows(conn, "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)")
        before = streamed(proxy)
        # A read: the replicas could serve it, but its end is never classified.
        padding = "y" * (MAX_CLASSIFIED_LENGTH + 10)
        assert rows(conn, "SELECT LENGTH(%s), @@port", (padding,)) == [
            (len(padding), mariadb_topology.primary.port)
        ]
        # Several 16 MiB packets, each passed on as it arrives; sequence ids kept.
        value = bytes(range(256)) * (18 * MIB // 256)
        rows(conn, "INSERT INTO t VALUES (1, %s)", (value,))
        assert rows(conn, "SELECT LENGTH(b), MD5(b) = MD5(%s) FROM t", (value,)) == [
            (len(value), 1)
        ]
        assert streamed(proxy) - before == 3
        # The session goes on, its plain reads on the replicas again.
        ports = {rows(conn, "SELECT @@port")[0][0] for _ in range(4)}
        assert ports <= {r.port for r in mariadb_topology.replicas}
    finally:
        conn.close()


def test_a_query_above_the_servers_packet_limit_gets_the_servers_1153(
    make_proxy: Callable[..., ProxyThread], packet_limit: Callable[[int], None]
) -> None:
    packet_limit(MIB)
    # MariaDB's own error (sql/share/errmsg-utf8.txt), as a client connected directly reads
    # it when the server had read its whole command (with more unread, the server's close
    # resets the connection and the client sees 2006 instead).
    server_error = (ER.NET_PACKET_TOO_LARGE, "Got a packet bigger than 'max_allowed_packet' bytes")
    # Without multiplexing: a pooled connection keeps the session value of the limit it was
    # opened with, and the second client must see the server's new global value.
    proxy = make_proxy(pool={"multiplexing": False})
    conn = connect(proxy, max_allowed_packet=64 * MIB)
    try:
        # One packet, larger than the server's limit from its header on.
        assert error_of(conn, "SELECT LENGTH(%s)", ("z" * (2 * MIB),)) == server_error
        assert rows(conn, "SELECT 1") == [(1,)]
        # Several packets: the error comes after the last one, numbered after it.
        packet_limit(17 * MIB)
        fresh = connect(proxy, max_allowed_packet=64 * MIB)
        try:
            assert error_of(fresh, "SELECT LENGTH(%s)", ("z" * (18 * MIB),)) == server_error
            assert rows(fresh, "SELECT LENGTH(%s)", ("z" * (2 * MIB),)) == [(2 * MIB,)]
        finally:
            fresh.close()
    finally:
        conn.close()


def test_intercepted_statements_as_client_libraries_send_them(
    proxy: ProxyThread, mariadb_database: CleanDatabase
) -> None:
    writer = connect(proxy, mariadb_database)
    reader = connect(proxy, mariadb_database)
    try:
        rows(writer, "CREATE TABLE t (a INT)")
        rows(writer, "INSERT INTO t VALUES (1)")
        token = rows(writer, "SELECT @@consistent_token")[0][0]
        # Parameter binding escapes the value; the proxy reads it back.
        rows(reader, "SET @@consistent_token = %s", (token,))
        assert rows(reader, "SELECT @@consistent_token")[0][0] == token
        # A token with a quote (escaped by PyMySQL as \') is a malformed token, not 1193.
        errno, message = error_of(reader, "SET @@consistent_token = %s", ("mariadb:0-1-'5",))
        assert errno == ER_MALFORMED_GTID_SET_SPECIFICATION
        assert message == "Malformed GTID set specification '0-1-'5'."
        # Without @@, and with SESSION, as for any session variable.
        rows(reader, "SET consistent_level = %s", ("eventual",))
        rows(reader, "SET SESSION consistent_level = 'read_latest'")
        with reader.cursor() as cur:
            cur.execute("SELECT @@consistent_level, @@consistent_token AS tok")
            assert cur.fetchall() == ((("read_latest", token)),)
            assert [(d[0], d[1]) for d in cur.description] == [
                ("@@consistent_level", pymysql.constants.FIELD_TYPE.VAR_STRING),
                ("tok", pymysql.constants.FIELD_TYPE.VAR_STRING),
            ]
            ours = [(f.charsetnr, f.flags, f.scale) for f in reader._result.fields]
            # The server's own string variables, for comparison.
            cur.execute("SELECT @@time_zone, @@character_set_client")
            theirs = [(f.charsetnr, f.flags, f.scale) for f in reader._result.fields]
        assert ours == theirs
        # An oversized token is refused at once, and the session is unharmed.
        huge = "mariadb:" + ",".join(f"{d}-1-{d}" for d in range(MAX_TOKEN_LENGTH))
        errno, message = error_of(reader, "SET @@consistent_token = %s", (huge,))
        assert errno == ER_MALFORMED_GTID_SET_SPECIFICATION
        assert message == f"Malformed GTID set specification '{huge[:200]}'."
        assert rows(reader, "SELECT @@consistent_token")[0][0] == token
        assert rows(reader, "SELECT COUNT(*) FROM t") == [(1,)]
    finally:
        writer.close()
        reader.close()


def test_executemany_of_mariadb_connector_python_is_one_bulk_command(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    bulk = 1 << 2  # MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32
    conn = mariadb.connect(
        host="127.0.0.1",
        port=proxy.port,
        user="app",
        password="app-secret",
        database=mariadb_database.name,
        autocommit=True,
    )
    try:
        assert conn.extended_server_capabilities & bulk
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        before = routed(proxy)
        cur.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"row {i}") for i in range(2000)])
        cur.executemany("UPDATE t SET v = ? WHERE id = ?", [("even", i) for i in range(0, 2000, 2)])
        # Row by row would have routed 3,000 statements; bulk routes two executes (and the
        # statements the connector sends around them).
        assert routed(proxy) - before < 10
        cur.execute("SELECT COUNT(*), SUM(id), SUM(v = 'even') FROM t")
        assert cur.fetchall() == [(2000, sum(range(2000)), 1000)]
        # The writes' GTIDs reached the session: its token covers them.
        cur.execute("SELECT @@consistent_token")
        (token,) = cur.fetchone()
        primary_pos = mariadb_topology.primary.query("SELECT @@gtid_binlog_pos AS p")[0]["p"]
        assert token == f"mariadb:{primary_pos}"
    finally:
        conn.close()
