"""The DB-API against a real topology: the cursor API, and that transactions, read-only
transactions, temporary tables, user variables and session state route correctly — checked at
the data level (a wrong route gives a wrong answer or an error) and by the route reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import consistent.dbapi as db
from consistent.classify import MAX_CLASSIFIED_LENGTH
from consistent.dbapi import Connection
from consistent.errors import MalformedGtidSet
from consistent.policy import MAX_TOKEN_LENGTH, PRIMARY, Reason

if TYPE_CHECKING:
    from .conftest import Backend


def reason(conn: Connection) -> str:
    assert conn.last_decision is not None
    return conn.last_decision.reason_text


def target(conn: Connection) -> str:
    assert conn.last_decision is not None
    return conn.last_decision.target


def test_write_then_read_sees_the_write_on_a_replica(backend: Backend, table: str) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    assert cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (1, 10)) == 1
    assert target(conn) == PRIMARY
    assert conn.token.startswith(f"{conn.flavor}:")
    cur.execute(f"SELECT v FROM {table} WHERE k = %(k)s", {"k": 1})
    assert cur.fetchall() == ((10,),)
    assert target(conn) in backend.replicas
    assert reason(conn) in ("waited", "known_covered")
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchone() == (10,)
    assert reason(conn) == "known_covered"


def test_the_cursor_api(backend: Backend, table: str) -> None:
    conn = backend.connect()
    with conn.cursor() as cur:
        assert cur.description is None
        assert cur.rowcount == -1
        assert (
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, i * i) for i in range(5)])
            == 5
        )
        cur.execute(f"SELECT k, v FROM {table} ORDER BY k")
        assert cur.rowcount == 5
        assert [d[0] for d in cur.description or ()] == ["k", "v"]
        assert cur.description is not None
        assert cur.description[0][1] == db.NUMBER
        assert cur.fetchone() == (0, 0)
        cur.arraysize = 2
        assert cur.fetchmany() == ((1, 1), (2, 4))
        assert list(cur) == [(3, 9), (4, 16)]
        assert cur.fetchone() is None
        cur.execute(f"UPDATE {table} SET v = v + 1 WHERE k < 3")
        assert cur.rowcount == 3
        assert cur.executemany(f"SELECT v FROM {table} WHERE k = %s", [(1,), (2,)]) == 2
        assert cur.fetchall() == ((5,),)


def test_lastrowid_and_dict_cursors(backend: Backend) -> None:
    backend.primary_query("CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(9))")
    backend.catch_up()
    conn = backend.connect(cursorclass=db.DictCursor)
    cur = conn.cursor()
    cur.execute("INSERT INTO ai (name) VALUES ('a'), ('b')")
    first = cur.lastrowid
    cur.execute("INSERT INTO ai (name) VALUES ('c')")
    assert cur.lastrowid == (first or 0) + 2
    assert conn.insert_id() == cur.lastrowid
    cur.execute("SELECT name FROM ai ORDER BY id")
    assert cur.fetchall() == [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    assert target(conn) in backend.replicas


def test_an_unbuffered_cursor_streams_from_a_replica(backend: Backend, table: str) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 1), (2, 2), (3, 3)")
    backend.catch_up()
    conn = backend.connect()
    for cur in (conn.cursor(unbuffered=True), conn.cursor(db.SSDictCursor)):
        assert isinstance(cur, db.SSCursor | db.SSDictCursor)
        cur.execute(f"SELECT k FROM {table} ORDER BY k")
        assert target(conn) in backend.replicas
        first = cur.fetchone()
        assert first in ((1,), {"k": 1})
        assert len(cur.fetchall()) == 2
        cur.close()


def test_callproc_and_nextset(backend: Backend) -> None:
    if backend.name == "emulator":
        pytest.skip("the emulator does not support CREATE PROCEDURE (1235)")
    backend.primary_query("CREATE PROCEDURE twice(IN a INT) SELECT a * 2 AS r")
    backend.catch_up()
    conn = backend.connect()
    cur = conn.cursor()
    assert cur.callproc("twice", (21,)) == (21,)
    assert target(conn) == PRIMARY
    assert cur.fetchall() == ((42,),)
    assert cur.nextset() in (None, True)


def test_sql_errors_are_translated_and_not_retried(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    with pytest.raises(db.ProgrammingError) as info:
        cur.execute("SELECT * FROM no_such_table")
    assert info.value.errno == 1146
    assert info.value.sqlstate == "42S02"
    replica = target(conn)
    assert replica in backend.replicas
    assert conn.policy.knowledge.healthy(replica)
    cur.execute("SELECT 1")
    assert cur.fetchall() == ((1,),)


def test_a_transaction_runs_on_the_primary_and_commits_or_rolls_back(
    backend: Backend, table: str
) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    conn.begin()
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((1,),)  # uncommitted: only the primary session sees it
    assert (target(conn), reason(conn)) == (PRIMARY, "in_transaction")
    conn.rollback()
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    assert cur.fetchall() == ((0,),)
    cur.execute("START TRANSACTION")
    cur.execute(f"INSERT INTO {table} VALUES (2, 2)")
    cur.execute("COMMIT")
    assert conn.policy.transaction is None
    cur.execute(f"SELECT k FROM {table}")
    assert cur.fetchall() == ((2,),)
    assert target(conn) in backend.replicas


def test_a_read_only_transaction_runs_on_one_replica(backend: Backend, table: str) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 5)")
    conn.begin(read_only=True)
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((5,),)
    replica = target(conn)
    assert replica in backend.replicas
    if backend.name == "mariadb":  # the emulator has no information_schema.innodb_trx
        # The transaction really is open, read-only, on that replica.
        cur.execute(
            "SELECT trx_is_read_only FROM information_schema.innodb_trx"
            " WHERE trx_mysql_thread_id = CONNECTION_ID()"
        )
        assert cur.fetchall() == ((1,),)
        assert target(conn) == replica
    with pytest.raises(db.OperationalError) as info:
        cur.execute(f"UPDATE {table} SET v = 6")
    assert info.value.errno == 1792
    conn.commit()
    assert target(conn) == replica
    assert conn.policy.transaction is None
    cur.execute("START TRANSACTION READ ONLY")  # the SQL form is deferred the same way
    cur.execute(f"SELECT v FROM {table}")
    assert target(conn) in backend.replicas
    cur.execute("ROLLBACK")
    assert backend.primary_query(f"SELECT v FROM {table}") == [(5,)]


def test_a_temporary_table_pins_the_session(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute("CREATE TEMPORARY TABLE tmp (a INT)")
    cur.execute("INSERT INTO tmp VALUES (7)")
    cur.execute("SELECT a FROM tmp")  # would fail on a replica: the table is not there
    assert cur.fetchall() == ((7,),)
    assert (target(conn), reason(conn)) == (PRIMARY, "pinned(temporary_table)")


def test_user_variables_pin_the_session(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute("SET @answer = 42")
    cur.execute("SELECT @answer")
    assert cur.fetchall() == ((42,),)  # a replica connection has no @answer
    assert (target(conn), reason(conn)) == (PRIMARY, "write(user_variable)")
    cur.execute("SELECT 1")
    assert (target(conn), reason(conn)) == (PRIMARY, "pinned(user_variable)")


def test_session_state_follows_the_session_to_replicas(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute("SET NAMES latin1")
    cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
    cur.execute("SELECT @@character_set_client, @@sql_mode")
    assert cur.fetchall() == (("latin1", "ANSI_QUOTES"),)
    assert target(conn) in backend.replicas
    conn.select_db("information_schema")
    cur.execute("SELECT DATABASE()")
    assert cur.fetchall() == (("information_schema",),)
    assert target(conn) in backend.replicas


def test_autocommit_off_keeps_everything_on_the_primary(backend: Backend, table: str) -> None:
    conn = backend.connect(autocommit=False)
    assert not conn.autocommit
    assert conn.get_autocommit() is False
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 1)")
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    assert cur.fetchall() == ((1,),)
    assert reason(conn) == "in_transaction(autocommit_off)"
    conn.rollback()
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    conn.autocommit(True)
    assert conn.autocommit == True  # noqa: E712 - the PyMySQL-style switch compares to bools
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    assert target(conn) in backend.replicas


def test_the_context_manager_commits_or_rolls_back_then_closes(
    backend: Backend, table: str
) -> None:
    with backend.connect(autocommit=False) as conn:
        conn.cursor().execute(f"INSERT INTO {table} VALUES (1, 1)")
    assert not conn.open
    other = backend.connect(autocommit=False)

    def fail_inside() -> None:
        with other:
            other.cursor().execute(f"INSERT INTO {table} VALUES (2, 2)")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_inside()
    assert not other.open
    assert backend.primary_query(f"SELECT k FROM {table}") == [(1,)]


def test_a_token_carries_causality_to_another_session(backend: Backend, table: str) -> None:
    writer = backend.connect()
    reader = backend.connect()
    backend.pause(0)
    backend.pause(1)
    writer.cursor().execute(f"INSERT INTO {table} VALUES (1, 99)")
    reader.require(writer.token)
    assert reader.token == writer.token
    backend.resume(0)
    cur = reader.cursor()
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    assert cur.fetchall() == ((99,),)
    with pytest.raises(MalformedGtidSet):
        reader.require("mysql:garbage" if reader.flavor == "mysql" else "mariadb:garbage")


def test_hints_route_one_statement(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute("/* consistent: primary */ SELECT @@server_id")
    assert (target(conn), reason(conn)) == (PRIMARY, "hint(primary)")
    cur.execute("/* consistent: level=eventual */ SELECT 1")
    assert conn.last_decision is not None
    assert conn.last_decision.reason is Reason.EVENTUAL


def test_a_closed_connection_refuses_work(backend: Backend) -> None:
    conn = backend.connect()
    cur = conn.cursor()
    conn.close()
    with pytest.raises(db.InterfaceError):
        cur.execute("SELECT 1")
    with pytest.raises(db.InterfaceError):
        conn.cursor()
    with pytest.raises(db.Error):
        conn.close()


def test_oversized_statements_and_tokens_are_bounded(backend: Backend, table: str) -> None:
    # The same rules as the proxy's (tests/proxy/test_protocol_answers.py): a statement
    # longer than MAX_CLASSIFIED_LENGTH goes to the primary, a token beyond
    # MAX_TOKEN_LENGTH is refused with 1772 before it is parsed.
    conn = backend.connect()
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {table} VALUES (1, 10)")
    padding = "x" * (MAX_CLASSIFIED_LENGTH + 1)
    cur.execute(f"SELECT v, LENGTH(%s) FROM {table} WHERE k = 1", (padding,))
    assert cur.fetchall() == ((10, len(padding)),)
    assert (target(conn), reason(conn)) == (PRIMARY, "write(oversized_statement)")
    cur.execute(f"SELECT v FROM {table} WHERE k = 1")  # a plain read: no pin was left
    assert target(conn) in backend.replicas
    token = f"{conn.flavor}:" + "0" * MAX_TOKEN_LENGTH
    with pytest.raises(MalformedGtidSet) as info:
        conn.require(token)
    assert info.value.args[0] == 1772
