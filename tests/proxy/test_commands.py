"""Prepared statements and the other commands through the proxy, with a raw client that checks
every sequence id: EXECUTE routed to replicas (prepared there on first use, parameter types
re-sent when a server lacks them), both DEPRECATE_EOF and SESSION_TRACK settings of clients,
COM_FIELD_LIST, COM_PING, COM_INIT_DB, COM_SET_OPTION, COM_STATISTICS, COM_RESET_CONNECTION,
COM_CHANGE_USER."""

from __future__ import annotations

import contextlib
import time

import pytest

from consistent.protocol import (
    Capability,
    ChangeUser,
    SystemVariable,
    build_change_user,
    parse_ok,
    scramble_native_password,
)
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.testing import ProxyThread

from .conftest import level_replicas
from .rawclient import BASE_CAPS, RawClient, ServerError

DEP = Capability.DEPRECATE_EOF
TRACK = Capability.SESSION_TRACK


def client(proxy: ProxyThread, db: CleanDatabase | None = None, caps: int = BASE_CAPS) -> RawClient:
    return RawClient(proxy.port, "app", "app-secret", caps=caps, database=db.name if db else "")


@pytest.mark.parametrize("caps", [BASE_CAPS, BASE_CAPS | DEP, BASE_CAPS | DEP | TRACK])
def test_prepared_statements_run_on_replicas_and_see_own_writes(
    proxy: ProxyThread,
    mariadb_database: CleanDatabase,
    mariadb_topology: MariaDBTopology,
    caps: int,
) -> None:
    c = client(proxy, mariadb_database, caps)
    replicas = {r.port for r in mariadb_topology.replicas}
    try:
        c.query("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
        insert, params, _cols = c.prepare("INSERT INTO t VALUES (?, ?)")
        select, sparams, columns = c.prepare("SELECT v, @@port FROM t WHERE id = ?")
        assert (params, sparams, columns) == (2, 1, 2)
        for i in range(1, 9):
            c.execute(insert, [i, i * 10])
            # Each read right after its write waits (or knows) for that write.
            assert c.execute(select, [i])[0].rows[0][0] == i * 10
        time.sleep(0.3)  # the monitor learns both replicas caught up
        level_replicas(proxy)  # and neither made a read wait lately: they take turns
        seen = set()
        for i in range(1, 9):
            # Types are bound once more, then reused ("new_params_bound" 0), also on the
            # replica that did not receive the binding execute.
            result = c.execute(select, [i], bind=i == 1)
            value, port = result[0].rows[0]
            assert value == i * 10
            seen.add(port)
        assert seen <= replicas
        assert len(seen) == 2
        c.close_statement(select)
        with pytest.raises(ServerError) as info:
            c.execute(select, [1])
        assert info.value.errno == 1243
        assert c.scalar("SELECT 7") == b"7"  # the session goes on after the error
    finally:
        c.close()


def test_a_client_with_session_track_gets_its_session_state(
    proxy: ProxyThread, mariadb_database: CleanDatabase
) -> None:
    tracked = client(proxy, mariadb_database, BASE_CAPS | DEP | TRACK)
    plain = client(proxy, mariadb_database, BASE_CAPS)
    try:
        tracked.query("CREATE TABLE t (a INT)")
        ok = tracked.query("INSERT INTO t VALUES (1)")[0]
        names = [b.name for b in ok.session_state if isinstance(b, SystemVariable)]
        assert "last_gtid" in names
        ok = plain.query("INSERT INTO t VALUES (2)")[0]
        assert ok.session_state == ()
        assert ok.affected == 1
        assert not ok.status & 0x4000
    finally:
        tracked.close()
        plain.close()


@pytest.mark.parametrize("caps", [BASE_CAPS, BASE_CAPS | DEP])
def test_field_list_ping_init_db_set_option_statistics(
    proxy: ProxyThread, mariadb_database: CleanDatabase, caps: int
) -> None:
    c = client(proxy, mariadb_database, caps)
    try:
        c.query("CREATE TABLE t (a INT, b TEXT)")
        c.command(b"\x04t\x00")  # COM_FIELD_LIST
        names = []
        while True:
            packet = c.expect()
            if packet[:1] == b"\xfe":
                break
            names.append(packet)
        assert len(names) == 2
        c.command(b"\x0e")  # COM_PING
        assert c.expect()[:1] == b"\x00"
        c.command(b"\x02mysql")  # COM_INIT_DB
        assert c.expect()[:1] == b"\x00"
        assert c.scalar("SELECT DATABASE()") == b"mysql"
        c.command(b"\x1b\x00\x00")  # COM_SET_OPTION multi-statements on: EOF or OK
        answer = c.expect()
        assert answer[:1] in (b"\xfe", b"\x00")
        assert len(answer) < 12
        c.command(b"\x09")  # COM_STATISTICS: a plain string
        assert c.expect().startswith(b"Uptime")
        c.command(b"\x63")  # no such command
        with pytest.raises(ServerError) as info:
            c.result()
        assert info.value.errno == 1047
    finally:
        c.close()


def test_reset_connection_forgets_the_session(
    proxy: ProxyThread, mariadb_topology: MariaDBTopology
) -> None:
    c = client(proxy)
    try:
        c.query("SET @x = 1")
        assert int(c.scalar("SELECT @@port")) == mariadb_topology.primary.port  # pinned
        c.query("SET @@consistent_level = 'eventual'")
        c.command(b"\x1f")  # COM_RESET_CONNECTION
        assert c.expect()[:1] == b"\x00"
        assert c.scalar("SELECT @x") is None
        assert c.scalar("SELECT @@consistent_level") == b"read_own_writes"
        assert int(c.scalar("SELECT @@port")) != mariadb_topology.primary.port  # unpinned
    finally:
        c.close()


def test_change_user_reauthenticates_and_resets(proxy: ProxyThread) -> None:
    c = client(proxy)
    try:
        c.query("SET @x = 1")
        request = ChangeUser(
            username="app",
            auth_response=scramble_native_password(b"app-secret", c.nonce),
            charset=45,
            auth_plugin_name="mysql_native_password",
        )
        c.command(build_change_user(request, c.caps))
        reply = c.expect()
        assert reply[:1] == b"\x00", reply
        parse_ok(reply, c.caps)
        assert c.scalar("SELECT @x") is None
        bad = ChangeUser(
            username="app",
            auth_response=b"\x01" * 20,
            charset=45,
            auth_plugin_name="mysql_native_password",
        )
        c.command(build_change_user(bad, c.caps))
        assert c.expect()[:1] == b"\xff"
    finally:
        c.sock.close()


def test_a_statement_a_replica_cannot_prepare_runs_on_the_primary(
    proxy: ProxyThread, mariadb_database: CleanDatabase, mariadb_topology: MariaDBTopology
) -> None:
    """The replica answers the prepare with an error (its table is missing there): the policy
    sends the statement to the primary (``on_prepare_failed``), and the session goes on."""
    primary = mariadb_topology.primary
    with contextlib.closing(primary.admin()) as admin, admin.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")  # the table stays on the primary
        cur.execute(f"CREATE TABLE `{mariadb_database.name}`.only_here (id INT)")
        cur.execute(f"INSERT INTO `{mariadb_database.name}`.only_here VALUES (7)")
    c = client(proxy, mariadb_database)
    replicas = {r.port for r in mariadb_topology.replicas}
    try:
        select, _params, _columns = c.prepare("SELECT id, @@port FROM only_here")
        for _ in range(3):
            [row] = c.execute(select, [])[0].rows
            assert row == (7, primary.port)
        other, _params, _columns = c.prepare("SELECT @@port")
        assert c.execute(other, [])[0].rows[0][0] in replicas  # not pinned
    finally:
        c.close()
