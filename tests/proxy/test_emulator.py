"""The proxy in front of the emulator (MySQL flavour: GTID sets, OWN_GTID tracking,
WAIT_FOR_EXECUTED_GTID_SET): read-your-writes through replicas whose channels lag, and a single
emulated server as the primary, with PyMySQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent.emulator import start_topology
from consistent.emulator.replication import Fixed, LagModel
from consistent.emulator.replication.threaded import TopologyThread
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import USERS, connect, mariadb_client

LAG = 0.02


@pytest.fixture(scope="module")
def emulated() -> Iterator[TopologyThread]:
    with start_topology(replicas=2, lag=LagModel(network=Fixed(LAG), workers=1)) as topology:
        yield topology


@pytest.fixture
def proxy(emulated: TopologyThread) -> Iterator[ProxyThread]:
    primary = emulated.connection_params()
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "wait_timeout": 2.0,
            "backends": {
                "primary": f"127.0.0.1:{emulated.primary.port}",
                "replicas": [f"127.0.0.1:{r.port}" for r in emulated.replicas],
                "user": primary.user,
                "password": primary.password,
                "monitor_interval_ms": 50,
            },
            "users": USERS,
        }
    )
    with ProxyThread(config) as running:
        yield running


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def test_read_your_writes_through_lagging_emulated_replicas(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    conn = connect(proxy)
    replicas = {r.port for r in emulated.replicas}
    try:
        rows(conn, "CREATE DATABASE IF NOT EXISTS ryw")
        rows(conn, "CREATE TABLE IF NOT EXISTS ryw.kv (k INT PRIMARY KEY, v INT)")
        rows(conn, "REPLACE INTO ryw.kv VALUES (1, 0)")
        violations, on_replicas = [], 0
        for i in range(1, 101):
            rows(conn, "UPDATE ryw.kv SET v = %s WHERE k = 1", (i,))
            value, port = rows(conn, "SELECT v, @@port FROM ryw.kv WHERE k = 1")[0]
            on_replicas += port in replicas
            if value != i:
                violations.append((i, value))
        assert violations == []
        assert on_replicas >= 90
        token = rows(conn, "SELECT @@consistent_token")[0][0]
        assert token.startswith("mysql:" + emulated.primary.server_uuid)
    finally:
        conn.close()


def test_the_mariadb_client_through_the_proxy_to_the_emulator(proxy: ProxyThread) -> None:
    script = (
        "CREATE DATABASE IF NOT EXISTS cli; USE cli;"
        "CREATE TABLE IF NOT EXISTS t (a INT PRIMARY KEY);"
        "REPLACE INTO t VALUES (1), (2);"
        "SELECT COUNT(*) FROM t;"
        "SELECT @@consistent_token;"
    )
    result = mariadb_client(proxy, script)
    assert result.returncode == 0, result.stderr
    count, token = result.stdout.splitlines()
    assert count == "2"
    assert token.startswith("mysql:")


def test_replica_hints_on_what_may_write_go_to_the_primary(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    """Hints never override safety (the emulator's replicas are writable: a write that reached
    one would land there, not on the primary)."""
    conn = connect(proxy)
    hint = "/* consistent: replica */ "
    primary = emulated.primary.port
    try:
        rows(conn, "CREATE DATABASE IF NOT EXISTS hints")
        rows(conn, f"{hint}CREATE TABLE IF NOT EXISTS hints.kv (k INT PRIMARY KEY, v INT)")
        rows(conn, f"{hint}REPLACE INTO hints.kv VALUES (1, 10)")
        assert rows(conn, f"{hint}SELECT v, @@port FROM hints.kv FOR UPDATE") == [(10, primary)]
        assert rows(conn, f"{hint}SELECT v, @@port FROM hints.kv LOCK IN SHARE MODE") == [
            (10, primary)
        ]
        with pytest.raises(pymysql.MySQLError):  # no stored functions here: routing only
            rows(conn, f"{hint}SELECT no_such_function(1), @@port")
        [(value, port)] = rows(conn, f"{hint}SELECT v, @@port FROM hints.kv")
        assert (value, port != primary) == (10, True)
    finally:
        conn.close()


def test_the_proxy_reads_an_8_4_servers_tagged_gtids() -> None:
    """An 8.4 primary's executed set holds a tagged GTID; the proxy, which parses a server's
    GTIDs by the version in its handshake, routes a read_latest read through it."""
    from consistent.emulator.config import VERSION_84
    from consistent.emulator.replication import ServerSpec, TopologySpec

    base = TopologySpec.primary_with_replicas(1, lag=LagModel(network=Fixed(LAG)))
    spec = TopologySpec(
        servers=tuple(ServerSpec(s.name, version=VERSION_84) for s in base.servers),
        channels=base.channels,
    )
    with start_topology(spec) as topology:
        primary = topology.primary
        admin = pymysql.connect(
            host="127.0.0.1", port=primary.port, user=primary.user, autocommit=True
        )
        with admin.cursor() as cur:
            cur.execute(f"SET GTID_NEXT = '{primary.server_uuid}:app:1'")
            cur.execute("CREATE DATABASE tagged")
            cur.execute("SET GTID_NEXT = 'AUTOMATIC'")
            cur.execute("CREATE TABLE tagged.t (a INT)")
            cur.execute("INSERT INTO tagged.t VALUES (7)")
        admin.close()
        config = parse(
            {
                "listen": "127.0.0.1:0",
                "wait_timeout": 2.0,
                "level": "read_latest",
                "backends": {
                    "primary": f"127.0.0.1:{primary.port}",
                    "replicas": [f"127.0.0.1:{r.port}" for r in topology.replicas],
                    "user": primary.user,
                    "password": primary.password,
                    "monitor_interval_ms": 50,
                },
                "users": USERS,
            }
        )
        with ProxyThread(config) as proxy:
            conn = connect(proxy)
            assert conn.get_server_info().startswith("8.4.")
            assert rows(conn, "SELECT a FROM tagged.t") == [(7,)]
            conn.close()


def test_replica_connections_report_their_executed_set_with_all_gtids(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    """As the wrapper's: a MySQL replica's OK packets then carry its executed set, which the
    replica knowledge learns from every answer (``consistent.policy.driver.ready_steps``)."""
    conn = connect(proxy)
    replicas = {r.port for r in emulated.replicas}
    hint = "/* consistent: replica */ "
    try:
        [(tracker, port)] = rows(conn, f"{hint}SELECT @@SESSION.session_track_gtids, @@port")
        assert port in replicas
        assert tracker == "ALL_GTIDS"
        primary = "/* consistent: primary */ "
        [(tracker, port)] = rows(conn, f"{primary}SELECT @@SESSION.session_track_gtids, @@port")
        assert (tracker, port) == ("OWN_GTID", emulated.primary.port)
    finally:
        conn.close()
