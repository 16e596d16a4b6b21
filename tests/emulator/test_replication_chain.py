"""A chain A → B → C in virtual time: WL#7319 commit timestamps at every hop.

The original commit timestamp is set once, where the transaction began, and is the same on
every server; the immediate one is each server's own commit time, so it grows per hop by the
channel's lag.  Lags are binary fractions so the expected microseconds are exact.
"""

from __future__ import annotations

import asyncio

from consistent.emulator.binlog import BinlogTransaction
from consistent.emulator.replication import (
    Fixed,
    LagModel,
    ServerSpec,
    SkewedClock,
    TopologySpec,
    VirtualClock,
)
from consistent.emulator.replication.errorlog import LogCode
from consistent.emulator.replication.events import (
    decode_gtid_event,
    encode_gtid_event,
    gtid_event_for,
)
from consistent.emulator.replication.testing import (
    dict_rows,
    execute,
    first,
    run_virtual,
    to_us,
    virtual_topology,
)
from consistent.emulator.server import EmulatedServer

NETWORK = 0.5
APPLY = 0.25
HOP = NETWORK + APPLY


def last_transaction(server: EmulatedServer) -> BinlogTransaction:
    assert server.binlog is not None
    return list(server.binlog.transactions())[-1]


def chain_spec(**server_options: object) -> TopologySpec:
    return TopologySpec.chain(
        3, lag=LagModel(network=Fixed(NETWORK), apply=Fixed(APPLY), workers=0)
    )


def test_original_timestamp_is_kept_and_immediate_grows_per_hop() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(chain_spec(), clock) as topo:
            a, b, c = (topo.server(n) for n in "abc")
            await clock.sleep(1.0)
            began = clock()
            await execute(a, "CREATE DATABASE d")
            await clock.sleep(2 * HOP + 0.125)
            began_us = int(began * 1_000_000)
            origin, hop1, hop2 = (last_transaction(s) for s in (a, b, c))
            assert origin.gtid == hop1.gtid == hop2.gtid
            assert origin.original_commit_timestamp == origin.immediate_commit_timestamp
            assert origin.immediate_commit_timestamp == began_us
            assert hop1.original_commit_timestamp == hop2.original_commit_timestamp == began_us
            assert hop1.immediate_commit_timestamp == began_us + int(HOP * 1_000_000)
            assert hop2.immediate_commit_timestamp == began_us + int(2 * HOP * 1_000_000)
            assert hop1.original_server_version == origin.immediate_server_version

            # The relayed events carry the original timestamp after bit 55, the origin's not.
            origin_bytes = encode_gtid_event(gtid_event_for(origin))
            relayed = decode_gtid_event(encode_gtid_event(gtid_event_for(hop2)))
            assert len(encode_gtid_event(gtid_event_for(hop2))) == len(origin_bytes) + 7
            assert relayed.original_commit_timestamp == began_us
            assert relayed.immediate_commit_timestamp == hop2.immediate_commit_timestamp

            # performance_schema on C shows the same two timestamps for the transaction.
            worker = await first(
                c, "SELECT * FROM performance_schema.replication_applier_status_by_worker"
            )
            assert worker["LAST_APPLIED_TRANSACTION"] == str(origin.gtid)
            oct_ = worker["LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP"]
            ict = worker["LAST_APPLIED_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP"]
            assert to_us(oct_) == began_us
            assert to_us(ict) == hop1.immediate_commit_timestamp

    run_virtual(scenario)


def test_original_timestamp_set_by_the_client_travels_unchanged() -> None:
    """``SET @@session.original_commit_timestamp`` (as mysqlbinlog output does) on A."""

    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(chain_spec(), clock) as topo:
            a, c = topo.server("a"), topo.server("c")
            await execute(
                a,
                "SET @@session.original_commit_timestamp = 1491299285661130; CREATE DATABASE e",
            )
            await clock.sleep(2 * HOP + 0.125)
            origin, leaf = last_transaction(a), last_transaction(c)
            assert origin.original_commit_timestamp == 1491299285661130
            assert origin.immediate_commit_timestamp == int(clock.epoch * 1_000_000)
            assert leaf.original_commit_timestamp == 1491299285661130
            assert leaf.immediate_commit_timestamp > origin.immediate_commit_timestamp

    run_virtual(scenario)


def test_every_hop_executes_the_same_gtids_in_order() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(chain_spec(), clock) as topo:
            a = topo.server("a")
            await execute(a, "CREATE DATABASE d")
            await execute(a, "CREATE TABLE d.t (id INT PRIMARY KEY, v INT)")
            for i in range(5):
                await execute(a, f"INSERT INTO d.t VALUES ({i}, {i * i})")
                await clock.sleep(0.0625)
            await topo.wait_for_all(timeout=30)
            expected = await dict_rows(a, "SELECT * FROM d.t ORDER BY id")
            for name in "bc":
                server = topo.server(name)
                assert server.gtid_state.executed == a.gtid_state.executed
                assert await dict_rows(server, "SELECT * FROM d.t ORDER BY id") == expected
                assert server.binlog is not None
                order = [t.gtid for t in server.binlog.transactions()]
                assert a.binlog is not None
                assert order == [t.gtid for t in a.binlog.transactions()]

    run_virtual(scenario)


def test_f6_warnings_when_original_is_later_than_immediate() -> None:
    """B's clock runs 10 s behind A's: one warning, then one note once it is fixed."""

    async def scenario(clock: VirtualClock) -> None:
        spec = TopologySpec(
            (ServerSpec("a"), ServerSpec("b", clock_skew=-10.0)),
            chain_spec().channels[:1],
        )
        async with await virtual_topology(spec, clock) as topo:
            a, b = topo.server("a"), topo.server("b")
            log = topo.services["b"].error_log
            for i in range(3):
                await execute(a, f"CREATE DATABASE skew{i}")
            await clock.sleep(2.0)
            assert len(log.with_code(LogCode.INVALID_REPLICATION_TIMESTAMPS)) == 1
            assert not log.with_code(LogCode.RPL_TIMESTAMPS_RETURNED_TO_NORMAL)
            relayed = last_transaction(b)
            assert relayed.original_commit_timestamp > relayed.immediate_commit_timestamp

            assert isinstance(b.clock, SkewedClock)
            b.clock.skew = 0.0
            for i in range(2):
                await execute(a, f"CREATE DATABASE fixed{i}")
            await clock.sleep(2.0)
            assert len(log.with_code(LogCode.INVALID_REPLICATION_TIMESTAMPS)) == 1
            assert len(log.with_code(LogCode.RPL_TIMESTAMPS_RETURNED_TO_NORMAL)) == 1
            rows = await dict_rows(
                b, "SELECT ERROR_CODE, PRIO FROM performance_schema.error_log ORDER BY LOGGED"
            )
            assert rows == [
                {"ERROR_CODE": "MY-010956", "PRIO": "Warning"},
                {"ERROR_CODE": "MY-010957", "PRIO": "Warning"},
            ]

    run_virtual(scenario)


def test_intermediate_without_log_replica_updates_stops_the_chain() -> None:
    """B applies A's transactions but does not log them: C gets nothing, and B keeps its
    GTIDs in mysql.gtid_executed (WL#6559)."""

    async def scenario(clock: VirtualClock) -> None:
        base = chain_spec()
        spec = TopologySpec(
            (ServerSpec("a"), ServerSpec("b", log_replica_updates=False), ServerSpec("c")),
            base.channels,
        )
        async with await virtual_topology(spec, clock) as topo:
            a, b, c = (topo.server(n) for n in "abc")
            await execute(a, "CREATE DATABASE d")
            await clock.sleep(3.0)
            assert b.gtid_state.executed == a.gtid_state.executed
            assert c.gtid_state.executed.is_empty()
            assert b.binlog is not None
            assert not list(b.binlog.transactions())
            uuid = a.config.server_uuid
            assert b.gtid_table_rows() == [(uuid, 1, 1)]
            status = await first(c, "SHOW REPLICA STATUS")
            assert status["Replica_IO_Running"] == "Yes"
            assert status["Retrieved_Gtid_Set"] == ""

    run_virtual(scenario)


def test_virtual_time_costs_no_wall_time() -> None:
    async def scenario(clock: VirtualClock) -> float:
        spec = TopologySpec.chain(3, lag=LagModel(network=Fixed(30.0), workers=0))
        async with await virtual_topology(spec, clock) as topo:
            start = asyncio.get_running_loop().time()
            await execute(topo.server("a"), "CREATE DATABASE slow")
            await topo.wait_for_all(timeout=120)
            return asyncio.get_running_loop().time() - start

    import time

    wall = time.monotonic()
    virtual = run_virtual(scenario)
    assert virtual == 60.0
    assert time.monotonic() - wall < 5.0
