"""WL#7374 lag monitoring tables, read with SQL, at each stage of a transaction (virtual time).

Rules from reference §6.1 (``rpl_check_ps_connection_applier_status_tables.inc`` and
``rpl_ps_connection_applier_status.inc``): while X is handled the "now" columns show X with
its OCT/ICT and a START; afterwards they are ``''`` / zero timestamps and the "last" columns
show X with the same OCT/ICT/START and END >= START; on an error APPLYING is kept and
LAST_APPLIED is not updated; STOP keeps LAST_APPLIED, START clears APPLYING, and clears
LAST_APPLIED only with a multi-threaded applier.

The replica's stages cost (virtual seconds): network 0.5, transfer 0.125, buffer 0.125,
apply 0.25.  A transaction committed at t0 is therefore queueing during [t0+0.5, t0+0.625),
buffered during [t0+0.625, t0+0.75) and applied during [t0+0.75, t0+1.0).
"""

from __future__ import annotations

from typing import Any

import pytest

from consistent.emulator.errors import SqlError
from consistent.emulator.replication import Fixed, LagModel, TopologySpec, VirtualClock
from consistent.emulator.replication.pfs import ZERO_TIMESTAMP
from consistent.emulator.replication.testing import (
    dict_rows,
    execute,
    first,
    run_virtual,
    to_us,
    virtual_topology,
)
from consistent.emulator.server import EmulatedServer

US = 1_000_000
RECEIVER = "performance_schema.replication_connection_status"
COORDINATOR = "performance_schema.replication_applier_status_by_coordinator"
WORKER = "performance_schema.replication_applier_status_by_worker"


def spec(workers: int) -> TopologySpec:
    return TopologySpec.primary_with_replicas(
        1,
        lag=LagModel(
            network=Fixed(0.5),
            transfer=Fixed(0.125),
            buffer=Fixed(0.125),
            apply=Fixed(0.25),
            workers=workers,
        ),
    )


def group(row: dict[str, Any], prefix: str, verb: str) -> dict[str, Any]:
    """The five (or four) columns of one "…_TRANSACTION" group, timestamps as µs."""
    out: dict[str, Any] = {"gtid": row[f"{prefix}_TRANSACTION"]}
    for key, column in (
        ("oct", "ORIGINAL_COMMIT_TIMESTAMP"),
        ("ict", "IMMEDIATE_COMMIT_TIMESTAMP"),
        ("start", f"START_{verb}_TIMESTAMP"),
        ("end", f"END_{verb}_TIMESTAMP"),
    ):
        name = f"{prefix}_TRANSACTION_{column}"
        if name in row:
            out[key] = to_us(row[name])
    return out


async def stages(replica: EmulatedServer) -> dict[str, dict[str, Any]]:
    receiver = await first(replica, f"SELECT * FROM {RECEIVER}")
    worker = await first(replica, f"SELECT * FROM {WORKER}")
    found = {
        "queueing": group(receiver, "QUEUEING", "QUEUE"),
        "queued": group(receiver, "LAST_QUEUED", "QUEUE"),
        "applying": group(worker, "APPLYING", "APPLY"),
        "applied": group(worker, "LAST_APPLIED", "APPLY"),
    }
    coordinators = await dict_rows(replica, f"SELECT * FROM {COORDINATOR}")
    if coordinators:
        found["processing"] = group(coordinators[0], "PROCESSING", "BUFFER")
        found["processed"] = group(coordinators[0], "LAST_PROCESSED", "BUFFER")
    return found


IDLE_NOW = {"gtid": "", "oct": 0, "ict": 0, "start": 0}
NEVER = {"gtid": "", "oct": 0, "ict": 0, "start": 0, "end": 0}


def test_each_stage_while_in_flight_and_after() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=1), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await clock.sleep(1.0)
            t0 = int(clock() * US)
            await execute(primary, "CREATE DATABASE d")
            gtid = str(primary.gtid_state.executed).replace(":1-1", ":1")
            x = {"gtid": gtid, "oct": t0, "ict": t0}

            await clock.sleep(0.25)  # on the wire
            now = await stages(replica)
            assert now["queueing"] == IDLE_NOW
            assert now["queued"] == NEVER
            assert now["applying"] == IDLE_NOW
            assert now["applied"] == NEVER

            await clock.sleep(0.3125)  # t0 + 0.5625: being queued
            now = await stages(replica)
            assert now["queueing"] == {**x, "start": t0 + US // 2}
            assert now["queued"] == NEVER

            await clock.sleep(0.125)  # t0 + 0.6875: in the coordinator's buffer
            now = await stages(replica)
            assert now["queueing"] == IDLE_NOW
            assert now["queued"] == {**x, "start": t0 + US // 2, "end": t0 + 5 * US // 8}
            assert now["processing"] == {**x, "start": t0 + 5 * US // 8}
            assert now["processed"] == NEVER
            assert now["applying"] == IDLE_NOW

            await clock.sleep(0.1875)  # t0 + 0.875: being applied
            now = await stages(replica)
            assert now["processing"] == IDLE_NOW
            assert now["processed"] == {**x, "start": t0 + 5 * US // 8, "end": t0 + 3 * US // 4}
            assert now["applying"] == {**x, "start": t0 + 3 * US // 4}
            assert now["applied"] == NEVER

            await clock.sleep(0.25)  # t0 + 1.125: done
            now = await stages(replica)
            assert now["applying"] == IDLE_NOW
            assert now["applied"] == {**x, "start": t0 + 3 * US // 4, "end": t0 + US}

            # A second transaction: while it is handled, "last" still shows the first.
            t1 = int(clock() * US)
            await execute(primary, "CREATE DATABASE e")
            await clock.sleep(0.875)  # t1 + 0.875: the second is being applied
            now = await stages(replica)
            assert now["applying"]["gtid"].endswith(":2")
            assert now["applying"]["oct"] == t1
            assert now["applied"]["gtid"] == gtid
            assert now["queued"]["gtid"].endswith(":2")

    run_virtual(scenario)


def test_timestamps_have_microsecond_precision_and_idle_stages_show_zero() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=1), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            raw = await first(replica, f"SELECT * FROM {WORKER}")
            assert raw["APPLYING_TRANSACTION"] == ""
            assert raw["APPLYING_TRANSACTION_START_APPLY_TIMESTAMP"] == ZERO_TIMESTAMP
            assert raw["LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP"] == ZERO_TIMESTAMP
            await clock.sleep(0.000123)
            await execute(primary, "CREATE DATABASE d")
            await clock.sleep(2.0)
            row = await first(
                replica,
                "SELECT CAST(LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP AS CHAR) AS oct "
                f"FROM {WORKER}",
            )
            assert row["oct"] == "2023-11-14 22:13:20.000123"

    run_virtual(scenario)


async def _break_replica(
    clock: VirtualClock, primary: EmulatedServer, replica: EmulatedServer
) -> None:
    """Replica row 5 exists before the source inserts row 5: the apply fails with 1062."""
    await execute(primary, "CREATE DATABASE d")
    await execute(primary, "CREATE TABLE d.t (id INT PRIMARY KEY)")
    await execute(primary, "INSERT INTO d.t VALUES (1)")
    await clock.sleep(3.0)
    await execute(replica, "INSERT INTO d.t VALUES (5)")
    await execute(primary, "INSERT INTO d.t VALUES (5)")
    await clock.sleep(3.0)


@pytest.mark.parametrize("workers", [0, 2])
def test_error_keeps_applying_and_does_not_update_last_applied(workers: int) -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=workers), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await _break_replica(clock, primary, replica)
            source = primary.config.server_uuid
            workers_rows = await dict_rows(replica, f"SELECT * FROM {WORKER}")
            failed = [w for w in workers_rows if w["LAST_ERROR_NUMBER"]]
            assert len(failed) == 1
            failing = failed[0]
            assert failing["LAST_ERROR_NUMBER"] == 1062
            assert failing["APPLYING_TRANSACTION"] == f"{source}:4"
            assert to_us(failing["APPLYING_TRANSACTION_START_APPLY_TIMESTAMP"]) > 0
            applied = {w["LAST_APPLIED_TRANSACTION"] for w in workers_rows}
            assert f"{source}:4" not in applied
            assert f"{source}:3" in applied
            assert all(w["SERVICE_STATE"] == "OFF" for w in workers_rows)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert status["Replica_SQL_Running"] == "No"
            assert status["Replica_IO_Running"] == "Yes"
            assert status["Last_SQL_Errno"] == 1062
            assert "Duplicate entry" in failing["LAST_ERROR_MESSAGE"]
            if workers:  # MTS: the coordinator names the worker and the transaction
                assert f"failed executing transaction '{source}:4'" in status["Last_SQL_Error"]
            else:
                assert status["Last_SQL_Error"] == failing["LAST_ERROR_MESSAGE"]
            assert status["Seconds_Behind_Source"] is None
            applier = await first(
                replica, "SELECT * FROM performance_schema.replication_applier_status"
            )
            assert applier["SERVICE_STATE"] == "OFF"

            # Fix the conflict and restart: the transaction applies, the error is cleared.
            await execute(replica, "DELETE FROM d.t WHERE id = 5")
            await execute(replica, "START REPLICA")
            await clock.sleep(2.0)
            assert replica.gtid_state.executed.issuperset(primary.gtid_state.executed)
            status = await first(replica, "SHOW REPLICA STATUS")
            assert (status["Replica_SQL_Running"], status["Last_SQL_Errno"]) == ("Yes", 0)
            rows = await dict_rows(replica, f"SELECT * FROM {WORKER}")
            assert {r["LAST_APPLIED_TRANSACTION"] for r in rows} >= {f"{source}:4"}
            assert all(r["LAST_ERROR_NUMBER"] == 0 for r in rows)

    run_virtual(scenario)


def _only(rows: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize(("workers", "kept_after_start"), [(0, True), (1, False)])
def test_stop_and_start_rules(workers: int, kept_after_start: bool) -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=workers), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(primary, "CREATE DATABASE d")
            await clock.sleep(2.0)
            gtid = f"{primary.config.server_uuid}:1"
            await execute(replica, "STOP REPLICA")
            stopped = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert stopped["LAST_APPLIED_TRANSACTION"] == gtid
            assert stopped["SERVICE_STATE"] == "OFF"
            assert stopped["THREAD_ID"] is None
            receiver = await first(replica, f"SELECT * FROM {RECEIVER}")
            assert receiver["SERVICE_STATE"] == "OFF"
            assert receiver["LAST_QUEUED_TRANSACTION"] == gtid

            # START: the single-threaded applier keeps LAST_APPLIED, fresh workers do not.
            await execute(replica, "START REPLICA")
            expected_last = gtid if kept_after_start else ""
            restarted = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert restarted["LAST_APPLIED_TRANSACTION"] == expected_last
            assert restarted["APPLYING_TRANSACTION"] == ""
            assert restarted["SERVICE_STATE"] == "ON"
            receiver = await first(replica, f"SELECT * FROM {RECEIVER}")
            assert receiver["LAST_QUEUED_TRANSACTION"] == gtid

            # Stop in the middle of applying: APPLYING is kept until START resets it.
            await execute(primary, "CREATE DATABASE e")
            second = f"{primary.config.server_uuid}:2"
            await clock.sleep(0.875)
            applying = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert applying["APPLYING_TRANSACTION"] == second
            await execute(replica, "STOP REPLICA SQL_THREAD")
            stopped = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert stopped["APPLYING_TRANSACTION"] == second
            assert stopped["LAST_APPLIED_TRANSACTION"] == expected_last
            assert not replica.gtid_state.executed.issuperset(primary.gtid_state.executed)

            await execute(replica, "START REPLICA SQL_THREAD")
            started = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert started["LAST_APPLIED_TRANSACTION"] == expected_last
            if started["APPLYING_TRANSACTION"]:  # already picked up again from the relay log
                assert to_us(started["APPLYING_TRANSACTION_START_APPLY_TIMESTAMP"]) == int(
                    clock() * US
                )
            await clock.sleep(1.0)
            done = _only(await dict_rows(replica, f"SELECT * FROM {WORKER}"))
            assert done["LAST_APPLIED_TRANSACTION"] == second
            assert replica.gtid_state.executed == primary.gtid_state.executed

    run_virtual(scenario)


def test_coordinator_table_is_empty_for_a_single_threaded_applier() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=0), clock) as topo:
            replica = topo.server("replica1")
            assert await dict_rows(replica, f"SELECT * FROM {COORDINATOR}") == []
            worker = await first(replica, f"SELECT WORKER_ID, SERVICE_STATE FROM {WORKER}")
            assert worker == {"WORKER_ID": 0, "SERVICE_STATE": "ON"}

    run_virtual(scenario)


def test_worker_rows_and_configuration_tables() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=3), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            ids = await dict_rows(replica, f"SELECT WORKER_ID FROM {WORKER} ORDER BY WORKER_ID")
            assert [r["WORKER_ID"] for r in ids] == [1, 2, 3]
            config = await first(
                replica, "SELECT * FROM performance_schema.replication_applier_configuration"
            )
            assert (config["CHANNEL_NAME"], config["DESIRED_DELAY"]) == ("", 0)
            connection = await first(
                replica, "SELECT * FROM performance_schema.replication_connection_configuration"
            )
            assert connection["HOST"] == "primary"
            receiver = await first(replica, f"SELECT * FROM {RECEIVER}")
            assert receiver["SOURCE_UUID"] == primary.config.server_uuid
            assert receiver["SERVICE_STATE"] == "ON"
            await execute(primary, "CREATE DATABASE d")
            await clock.sleep(2.0)
            receiver = await first(replica, f"SELECT * FROM {RECEIVER}")
            assert receiver["RECEIVED_TRANSACTION_SET"] == f"{primary.config.server_uuid}:1"
            assert await dict_rows(primary, f"SELECT * FROM {WORKER}") == []

    run_virtual(scenario)


def test_replication_statements_need_a_configured_channel() -> None:
    async def scenario(clock: VirtualClock) -> None:
        async with await virtual_topology(spec(workers=1), clock) as topo:
            with pytest.raises(SqlError) as info:
                await execute(topo.server("primary"), "START REPLICA")
            assert info.value.code == 1200
            with pytest.raises(SqlError) as info:
                await execute(topo.server("replica1"), "STOP REPLICA FOR CHANNEL 'nope'")
            assert info.value.code == 3074

    run_virtual(scenario)
