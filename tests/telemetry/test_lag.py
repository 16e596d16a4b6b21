"""The lag sampler against fake servers: the WL#7374 performance_schema rows of a chain
A → B → C (reference §6.1: the original commit timestamp is the same on every hop, the
immediate one is per hop), MariaDB status rows, unreachable replicas, the polling loop."""

from __future__ import annotations

import calendar
import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from consistent import trace
from consistent.errors import OperationalError
from consistent.gtid import MariaPosition
from consistent.telemetry import MemoryExporter, SpanRecord, StatusCode, Telemetry, TelemetryConfig
from consistent.telemetry.lag import micros, transactions_between
from consistent.telemetry.sampler import Endpoint, LagSampler
from consistent.trace import LagField, LagStage, lag_stage_attribute

ZERO = "0000-00-00 00:00:00.000000"  # what PyMySQL hands back for MySQL's zero DATETIME(6)
SOURCE_A = "aaaaaaaa-0000-4000-8000-00000000000a"
G = f"{SOURCE_A}:42"
F = f"{SOURCE_A}:41"
H = f"{SOURCE_A}:43"
T0 = dt.datetime(2024, 5, 1, 12, 0, 0)  # A commits G


def at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(microseconds=round(ms * 1000))


def us(value: dt.datetime) -> int:
    """Microseconds since the epoch, computed independently of the code under test."""
    return calendar.timegm(value.utctimetuple()) * 1_000_000 + value.microsecond


def attr(stage: LagStage, field: LagField) -> str:
    return lag_stage_attribute(stage, field)


# --- fake servers --------------------------------------------------------------------------------


class FakeCursor:
    def __init__(self, server: FakeServer) -> None:
        self._server = server
        self.description: tuple[tuple[str, ...], ...] | None = None
        self._rows: list[Any] = []

    def execute(self, sql: str) -> int:
        self._server.statements.append(sql)
        rows = self._server.answer(sql)
        names = list(rows[0]) if rows else ["x"]
        self.description = tuple((name, "", "", "", "", "", "") for name in names)
        # tuples, as PyMySQL's default cursor returns them
        self._rows = [tuple(row.get(n) for n in names) for row in rows]
        return len(rows)

    def fetchall(self) -> list[Any]:
        return self._rows

    def close(self) -> None:
        return None


class FakeServer:
    """Answers the sampler's statements from fixed result sets."""

    def __init__(self, results: Mapping[str, Sequence[Mapping[str, object]]]) -> None:
        self.results = dict(results)
        self.statements: list[str] = []
        self.closed = 0

    def answer(self, sql: str) -> list[Mapping[str, object]]:
        for key, rows in self.results.items():
            if key in sql:
                if isinstance(rows, Exception):
                    raise rows
                return list(rows)
        raise OperationalError(1146, f"no answer for {sql!r}")

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def close(self) -> None:
        self.closed += 1


def receiver(
    gtid: str, oct_: dt.datetime, ict: dt.datetime, start: dt.datetime, end: dt.datetime
) -> dict[str, object]:
    return {
        "CHANNEL_NAME": "",
        "SOURCE_UUID": SOURCE_A,
        "SERVICE_STATE": "ON",
        "LAST_QUEUED_TRANSACTION": gtid,
        "LAST_QUEUED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": oct_,
        "LAST_QUEUED_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ict,
        "LAST_QUEUED_TRANSACTION_START_QUEUE_TIMESTAMP": start,
        "LAST_QUEUED_TRANSACTION_END_QUEUE_TIMESTAMP": end,
        "QUEUEING_TRANSACTION": "",
        "QUEUEING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": ZERO,
        "QUEUEING_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ZERO,
        "QUEUEING_TRANSACTION_START_QUEUE_TIMESTAMP": ZERO,
    }


Stamps = tuple[dt.datetime, dt.datetime, dt.datetime, dt.datetime]


def worker(
    worker_id: int,
    gtid: str,
    stamps: Stamps,
    applying: tuple[str, dt.datetime, dt.datetime, dt.datetime] | None = None,
) -> dict[str, object]:
    """A worker row; ``stamps`` = original commit, immediate commit, apply start, apply end."""
    oct_, ict, start, end = stamps
    row: dict[str, object] = {
        "CHANNEL_NAME": "",
        "WORKER_ID": worker_id,
        "SERVICE_STATE": "ON",
        "LAST_APPLIED_TRANSACTION": gtid,
        "LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": oct_,
        "LAST_APPLIED_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ict,
        "LAST_APPLIED_TRANSACTION_START_APPLY_TIMESTAMP": start,
        "LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP": end,
        "APPLYING_TRANSACTION": "",
        "APPLYING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": ZERO,
        "APPLYING_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ZERO,
        "APPLYING_TRANSACTION_START_APPLY_TIMESTAMP": ZERO,
    }
    if applying is not None:
        a_gtid, a_oct, a_ict, a_start = applying
        row["APPLYING_TRANSACTION"] = a_gtid
        row["APPLYING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP"] = a_oct
        row["APPLYING_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP"] = a_ict
        row["APPLYING_TRANSACTION_START_APPLY_TIMESTAMP"] = a_start
    return row


def coordinator(
    gtid: str, oct_: dt.datetime, ict: dt.datetime, start: dt.datetime, end: dt.datetime
) -> dict[str, object]:
    return {
        "CHANNEL_NAME": "",
        "SERVICE_STATE": "ON",
        "LAST_PROCESSED_TRANSACTION": gtid,
        "LAST_PROCESSED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": oct_,
        "LAST_PROCESSED_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ict,
        "LAST_PROCESSED_TRANSACTION_START_BUFFER_TIMESTAMP": start,
        "LAST_PROCESSED_TRANSACTION_END_BUFFER_TIMESTAMP": end,
        "PROCESSING_TRANSACTION": "",
        "PROCESSING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP": ZERO,
        "PROCESSING_TRANSACTION_IMMEDIATE_COMMIT_TIMESTAMP": ZERO,
        "PROCESSING_TRANSACTION_START_BUFFER_TIMESTAMP": ZERO,
    }


# The chain: A commits G at T0.  B queues it (1.0-1.2 ms), applies it (1.5-2.5 ms) and commits
# it in its own binary log at 2.5 ms, which is C's immediate commit timestamp.  C queues it
# (3.0-3.1 ms), buffers it (3.2-3.3 ms, multi-threaded applier), applies it on worker 2
# (3.5-4.0 ms) while worker 1, which last applied F long ago, is applying H since 3.9 ms.
B_COMMIT = at(2.5)
B = FakeServer(
    {
        "replication_connection_status": [receiver(G, T0, T0, at(1.0), at(1.2))],
        "replication_applier_status_by_coordinator": [],
        "replication_applier_status_by_worker": [
            worker(1, G, (T0, T0, at(1.5), B_COMMIT)),
        ],
    }
)
C = FakeServer(
    {
        "replication_connection_status": [receiver(G, T0, B_COMMIT, at(3.0), at(3.1))],
        "replication_applier_status_by_coordinator": [
            coordinator(G, T0, B_COMMIT, at(3.2), at(3.3))
        ],
        "replication_applier_status_by_worker": [
            worker(
                1, F, (at(-20), at(-18), at(-15), at(-10)), applying=(H, at(3.6), at(3.8), at(3.9))
            ),
            worker(2, G, (T0, B_COMMIT, at(3.5), at(4.0))),
        ],
    }
)
EP_B = Endpoint("10.0.0.2", 3306)
EP_C = Endpoint("10.0.0.3", 3307)


def mysql_sampler(
    servers: Mapping[Endpoint, FakeServer], records: list[SpanRecord], clock: list[int]
) -> LagSampler:
    def connect(endpoint: Endpoint) -> FakeServer:
        return servers[endpoint]

    def tick() -> int:
        clock[0] += 1000
        return clock[0]

    return LagSampler(
        flavor="mysql",
        replicas=list(servers),
        connect=connect,
        emit=records.append,
        clock_ns=tick,
    )


def test_a_chain_gives_per_hop_and_end_to_end_lag() -> None:
    records: list[SpanRecord] = []
    sampler = mysql_sampler({EP_B: B, EP_C: C}, records, [10_000])
    returned = sampler.sample()
    assert returned == records
    b, c = (r.attributes for r in records)

    # the original commit timestamp is A's on every hop; the immediate one is per hop
    for a in (b, c):
        assert a[attr(LagStage.LAST_APPLIED, LagField.GTID)] == G
        assert a[attr(LagStage.LAST_APPLIED, LagField.ORIGINAL_COMMIT_US)] == us(T0)
        assert a[attr(LagStage.LAST_QUEUED, LagField.ORIGINAL_COMMIT_US)] == us(T0)
    assert b[attr(LagStage.LAST_APPLIED, LagField.IMMEDIATE_COMMIT_US)] == us(T0)
    assert c[attr(LagStage.LAST_APPLIED, LagField.IMMEDIATE_COMMIT_US)] == us(B_COMMIT)

    # B: one hop, so hop lag == end-to-end lag
    assert b[trace.LAG_APPLY_LAG_US] == us(B_COMMIT) - us(T0)
    assert b[trace.LAG_HOP_APPLY_LAG_US] == b[trace.LAG_APPLY_LAG_US]
    # C: end-to-end from A, and its own hop from B's commit
    assert c[trace.LAG_APPLY_LAG_US] == us(at(4.0)) - us(T0)
    assert c[trace.LAG_HOP_APPLY_LAG_US] == us(at(4.0)) - us(B_COMMIT)
    assert c[trace.LAG_QUEUE_LAG_US] == us(at(3.1)) - us(T0)
    assert c[trace.LAG_HOP_QUEUE_LAG_US] == us(at(3.1)) - us(B_COMMIT)
    # time in queue vs time in apply
    assert c[trace.LAG_QUEUE_TIME_US] == us(at(3.1)) - us(at(3.0))
    assert c[trace.LAG_RELAY_WAIT_US] == us(at(3.5)) - us(at(3.1))
    assert c[trace.LAG_APPLY_TIME_US] == us(at(4.0)) - us(at(3.5))
    assert b[trace.LAG_RELAY_WAIT_US] == us(at(1.5)) - us(at(1.2))


def test_stages_come_from_their_own_tables() -> None:
    records: list[SpanRecord] = []
    mysql_sampler({EP_C: C}, records, [0]).sample()
    (c,) = (r.attributes for r in records)
    assert c[attr(LagStage.LAST_PROCESSED, LagField.START_US)] == us(at(3.2))
    assert c[attr(LagStage.LAST_PROCESSED, LagField.END_US)] == us(at(3.3))
    # with several workers: the one being applied longest, and the last one finished
    assert c[attr(LagStage.APPLYING, LagField.GTID)] == H
    assert c[attr(LagStage.APPLYING, LagField.START_US)] == us(at(3.9))
    assert c[attr(LagStage.APPLYING, LagField.IMMEDIATE_COMMIT_US)] == us(at(3.8))
    # nothing being queued or processed: zero timestamps and '' are left out
    for stage in (LagStage.QUEUEING, LagStage.PROCESSING):
        assert not any(key.startswith(f"consistent.lag.{stage.value}.") for key in c)
    assert (c[trace.LAG_IO_RUNNING], c[trace.LAG_SQL_RUNNING]) == (True, True)
    assert c[trace.LAG_SOURCE_UUID] == SOURCE_A
    assert (c[trace.SERVER_ADDRESS], c[trace.SERVER_PORT]) == ("10.0.0.3", 3307)
    assert c[trace.LAG_REPLICA] == "10.0.0.3:3307"
    assert c[trace.DB_SYSTEM_NAME] == "mysql"


def test_lag_records_conform_to_the_contract() -> None:
    records: list[SpanRecord] = []
    mysql_sampler({EP_B: B, EP_C: C}, records, [5_000]).sample()
    for record in records:
        assert record.name == trace.LAG_SAMPLE_SPAN
        assert record.kind is trace.SpanKind.INTERNAL
        assert record.start_ns < record.end_ns
        assert trace.check_attributes(record.name, record.attributes) == ()


def test_a_channel_per_record() -> None:
    second = receiver(G, T0, T0, at(1.0), at(1.2)) | {"CHANNEL_NAME": "other"}
    server = FakeServer(
        {
            "replication_connection_status": [receiver(G, T0, T0, at(1.0), at(1.2)), second],
            "replication_applier_status_by_coordinator": [],
            "replication_applier_status_by_worker": [worker(1, G, (T0, T0, at(1.5), at(2.0)))],
        }
    )
    records: list[SpanRecord] = []
    mysql_sampler({EP_B: server}, records, [0]).sample()
    channels = {r.attributes[trace.LAG_CHANNEL]: r.attributes for r in records}
    assert set(channels) == {"", "other"}
    assert trace.LAG_APPLY_LAG_US not in channels["other"]  # no worker rows for it
    assert trace.LAG_QUEUE_LAG_US in channels["other"]


def test_an_unreachable_replica_is_recorded_and_retried() -> None:
    attempts: list[Endpoint] = []

    def connect(endpoint: Endpoint) -> FakeServer:
        attempts.append(endpoint)
        if len(attempts) == 1:
            raise OperationalError(2003, "Can't connect")
        return B

    records: list[SpanRecord] = []
    sampler = LagSampler(flavor="mysql", replicas=[EP_B], connect=connect, emit=records.append)
    sampler.sample()
    sampler.sample()
    failed, ok = records
    assert failed.attributes[trace.LAG_REACHABLE] is False
    assert failed.attributes[trace.ERROR_TYPE] == "consistent.errors.OperationalError"
    assert failed.status is StatusCode.ERROR
    assert trace.check_attributes(failed.name, failed.attributes) == ()
    assert ok.attributes[trace.LAG_REACHABLE] is True
    assert ok.attributes[trace.LAG_APPLY_LAG_US] == us(B_COMMIT) - us(T0)
    assert attempts == [EP_B, EP_B]


def test_a_query_failure_drops_the_connection() -> None:
    broken = FakeServer({"replication_connection_status": OperationalError(2013, "lost")})  # type: ignore[dict-item]
    records: list[SpanRecord] = []
    sampler = LagSampler(
        flavor="mysql", replicas=[EP_B], connect=lambda _e: broken, emit=records.append
    )
    sampler.sample()
    assert records[0].attributes[trace.LAG_REACHABLE] is False
    assert broken.closed == 1


def test_a_server_that_does_not_replicate_gives_a_bare_record() -> None:
    idle = FakeServer({"performance_schema": []})
    records: list[SpanRecord] = []
    LagSampler(
        flavor="mysql", replicas=[EP_B], connect=lambda _e: idle, emit=records.append
    ).sample()
    (record,) = records
    assert record.attributes[trace.LAG_REACHABLE] is True
    assert trace.LAG_APPLY_LAG_US not in record.attributes


def test_whether_a_replica_accepts_writes_is_sampled() -> None:
    writable = FakeServer(
        {
            "performance_schema": [],
            "read_only": [{"@@GLOBAL.read_only": 0, "@@GLOBAL.super_read_only": 0}],
        }
    )
    locked = FakeServer(
        {
            "performance_schema": [],
            "read_only": [{"@@GLOBAL.read_only": 1, "@@GLOBAL.super_read_only": 1}],
        }
    )
    silent = FakeServer({"performance_schema": []})  # answers no read-only query
    silent_ep = Endpoint("10.0.0.4", 3306)
    servers = {EP_B: writable, EP_C: locked, silent_ep: silent}
    records: list[SpanRecord] = []
    LagSampler(
        flavor="mysql",
        replicas=[EP_B, EP_C, silent_ep],
        connect=lambda e: servers[e],  # type: ignore[return-value]
        emit=records.append,
    ).sample()
    b, c, a = (record.attributes for record in records)
    assert (b[trace.LAG_READ_ONLY], b[trace.LAG_SUPER_READ_ONLY]) == (False, False)
    assert (c[trace.LAG_READ_ONLY], c[trace.LAG_SUPER_READ_ONLY]) == (True, True)
    assert a[trace.LAG_REACHABLE] is True  # a server that will not say is still reachable
    assert trace.LAG_READ_ONLY not in a
    for record in records:
        assert trace.check_attributes(record.name, record.attributes) == ()


# --- MariaDB -------------------------------------------------------------------------------


def slave_status(**changes: object) -> dict[str, object]:
    # Columns as MariaDB 10.11 returns them (SHOW ALL SLAVES STATUS, a subset).
    row: dict[str, object] = {
        "Connection_name": "",
        "Slave_IO_Running": "Yes",
        "Slave_SQL_Running": "No",
        "Master_Host": "127.0.0.1",
        "Master_Port": 3306,
        "Master_Log_File": "binlog.000001",
        "Read_Master_Log_Pos": 9000,
        "Relay_Master_Log_File": "binlog.000001",
        "Exec_Master_Log_Pos": 7000,
        "Seconds_Behind_Master": None,
        "Master_Server_Id": 1,
        "Gtid_IO_Pos": "0-1-115,1-5-30",
        "SQL_Delay": 0,
        "SQL_Remaining_Delay": None,
        "Gtid_Slave_Pos": "0-1-90",
    }
    row.update(changes)
    return row


def mariadb_sampler(
    replica: FakeServer, primary: FakeServer | None, records: list[SpanRecord]
) -> LagSampler:
    primary_ep = Endpoint("10.0.0.1", 3306)
    servers = {EP_B: replica, primary_ep: primary}
    return LagSampler(
        flavor="mariadb",
        replicas=[EP_B],
        primary=primary_ep if primary is not None else None,
        connect=lambda e: servers[e],  # type: ignore[return-value]
        emit=records.append,
    )


def test_mariadb_status_positions_and_transactions_behind() -> None:
    replica = FakeServer(
        {
            "SHOW ALL SLAVES STATUS": [slave_status()],
            "gtid_slave_pos": [{"@@GLOBAL.gtid_slave_pos": "0-1-100,1-5-30"}],
            "read_only": [{"@@GLOBAL.read_only": 1}],
        }
    )
    primary = FakeServer({"gtid_binlog_pos": [{"@@GLOBAL.gtid_binlog_pos": "0-1-120,1-5-30"}]})
    records: list[SpanRecord] = []
    mariadb_sampler(replica, primary, records).sample()
    (record,) = records
    a = record.attributes
    assert a[trace.DB_SYSTEM_NAME] == "mariadb"
    assert a[trace.LAG_GTID_SLAVE_POS] == "0-1-100,1-5-30"  # the variable, not the row's copy
    assert a[trace.LAG_GTID_IO_POS] == "0-1-115,1-5-30"
    assert a[trace.LAG_PRIMARY_GTID_BINLOG_POS] == "0-1-120,1-5-30"
    assert a[trace.LAG_TRANSACTIONS_BEHIND] == 120 - 100
    assert a[trace.LAG_TRANSACTIONS_QUEUED] == 115 - 100
    assert (a[trace.LAG_IO_RUNNING], a[trace.LAG_SQL_RUNNING]) == (True, False)
    assert trace.LAG_SECONDS_BEHIND_MASTER not in a  # NULL: the SQL thread is stopped
    assert (a[trace.LAG_READ_MASTER_LOG_POS], a[trace.LAG_EXEC_MASTER_LOG_POS]) == (9000, 7000)
    assert a[trace.LAG_MASTER_LOG_FILE] == "binlog.000001"
    assert (a[trace.LAG_SOURCE_SERVER_ID], a[trace.LAG_SQL_DELAY]) == (1, 0)
    assert a[trace.LAG_READ_ONLY] is True
    assert trace.LAG_SUPER_READ_ONLY not in a  # MariaDB has none
    assert "SELECT @@GLOBAL.read_only" in replica.statements
    assert trace.check_attributes(record.name, a) == ()


def test_mariadb_falls_back_to_show_slave_status_and_works_without_a_primary() -> None:
    replica = FakeServer(
        {
            "SHOW ALL SLAVES STATUS": OperationalError(1064, "syntax"),  # type: ignore[dict-item]
            "SHOW SLAVE STATUS": [slave_status(Seconds_Behind_Master=7, Slave_SQL_Running="Yes")],
            "gtid_slave_pos": [{"@@GLOBAL.gtid_slave_pos": "0-1-110"}],
        }
    )
    records: list[SpanRecord] = []
    mariadb_sampler(replica, None, records).sample()
    a = records[0].attributes
    assert a[trace.LAG_SECONDS_BEHIND_MASTER] == 7
    assert trace.LAG_TRANSACTIONS_BEHIND not in a
    assert a[trace.LAG_TRANSACTIONS_QUEUED] == (115 - 110) + 30  # domain 1 not applied at all
    assert "SHOW SLAVE STATUS" in replica.statements


def test_transactions_between() -> None:
    ahead = MariaPosition.parse("0-1-50,2-3-9")
    behind = MariaPosition.parse("0-2-45,1-1-100")
    assert transactions_between(ahead, behind) == (50 - 45) + 9
    assert transactions_between(behind, ahead) == 100  # domain 0 is ahead on the other side


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (ZERO, None),
        ("", None),
        (dt.datetime(1970, 1, 1), None),
        (dt.datetime(2024, 5, 1, 12, 0, 0, 250), us(dt.datetime(2024, 5, 1, 12, 0, 0, 250))),
        ("2024-05-01 12:00:00.000250", us(dt.datetime(2024, 5, 1, 12, 0, 0, 250))),
        (b"2024-05-01 12:00:00.5", us(dt.datetime(2024, 5, 1, 12, 0, 0, 500000))),
        (
            dt.datetime(2024, 5, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            us(dt.datetime(2024, 5, 1, 12, 0)),
        ),
        (1714564800.5, 1714564800_500000),
        ("garbage", None),
    ],
)
def test_timestamps(value: object, expected: int | None) -> None:
    assert micros(value) == expected


# --- the loop and the stream -------------------------------------------------------------------


def test_run_polls_every_interval_until_told_to_stop() -> None:
    records: list[SpanRecord] = []
    sampler = LagSampler(
        flavor="mysql", replicas=[EP_B], connect=lambda _e: B, emit=records.append, interval=0.01
    )
    assert sampler.run(rounds=3) == 3
    assert len(records) == 3
    stop = threading.Event()
    stop.set()
    assert sampler.run(stop) == 0
    sampler.start()
    deadline = threading.Event()
    while sampler.rounds < 6:
        deadline.wait(0.01)
    sampler.stop()
    assert sampler.rounds >= 6
    count = sampler.rounds
    deadline.wait(0.05)
    assert sampler.rounds == count


def test_lag_records_join_the_statement_stream() -> None:
    memory = MemoryExporter()
    telemetry = Telemetry(TelemetryConfig(), exporters=[memory])
    tracer = telemetry.session(system="mysql")
    with tracer.statement("SELECT 1"):
        pass
    LagSampler(flavor="mysql", replicas=[EP_C], connect=lambda _e: C, emit=telemetry.emit).sample()
    assert telemetry.flush(10)
    assert [r.name for r in memory.records] == ["SELECT", trace.LAG_SAMPLE_SPAN]
    assert [r.attributes[trace.RECORD_KIND] for r in memory.records] == [
        "statement",
        "lag_sample",
    ]
    telemetry.shutdown()


@pytest.mark.parametrize(
    ("text", "host", "port", "name"),
    [
        ("db1", "db1", 3306, "db1:3306"),
        ("db1:3307", "db1", 3307, "db1:3307"),
        ("[::1]:3308", "::1", 3308, "[::1]:3308"),
        ("::1", "::1", 3306, "[::1]:3306"),
    ],
)
def test_endpoints(text: str, host: str, port: int, name: str) -> None:
    endpoint = Endpoint.parse(text)
    assert (endpoint.host, endpoint.port, endpoint.name) == (host, port, name)
    assert endpoint.label is None
    named = Endpoint.parse(f"delayed={text}")
    assert (named.host, named.port, named.name, named.label) == (host, port, name, "delayed")


def test_a_named_replica_is_recorded_under_its_name_beside_host_port() -> None:
    records: list[SpanRecord] = []
    named = Endpoint("10.0.0.3", 3307, "delayed")
    mysql_sampler({EP_B: B, named: C}, records, [0]).sample()
    b, c = (r.attributes for r in records)
    assert c[trace.LAG_REPLICA] == "10.0.0.3:3307"
    assert c[trace.LAG_REPLICA_NAME] == "delayed"
    assert trace.LAG_REPLICA_NAME not in b
    assert trace.check_attributes(trace.LAG_SAMPLE_SPAN, c) == ()
