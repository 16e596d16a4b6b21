"""Explicit Spark schemas: the OTLP-JSON lines as read, and one flat row per record kind.

Nothing here is inferred.  :data:`OTLP_REQUEST` is the shape of one line written by
:mod:`consistent.telemetry.exporter` (one OTLP ``ExportTraceServiceRequest``); the reader
applies it so that a missing or extra field never changes a column's type.  OTLP JSON writes
64-bit integers (``intValue``, the span times) as decimal strings, so they are read as strings
and cast by the transforms.

:data:`SPAN` is one span after the request is exploded (attributes still as OTLP key/value
pairs).  :data:`STATEMENT`, :data:`LAG_SAMPLE` and :data:`ROLE_CHANGE` are the record kinds of
the contract in :mod:`consistent.trace`, one typed column per attribute, spelled out field by
field below; a test keeps them equal to ``consistent.trace.SPANS``.  Each attribute column
carries the attribute's name in its metadata (key :data:`ATTRIBUTE_KEY`); its column name is
the attribute name without the leading ``consistent.`` and with ``.`` replaced by ``_``
(:func:`column_name`).

https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding
"""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

__all__ = [
    "ANY_VALUE",
    "ATTRIBUTE_KEY",
    "BASE_FIELDS",
    "KEY_VALUE",
    "LAG_SAMPLE",
    "OTLP_REQUEST",
    "ROLE_CHANGE",
    "SPAN",
    "STATEMENT",
    "attribute_fields",
    "column_name",
]

#: Metadata key of an attribute column: the contract's attribute name.
ATTRIBUTE_KEY: Final = "attribute"

# --- OTLP JSON, as read ------------------------------------------------------------------------

#: OTLP ``AnyValue`` restricted to the scalars the contract uses.
ANY_VALUE: Final = StructType(
    [
        StructField("stringValue", StringType()),
        StructField("intValue", StringType()),
        StructField("doubleValue", DoubleType()),
        StructField("boolValue", BooleanType()),
    ]
)

#: OTLP ``KeyValue``.
KEY_VALUE: Final = StructType([StructField("key", StringType()), StructField("value", ANY_VALUE)])

_ATTRIBUTES: Final = ArrayType(KEY_VALUE)

_OTLP_SPAN: Final = StructType(
    [
        StructField("traceId", StringType()),
        StructField("spanId", StringType()),
        StructField("parentSpanId", StringType()),
        StructField("name", StringType()),
        StructField("kind", IntegerType()),
        StructField("startTimeUnixNano", StringType()),
        StructField("endTimeUnixNano", StringType()),
        StructField("attributes", _ATTRIBUTES),
        StructField(
            "status",
            StructType([StructField("message", StringType()), StructField("code", IntegerType())]),
        ),
    ]
)

_SCOPE_SPANS: Final = StructType(
    [
        StructField(
            "scope",
            StructType([StructField("name", StringType()), StructField("version", StringType())]),
        ),
        StructField("spans", ArrayType(_OTLP_SPAN)),
    ]
)

_RESOURCE_SPANS: Final = StructType(
    [
        StructField("resource", StructType([StructField("attributes", _ATTRIBUTES)])),
        StructField("scopeSpans", ArrayType(_SCOPE_SPANS)),
    ]
)

#: One line of an OTLP-JSON traces file: an ``ExportTraceServiceRequest``.
OTLP_REQUEST: Final = StructType([StructField("resourceSpans", ArrayType(_RESOURCE_SPANS))])

# --- one span ----------------------------------------------------------------------------------

#: Columns every record has, whatever its kind (span identity, resource, times, status).
BASE_FIELDS: Final = (
    StructField("service_name", StringType()),
    StructField("trace_id", StringType()),
    StructField("span_id", StringType()),
    StructField("parent_span_id", StringType()),
    StructField("start_ns", LongType()),
    StructField("end_ns", LongType()),
    StructField("status_code", IntegerType()),
    StructField("status_message", StringType()),
)

#: One span, attributes still as OTLP key/value pairs.
SPAN: Final = StructType(
    [
        *BASE_FIELDS[:4],
        StructField("name", StringType()),
        StructField("kind", IntegerType()),
        *BASE_FIELDS[4:],
        StructField("attributes", _ATTRIBUTES),
    ]
)


def column_name(attribute: str) -> str:
    """The column of ``attribute``: without ``consistent.``, ``.`` replaced by ``_``."""
    return attribute.removeprefix("consistent.").replace(".", "_")


def _a(name: str, data_type: DataType) -> StructField:
    return StructField(column_name(name), data_type, True, {ATTRIBUTE_KEY: name})


def _s(name: str) -> StructField:
    return _a(name, StringType())


def _i(name: str) -> StructField:
    return _a(name, LongType())


def _gtid(name: str) -> tuple[StructField, ...]:
    return (_s(name), _i(name + ".count"), _s(name + ".digest"), _s(name + ".high"))


# --- the statement record ------------------------------------------------------------------------

_STATEMENT_ATTRIBUTES: Final = (
    _s("consistent.record.kind"),
    _s("db.system.name"),
    _s("db.system"),
    _s("server.address"),
    _i("server.port"),
    _s("db.namespace"),
    _s("db.collection.name"),
    _s("db.operation.name"),
    _s("db.query.text"),
    _s("db.response.status_code"),
    _s("error.type"),
    _s("consistent.session.id"),
    _s("consistent.level"),
    _s("consistent.statement.kind"),
    _s("consistent.route.action"),
    _s("consistent.route.target"),
    _s("consistent.route.role"),
    _s("consistent.route.reason"),
    _s("consistent.route.detail"),
    _s("consistent.route.pinned_reason"),
    _s("consistent.route.tried"),
    _s("consistent.pool.pin_reason"),
    _s("consistent.gtid.lost"),
    *_gtid("consistent.gtid.required"),
    *_gtid("consistent.gtid.required.own"),
    *_gtid("consistent.gtid.required.seen"),
    *_gtid("consistent.gtid.required.acknowledged"),
    *_gtid("consistent.wait.set"),
    _s("consistent.wait.target"),
    _a("consistent.wait.duration_ms", DoubleType()),
    _s("consistent.wait.outcome"),
    _i("consistent.wait.count"),
    *_gtid("consistent.gtid.produced"),
    *_gtid("consistent.replica.known_executed"),
    _i("consistent.replica.known_at_ns"),
    _s("consistent.replica.known_source"),
)

#: One statement span: base columns, then one typed column per contract attribute.
STATEMENT: Final = StructType([*BASE_FIELDS, *_STATEMENT_ATTRIBUTES])

# --- the lag sample record -----------------------------------------------------------------------


def _stage(stage: str, finished: bool) -> tuple[StructField, ...]:
    prefix = f"consistent.lag.{stage}."
    fields = [
        _s(prefix + "gtid"),
        _i(prefix + "original_commit_us"),
        _i(prefix + "immediate_commit_us"),
        _i(prefix + "start_us"),
    ]
    if finished:
        fields.append(_i(prefix + "end_us"))
    return tuple(fields)


_LAG_SAMPLE_ATTRIBUTES: Final = (
    _s("consistent.record.kind"),
    _s("db.system.name"),
    _s("server.address"),
    _i("server.port"),
    _s("error.type"),
    _s("consistent.lag.replica"),
    _s("consistent.lag.replica_name"),
    _s("consistent.lag.channel"),
    _a("consistent.lag.reachable", BooleanType()),
    _a("consistent.lag.io_running", BooleanType()),
    _a("consistent.lag.sql_running", BooleanType()),
    _s("consistent.lag.source_uuid"),
    _a("consistent.lag.read_only", BooleanType()),
    _a("consistent.lag.super_read_only", BooleanType()),
    *_stage("last_queued", finished=True),
    *_stage("queueing", finished=False),
    *_stage("last_processed", finished=True),
    *_stage("processing", finished=False),
    *_stage("last_applied", finished=True),
    *_stage("applying", finished=False),
    _i("consistent.lag.apply_lag_us"),
    _i("consistent.lag.hop_apply_lag_us"),
    _i("consistent.lag.queue_lag_us"),
    _i("consistent.lag.hop_queue_lag_us"),
    _i("consistent.lag.apply_time_us"),
    _i("consistent.lag.queue_time_us"),
    _i("consistent.lag.relay_wait_us"),
    _i("consistent.lag.seconds_behind_master"),
    _s("consistent.lag.gtid_io_pos"),
    _s("consistent.lag.gtid_slave_pos"),
    _s("consistent.lag.primary_gtid_binlog_pos"),
    _i("consistent.lag.transactions_behind"),
    _i("consistent.lag.transactions_queued"),
    _i("consistent.lag.read_master_log_pos"),
    _i("consistent.lag.exec_master_log_pos"),
    _s("consistent.lag.master_log_file"),
    _s("consistent.lag.relay_master_log_file"),
    _i("consistent.lag.source_server_id"),
    _i("consistent.lag.sql_delay"),
    _i("consistent.lag.sql_remaining_delay"),
)

#: One lag sample span: base columns, then one typed column per contract attribute.
LAG_SAMPLE: Final = StructType([*BASE_FIELDS, *_LAG_SAMPLE_ATTRIBUTES])

# --- the role change record ----------------------------------------------------------------------

#: One change of primary found by role discovery (the lag chart marks it).
ROLE_CHANGE: Final = StructType(
    [
        *BASE_FIELDS,
        _s("consistent.record.kind"),
        _s("db.system.name"),
        _s("consistent.role.primary"),
        _s("consistent.role.previous"),
        _s("consistent.role.writable"),
    ]
)


def attribute_fields(schema: StructType) -> tuple[StructField, ...]:
    """The fields of ``schema`` that hold a contract attribute (in contract order)."""
    return tuple(field for field in schema.fields if ATTRIBUTE_KEY in (field.metadata or {}))
