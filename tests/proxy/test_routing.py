"""Routing through the proxy against real MariaDB: reads on replicas, read-your-writes under
lag, session state that follows the session, pins, transactions, multi-statements, the
intercepted consistency variables and routing hints.

Which server answered is read from the answer itself (``@@port``), never from the proxy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.testing import ProxyThread

from .conftest import connect, level_replicas


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def one(conn: Any, sql: str, args: Any = None) -> Any:
    return rows(conn, sql, args)[0][0]


def replica_ports(topology: MariaDBTopology) -> set[int]:
    return {r.port for r in topology.replicas}


def test_writes_go_to_the_primary_and_reads_to_replicas(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    conn = connect(proxy, mariadb_database)
    try:
        rows(conn, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        rows(conn, "INSERT INTO t VALUES (1, 10)")
        # The read right after the write is served by a replica that has the row.
        assert rows(conn, "SELECT v, @@port FROM t WHERE id = 1")[0][0] == 10
        time.sleep(0.3)  # the monitor (50 ms polls) learns that both replicas caught up
        level_replicas(proxy)
        seen = {one(conn, "SELECT @@port") for _ in range(6)}
        assert seen <= replica_ports(mariadb_topology)
        assert len(seen) == 2, "equally good replicas take turns"
        # A write through the proxy really happened on the primary.
        primary = mariadb_topology.primary.query(f"SELECT v FROM {mariadb_database.name}.t")
        assert primary == [{"v": 10}]
    finally:
        conn.close()


def test_read_your_writes_1000_iterations_under_lag(
    make_proxy: Callable[..., ProxyThread],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    """Every read sees the session's previous write, while one replica applies everything
    a second late and the other is paused for a stretch.  Reads still mostly go to replicas."""
    proxy = make_proxy(wait_timeout=0.3)
    conn = connect(proxy, mariadb_database)
    violations = []
    ports: dict[int, int] = {}
    try:
        rows(conn, "CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL)")
        rows(conn, "INSERT INTO kv VALUES (1, 0)")
        mariadb_topology.delay(0, 1)
        for i in range(1, 1001):
            if i == 400:
                mariadb_topology.pause(1)
            if i == 420:
                mariadb_topology.resume(1)
            rows(conn, "UPDATE kv SET v = %s WHERE k = 1", (i,))
            value, port = rows(conn, "SELECT v, @@port FROM kv WHERE k = 1")[0]
            ports[port] = ports.get(port, 0) + 1
            if value != i:
                violations.append((i, value, port))
    finally:
        conn.close()
    assert violations == []
    on_replicas = sum(n for p, n in ports.items() if p in replica_ports(mariadb_topology))
    assert on_replicas >= 800, ports
    metrics = proxy.run(lambda: dict(proxy.server.metrics.waits))
    assert metrics.get("reached", 0) > 0
    # Waits that timed out had their pipelined read discarded and served elsewhere.
    assert metrics.get("timed_out", 0) > 0
    assert proxy.run(lambda: proxy.server.metrics.pipelined_waits) > 0


def test_session_state_follows_the_session_to_replicas(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    conn = connect(proxy)
    try:
        conn.select_db(mariadb_database.name)  # COM_INIT_DB
        rows(conn, "SET NAMES latin1")
        rows(conn, "SET SESSION sql_mode = 'ANSI_QUOTES'")
        rows(conn, "SET time_zone = '+03:00'")
        for _ in range(4):  # both replicas, each brought to the session's state
            db, charset, mode, zone, port = rows(
                conn,
                "SELECT DATABASE(), @@character_set_client, @@sql_mode, @@time_zone, @@port",
            )[0]
            assert port in replica_ports(mariadb_topology)
            assert (db, charset, mode, zone) == (
                mariadb_database.name,
                "latin1",
                "ANSI_QUOTES",
                "+03:00",
            )
        rows(conn, "USE mysql")
        assert {one(conn, "SELECT DATABASE()") for _ in range(4)} == {"mysql"}
    finally:
        conn.close()


@pytest.mark.parametrize(
    "case",
    [
        ("user_variable", "SET @x = 41", "@x + 1"),
        ("temporary_table", "CREATE TEMPORARY TABLE tmp (a INT)", "(SELECT COUNT(*) FROM tmp)"),
        ("get_lock", "SELECT GET_LOCK('proxy-test', 1)", "IS_USED_LOCK('proxy-test') > 0"),
    ],
)
def test_session_state_a_replica_cannot_have_pins_to_the_primary(
    proxy: ProxyThread,
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
    case: tuple[str, str, str],
) -> None:
    pin, statement, check = case
    conn = connect(proxy, mariadb_database)
    try:
        assert one(conn, "SELECT @@port") in replica_ports(mariadb_topology)
        rows(conn, statement)
        value, port = rows(conn, f"SELECT {check}, @@port")[0]
        assert value in (42, 0, 1)
        assert port == mariadb_topology.primary.port
        # Statements that do not touch the state go to the primary too, because of the pin.
        for _ in range(3):
            assert one(conn, "SELECT @@port") == mariadb_topology.primary.port
        status = proxy.run(lambda: [s.status() for s in proxy.server.sessions.values()])
        assert pin in status[0]["pins"]  # type: ignore[operator]
        assert str(status[0]["last_reason"]).startswith("pinned(")
    finally:
        conn.close()


def test_lock_tables_pins_until_unlock(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    conn = connect(proxy, mariadb_database)
    try:
        rows(conn, "CREATE TABLE t (a INT)")
        rows(conn, "LOCK TABLES t READ")
        assert one(conn, "SELECT @@port FROM (SELECT 1) x") == mariadb_topology.primary.port
        rows(conn, "UNLOCK TABLES")
        assert one(conn, "SELECT @@port") in replica_ports(mariadb_topology)
    finally:
        conn.close()


def test_multi_statements_go_to_the_primary(
    proxy: ProxyThread, mariadb_topology: MariaDBTopology
) -> None:
    conn = connect(proxy, client_flag=CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@port; SELECT @@port + 0")
            first = cur.fetchall()
            assert cur.nextset()
            second = cur.fetchall()
        assert first[0][0] == second[0][0] == mariadb_topology.primary.port
    finally:
        conn.close()


def test_transactions_stay_on_one_backend(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    conn = connect(proxy, mariadb_database)
    primary = mariadb_topology.primary.port
    try:
        rows(conn, "CREATE TABLE t (a INT)")
        rows(conn, "BEGIN")
        rows(conn, "INSERT INTO t VALUES (1)")
        assert rows(conn, "SELECT COUNT(*), @@port FROM t")[0] == (1, primary)
        rows(conn, "COMMIT")
        # A read-only transaction runs on one replica, start to end.
        rows(conn, "START TRANSACTION READ ONLY")
        ports = {one(conn, "SELECT @@port") for _ in range(4)}
        assert len(ports) == 1
        assert ports <= replica_ports(mariadb_topology)
        with pytest.raises(pymysql.err.OperationalError) as info:
            rows(conn, "INSERT INTO t VALUES (2)")
        assert info.value.args[0] == 1792
        rows(conn, "COMMIT")
        # Autocommit off: everything is one transaction on the primary.
        conn.autocommit(False)
        assert one(conn, "SELECT @@port") == primary
        conn.rollback()
    finally:
        conn.close()


def test_intercepted_level_and_token_carry_causality(
    make_proxy: Callable[..., ProxyThread],
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
) -> None:
    proxy = make_proxy(wait_timeout=0.3)
    writer = connect(proxy, mariadb_database)
    reader = connect(proxy, mariadb_database)
    try:
        rows(writer, "CREATE TABLE t (a INT)")
        mariadb_topology.wait_for_all()  # the reader has no token yet: let the table arrive
        assert one(reader, "SELECT COUNT(*) FROM t") == 0
        for i in range(2):
            mariadb_topology.pause(i)
        rows(writer, "INSERT INTO t VALUES (1)")
        token = one(writer, "SELECT @@consistent_token")
        assert token.startswith("mariadb:0-")
        # Without the token the reader may read a stale replica...
        assert rows(reader, "SELECT COUNT(*), @@port FROM t")[0][0] == 0
        # ...with it, the read waits (replicas are paused: it falls back to the primary).
        rows(reader, "SET @@consistent_token = %s", (token,))
        assert rows(reader, "SELECT COUNT(*), @@port FROM t")[0] == (
            1,
            mariadb_topology.primary.port,
        )
        assert one(reader, "SELECT @@consistent_token") == token
        rows(reader, "SET @@consistent_level = 'eventual'")
        assert one(reader, "SELECT @@session.consistent_level") == "eventual"
        assert one(reader, "SELECT COUNT(*) FROM t") == 0  # eventual: stale is allowed
        rows(reader, "SET @@consistent_level = DEFAULT")
        assert one(reader, "SELECT @@consistent_level") == "read_own_writes"
        with pytest.raises(pymysql.err.OperationalError) as bad_level:
            rows(reader, "SET @@consistent_level = 'strong'")
        assert bad_level.value.args[0] == 1231
        with pytest.raises(pymysql.err.MySQLError) as bad_token:
            rows(reader, "SET @@consistent_token = 'nonsense'")
        assert bad_token.value.args[0] == 1772
    finally:
        writer.close()
        reader.close()


def test_routing_hints_in_comments(proxy: ProxyThread, mariadb_topology: MariaDBTopology) -> None:
    conn = connect(proxy)
    try:
        assert one(conn, "/* consistent: primary */ SELECT @@port") == mariadb_topology.primary.port
        assert one(conn, "SELECT @@port") in replica_ports(mariadb_topology)
    finally:
        conn.close()


def test_monitor_polling_lets_reads_skip_the_wait(
    make_proxy: Callable[..., ProxyThread], mariadb_database: CleanDatabase
) -> None:
    proxy = make_proxy(pipeline_waits=False)
    conn = connect(proxy, mariadb_database)
    try:
        rows(conn, "CREATE TABLE t (a INT)")
        rows(conn, "INSERT INTO t VALUES (1)")
        time.sleep(0.3)  # several monitor polls (50 ms) see both replicas catch up
        before = proxy.run(lambda: sum(proxy.server.metrics.waits.values()))
        for _ in range(4):
            assert one(conn, "SELECT COUNT(*) FROM t") == 1
        after = proxy.run(lambda: sum(proxy.server.metrics.waits.values()))
        assert after == before
        reasons = proxy.run(lambda: dict(proxy.server.metrics.routed))
        assert any(reason == "known_covered" for (_t, reason) in reasons)
    finally:
        conn.close()


def test_kill_uses_the_proxys_connection_ids(proxy: ProxyThread) -> None:
    sleeper = connect(proxy)
    killer = connect(proxy)
    victim = connect(proxy)
    try:
        errors: list[Exception] = []

        def sleep() -> None:
            try:
                rows(sleeper, "SELECT SLEEP(20)")
            except pymysql.err.MySQLError as e:
                errors.append(e)

        started = time.monotonic()
        thread = threading.Thread(target=sleep)
        thread.start()
        time.sleep(0.5)
        rows(killer, f"KILL QUERY {sleeper.thread_id()}")  # the id the proxy gave the client
        thread.join(10)
        assert time.monotonic() - started < 5
        assert one(sleeper, "SELECT 7") == 7  # KILL QUERY leaves the session open
        rows(killer, f"KILL {victim.thread_id()}")
        with pytest.raises(pymysql.err.MySQLError):
            rows(victim, "SELECT 1")
        with pytest.raises(pymysql.err.OperationalError) as info:
            rows(killer, "KILL 999999")
        assert info.value.args[0] == 1094
    finally:
        for c in (sleeper, killer, victim):
            c.close()


def test_a_users_default_level_applies_to_its_sessions(
    make_proxy: Callable[..., ProxyThread],
) -> None:
    users = {
        "app": {"password": "app-secret", "level": "eventual"},
        "sha": {"password": "sha-secret", "plugin": "caching_sha2_password"},
    }
    proxy = make_proxy(users=users, level="read_latest")
    relaxed, strict = connect(proxy), connect(proxy, user="sha")
    try:
        assert one(relaxed, "SELECT @@consistent_level") == "eventual"
        assert one(strict, "SELECT @@consistent_level") == "read_latest"  # the proxy's default
    finally:
        relaxed.close()
        strict.close()
