"""The other levels, timeouts and session state, through every form: what one form does with
a level, a wait that times out, or a session variable, every form does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import pymysql
import pytest
import sqlalchemy as sa

from .sessions import Settings

if TYPE_CHECKING:
    from consistent.testing.replication import Replication

    from .sessions import Form

DB_ERRORS: Final = (pymysql.err.MySQLError, sa.exc.DBAPIError)
#: Error numbers SQLAlchemy takes for a lost connection (a consistency timeout is none of them).
DISCONNECTS: Final = {1927, 2006, 2013, 2014, 2045, 2055, 4031}


def errno_of(exc: BaseException) -> Any:
    orig = getattr(exc, "orig", exc)
    return orig.args[0] if orig.args else None


def test_read_all_writes_sees_another_sessions_earlier_commit(
    form: Form, backend: Replication, table: str
) -> None:
    """Two sessions of one process (one proxy): the second reads the first's commit."""
    writer, reader = form.session(), form.session(level="read_all_writes")
    backend.pause_all()
    timer = None
    try:
        writer.rows(f"INSERT INTO {table} VALUES (1, 1)")
        timer = backend.resume_all_later(0.3)
        assert [v for v, _ in reader.rows(f"SELECT v, @@port FROM {table}")] == [1]
    finally:
        if timer is not None:
            timer.join()
        backend.resume_all()


def test_read_latest_sees_a_commit_made_outside_the_middleware(
    form: Form, backend: Replication, table: str
) -> None:
    latest, own = form.session(level="read_latest"), form.session()
    backend.pause_all()
    timer = None
    try:
        backend.primary_query(f"INSERT INTO {table} VALUES (1, 7)")
        # The control: read_own_writes owes nothing to that commit, and a replica lacks it.
        assert own.rows(f"SELECT COUNT(*) FROM {table}") == [(0,)]
        timer = backend.resume_all_later(0.3)
        assert [v for v, _ in latest.rows(f"SELECT v, @@port FROM {table}")] == [7]
    finally:
        if timer is not None:
            timer.join()
        backend.resume_all()


def test_writes_made_under_eventual_are_owed_once_back_at_read_own_writes(
    form: Form, backend: Replication, table: str
) -> None:
    """``read_own_writes`` is about every write the session committed, whatever the level was
    when it committed it."""
    session = form.session(level="eventual")
    backend.pause_all()
    timer = None
    try:
        session.rows(f"INSERT INTO {table} VALUES (1, 5)")
        assert session.rows(f"SELECT COUNT(*) FROM {table}") == [(0,)]  # eventual: stale
        session.set_level("read_own_writes")
        timer = backend.resume_all_later(0.3)
        assert [v for v, _ in session.rows(f"SELECT v, @@port FROM {table}")] == [5]
    finally:
        if timer is not None:
            timer.join()
        backend.resume_all()


def test_a_timed_out_wait_falls_back_to_the_primary(
    form: Form, backend: Replication, table: str
) -> None:
    form.settings = Settings(wait_timeout=0.2)
    session = form.session()
    backend.pause_all()
    session.rows(f"INSERT INTO {table} VALUES (1, 3)")
    assert session.rows(f"SELECT v, @@port FROM {table}") == [(3, form.primary_port)]


def test_on_timeout_error_raises_no_disconnect_and_the_session_goes_on(
    form: Form, backend: Replication, table: str
) -> None:
    form.settings = Settings(wait_timeout=0.2, on_timeout="error")
    session = form.session()
    backend.pause_all()
    session.rows(f"INSERT INTO {table} VALUES (1, 5)")
    with pytest.raises(DB_ERRORS) as info:
        session.rows(f"SELECT v FROM {table} WHERE k = 1")
    assert errno_of(info.value) not in DISCONNECTS, info.value
    if isinstance(info.value, sa.exc.DBAPIError):
        assert not info.value.connection_invalidated
    # The session is still usable: a read the hint sends to the primary sees the write.
    assert session.rows(f"/* consistent: primary */ SELECT v, @@port FROM {table}") == [
        (5, form.primary_port)
    ]


def test_a_read_only_transaction_reads_the_sessions_own_writes(
    form: Form, backend: Replication, table: str
) -> None:
    """Its first statement picks its replica: that statement waits, as any read."""
    session = form.session()
    backend.pause_all()
    timer = None
    try:
        session.rows(f"INSERT INTO {table} VALUES (1, 8)")
        timer = backend.resume_all_later(0.3)
        session.begin(read_only=True)
        assert [v for v, _ in session.rows(f"SELECT v, @@port FROM {table}")] == [8]
        session.commit()
    finally:
        if timer is not None:
            timer.join()
        backend.resume_all()


def test_session_variables_follow_the_session_to_replicas(form: Form) -> None:
    session = form.session()
    session.rows("SET time_zone = '+03:00'")
    for _ in range(3):
        [(zone, port)] = session.rows("SELECT @@time_zone, @@port")
        assert (zone, port in form.replica_ports) == ("+03:00", True)


def test_autocommit_off_keeps_every_statement_on_the_primary(
    form: Form, backend: Replication, table: str
) -> None:
    session = form.session()
    session.rows("SET autocommit = 0")
    assert session.rows(f"SELECT COUNT(*), @@port FROM {table}") == [(0, form.primary_port)]
    session.rows(f"INSERT INTO {table} VALUES (1, 1)")
    assert session.rows(f"SELECT COUNT(*), @@port FROM {table}") == [(1, form.primary_port)]
    session.rows("ROLLBACK")
    if form.kind != "sqlalchemy":
        # (The SQLAlchemy session commits each statement outside ``begin()``, as an
        # application's ``engine.begin()`` blocks do: there the INSERT was committed.)
        assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    session.rows("SET autocommit = 1")
    assert session.rows(f"SELECT COUNT(*), @@port FROM {table}")[0][1] in form.replica_ports


def test_last_insert_id_reads_the_primary(form: Form, backend: Replication) -> None:
    backend.primary_query("CREATE TABLE seq (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    backend.catch_up()
    session = form.session()
    session.rows("INSERT INTO seq (v) VALUES (1)")
    session.rows("INSERT INTO seq (v) VALUES (2)")
    assert session.rows("SELECT LAST_INSERT_ID(), @@port") == [(2, form.primary_port)]
