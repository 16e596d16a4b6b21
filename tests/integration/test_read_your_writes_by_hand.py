"""Read-your-writes on real MariaDB replication, by hand: the problem and the primitive.

No middleware: PyMySQL with ``CLIENT_SESSION_TRACK`` talks to the primary, our OK-packet
parser reads the GTID that the server tracked, and the flavour's wait statement on a delayed
replica makes the next read see the write.
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pymysql.constants import CLIENT

from consistent.flavors import MARIADB, ServerRole, detect_flavor
from consistent.gtid import GtidState, MariaPosition
from consistent.policy.states import covers
from consistent.protocol import Capability, OkPacket, pack_lenenc_int, parse_ok
from consistent.testing.pytest_plugin import CleanDatabase
from consistent.vocabulary import Tracking, WaitOutcome

pytestmark = pytest.mark.mariadb

DELAY_SECONDS = 2
CAPS = int(Capability.PROTOCOL_41 | Capability.SESSION_TRACK)


def last_ok(conn: Any) -> OkPacket:
    """Rebuild the OK packet PyMySQL just read and parse it with our codec.

    PyMySQL keeps the OK packet's fields, and the raw bytes after its warning count (info and
    session state) in ``MySQLResult.message`` (reference §7).
    """
    result = conn._result
    assert result is not None
    assert result.message is not None, "the last response was not an OK packet"
    payload = (
        b"\x00"
        + pack_lenenc_int(result.affected_rows)
        + pack_lenenc_int(result.insert_id)
        + struct.pack("<HH", result.server_status, result.warning_count)
        + result.message
    )
    return parse_ok(payload, CAPS)


def scalar(conn: Any, sql: str) -> Any:
    with conn.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
        assert cursor.fetchone() is None
        return row[0]


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


@pytest.fixture
def tracked(mariadb_database: CleanDatabase) -> Iterator[Any]:
    """A primary connection with session tracking on and a table to write to."""
    conn = mariadb_database.connect(client_flag=CLIENT.SESSION_TRACK)
    with contextlib.closing(conn):
        flavor = detect_flavor(conn.server_version)
        assert flavor is MARIADB
        statement = flavor.tracking_statement(
            Tracking.OWN, scalar(conn, flavor.tracking_probe() or "")
        )
        assert statement is not None
        with conn.cursor() as cursor:
            cursor.execute(statement)
            cursor.execute("CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(50))")
        mariadb_database.topology.wait_for_all()
        yield conn


def write(conn: Any, note_id: int) -> GtidState:
    """Insert a row and return the GTID the OK packet reported for it."""
    with conn.cursor() as cursor:
        cursor.execute("INSERT INTO notes VALUES (%s, 'mine')", (note_id,))
    required = MARIADB.gtids_from_ok(last_ok(conn))
    assert required is not None, "the INSERT's OK packet carried no last_gtid"
    return required


def test_the_ok_packet_reports_the_gtid_the_server_committed(
    tracked: Any, mariadb_database: CleanDatabase
) -> None:
    before = MARIADB.parse_executed(mariadb_database.topology.primary_position())
    required = write(tracked, 1)
    assert isinstance(required, MariaPosition)
    assert MARIADB.format_state(required) == scalar(tracked, "SELECT @@last_gtid")
    (gtid,) = required.gtids()
    assert (gtid.domain, gtid.server_id) == (0, mariadb_database.topology.primary.server_id)
    assert not covers(before, required)
    executed = MARIADB.parse_executed(
        scalar(tracked, MARIADB.executed_state_statement(ServerRole.PRIMARY))
    )
    assert covers(executed, required)
    # The next write gets the next sequence number in the same domain.
    (following,) = write(tracked, 2).gtids()  # type: ignore[union-attr]
    assert (following.domain, following.seq_no) == (0, gtid.seq_no + 1)


def test_a_delayed_replica_misses_the_write_until_the_wait_says_it_is_there(
    tracked: Any, mariadb_database: CleanDatabase
) -> None:
    topology = mariadb_database.topology
    topology.delay(0, DELAY_SECONDS)
    replica = topology.replicas[0]
    with contextlib.closing(mariadb_database.connect(replica)) as reader:
        written = time.monotonic()
        required = write(tracked, 42)

        # The problem: the replica has not applied our own write yet.
        assert rows(reader, "SELECT id FROM notes WHERE id = 42") == []
        executed = MARIADB.parse_executed(
            scalar(reader, MARIADB.executed_state_statement(ServerRole.REPLICA))
        )
        assert not covers(executed, required)

        # A wait that gives up quickly says so, and the row is still missing.
        started = time.monotonic()
        outcome = MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 0.2)))
        assert outcome is WaitOutcome.TIMED_OUT
        assert 0.15 <= time.monotonic() - started < DELAY_SECONDS
        assert rows(reader, "SELECT id FROM notes WHERE id = 42") == []

        # The primitive: wait for the tracked GTID, then the same read sees the write.
        outcome = MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 10)))
        assert outcome is WaitOutcome.REACHED
        assert time.monotonic() - written >= DELAY_SECONDS - 1  # MASTER_DELAY has 1 s steps
        assert rows(reader, "SELECT id, body FROM notes WHERE id = 42") == [(42, "mine")]
        executed = MARIADB.parse_executed(
            scalar(reader, MARIADB.executed_state_statement(ServerRole.REPLICA))
        )
        assert covers(executed, required)


def test_a_replica_that_is_not_delayed_satisfies_the_wait_at_once(
    tracked: Any, mariadb_database: CleanDatabase
) -> None:
    required = write(tracked, 7)
    replica = mariadb_database.topology.replicas[1]
    with contextlib.closing(mariadb_database.connect(replica)) as reader:
        started = time.monotonic()
        outcome = MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 5)))
        assert outcome is WaitOutcome.REACHED
        assert time.monotonic() - started < 2
        assert rows(reader, "SELECT id FROM notes") == [(7,)]


def test_a_zero_timeout_only_checks(tracked: Any, mariadb_database: CleanDatabase) -> None:
    topology = mariadb_database.topology
    topology.pause(0)
    required = write(tracked, 9)
    with contextlib.closing(mariadb_database.connect(topology.replicas[0])) as reader:
        started = time.monotonic()
        outcome = MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 0)))
        assert outcome is WaitOutcome.TIMED_OUT
        assert time.monotonic() - started < 1
        topology.resume(0)
        outcome = MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 10)))
        assert outcome is WaitOutcome.REACHED
        assert (
            MARIADB.wait_outcome(scalar(reader, MARIADB.wait_statement(required, 0)))
            is WaitOutcome.REACHED
        )


def test_statements_without_a_commit_report_no_gtid(tracked: Any) -> None:
    with tracked.cursor() as cursor:
        cursor.execute("SET @x = 1")
    assert MARIADB.gtids_from_ok(last_ok(tracked)) is None
    with tracked.cursor() as cursor:
        cursor.execute("DO 1")
    assert MARIADB.gtids_from_ok(last_ok(tracked)) is None
