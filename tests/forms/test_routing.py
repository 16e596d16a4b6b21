"""Pins and transactions through every form: session state a replica cannot have pins the
session to the primary, an explicit transaction runs on one server start to end, and a
read-only one on one replica.  Where a read ran is the answer's own ``@@port``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import sqlalchemy as sa

from .sessions import MARIADB_ONLY

if TYPE_CHECKING:
    from consistent.testing.replication import Replication

    from .sessions import Form, Session


def port(session: Session, sql: str = "SELECT @@port") -> int:
    return int(session.rows(sql)[0][-1])


def errno_of(exc: BaseException) -> Any:
    """The server's error number, whichever form raised (SQLAlchemy wraps the DB-API's)."""
    orig = getattr(exc, "orig", exc)
    return orig.args[0] if orig.args else None


DB_ERRORS = (pymysql.err.MySQLError, sa.exc.DBAPIError)


@pytest.mark.parametrize(
    ("statement", "check", "value"),
    [
        (
            "CREATE TEMPORARY TABLE tmp (a INT)",
            "SELECT COUNT(*), @@port FROM tmp",
            0,
        ),
        ("SET @x = 41", "SELECT @x + 1, @@port", 42),
    ],
)
def test_state_a_replica_cannot_have_pins_the_session(
    form: Form, table: str, statement: str, check: str, value: int
) -> None:
    session = form.session()
    assert port(session) in form.replica_ports
    session.rows(statement)
    [(got, where)] = session.rows(check)
    assert (got, where) == (value, form.primary_port)
    # Reads that do not touch the state go to the primary too, for the rest of the session
    # (a temporary table or a user variable is never known to be gone: the pin stays).
    for _ in range(3):
        assert port(session, f"SELECT COUNT(*), @@port FROM {table}") == form.primary_port
    # Another session of the same form is not pinned.
    assert port(form.session()) in form.replica_ports


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_lock_tables_pins_until_unlock_tables(form: Form, table: str) -> None:
    """MariaDB only: the emulator has no LOCK TABLES."""
    session = form.session()
    session.rows(f"LOCK TABLES {table} READ")
    assert port(session, f"SELECT COUNT(*), @@port FROM {table}") == form.primary_port
    session.rows("UNLOCK TABLES")
    assert port(session, f"SELECT COUNT(*), @@port FROM {table}") in form.replica_ports


def test_a_transaction_runs_on_the_primary_and_its_end_unpins(
    form: Form, backend: Replication, table: str
) -> None:
    session = form.session()
    session.begin()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    ports = {port(session, f"SELECT v, @@port FROM {table} WHERE k = 1") for _ in range(3)}
    ports.add(port(session))
    assert ports == {form.primary_port}
    # Its own uncommitted write is what it reads; nobody else sees it yet.
    assert session.rows(f"SELECT v FROM {table} WHERE k = 1") == [(10,)]
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    session.commit()
    assert backend.primary_query(f"SELECT v FROM {table}") == [(10,)]
    # After the commit reads go to replicas again, and see the committed write.
    assert session.rows(f"SELECT v, @@port FROM {table}")[0][0] == 10
    assert port(session, f"SELECT v, @@port FROM {table}") in form.replica_ports


def test_a_transaction_that_reads_first_runs_on_one_server(form: Form, table: str) -> None:
    session = form.session()
    session.begin()
    first = port(session, f"SELECT COUNT(*), @@port FROM {table}")
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    later = {port(session, f"SELECT COUNT(*), @@port FROM {table}") for _ in range(2)}
    session.commit()
    assert later == {form.primary_port}
    if form.kind == "sqlalchemy":
        # By design: SQLAlchemy has a transaction open around every statement, so the dialect
        # sends BEGIN to the primary only at the first statement that needs it (see
        # consistent.sqlalchemy.dialect); reads before it run on replicas, outside it.
        assert first in form.replica_ports
    else:
        assert first == form.primary_port


def test_rollback_undoes_the_transaction(form: Form, backend: Replication, table: str) -> None:
    session = form.session()
    session.begin()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    session.rows(f"INSERT INTO {table} VALUES (2, 20)")
    session.rollback()
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    assert session.rows(f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_a_read_only_transaction_runs_on_one_replica(
    form: Form, backend: Replication, table: str
) -> None:
    session = form.session()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    backend.catch_up()
    session.begin(read_only=True)
    ports = {port(session, f"SELECT v, @@port FROM {table} WHERE k = 1") for _ in range(4)}
    assert len(ports) == 1
    assert ports <= form.replica_ports
    assert session.rows(f"SELECT v FROM {table} WHERE k = 1") == [(10,)]
    session.commit()
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(1,)]


def test_a_write_in_a_read_only_transaction_is_refused(
    form: Form, backend: Replication, table: str
) -> None:
    """The server refuses it (1792) wherever the transaction runs; it never reaches the
    primary outside the transaction."""
    session = form.session()
    session.begin(read_only=True)
    assert port(session) in form.replica_ports
    with pytest.raises(DB_ERRORS) as info:
        session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    assert errno_of(info.value) == 1792
    session.rollback()
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT v, @@port FROM {table} WHERE k = 1 FOR UPDATE",
        "SELECT v, @@port FROM {table} WHERE k = 1 LOCK IN SHARE MODE",
        # A hint chooses among safe routes only: it never sends a locking read to a replica.
        "/* consistent: replica */ SELECT v, @@port FROM {table} WHERE k = 1 FOR UPDATE",
    ],
)
def test_locking_reads_go_to_the_primary(
    form: Form, backend: Replication, table: str, sql: str
) -> None:
    backend.primary_query(f"INSERT INTO {table} VALUES (1, 5)")
    backend.catch_up()
    session = form.session()
    assert port(session, f"SELECT v, @@port FROM {table}") in form.replica_ports
    assert session.rows(sql.format(table=table)) == [(5, form.primary_port)]


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_get_lock_goes_to_the_primary_and_pins(form: Form) -> None:
    """MariaDB only: the emulator has no GET_LOCK()."""
    session = form.session()
    assert session.rows("SELECT GET_LOCK('forms', 0), @@port") == [(1, form.primary_port)]
    assert port(session) == form.primary_port
