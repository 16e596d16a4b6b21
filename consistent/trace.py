"""The trace contract: what every record in the trace stream is called and carries.

The traces are the product's second output (DESIGN "Traces and analytics"): operators read them
now, the PySpark jobs in ``analytics/`` read them later, and both depend on the names below and
nothing else.  Every name is a constant here, and the whole contract is also data
(:data:`SPANS`, :data:`METRICS`): a test keeps ``analytics/schema.py`` equal to it, and
:func:`schema_markdown` renders the table the README shows.

Records are OpenTelemetry spans, written as OTLP JSON (one ``ExportTraceServiceRequest`` per
line, see :mod:`consistent.telemetry.exporter`).  Two kinds exist, told apart by
:data:`RECORD_KIND` (readers key on it, never on span names):

* :data:`STATEMENT_SPAN`, one per routed statement (the wrapper and the proxy alike): where it
  went, why, what it waited for and how long.  Attributes follow OpenTelemetry's database
  semantic conventions where they apply (``db.system.name``, ``db.namespace``,
  ``db.collection.name``, ``server.address``, ``server.port``, ``db.operation.name``,
  ``db.query.text``), then our ``consistent.*`` ones; so does the span's name,
  ``{db.operation.name} {db.collection.name}`` (``SELECT orders``; ``SELECT`` when the
  statement has no single table; see :func:`statement_span_name`).  The span's own start and
  end are the statement's start and end, waits included.
* :data:`LAG_SAMPLE_SPAN`, one per replica per poll of the lag sampler: the WL#7374
  performance_schema fields on MySQL (reference §6.1), ``SHOW ALL SLAVES STATUS`` and the GTID
  positions on MariaDB.  All timestamps are integer microseconds since the epoch (UTC).
* :data:`ROLE_CHANGE_SPAN`, one when role discovery finds that another server is the primary
  (a switchover or a failover), from the proxy and from the wrapper's monitors: which server
  writes go to now, and which one they went to.

A GTID set is recorded as text (single line, mysqld's format, or MariaDB's
``domain-server-seq`` list) up to a configured size; beyond it the text attribute is left out
and ``<name>.digest`` (``sha256:`` + hex of the text) stands in for it, with, for a MySQL set,
``<name>.high``: the last GTID of each source (``uuid:N``), when that fits.  ``<name>.count`` is
always there: the number of transactions in a MySQL set, the number of domains in a MariaDB
position.

https://opentelemetry.io/docs/specs/semconv/database/database-spans/
https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

__all__ = [
    "ATTRIBUTES",
    "LAG_SAMPLE_ATTRIBUTES",
    "LAG_SAMPLE_SPAN",
    "METRICS",
    "ROLE_CHANGE_ATTRIBUTES",
    "ROLE_CHANGE_SPAN",
    "SCOPE_NAME",
    "SPANS",
    "STATEMENT_ATTRIBUTES",
    "STATEMENT_SPAN",
    "AttrType",
    "AttributeSpec",
    "AttributeValue",
    "Instrument",
    "LagField",
    "LagStage",
    "MetricSpec",
    "RecordKind",
    "SpanKind",
    "SpanSpec",
    "check_attributes",
    "lag_stage_attribute",
    "schema_markdown",
    "span_spec",
    "statement_span_name",
]

#: A span attribute's value as recorded (OTLP ``AnyValue`` restricted to scalars).
AttributeValue = str | int | float | bool

#: The instrumentation scope every record is emitted under.
SCOPE_NAME: Final = "consistent"

# --- span names --------------------------------------------------------------------------------

#: One routed statement: the record kind's name in this contract.  The span itself is named by
#: the database conventions (:func:`statement_span_name`).
STATEMENT_SPAN: Final = "consistent.statement"
#: One replica's replication state, sampled by the lag sampler.
LAG_SAMPLE_SPAN: Final = "consistent.lag_sample"
#: Role discovery found another primary.
ROLE_CHANGE_SPAN: Final = "consistent.role_change"
#: The server writes go to from now on (``host:port``).
ROLE_PRIMARY: Final = "consistent.role.primary"
#: The server they went to until now.
ROLE_PREVIOUS: Final = "consistent.role.previous"
#: The servers that accepted writes and replicated from none, comma-separated.
ROLE_WRITABLE: Final = "consistent.role.writable"

# --- OpenTelemetry semantic conventions ----------------------------------------------------------

#: ``mysql`` or ``mariadb``.
DB_SYSTEM_NAME: Final = "db.system.name"
#: The same, under the name earlier versions of the conventions used (still read by many
#: tracing back-ends).
DB_SYSTEM: Final = "db.system"
#: The schema (database) the session uses, when it has one.
DB_NAMESPACE: Final = "db.namespace"
#: The statement's one table, as written (``shop.orders``), when it names exactly one.
DB_COLLECTION_NAME: Final = "db.collection.name"
#: The server's host name or address, as configured.
SERVER_ADDRESS: Final = "server.address"
#: The server's TCP port.
SERVER_PORT: Final = "server.port"
#: The statement's first keyword, upper-case (``SELECT``, ``UPDATE``, ``BEGIN``…).
DB_OPERATION_NAME: Final = "db.operation.name"
#: The statement text with literals replaced by ``?`` (only when query-text capture is on).
DB_QUERY_TEXT: Final = "db.query.text"
#: The server's error number, as a string (a failed statement only).
DB_RESPONSE_STATUS_CODE: Final = "db.response.status_code"
#: The exception class of a failed statement or sample.
ERROR_TYPE: Final = "error.type"

# --- ours: every record -------------------------------------------------------------------------

#: The record kind (a :class:`RecordKind` value): lets a reader filter without the span name.
RECORD_KIND: Final = "consistent.record.kind"

# --- ours: statements ----------------------------------------------------------------------------

#: The logical session (one ``consistent.connect`` connection, one proxy client session).
SESSION_ID: Final = "consistent.session.id"
#: The consistency level that governed the statement (a hint may override the session's).
LEVEL: Final = "consistent.level"
#: The classifier's statement kind, lower-case (``read``, ``write``, ``commit``…).
STATEMENT_KIND: Final = "consistent.statement.kind"
#: The policy's last action: ``execute``, ``defer`` (nothing sent) or ``fail``.
ROUTE_ACTION: Final = "consistent.route.action"
#: Where the statement ran: ``primary`` or the replica's name (``host:port``).
ROUTE_TARGET: Final = "consistent.route.target"
#: ``primary`` or ``replica``.
ROUTE_ROLE: Final = "consistent.route.role"
#: Why it went there (a ``consistent.policy.Reason`` value).
ROUTE_REASON: Final = "consistent.route.reason"
#: What refines the reason (a primary reason such as ``for_update``, a hint…).
ROUTE_DETAIL: Final = "consistent.route.detail"
#: Why the session is pinned to the primary (reason ``pinned`` only).
ROUTE_PINNED_REASON: Final = "consistent.route.pinned_reason"
#: Replicas tried and abandoned for this statement, comma-separated, in order.
ROUTE_TRIED: Final = "consistent.route.tried"
#: The proxy with multiplexing: why the session keeps its backend connection after the
#: statement instead of giving it back to the pool (pin reasons, comma-separated).
POOL_PIN_REASON: Final = "consistent.pool.pin_reason"
#: GTIDs the session required that the primary it follows never had: a failover lost them
#: (``covers`` on MariaDB compares sequence numbers, so a replica may still pass for having
#: them).  Set on every statement of the session until its token is reset.
GTID_LOST: Final = "consistent.gtid.lost"
#: The session's required set when the statement was routed.
GTID_REQUIRED: Final = "consistent.gtid.required"
#: ``read_all_writes`` reads: the part of the required set that is the session's own (what the
#: primary reported to it, the tokens it required).  The required set is the union of this,
#: :data:`GTID_REQUIRED_SEEN` and :data:`GTID_REQUIRED_ACKNOWLEDGED` (they may overlap).
GTID_REQUIRED_OWN: Final = "consistent.gtid.required.own"
#: ``read_all_writes`` reads: what the session's earlier reads saw (what their replicas were
#: known to have executed when they served them).
GTID_REQUIRED_SEEN: Final = "consistent.gtid.required.seen"
#: ``read_all_writes`` reads: what the primary had acknowledged to any session of the process
#: (or of the proxy) when the read was routed.
GTID_REQUIRED_ACKNOWLEDGED: Final = "consistent.gtid.required.acknowledged"
#: What the replica was asked to wait for (the part of the required set it was not known to
#: have); the last wait when there were several.
WAIT_SET: Final = "consistent.wait.set"
#: The replica the last wait ran on.
WAIT_TARGET: Final = "consistent.wait.target"
#: Milliseconds spent waiting, all waits of the statement together.
WAIT_DURATION_MS: Final = "consistent.wait.duration_ms"
#: How the last wait ended: ``none`` (no wait), ``satisfied``, ``timeout`` or ``error``.
WAIT_OUTCOME: Final = "consistent.wait.outcome"
#: Number of waits the statement needed (0 when none).
WAIT_COUNT: Final = "consistent.wait.count"
#: The GTIDs the statement produced (from the primary's OK packets).
GTID_PRODUCED: Final = "consistent.gtid.produced"
#: What the replica (the one the statement ran on, else the last one waited on) was known to
#: have executed when the decision was taken.
REPLICA_KNOWN_EXECUTED: Final = "consistent.replica.known_executed"
#: When the process learnt :data:`REPLICA_KNOWN_EXECUTED` (the last time it grew), in
#: nanoseconds since the epoch, on the clock of the span's own start and end: read after the
#: answer that taught it arrived, so the replica had executed the whole known set by then.
#: Earlier than the span's start, it is evidence of what the replica had when the read ran.
REPLICA_KNOWN_AT_NS: Final = "consistent.replica.known_at_ns"
#: What last raised :data:`REPLICA_KNOWN_EXECUTED` (a :data:`KNOWN_SOURCES` value): a wait
#: that succeeded there, the replica's own OK packets (MySQL ``ALL_GTIDS`` tracking on a
#: replica connection), or a poll of the background monitor.
REPLICA_KNOWN_SOURCE: Final = "consistent.replica.known_source"

#: Suffix of the transaction (MySQL) or domain (MariaDB) count of a GTID attribute.
COUNT_SUFFIX: Final = ".count"
#: Suffix of the digest that replaces a GTID attribute's text beyond the configured size.
DIGEST_SUFFIX: Final = ".digest"
#: Suffix of a MySQL set's last GTID per source (``uuid:N,uuid2:M``, a subset of the set that
#: reaches as far), recorded beside the digest when the text is left out.
HIGH_SUFFIX: Final = ".high"
#: Prefix of every digest value.
DIGEST_PREFIX: Final = "sha256:"

# --- ours: lag samples ----------------------------------------------------------------------

#: The sampled replica's name (``host:port``), the same name statements use as their target.
LAG_REPLICA: Final = "consistent.lag.replica"
#: The name the user gave the sampled replica (``--replica NAME=HOST:PORT``), absent without
#: one: reports show it instead of ``host:port``, for statements routed there too.
LAG_REPLICA_NAME: Final = "consistent.lag.replica_name"
#: The replication channel (MySQL ``CHANNEL_NAME``, MariaDB ``Connection_name``; ``""`` default).
LAG_CHANNEL: Final = "consistent.lag.channel"
#: False when the replica could not be queried (``error.type`` says why).
LAG_REACHABLE: Final = "consistent.lag.reachable"
#: The receiver (I/O) thread runs.
LAG_IO_RUNNING: Final = "consistent.lag.io_running"
#: The applier (SQL) thread runs.
LAG_SQL_RUNNING: Final = "consistent.lag.sql_running"
#: MySQL ``SOURCE_UUID`` of the channel's source.
LAG_SOURCE_UUID: Final = "consistent.lag.source_uuid"
#: The replica's ``@@read_only``: false means it accepts writes (from ordinary accounts), so a
#: write sent to it by mistake would change it.
LAG_READ_ONLY: Final = "consistent.lag.read_only"
#: The replica's ``@@super_read_only`` (MySQL; absent on MariaDB, which has none).
LAG_SUPER_READ_ONLY: Final = "consistent.lag.super_read_only"


class LagStage(StrEnum):
    """The WL#7374 stages (reference §6.1): a transaction is queued by the receiver, processed
    (buffered) by the coordinator of a multi-threaded applier, applied by a worker.  ``last_*``
    is the last transaction the stage finished, ``*ing`` the one it handles now."""

    LAST_QUEUED = "last_queued"
    QUEUEING = "queueing"
    LAST_PROCESSED = "last_processed"
    PROCESSING = "processing"
    LAST_APPLIED = "last_applied"
    APPLYING = "applying"

    @property
    def finished(self) -> bool:
        """True for the ``last_*`` stages, which also have an end time."""
        return self.value.startswith("last_")


class LagField(StrEnum):
    """The fields of one stage (attribute ``consistent.lag.<stage>.<field>``)."""

    #: The transaction's GTID (``ANONYMOUS`` with GTIDs off).
    GTID = "gtid"
    #: Commit on the original source: identical on every replica of a chain.
    ORIGINAL_COMMIT_US = "original_commit_us"
    #: Commit on the immediate source: per hop.
    IMMEDIATE_COMMIT_US = "immediate_commit_us"
    #: When the stage started handling the transaction.
    START_US = "start_us"
    #: When the stage finished it (``last_*`` stages only).
    END_US = "end_us"


def lag_stage_attribute(stage: LagStage, field: LagField) -> str:
    """``consistent.lag.<stage>.<field>``."""
    return f"consistent.lag.{stage.value}.{field.value}"


#: ``last_applied.end - last_applied.original_commit``: end-to-end lag of the last applied
#: transaction (from its first commit anywhere to its apply here).
LAG_APPLY_LAG_US: Final = "consistent.lag.apply_lag_us"
#: ``last_applied.end - last_applied.immediate_commit``: this hop's share of it.
LAG_HOP_APPLY_LAG_US: Final = "consistent.lag.hop_apply_lag_us"
#: ``last_queued.end - last_queued.original_commit``: end-to-end lag of the last queued one.
LAG_QUEUE_LAG_US: Final = "consistent.lag.queue_lag_us"
#: ``last_queued.end - last_queued.immediate_commit``: this hop's share of it.
LAG_HOP_QUEUE_LAG_US: Final = "consistent.lag.hop_queue_lag_us"
#: ``last_applied.end - last_applied.start``: time the worker spent applying it.
LAG_APPLY_TIME_US: Final = "consistent.lag.apply_time_us"
#: ``last_queued.end - last_queued.start``: time the receiver spent queueing it.
LAG_QUEUE_TIME_US: Final = "consistent.lag.queue_time_us"
#: ``last_applied.start - last_queued.end`` when both name the same transaction: time it sat
#: in the relay log (time in queue, as opposed to time in apply).
LAG_RELAY_WAIT_US: Final = "consistent.lag.relay_wait_us"

# MariaDB (SHOW ALL SLAVES STATUS, @@gtid_slave_pos, the primary's @@gtid_binlog_pos)
#: ``Seconds_Behind_Master`` (absent when NULL: the SQL thread does not run).
LAG_SECONDS_BEHIND_MASTER: Final = "consistent.lag.seconds_behind_master"
#: ``Gtid_IO_Pos``: the last GTID received per domain.
LAG_GTID_IO_POS: Final = "consistent.lag.gtid_io_pos"
#: ``@@gtid_slave_pos``: the last GTID applied per domain.
LAG_GTID_SLAVE_POS: Final = "consistent.lag.gtid_slave_pos"
#: The primary's ``@@gtid_binlog_pos`` read in the same poll.
LAG_PRIMARY_GTID_BINLOG_POS: Final = "consistent.lag.primary_gtid_binlog_pos"
#: Sum over domains of ``primary seq_no - applied seq_no``: transactions not applied yet.
LAG_TRANSACTIONS_BEHIND: Final = "consistent.lag.transactions_behind"
#: Sum over domains of ``received seq_no - applied seq_no``: transactions in the relay log.
LAG_TRANSACTIONS_QUEUED: Final = "consistent.lag.transactions_queued"
#: ``Read_Master_Log_Pos``.
LAG_READ_MASTER_LOG_POS: Final = "consistent.lag.read_master_log_pos"
#: ``Exec_Master_Log_Pos``.
LAG_EXEC_MASTER_LOG_POS: Final = "consistent.lag.exec_master_log_pos"
#: ``Master_Log_File``.
LAG_MASTER_LOG_FILE: Final = "consistent.lag.master_log_file"
#: ``Relay_Master_Log_File``.
LAG_RELAY_MASTER_LOG_FILE: Final = "consistent.lag.relay_master_log_file"
#: ``Master_Server_Id``.
LAG_SOURCE_SERVER_ID: Final = "consistent.lag.source_server_id"
#: ``SQL_Delay`` (seconds of configured delay).
LAG_SQL_DELAY: Final = "consistent.lag.sql_delay"
#: ``SQL_Remaining_Delay`` (absent when not delaying).
LAG_SQL_REMAINING_DELAY: Final = "consistent.lag.sql_remaining_delay"


# --- the contract as data ------------------------------------------------------------------------


class RecordKind(StrEnum):
    """Values of :data:`RECORD_KIND`."""

    STATEMENT = "statement"
    LAG_SAMPLE = "lag_sample"
    ROLE_CHANGE = "role_change"


class AttrType(StrEnum):
    """An attribute's type; the value is the OTLP JSON ``AnyValue`` key it is written under."""

    STRING = "stringValue"
    #: Written as a decimal string, as OTLP JSON writes every 64-bit integer.
    INT = "intValue"
    DOUBLE = "doubleValue"
    BOOL = "boolValue"


class SpanKind(IntEnum):
    """OTLP ``Span.SpanKind`` values (written as integers in OTLP JSON).

    https://github.com/open-telemetry/opentelemetry-proto/blob/main/opentelemetry/proto/trace/v1/trace.proto
    """

    INTERNAL = 1
    SERVER = 2
    CLIENT = 3


class Instrument(StrEnum):
    """OpenTelemetry metric instruments used here."""

    COUNTER = "counter"
    HISTOGRAM = "histogram"
    GAUGE = "gauge"


@dataclass(frozen=True, slots=True)
class AttributeSpec:
    """One attribute of one record kind."""

    name: str
    type: AttrType
    description: str
    #: Present on every record of the kind.
    required: bool = False
    #: The only values allowed (empty: any value of the type).
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SpanSpec:
    """One record kind: its span name, OTLP span kind and attributes."""

    name: str
    record_kind: RecordKind
    span_kind: SpanKind
    description: str
    attributes: tuple[AttributeSpec, ...]
    #: How its spans are named (Markdown).
    naming: str = ""

    def attribute(self, name: str) -> AttributeSpec | None:
        """The spec of attribute ``name``, or ``None`` when the kind has no such attribute."""
        for spec in self.attributes:
            if spec.name == name:
                return spec
        return None


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric instrument and the attributes its points carry."""

    name: str
    instrument: Instrument
    unit: str
    description: str
    attributes: tuple[str, ...]


def _gtid_attribute(name: str, what: str) -> tuple[AttributeSpec, ...]:
    return (
        AttributeSpec(name, AttrType.STRING, f"{what} (text; left out beyond the size limit)"),
        AttributeSpec(
            name + COUNT_SUFFIX,
            AttrType.INT,
            f"{what}: transactions (MySQL) or domains (MariaDB)",
        ),
        AttributeSpec(name + DIGEST_SUFFIX, AttrType.STRING, f"{what}: digest beyond the limit"),
        AttributeSpec(
            name + HIGH_SUFFIX,
            AttrType.STRING,
            f"{what}: beyond the limit, the last GTID of each source (MySQL)",
        ),
    )


#: ``consistent.policy.Reason`` values (a test keeps them equal).
ROUTE_REASONS: Final = (
    "write",
    "in_transaction",
    "pinned",
    "session_state",
    "follows_previous",
    "hint",
    "hint_refused",
    "eventual",
    "nothing_required",
    "known_covered",
    "waited",
    "timeout_fallback",
    "timeout_error",
    "no_healthy_replica",
    "no_replicas",
)
#: ``consistent.policy.Level`` values.
LEVELS: Final = ("eventual", "read_own_writes", "read_all_writes", "read_latest")
#: ``consistent.classify.StatementKind`` names, lower-case.
STATEMENT_KINDS: Final = (
    "read",
    "write",
    "transaction_begin",
    "commit",
    "rollback",
    "savepoint",
    "release_savepoint",
    "rollback_to_savepoint",
    "session_state",
    "ddl",
    "lock",
    "other",
)
#: ``consistent.policy.Action`` values a statement can end with.
ROUTE_ACTIONS: Final = ("execute", "defer", "fail", "wait", "fetch_primary_state")
#: Values of :data:`WAIT_OUTCOME`.
WAIT_OUTCOMES: Final = ("none", "satisfied", "timeout", "error")
#: Values of :data:`REPLICA_KNOWN_SOURCE` (``consistent.policy.knowledge.KnownSource``).
KNOWN_SOURCES: Final = ("wait", "tracked", "monitor")
#: Values of :data:`ROUTE_ROLE`.
ROLES: Final = ("primary", "replica")
#: Values of :data:`DB_SYSTEM_NAME`.
DB_SYSTEMS: Final = ("mysql", "mariadb")

_KIND = AttributeSpec(RECORD_KIND, AttrType.STRING, "record kind", True)
_SYSTEM = AttributeSpec(DB_SYSTEM_NAME, AttrType.STRING, "mysql or mariadb", True, DB_SYSTEMS)
_ADDRESS = AttributeSpec(SERVER_ADDRESS, AttrType.STRING, "server host or address", True)
_PORT = AttributeSpec(SERVER_PORT, AttrType.INT, "server TCP port", True)
_ERROR = AttributeSpec(ERROR_TYPE, AttrType.STRING, "exception class (failures only)")

STATEMENT_ATTRIBUTES: Final = (
    AttributeSpec(RECORD_KIND, AttrType.STRING, "record kind", True, (RecordKind.STATEMENT,)),
    _SYSTEM,
    AttributeSpec(DB_SYSTEM, AttrType.STRING, "mysql or mariadb (older name)", True, DB_SYSTEMS),
    _ADDRESS,
    _PORT,
    AttributeSpec(DB_NAMESPACE, AttrType.STRING, "the session's schema, when it has one"),
    AttributeSpec(DB_COLLECTION_NAME, AttrType.STRING, "the statement's one table, as written"),
    AttributeSpec(DB_OPERATION_NAME, AttrType.STRING, "first keyword, upper-case"),
    AttributeSpec(DB_QUERY_TEXT, AttrType.STRING, "statement text, literals masked (opt-in)"),
    AttributeSpec(DB_RESPONSE_STATUS_CODE, AttrType.STRING, "server errno (failures only)"),
    _ERROR,
    AttributeSpec(SESSION_ID, AttrType.STRING, "logical session id", True),
    AttributeSpec(LEVEL, AttrType.STRING, "consistency level", False, LEVELS),
    AttributeSpec(STATEMENT_KIND, AttrType.STRING, "statement kind", False, STATEMENT_KINDS),
    AttributeSpec(ROUTE_ACTION, AttrType.STRING, "last policy action", False, ROUTE_ACTIONS),
    AttributeSpec(ROUTE_TARGET, AttrType.STRING, "primary or the replica's host:port", True),
    AttributeSpec(ROUTE_ROLE, AttrType.STRING, "primary or replica", True, ROLES),
    AttributeSpec(ROUTE_REASON, AttrType.STRING, "why it went there", True, ROUTE_REASONS),
    AttributeSpec(ROUTE_DETAIL, AttrType.STRING, "what refines the reason"),
    AttributeSpec(ROUTE_PINNED_REASON, AttrType.STRING, "pin reason (reason pinned only)"),
    AttributeSpec(ROUTE_TRIED, AttrType.STRING, "replicas tried and abandoned, comma-separated"),
    AttributeSpec(
        POOL_PIN_REASON,
        AttrType.STRING,
        "proxy: why the session keeps its pooled backend connection, comma-separated",
    ),
    AttributeSpec(
        GTID_LOST, AttrType.STRING, "required GTIDs a failover lost (the new primary lacks them)"
    ),
    *_gtid_attribute(GTID_REQUIRED, "the session's required set"),
    *_gtid_attribute(GTID_REQUIRED_OWN, "read_all_writes: the session's own GTIDs and tokens"),
    *_gtid_attribute(GTID_REQUIRED_SEEN, "read_all_writes: what the session's reads saw"),
    *_gtid_attribute(
        GTID_REQUIRED_ACKNOWLEDGED, "read_all_writes: what the process had acknowledged"
    ),
    *_gtid_attribute(WAIT_SET, "the set the last wait asked for"),
    AttributeSpec(WAIT_TARGET, AttrType.STRING, "the replica the last wait ran on"),
    AttributeSpec(WAIT_DURATION_MS, AttrType.DOUBLE, "milliseconds spent waiting", True),
    AttributeSpec(WAIT_OUTCOME, AttrType.STRING, "how the last wait ended", True, WAIT_OUTCOMES),
    AttributeSpec(WAIT_COUNT, AttrType.INT, "number of waits", True),
    *_gtid_attribute(GTID_PRODUCED, "GTIDs the statement produced"),
    *_gtid_attribute(REPLICA_KNOWN_EXECUTED, "the replica's known executed state"),
    AttributeSpec(
        REPLICA_KNOWN_AT_NS,
        AttrType.INT,
        "when the known executed state was learnt (ns since the epoch, the span's clock)",
    ),
    AttributeSpec(
        REPLICA_KNOWN_SOURCE,
        AttrType.STRING,
        "what last raised the known executed state",
        False,
        KNOWN_SOURCES,
    ),
)


def _stage_attributes() -> tuple[AttributeSpec, ...]:
    specs: list[AttributeSpec] = []
    for stage in LagStage:
        for field in LagField:
            if field is LagField.END_US and not stage.finished:
                continue
            kind = AttrType.STRING if field is LagField.GTID else AttrType.INT
            specs.append(
                AttributeSpec(lag_stage_attribute(stage, field), kind, f"MySQL {stage} {field}")
            )
    return tuple(specs)


ROLE_CHANGE_ATTRIBUTES: Final = (
    AttributeSpec(RECORD_KIND, AttrType.STRING, "record kind", True, (RecordKind.ROLE_CHANGE,)),
    AttributeSpec(DB_SYSTEM_NAME, AttrType.STRING, "mysql or mariadb", True),
    AttributeSpec(ROLE_PRIMARY, AttrType.STRING, "the primary from now on (host:port)", True),
    AttributeSpec(ROLE_PREVIOUS, AttrType.STRING, "the primary until now (host:port)", True),
    AttributeSpec(
        ROLE_WRITABLE, AttrType.STRING, "servers accepting writes and replicating from none"
    ),
)


LAG_SAMPLE_ATTRIBUTES: Final = (
    AttributeSpec(RECORD_KIND, AttrType.STRING, "record kind", True, (RecordKind.LAG_SAMPLE,)),
    _SYSTEM,
    _ADDRESS,
    _PORT,
    _ERROR,
    AttributeSpec(LAG_REPLICA, AttrType.STRING, "the replica's host:port", True),
    AttributeSpec(LAG_REPLICA_NAME, AttrType.STRING, "the name the replica was given, if any"),
    AttributeSpec(LAG_CHANNEL, AttrType.STRING, "replication channel"),
    AttributeSpec(LAG_REACHABLE, AttrType.BOOL, "the replica answered", True),
    AttributeSpec(LAG_IO_RUNNING, AttrType.BOOL, "receiver thread runs"),
    AttributeSpec(LAG_SQL_RUNNING, AttrType.BOOL, "applier thread runs"),
    AttributeSpec(LAG_SOURCE_UUID, AttrType.STRING, "MySQL source UUID"),
    AttributeSpec(LAG_READ_ONLY, AttrType.BOOL, "@@read_only (false: the replica is writable)"),
    AttributeSpec(LAG_SUPER_READ_ONLY, AttrType.BOOL, "MySQL @@super_read_only"),
    *_stage_attributes(),
    AttributeSpec(LAG_APPLY_LAG_US, AttrType.INT, "end-to-end apply lag, µs"),
    AttributeSpec(LAG_HOP_APPLY_LAG_US, AttrType.INT, "this hop's apply lag, µs"),
    AttributeSpec(LAG_QUEUE_LAG_US, AttrType.INT, "end-to-end queue lag, µs"),
    AttributeSpec(LAG_HOP_QUEUE_LAG_US, AttrType.INT, "this hop's queue lag, µs"),
    AttributeSpec(LAG_APPLY_TIME_US, AttrType.INT, "time applying the last transaction, µs"),
    AttributeSpec(LAG_QUEUE_TIME_US, AttrType.INT, "time queueing the last transaction, µs"),
    AttributeSpec(LAG_RELAY_WAIT_US, AttrType.INT, "time in the relay log, µs"),
    AttributeSpec(LAG_SECONDS_BEHIND_MASTER, AttrType.INT, "MariaDB Seconds_Behind_Master"),
    AttributeSpec(LAG_GTID_IO_POS, AttrType.STRING, "MariaDB Gtid_IO_Pos"),
    AttributeSpec(LAG_GTID_SLAVE_POS, AttrType.STRING, "MariaDB @@gtid_slave_pos"),
    AttributeSpec(LAG_PRIMARY_GTID_BINLOG_POS, AttrType.STRING, "primary @@gtid_binlog_pos"),
    AttributeSpec(LAG_TRANSACTIONS_BEHIND, AttrType.INT, "transactions not applied yet"),
    AttributeSpec(LAG_TRANSACTIONS_QUEUED, AttrType.INT, "transactions in the relay log"),
    AttributeSpec(LAG_READ_MASTER_LOG_POS, AttrType.INT, "MariaDB Read_Master_Log_Pos"),
    AttributeSpec(LAG_EXEC_MASTER_LOG_POS, AttrType.INT, "MariaDB Exec_Master_Log_Pos"),
    AttributeSpec(LAG_MASTER_LOG_FILE, AttrType.STRING, "MariaDB Master_Log_File"),
    AttributeSpec(LAG_RELAY_MASTER_LOG_FILE, AttrType.STRING, "MariaDB Relay_Master_Log_File"),
    AttributeSpec(LAG_SOURCE_SERVER_ID, AttrType.INT, "MariaDB Master_Server_Id"),
    AttributeSpec(LAG_SQL_DELAY, AttrType.INT, "configured delay, seconds"),
    AttributeSpec(LAG_SQL_REMAINING_DELAY, AttrType.INT, "remaining delay, seconds"),
)

SPANS: Final = (
    SpanSpec(
        STATEMENT_SPAN,
        RecordKind.STATEMENT,
        SpanKind.CLIENT,
        "one routed statement, waits included",
        STATEMENT_ATTRIBUTES,
        "`{db.operation.name} {db.collection.name}` (`SELECT orders`), or `{db.operation.name}` "
        "alone when the statement has no single table (`SELECT`, `COMMIT`)",
    ),
    SpanSpec(
        LAG_SAMPLE_SPAN,
        RecordKind.LAG_SAMPLE,
        SpanKind.INTERNAL,
        "one replica's replication state at one poll",
        LAG_SAMPLE_ATTRIBUTES,
        f"`{LAG_SAMPLE_SPAN}`",
    ),
    SpanSpec(
        ROLE_CHANGE_SPAN,
        RecordKind.ROLE_CHANGE,
        SpanKind.INTERNAL,
        "role discovery found another primary (a switchover or a failover)",
        ROLE_CHANGE_ATTRIBUTES,
        f"`{ROLE_CHANGE_SPAN}`",
    ),
)

#: Every attribute name of every record kind.
ATTRIBUTES: Final = frozenset(spec.name for span in SPANS for spec in span.attributes)

# --- metrics -------------------------------------------------------------------------------------

METRIC_READS: Final = "consistent.reads"
METRIC_WAITS: Final = "consistent.waits"
METRIC_FALLBACKS: Final = "consistent.fallbacks"
METRIC_PINNED_SESSIONS: Final = "consistent.pinned_sessions"
METRIC_LOST_GTID_STATEMENTS: Final = "consistent.gtid.lost_statements"
METRIC_WAIT_DURATION: Final = "consistent.wait.duration"
METRIC_STATEMENT_DURATION: Final = "consistent.statement.duration"
METRIC_REPLICA_LAG: Final = "consistent.replica.lag"

METRICS: Final = (
    MetricSpec(
        METRIC_READS,
        Instrument.COUNTER,
        "{statement}",
        "reads (statement kind read) by where they ran",
        (ROUTE_TARGET, ROUTE_ROLE),
    ),
    MetricSpec(
        METRIC_WAITS, Instrument.COUNTER, "{wait}", "waits on replicas by outcome", (WAIT_OUTCOME,)
    ),
    MetricSpec(
        METRIC_FALLBACKS,
        Instrument.COUNTER,
        "{statement}",
        "reads that wanted a replica and ran on the primary (timeout_fallback, no_healthy_replica)",
        (ROUTE_REASON, ROUTE_DETAIL),
    ),
    MetricSpec(
        METRIC_PINNED_SESSIONS,
        Instrument.COUNTER,
        "{session}",
        "sessions pinned to the primary, counted once per session and pin reason",
        (ROUTE_PINNED_REASON,),
    ),
    MetricSpec(
        METRIC_LOST_GTID_STATEMENTS,
        Instrument.COUNTER,
        "{statement}",
        "statements of sessions that required GTIDs a failover lost (see consistent.gtid.lost)",
        (ROUTE_ROLE,),
    ),
    MetricSpec(
        METRIC_WAIT_DURATION,
        Instrument.HISTOGRAM,
        "s",
        "duration of each statement's waits",
        (WAIT_OUTCOME,),
    ),
    MetricSpec(
        METRIC_STATEMENT_DURATION,
        Instrument.HISTOGRAM,
        "s",
        "statement latency (waits included) per route",
        (ROUTE_ROLE, ROUTE_TARGET, ROUTE_REASON),
    ),
    MetricSpec(
        METRIC_REPLICA_LAG,
        Instrument.GAUGE,
        "s",
        "apply lag of each replica at its last sample (MySQL: apply_lag_us; MariaDB: "
        "Seconds_Behind_Master)",
        (LAG_REPLICA, LAG_CHANNEL),
    ),
)


# --- checks and documentation ------------------------------------------------------------------

_PYTHON_TYPES: Final[Mapping[AttrType, tuple[type, ...]]] = {
    AttrType.STRING: (str,),
    AttrType.INT: (int,),
    AttrType.DOUBLE: (float, int),
    AttrType.BOOL: (bool,),
}


def span_spec(name: str) -> SpanSpec | None:
    """The record kind named ``name`` (:data:`STATEMENT_SPAN`, :data:`LAG_SAMPLE_SPAN`) or
    whose :data:`RECORD_KIND` value is ``name``."""
    for spec in SPANS:
        if name in (spec.name, spec.record_kind.value):
            return spec
    return None


def statement_span_name(operation: str, collection: str | None, system: str) -> str:
    """A statement span's name, as the database conventions build it: ``{db.operation.name}
    {target}`` with the table as the target (``SELECT orders``), the operation alone when
    there is no single table, the system's name when there is no operation either.

    https://opentelemetry.io/docs/specs/semconv/database/database-spans/#name
    """
    if not operation:
        return system
    return f"{operation} {collection}" if collection else operation


def _type_ok(kind: AttrType, value: object) -> bool:
    if isinstance(value, bool) and kind is not AttrType.BOOL:
        return False
    return isinstance(value, _PYTHON_TYPES[kind])


def check_attributes(span_name: str, attributes: Mapping[str, object]) -> tuple[str, ...]:
    """Every way ``attributes`` (decoded to Python values) break the contract of the record
    kind their :data:`RECORD_KIND` names (``span_name`` is only quoted in the problems):
    unknown kind, unknown or missing attributes, wrong types, values outside the allowed set.
    Empty when the record conforms."""
    kind = attributes.get(RECORD_KIND)
    spec = span_spec(kind) if isinstance(kind, str) else None
    if spec is None:
        return (f"{span_name!r} has no known {RECORD_KIND} ({kind!r})",)
    problems: list[str] = []
    for name, value in attributes.items():
        attr = spec.attribute(name)
        if attr is None:
            problems.append(f"{span_name}: unknown attribute {name!r}")
        elif not _type_ok(attr.type, value):
            problems.append(f"{span_name}: {name} = {value!r} is not {attr.type.name.lower()}")
        elif attr.values and value not in attr.values:
            problems.append(f"{span_name}: {name} = {value!r} not in {attr.values}")
    problems.extend(
        f"{span_name}: missing required {attr.name!r}"
        for attr in spec.attributes
        if attr.required and attr.name not in attributes
    )
    return tuple(problems)


def _rows(specs: Iterable[AttributeSpec]) -> list[str]:
    rows = []
    for spec in specs:
        values = ", ".join(spec.values) if spec.values else ""
        required = "yes" if spec.required else ""
        kind = spec.type.name.lower()
        rows.append(f"| `{spec.name}` | {kind} | {required} | {spec.description} | {values} |")
    return rows


def schema_markdown() -> str:
    """The contract as Markdown tables (the README's trace-format section)."""
    out: list[str] = []
    for span in SPANS:
        out += [
            f"### `{span.name}` ({span.description}; kind {span.span_kind.name})",
            "",
            f"Records with `{RECORD_KIND}` = `{span.record_kind.value}`; span name: {span.naming}.",
            "",
            "| attribute | type | required | meaning | values |",
            "|---|---|---|---|---|",
            *_rows(span.attributes),
            "",
        ]
    out += ["### Metrics", "", "| metric | instrument | unit | meaning | attributes |"]
    out.append("|---|---|---|---|---|")
    for metric in METRICS:
        attrs = ", ".join(f"`{a}`" for a in metric.attributes)
        out.append(
            f"| `{metric.name}` | {metric.instrument} | {metric.unit} | {metric.description} | "
            f"{attrs} |"
        )
    return "\n".join(out) + "\n"
