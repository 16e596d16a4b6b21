"""Replication lag from what a replica reports: rows in, lag-sample attributes out (no I/O).

MySQL (WL#7374, reference §6.1): three performance_schema tables describe the stages a
transaction goes through on a replica, each with the transaction being handled now and the last
one handled, and for both the original commit timestamp (commit on the first source: the same
on every hop of a chain), the immediate commit timestamp (commit on this replica's own source:
per hop) and the stage's start (and, once done, end) time:

====================================================  ===================  ========
table                                                 stages               time of
====================================================  ===================  ========
``replication_connection_status`` (receiver)          last_queued,         QUEUE
                                                      queueing
``replication_applier_status_by_coordinator`` (MTS)   last_processed,      BUFFER
                                                      processing
``replication_applier_status_by_worker``              last_applied,        APPLY
                                                      applying
====================================================  ===================  ========

MariaDB has none of these: ``SHOW ALL SLAVES STATUS`` gives ``Seconds_Behind_Master``, the
received position (``Gtid_IO_Pos``) and the binary-log coordinates; ``@@gtid_slave_pos`` is what
was applied, and the primary's ``@@gtid_binlog_pos`` what exists.  Per domain, sequence numbers
count transactions, so the differences say how many are not applied (or not received) yet.

Both families: whether the replica accepts writes (``@@read_only``, and MySQL's
``@@super_read_only``), from :meth:`consistent.flavors.Flavor.read_only_statement`.

Timestamps are returned as integer microseconds since the epoch.  ``DATETIME(6)`` values are
read as UTC (the sampler's connections set ``time_zone = '+00:00'``), the all-zero value means
"none", numbers are taken as seconds since the epoch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from consistent.errors import MalformedGtidSet
from consistent.flavors import WriteProtection
from consistent.gtid import MariaPosition
from consistent.trace import (
    LAG_APPLY_LAG_US,
    LAG_APPLY_TIME_US,
    LAG_CHANNEL,
    LAG_EXEC_MASTER_LOG_POS,
    LAG_GTID_IO_POS,
    LAG_GTID_SLAVE_POS,
    LAG_HOP_APPLY_LAG_US,
    LAG_HOP_QUEUE_LAG_US,
    LAG_IO_RUNNING,
    LAG_MASTER_LOG_FILE,
    LAG_PRIMARY_GTID_BINLOG_POS,
    LAG_QUEUE_LAG_US,
    LAG_QUEUE_TIME_US,
    LAG_READ_MASTER_LOG_POS,
    LAG_READ_ONLY,
    LAG_RELAY_MASTER_LOG_FILE,
    LAG_RELAY_WAIT_US,
    LAG_SECONDS_BEHIND_MASTER,
    LAG_SOURCE_SERVER_ID,
    LAG_SOURCE_UUID,
    LAG_SQL_DELAY,
    LAG_SQL_REMAINING_DELAY,
    LAG_SQL_RUNNING,
    LAG_SUPER_READ_ONLY,
    LAG_TRANSACTIONS_BEHIND,
    LAG_TRANSACTIONS_QUEUED,
    AttributeValue,
    LagField,
    LagStage,
    lag_stage_attribute,
)

__all__ = [
    "MYSQL_TABLES",
    "Row",
    "mariadb_lag",
    "micros",
    "mysql_lag",
    "transactions_between",
    "write_protection_attributes",
]

#: A result row keyed by column name.
Row = Mapping[str, object]

_EPOCH: Final = dt.datetime(1970, 1, 1)
_ONE_US: Final = dt.timedelta(microseconds=1)
_US_PER_S: Final = 1_000_000

#: The three performance_schema tables, by the role the sampler gives them.
MYSQL_TABLES: Final = {
    "receiver": "performance_schema.replication_connection_status",
    "coordinator": "performance_schema.replication_applier_status_by_coordinator",
    "worker": "performance_schema.replication_applier_status_by_worker",
}


@dataclass(frozen=True, slots=True)
class _StageColumns:
    """Where one stage's fields are: table role, GTID column, timestamp column suffixes."""

    stage: LagStage
    table: str
    column: str
    time: str  # QUEUE / BUFFER / APPLY

    def original(self) -> str:
        return f"{self.column}_ORIGINAL_COMMIT_TIMESTAMP"

    def immediate(self) -> str:
        return f"{self.column}_IMMEDIATE_COMMIT_TIMESTAMP"

    def start(self) -> str:
        return f"{self.column}_START_{self.time}_TIMESTAMP"

    def end(self) -> str:
        return f"{self.column}_END_{self.time}_TIMESTAMP"


_STAGES: Final = (
    _StageColumns(LagStage.LAST_QUEUED, "receiver", "LAST_QUEUED_TRANSACTION", "QUEUE"),
    _StageColumns(LagStage.QUEUEING, "receiver", "QUEUEING_TRANSACTION", "QUEUE"),
    _StageColumns(LagStage.LAST_PROCESSED, "coordinator", "LAST_PROCESSED_TRANSACTION", "BUFFER"),
    _StageColumns(LagStage.PROCESSING, "coordinator", "PROCESSING_TRANSACTION", "BUFFER"),
    _StageColumns(LagStage.LAST_APPLIED, "worker", "LAST_APPLIED_TRANSACTION", "APPLY"),
    _StageColumns(LagStage.APPLYING, "worker", "APPLYING_TRANSACTION", "APPLY"),
)


def micros(value: object) -> int | None:
    """A timestamp column as microseconds since the epoch; ``None`` for NULL and zero."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        result = (value - _EPOCH) // _ONE_US
        return result if result > 0 else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        text = value.strip()
        if not text or text.startswith("0000-00-00"):
            return None
        try:
            return micros(dt.datetime.fromisoformat(text))
        except ValueError:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        result = int(Decimal(str(value)) * _US_PER_S)
        return result if result > 0 else None
    return None


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return text.strip() or None


def _gtid_text(value: object) -> str | None:
    """A GTID position's text: ``""`` (nothing executed yet) is a value, NULL is not."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return text.replace("\n", "").strip()


def _integer(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _channel(row: Row) -> str:
    return _text(row.get("CHANNEL_NAME")) or ""


def _pick(rows: Sequence[Row], stage: _StageColumns) -> Row | None:
    """The row that describes ``stage`` among a channel's rows (several with MTS workers):
    the last finished transaction is the one that finished last; the one being handled is
    the one handled longest (it holds the lag)."""
    if not rows:
        return None
    if len(rows) == 1:
        return rows[0]
    if stage.stage.finished:
        return max(rows, key=lambda row: micros(row.get(stage.end())) or 0)
    busy = [row for row in rows if _text(row.get(stage.column))]
    if not busy:
        return rows[0]
    return min(busy, key=lambda row: micros(row.get(stage.start())) or 0)


def _put_stage(attributes: dict[str, AttributeValue], row: Row, stage: _StageColumns) -> None:
    gtid = _text(row.get(stage.column))
    if gtid is not None:
        attributes[lag_stage_attribute(stage.stage, LagField.GTID)] = gtid
    fields = [
        (LagField.ORIGINAL_COMMIT_US, stage.original()),
        (LagField.IMMEDIATE_COMMIT_US, stage.immediate()),
        (LagField.START_US, stage.start()),
    ]
    if stage.stage.finished:
        fields.append((LagField.END_US, stage.end()))
    for field, column in fields:
        value = micros(row.get(column))
        if value is not None:
            attributes[lag_stage_attribute(stage.stage, field)] = value


def _stage_value(
    attributes: Mapping[str, AttributeValue], stage: LagStage, field: LagField
) -> int | None:
    value = attributes.get(lag_stage_attribute(stage, field))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _difference(
    attributes: dict[str, AttributeValue], name: str, later: int | None, earlier: int | None
) -> None:
    if later is not None and earlier is not None:
        attributes[name] = later - earlier


def _derive(attributes: dict[str, AttributeValue]) -> None:
    """The lags and durations analytics reads most, from the stage fields."""
    applied, queued = LagStage.LAST_APPLIED, LagStage.LAST_QUEUED
    end_apply = _stage_value(attributes, applied, LagField.END_US)
    end_queue = _stage_value(attributes, queued, LagField.END_US)
    for name, later, stage, field in (
        (LAG_APPLY_LAG_US, end_apply, applied, LagField.ORIGINAL_COMMIT_US),
        (LAG_HOP_APPLY_LAG_US, end_apply, applied, LagField.IMMEDIATE_COMMIT_US),
        (LAG_APPLY_TIME_US, end_apply, applied, LagField.START_US),
        (LAG_QUEUE_LAG_US, end_queue, queued, LagField.ORIGINAL_COMMIT_US),
        (LAG_HOP_QUEUE_LAG_US, end_queue, queued, LagField.IMMEDIATE_COMMIT_US),
        (LAG_QUEUE_TIME_US, end_queue, queued, LagField.START_US),
    ):
        _difference(attributes, name, later, _stage_value(attributes, stage, field))
    gtid = lag_stage_attribute(applied, LagField.GTID)
    if gtid in attributes and attributes[gtid] == attributes.get(
        lag_stage_attribute(queued, LagField.GTID)
    ):
        start_apply = _stage_value(attributes, applied, LagField.START_US)
        _difference(attributes, LAG_RELAY_WAIT_US, start_apply, end_queue)


def _running(rows: Iterable[Row]) -> bool | None:
    states = [_text(row.get("SERVICE_STATE")) for row in rows]
    known = [state for state in states if state is not None]
    return any(state.upper() == "ON" for state in known) if known else None


def mysql_lag(tables: Mapping[str, Sequence[Row]]) -> dict[str, dict[str, AttributeValue]]:
    """Lag-sample attributes per channel from the rows of :data:`MYSQL_TABLES` (keyed by role:
    ``receiver``, ``coordinator``, ``worker``; a missing role has no rows)."""
    by_channel: dict[str, dict[str, list[Row]]] = {}
    for role in MYSQL_TABLES:
        for row in tables.get(role, ()):
            by_channel.setdefault(_channel(row), {}).setdefault(role, []).append(row)
    result: dict[str, dict[str, AttributeValue]] = {}
    for channel, roles in sorted(by_channel.items()):
        attributes: dict[str, AttributeValue] = {LAG_CHANNEL: channel}
        for stage in _STAGES:
            picked = _pick(roles.get(stage.table, []), stage)
            if picked is not None:
                _put_stage(attributes, picked, stage)
        receiver = roles.get("receiver", [])
        io_running = _running(receiver)
        if io_running is not None:
            attributes[LAG_IO_RUNNING] = io_running
        sql_running = _running(roles.get("worker", []))
        if sql_running is not None:
            attributes[LAG_SQL_RUNNING] = sql_running
        source = _text(receiver[0].get("SOURCE_UUID")) if receiver else None
        if source is not None:
            attributes[LAG_SOURCE_UUID] = source
        _derive(attributes)
        result[channel] = attributes
    return result


# --- MariaDB -------------------------------------------------------------------------------------


def _position(text: str | None) -> MariaPosition | None:
    if text is None:
        return None
    try:
        return MariaPosition.parse(text.replace(" ", "").replace("\n", ""))
    except MalformedGtidSet:
        return None


def transactions_between(ahead: MariaPosition, behind: MariaPosition) -> int:
    """Transactions in ``ahead`` not yet in ``behind``: per domain, the difference of the
    sequence numbers (a domain's sequence numbers count its transactions)."""
    total = 0
    for gtid in ahead.gtids():
        other = behind.get(gtid.domain)
        total += max(0, gtid.seq_no - (other.seq_no if other is not None else 0))
    return total


_MARIADB_INTS: Final = (
    ("Seconds_Behind_Master", LAG_SECONDS_BEHIND_MASTER),
    ("Read_Master_Log_Pos", LAG_READ_MASTER_LOG_POS),
    ("Exec_Master_Log_Pos", LAG_EXEC_MASTER_LOG_POS),
    ("Master_Server_Id", LAG_SOURCE_SERVER_ID),
    ("SQL_Delay", LAG_SQL_DELAY),
    ("SQL_Remaining_Delay", LAG_SQL_REMAINING_DELAY),
)
_MARIADB_TEXTS: Final = (
    ("Master_Log_File", LAG_MASTER_LOG_FILE),
    ("Relay_Master_Log_File", LAG_RELAY_MASTER_LOG_FILE),
)


def mariadb_lag(
    status_rows: Sequence[Row], slave_pos: str | None, primary_pos: str | None
) -> dict[str, dict[str, AttributeValue]]:
    """Lag-sample attributes per connection from ``SHOW ALL SLAVES STATUS`` rows, the
    replica's ``@@gtid_slave_pos`` and the primary's ``@@gtid_binlog_pos`` (``None`` when not
    read)."""
    result: dict[str, dict[str, AttributeValue]] = {}
    for row in status_rows:
        channel = _text(row.get("Connection_name")) or ""
        attributes: dict[str, AttributeValue] = {LAG_CHANNEL: channel}
        for column, name in _MARIADB_INTS:
            value = _integer(row.get(column))
            if value is not None:
                attributes[name] = value
        for column, name in _MARIADB_TEXTS:
            text = _text(row.get(column))
            if text is not None:
                attributes[name] = text
        io = _text(row.get("Slave_IO_Running"))
        if io is not None:
            attributes[LAG_IO_RUNNING] = io.lower() == "yes"
        sql = _text(row.get("Slave_SQL_Running"))
        if sql is not None:
            attributes[LAG_SQL_RUNNING] = sql.lower() == "yes"
        io_text = _gtid_text(row.get("Gtid_IO_Pos"))
        applied_text = _gtid_text(slave_pos if slave_pos is not None else row.get("Gtid_Slave_Pos"))
        primary_text = _gtid_text(primary_pos)
        for name, text in (
            (LAG_GTID_IO_POS, io_text),
            (LAG_GTID_SLAVE_POS, applied_text),
            (LAG_PRIMARY_GTID_BINLOG_POS, primary_text),
        ):
            if text is not None:
                attributes[name] = text
        applied = _position(applied_text) or MariaPosition()
        received = _position(io_text)
        primary = _position(primary_text)
        if primary is not None:
            attributes[LAG_TRANSACTIONS_BEHIND] = transactions_between(primary, applied)
        if received is not None:
            attributes[LAG_TRANSACTIONS_QUEUED] = transactions_between(received, applied)
        result[channel] = attributes
    return result


def write_protection_attributes(protection: WriteProtection) -> dict[str, AttributeValue]:
    """Lag-sample attributes of whether the replica accepts writes."""
    attributes: dict[str, AttributeValue] = {LAG_READ_ONLY: protection.read_only}
    if protection.super_read_only is not None:
        attributes[LAG_SUPER_READ_ONLY] = protection.super_read_only
    return attributes
