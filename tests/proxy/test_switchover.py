"""Role discovery through the proxy, on real MariaDB: a planned switchover under a
write-then-read workload, and split brain.

Each topology here is its own (a switchover changes it for good), with replicas that keep binary
logs so that one can be promoted.  The workload opens a session per write-then-read pair, as a
web application's pool does after the proxy closes a session."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent import trace
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.switchover import (
    CLEAN,
    Workload,
    check_failover,
    promotable_topology,
    wait_for,
)
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import topology_config

pytestmark = pytest.mark.mariadb


@pytest.fixture
def promotable() -> Iterator[MariaDBTopology]:
    with promotable_topology() as topology:
        yield topology


@pytest.fixture
def proxy(promotable: MariaDBTopology) -> Iterator[ProxyThread]:
    started = ProxyThread(parse(topology_config(promotable)))
    started.start()
    try:
        yield started
    finally:
        started.stop()


def connect(proxy: ProxyThread, **kwargs: Any) -> Any:
    return pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user="app",
        password="app-secret",
        database="sw",
        autocommit=True,
        connect_timeout=5,
        read_timeout=10,
        **kwargs,
    )


def eventual(proxy: ProxyThread) -> Any:
    conn = connect(proxy)
    with conn.cursor() as cur:
        cur.execute("SET @@consistent_level = 'eventual'")
    return conn


def roles(proxy: ProxyThread) -> dict[str, Any]:
    status: dict[str, Any] = proxy.run(proxy.server.status)
    return dict(status["roles"])


@pytest.mark.parametrize("persistent", [False, True], ids=["session-per-pair", "long-sessions"])
def test_a_planned_switchover_moves_writes_to_the_new_primary_without_losing_any(
    promotable: MariaDBTopology, proxy: ProxyThread, persistent: bool
) -> None:
    old = f"127.0.0.1:{promotable.primary.port}"
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    assert roles(proxy)["primary"] == old
    # The control: eventual sessions, with one replica not applying, do read stale rows.
    promotable.replicas[1].query("STOP SLAVE SQL_THREAD")
    with (
        Workload(lambda: connect(proxy), persistent=persistent) as work,
        Workload(lambda: eventual(proxy), persistent=True, table="control") as control,
    ):
        wait_for(lambda: len(work.acknowledged) >= 20 and control.violations > 0)
        promotable.replicas[1].query("START SLAVE SQL_THREAD")  # a planned switchover waits
        promoted_at = promotable.switchover(0)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and roles(proxy)["primary"] == new)
        acknowledged_before = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged_before + 20)
    first_write = min(t for t in work.oks if t > promoted_at) - promoted_at
    print(
        f"switchover ({'long sessions' if persistent else 'a session per pair'}): "
        f"first write acknowledged {first_write * 1e3:.0f} ms after the promotion; "
        f"{len(work.acknowledged)} writes, {len(work.errors)} errors "
        f"({sorted({code for code, _ in work.errors})}), {work.violations} violations; "
        f"eventual control: {control.violations} stale reads"
    )
    assert work.violations == 0, work.seen_wrong[:3]
    assert control.violations > 0
    assert {code for code, _ in work.errors} <= CLEAN, work.errors[:5]
    status = roles(proxy)
    assert (status["primary"], status["primary_changes"], status["split_brain"]) == (new, 1, False)
    # Every acknowledged write is on the new primary, once: none lost, none applied twice.
    promotable.wait_for_all()
    rows = promotable.primary.query("SELECT id, COUNT(*) AS n FROM sw.t GROUP BY id")
    counts = {int(r["id"]): int(r["n"]) for r in rows}
    assert all(counts.get(ident) == 1 for ident in work.acknowledged)
    assert max(counts.values()) == 1
    # The old primary is a replica now: reads may go there, writes do not.
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@port FROM DUAL FOR UPDATE")
        assert cur.fetchall() == ((promotable.primary.port,),)


def test_two_writable_servers_are_reported_as_split_brain_until_one_is_read_only(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    primary = f"127.0.0.1:{promotable.primary.port}"
    rogue = promotable.replicas[1]
    wait_for(lambda: roles(proxy)["writable"] == [primary])
    with contextlib.closing(rogue.admin()) as conn, conn.cursor() as cursor:
        cursor.execute("STOP SLAVE")
        cursor.execute("RESET SLAVE ALL")
        cursor.execute("SET GLOBAL read_only = 0")
    wait_for(lambda: roles(proxy)["split_brain"] is True)
    status = roles(proxy)
    assert status["primary"] == primary  # writes go nowhere new
    assert sorted(status["writable"]) == sorted([primary, f"127.0.0.1:{rogue.port}"])
    metrics = proxy.server.metrics.render().decode()
    assert "consistent_proxy_split_brain 1.0" in metrics
    rogue.query("SET GLOBAL read_only = 1")
    wait_for(lambda: roles(proxy)["split_brain"] is False)
    assert roles(proxy)["primary_changes"] == 0


def test_a_transaction_open_on_the_old_primary_fails_at_its_next_statement(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t VALUES (900, 900)")
        promotable.primary.query("SET GLOBAL read_only = 1")  # as a switchover starts
        promotable.switchover(0)
        wait_for(lambda: roles(proxy)["primary"] == new)
        with pytest.raises(pymysql.OperationalError) as lost:
            cur.execute("INSERT INTO t VALUES (901, 901)")
        assert lost.value.args[0] in (2006, 2013) or "reconnect" in str(lost.value)
    # Neither write of the transaction exists anywhere: nothing was re-sent.
    promotable.wait_for_all()
    for server in promotable.servers:
        rows = server.query("SELECT COUNT(*) AS n FROM sw.t WHERE id IN (900, 901)")
        assert rows[0]["n"] == 0
    # A new session writes to the new primary.
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (902, 902)")
        cur.execute("SELECT @@port FROM DUAL FOR UPDATE")
        assert cur.fetchall() == ((promotable.primary.port,),)


def test_the_primary_killed_and_a_replica_promoted_takes_the_writes(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    with Workload(lambda: connect(proxy), persistent=True) as work:
        wait_for(lambda: len(work.acknowledged) >= 20)
    promotable.wait_for_all()  # what was acknowledged reached the replicas before the crash
    before = list(work.acknowledged)
    with Workload(lambda: connect(proxy), persistent=True, first_id=work.next_id + 1) as work:
        wait_for(lambda: len(work.acknowledged) >= 5)
        promotable.primary.process.kill()
        promoted_at = promotable.switchover(0, planned=False)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and roles(proxy)["primary"] == new)
        acknowledged = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged + 20)
    print(
        f"failover: first write acknowledged {work.first_write_after(promoted_at) * 1e3:.0f} ms "
        f"after the promotion; {len(work.errors)} errors ({sorted(work.codes())}), "
        f"{work.violations} violations"
    )
    assert {code for code, _ in work.errors} <= CLEAN, work.errors[:5]
    assert roles(proxy)["primary"] == new
    # A read may miss only a write the failover lost, and its session is counted.
    check_failover(promotable, work, before)
    if work.violations:
        assert proxy.server.metrics.lost_gtid_sessions >= 1


def test_on_split_brain_refuse_sends_nothing_to_the_primary_until_it_resolves(
    promotable: MariaDBTopology,
) -> None:
    refusing = ProxyThread(
        parse(topology_config(promotable, backends={"on_split_brain": "refuse"}))
    )
    refusing.start()
    try:
        wait_for(lambda: roles(refusing)["writable"] is not None)
        with contextlib.closing(connect(refusing)) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (810, 810)")  # the session has a primary link
            rogue = promotable.replicas[1]
            with contextlib.closing(rogue.admin()) as admin, admin.cursor() as cursor:
                cursor.execute("STOP SLAVE")
                cursor.execute("RESET SLAVE ALL")
                cursor.execute("SET GLOBAL read_only = 0")
            wait_for(lambda: roles(refusing)["refusing_writes"] is True)
            with pytest.raises(pymysql.OperationalError) as refused:
                cur.execute("INSERT INTO t VALUES (811, 811)")
            assert refused.value.args[0] == 1290
            assert "split brain" in refused.value.args[1]
            cur.execute("SELECT COUNT(*) FROM t")  # reads still go to the replicas
            rogue.query("SET GLOBAL read_only = 1")
            wait_for(lambda: roles(refusing)["split_brain"] is False)
            assert roles(refusing)["refusing_writes"] is False
            cur.execute("INSERT INTO t VALUES (812, 812)")
        rows = promotable.primary.query("SELECT id FROM sw.t WHERE id >= 810 ORDER BY id")
        assert [int(r["id"]) for r in rows] == [810, 812]
    finally:
        refusing.stop()


def test_gtids_a_failover_lost_are_named_and_a_replica_that_kept_them_serves_no_reads(
    promotable: MariaDBTopology,
) -> None:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(schedule_delay=0.05), exporters=[memory])
    with ProxyThread(parse(topology_config(promotable)), telemetry=telemetry) as traced:
        wait_for(lambda: roles(traced)["writable"] is not None)
        writer, bystander = connect(traced), connect(traced)
        with contextlib.closing(writer), contextlib.closing(bystander):
            promotable.replicas[0].query("STOP SLAVE")  # it will not get the next write
            with writer.cursor() as cur:
                cur.execute("INSERT INTO t VALUES (1000, 1000)")
                cur.execute("SELECT @@consistent_token")
                lost = str(cur.fetchall()[0][0]).removeprefix("mariadb:")
            promotable.primary.process.kill()  # the write reached replica 2 only
            promotable.switchover(0, planned=False, recover=False)
            new = f"127.0.0.1:{promotable.primary.port}"
            wait_for(lambda: roles(traced)["primary"] == new)
            wait_for(lambda: traced.server.metrics.lost_gtid_sessions == 1)
            with bystander.cursor() as cur:
                # Replica 2 kept the lost write: by sequence numbers it "covers" the new
                # primary's next GTID, and must not serve this read.
                cur.execute("INSERT INTO t VALUES (1001, 1001)")
                cur.execute("SELECT v FROM t WHERE id = 1001")
                assert cur.fetchall() == ((1001,),)
            with writer.cursor() as cur:
                cur.execute("SELECT v FROM t WHERE id = 1000")
                assert cur.fetchall() == ()  # the write is gone from the new history
        assert telemetry.flush(10)
        changes = [r for r in memory.records if r.name == trace.ROLE_CHANGE_SPAN]
        assert [r.attributes[trace.ROLE_PRIMARY] for r in changes] == [new]
        assert trace.check_attributes(trace.ROLE_CHANGE_SPAN, changes[0].attributes) == ()
        lost_spans = [r for r in memory.records if trace.GTID_LOST in r.attributes]
        assert lost_spans
        assert {r.attributes[trace.GTID_LOST] for r in lost_spans} == {lost}
        # One session (the writer's) required the lost GTID; the bystander's spans are clean.
        assert len({r.attributes[trace.SESSION_ID] for r in lost_spans}) == 1
        metrics = traced.server.metrics.render().decode()
        assert "consistent_proxy_lost_gtid_sessions_total 1" in metrics
    telemetry.shutdown()
