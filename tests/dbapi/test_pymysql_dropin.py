"""Code written against PyMySQL runs on the wrapper: PyMySQL's cursor and connection extras, its
constructor options and its return types, checked against PyMySQL itself where it can answer
(the same query on a plain ``pymysql.connect`` to the primary), on the emulator and on MariaDB.
The deliberate differences (autocommit on, reads retried) are checked with their switches."""

from __future__ import annotations

import contextlib
import secrets
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pymysql
import pymysql.cursors
import pytest

import consistent.dbapi as db
from consistent import errors
from consistent.dbapi.config import build_config, parse_url
from consistent.policy import PRIMARY
from consistent.sqlalchemy.url import consistency_options

from .conftest import Backend


@contextlib.contextmanager
def plain(backend: Backend, **kwargs: Any) -> Iterator[Any]:
    """PyMySQL itself on the primary: the reference answer."""
    conn = pymysql.connect(
        host=backend.host, port=backend.primary_port, **backend.options, **kwargs
    )
    try:
        yield conn
    finally:
        conn.close()


def target(conn: db.Connection) -> str:
    assert conn.last_decision is not None
    return conn.last_decision.target


# ------------------------------------------------------------------ cursor attributes


def test_executed_is_the_statement_as_sent(backend: Backend, table: str) -> None:
    for conn in (backend.connect(), backend.connect(replicas=[])):  # routed and direct paths
        cur = conn.cursor()
        assert cur._executed is None
        cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (len(conn.replicas), 7))
        assert cur._executed == f"INSERT INTO {table} VALUES ({len(conn.replicas)}, 7)"
        cur.execute(f"SELECT v FROM {table} WHERE k = %(k)s", {"k": "x'y"})
        assert cur._executed == f"SELECT v FROM {table} WHERE k = 'x\\'y'"


def test_executed_after_executemany_is_the_multi_row_insert(backend: Backend, table: str) -> None:
    conn = backend.connect()
    with plain(backend) as reference:
        theirs = reference.cursor()
        theirs.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, i) for i in range(3)])
    cur = conn.cursor()
    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, i) for i in range(3, 6)])
    assert isinstance(theirs._executed, bytes | bytearray)
    assert type(cur._executed) is type(theirs._executed)
    assert bytes(cur._executed or b"").endswith(b"VALUES (3, 3),(4, 4),(5, 5)")


def test_warning_count_as_pymysql_counts_it(backend: Backend, table: str) -> None:
    sql = f"DROP TABLE IF EXISTS missing_{secrets.token_hex(3)}"
    with plain(backend) as reference:
        theirs = reference.cursor()
        theirs.execute(sql)
    assert theirs.warning_count == 1  # a note: unknown table
    cur = backend.connect().cursor()
    assert cur.warning_count == 0
    cur.execute(sql)
    assert cur.warning_count == theirs.warning_count
    cur.execute(f"SELECT k FROM {table}")
    assert cur.warning_count == 0


def test_warning_count_of_a_read_on_a_replica(backend: Backend, table: str) -> None:
    if backend.name == "emulator":
        pytest.skip("the emulator raises no warnings for reads")
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 1)")
    backend.catch_up()
    sql = f"SELECT CAST('12abc' AS SIGNED), CAST('7x' AS SIGNED) FROM {table}"
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(sql)
    assert target(conn) in backend.replicas  # read where the warnings were raised
    assert cur.warning_count == 2  # one truncation per CAST


@pytest.mark.parametrize("cursorclass", [db.SSCursor, db.SSDictCursor])
def test_fetchall_unbuffered_streams_the_rest(
    backend: Backend, table: str, cursorclass: type[db.Cursor]
) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 10), (2, 20), (3, 30)")
    backend.catch_up()
    cur = backend.connect().cursor(cursorclass)
    assert isinstance(cur, db.SSCursor)
    cur.execute(f"SELECT v FROM {table} ORDER BY k")
    first = cur.fetchone()
    rest = cur.fetchall_unbuffered()
    assert not isinstance(rest, list | tuple)  # one row at a time
    values = [row["v"] if isinstance(row, dict) else row[0] for row in rest]
    assert (first, values) in (((10,), [20, 30]), ({"v": 10}, [20, 30]))


@pytest.mark.parametrize(
    "cursorclass",
    [pymysql.cursors.Cursor, pymysql.cursors.DictCursor, pymysql.cursors.SSCursor],
    ids=["Cursor", "DictCursor", "SSCursor"],
)
def test_fetch_results_have_pymysqls_types(
    backend: Backend, table: str, cursorclass: type[Any]
) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 10), (2, 20), (3, 30)")
    backend.catch_up()
    queries = (f"SELECT k, v FROM {table} ORDER BY k", f"SELECT k FROM {table} WHERE k > 9")

    def shapes(conn: Any) -> list[Any]:
        found = []
        for sql in queries:
            cur = conn.cursor(cursorclass)
            cur.execute(sql)
            found.append((cur.fetchmany(2), cur.fetchall(), cur.fetchmany(1)))
            cur.close()
        return found

    with plain(backend) as reference:
        expected = shapes(reference)
    assert shapes(backend.connect()) == expected
    for ours, theirs in zip(shapes(backend.connect()), expected, strict=True):
        assert [type(part) for part in ours] == [type(part) for part in theirs]
    if cursorclass is pymysql.cursors.Cursor:
        assert isinstance(expected[0][1], tuple)  # the case that used to be a list here


# ------------------------------------------------------------------ connection methods


def test_affected_rows_on_the_server_that_ran_the_statement(backend: Backend, table: str) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    assert conn.affected_rows() == 0
    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(1, 1), (2, 2), (3, 3)])
    assert conn.affected_rows() == 3
    cur.execute(f"UPDATE {table} SET v = v + 1 WHERE k > 1")
    assert conn.affected_rows() == 2
    cur.execute(f"SELECT k FROM {table}")
    assert target(conn) in backend.replicas
    assert conn.affected_rows() == 3  # PyMySQL reports a buffered result's row count


def test_encoders_are_the_mapping_escape_and_parameters_use(backend: Backend, table: str) -> None:
    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    conn = backend.connect()
    with plain(backend) as reference:
        assert set(conn.encoders) == set(reference.encoders)
    conn.encoders[Money] = lambda value, mapping=None: str(value.cents)
    assert conn.escape(Money(250)) == "250"
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (1, Money(250)))
    assert backend.primary_query(f"SELECT v FROM {table}") == [(250,)]
    with pytest.warns(DeprecationWarning, match="reconnect"):
        conn.ping(reconnect=True)
    conn.close()
    with pytest.warns(DeprecationWarning, match="reconnect"):
        conn.ping(reconnect=True)  # a new session keeps the mapping
    assert conn.escape(Money(3)) == "3"


def test_set_character_set_follows_the_session_onto_replicas(backend: Backend, table: str) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"SELECT k FROM {table}")  # a replica connection opens in the default charset
    conn.set_character_set("latin1")
    assert conn.character_set_name() == "latin1"
    assert conn.encoding == "cp1252"
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(f"SELECT @@character_set_client, @@character_set_results FROM {table}")
    assert target(conn) in backend.replicas
    assert cur.fetchall() == (("latin1", "latin1"),)
    with pytest.warns(DeprecationWarning, match="set_character_set"):
        conn.set_charset("utf8mb4")
    cur.execute(f"SELECT @@character_set_client FROM {table}")
    assert target(conn) in backend.replicas
    assert cur.fetchall() == (("utf8mb4",),)
    with pytest.raises(db.ProgrammingError):
        conn.set_character_set("no-such-charset")


def test_set_character_set_changes_the_encoding_on_replicas_too(backend: Backend) -> None:
    if backend.name == "emulator":
        pytest.skip("the emulator keeps text in UTF-8 whatever SET NAMES says")
    name = f"t_{secrets.token_hex(3)}"
    backend.primary_query(f"CREATE TABLE {name} (k INT PRIMARY KEY, s VARCHAR(20)) CHARSET utf8mb4")
    backend.catch_up()
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"SELECT k FROM {name}")  # a replica connection opens in utf8mb4
    conn.set_character_set("latin1")
    cur.execute(f"INSERT INTO {name} VALUES (%s, %s)", (1, "café"))
    assert backend.primary_query(f"SELECT HEX(s) FROM {name}") == [("636166C3A9",)]
    cur.execute(f"SELECT s FROM {name}")
    assert target(conn) in backend.replicas
    # Sent in latin1 and decoded as latin1 on the replica: either side in UTF-8 garbles it.
    assert cur.fetchall() == (("café",),)


def test_kill_ends_another_connection_by_thread_id(backend: Backend) -> None:
    victim = backend.connect()
    killer = backend.connect()
    killer.kill(victim.thread_id())
    assert target(killer) == PRIMARY
    with pytest.raises(pymysql.err.OperationalError):
        victim.cursor().execute("SELECT 1 FROM DUAL WHERE 1 = 0 FOR UPDATE")
    with pytest.raises(TypeError):
        killer.kill("1")  # type: ignore[arg-type]


# ------------------------------------------------------------------ constructor and calls


def test_defer_connect_opens_nothing_until_connect(backend: Backend, table: str) -> None:
    conn = backend.connect(defer_connect=True)
    assert not conn.open
    with pytest.raises(pymysql.err.InterfaceError):
        conn.cursor()
    conn.connect()
    assert conn.open
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 5)")
    cur.execute(f"SELECT v FROM {table}")
    assert cur.fetchall() == ((5,),)
    first = conn.thread_id()
    conn.connect()  # on an open connection: a fresh session, as PyMySQL's connect()
    assert conn.open
    assert conn.thread_id() != first
    url = (
        f"mysql://{backend.user}:{backend.password}@{backend.primary}/{backend.database}"
        "?defer_connect=true&" + "&".join(f"replica={r}" for r in backend.replicas)
    )
    later = db.connect(url)
    try:
        assert not later.open
        later.connect()
        assert later.open
    finally:
        later.close()


def test_closing_a_connection_that_never_connected(backend: Backend) -> None:
    conn = backend.connect(defer_connect=True)
    conn.close()
    with pytest.raises(pymysql.err.Error):
        conn.close()


class OrderedDictCursor(pymysql.cursors.DictCursor):
    dict_type = OrderedDict


class OrderedSSDictCursor(pymysql.cursors.SSDictCursor):
    dict_type = OrderedDict


@pytest.mark.parametrize("cls", [OrderedDictCursor, OrderedSSDictCursor])
def test_a_subclass_of_a_pymysql_cursor_class_shapes_the_rows(
    backend: Backend, table: str, cls: type[Any]
) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 2)")
    backend.catch_up()
    for cur in (backend.connect(cursorclass=cls).cursor(), backend.connect().cursor(cls)):
        assert type(cur).__name__ == cls.__name__
        assert cur.unbuffered is issubclass(cls, pymysql.cursors.SSCursor)
        cur.execute(f"SELECT v, k FROM {table}")
        row = cur.fetchone()
        assert type(row) is OrderedDict
        assert list(row.items()) == [("v", 2), ("k", 1)]
        cur.close()


def test_executemany_takes_args_by_keyword(backend: Backend, table: str) -> None:
    cur = backend.connect().cursor()
    assert cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", args=[(1, 1), (2, 2)]) == 2
    assert cur.executemany(f"SELECT v FROM {table} WHERE k = %s", args=[(1,), (2,)]) == 2
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(2,)]


# ------------------------------------------------------------------ reconnecting


def test_ping_reconnect_after_close_opens_a_fresh_session(backend: Backend, table: str) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    token = conn.token
    conn.autocommit(False)
    cur.execute("SET @left_behind = 1")
    old_thread = conn.thread_id()
    conn.close()
    with pytest.raises(pymysql.err.Error):
        conn.ping()
    with pytest.warns(DeprecationWarning, match="reconnect"):
        conn.ping(reconnect=True)
    assert conn.open
    assert conn.thread_id() != old_thread
    assert conn.token == token  # what this session wrote is still its own
    assert conn.get_autocommit() is False  # as PyMySQL, the mode set through the API stays
    cur.execute("SELECT @@autocommit, @left_behind")
    assert cur.fetchall() == ((0, None),)
    conn.autocommit(True)
    cur.execute(f"SELECT v FROM {table}")
    assert target(conn) in backend.replicas  # not pinned by the old session's variable
    assert cur.fetchall() == ((1,),)


def test_ping_reconnect_after_the_primary_was_lost(backend: Backend) -> None:
    conn = backend.connect()
    backend.primary_query(f"KILL {conn.thread_id()}")
    with pytest.raises(db.OperationalError):
        conn.cursor().execute("SELECT 1 FOR UPDATE")
    assert not conn.open
    with pytest.warns(DeprecationWarning, match="reconnect"):
        conn.ping(reconnect=True)
    assert conn.open
    cur = conn.cursor()
    cur.execute("SELECT 1")
    assert cur.fetchall() == ((1,),)


# ------------------------------------------------------------------ the deliberate differences


def test_autocommit_is_on_by_default_and_false_gives_pymysqls_mode(
    backend: Backend, table: str
) -> None:
    on = backend.connect()
    assert on.get_autocommit() is True
    off = backend.connect(autocommit=False)
    assert off.get_autocommit() is False
    cur = off.cursor()
    cur.execute("SELECT @@autocommit")
    assert cur.fetchall() == ((0,),)
    assert target(off) == PRIMARY  # a statement may belong to a transaction that writes
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    off.rollback()
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    with plain(backend, autocommit=None) as reference:
        server_default = reference.get_autocommit()
    assert backend.connect(autocommit=None).get_autocommit() is server_default


def test_the_switches_are_options_and_url_parameters() -> None:
    config = build_config(primary="db1", retry_reads=False, autocommit=None)
    assert (config.policy.retry_reads, config.autocommit) == (False, None)
    assert build_config(primary="db1").policy.retry_reads is True
    params = parse_url("mysql://u@db1/app?retry_reads=no&autocommit=off&defer_connect=1")
    assert (params["retry_reads"], params["autocommit"], params["defer_connect"]) == (
        False,
        False,
        True,
    )
    assert consistency_options({"retry_reads": "false"}) == {"retry_reads": False}
    with pytest.raises(db.InterfaceError):  # connect() takes it; a server cannot
        build_config(primary={"host": "db1", "defer_connect": True})


@pytest.mark.parametrize("retry_reads", [True, False])
def test_a_read_whose_replica_died_is_retried_unless_told_not_to(
    backend: Backend, table: str, retry_reads: bool
) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 1)")
    backend.catch_up()
    # No background monitor: it could see the kill first and keep the read from being sent.
    conn = backend.connect(
        replicas=backend.replicas[:1], retry_reads=retry_reads, monitor_interval=None
    )
    cur = conn.cursor()
    cur.execute(f"SELECT v FROM {table}")
    assert target(conn) == backend.replicas[0]  # its connection is open now
    backend.kill(0)
    if retry_reads:
        cur.execute(f"SELECT v FROM {table}")
        assert cur.fetchall() == ((1,),)
        assert target(conn) == PRIMARY
    else:
        with pytest.raises(pymysql.err.OperationalError) as caught:
            cur.execute(f"SELECT v FROM {table}")
        assert isinstance(caught.value, errors.OperationalError)
        assert caught.value.args[0] in (2006, 2013)
    assert conn.policy.knowledge.view(backend.replicas[0]).failures >= 1
