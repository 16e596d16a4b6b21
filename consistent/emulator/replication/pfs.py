"""performance_schema replication tables (WL#7374, reference §6.1), queryable over SQL.

=================================================  =============================================
``replication_connection_configuration``           the channel's source (host, port, user…)
``replication_connection_status``                  the receiver: ``LAST_QUEUED_TRANSACTION*``,
                                                   ``QUEUEING_TRANSACTION*``, received set
``replication_applier_configuration``              ``DESIRED_DELAY`` (``SOURCE_DELAY``)
``replication_applier_status``                     ``SERVICE_STATE``, ``REMAINING_DELAY``
``replication_applier_status_by_coordinator``      ``LAST_PROCESSED_*``, ``PROCESSING_*``
                                                   (multi-threaded appliers only)
``replication_applier_status_by_worker``           ``LAST_APPLIED_*``, ``APPLYING_*``
``error_log``                                      the server's error log (WL#7319 F6 warnings)
=================================================  =============================================

Timestamps have microsecond precision and are shown in the session time zone; a stage with no
transaction shows ``''`` and ``0000-00-00 00:00:00.000000`` (:mod:`.status` has the rules).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from consistent.emulator.replication.status import ErrorInfo, ServiceState, TrxStamp
from consistent.emulator.sql.catalog import TableDef
from consistent.emulator.sql.infoschema import VirtualTable, virtual_columns

if TYPE_CHECKING:
    from consistent.emulator.replication.channel import Channel
    from consistent.emulator.replication.service import ReplicationService
    from consistent.emulator.session import Session

__all__ = ["ZERO_TIMESTAMP", "format_timestamp", "install"]

#: How performance_schema shows a zero TIMESTAMP(6).
ZERO_TIMESTAMP: Final = "0000-00-00 00:00:00.000000"
PS: Final = "performance_schema"

Row = tuple[object, ...]


def format_timestamp(us: int, tz: dt.tzinfo) -> str:
    """A TIMESTAMP(6) value: µs since the epoch in ``tz``, or the zero timestamp for 0."""
    if us <= 0:
        return ZERO_TIMESTAMP
    seconds, micros = divmod(us, 1_000_000)
    moment = dt.datetime.fromtimestamp(seconds, tz).replace(microsecond=micros)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _stamp(stamp: TrxStamp, tz: dt.tzinfo, *, with_end: bool) -> Row:
    values: list[object] = [
        stamp.gtid,
        format_timestamp(stamp.original_commit, tz),
        format_timestamp(stamp.immediate_commit, tz),
        format_timestamp(stamp.start, tz),
    ]
    if with_end:
        values.append(format_timestamp(stamp.end, tz))
    return tuple(values)


def _error(error: ErrorInfo, tz: dt.tzinfo) -> Row:
    return (error.number, error.message, format_timestamp(error.timestamp, tz))


def _state(on: bool) -> str:
    return ServiceState.ON.value if on else ServiceState.OFF.value


def _trx_columns(now: str, last: str, verb: str) -> str:
    """Column spec of a "last handled" group (with END) and a "now handling" group."""
    stamps = (
        "ORIGINAL_COMMIT_TIMESTAMP:t,{p}_IMMEDIATE_COMMIT_TIMESTAMP:t,{p}_START_{v}_TIMESTAMP:t"
    )
    last_cols = (
        f"{last}_TRANSACTION,{last}_TRANSACTION_"
        + stamps.format(p=f"{last}_TRANSACTION", v=verb)
        + f",{last}_TRANSACTION_END_{verb}_TIMESTAMP:t"
    )
    now_cols = f"{now}_TRANSACTION,{now}_TRANSACTION_" + stamps.format(
        p=f"{now}_TRANSACTION", v=verb
    )
    return f"{last_cols},{now_cols}"


_ERROR_COLUMNS: Final = "LAST_ERROR_NUMBER:n,LAST_ERROR_MESSAGE:l,LAST_ERROR_TIMESTAMP:t"


def _connection_configuration(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        return [
            (
                c.name,
                c.config.host,
                c.config.port,
                c.config.user,
                "",
                "1" if c.config.auto_position else "0",
                "NO",
                c.config.connect_retry,
                c.config.retry_count,
                f"{c.config.heartbeat_period:.3f}",
            )
            for c in service.configured()
        ]

    return rows


def _connection_status(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        tz = session.time_zone()
        result: list[Row] = []
        for c in service.configured():
            result.append(
                (
                    c.name,
                    "",
                    c.source_uuid,
                    c.io_thread_id if c.io_running else None,
                    c.io_state.value,
                    0,
                    ZERO_TIMESTAMP,
                    str(c.retrieved).replace("\n", ""),
                    *_error(c.io_error, tz),
                    *_stamp(c.receiver.last, tz, with_end=True),
                    *_stamp(c.receiver.current, tz, with_end=False),
                )
            )
        return result

    return rows


def _applier_configuration(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        return [
            (c.name, c.config.delay, None, "NO", "STREAM", "OFF", None)
            for c in service.configured()
        ]

    return rows


def _applier_status(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        return [
            (c.name, _state(c.sql_running), c.remaining_delay(), 0) for c in service.configured()
        ]

    return rows


def _coordinator(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        tz = session.time_zone()
        return [
            (
                c.name,
                c.sql_thread_id if c.sql_running else None,
                _state(c.sql_running),
                *_error(c.coordinator_error, tz),
                *_stamp(c.coordinator.last, tz, with_end=True),
                *_stamp(c.coordinator.current, tz, with_end=False),
            )
            for c in service.configured()
            if c.multi_threaded
        ]

    return rows


def _workers(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        tz = session.time_zone()
        result: list[Row] = []
        for c in service.configured():
            result.extend(_worker_rows(c, tz))
        return result

    return rows


def _worker_rows(channel: Channel, tz: dt.tzinfo) -> list[Row]:
    result: list[Row] = []
    for w in channel.workers:
        result.append(
            (
                channel.name,
                w.worker_id,
                w.thread_id if w.running else None,
                _state(w.running),
                *_error(w.error, tz),
                *_stamp(w.status.last, tz, with_end=True),
                *_stamp(w.status.current, tz, with_end=False),
                0,
                0,
                "",
                ZERO_TIMESTAMP,
                0,
                0,
                "",
                ZERO_TIMESTAMP,
            )
        )
    return result


def _error_log(service: ReplicationService) -> Callable[[Session], list[Row]]:
    def rows(session: Session) -> list[Row]:
        tz = session.time_zone()
        return [
            (
                format_timestamp(e.logged, tz),
                e.thread_id,
                e.prio,
                e.error_code,
                e.subsystem,
                e.data,
            )
            for e in service.error_log.entries
        ]

    return rows


def _table(name: str, spec: str, rows: Callable[[Session], Sequence[Row]]) -> VirtualTable:
    return VirtualTable(
        TableDef(
            PS,
            name,
            virtual_columns(spec),
            temporary=True,
            engine="PERFORMANCE_SCHEMA",
            charset="utf8mb4",
            collation="utf8mb4_0900_ai_ci",
        ),
        rows,
    )


def tables(service: ReplicationService) -> list[VirtualTable]:
    """The replication tables of ``service``'s server."""
    return [
        _table(
            "replication_connection_configuration",
            "CHANNEL_NAME,HOST,PORT:n,USER,NETWORK_INTERFACE,AUTO_POSITION,SSL_ALLOWED,"
            "CONNECTION_RETRY_INTERVAL:n,CONNECTION_RETRY_COUNT:i,HEARTBEAT_INTERVAL",
            _connection_configuration(service),
        ),
        _table(
            "replication_connection_status",
            "CHANNEL_NAME,GROUP_NAME,SOURCE_UUID,THREAD_ID:i,SERVICE_STATE,"
            "COUNT_RECEIVED_HEARTBEATS:i,LAST_HEARTBEAT_TIMESTAMP:t,RECEIVED_TRANSACTION_SET:l,"
            f"{_ERROR_COLUMNS}," + _trx_columns("QUEUEING", "LAST_QUEUED", "QUEUE"),
            _connection_status(service),
        ),
        _table(
            "replication_applier_configuration",
            "CHANNEL_NAME,DESIRED_DELAY:n,PRIVILEGE_CHECKS_USER:l,REQUIRE_ROW_FORMAT,"
            "REQUIRE_TABLE_PRIMARY_KEY_CHECK,ASSIGN_GTIDS_TO_ANONYMOUS_TRANSACTIONS_TYPE,"
            "ASSIGN_GTIDS_TO_ANONYMOUS_TRANSACTIONS_VALUE",
            _applier_configuration(service),
        ),
        _table(
            "replication_applier_status",
            "CHANNEL_NAME,SERVICE_STATE,REMAINING_DELAY:i,COUNT_TRANSACTIONS_RETRIES:i",
            _applier_status(service),
        ),
        _table(
            "replication_applier_status_by_coordinator",
            f"CHANNEL_NAME,THREAD_ID:i,SERVICE_STATE,{_ERROR_COLUMNS},"
            + _trx_columns("PROCESSING", "LAST_PROCESSED", "BUFFER"),
            _coordinator(service),
        ),
        _table(
            "replication_applier_status_by_worker",
            f"CHANNEL_NAME,WORKER_ID:i,THREAD_ID:i,SERVICE_STATE,{_ERROR_COLUMNS},"
            + _trx_columns("APPLYING", "LAST_APPLIED", "APPLY")
            + ",LAST_APPLIED_TRANSACTION_RETRIES_COUNT:i,"
            "LAST_APPLIED_TRANSACTION_LAST_TRANSIENT_ERROR_NUMBER:n,"
            "LAST_APPLIED_TRANSACTION_LAST_TRANSIENT_ERROR_MESSAGE:l,"
            "LAST_APPLIED_TRANSACTION_LAST_TRANSIENT_ERROR_TIMESTAMP:t,"
            "APPLYING_TRANSACTION_RETRIES_COUNT:i,"
            "APPLYING_TRANSACTION_LAST_TRANSIENT_ERROR_NUMBER:n,"
            "APPLYING_TRANSACTION_LAST_TRANSIENT_ERROR_MESSAGE:l,"
            "APPLYING_TRANSACTION_LAST_TRANSIENT_ERROR_TIMESTAMP:t",
            _workers(service),
        ),
        _table(
            "error_log",
            "LOGGED:t,THREAD_ID:i,PRIO,ERROR_CODE,SUBSYSTEM,DATA:l",
            _error_log(service),
        ),
    ]


def install(service: ReplicationService) -> None:
    """Add the tables to ``service.server.virtual_tables``."""
    for table in tables(service):
        key = (table.table.schema.lower(), table.table.name.lower())
        service.server.virtual_tables[key] = table
