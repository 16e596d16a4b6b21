"""Packets of 16 MiB and more both ways, LOAD DATA LOCAL INFILE (refused unless configured), and
COM_STMT_SEND_LONG_DATA whose data follows the execute to the replica it is routed to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.testing import ProxyThread

from .conftest import connect
from .rawclient import RawClient, execute_packet, long_data_packet

BIG = 20 * 1024 * 1024  # more than one 16 MiB packet


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


@pytest.fixture
def big_packets(mariadb_topology: MariaDBTopology) -> None:
    for server in mariadb_topology.servers:  # new connections see it
        server.query("SET GLOBAL max_allowed_packet = 67108864")


#: Seconds a read may wait for a replica to apply a 17 MiB write.
REPLICA_APPLY_TIMEOUT = 30.0


@pytest.mark.usefixtures("big_packets")
def test_rows_and_commands_beyond_16_mib(
    make_proxy: Callable[..., ProxyThread],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    # Replicas apply a 17 MiB row in well under a second when idle, but several seconds on a
    # loaded machine: the read must wait for it on a replica rather than time out to the
    # primary, which would not exercise a 16 MiB row from a replica.
    proxy = make_proxy(wait_timeout=REPLICA_APPLY_TIMEOUT)
    conn = connect(proxy, mariadb_database, max_allowed_packet=64 * 1024 * 1024)
    try:
        rows(conn, "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)")
        value = bytes(range(256)) * (17 * 1024 * 1024 // 256) + b"\xfe\xff"  # a 17 MiB command
        rows(conn, "INSERT INTO t VALUES (1, %s)", (value,))
        ((back, port),) = rows(conn, "SELECT b, @@port FROM t WHERE id = 1")
        assert back == value
        assert port in {r.port for r in mariadb_topology.replicas}
        (text,) = rows(conn, f"SELECT REPEAT('x', {BIG})")[0]
        assert text == "x" * BIG
        assert rows(conn, "SELECT 42") == [(42,)]  # the stream is still in step
    finally:
        conn.close()


def test_local_infile_is_refused_unless_configured(
    make_proxy: Callable[..., ProxyThread], mariadb_database: CleanDatabase, tmp_path: Path
) -> None:
    data = tmp_path / "rows.csv"
    data.write_text("".join(f"{i},{i * i}\n" for i in range(1, 101)))
    load = f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE t FIELDS TERMINATED BY ','"
    refused = connect(make_proxy(), mariadb_database, local_infile=True)
    try:
        rows(refused, "CREATE TABLE t (a INT PRIMARY KEY, b INT)")
        with pytest.raises(pymysql.err.MySQLError):
            rows(refused, load)
        assert rows(refused, "SELECT COUNT(*) FROM t") == [(0,)]
    finally:
        refused.close()
    allowed = connect(make_proxy(local_infile=True), mariadb_database, local_infile=True)
    try:
        rows(allowed, load)
        assert rows(allowed, "SELECT COUNT(*), SUM(b) FROM t") == [
            (100, sum(i * i for i in range(1, 101)))
        ]
    finally:
        allowed.close()


def test_long_data_follows_the_execute_to_a_replica(
    proxy: ProxyThread, mariadb_topology: MariaDBTopology
) -> None:
    client = RawClient(proxy.port, "app", "app-secret")
    try:
        stmt, params, _columns = client.prepare("SELECT CONCAT(?, '!'), @@port")
        assert params == 1
        chunks = [b"long ", b"data ", b"in three chunks"]
        for chunk in chunks:
            client.command(long_data_packet(stmt, 0, chunk))
        # VAR_STRING, and no value: the server takes the long data.
        client.command(execute_packet(stmt, b"\xfd\x00", b"", 1))
        ((value, port),) = client.result(binary=True)[0].rows
        assert value == b"".join(chunks) + b"!"
        assert port in {r.port for r in mariadb_topology.replicas}
    finally:
        client.close()
