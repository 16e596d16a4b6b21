"""Failures through every form: a dead or frozen replica costs no read, and a lost primary is
a clear disconnect error (2006 / 2013) whose write is never silently sent again.

The failing replica is a form's only one, so that the read is sure to meet it."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Final

import pymysql
import pytest
import sqlalchemy as sa

from consistent.testing.blackhole import BlackHole

from .sessions import MARIADB_ONLY, Settings, port_of

if TYPE_CHECKING:
    from consistent.testing.replication import Replication

    from .sessions import Form

DB_ERRORS: Final = (pymysql.err.MySQLError, sa.exc.DBAPIError)
#: What a client reports when the server went away (CR_SERVER_GONE_ERROR, CR_SERVER_LOST), or
#: the server's own word that it killed the connection (ER_CONNECTION_KILLED, which the emulator
#: sends to a connection killed mid-statement); SQLAlchemy takes all three for a disconnect.
DISCONNECTS: Final = (1927, 2006, 2013)
#: Seconds added to a stated bound: the machine is shared and slow at times.
SLACK: Final = 5.0


def errno_of(exc: BaseException) -> Any:
    """The error number, whichever form raised (SQLAlchemy wraps the DB-API's error)."""
    orig = getattr(exc, "orig", exc)
    return orig.args[0] if orig.args else None


def drop_primary_connections(backend: Replication) -> int:
    """Kill every connection to the test's database on the primary (but the killer's): the
    primary lost them, as when it restarts.  Returns how many there were."""
    ids = backend.primary_query(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()",
        (backend.database,),
    )
    for (thread,) in ids:
        with contextlib.suppress(pymysql.err.OperationalError):  # gone meanwhile (1094)
            backend.primary_query(f"KILL {int(thread)}")
    return len(ids)


def count(backend: Replication, table: str, k: int) -> int:
    return int(backend.primary_query(f"SELECT COUNT(*) FROM {table} WHERE k = %s", (k,))[0][0])


# --- replicas ----------------------------------------------------------------------------


def test_a_killed_replica_costs_no_read(form: Form, backend: Replication, table: str) -> None:
    form.settings = Settings(monitor_interval=0)  # the read itself meets the dead replica
    form.replicas = backend.replicas[:1]
    replica = form.replicas[0]
    session = form.session()
    session.rows(f"INSERT INTO {table} VALUES (0, 0)")
    backend.catch_up()
    assert session.rows(f"SELECT v, @@port FROM {table}") == [(0, port_of(replica))]
    backend.kill(0)
    for k in range(1, 4):
        session.rows(f"INSERT INTO {table} VALUES (%s, %s)", (k, k * 10))
        assert session.rows(f"SELECT v, @@port FROM {table} WHERE k = %s", (k,)) == [
            (k * 10, form.primary_port)
        ]
    assert not form.knowledge.healthy(replica)
    assert [count(backend, table, k) for k in range(4)] == [1, 1, 1, 1]


def test_a_refusing_replica_port_costs_no_read(form: Form, backend: Replication) -> None:
    """A replica that is not there at all (nothing listens on its port) from the start."""
    form.settings = Settings(monitor_interval=0)
    backend.kill(1)
    form.replicas = [backend.replicas[1], backend.replicas[0]]
    session = form.session()
    ports = {int(session.rows("SELECT @@port")[0][0]) for _ in range(4)}
    assert port_of(backend.replicas[1]) not in ports
    assert ports <= {port_of(backend.replicas[0]), form.primary_port}


def test_a_silent_replica_costs_no_read(
    form: Form, backend: Replication, table: str, black_hole: BlackHole
) -> None:
    """A replica that accepts TCP and never answers (a server frozen before the session
    connected; on both servers, which the emulator's in-process replicas cannot be)."""
    form.settings = Settings(replica_read_timeout=1.0, connect_timeout=1.0, monitor_interval=0)
    form.replicas = [black_hole.name]
    session = form.session()
    for k in range(1, 3):
        session.rows(f"INSERT INTO {table} VALUES (%s, %s)", (k, k))
        assert session.rows(f"SELECT v, @@port FROM {table} WHERE k = %s", (k,)) == [
            (k, form.primary_port)
        ]
    assert black_hole.accepted >= 1
    assert not form.knowledge.healthy(black_hole.name)


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_a_frozen_replica_costs_a_read_its_deadline_then_goes_elsewhere(
    form: Form, backend: Replication, table: str
) -> None:
    """MariaDB only: the emulator's servers run in this process and cannot be stopped apart
    (its black-hole stand-in is tests/integration/test_deadlines.py's).  The bound is the
    deadlines' promise (a read completes within wait + read + connect deadlines), with slack
    for this shared machine: without the deadline the read would hang for good."""
    assert backend.freeze is not None
    assert backend.thaw is not None
    settings = form.settings = Settings(replica_read_timeout=1.0, monitor_interval=0)
    form.replicas = backend.replicas[:1]
    replica = form.replicas[0]
    session = form.session()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    backend.catch_up()
    assert session.rows("SELECT @@port") == [(port_of(replica),)]  # its connection is open
    backend.freeze(0)
    try:
        started = time.monotonic()
        assert session.rows(f"SELECT v, @@port FROM {table}") == [(10, form.primary_port)]
        elapsed = time.monotonic() - started
        assert not form.knowledge.healthy(replica)
        # While it cools down nothing is sent to it: this read costs no deadline.
        assert session.rows("SELECT @@port") == [(form.primary_port,)]
    finally:
        backend.thaw(0)
    bound = settings.wait_timeout + settings.replica_read_timeout + settings.connect_timeout + SLACK
    assert elapsed < bound


# --- the primary ---------------------------------------------------------------------------


def test_a_primary_lost_mid_transaction_is_a_disconnect_and_nothing_is_retried(
    form: Form, backend: Replication, table: str
) -> None:
    session = form.session()
    session.begin()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    assert drop_primary_connections(backend) >= 1
    with pytest.raises(DB_ERRORS) as info:
        session.rows(f"INSERT INTO {table} VALUES (2, 20)")
    assert errno_of(info.value) in DISCONNECTS, info.value
    time.sleep(0.3)  # time for a (wrong) second attempt to land
    assert (count(backend, table, 1), count(backend, table, 2)) == (0, 0)


def test_the_session_is_over_once_its_transaction_was_lost(
    form: Form, backend: Replication, table: str
) -> None:
    """Never silently on: the next statements fail too (the wrapper keeps saying why; the
    proxy closes the client connection; SQLAlchemy wants a rollback before anything else)."""
    session = form.session()
    session.begin()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    drop_primary_connections(backend)
    with pytest.raises(DB_ERRORS):
        session.rows(f"INSERT INTO {table} VALUES (2, 20)")
    for k in (3, 4):
        with pytest.raises((*DB_ERRORS, sa.exc.SQLAlchemyError)):
            session.rows(f"INSERT INTO {table} VALUES (%s, 0)", (k,))
    assert backend.primary_query(f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_a_write_in_flight_when_the_primary_is_lost_is_never_sent_again(
    form: Form, backend: Replication, table: str
) -> None:
    """The update sleeps a second on the primary; its connection is killed meanwhile, which
    interrupts it before it changes the row.  Sent again, it would add one."""
    session = form.session()
    session.rows(f"INSERT INTO {table} VALUES (1, 0)")
    statement = f"UPDATE {table} SET v = v + 1 WHERE k = 1 AND SLEEP(1) = 0"

    def kill_it() -> None:
        for _ in range(90):  # until it runs (or well past the second it sleeps)
            time.sleep(0.01)
            running = backend.primary_query(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s",
                (f"UPDATE {table} SET%",),
            )
            for (thread,) in running:
                backend.primary_query(f"KILL {int(thread)}")
            if running:
                return

    killer = threading.Thread(target=kill_it)
    killer.start()
    try:
        with pytest.raises(DB_ERRORS) as info:
            session.rows(statement)
    finally:
        killer.join()
    assert errno_of(info.value) in DISCONNECTS, info.value
    time.sleep(1.2)  # a second attempt would have slept its second by now
    assert backend.primary_query(f"SELECT v FROM {table}") == [(0,)]


def test_a_primary_lost_between_statements(form: Form, backend: Replication, table: str) -> None:
    session = form.session()
    session.rows(f"INSERT INTO {table} VALUES (1, 10)")
    assert drop_primary_connections(backend) >= 1
    time.sleep(0.3)  # the form may notice the closed socket before the next statement
    if form.kind == "proxy":
        # By design the proxy multiplexes: between statements the session holds no primary
        # connection of its own (DESIGN.md, "borrows a connection for a statement or a
        # transaction"), so losing an idle pooled one loses none of the session's state, and
        # the write runs once, on a fresh connection with the session's state replayed.
        session.rows(f"INSERT INTO {table} VALUES (2, 20)")
        assert count(backend, table, 2) == 1
        return
    # The wrapper (and SQLAlchemy and asyncio over it) holds one primary connection per
    # session, as PyMySQL does: its session state is gone, so is the session.
    with pytest.raises(DB_ERRORS) as info:
        session.rows(f"INSERT INTO {table} VALUES (2, 20)")
    assert errno_of(info.value) in DISCONNECTS, info.value
    time.sleep(0.3)  # time for a (wrong) second attempt to land
    assert count(backend, table, 2) == 0
    assert count(backend, table, 1) == 1
