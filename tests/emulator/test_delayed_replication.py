"""Delayed replication (WL#7318, reference §6.2) in virtual time.

* ``SOURCE_DELAY`` bounds from ``rpl_delayed_slave.result``: -1 and ``blah`` are 1064,
  2147483647 is accepted, 2147483648 is 1729, RESET REPLICA sets it back to 0;
* ``check_slave_delay.inc``: ``CEILING((replica_ICT - source_ICT)/1e6) >= SQL_Delay``;
* the delay applies per transaction at its GTID event, relative to the immediate source;
* ``REMAINING_DELAY`` / ``SQL_Remaining_Delay`` count down while the applier waits.
"""

from __future__ import annotations

import math

import pytest

from consistent.emulator.binlog import BinlogTransaction
from consistent.emulator.config import VERSION_57
from consistent.emulator.errors import SqlError
from consistent.emulator.replication import (
    ChannelSpec,
    Fixed,
    LagModel,
    ServerSpec,
    TopologySpec,
    VirtualClock,
)
from consistent.emulator.replication.delay import (
    MAX_SOURCE_DELAY,
    WAITING_FOR_DELAY,
    check_delay,
    sql_delay_end,
)
from consistent.emulator.replication.testing import execute, first, run_virtual, virtual_topology
from consistent.emulator.server import EmulatedServer

DELAY = 10
NETWORK = 0.5


def delayed_spec(delay: int = DELAY, workers: int = 0) -> TopologySpec:
    return TopologySpec.primary_with_replicas(
        1, lag=LagModel(network=Fixed(NETWORK), workers=workers), delay=delay
    )


def transactions(server: EmulatedServer) -> list[BinlogTransaction]:
    assert server.binlog is not None
    return list(server.binlog.transactions())


@pytest.mark.parametrize(
    ("value", "errno"),
    [("-1", 1064), ("blah", 1064), ("2147483648", 1729), ("1.5", 1064), ("''", 1064)],
)
def test_source_delay_out_of_range_or_not_a_number(value: str, errno: int) -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            replica = topo.server("replica1")
            await execute(replica, "STOP REPLICA SQL_THREAD")
            for statement in (
                f"CHANGE REPLICATION SOURCE TO SOURCE_DELAY = {value}",
                f"CHANGE MASTER TO MASTER_DELAY = {value}",
            ):
                with pytest.raises(SqlError) as info:
                    await execute(replica, statement)
                assert info.value.code == errno
            if errno == 1729:
                assert str(info.value.args[1]) == (
                    "The requested value 2147483648 for the master delay exceeds the maximum "
                    "2147483647"
                )
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["SQL_Delay"] == DELAY

    run_virtual(scenario)


def test_source_delay_maximum_and_reset_replica() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            replica = topo.server("replica1")
            await execute(replica, "STOP REPLICA")
            await execute(replica, "CHANGE REPLICATION SOURCE TO SOURCE_DELAY = 2147483647")
            assert (await first(replica, "SHOW REPLICA STATUS"))["SQL_Delay"] == MAX_SOURCE_DELAY
            await execute(replica, "CHANGE MASTER TO MASTER_DELAY = 71")
            slave = await first(replica, "SHOW SLAVE STATUS")
            assert slave["SQL_Delay"] == 71
            # START/STOP keep the delay; RESET REPLICA sets it back to 0.
            await execute(replica, "START REPLICA")
            await execute(replica, "STOP REPLICA")
            assert (await first(replica, "SHOW REPLICA STATUS"))["SQL_Delay"] == 71
            await execute(replica, "RESET REPLICA")
            assert (await first(replica, "SHOW REPLICA STATUS"))["SQL_Delay"] == 0
            config = await first(
                replica, "SELECT * FROM performance_schema.replication_applier_configuration"
            )
            assert config["DESIRED_DELAY"] == 0

    run_virtual(scenario)


def test_delay_can_only_change_with_the_applier_stopped() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            replica = topo.server("replica1")
            with pytest.raises(SqlError) as info:
                await execute(replica, "CHANGE REPLICATION SOURCE TO SOURCE_DELAY = 5")
            assert info.value.code == 3085
            with pytest.raises(SqlError) as info:
                await execute(replica, "RESET REPLICA")
            assert info.value.code == 3081

    run_virtual(scenario)


def test_check_delay_parses_like_the_grammar() -> None:
    assert check_delay("0") == 0
    assert check_delay(str(MAX_SOURCE_DELAY)) == MAX_SOURCE_DELAY
    with pytest.raises(SqlError):
        check_delay("-1")


def test_delay_end_is_ceiling_of_immediate_seconds_plus_delay() -> None:
    def at(immediate: int) -> BinlogTransaction:
        return BinlogTransaction(None, (), immediate, immediate, 80036, 80036, 1)

    assert sql_delay_end(at(1_700_000_000_000_000), 10) == 1_700_000_010
    assert sql_delay_end(at(1_700_000_000_000_001), 10) == 1_700_000_011
    assert sql_delay_end(at(1_700_000_000_999_999), 0) == 1_700_000_001


def test_applied_no_earlier_than_delay_after_immediate_commit() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await clock.sleep(0.25)  # a commit in the middle of a second
            await execute(primary, "CREATE DATABASE d")
            source_ict = transactions(primary)[-1].immediate_commit_timestamp
            await clock.sleep(DELAY - 1)
            assert replica.gtid_state.executed.is_empty()
            await clock.sleep(2)
            replica_ict = transactions(replica)[-1].immediate_commit_timestamp
            assert math.ceil((replica_ict - source_ict) / 1e6) >= DELAY
            # It is applied exactly when the delay ends: ceil(source ICT in s) + SOURCE_DELAY.
            assert replica_ict == (math.ceil(source_ict / 1e6) + DELAY) * 1_000_000

    run_virtual(scenario)


def test_remaining_delay_counts_down() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(primary, "CREATE DATABASE d")
            end = math.ceil(clock()) + DELAY
            seen = []
            await clock.sleep(NETWORK + 0.25)
            for _ in range(4):
                status = await first(replica, "SHOW REPLICA STATUS")
                applier = await first(
                    replica, "SELECT * FROM performance_schema.replication_applier_status"
                )
                assert status["Replica_SQL_Running_State"] == WAITING_FOR_DELAY
                assert status["SQL_Remaining_Delay"] == applier["REMAINING_DELAY"]
                assert applier["REMAINING_DELAY"] == end - int(clock())
                seen.append(applier["REMAINING_DELAY"])
                await clock.sleep(2.0)
            assert seen == [DELAY, DELAY - 2, DELAY - 4, DELAY - 6]
            await clock.sleep(DELAY)
            applier = await first(
                replica, "SELECT * FROM performance_schema.replication_applier_status"
            )
            assert applier["REMAINING_DELAY"] is None
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["SQL_Remaining_Delay"] is None
            assert status["SQL_Delay"] == DELAY
            assert replica.gtid_state.executed == primary.gtid_state.executed

    run_virtual(scenario)


def test_delay_is_per_transaction() -> None:
    """Two commits 3 s apart are applied 3 s apart, each DELAY after its own commit."""

    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(primary, "CREATE DATABASE first_db")
            await clock.sleep(3.0)
            await execute(primary, "CREATE DATABASE second_db")
            await clock.sleep(DELAY + 1)
            src, dst = transactions(primary), transactions(replica)
            assert len(dst) == 2
            for source_tx, replica_tx in zip(src, dst, strict=True):
                assert source_tx.gtid == replica_tx.gtid
                lag = replica_tx.immediate_commit_timestamp - source_tx.immediate_commit_timestamp
                assert DELAY * 1_000_000 <= lag < (DELAY + 1) * 1_000_000
            gap = dst[1].immediate_commit_timestamp - dst[0].immediate_commit_timestamp
            assert gap == 3_000_000

    run_virtual(scenario)


def test_delay_counts_from_the_immediate_source_in_a_chain() -> None:
    """a → b (network 4 s) → c (SOURCE_DELAY 5): c waits 5 s after b's commit, not a's."""

    async def scenario(clock: VirtualClock) -> None:
        spec = TopologySpec(
            (ServerSpec("a"), ServerSpec("b"), ServerSpec("c")),
            (
                ChannelSpec("a", "b", lag=LagModel(network=Fixed(4.0), workers=0)),
                ChannelSpec("b", "c", lag=LagModel(workers=0), delay=5),
            ),
        )
        async with await virtual_topology(spec, clock) as topo:
            a, b, c = (topo.server(n) for n in "abc")
            await execute(a, "CREATE DATABASE d")
            await clock.sleep(20.0)
            origin, hop, leaf = (transactions(s)[-1] for s in (a, b, c))
            assert hop.immediate_commit_timestamp - origin.immediate_commit_timestamp == 4_000_000
            assert (
                leaf.immediate_commit_timestamp
                == (math.ceil(hop.immediate_commit_timestamp / 1e6) + 5) * 1_000_000
            )
            assert leaf.original_commit_timestamp == origin.original_commit_timestamp

    run_virtual(scenario)


@pytest.mark.parametrize("workers", [0, 4])
def test_stop_start_during_the_wait_keeps_the_delay(workers: int) -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(workers=workers), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(primary, "CREATE DATABASE d")
            committed = transactions(primary)[-1].immediate_commit_timestamp
            await clock.sleep(3.0)
            await execute(replica, "STOP REPLICA")
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["SQL_Remaining_Delay"] is None
            assert status["Seconds_Behind_Source"] is None
            await clock.sleep(1.0)
            await execute(replica, "START REPLICA")
            await clock.sleep(0.125)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["SQL_Delay"] == DELAY
            assert status["SQL_Remaining_Delay"] == DELAY - 4
            await clock.sleep(DELAY)
            applied = transactions(replica)[-1].immediate_commit_timestamp
            assert applied == (math.ceil(committed / 1e6) + DELAY) * 1_000_000

    run_virtual(scenario)


def test_seconds_behind_source_includes_the_delay() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(delayed_spec(), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            assert (await first(replica, "SHOW REPLICA STATUS"))["Seconds_Behind_Source"] == 0
            await execute(primary, "CREATE DATABASE d")
            await clock.sleep(7.0)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["Seconds_Behind_Source"] == 7
            await clock.sleep(4.0)
            assert (await first(replica, "SHOW REPLICA STATUS"))["Seconds_Behind_Source"] == 0

    run_virtual(scenario)


@pytest.mark.parametrize("skew", [2.0, -3.0, 0.0])
def test_source_without_commit_timestamps_counts_the_clock_difference(skew: float) -> None:
    """A 5.7 source writes no commit timestamps: the delay ends at the event's time (source
    clock) + the replica's clock difference with the source + SOURCE_DELAY
    (``sql_delay_event()``).  A replica whose clock runs 2 s ahead still waits the full 10 s
    after the source's commit, not 8."""
    spec = TopologySpec(
        servers=(
            ServerSpec("primary", version=VERSION_57),
            ServerSpec("replica1", clock_skew=skew),
        ),
        channels=(
            ChannelSpec("primary", "replica1", lag=LagModel(network=Fixed(NETWORK)), delay=DELAY),
        ),
    )

    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec, clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await clock.sleep(0.25)
            committed = clock()  # the source's (unskewed) clock at the commit
            await execute(primary, "CREATE DATABASE d")
            source_tx = transactions(primary)[-1]
            assert source_tx.immediate_commit_timestamp == 0  # a 5.7 event has none
            await clock.sleep(DELAY - 1.5)
            assert replica.gtid_state.executed.is_empty()
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["SQL_Remaining_Delay"] is not None
            await clock.sleep(2.5)
            assert replica.gtid_state.executed == primary.gtid_state.executed
            applied = transactions(replica)[-1].immediate_commit_timestamp / 1e6 - skew
            assert applied == pytest.approx(int(committed) + DELAY, abs=1e-6)

    run_virtual(scenario)
