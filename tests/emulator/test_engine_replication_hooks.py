"""The hooks a replication applier uses: binary log contents and apply_transaction."""

from __future__ import annotations

from consistent.emulator.binlog import server_version_number
from consistent.emulator.testing import U2, FakeClock, U, q, rows, run, scalar, server


def test_binlog_records_statements_and_timestamps() -> None:
    async def scenario() -> None:
        clock = FakeClock(1_700_000_000.0)
        source = server(clock)
        s = source.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE TABLE d.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(5))")
        clock.advance(2.5)
        await q(s, "USE d")
        await q(s, "BEGIN")
        await q(s, "INSERT INTO t (v) VALUES ('a')")
        await q(s, "UPDATE t SET v = 'b'")
        await q(s, "COMMIT")
        binlog = source.binlog
        assert binlog is not None
        last = list(binlog.transactions())[-1]
        assert str(last.gtid) == f"{U}:3"
        assert [st.sql for st in last.statements] == [
            "INSERT INTO t (v) VALUES ('a')",
            "UPDATE t SET v = 'b'",
        ]
        assert last.statements[0].database == "d"
        assert last.statements[0].insert_id == 1
        assert last.immediate_commit_timestamp == 1_700_000_002_500_000
        assert last.original_commit_timestamp == last.immediate_commit_timestamp
        assert last.immediate_server_version == server_version_number("8.0.36") == 80036
        assert not last.is_ddl
        assert next(iter(binlog.transactions())).is_ddl
        await source.shutdown()

    run(scenario())


def test_apply_transaction_keeps_gtid_and_original_timestamp() -> None:
    async def scenario() -> None:
        source_clock = FakeClock(1_700_000_000.0)
        replica_clock = FakeClock(1_700_000_100.0)
        source = server(source_clock)
        replica = server(replica_clock, server_uuid=U2, log_bin=False)
        s = source.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE TABLE d.t (id INT PRIMARY KEY AUTO_INCREMENT, at DATETIME)")
        await q(s, "INSERT INTO d.t (at) VALUES (NOW())")
        binlog = source.binlog
        assert binlog is not None
        for transaction in binlog.transactions_missing_from(replica.gtid_state.executed):
            assert await replica.apply_transaction(transaction)
        assert replica.gtid_state.executed == source.gtid_state.executed
        r = replica.open_session()
        assert await rows(r, "SELECT id, at FROM d.t") == await rows(s, "SELECT id, at FROM d.t")
        assert not await replica.apply_transaction(next(iter(binlog.transactions())))
        assert replica.gtid_table_rows() == [(U, 1, 1), (U, 2, 2), (U, 3, 3)]
        assert await scalar(r, "SELECT @@GLOBAL.gtid_executed") == f"{U}:1-3"
        await source.shutdown()
        await replica.shutdown()

    run(scenario())


def test_chain_keeps_original_and_sets_immediate() -> None:
    async def scenario() -> None:
        clock_a = FakeClock(1_700_000_000.0)
        clock_b = FakeClock(1_700_000_005.0)
        a = server(clock_a)
        b = server(clock_b, server_uuid=U2)
        s = a.open_session()
        await q(s, "CREATE DATABASE chained")
        assert a.binlog is not None
        assert b.binlog is not None
        origin = list(a.binlog.transactions())[-1]
        await b.apply_transaction(origin)
        hop = list(b.binlog.transactions())[-1]
        assert hop.gtid == origin.gtid
        assert hop.original_commit_timestamp == origin.original_commit_timestamp
        assert hop.immediate_commit_timestamp == 1_700_000_005_000_000
        assert hop.immediate_commit_timestamp > origin.immediate_commit_timestamp
        await a.shutdown()
        await b.shutdown()

    run(scenario())


def test_extension_hooks_for_statements_show_and_virtual_tables() -> None:
    from consistent.emulator.results import ResultSet, StmtResult, text_column
    from consistent.emulator.sql.catalog import TableDef
    from consistent.emulator.sql.infoschema import VirtualTable, virtual_columns
    from consistent.emulator.statements import Kind

    async def start_replica(session, statement):  # type: ignore[no-untyped-def]
        session.server.replica_started = True
        return StmtResult()

    async def show_status(session, ts):  # type: ignore[no-untyped-def]
        return StmtResult(result=ResultSet((text_column("Channel_Name"),), (("main",),)))

    async def scenario() -> None:
        srv = server()
        srv.statement_handlers["START REPLICA"] = (start_replica, Kind.ADMIN)
        srv.show_handlers["REPLICA STATUS"] = show_status
        table = TableDef(
            "performance_schema",
            "replication_applier_status",
            virtual_columns("CHANNEL_NAME,SERVICE_STATE"),
            temporary=True,
        )
        srv.virtual_tables[("performance_schema", "replication_applier_status")] = VirtualTable(
            table, lambda s: [("", "ON")]
        )
        s = srv.open_session()
        await q(s, "START REPLICA")
        assert srv.replica_started  # type: ignore[attr-defined]
        assert await rows(s, "SHOW REPLICA STATUS") == [("main",)]
        assert await rows(
            s, "SELECT SERVICE_STATE FROM performance_schema.replication_applier_status"
        ) == [("ON",)]
        await srv.shutdown()

    run(scenario())
