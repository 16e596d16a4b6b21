"""Role discovery through the DB-API wrapper, on real MariaDB: a planned switchover under a
write-then-read workload, the primary killed and a replica promoted, an open transaction, and
split brain (kept and refused).

Each topology is its own (a switchover changes it for good).  The connections name the old
primary as their primary throughout: only the monitors say where writes go."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import consistent.dbapi as db
from consistent import trace
from consistent.dbapi.monitor import process_monitors
from consistent.gtid import MariaPosition
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.policy.roles import SharedRoles
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.switchover import (
    CLEAN,
    Workload,
    check_failover,
    promotable_topology,
    wait_for,
)

pytestmark = pytest.mark.mariadb


@pytest.fixture
def promotable() -> Iterator[MariaDBTopology]:
    with promotable_topology() as topology:
        yield topology


class Sessions:
    """Wrapper connections of one process (one knowledge, one acknowledged state), all
    configured with the topology as it was at the start."""

    def __init__(self, topology: MariaDBTopology, **options: Any) -> None:
        self.knowledge = ReplicaKnowledge()
        self.acknowledged = AcknowledgedWrites()
        self.params: dict[str, Any] = {
            "primary": f"127.0.0.1:{topology.primary.port}",
            "replicas": [f"127.0.0.1:{r.port}" for r in topology.replicas],
            "user": topology.app_user,
            "password": topology.app_password,
            "database": "sw",
            "monitor_interval": 0.05,
            "connect_timeout": 2,
            "read_timeout": 10,
            "knowledge": self.knowledge,
            "acknowledged": self.acknowledged,
            **options,
        }
        self.servers = [self.params["primary"], *self.params["replicas"]]
        # The monitors start with the first connection, which this one keeps running.
        self.keeper = self.connect()

    def connect(self, **options: Any) -> db.Connection:
        return db.connect(**{**self.params, **options})

    @property
    def roles(self) -> SharedRoles:
        return process_monitors().roles(self.knowledge, self.servers[0], self.servers)

    def close(self) -> None:
        with contextlib.suppress(db.Error):
            self.keeper.close()


@pytest.fixture
def sessions(promotable: MariaDBTopology) -> Iterator[Sessions]:
    opened = Sessions(promotable)
    yield opened
    opened.close()


def address(server: Any) -> str:
    return f"127.0.0.1:{server.port}"


def primary_port(conn: db.Connection) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@port FROM DUAL FOR UPDATE")
        return int(cur.fetchall()[0][0])


@pytest.mark.parametrize("persistent", [False, True], ids=["session-per-pair", "long-sessions"])
def test_a_planned_switchover_moves_writes_to_the_new_primary_without_losing_any(
    promotable: MariaDBTopology, sessions: Sessions, persistent: bool
) -> None:
    old, new = address(promotable.primary), address(promotable.replicas[0])
    wait_for(lambda: sessions.roles.verdict is not None and sessions.roles.primary == old)
    # The control: eventual sessions, with one replica not applying, do read stale rows.
    promotable.replicas[1].query("STOP SLAVE SQL_THREAD")
    with (
        Workload(sessions.connect, persistent=persistent) as work,
        Workload(
            lambda: sessions.connect(level="eventual"), persistent=True, table="control"
        ) as control,
    ):
        wait_for(lambda: len(work.acknowledged) >= 20 and control.violations > 0)
        promotable.replicas[1].query("START SLAVE SQL_THREAD")  # a planned switchover waits
        promoted_at = promotable.switchover(0)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and sessions.roles.primary == new)
        acknowledged_before = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged_before + 20)
    print(
        f"wrapper switchover ({'long sessions' if persistent else 'a session per pair'}): "
        f"first write acknowledged {work.first_write_after(promoted_at) * 1e3:.0f} ms after "
        f"the promotion; {len(work.acknowledged)} writes, {len(work.errors)} errors "
        f"({sorted(work.codes())}), {work.violations} violations; "
        f"eventual control: {control.violations} stale reads"
    )
    assert work.violations == 0, work.seen_wrong[:3]
    assert control.violations > 0
    assert work.codes() <= CLEAN, work.errors[:5]
    roles = sessions.roles
    assert (roles.primary, roles.changes, roles.split_brain) == (new, 1, False)
    promotable.wait_for_all()
    rows = promotable.primary.query("SELECT id, COUNT(*) AS n FROM sw.t GROUP BY id")
    counts = {int(r["id"]): int(r["n"]) for r in rows}
    assert all(counts.get(ident) == 1 for ident in work.acknowledged)
    assert max(counts.values()) == 1
    # The connection opened before the switchover follows it too, and the old primary is
    # one of its replicas now.
    assert primary_port(sessions.keeper) == promotable.primary.port
    assert address(promotable.replicas[-1]) == old
    assert old in sessions.keeper.replicas


def test_a_session_keeps_its_state_and_token_when_it_follows_the_primary(
    promotable: MariaDBTopology, sessions: Sessions
) -> None:
    conn = sessions.connect()
    pinned = sessions.connect()
    with conn.cursor() as cur, pinned.cursor() as other:
        cur.execute("SET SESSION group_concat_max_len = 4242")
        cur.execute("INSERT INTO t VALUES (700, 700)")
        other.execute("SET @mark = 42")  # a user variable: only the old primary has it
    token = conn.token
    promotable.switchover(0)
    wait_for(lambda: sessions.roles.primary == address(promotable.primary))
    with conn.cursor() as cur:
        cur.execute("SELECT @@group_concat_max_len FROM DUAL FOR UPDATE")  # the new primary
        assert cur.fetchall() == ((4242,),)
        cur.execute("INSERT INTO t VALUES (701, 701)")
        cur.execute("SELECT v FROM t WHERE id IN (700, 701) ORDER BY id")
        assert cur.fetchall() == ((700,), (701,))
    assert primary_port(conn) == promotable.primary.port
    # The token grew from the old one: the new primary's GTID continues the same domain.
    assert conn.token != token
    conn.close()
    with pinned.cursor() as other, pytest.raises(db.OperationalError) as lost:
        other.execute("SELECT @mark")
    assert lost.value.args[0] == 2013
    assert "user_variable" in str(lost.value)
    pinned.close()


def test_a_transaction_open_on_the_old_primary_fails_at_its_next_statement(
    promotable: MariaDBTopology, sessions: Sessions
) -> None:
    conn = sessions.connect()
    with conn.cursor() as cur:
        conn.begin()
        cur.execute("INSERT INTO t VALUES (900, 900)")
        promotable.primary.query("SET GLOBAL read_only = 1")  # as a switchover starts
        promotable.switchover(0)
        wait_for(lambda: sessions.roles.primary == address(promotable.primary))
        with pytest.raises(db.OperationalError) as lost:
            cur.execute("INSERT INTO t VALUES (901, 901)")
        assert lost.value.args[0] == 2013
        assert "a transaction" in str(lost.value)
        with pytest.raises(db.OperationalError):
            cur.execute("SELECT 1")  # the session stays lost
    promotable.wait_for_all()
    for server in promotable.servers:
        rows = server.query("SELECT COUNT(*) AS n FROM sw.t WHERE id IN (900, 901)")
        assert rows[0]["n"] == 0  # nothing was re-sent
    with pytest.warns(DeprecationWarning, match="reconnect"):
        conn.ping(reconnect=True)  # a fresh session, on the new primary
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (902, 902)")
    assert primary_port(conn) == promotable.primary.port
    conn.close()


def test_the_primary_killed_and_a_replica_promoted_takes_the_writes(
    promotable: MariaDBTopology, sessions: Sessions
) -> None:
    new = address(promotable.replicas[0])
    with Workload(sessions.connect, persistent=True) as work:
        wait_for(lambda: len(work.acknowledged) >= 20)
    promotable.wait_for_all()
    before = list(work.acknowledged)
    with Workload(sessions.connect, persistent=True, first_id=work.next_id + 1) as work:
        wait_for(lambda: len(work.acknowledged) >= 5)
        promotable.primary.process.kill()
        promoted_at = promotable.switchover(0, planned=False)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and sessions.roles.primary == new)
        acknowledged = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged + 20)
    print(
        f"wrapper failover: first write acknowledged "
        f"{work.first_write_after(promoted_at) * 1e3:.0f} ms after the promotion; "
        f"{len(work.errors)} errors ({sorted(work.codes())}), {work.violations} violations"
    )
    assert work.codes() <= CLEAN, work.errors[:5]
    # A read may miss only a write the failover lost (its session is told, in its spans).
    check_failover(promotable, work, before)


def make_rogue(topology: MariaDBTopology) -> Any:
    rogue = topology.replicas[1]
    with contextlib.closing(rogue.admin()) as conn, conn.cursor() as cursor:
        cursor.execute("STOP SLAVE")
        cursor.execute("RESET SLAVE ALL")
        cursor.execute("SET GLOBAL read_only = 0")
    return rogue


def test_two_writable_servers_are_split_brain_and_writes_stay_on_the_known_primary(
    promotable: MariaDBTopology, sessions: Sessions
) -> None:
    primary = address(promotable.primary)
    wait_for(lambda: sessions.roles.verdict is not None)
    rogue = make_rogue(promotable)
    wait_for(lambda: sessions.roles.split_brain)
    assert sessions.roles.primary == primary
    assert sessions.roles.verdict is not None
    assert sorted(sessions.roles.verdict.writable) == sorted([primary, address(rogue)])
    conn = sessions.connect()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (800, 800)")  # keep: the known primary takes it
    assert primary_port(conn) == promotable.primary.port
    rogue.query("SET GLOBAL read_only = 1")
    wait_for(lambda: not sessions.roles.split_brain)
    assert sessions.roles.changes == 0
    conn.close()


def test_on_split_brain_refuse_sends_nothing_to_the_primary_until_it_resolves(
    promotable: MariaDBTopology,
) -> None:
    refusing = Sessions(promotable, on_split_brain="refuse")
    try:
        wait_for(lambda: refusing.roles.verdict is not None)
        conn = refusing.connect()
        rogue = make_rogue(promotable)
        wait_for(lambda: refusing.roles.split_brain)
        with conn.cursor() as cur:
            with pytest.raises(db.OperationalError) as refused:
                cur.execute("INSERT INTO t VALUES (810, 810)")
            assert refused.value.args[0] == 1290
            assert "split brain" in str(refused.value)
            rogue.query("SET GLOBAL read_only = 1")
            wait_for(lambda: not refusing.roles.split_brain)
            cur.execute("INSERT INTO t VALUES (811, 811)")
        for server in promotable.servers:
            rows = server.query("SELECT COUNT(*) AS n FROM sw.t WHERE id = 810")
            assert rows[0]["n"] == 0
        conn.close()
    finally:
        refusing.close()


def test_gtids_a_failover_lost_are_named_in_every_span_of_the_sessions_that_required_them(
    promotable: MariaDBTopology,
) -> None:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    traced = Sessions(promotable, telemetry=telemetry)
    try:
        wait_for(lambda: traced.roles.verdict is not None)
        writer, bystander = traced.connect(), traced.connect()
        behind = promotable.replicas[0]
        behind.query("STOP SLAVE")  # it will not get the next write
        with writer.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (1000, 1000)")
        lost_gtid = writer.token.removeprefix("mariadb:")
        promotable.primary.process.kill()  # the write never reached the promoted replica
        promotable.switchover(0, planned=False, recover=False)
        wait_for(lambda: traced.roles.history is not None)
        with bystander.cursor() as cur:  # it required nothing the failover lost
            cur.execute("INSERT INTO t VALUES (1001, 1001)")
            cur.execute("SELECT v FROM t WHERE id = 1001")
            assert cur.fetchall() == ((1001,),)
        with writer.cursor() as cur:
            cur.execute("SELECT v FROM t WHERE id = 1000")
            assert cur.fetchall() == ()  # the write is gone everywhere
        # By sequence numbers the new primary now "covers" the lost GTID: only the server
        # ids tell it lacks it.
        [(position,)] = [
            tuple(r.values())
            for r in promotable.primary.query("SELECT @@GLOBAL.gtid_binlog_pos AS p")
        ]
        assert MariaPosition.parse(str(position)).covers(MariaPosition.parse(lost_gtid))
        assert telemetry.flush(10)
        by_session: dict[object, list[dict[str, object]]] = {}
        for record in memory.records:
            by_session.setdefault(record.attributes.get(trace.SESSION_ID), []).append(
                dict(record.attributes)
            )
        # The change of primary is a record of its own, once per process and change.
        changes = by_session[None]
        assert [(c[trace.ROLE_PREVIOUS], c[trace.ROLE_PRIMARY]) for c in changes] == [
            (traced.servers[0], address(promotable.primary))
        ]
        assert trace.check_attributes(trace.ROLE_CHANGE_SPAN, changes[0]) == ()
        writer_spans = by_session[writer.tracer.session_id]
        assert writer_spans[-1][trace.GTID_LOST] == lost_gtid
        assert all(trace.GTID_LOST not in span for span in by_session[bystander.tracer.session_id])
        writer.reset_token()
        with writer.cursor() as cur:
            cur.execute("SELECT 1")
        assert telemetry.flush(10)
        last = [
            r
            for r in memory.records
            if r.attributes.get(trace.SESSION_ID) == writer.tracer.session_id
        ][-1]
        assert trace.GTID_LOST not in last.attributes
        writer.close()
        bystander.close()
    finally:
        traced.close()
        telemetry.shutdown()


def test_an_unplanned_switchover_first_recovers_what_another_replica_received(
    promotable: MariaDBTopology,
) -> None:
    """The test topology's failover, as failover tools do it: the replica promoted takes what
    another replica received beyond it, so that none is left ahead of the new primary (it
    could not replicate from it) and no acknowledged write is lost."""
    promotable.replicas[0].query("STOP SLAVE")  # it will not get the next write
    promotable.primary.query("INSERT INTO sw.t VALUES (1100, 1100)")
    promotable.wait_for_catchup(1)
    promotable.primary.process.kill()
    promotable.switchover(0, planned=False)
    promotable.primary.query("INSERT INTO sw.t VALUES (1101, 1101)")
    promotable.wait_for_all()  # the other replica follows the new primary
    for server in promotable.servers:
        rows = server.query("SELECT id FROM sw.t WHERE id >= 1100 ORDER BY id")
        assert [r["id"] for r in rows] == [1100, 1101], server.name
