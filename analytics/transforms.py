"""Pure ``DataFrame -> DataFrame`` steps from OTLP requests to typed, ordered records.

* :func:`explode_requests`: one row per span (:data:`analytics.schema.SPAN`);
* :func:`statements` / :func:`lag_samples`: one typed row per record of each kind
  (:data:`analytics.schema.STATEMENT`, :data:`analytics.schema.LAG_SAMPLE`);
* :func:`gtid_high` / :func:`gtid_sources_of`: GTID text as Spark values (no Python UDF, so
  executors need nothing but the JVM);
* :func:`sequence_sessions` / :func:`sessionize`: statements in session order, sessions as rows.

A GTID set is read as its highest GNO per source.  ``source`` is the lower-case server UUID
(``uuid:tag`` for a tagged GTID, MySQL 8.3+); for a MariaDB position ``domain-server-seq`` it is
the domain number as text and the highest is ``seq``: a position covers another when, per
domain, its sequence number is at least as high.
"""

from __future__ import annotations

import re
from functools import reduce
from typing import Final

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from analytics.schema import (
    ATTRIBUTE_KEY,
    BASE_FIELDS,
    LAG_SAMPLE,
    ROLE_CHANGE,
    STATEMENT,
    attribute_fields,
)

__all__ = [
    "LAG_SAMPLE_SPAN",
    "SESSION",
    "STATEMENT_SPAN",
    "UUID_PATTERN",
    "clean_gtid_text",
    "explode_requests",
    "gtid_high",
    "gtid_high_raw",
    "gtid_source_representative",
    "gtid_sources_of",
    "lag_samples",
    "sequence_sessions",
    "sessionize",
    "statements",
]

#: The record kinds' names in the contract (``consistent.trace``).  Records are told apart
#: by their ``consistent.record.kind`` attribute, never by span name: a statement span is named
#: by the database conventions (``SELECT orders``).
STATEMENT_SPAN: Final = "consistent.statement"
LAG_SAMPLE_SPAN: Final = "consistent.lag_sample"
ROLE_CHANGE_SPAN: Final = "consistent.role_change"
#: The attribute that says which kind a record is, and its values.
RECORD_KIND: Final = "consistent.record.kind"
STATEMENT_RECORD: Final = "statement"
LAG_SAMPLE_RECORD: Final = "lag_sample"
ROLE_CHANGE_RECORD: Final = "role_change"

# --- OTLP requests to spans --------------------------------------------------------------------


def _resource_attribute(attributes: Column, key: str) -> Column:
    match = F.filter(attributes, lambda kv: kv["key"] == F.lit(key))
    return F.try_element_at(match, F.lit(1))["value"]["stringValue"]


def explode_requests(requests: DataFrame) -> DataFrame:
    """OTLP ``ExportTraceServiceRequest`` rows (:data:`analytics.schema.OTLP_REQUEST`) to one
    row per span (:data:`analytics.schema.SPAN`).  Lines that did not parse have no
    ``resourceSpans`` and yield nothing."""
    resources = requests.select(F.explode("resourceSpans").alias("rs")).select(
        _resource_attribute(F.col("rs.resource.attributes"), "service.name").alias("service"),
        F.col("rs.scopeSpans").alias("scopes"),
    )
    scopes = resources.select("service", F.explode("scopes").alias("ss"))
    spans = scopes.select("service", F.explode("ss.spans").alias("s"))
    return spans.select(
        F.col("service").alias("service_name"),
        F.lower("s.traceId").alias("trace_id"),
        F.lower("s.spanId").alias("span_id"),
        F.lower(F.nullif(F.col("s.parentSpanId"), F.lit(""))).alias("parent_span_id"),
        F.col("s.name").alias("name"),
        F.col("s.kind").alias("kind"),
        F.col("s.startTimeUnixNano").try_cast(LongType()).alias("start_ns"),
        F.col("s.endTimeUnixNano").try_cast(LongType()).alias("end_ns"),
        F.coalesce(F.col("s.status.code"), F.lit(0)).alias("status_code"),
        F.nullif(F.col("s.status.message"), F.lit("")).alias("status_message"),
        F.col("s.attributes").alias("attributes"),
    )


# --- spans to typed records --------------------------------------------------------------------


def _typed(value: Column, field: StructField) -> Column:
    kind = field.dataType.typeName()
    if kind == "string":
        return value["stringValue"]
    if kind == "long":
        return value["intValue"].try_cast(LongType())
    if kind == "double":
        return F.coalesce(value["doubleValue"], value["intValue"].try_cast("double"))
    return value["boolValue"]


def _typed_columns(schema: StructType, attributes: Column) -> list[Column]:
    return [
        _typed(attributes[field.metadata[ATTRIBUTE_KEY]], field).alias(field.name)
        for field in attribute_fields(schema)
    ]


def _record_kind(attributes: Column) -> Column:
    return attributes[RECORD_KIND]["stringValue"]


def _records(spans: DataFrame, record_kind: str, schema: StructType) -> DataFrame:
    attributes = F.map_from_entries("attributes")
    base = [F.col(field.name) for field in BASE_FIELDS]
    typed = _typed_columns(schema, attributes)
    kind = _record_kind(attributes)
    return spans.where(kind == F.lit(record_kind)).select(*base, *typed)


def statements(spans: DataFrame) -> DataFrame:
    """One typed row per statement span (:data:`analytics.schema.STATEMENT`); attributes a
    record lacks, or carries with the wrong type, are null."""
    return _records(spans, STATEMENT_RECORD, STATEMENT)


def lag_samples(spans: DataFrame) -> DataFrame:
    """One typed row per lag sample span (:data:`analytics.schema.LAG_SAMPLE`)."""
    return _records(spans, LAG_SAMPLE_RECORD, LAG_SAMPLE)


#: Values of the ``record`` column of :func:`records`, by record kind name.
RECORD_NAMES: Final = {
    STATEMENT_SPAN: STATEMENT_RECORD,
    LAG_SAMPLE_SPAN: LAG_SAMPLE_RECORD,
    ROLE_CHANGE_SPAN: ROLE_CHANGE_RECORD,
}


def records(spans: DataFrame) -> DataFrame:
    """Every record kind in one pass: ``record`` (``statement``, ``lag_sample`` or
    ``role_change``), the base columns, and the union of the kinds' attribute columns (an
    attribute several kinds have, such as ``db.system.name``, is one column).  Selecting a
    kind's rows and its schema's columns gives exactly :func:`statements` or
    :func:`lag_samples`; written partitioned by ``record``, one parse of the JSON serves
    every kind."""
    attributes = F.map_from_entries("attributes")
    columns: dict[str, Column] = {}
    for schema in (STATEMENT, LAG_SAMPLE, ROLE_CHANGE):
        for column, field in zip(
            _typed_columns(schema, attributes), attribute_fields(schema), strict=True
        ):
            columns.setdefault(field.name, column)
    kind = _record_kind(attributes)
    return spans.where(kind.isin(*RECORD_NAMES.values())).select(
        kind.alias("record"),
        *[F.col(field.name) for field in BASE_FIELDS],
        *columns.values(),
    )


# --- GTID text as Spark values ------------------------------------------------------------------

#: A server UUID in canonical (lower-case) form.
UUID_PATTERN: Final = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_INTERVALS: Final = "(?::[0-9]+(?:-[0-9]+)?)*"
#: The last number of a group's run of intervals: a tag, the next group or the end follows.
_LAST: Final = ":(?:[0-9]+-)?([0-9]+)(?=:[a-z_]|,|$)"
_MARIADB_GROUP: Final = "^[0-9]+-[0-9]+-[0-9]+$"


def clean_gtid_text(text: Column) -> Column:
    """GTID text as compared: lower-case, without blanks (mysqld breaks long sets over lines)."""
    return F.lower(F.regexp_replace(text, r"\s+", ""))


def _high_pattern(source: str) -> str:
    uuid, _, tag = source.partition(":")
    if source.isdigit():  # a MariaDB domain: its GTID's sequence number
        return f"(?:^|,){int(source)}-[0-9]+-([0-9]+)(?=,|$)"
    if not tag:  # untagged intervals come first in a group
        return f"(?:^|,){re.escape(uuid)}{_INTERVALS}{_LAST}"
    return f"(?:^|,){re.escape(uuid)}(?::[^,]*)?:{re.escape(tag)}{_INTERVALS}{_LAST}"


def gtid_high(text: Column, source: str) -> Column:
    """The highest GNO of ``source`` in a GTID set's text (``clean_gtid_text`` applied), or
    null when the set has none.  ``source`` is a lower-case server UUID, ``uuid:tag`` (MySQL
    8.3+ tagged GTIDs) or a MariaDB domain number; for a MariaDB position ``d-server-seq`` the
    highest is ``seq``.

    The text is expected in mysqld's canonical form, as the telemetry records it (intervals
    ascending, so a source's highest GNO is the last number of its run).  One regular
    expression per source: the expression stays small however often it is used, which keeps
    Spark's generated code small (a general parser inlined at every use made plans of
    hundreds of kilobytes that took longer to compile than to run)."""
    found = F.regexp_extract(text, _high_pattern(source), 1)
    value = F.nullif(found, F.lit("")).try_cast(LongType())
    return F.when(value >= 1, value)


#: One untagged group in canonical form: ``uuid:intervals`` (lower-case, no blanks, no comma,
#: no tag; the intervals numbers joined by single ``:`` or ``-``).
_PLAIN_GROUP: Final = "^[0-9a-f-]{36}:[0-9]++(?:[:-][0-9]++)*+$"


def _plain_group(text: Column) -> Column:
    """True when raw ``text`` is one untagged group in canonical form, ``uuid:intervals``
    (lower-case, no blanks, no comma, no tag), as almost every set the telemetry records is;
    null for null text.  One anchored expression without backtracking (possessive
    quantifiers), a fraction of the cost of taking the text apart with string functions;
    anything else is left to the expressions of :func:`gtid_high`."""
    return text.rlike(_PLAIN_GROUP)


def _own_last(text: Column, uuid: str) -> Column:
    """The last number of raw ``text`` when it is one untagged group of ``uuid`` in canonical
    form (``uuid:`` then numbers joined by single ``:`` or ``-``), else the empty string (null
    for null text): one anchored expression without backtracking, which checks the group and
    captures its last number in the same scan."""
    return F.regexp_extract(text, f"^{re.escape(uuid)}:(?:[0-9]++[:-])*+([0-9]++)$", 1)


def gtid_high_raw(text: Column, source: str) -> Column:
    """:func:`gtid_high` of raw GTID text (:func:`clean_gtid_text` not applied).  One plain
    group (:func:`_plain_group`) is answered without the expressions of :func:`gtid_high`:
    its source is its head and its highest GNO the last number; other text goes through
    :func:`gtid_high`.  The usual case, a plain group of ``source`` itself, takes one
    expression, evaluated once (:func:`_own_last`)."""
    uuid, _, tag = source.partition(":")
    slow = gtid_high(clean_gtid_text(text), source)
    nothing = F.lit(None).cast(LongType())
    if tag or source.isdigit():
        return F.when(_plain_group(text), nothing).otherwise(slow)
    # Null when the text is not a plain group of ``source`` (the empty capture).  Written as
    # a coalesce whose every argument reads it, so that Spark evaluates the expression once
    # per row (a common subexpression); a CASE reading it in one branch only would run it
    # again there.
    own = _own_last(text, uuid).try_cast(LongType())
    other = F.when(_plain_group(text), nothing).otherwise(slow)
    return F.coalesce(F.when(own >= 1, own), F.when(own.isNull(), other))


#: One untagged group of any head: 36 characters, ``:``, then digits, ``:`` and ``-`` only.
_ONE_UNTAGGED_GROUP: Final = "^[^,]{36}:[0-9][0-9:-]*+$"
#: A MySQL interval (``:n`` or ``:n-m``), and a MariaDB position ``domain-server-sequence``.
_INTERVAL: Final = ":[0-9]++(?:-[0-9]++)?"
_POSITION: Final = "(^|,)([0-9]++)-[0-9]++-[0-9]++(?=,|$)"


def gtid_source_representative(text: Column) -> Column:
    """Raw GTID text, or a short text naming the same sources (:func:`gtid_sources_of`), so
    that collecting the sources of many sets runs the expressions over the few distinct
    representatives only:

    * one untagged group (36 characters, ``:``, then only digits, ``:`` and ``-``) becomes
      ``head:1``: every expression of :func:`gtid_sources_of` reads the same head, and a
      tail of digits and separators either way;
    * any other text has its numbers set to 1 (each MySQL interval becomes ``:1``, each
      MariaDB position ``domain-1-1``): the heads, tags and domains that name sources stay,
      and so do the separators the expressions look for, so a set of many groups (several
      primaries, MariaDB domains) is represented by its shape."""
    numbers = F.regexp_replace(F.regexp_replace(text, _INTERVAL, ":1"), _POSITION, "$1$2-1-1")
    return F.when(
        text.rlike(_ONE_UNTAGGED_GROUP), F.concat(F.substring(text, 1, 37), F.lit("1"))
    ).otherwise(numbers)


def _mysql_sources(group: Column) -> Column:
    uuid = F.substring(group, 1, 36)
    tokens = F.split(F.substring(group, 38, 1 << 30), ":")
    tags = F.filter(tokens, lambda t: t.rlike("^[a-z_]"))
    tagged = F.transform(tags, lambda t: F.concat(uuid, F.lit(":"), t))
    plain = F.when(F.try_element_at(tokens, F.lit(1)).rlike("^[0-9]"), F.array(uuid)).otherwise(
        F.array().cast(ArrayType(StringType()))
    )
    return F.concat(plain, tagged)


def _tagged_sources(text: Column) -> Column:
    groups = F.split(F.coalesce(text, F.lit("")), ",")
    per_group = F.transform(
        groups,
        lambda g: F.when(g.rlike(f"^{UUID_PATTERN}:"), _mysql_sources(g)).otherwise(
            F.array().cast(ArrayType(StringType()))
        ),
    )
    return F.flatten(per_group)


def gtid_sources_of(text: Column) -> Column:
    """The sources a GTID set's text (``clean_gtid_text`` applied) names, as
    ``array<string>``: UUIDs, ``uuid:tag`` for tagged intervals, MariaDB domains.  Anything
    else (``ANONYMOUS``, garbage) names none.

    Two regular expressions find untagged UUIDs and MariaDB domains; only a set with a tag
    (MySQL 8.3+, rare) goes through a split per group, whose lambdas Spark evaluates an order
    of magnitude slower."""
    text = F.coalesce(text, F.lit(""))
    # Almost every set is one group: its source is its head, cut without a regex scan.
    one_uuid = text.rlike(f"^{UUID_PATTERN}:[0-9][0-9:-]*$")
    one_domain = text.rlike(f"^{_MARIADB_GROUP[1:]}")
    single = F.when(one_uuid, F.array(F.substring(text, 1, 36))).when(
        one_domain, F.array(F.substring_index(text, "-", 1))
    )
    uuids = F.regexp_extract_all(text, F.lit(f"(?:^|,)({UUID_PATTERN})(?=:[0-9])"), 1)
    domains = F.regexp_extract_all(text, F.lit("(?:^|,)([0-9]+)-[0-9]+-[0-9]+(?=,|$)"), 1)
    tagged = F.when(text.rlike(":[a-z_]"), _tagged_sources(text)).otherwise(
        F.array().cast(ArrayType(StringType()))
    )
    return F.coalesce(single, F.array_distinct(F.concat(uuids, domains, tagged)))


# --- sessions ------------------------------------------------------------------------------

#: One session (:func:`sessionize`).
SESSION: Final = StructType(
    [
        StructField("session_id", StringType()),
        StructField("service_name", StringType()),
        StructField("level", StringType()),
        StructField("first_ns", LongType()),
        StructField("last_ns", LongType()),
        StructField("statements", LongType(), False),
        StructField("reads", LongType(), False),
        StructField("replica_reads", LongType(), False),
        StructField("writes", LongType(), False),
        StructField("pin_reason", StringType()),
    ]
)


def _session_order() -> WindowSpec:
    return Window.partitionBy("session_id").orderBy("start_ns", "end_ns", "span_id")


def sequence_sessions(statements: DataFrame) -> DataFrame:
    """Statements with ``session_seq``: their 1-based position in their session (by start
    time, then end time, then span id)."""
    return statements.withColumn("session_seq", F.row_number().over(_session_order()))


def _count(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1))).cast(LongType())


def _firsts() -> dict[str, Column]:
    """The statements whose value a session takes from its first one: any (its service),
    those with a level (its level), the pinned ones (its pin reason)."""
    return {
        "any": F.lit(True),
        "level": F.col("level").isNotNull(),
        "pinned": F.col("route_reason") == "pinned",
    }


def _session_totals(statements: DataFrame) -> DataFrame:
    """Per session (``_session``): its bounds and counts, and per kind of :func:`_firsts`
    where the first statement of that kind may be: ``_unstarted_{kind}`` (one has no start,
    and nulls sort first) and ``_earliest_{kind}`` (the earliest start).  Numbers only, so
    that Spark aggregates them by hash."""
    is_read = F.col("statement_kind") == "read"
    start = F.col("start_ns")
    kinds = _firsts()
    return statements.groupBy(F.col("session_id").alias("_session")).agg(
        F.min("start_ns").alias("first_ns"),
        F.max("end_ns").alias("last_ns"),
        F.count(F.lit(1)).cast(LongType()).alias("statements"),
        _count(is_read).alias("reads"),
        _count(is_read & (F.col("route_role") == "replica")).alias("replica_reads"),
        _count(F.col("gtid_produced_count") > 0).alias("writes"),
        *[F.max(F.when(c, start.isNull())).alias(f"_unstarted_{k}") for k, c in kinds.items()],
        *[F.min(F.when(c, start)).alias(f"_earliest_{k}") for k, c in kinds.items()],
    )


def _may_be_first(kind: str, of_kind: Column) -> Column:
    """A statement of ``kind`` that starts where its session's first of that kind does."""
    start = F.col("start_ns")
    at_start = F.when(F.col(f"_unstarted_{kind}"), start.isNull()).otherwise(
        start == F.col(f"_earliest_{kind}")
    )
    return of_kind & at_start


def sessionize(statements: DataFrame) -> DataFrame:
    """One row per session (:data:`SESSION`): the level of its first statement, its first
    start and last end, statement, read, replica-read and write counts, and the first reason
    it was pinned to the primary (null when never).

    "First" is in session order (start, end, span id; nulls first).  The bounds and counts
    are aggregated by hash (:func:`_session_totals`, broadcast); only the statements that
    start where a session's first of some kind does are then ordered, which spares a sort of
    every statement by session."""
    first = F.struct("start_ns", "end_ns", "span_id")
    kinds = _firsts()
    pinned = F.when(
        kinds["pinned"],
        F.struct(first.alias("at"), F.col("route_pinned_reason").alias("why")),
    )
    totals = _session_totals(statements)
    candidates = statements.join(
        F.broadcast(totals), F.col("session_id").eqNullSafe(F.col("_session"))
    ).where(reduce(lambda a, b: a | b, [_may_be_first(k, c) for k, c in kinds.items()]))
    counted = ("first_ns", "last_ns", "statements", "reads", "replica_reads", "writes")
    grouped = candidates.groupBy("session_id").agg(
        F.min_by("service_name", first).alias("service_name"),
        F.min_by("level", F.when(kinds["level"], first)).alias("level"),
        *[F.max(name).alias(name) for name in counted],
        F.min(pinned)["why"].alias("pin_reason"),
    )
    return grouped.select(*[field.name for field in SESSION.fields])
