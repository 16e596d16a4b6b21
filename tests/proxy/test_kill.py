"""Connection ids and KILL through the proxy, on real MariaDB with PyMySQL.

The ids a client learns (the handshake, ``SELECT CONNECTION_ID()``, ``SHOW PROCESSLIST``, and
a server thread id from ``CONNECTION_ID()`` inside another statement) are the ids ``KILL``
takes; ``KILL`` acts only on the same proxy user's sessions (else 1095, as MariaDB answers);
``KILL QUERY`` interrupts one session's statement, not another user's that shares the backend
account; and no form of ``KILL`` reaches a server as written.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology
from proxy.testing import ProxyThread
from proxy.threads import ID_FLOOR

from .conftest import connect
from .rawclient import RawClient, ServerError

PATIENCE = 30.0  # seconds a background statement may take to show up as running


def one(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def error_of(conn: Any, sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        one(conn, sql)
    return info.value.args[0], info.value.args[1]


@pytest.fixture
def sessions(proxy: ProxyThread) -> Iterator[Callable[..., Any]]:
    """Open PyMySQL connections through the proxy; all closed at the end."""
    opened: list[Any] = []

    def open_one(user: str = "app", **kwargs: Any) -> Any:
        conn = connect(proxy, user=user, **kwargs)
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        with contextlib.suppress(pymysql.err.Error):
            conn.close()


def test_ids_are_random_and_every_way_of_learning_one_agrees(
    proxy: ProxyThread, sessions: Callable[..., Any]
) -> None:
    a, b, c = sessions(), sessions(), sessions()
    other = sessions(user="sha")
    ids = [conn.thread_id() for conn in (a, b, c, other)]
    assert len(set(ids)) == 4
    assert all(ID_FLOOR <= i < 2 * ID_FLOOR for i in ids)
    # Not handed out in sequence (three in a row by chance: about one in 10**17).
    assert sorted(ids[:3]) != list(range(min(ids[:3]), min(ids[:3]) + 3))
    with a.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        assert cur.fetchone() == (ids[0],)
        assert cur.description[0][0] == "CONNECTION_ID()"
        cur.execute("select connection_id() AS me;")
        assert cur.fetchone() == (ids[0],)
        assert cur.description[0][0] == "me"
    listed = rows(a, "SHOW PROCESSLIST")
    assert sorted(row[0] for row in listed) == sorted(ids[:3])  # the proxy user's sessions only
    mine = next(row for row in listed if row[0] == ids[0])
    assert mine[1] == "app"
    assert mine[4] == "Query"
    assert mine[7] == "SHOW PROCESSLIST"
    assert {row[4] for row in listed if row[0] != ids[0]} == {"Sleep"}
    assert mine[2].startswith("127.0.0.1:")
    full = rows(other, "SHOW FULL PROCESSLIST")
    assert [row[0] for row in full] == [ids[3]]
    assert len(full[0]) == 9  # MariaDB's columns, Progress included


def test_kill_of_another_users_session_is_refused(
    proxy: ProxyThread, sessions: Callable[..., Any]
) -> None:
    mine, theirs = sessions(), sessions(user="sha")
    victim = theirs.thread_id()
    for sql in (f"KILL {victim}", f"KILL CONNECTION {victim}", f"KILL QUERY {victim}"):
        assert error_of(mine, sql) == (1095, f"You are not owner of thread {victim}")
    with pytest.raises(pymysql.err.OperationalError) as info:
        mine.kill(victim)  # COM_PROCESS_KILL
    assert info.value.args[0] == 1095
    assert one(theirs, "SELECT 1") == (1,)
    assert error_of(mine, "KILL 12345") == (1094, "Unknown thread id: 12345")


def test_kill_of_the_same_users_session(proxy: ProxyThread, sessions: Callable[..., Any]) -> None:
    killer, victim, by_command = sessions(), sessions(), sessions()
    one(victim, "SELECT 1")
    assert one(killer, f"KILL {victim.thread_id()}") is None
    with pytest.raises(pymysql.err.OperationalError):
        one(victim, "SELECT 1")
    killer.kill(by_command.thread_id())  # COM_PROCESS_KILL
    with pytest.raises(pymysql.err.OperationalError):
        one(by_command, "SELECT 1")
    assert one(killer, "SELECT 1") == (1,)


def test_kill_of_itself(proxy: ProxyThread, sessions: Callable[..., Any]) -> None:
    conn = sessions()
    me = conn.thread_id()
    assert error_of(conn, f"KILL QUERY {me}") == (1317, "Query execution was interrupted")
    assert one(conn, "SELECT 2") == (2,)
    assert error_of(conn, f"KILL {me}") == (1927, "Connection was killed")
    with pytest.raises(pymysql.err.OperationalError):
        one(conn, "SELECT 3")


def test_server_thread_ids_map_back_to_their_session(
    proxy: ProxyThread, sessions: Callable[..., Any], mariadb_topology: MariaDBTopology
) -> None:
    killer, victim, stranger = sessions(), sessions(), sessions(user="sha")
    # CONNECTION_ID() inside another statement runs on the primary: a server thread id.
    server_id = one(victim, "SELECT CONNECTION_ID() + 0")[0]
    stranger_server_id = one(stranger, "SELECT CONNECTION_ID(), 1")[0]
    assert server_id < ID_FLOOR
    assert error_of(killer, f"KILL {stranger_server_id}") == (
        1095,
        f"You are not owner of thread {stranger_server_id}",
    )
    # A server thread that is no session's (a direct connection) is not the proxy's to kill.
    direct = mariadb_topology.connect()
    try:
        direct_id = direct.thread_id()
        assert error_of(killer, f"KILL {direct_id}") == (1094, f"Unknown thread id: {direct_id}")
        assert one(direct, "SELECT 1") == (1,)
    finally:
        direct.close()
    assert one(killer, f"KILL {server_id}") is None
    with pytest.raises(pymysql.err.OperationalError):
        one(victim, "SELECT 1")
    assert one(stranger, "SELECT 1") == (1,)


def _running(proxy: ProxyThread, session_id: int) -> None:
    """Wait until the session has a statement running on a backend."""

    def busy() -> bool:
        session = proxy.server.sessions.get(session_id)
        return session is not None and bool(session.running_threads())

    deadline = time.monotonic() + PATIENCE
    while not proxy.run(busy):
        assert time.monotonic() < deadline, f"session {session_id} never started its statement"
        time.sleep(0.02)


def _in_background(conn: Any, sql: str) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(one(conn, sql))
        except pymysql.err.MySQLError as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_kill_query_interrupts_that_session_only(
    proxy: ProxyThread, sessions: Callable[..., Any]
) -> None:
    # "app" and "sha" are two proxy users on the same backend account.
    killer, victim, bystander = sessions(), sessions(), sessions(user="sha")
    victim_thread, victim_outcome = _in_background(victim, "SELECT SLEEP(60)")
    bystander_thread, bystander_outcome = _in_background(bystander, "SELECT SLEEP(2)")
    _running(proxy, victim.thread_id())
    _running(proxy, bystander.thread_id())
    assert one(killer, f"KILL QUERY {victim.thread_id()}") is None
    victim_thread.join(PATIENCE)
    bystander_thread.join(PATIENCE)
    # MariaDB ends an interrupted SLEEP() with 1 (or the statement with 1317).
    interrupted = victim_outcome[0]
    assert interrupted == (1,) or getattr(interrupted, "args", (0,))[0] == 1317
    assert bystander_outcome == [(0,)]  # slept its full time
    assert one(victim, "SELECT 5") == (5,)  # KILL QUERY leaves the connection


def test_kill_connection_stops_the_backend_statement(
    proxy: ProxyThread, sessions: Callable[..., Any], mariadb_topology: MariaDBTopology
) -> None:
    killer, victim = sessions(), sessions()
    server_id = one(victim, "SELECT CONNECTION_ID() + 0")[0]
    victim_thread, _outcome = _in_background(victim, "SELECT SLEEP(60)")
    _running(proxy, victim.thread_id())
    assert one(killer, f"KILL {victim.thread_id()}") is None
    victim_thread.join(PATIENCE)
    assert not victim_thread.is_alive()
    # The statement is not left sleeping on the server that ran it.  (With multiplexing the
    # session's idle connections went back to the pool: server_id may live on, idle.)
    deadline = time.monotonic() + PATIENCE
    servers = [mariadb_topology.primary, *mariadb_topology.replicas]

    def sleeping() -> bool:
        return any(
            "SLEEP(60)" in str(r["Info"] or "")
            for s in servers
            for r in s.query("SHOW PROCESSLIST")
        )

    while sleeping():
        assert time.monotonic() < deadline, "the backend statement kept running"
        time.sleep(0.05)
    assert server_id > 0


def test_no_kill_reaches_a_server_as_written(
    proxy: ProxyThread, sessions: Callable[..., Any], mariadb_topology: MariaDBTopology
) -> None:
    conn, peer, stranger = sessions(), sessions(), sessions(user="sha")
    multi = sessions(client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    direct = mariadb_topology.connect()
    try:
        direct_id = direct.thread_id()
        for sql in (f"KILL QUERY ID {direct_id}", f"KILL {direct_id} + 0", "KILL (SELECT 1)"):
            errno, _message = error_of(conn, sql)
            assert errno == 1235, sql
        errno, _message = error_of(multi, f"SELECT 1; KILL {direct_id}")
        assert errno == 1235
        # KILL USER of another proxy user affects nothing (as MariaDB answers a user
        # without privileges); sent to the server it would end every backend-account thread.
        assert one(conn, "KILL USER 'sha'") is None
        assert one(stranger, "SELECT 1") == (1,)
        assert one(direct, "SELECT 1") == (1,)
        # Of one's own user: the caller's other sessions.
        assert one(conn, "KILL USER CURRENT_USER") is None
        with pytest.raises(pymysql.err.OperationalError):
            one(peer, "SELECT 1")
        assert one(conn, "SELECT 1") == (1,)
        assert one(stranger, "SELECT 1") == (1,)
        assert one(direct, "SELECT 1") == (1,)
    finally:
        direct.close()
    raw = RawClient(proxy.port, "app", "app-secret")
    try:
        with pytest.raises(ServerError) as info:
            raw.prepare(f"KILL {direct_id}")
        assert info.value.errno == 1295
        assert raw.scalar("SELECT 7") in (b"7", 7)
    finally:
        raw.close()
