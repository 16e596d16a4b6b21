"""Multiplexing: many client sessions over a few shared backend connections (proxy/pool.py).

Every scenario runs against the emulator and against real MariaDB.  The pools are made tiny
(one or two connections per server) so that sessions really do take turns on the same
connections; each client must still see only its own state, bound sessions (transactions,
temporary tables, user variables) never share a connection, and an exhausted pool answers 1040.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from consistent.emulator.replication.threaded import TopologyThread
from consistent.testing.mariadb import MariaDBTopology
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import USERS, topology_config
from .rawclient import RawClient

SQL_MODES = ("STRICT_TRANS_TABLES", "ANSI_QUOTES", "NO_ZERO_DATE", "")
TIME_ZONES = ("+00:00", "+01:00", "-05:30", "+09:00")
CHARSETS = ("utf8mb4", "latin1")
SCHEMAS = ("mx_a", "mx_b", "mx_c")


def _emulator_config(topology: TopologyThread, pool: dict[str, Any]) -> dict[str, Any]:
    params = topology.connection_params()
    return {
        "listen": "127.0.0.1:0",
        "wait_timeout": 2.0,
        "backends": {
            "primary": f"127.0.0.1:{topology.primary.port}",
            "replicas": [f"127.0.0.1:{r.port}" for r in topology.replicas],
            "user": params.user,
            "password": params.password,
            "monitor_interval_ms": 50,
        },
        "users": USERS,
        "pool": pool,
    }


@pytest.fixture(params=["emulator", "mariadb"])
def make_pooled(request: pytest.FixtureRequest) -> Iterator[Callable[..., ProxyThread]]:
    """Start a proxy whose ``[pool]`` table is the keyword arguments, in front of the
    emulator or of MariaDB."""
    started: list[ProxyThread] = []
    if request.param == "emulator":
        topology: TopologyThread = request.getfixturevalue("emulator_topology")

        def config(pool: dict[str, Any]) -> dict[str, Any]:
            return _emulator_config(topology, pool)
    else:
        mariadb: MariaDBTopology = request.getfixturevalue("mariadb_topology")

        def config(pool: dict[str, Any]) -> dict[str, Any]:
            return topology_config(mariadb, pool=pool)

    def make(**pool: Any) -> ProxyThread:
        proxy = ProxyThread(parse(config(pool)))
        proxy.start()
        started.append(proxy)
        with client(proxy) as setup:
            for schema in SCHEMAS:
                run(setup, f"CREATE DATABASE IF NOT EXISTS {schema}")
            run(setup, "CREATE TABLE IF NOT EXISTS mx_a.t (k INT PRIMARY KEY, v INT)")
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@contextlib.contextmanager
def client(proxy: ProxyThread, **kwargs: Any) -> Iterator[Any]:
    kwargs.setdefault("autocommit", True)
    conn = pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user="app",
        password="app-secret",
        connect_timeout=5,
        read_timeout=30,
        **kwargs,
    )
    try:
        yield conn
    finally:
        conn.close()


def run(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def status(proxy: ProxyThread) -> dict[str, Any]:
    return proxy.run(proxy.server.status)


def pools(proxy: ProxyThread) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in status(proxy)["pools"]}


def primary_pool(proxy: ProxyThread) -> dict[str, Any]:
    return next(p for name, p in pools(proxy).items() if name.startswith("primary "))


# ----------------------------------------------------------------- session state follows


class Client:
    """A client and the state it set, as it expects to see it."""

    def __init__(self, conn: Any, charset: str, schema: str) -> None:
        self.conn = conn
        self.charset = charset
        self.schema = schema
        self.sql_mode: str | None = None
        self.time_zone: str | None = None

    def check(self) -> None:
        # FOR UPDATE keeps it on the primary: the state must follow to its pooled connection;
        # a plain read checks the replicas' pools too.
        for suffix in ("", " FOR UPDATE"):
            db, mode, tz, charset = run(
                self.conn,
                "SELECT DATABASE(), @@session.sql_mode, @@session.time_zone, "
                f"@@session.character_set_client FROM DUAL{suffix}",
            )[0]
            assert db == self.schema
            assert charset == self.charset
            if self.sql_mode is not None:
                assert mode == self.sql_mode
            if self.time_zone is not None:
                assert tz == self.time_zone


ACTIONS = st.one_of(
    st.tuples(st.just("check"), st.just("")),
    st.tuples(st.just("sql_mode"), st.sampled_from(SQL_MODES)),
    st.tuples(st.just("time_zone"), st.sampled_from(TIME_ZONES)),
    st.tuples(st.just("use"), st.sampled_from(SCHEMAS)),
)


@pytest.mark.parametrize("size", [1, 2])
def test_each_client_sees_its_own_state_over_a_tiny_pool(
    make_pooled: Callable[..., ProxyThread], size: int
) -> None:
    proxy = make_pooled(max_connections=size, wait_timeout=10.0)
    clients = 4

    @settings(
        max_examples=6,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # a shrink replays clients: too slow here
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(st.tuples(st.integers(0, clients - 1), ACTIONS), min_size=5, max_size=30))
    def scenario(steps: list[tuple[int, tuple[str, str]]]) -> None:
        with contextlib.ExitStack() as stack:
            states = []
            for i in range(clients):
                charset = CHARSETS[i % len(CHARSETS)]
                schema = SCHEMAS[i % len(SCHEMAS)]
                conn = stack.enter_context(client(proxy, charset=charset, database=schema))
                states.append(Client(conn, charset, schema))
            for index, (action, value) in steps:
                me = states[index]
                if action == "sql_mode":
                    run(me.conn, f"SET SESSION sql_mode = '{value}'")
                    me.sql_mode = value
                elif action == "time_zone":
                    run(me.conn, f"SET time_zone = '{value}'")
                    me.time_zone = value
                elif action == "use":
                    run(me.conn, f"USE {value}")
                    me.schema = value
                me.check()
            for me in states:
                me.check()

    scenario()
    pool = primary_pool(proxy)
    assert pool["size"] <= size
    assert pool["borrows"] > pool["opened"]  # connections were shared


# ----------------------------------------------------------------- bound sessions


BOUND_KINDS = ["transaction", "autocommit_off", "temporary_table", "user_variable"]
#: Rows of the bound clients' transactions: client i inserts keys KEYS + 1000 * i + n.
KEYS = 100_000


def _bind(conn: Any, kind: str) -> None:
    if kind == "transaction":
        run(conn, "START TRANSACTION")
    elif kind == "autocommit_off":
        run(conn, "SET autocommit = 0")
    elif kind == "temporary_table":
        run(conn, "CREATE TEMPORARY TABLE mx_a.mine (x INT)")
    else:
        run(conn, "SET @mine = 0")


def _bound_step(conn: Any, kind: str, i: int, count: int) -> None:
    """The bound client ``i``'s ``count``-th step: it sees its own state."""
    if kind == "user_variable":
        run(conn, "SET @mine = @mine + 1")
        assert run(conn, "SELECT @mine")[0][0] == count
    elif kind == "temporary_table":
        run(conn, "INSERT INTO mx_a.mine VALUES (1)")
        assert run(conn, "SELECT COUNT(*) FROM mx_a.mine")[0][0] == count
    else:
        low = KEYS + 1000 * i
        run(conn, "INSERT INTO mx_a.t VALUES (%s, 0)", (low + count,))
        mine = "SELECT COUNT(*) FROM mx_a.t WHERE k BETWEEN %s AND %s"
        assert run(conn, mine, (low, low + 999))[0][0] == count


def _unbound_step(conn: Any, kind: str) -> None:
    """An unbound client sees none of the bound clients' state."""
    if kind == "user_variable":
        assert run(conn, "SELECT @mine")[0][0] is None
    elif kind == "temporary_table":
        with pytest.raises(pymysql.err.ProgrammingError):
            run(conn, "SELECT COUNT(*) FROM mx_a.mine")
    else:  # the bound clients' rows are not committed
        assert run(conn, "SELECT COUNT(*) FROM mx_a.t WHERE k >= %s", (KEYS,))[0][0] == 0


@pytest.mark.parametrize("bound_kind", BOUND_KINDS)
def test_bound_sessions_never_share_a_connection(
    make_pooled: Callable[..., ProxyThread], bound_kind: str, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["make_pooled"]
    if backend == "emulator" and bound_kind in ("transaction", "autocommit_off"):
        pytest.skip("the emulator serialises writing transactions: the clients would block")
    bound_clients = 2
    proxy = make_pooled(max_connections=bound_clients + 1, wait_timeout=10.0)

    @settings(
        max_examples=5,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # a shrink replays clients: too slow here
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(st.integers(0, bound_clients + 1), min_size=4, max_size=24))
    def scenario(order: list[int]) -> None:
        with contextlib.ExitStack() as stack:
            conns = [stack.enter_context(client(proxy)) for _ in range(bound_clients + 2)]
            counts = [0] * len(conns)
            for conn in conns[:bound_clients]:
                _bind(conn, bound_kind)
            for i in order:
                if i >= bound_clients:  # unbound clients share the remaining connection
                    _unbound_step(conns[i], bound_kind)
                    continue
                counts[i] += 1
                _bound_step(conns[i], bound_kind, i, counts[i])
            sessions = status(proxy)["sessions"]
            bound = [s for s in sessions if s["pin_reasons"]]
            assert len(bound) == bound_clients
            if bound_kind in ("transaction", "autocommit_off"):
                for conn in conns[:bound_clients]:
                    run(conn, "ROLLBACK")

    scenario()


def test_a_transaction_holds_its_connection_and_others_queue_then_get_1040(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    proxy = make_pooled(max_connections=1, wait_timeout=0.3)
    with client(proxy) as holder, client(proxy) as other:
        run(holder, "START TRANSACTION")
        run(holder, "INSERT INTO mx_a.t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = v + 1")
        session = next(s for s in status(proxy)["sessions"] if s["backends"])
        assert session["pin_reasons"] == {"primary": ["transaction"]}
        with pytest.raises(pymysql.err.OperationalError) as caught:
            run(other, "INSERT INTO mx_a.t VALUES (2, 1) ON DUPLICATE KEY UPDATE v = v + 1")
        errno, message = caught.value.args
        assert errno == 1040
        assert "primary" in message
        assert "as " in message
        assert "exhausted" in message
        assert primary_pool(proxy)["exhausted"] == 1
        run(holder, "COMMIT")
        # Released: the other session is served now, and sees the committed row.
        run(other, "INSERT INTO mx_a.t VALUES (2, 1) ON DUPLICATE KEY UPDATE v = v + 1")
        assert run(other, "SELECT COUNT(*) FROM mx_a.t WHERE k IN (1, 2) FOR UPDATE") == [(2,)]
        assert primary_pool(proxy)["size"] == 1


def test_a_reload_applies_the_new_pool_limits_to_the_pools_in_use(
    make_pooled: Callable[..., ProxyThread], caplog: pytest.LogCaptureFixture
) -> None:
    proxy = make_pooled(max_connections=1, wait_timeout=0.3)
    with client(proxy) as holder, client(proxy) as other:
        run(holder, "START TRANSACTION")
        run(holder, "INSERT INTO mx_a.t VALUES (3, 1) ON DUPLICATE KEY UPDATE v = v + 1")
        with pytest.raises(pymysql.err.OperationalError) as caught:
            run(other, "SELECT 1 FROM DUAL FOR UPDATE")
        assert caught.value.args[0] == 1040
        config = proxy.server.config
        raised = dataclasses.replace(
            config, pool=dataclasses.replace(config.pool, max_connections=2)
        )
        with caplog.at_level(logging.INFO, logger="proxy.server"):
            proxy.run(lambda: proxy.server.reload(raised))
        assert "at most 2 connections each" in caplog.text
        # The holder still holds its connection: the other is served by a second one.
        assert run(other, "SELECT 1 FROM DUAL FOR UPDATE") == [(1,)]
        assert primary_pool(proxy)["max_connections"] == 2
        assert primary_pool(proxy)["size"] == 2
        run(holder, "COMMIT")
        lowered = dataclasses.replace(
            config, pool=dataclasses.replace(config.pool, max_connections=1)
        )
        proxy.run(lambda: proxy.server.reload(lowered))
        pool = primary_pool(proxy)
        assert (pool["max_connections"], pool["size"]) == (1, 1)


def test_a_waiting_session_gets_the_connection_when_it_is_given_back(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    proxy = make_pooled(max_connections=1, wait_timeout=20.0)
    with client(proxy) as holder, client(proxy) as other:
        run(holder, "START TRANSACTION")
        run(holder, "SELECT 1 FROM mx_a.t FOR UPDATE")
        done: list[Any] = []

        def write() -> None:
            done.append(run(other, "SELECT COUNT(*) FROM mx_a.t FOR UPDATE"))

        thread = threading.Thread(target=write)
        thread.start()
        for _ in range(200):
            if primary_pool(proxy)["waiting"] == 1:
                break
            threading.Event().wait(0.02)
        assert primary_pool(proxy)["waiting"] == 1
        run(holder, "COMMIT")
        thread.join(20)
        assert done
        assert len(done[0]) == 1
        assert primary_pool(proxy)["waiting"] == 0


# ----------------------------------------------------------------- follow-ups and statements


def test_last_insert_id_reads_the_connection_of_the_insert(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    proxy = make_pooled(max_connections=2)
    with client(proxy) as a, client(proxy) as b:
        run(a, "CREATE TABLE IF NOT EXISTS mx_b.auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        run(a, "INSERT INTO mx_b.auto (v) VALUES (1)")
        first = run(a, "SELECT LAST_INSERT_ID()")[0][0]
        run(b, "INSERT INTO mx_b.auto (v) VALUES (2)")
        second = run(b, "SELECT LAST_INSERT_ID()")[0][0]
        assert second > first
        run(a, "INSERT INTO mx_b.auto (v) VALUES (3)")
        run(b, "INSERT INTO mx_b.auto (v) VALUES (4)")  # b runs between a's insert and read
        third = run(a, "SELECT LAST_INSERT_ID()")[0][0]
        fourth = run(b, "SELECT LAST_INSERT_ID()")[0][0]
        assert run(a, "SELECT v FROM mx_b.auto WHERE id = %s FOR UPDATE", (third,)) == [(3,)]
        assert run(a, "SELECT v FROM mx_b.auto WHERE id = %s FOR UPDATE", (fourth,)) == [(4,)]


def test_last_insert_id_is_the_sessions_own_whichever_connection_it_borrows(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    # One connection for both sessions, in the same state: lent without a reset.
    proxy = make_pooled(max_connections=1)
    with client(proxy) as a, client(proxy) as b:
        run(a, "CREATE TABLE IF NOT EXISTS mx_b.auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        run(a, "INSERT INTO mx_b.auto (v) VALUES (1)")
        mine = a.insert_id()
        assert mine > 0
        # b never inserted: the server would answer 0, not what a left on the connection.
        assert run(b, "SELECT LAST_INSERT_ID()") == [(0,)]
        run(b, "INSERT INTO mx_b.auto (v) VALUES (2), (3)")
        theirs = b.insert_id()
        assert theirs > mine
        run(b, "SELECT 1 FROM DUAL FOR UPDATE")  # another statement in between
        # a's own last insert, though b inserted on the connection since.
        assert run(a, "SELECT LAST_INSERT_ID() AS id") == [(mine,)]
        with a.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("select last_insert_id() id")
            assert cur.fetchall() == [{"id": mine}]
        assert run(b, "SELECT LAST_INSERT_ID()") == [(theirs,)]
        a.ping(reconnect=False)
        a.query("SELECT 1")  # unrelated
        # Anything more than the bare form still reads the server.
        assert run(b, "SELECT LAST_INSERT_ID() + 0 FROM DUAL")[0][0] >= theirs


def test_a_prepared_statement_is_prepared_again_on_another_connection(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    proxy = make_pooled(max_connections=1)
    a = RawClient(proxy.port, "app", "app-secret", database="mx_a")
    try:
        stmt_id, params, _columns = a.prepare(
            "INSERT INTO t VALUES (?, ?) ON DUPLICATE KEY UPDATE v = ?"
        )
        assert params == 3
        resets = primary_pool(proxy)["resets"]
        # Another session in another state takes the one connection: it is reset, and the
        # statement prepared there is gone from the server.
        with client(proxy, database="mx_c") as b:
            run(b, "SET time_zone = '+03:00'")
            run(b, "SELECT 1 FROM DUAL FOR UPDATE")
        assert primary_pool(proxy)["resets"] > resets
        for value in (7, 8):
            assert a.execute(stmt_id, [42, value, value])[0].affected >= 1
        assert a.scalar("SELECT v FROM t WHERE k = 42 FOR UPDATE") in (b"8", 8, "8")
        a.close_statement(stmt_id)
    finally:
        a.close()


@pytest.mark.parametrize("hold", [1.0, 0.0], ids=["held", "not-held"])
def test_sessions_executing_prepared_statements_keep_their_own_connections(
    make_pooled: Callable[..., ProxyThread], hold: float
) -> None:
    proxy = make_pooled(max_connections=8, hold_prepared=hold)
    clients = [RawClient(proxy.port, "app", "app-secret", database="mx_a") for _ in range(3)]
    try:
        ids = [c.prepare("SELECT k FROM t WHERE k < ?")[0] for c in clients]
        for _ in range(12):  # one after the other: each finds the others' connections idle
            for c, stmt_id in zip(clients, ids, strict=True):
                c.execute(stmt_id, [1000])
                c.scalar("SELECT 1 FROM DUAL FOR UPDATE")  # on the primary: no follow-up
        replicas = [p for name, p in pools(proxy).items() if not name.startswith("primary ")]
        again = sum(int(p["prepared_again"]) for p in replicas)
        assert again <= 2 * len(clients) if hold else again > 2 * len(clients)
    finally:
        for c in clients:
            c.close()


def test_many_more_clients_than_connections_are_all_served(
    make_pooled: Callable[..., ProxyThread],
) -> None:
    proxy = make_pooled(max_connections=2, wait_timeout=30.0)
    clients = 24
    errors: list[BaseException] = []
    with contextlib.ExitStack() as stack:
        conns = [stack.enter_context(client(proxy, database="mx_a")) for _ in range(clients)]
        barrier = threading.Barrier(clients)

        def work(i: int, conn: Any) -> None:
            try:
                barrier.wait(10)
                for n in range(5):
                    run(conn, "REPLACE INTO t VALUES (%s, %s)", (1000 + i, n))
                    assert run(conn, "SELECT v FROM t WHERE k = %s", (1000 + i,)) == [(n,)]
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(conns)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert len(status(proxy)["sessions"]) == clients
        for pool in pools(proxy).values():
            assert pool["size"] <= 2


def _backends_of_sessions(proxy: ProxyThread) -> list[list[str]]:
    return [s["backends"] for s in status(proxy)["sessions"]]


def _only_session(proxy: ProxyThread) -> None:
    """Wait until the fixture's setup session has ended."""
    for _ in range(100):
        if len(status(proxy)["sessions"]) <= 1:
            return
        threading.Event().wait(0.02)


@pytest.mark.parametrize("multiplexing", [False, True])
def test_backends_open_lazily_and_only_without_multiplexing_stay_open(
    make_pooled: Callable[..., ProxyThread], multiplexing: bool
) -> None:
    proxy = make_pooled(multiplexing=multiplexing)
    _only_session(proxy)
    raw = RawClient(proxy.port, "app", "app-secret")
    try:
        assert _backends_of_sessions(proxy) == [[]]  # logged in: nothing opened
        assert raw.scalar("SELECT 5 FROM DUAL FOR UPDATE") in (b"5", 5, "5")
        assert _backends_of_sessions(proxy) == [[] if multiplexing else ["primary"]]
    finally:
        raw.close()
    if multiplexing:
        assert primary_pool(proxy)["idle"] >= 1
    else:
        assert status(proxy)["pools"] == []


@pytest.mark.parametrize("opened_by", ["START TRANSACTION", "SET autocommit = 0"])
def test_a_session_that_quits_in_a_transaction_does_not_leave_it_in_the_pool(
    make_pooled: Callable[..., ProxyThread], opened_by: str
) -> None:
    # Its locks (row locks, metadata locks of what it read) would outlive it: another session's
    # DROP TABLE would wait for a connection nobody uses.
    proxy = make_pooled(max_connections=2)
    _only_session(proxy)
    assert primary_pool(proxy)["idle"] == 1  # the fixture's setup session's, given back
    with client(proxy) as conn:
        run(conn, opened_by)
        run(conn, "SELECT COUNT(*) FROM mx_a.t FOR UPDATE")
        assert primary_pool(proxy)["borrowed"] == 1
        assert primary_pool(proxy)["size"] == 1  # the idle one was lent
    for _ in range(100):
        if not status(proxy)["sessions"]:
            break
        threading.Event().wait(0.02)
    assert status(proxy)["sessions"] == []
    pool = primary_pool(proxy)
    assert (pool["borrowed"], pool["idle"], pool["size"]) == (0, 0, 0)  # closed, not lent


def test_idle_connections_are_reaped(make_pooled: Callable[..., ProxyThread]) -> None:
    proxy = make_pooled(idle_timeout=0.2)
    with client(proxy) as conn:
        run(conn, "SELECT 1 FROM DUAL FOR UPDATE")
        for _ in range(100):
            pool = primary_pool(proxy)
            if pool["reaped"] and not pool["idle"]:
                break
            threading.Event().wait(0.05)
        pool = primary_pool(proxy)
        assert pool["reaped"] >= 1
        assert pool["idle"] == 0
        assert run(conn, "SELECT 2 FROM DUAL FOR UPDATE") == [(2,)]  # a new one is opened


def test_more_clients_than_the_primary_accepts_are_served_through_the_pool(
    make_proxy: Callable[..., ProxyThread], mariadb_topology: MariaDBTopology
) -> None:
    """MariaDB with a low ``max_connections``: through the pool every client is served;
    with one connection per session, the clients beyond the limit are refused (1040)."""
    admin = mariadb_topology.connect()
    try:
        run(admin, "CREATE DATABASE IF NOT EXISTS mx_a")
        run(admin, "CREATE TABLE IF NOT EXISTS mx_a.t (k INT PRIMARY KEY, v INT)")
        (before,) = run(admin, "SELECT @@GLOBAL.max_connections")[0]
        (connected,) = run(admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST")[0]
        limit = int(connected) + 12
        clients = limit + 30
        mariadb_topology.primary.query(f"SET GLOBAL max_connections = {limit}")
        try:
            pooled = make_proxy(pool={"max_connections": 4, "wait_timeout": 30.0})
            assert _serve(pooled, clients) == []
            assert primary_pool(pooled)["size"] <= 4
            pooled.stop()
            per_session = make_proxy(pool={"multiplexing": False})
            refused = _serve(per_session, clients)
            assert refused
            assert {errno for errno, _ in refused} == {1040}
        finally:
            mariadb_topology.primary.query(f"SET GLOBAL max_connections = {int(before)}")
    finally:
        admin.close()


def _serve(proxy: ProxyThread, clients: int) -> list[tuple[int, str]]:
    """Log ``clients`` clients in at once, each runs a write and a locking read; the errors."""
    errors: list[tuple[int, str]] = []
    with contextlib.ExitStack() as stack:
        conns = []
        for _ in range(clients):
            try:
                conns.append(stack.enter_context(client(proxy)))
            except pymysql.err.OperationalError as e:
                errors.append((e.args[0], e.args[1]))
        for i, conn in enumerate(conns):
            try:
                run(conn, "REPLACE INTO mx_a.t VALUES (%s, %s)", (2000 + i, i))
                assert run(conn, "SELECT v FROM mx_a.t WHERE k = %s FOR UPDATE", (2000 + i,)) == [
                    (i,)
                ]
            except pymysql.err.OperationalError as e:
                errors.append((e.args[0], e.args[1]))
    return errors
