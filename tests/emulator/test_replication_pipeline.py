"""The replica pipeline under its lag model, in virtual time: network order, workers, commit
order, pauses, bursts, thread control, waits on a lagging replica, multi-source, and the
gtid_executed compression thread on a passive replica."""

from __future__ import annotations

import pytest

from consistent.emulator.binlog import BinlogTransaction
from consistent.emulator.errors import SqlError
from consistent.emulator.replication import (
    Burst,
    ChannelSpec,
    Fixed,
    LagModel,
    Pause,
    ServerSpec,
    Stage,
    TopologySpec,
    Uniform,
    VirtualClock,
)
from consistent.emulator.replication.testing import (
    dict_rows,
    execute,
    first,
    run_virtual,
    virtual_topology,
)
from consistent.emulator.server import EmulatedServer
from consistent.gtid import GtidSet


def one_replica(lag: LagModel, **options: object) -> TopologySpec:
    return TopologySpec.primary_with_replicas(1, lag=lag, **options)  # type: ignore[arg-type]


def logged(server: EmulatedServer) -> list[BinlogTransaction]:
    assert server.binlog is not None
    return list(server.binlog.transactions())


def offsets(server: EmulatedServer, since: float) -> list[float]:
    """Commit times of the server's logged transactions, seconds after ``since``."""
    return [t.immediate_commit_timestamp / 1e6 - since for t in logged(server)]


async def databases(server: EmulatedServer, count: int, prefix: str = "db") -> None:
    for i in range(count):
        await execute(server, f"CREATE DATABASE {prefix}{i}")


@pytest.mark.parametrize(("workers", "expected"), [(0, 4.0), (1, 4.0), (2, 2.0), (4, 1.0)])
def test_workers_apply_in_parallel(workers: int, expected: float) -> None:
    """Four transactions of 1 s each take 4 s on one applier, 1 s on four workers."""

    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(apply=Fixed(1.0), workers=workers)
        async with await virtual_topology(one_replica(lag), clock) as topo:
            t0 = clock()
            await databases(topo.server("primary"), 4)
            await topo.wait_for_catchup("replica1", timeout=60)
            assert clock() - t0 == expected

    run_virtual(scenario)


def test_network_keeps_order() -> None:
    """A slow first transaction holds back the ones sent after it (TCP is one stream)."""

    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(
            network=Fixed(0.25),
            bursts=(Burst(start=0.0, duration=0.5, extra=Fixed(3.0), stage=Stage.RECEIVER),),
            workers=0,
        )
        async with await virtual_topology(one_replica(lag), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            t0 = clock()
            await execute(primary, "CREATE DATABASE slow")  # sent inside the burst
            await clock.sleep(1.0)
            await execute(primary, "CREATE DATABASE fast")  # after the burst
            await clock.sleep(5.0)
            assert offsets(replica, t0) == [3.25, 3.25]
            assert [t.gtid for t in logged(replica)] == [t.gtid for t in logged(primary)]

    run_virtual(scenario)


def test_commit_order_is_preserved_unless_disabled() -> None:
    async def scenario(clock: VirtualClock, preserve: bool) -> list[int]:
        lag = LagModel(apply=Uniform(0.0, 2.0), workers=4, preserve_commit_order=preserve, seed=3)
        async with await virtual_topology(one_replica(lag), clock) as topo:
            await databases(topo.server("primary"), 8)
            await topo.wait_for_catchup("replica1", timeout=60)
            return [t.gtid.gno for t in logged(topo.server("replica1")) if t.gtid is not None]

    ordered = run_virtual(lambda clock: scenario(clock, True))
    unordered = run_virtual(lambda clock: scenario(clock, False))
    assert ordered == list(range(1, 9))
    assert sorted(unordered) == list(range(1, 9))
    assert unordered != ordered


def test_applier_pause_window() -> None:
    """The applier is paused during [1 s, 3 s): a transaction arriving at 1.5 s waits."""

    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(
            network=Fixed(0.5),
            pauses=(Pause(start=1.0, duration=2.0, stage=Stage.APPLIER),),
            workers=0,
        )
        async with await virtual_topology(one_replica(lag), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            t0 = clock()
            await execute(primary, "CREATE DATABASE early")
            await clock.sleep(1.0)
            await execute(primary, "CREATE DATABASE paused")
            await clock.sleep(3.0)
            await execute(primary, "CREATE DATABASE late")
            await clock.sleep(1.0)
            assert offsets(replica, t0) == [0.5, 3.0, 4.5]
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["Retrieved_Gtid_Set"] == status["Executed_Gtid_Set"]

    run_virtual(scenario)


def test_receiver_pause_repeats() -> None:
    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(
            pauses=(Pause(start=0.0, duration=1.0, every=4.0, stage=Stage.RECEIVER),),
            workers=0,
        )
        async with await virtual_topology(one_replica(lag), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            t0 = clock()
            for _ in range(3):
                await clock.sleep(0.5)  # 0.5, 4.5, 8.5: inside each window
                await execute(primary, f"CREATE DATABASE d{int(clock() - t0)}")
                await clock.sleep(3.5)
            assert offsets(replica, t0) == [1.0, 5.0, 9.0]

    run_virtual(scenario)


def test_io_and_sql_threads_stop_and_start_separately() -> None:
    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(network=Fixed(0.25), workers=2)
        async with await virtual_topology(one_replica(lag), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            uuid = primary.config.server_uuid
            await execute(replica, "STOP REPLICA SQL_THREAD")
            await databases(primary, 2)
            await clock.sleep(1.0)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert (status["Replica_IO_Running"], status["Replica_SQL_Running"]) == ("Yes", "No")
            assert status["Retrieved_Gtid_Set"] == f"{uuid}:1-2"
            assert status["Executed_Gtid_Set"] == ""
            assert status["Seconds_Behind_Source"] is None

            await execute(replica, "STOP REPLICA IO_THREAD")
            await execute(replica, "START REPLICA SQL_THREAD")
            await databases(primary, 1, prefix="while_io_stopped")
            await clock.sleep(1.0)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert (status["Replica_IO_Running"], status["Replica_SQL_Running"]) == ("No", "Yes")
            assert status["Executed_Gtid_Set"] == f"{uuid}:1-2"
            assert status["Seconds_Behind_Source"] is None  # relay log applied, no receiver

            await execute(replica, "START REPLICA IO_THREAD")  # auto-positioning fetches :3
            await clock.sleep(1.0)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["Executed_Gtid_Set"] == f"{uuid}:1-3"
            assert status["Seconds_Behind_Source"] == 0

            outcome = await replica.open_session().query_all("START REPLICA")
            assert outcome[-1].warnings == 1

    run_virtual(scenario)


def test_wait_for_executed_gtid_set_on_a_lagging_replica() -> None:
    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(network=Fixed(5.0), apply=Fixed(0.5), workers=1)
        async with await virtual_topology(one_replica(lag), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            t0 = clock()
            await execute(primary, "CREATE DATABASE d")
            gtid = primary.gtid_state.executed.to_text()
            session = replica.open_session()
            outcome = await session.query_all(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{gtid}', 2)")
            assert outcome[-1].result is not None
            assert outcome[-1].result.rows == ((1,),)
            assert clock() - t0 == 2.0
            outcome = await session.query_all(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{gtid}', 60)")
            assert outcome[-1].result is not None
            assert outcome[-1].result.rows == ((0,),)
            assert clock() - t0 == 5.5
            assert GtidSet.parse(gtid) <= replica.gtid_state.executed
            await session.close()

    run_virtual(scenario)


def test_compression_thread_on_a_passive_replica() -> None:
    """Binary log off: every applied GTID is a row of mysql.gtid_executed until the
    compression thread (every ``gtid_executed_compression_period`` saves) merges them."""

    async def scenario(clock: VirtualClock, period: int) -> list[tuple[str, int, int]]:
        spec = TopologySpec.primary_with_replicas(
            1, lag=LagModel(workers=2), replica_log_bin=False, compression_period=period
        )
        async with await virtual_topology(spec, clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await databases(primary, 7)
            await topo.wait_for_catchup("replica1")
            await clock.sleep(1.0)
            await replica.compressor.wait_idle()
            assert replica.binlog is None
            assert replica.gtid_state.executed == primary.gtid_state.executed
            threads = await dict_rows(
                replica,
                "SELECT NAME FROM performance_schema.threads "
                "WHERE NAME = 'thread/sql/compress_gtid_table'",
            )
            assert len(threads) == 1
            return replica.gtid_table_rows()

    uncompressed = run_virtual(lambda clock: scenario(clock, 0))
    assert [(s, e) for _, s, e in uncompressed] == [(i, i) for i in range(1, 8)]
    compressed = run_virtual(lambda clock: scenario(clock, 3))
    uuid = uncompressed[0][0]
    # Signalled after the 4th save (pre-increment count == 3): rows 1-4 merge; 5-7 wait for
    # the next signal.
    assert compressed == [(uuid, 1, 4), (uuid, 5, 5), (uuid, 6, 6), (uuid, 7, 7)]


def test_multi_source_replica() -> None:
    async def scenario(clock: VirtualClock) -> None:
        spec = TopologySpec.multi_source(2, lag=LagModel(network=Fixed(0.25), workers=1))
        async with await virtual_topology(spec, clock) as topo:
            s1, s2, replica = (topo.server(n) for n in ("s1", "s2", "replica"))
            await execute(s1, "CREATE DATABASE from_s1")
            await execute(s2, "CREATE DATABASE from_s2")
            await topo.wait_for_catchup("replica")
            assert replica.gtid_state.executed == (s1.gtid_state.executed | s2.gtid_state.executed)
            rows = await dict_rows(replica, "SHOW REPLICA STATUS")
            assert [r["Channel_Name"] for r in rows] == ["s1", "s2"]
            assert [r["Source_UUID"] for r in rows] == [
                s1.config.server_uuid,
                s2.config.server_uuid,
            ]
            await execute(replica, "STOP REPLICA FOR CHANNEL 's1'")
            one = await first(replica, "SHOW REPLICA STATUS FOR CHANNEL 's1'")
            other = await first(replica, "SHOW REPLICA STATUS FOR CHANNEL 's2'")
            assert (one["Replica_SQL_Running"], other["Replica_SQL_Running"]) == ("No", "Yes")
            await execute(s1, "CREATE DATABASE late_s1")
            await execute(s2, "CREATE DATABASE late_s2")
            await clock.sleep(1.0)
            assert not s1.gtid_state.executed <= replica.gtid_state.executed
            assert s2.gtid_state.executed <= replica.gtid_state.executed
            workers = await dict_rows(
                replica,
                "SELECT CHANNEL_NAME, SERVICE_STATE FROM "
                "performance_schema.replication_applier_status_by_worker ORDER BY CHANNEL_NAME",
            )
            assert workers == [
                {"CHANNEL_NAME": "s1", "SERVICE_STATE": "OFF"},
                {"CHANNEL_NAME": "s2", "SERVICE_STATE": "ON"},
            ]

    run_virtual(scenario)


def test_diamond_applies_each_gtid_once() -> None:
    """p → a, p → b, a → r, b → r: r receives every transaction twice and applies it once."""

    async def scenario(clock: VirtualClock) -> None:
        lag = LagModel(network=Fixed(0.25), workers=2)
        spec = TopologySpec(
            tuple(ServerSpec(n) for n in ("p", "a", "b", "r")),
            (
                ChannelSpec("p", "a", lag=lag),
                ChannelSpec("p", "b", lag=lag),
                ChannelSpec("a", "r", name="via_a", lag=lag),
                ChannelSpec("b", "r", name="via_b", lag=lag),
            ),
        )
        async with await virtual_topology(spec, clock) as topo:
            await databases(topo.server("p"), 5)
            await clock.sleep(3.0)
            r = topo.server("r")
            assert r.gtid_state.executed == topo.server("p").gtid_state.executed
            assert len(logged(r)) == 5
            for row in await dict_rows(r, "SHOW REPLICA STATUS"):
                assert (row["Replica_SQL_Running"], row["Last_SQL_Errno"]) == ("Yes", 0)

    run_virtual(scenario)


def test_change_replication_source_over_sql_and_unknown_source() -> None:
    async def scenario(clock: VirtualClock) -> None:
        spec = TopologySpec((ServerSpec("left"), ServerSpec("right")))
        async with await virtual_topology(spec, clock) as topo:
            left, right = topo.server("left"), topo.server("right")
            await execute(
                right,
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'nowhere', SOURCE_PORT = 3306, "
                "SOURCE_USER = 'repl', SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 10",
            )
            await execute(right, "START REPLICA")
            status = await first(right, "SHOW REPLICA STATUS")
            assert status["Replica_IO_Running"] == "Connecting"
            assert status["Last_IO_Errno"] == 2003
            assert "nowhere:3306" in status["Last_IO_Error"]
            with pytest.raises(SqlError) as info:
                await execute(right, "CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'left'")
            assert info.value.code == 3021
            await execute(right, "STOP REPLICA")
            await execute(right, "CHANGE MASTER TO MASTER_HOST = 'left'")
            await execute(right, "START SLAVE")
            await execute(left, "CREATE DATABASE over_sql")
            await clock.sleep(1.0)
            assert right.gtid_state.executed == left.gtid_state.executed
            status = await first(right, "SHOW SLAVE STATUS")
            assert (status["Slave_IO_Running"], status["Last_IO_Errno"]) == ("Yes", 0)
            assert status["Master_Host"] == "left"
            await execute(right, "STOP REPLICA")
            await execute(right, "RESET REPLICA ALL")
            assert await dict_rows(right, "SHOW REPLICA STATUS") == []

    run_virtual(scenario)


def test_lag_can_change_while_running() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(one_replica(LagModel(workers=0)), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            t0 = clock()
            await execute(primary, "CREATE DATABASE quick")
            await clock.sleep(1.0)
            topo.set_lag("replica1", "2s")
            await execute(primary, "CREATE DATABASE slow")
            await clock.sleep(3.0)
            assert offsets(replica, t0) == [0.0, 3.0]

    run_virtual(scenario)


def test_receiver_stops_on_a_fatal_error() -> None:
    """A source with the same server UUID: the I/O thread stops with error 1593."""

    async def scenario(clock: VirtualClock) -> None:
        uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
        spec = TopologySpec((ServerSpec("x", server_uuid=uuid), ServerSpec("y")))
        async with await virtual_topology(spec, clock) as topo:
            y = topo.server("y")
            await execute(y, "CHANGE REPLICATION SOURCE TO SOURCE_HOST = 'y'")
            sessions = len(y.sessions)
            await execute(y, "START REPLICA IO_THREAD")
            status = await first(y, "SHOW REPLICA STATUS")
            assert (status["Replica_IO_Running"], status["Last_IO_Errno"]) == ("No", 1593)
            assert len(y.sessions) == sessions
            assert status["Last_IO_Error_Timestamp"] == "231114 22:13:20"

    run_virtual(scenario)
