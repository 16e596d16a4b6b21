"""The read-your-writes audit and staleness at read time, from the traces alone.

Both ask what a replica had executed when a read ran there.  The traces say it three ways:

* a lag sample: MySQL's ``last_applied`` GTID (WL#7374, reference §6.1), MariaDB's
  ``@@gtid_slave_pos``, observed between the sample span's start and end;
* the read's own wait on that replica, when it ended ``satisfied``: the wait set was executed
  before the read ran;
* what the router had learnt of that replica (``consistent.replica.known_executed``) and when
  (``consistent.replica.known_at_ns``: after the answer that taught it, a wait's, the replica's
  own OK packets' or the monitor's, had arrived), but only when it was learnt *before the read
  began*: the replica had executed that set by then.  A state learnt at or after the read's
  start proves nothing, whatever it says, and so does one that a lag sample taken after it
  was learnt contradicts (the sample shows less than the router claimed to know).

Only facts observed on the replica count, each with the time it was observed: the route's
reason (``known_covered``) is never taken as proof, so the audit checks the policy's
conclusion instead of repeating it.  A recorded known state that lies is still caught when a
sample after the read shows a required GTID missing (``stale`` wins over ``covered``).

Executed sets only grow, so a sample that ended before the read began is a lower bound of what
the read saw (*evidence*), and one that began after the read ended is an upper bound
(*observation*).  Both are kept as the highest GNO per source (:func:`gtid_high
<analytics.transforms.gtid_high>`): a replica applies each source's transactions in commit
order, which is GNO order (MariaDB: sequence-number order per domain; MySQL: a single-threaded
applier or ``replica_preserve_commit_order=ON``, the default since 8.0.27), so "GNO n is
executed" means "1..n are", and one number per source is the whole state.  The sources are
few (one per primary the traces saw, or MariaDB domains): :func:`gtid_sources` collects them
and every per-source value is a column of its own.

**Audit.**  For every read a replica served, the requirement per source is the highest GNO its
session had produced before it (the ``produced`` sets of its earlier statements) or that its
level required (``consistent.gtid.required``).  The read is

* ``covered`` when the evidence shows every requirement executed;
* ``stale`` when an observation after the read shows a required GTID still missing: the read
  certainly did not see it (a violation that really happened);
* ``unproven`` otherwise (no sample close enough either way, or a required set recorded only
  as a digest: a MySQL set beyond the size limit is read from its last GTID per source,
  ``<name>.high``, when the trace has it).

**Staleness.**  For every replica read with evidence: per source, the primary's highest GNO
when the read began (every ``produced`` set, the required sets of ``read_all_writes`` and
``read_latest`` statements, MariaDB samples' ``@@gtid_binlog_pos``) minus the replica's:
transactions behind, summed over sources; and the age of the oldest missing transaction (the
earliest traced commit of a GNO above the replica's), the largest over sources.

**How.**  No sort and no shuffle of the reads: binary searches in step functions
(:mod:`analytics.steps`): what the read's session had produced before it (along the session's
order), the evidence and the primary's state (past, by the read's start), the observation
(future, by the read's end), and the oldest missing transaction (on the GNO axis).  The step
functions have at most one point per lag sample, per write and per primary-state record; they
are collected in one pass over the statements (and one over the samples) and broadcast.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any, Final

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analytics import steps
from analytics.steps import (
    MISSING,
    Int64s,
    ReadLookups,
    Step,
    batch_lookup,
    build,
    build_sessions,
    lookup_fields,
    lookup_inputs,
)
from analytics.transforms import (
    UUID_PATTERN,
    clean_gtid_text,
    gtid_high_raw,
    gtid_source_representative,
    gtid_sources_of,
)

# The look-ups run on the executors: ship their module by value, so that the executors need
# numpy and pyarrow but no copy of the project.
cloudpickle.register_pickle_by_value(steps)  # type: ignore[no-untyped-call]

__all__ = [
    "GUARANTEED_LEVELS",
    "READ_AUDIT",
    "VIOLATIONS",
    "ReadAnalysis",
    "analyze_reads",
    "commits",
    "gtid_sources",
    "judge",
    "lookups",
    "primary_state",
    "replica_reads",
    "replica_states",
    "sources_and_lookups",
    "statement_states",
    "unproven_reason",
    "violation_rows",
]

#: Levels that promise a read sees the session's own writes.
GUARANTEED_LEVELS: Final = ("read_own_writes", "read_all_writes", "read_latest")

#: Statuses, from best to worst.
COVERED: Final = "covered"
UNPROVEN: Final = "unproven"
STALE: Final = "stale"

_DESCRIPTION: Final = (
    StructField("span_id", StringType()),
    StructField("session_id", StringType()),
    StructField("level", StringType()),
    StructField("replica", StringType()),
    StructField("route_reason", StringType()),
    StructField("start_ns", LongType()),
    StructField("end_ns", LongType()),
)
_NAMES: Final = tuple(f.name for f in _DESCRIPTION)

#: The source that decided a read's verdict: the first stale one, else the first not shown
#: covered, else the first; its requirement and the replica's state (evidence, observation).
_SOURCE_FIELDS: Final = (
    StructField("source", StringType()),
    StructField("required_high", LongType()),
    StructField("executed_low", LongType()),
    StructField("executed_high", LongType()),
)

#: One read served by a replica: the audit's verdict and the staleness at read time.
READ_AUDIT: Final = StructType(
    [
        *_DESCRIPTION,
        StructField("guaranteed", BooleanType(), False),
        StructField("status", StringType(), False),
        StructField("sources_checked", LongType(), False),
        StructField("behind_transactions", LongType()),
        StructField("behind_ms", DoubleType()),
        *_SOURCE_FIELDS,
    ]
)

#: The reads the audit could not show covered (stale or unproven): :data:`READ_AUDIT` rows.
VIOLATIONS: Final = READ_AUDIT

#: The source that decided a verdict (see :data:`VIOLATIONS`).
_DECIDED: Final = StructType(
    [
        StructField("rank", LongType()),
        StructField("order", LongType()),
        *_SOURCE_FIELDS,
    ]
)


def _gtid(name: str) -> Column:
    """GTID attribute column ``name``: its text, else (a MySQL set beyond the size limit) its
    last GTID per source, a subset of the set that reaches as far; the audit reads only the
    highest GNO per source, which both give alike."""
    return F.coalesce(F.col(name), F.col(name + "_high"))


def _high(text: Column, source: str) -> Column:
    """The highest GNO of ``source`` in GTID text ``text``."""
    return gtid_high_raw(text, source)


def _per_source(prefix: str, sources: Sequence[str]) -> list[str]:
    return [f"{prefix}{i}" for i in range(len(sources))]


def _replica_read() -> Column:
    """A read a replica served without error."""
    return (
        (F.col("statement_kind") == "read")
        & (F.col("route_role") == "replica")
        & F.col("error_type").isNull()
        & (F.coalesce(F.col("status_code"), F.lit(0)) != 2)
    )


def _sample_state() -> Column:
    return F.concat_ws(",", F.col("lag_last_applied_gtid"), F.col("lag_gtid_slave_pos"))


#: The GTID attributes whose sources :func:`gtid_sources` collects from the statements.
_SOURCE_TEXTS: Final = ("gtid_produced", "gtid_required")


def gtid_sources(statements: DataFrame, lag: DataFrame) -> DataFrame:
    """Every source (``source``: a server UUID, ``uuid:tag`` or a MariaDB domain) a produced or
    required set or a replica's sampled state names; to be collected (a handful)."""
    texts = statements.select(
        F.explode(F.array(*[_gtid(name) for name in _SOURCE_TEXTS])).alias("text")
    ).unionByName(lag.select(_sample_state().alias("text")))
    named = texts.where(F.col("text").isNotNull() & (F.col("text") != ""))
    distinct = named.select(gtid_source_representative(F.col("text")).alias("text")).distinct()
    sources = gtid_sources_of(clean_gtid_text(F.col("text")))
    return distinct.select(F.explode(sources).alias("source")).distinct()


def _known_before(read: Column) -> Column:
    """The read's span records what its replica was known to have executed, learnt strictly
    before the read began (the known state describes the replica the read ran on: the one its
    last wait ran on, if it waited)."""
    at = F.col("replica_known_at_ns")
    return (
        read
        & at.isNotNull()
        & (at < F.col("start_ns"))
        & (F.col("wait_target").isNull() | (F.col("wait_target") == F.col("route_target")))
    )


def replica_reads(statements: DataFrame, sources: Sequence[str]) -> DataFrame:
    """One row per read a replica served: its description, its ``session_id`` and, per source
    ``i``, ``required{i}`` (the highest GNO its level required), ``wait{i}`` (what its own
    satisfied wait on that replica proved executed) and ``known{i}`` (what the router knew
    that replica had executed, learnt at ``known_at_ns``, before the read began: null
    otherwise); ``digest_only`` marks a required set recorded only as its digest.

    What the session had produced before the read is looked up afterwards
    (:class:`analytics.steps.SessionSteps`), so that the reads are never sorted: the GTID
    texts are read into numbers here, in the scan."""
    read = _replica_read()
    own_wait = (F.col("wait_outcome") == "satisfied") & (
        F.col("wait_target") == F.col("route_target")
    )
    known = _known_before(F.lit(True))
    # The description keeps no attribute metadata (the audit's columns are its own).
    return statements.where(read).select(
        F.col("span_id"),
        F.col("session_id"),
        F.col("level").alias("level", metadata={}),
        F.col("route_target").alias("replica", metadata={}),
        F.col("route_reason").alias("route_reason", metadata={}),
        F.col("start_ns"),
        F.col("end_ns"),
        (_gtid("gtid_required").isNull() & F.col("gtid_required_digest").isNotNull()).alias(
            "digest_only"
        ),
        *[
            _high(_gtid("gtid_required"), s).alias(name)
            for s, name in zip(sources, _per_source("required", sources), strict=True)
        ],
        *[
            F.when(own_wait, _high(_gtid("wait_set"), s)).alias(name)
            for s, name in zip(sources, _per_source("wait", sources), strict=True)
        ],
        *[
            F.when(known, _high(_gtid("replica_known_executed"), s)).alias(name)
            for s, name in zip(sources, _per_source("known", sources), strict=True)
        ],
        F.when(known, F.col("replica_known_at_ns")).alias("known_at_ns"),
    )


def replica_states(lag: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(replica, start_ns, end_ns, applied{i}…)``: each reachable lag sample's highest
    applied GNO per source (null: the sample names no GTID of that source)."""
    answered = lag.where(F.coalesce(F.col("lag_reachable"), F.lit(True)))
    return answered.select(
        F.col("lag_replica").alias("replica"),
        "start_ns",
        "end_ns",
        *[
            _high(_sample_state(), s).alias(name)
            for s, name in zip(sources, _per_source("applied", sources), strict=True)
        ],
    )


def _produced() -> Column:
    return _gtid("gtid_produced")


def _wrote() -> Column:
    return _produced().isNotNull()


def _reported() -> Column:
    """A required set made of what the primary reported (``read_all_writes``, ``read_latest``)."""
    from_primary = F.col("level").isin("read_all_writes", "read_latest")
    return from_primary & _gtid("gtid_required").isNotNull()


def statement_states(statements: DataFrame, sources: Sequence[str]) -> DataFrame:
    """One row per statement that produced a set or that records the primary's state (the
    required sets of ``read_all_writes`` and ``read_latest`` statements, made of what the
    primary reported or a server was known to have executed): ``end_ns``, per source ``i``
    ``produced{i}`` (the highest GNO it produced) and ``primary{i}`` (the highest of its
    produced and those required sets, a lower bound of the primary's state at its end), and,
    for a statement that produced a set, the ``session_id``, ``span_id`` and ``start_ns``
    that order it in its session."""
    return _states(statements, sources, _wrote() | _reported())


def _states(
    statements: DataFrame, sources: Sequence[str], rows: Column, *extra: Column
) -> DataFrame:
    """:func:`statement_states` of the statements ``rows`` selects, with ``extra`` columns."""
    wrote = _wrote()
    # The highest GNO of both sets is the higher of each one's (each text read once).
    return statements.where(rows).select(
        *[F.when(wrote, F.col(c)).alias(c) for c in ("session_id", "span_id", "start_ns")],
        "end_ns",
        *[
            _high(_produced(), s).alias(name)
            for s, name in zip(sources, _per_source("produced", sources), strict=True)
        ],
        *[
            F.when(_reported(), F.greatest(_high(_produced(), s), _high(_gtid("gtid_required"), s)))
            .otherwise(_high(_produced(), s))
            .alias(name)
            for s, name in zip(sources, _per_source("primary", sources), strict=True)
        ],
        *extra,
    )


def _binlog_states(lag: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(at_ns, primary{i}…)`` of MariaDB samples' ``@@gtid_binlog_pos`` (at the sample's
    end)."""
    binlog = F.col("lag_primary_gtid_binlog_pos")
    return lag.where(binlog.isNotNull()).select(
        F.col("end_ns").alias("at_ns"),
        *[
            _high(binlog, s).alias(name)
            for s, name in zip(sources, _per_source("primary", sources), strict=True)
        ],
    )


def primary_state(statements: DataFrame, lag: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(at_ns, primary{i}…)``: lower bounds of the primary's executed state: every produced
    set (at its statement's end), the required sets of ``read_all_writes`` and ``read_latest``
    statements (at the statement's end, see :func:`statement_states`) and MariaDB samples'
    ``@@gtid_binlog_pos`` (at the sample's end)."""
    primary = _per_source("primary", sources)
    texts = statement_states(statements, sources).select(F.col("end_ns").alias("at_ns"), *primary)
    return texts.unionByName(_binlog_states(lag, sources))


def commits(statements: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(at_ns, source, high)``: when each produced set's highest GNO per source committed
    (its statement's end)."""
    entries = F.array(
        *[
            F.struct(F.lit(s).alias("source"), F.col(name).alias("high"))
            for s, name in zip(sources, _per_source("produced", sources), strict=True)
        ]
    )
    return statement_states(statements, sources).select(
        F.col("end_ns").alias("at_ns"), F.inline(F.filter(entries, lambda e: e["high"].isNotNull()))
    )


def _any(columns: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a | b, columns, F.lit(False))


def _all(columns: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a & b, columns, F.lit(True))


def _sum(columns: Sequence[Column]) -> Column:
    return reduce(lambda a, b: a + b, columns, F.lit(0))


def judge(states: DataFrame, sources: Sequence[str]) -> DataFrame:
    """Per read (from :func:`replica_reads` with ``low{i}``, ``high{i}``, ``primary{i}`` and
    ``oldest{i}`` looked up): :data:`READ_AUDIT`."""
    n = range(len(sources))
    req = [F.col(f"req{i}") for i in n]
    low = [F.col(f"low{i}") for i in n]
    high = [F.col(f"high{i}") for i in n]
    covered = [r.isNull() | (lo.isNotNull() & (r <= lo)) for r, lo in zip(req, low, strict=True)]
    stale = [r.isNotNull() & hi.isNotNull() & (r > hi) for r, hi in zip(req, high, strict=True)]
    digest = F.coalesce(F.col("digest_only"), F.lit(False))
    status = (
        F.when(_any(stale), F.lit(STALE))
        .when(digest | ~_all(covered), F.lit(UNPROVEN))
        .otherwise(F.lit(COVERED))
    )
    # The deciding source: the first stale one, else the first not shown covered.
    rank = [F.when(s, 2).when(~c, 1).otherwise(0) for s, c in zip(stale, covered, strict=True)]
    entries = [
        F.struct(
            rank[i].cast(LongType()).alias("rank"),
            F.lit(-i).cast(LongType()).alias("order"),
            F.lit(source).alias("source"),
            req[i].alias("required_high"),
            low[i].alias("executed_low"),
            high[i].alias("executed_high"),
        )
        for i, source in enumerate(sources)
    ]
    decided = F.array_max(F.array(*entries)) if entries else F.lit(None).cast(_DECIDED)
    known = _any([lo.isNotNull() for lo in low])
    behind = [
        F.coalesce(F.greatest(F.col(f"primary{i}") - lo, F.lit(0)), F.lit(0))
        for i, lo in zip(n, low, strict=True)
    ]
    start = F.col("start_ns")
    ages = [
        F.when(F.col(f"oldest{i}") <= start, start - F.col(f"oldest{i}")).otherwise(F.lit(0))
        for i in n
    ]
    return states.select(
        *_NAMES,
        F.coalesce(F.col("level").isin(*GUARANTEED_LEVELS), F.lit(False)).alias("guaranteed"),
        status.alias("status"),
        _sum([r.isNotNull().cast(LongType()) for r in req])
        .cast(LongType())
        .alias("sources_checked"),
        F.when(known, _sum(behind)).cast(LongType()).alias("behind_transactions"),
        F.when(known, F.greatest(*ages, F.lit(0)) / F.lit(1e6))
        .cast(DoubleType())
        .alias("behind_ms"),
        *[decided[f.name].alias(f.name) for f in _SOURCE_FIELDS],
    )


def unproven_reason() -> Column:
    """Why an ``unproven`` row of :data:`READ_AUDIT` could not be decided, from its deciding
    source (a key of :data:`analytics.report.UNPROVEN_REASONS`, which says what each means);
    null for the other verdicts."""
    required, low, high = F.col("required_high"), F.col("executed_low"), F.col("executed_high")
    return (
        F.when(F.col("status") != UNPROVEN, F.lit(None).cast(StringType()))
        .when(required.isNull() | (low.isNotNull() & (required <= low)), "digest_only")
        .when(low.isNull(), "no_sample_before")
        .when(high.isNull(), "no_sample_after")
        .otherwise("applied_between")
    )


def violation_rows(reads: DataFrame) -> DataFrame:
    """The reads not shown covered (:data:`VIOLATIONS`)."""
    return reads.where(F.col("status") != COVERED)


@dataclass(frozen=True, slots=True)
class ReadAnalysis:
    """What :func:`analyze_reads` finds."""

    #: One row per replica read (:data:`READ_AUDIT`).
    reads: DataFrame
    #: The reads not shown covered (:data:`VIOLATIONS`).
    violations: DataFrame


def _longs(table: Any, name: str) -> Int64s:
    column = table.column(name)
    filled = pc.fill_null(column, pa.scalar(MISSING, pa.int64()))
    values: Int64s = filled.to_numpy().astype(np.int64, copy=False)
    return values


def _strings(table: Any, name: str) -> list[str | None]:
    values: list[str | None] = table.column(name).to_pylist()
    return values


def lookups(statements: DataFrame, lag: DataFrame, sources: Sequence[str]) -> ReadLookups:
    """The step functions of the audit's look-ups (:class:`analytics.steps.ReadLookups`),
    collected to the driver: at most one point per reachable lag sample, per primary-state
    record (:func:`primary_state`) and per commit (:func:`commits`), 16 bytes each, and the
    sessions' writes (:class:`analytics.steps.SessionSteps`)."""
    return _lookups(statement_states(statements, sources).toArrow(), lag, sources)


def _only_of(sources: Sequence[str]) -> str | None:
    """A regular expression matching raw GTID text whose every group is a plain group of one
    of ``sources`` (an untagged MySQL group of one of their UUIDs, or a MariaDB position in
    one of their domains): text that names none of the other sources.  ``None``: no such
    text (no source, or only tagged ones)."""
    uuids = [re.escape(s) for s in sources if not s.isdigit() and ":" not in s]
    domains = [s for s in sources if s.isdigit()]
    groups = []
    if uuids:
        groups.append(f"(?:{'|'.join(uuids)}):[0-9]++(?:[:-][0-9]++)*+")
    if domains:
        groups.append(f"(?:{'|'.join(domains)})-[0-9]++-[0-9]++")
    if not groups:
        return None
    group = f"(?:{'|'.join(groups)})"
    return f"^{group}(?:,{group})*+$"


def _beyond(text: Column, pattern: str | None) -> Column:
    """The representative of GTID text that may name a source beyond those ``pattern``
    (:func:`_only_of`) allows; null otherwise."""
    named = text.isNotNull() & (text != "")
    beyond = named if pattern is None else named & ~text.rlike(pattern)
    return F.when(beyond, gtid_source_representative(text))


#: The representative of one untagged group of a lower-case UUID (``uuid:1``).
_UUID_ONE: Final = re.compile(f"({UUID_PATTERN}):1")


def _sources_named(spark: SparkSession, texts: Iterable[str | None]) -> list[str]:
    """The sources a few GTID representatives name (:func:`gtid_sources_of`): that of
    ``uuid:1`` is its UUID, as the expression finds it; any other text is read by the
    expression itself, in a job without shuffle."""
    distinct = {text for text in texts if text is not None}
    plain = {text for text in distinct if _UUID_ONE.fullmatch(text)}
    sources = {text[:36] for text in plain}
    if others := sorted(distinct - plain):
        frame = spark.createDataFrame([(text,) for text in others], "text string")
        named = frame.select(F.explode(gtid_sources_of(clean_gtid_text(F.col("text")))))
        sources |= {str(row[0]) for row in named.collect()}
    return sorted(sources)


def sources_and_lookups(statements: DataFrame, lag: DataFrame) -> tuple[list[str], ReadLookups]:
    """:func:`gtid_sources` (collected) and :func:`lookups`, with one pass over the statements
    instead of two when the lag samples name every source.

    The sources the samples name (a few rows) are a guess.  The pass that collects the
    statements' states with them also returns the representative of every produced or
    required set that may name another source (one expression per text: every group a plain
    group of a guessed source, :func:`_only_of`), which is none in the usual trace.  When those
    name another source (a primary no sampled replica applied from, no samples at all), the
    states are collected again with every source."""
    spark = statements.sparkSession
    sampled = lag.agg(F.collect_set(_beyond(_sample_state(), None))).first()
    guessed = _sources_named(spark, sampled[0] if sampled is not None else [])
    pattern = _only_of(guessed)
    beyond = {f"_beyond_{name}": _beyond(_gtid(name), pattern) for name in _SOURCE_TEXTS}
    rows = _any([_wrote(), _reported(), *[text.isNotNull() for text in beyond.values()]])
    extra = [text.alias(name) for name, text in beyond.items()]
    states = _states(statements, guessed, rows, *extra).toArrow()
    texts = sorted({t for name in beyond for t in _strings(states, name) if t is not None})
    found = _sources_named(spark, texts)
    sources = sorted({*guessed, *found})
    if sources != guessed:
        states = statement_states(statements, sources).toArrow()
    return sources, _lookups(states, lag, sources)


def _lookups(states: Any, lag: DataFrame, sources: Sequence[str]) -> ReadLookups:
    """:func:`lookups` from the statements' states collected (an Arrow table of at least the
    :func:`statement_states` columns; rows with no value of their own change nothing)."""
    n = range(len(sources))
    samples = replica_states(lag, sources).toArrow()
    replicas = _strings(samples, "replica")
    names = sorted({r for r in replicas if r is not None})
    which = np.array([r if r is not None else "" for r in replicas], dtype=object)
    starts, ends = _longs(samples, "start_ns"), _longs(samples, "end_ns")
    evidence: dict[str, tuple[Step, ...]] = {}
    observation: dict[str, tuple[Step, ...]] = {}
    for name in names:
        mine = which == name
        applied = [_longs(samples, f"applied{i}")[mine] for i in n]
        evidence[name] = tuple(build(ends[mine], a, "past") for a in applied)
        observation[name] = tuple(build(starts[mine], a, "future") for a in applied)
    binlog = _binlog_states(lag, sources).toArrow()
    at = _longs(states, "end_ns")
    primary_at = np.concatenate([at, _longs(binlog, "at_ns")])
    produced = [_longs(states, f"produced{i}") for i in n]
    return ReadLookups(
        earlier=build_sessions(
            states.column("session_id"),
            states.column("start_ns"),
            states.column("end_ns"),
            states.column("span_id"),
            produced,
        ),
        evidence=evidence,
        observation=observation,
        primary=tuple(
            build(
                primary_at,
                np.concatenate([_longs(states, f"primary{i}"), _longs(binlog, f"primary{i}")]),
                "past",
            )
            for i in n
        ),
        oldest=tuple(build(high, at, "future", inclusive=False) for high in produced),
    )


def _replica_index(replicas: Sequence[str]) -> Column:
    """The read's position in ``replicas`` (-1: none of them; null: no replica recorded)."""
    if not replicas:
        return F.lit(None).cast(LongType())
    names = F.array(*[F.lit(name) for name in replicas])
    return (F.array_position(names, F.col("replica")) - F.lit(1)).cast(LongType())


def analyze_reads(
    statements: DataFrame,
    lag: DataFrame,
    sources: Sequence[str],
    collected: ReadLookups | None = None,
) -> ReadAnalysis:
    """The audit and staleness of every replica read of ``statements``
    (:data:`analytics.schema.STATEMENT`) against the lag samples ``lag``
    (:data:`analytics.schema.LAG_SAMPLE`); ``sources`` from :func:`gtid_sources`, collected,
    and the look-ups when collected already (:func:`sources_and_lookups`).

    The reads are never sorted nor shuffled (:func:`replica_reads`): every look-up, along
    time, GNOs or a session's order, is a binary search in step functions broadcast to the
    executors (:func:`lookups`, :func:`analytics.steps.batch_lookup` in an Arrow UDF), so
    any number of replicas and sessions spreads over every core."""
    reads = replica_reads(statements, sources)
    spark = statements.sparkSession
    # Pickled here by cloudpickle (this module's classes by value, see batch_lookup): Spark's
    # own pickling of a broadcast would name them by module, for the executors to import.
    if collected is None:
        collected = lookups(statements, lag, sources)
    packed = cloudpickle.dumps(collected)  # type: ignore[no-untyped-call]
    shared = spark.sparkContext.broadcast(packed)
    names = lookup_fields(len(sources))
    found_type = StructType([StructField(name, LongType()) for name in names])
    # An iterator UDF, as the function's annotations say: PySpark's stubs know only the form
    # that names it with ``functionType``, which PySpark itself warns against.
    look_up = arrow_udf(batch_lookup(shared, len(sources)), found_type)  # type: ignore[call-overload]
    inputs = {"replica_index": _replica_index(collected.replicas())}
    found = look_up(*[inputs.get(name, F.col(name)) for name in lookup_inputs(len(sources))])
    looked_up = reads.select("*", found.alias("_found")).select(
        *reads.columns, *[F.col("_found")[name].alias(name) for name in names]
    )
    judged = judge(looked_up, sources)
    return ReadAnalysis(judged, violation_rows(judged))
