"""Topology specs, and a real-time smoke test over TCP: every server on its own port, PyMySQL
writing on the primary and reading a lagging replica, SHOW REPLICA STATUS and the
performance_schema lag tables queried over the wire."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent.emulator import start_topology
from consistent.emulator.replication import (
    ChannelSpec,
    Fixed,
    LagModel,
    ServerSpec,
    TopologyError,
    TopologySpec,
    Uniform,
)
from consistent.emulator.replication.threaded import TopologyThread

LAG = 0.3


# ----- specs ------------------------------------------------------------------------------------


def test_shapes() -> None:
    star = TopologySpec.primary_with_replicas(3, lag=["10ms", "20ms", "30ms"], delay=[0, 0, 60])
    assert star.roots == ("primary",)
    assert star.replicas == ("replica1", "replica2", "replica3")
    assert [c.lag.network for c in star.channels] == [Fixed(0.01), Fixed(0.02), Fixed(0.03)]
    assert [c.delay for c in star.channels] == [0, 0, 60]
    chain = TopologySpec.chain(4)
    assert [(c.source, c.replica) for c in chain.channels] == [("a", "b"), ("b", "c"), ("c", "d")]
    assert chain.upstream("d") == ("c", "b", "a")
    multi = TopologySpec.multi_source(3, lag="1ms..2ms")
    assert [c.name for c in multi.channels] == ["s1", "s2", "s3"]
    assert multi.roots == ("s1", "s2", "s3")
    assert all(c.lag.network == Uniform(0.001, 0.002) for c in multi.channels)
    uuids = {s.uuid_for() for s in star.servers}
    assert len(uuids) == 4
    assert TopologySpec.chain(2).server("a").uuid_for() == chain.server("a").uuid_for()


@pytest.mark.parametrize(
    "make",
    [
        lambda: TopologySpec(()),
        lambda: TopologySpec((ServerSpec("a"), ServerSpec("a"))),
        lambda: TopologySpec((ServerSpec("a"),), (ChannelSpec("a", "zz"),)),
        lambda: TopologySpec((ServerSpec("a"),), (ChannelSpec("a", "a"),)),
        lambda: TopologySpec(
            (ServerSpec("a", log_bin=False), ServerSpec("b")), (ChannelSpec("a", "b"),)
        ),
        lambda: TopologySpec(
            (ServerSpec("a"), ServerSpec("b"), ServerSpec("c")),
            (ChannelSpec("a", "c", name="x"), ChannelSpec("b", "c", name="X")),
        ),
        lambda: TopologySpec(
            (
                ServerSpec("a", server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562"),
                ServerSpec("b", server_uuid="3E11FA47-71CA-11E1-9E33-C80AA9429562"),
            )
        ),
        lambda: TopologySpec.chain(1),
        lambda: TopologySpec.primary_with_replicas(2, lag=["1ms"]),
    ],
)
def test_inconsistent_specs_are_rejected(make: Any) -> None:
    with pytest.raises(TopologyError):
        make()


# ----- real time over TCP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topo() -> Iterator[TopologyThread]:
    with start_topology(replicas=2, lag=LagModel(network=Fixed(LAG), workers=2)) as running:
        yield running


def _gtid_executed(conn: Any) -> str:
    with conn.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.gtid_executed")
        return str(cursor.fetchone()[0])


def _dict_rows(conn: Any, sql: str, args: Any = None) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


def test_each_server_has_its_own_port(topo: TopologyThread) -> None:
    ports = topo.ports
    assert len(set(ports.values())) == 3
    for endpoint in topo.servers:
        assert endpoint.host == "127.0.0.1"
        conn = topo.connect(endpoint)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT @@server_uuid, @@hostname, @@port")
                assert cursor.fetchone() == (endpoint.server_uuid, endpoint.name, endpoint.port)
        finally:
            conn.close()


def test_read_your_write_needs_a_wait_on_a_lagging_replica(topo: TopologyThread) -> None:
    primary = topo.connect()
    replica = topo.connect(topo.replicas[0])
    try:
        with primary.cursor() as cursor:
            cursor.execute("CREATE DATABASE IF NOT EXISTS smoke")
            cursor.execute("CREATE TABLE IF NOT EXISTS smoke.t (id INT PRIMARY KEY, v TEXT)")
        topo.wait_for_all()
        with primary.cursor() as cursor:
            cursor.execute("INSERT INTO smoke.t VALUES (1, 'written')")
        gtids = _gtid_executed(primary)
        written_at = time.monotonic()
        assert _dict_rows(replica, "SELECT * FROM smoke.t WHERE id = 1") == []
        waited = _dict_rows(replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 10) AS r", (gtids,))
        assert waited == [{"r": 0}]
        assert time.monotonic() - written_at >= LAG * 0.8
        assert _dict_rows(replica, "SELECT v FROM smoke.t WHERE id = 1") == [{"v": "written"}]
    finally:
        primary.close()
        replica.close()


def test_replica_status_and_lag_tables_over_the_wire(topo: TopologyThread) -> None:
    primary = topo.connect()
    replica = topo.connect(topo.replicas[1])
    try:
        with primary.cursor() as cursor:
            cursor.execute("CREATE DATABASE IF NOT EXISTS wire_status")
        gtids = _gtid_executed(primary)
        _dict_rows(replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 10)", (gtids,))
        status = _dict_rows(replica, "SHOW REPLICA STATUS")[0]
        assert (status["Replica_IO_Running"], status["Replica_SQL_Running"]) == ("Yes", "Yes")
        assert status["Source_Port"] == topo.primary.port
        assert status["Source_UUID"] == topo.primary.server_uuid
        assert status["Executed_Gtid_Set"] == gtids
        assert status["Retrieved_Gtid_Set"] == gtids
        assert status["Seconds_Behind_Source"] == 0
        assert status["SQL_Delay"] == 0
        assert status["SQL_Remaining_Delay"] is None
        legacy = _dict_rows(replica, "SHOW SLAVE STATUS")[0]
        assert (legacy["Slave_IO_Running"], legacy["Master_Port"]) == ("Yes", topo.primary.port)

        last = gtids.split(":")[0] + ":" + gtids.split("-")[-1].split(":")[-1]
        rows = _dict_rows(
            replica,
            "SELECT * FROM performance_schema.replication_applier_status_by_worker "
            "WHERE LAST_APPLIED_TRANSACTION = %s",
            (last,),
        )
        assert len(rows) == 1
        row = rows[0]
        oct_ = row["LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP"]
        start = row["LAST_APPLIED_TRANSACTION_START_APPLY_TIMESTAMP"]
        end = row["LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP"]
        assert isinstance(oct_, dt.datetime)
        assert isinstance(end, dt.datetime)
        assert oct_ < start <= end
        assert (start - oct_).total_seconds() >= LAG * 0.8
        assert row["APPLYING_TRANSACTION"] == ""
        connection = _dict_rows(
            replica, "SELECT * FROM performance_schema.replication_connection_status"
        )[0]
        assert connection["SERVICE_STATE"] == "ON"
        assert connection["LAST_QUEUED_TRANSACTION"] == last
    finally:
        primary.close()
        replica.close()


def test_pause_and_resume_a_replica(topo: TopologyThread) -> None:
    primary = topo.connect()
    replica = topo.connect(topo.replicas[0])
    try:
        topo.pause(0)
        with primary.cursor() as cursor:
            cursor.execute("CREATE DATABASE IF NOT EXISTS paused_db")
        gtids = _gtid_executed(primary)
        timed_out = _dict_rows(replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 0.5) AS r", (gtids,))
        assert timed_out == [{"r": 1}]
        assert topo.replica_status(0)["Replica_SQL_Running"] == "No"
        topo.resume(0)
        done = _dict_rows(replica, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 10) AS r", (gtids,))
        assert done == [{"r": 0}]
    finally:
        primary.close()
        replica.close()


def test_change_replication_source_over_the_wire() -> None:
    spec = TopologySpec((ServerSpec("left"), ServerSpec("right")))
    with start_topology(spec) as running:
        left, right = running.connect("left"), running.connect("right")
        try:
            with right.cursor() as cursor:
                cursor.execute(
                    "CHANGE REPLICATION SOURCE TO SOURCE_HOST = '127.0.0.1', SOURCE_PORT = %s, "
                    "SOURCE_USER = 'root', SOURCE_AUTO_POSITION = 1",
                    (running.endpoint("left").port,),
                )
                cursor.execute("START REPLICA")
            with left.cursor() as cursor:
                cursor.execute("CREATE DATABASE linked")
            gtids = _gtid_executed(left)
            waited = _dict_rows(right, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 5) AS r", (gtids,))
            assert waited == [{"r": 0}]
            assert running.executed("right") == gtids
        finally:
            left.close()
            right.close()


def test_kill_and_restart_a_replica() -> None:
    with start_topology(replicas=1, lag="10ms") as running:
        port = running.replicas[0].port
        running.kill(0)
        with pytest.raises(pymysql.err.OperationalError):
            pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=2)
        primary = running.connect()
        try:
            with primary.cursor() as cursor:
                cursor.execute("CREATE DATABASE while_down")
            time.sleep(0.1)
            assert running.replica_position(0) == ""
            running.restart(0)
            running.wait_for_all()
            assert running.replica_position(0) == running.primary_position()
            replica = running.connect(0)
            replica.close()
            assert running.endpoint(0).port == port
        finally:
            primary.close()


def test_virtual_time_refuses_sockets() -> None:
    from consistent.emulator import start_topology_async
    from consistent.emulator.replication import run_virtual

    async def scenario(clock: object) -> None:
        with pytest.raises(TopologyError, match="serve=False"):
            await start_topology_async(replicas=1, clock=clock)  # type: ignore[arg-type]

    run_virtual(scenario)
