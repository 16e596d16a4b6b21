"""The read-your-writes audit and staleness at read time, from the traces alone.

Both ask what a replica had executed when a read ran there.  The traces say it two ways:

* a lag sample: MySQL's ``last_applied`` GTID (WL#7374, reference §6.1), MariaDB's
  ``@@gtid_slave_pos``, observed between the sample span's start and end;
* the read's own wait on that replica, when it ended ``satisfied``: the wait set was executed
  before the read ran.

What the routing policy *believed* (``consistent.replica.known_executed``) is deliberately not
used, so that the audit checks the policy instead of repeating it.

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
  as a digest).

**Staleness.**  For every replica read with evidence: per source, the primary's highest GNO
when the read began (every ``produced`` set, the required sets of the levels that read the
primary's state, MariaDB samples' ``@@gtid_binlog_pos``) minus the replica's: transactions
behind, summed over sources; and the age of the oldest missing transaction (the earliest
traced commit of a GNO above the replica's), the largest over sources.

**How.**  One sort by session (what it had produced before each read), then two as-of
look-ups along each replica's reads (:func:`analytics.transforms.asof`): the evidence and the
primary's state (past, by the read's start), and the observation (future, by the read's end);
the oldest missing transaction is a look-up on the GNO axis over the few distinct replica
states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analytics.transforms import (
    asof,
    clean_gtid_text,
    gtid_high_raw,
    gtid_source_representative,
    gtid_sources_of,
)

__all__ = [
    "DEFAULT_GNO_BUCKET",
    "DEFAULT_TIME_BUCKET_NS",
    "GUARANTEED_LEVELS",
    "READ_AUDIT",
    "VIOLATIONS",
    "ReadAnalysis",
    "analyze_reads",
    "commits",
    "gtid_sources",
    "judge",
    "primary_state",
    "replica_names",
    "replica_reads",
    "replica_states",
    "violation_rows",
]

#: Levels that promise a read sees the session's own writes.
GUARANTEED_LEVELS: Final = ("read_own_writes", "read_all_writes", "read_latest")
#: Width of the time buckets of the as-of look-ups (10 s): longer than any read, short enough
#: to spread a long trace over many tasks.
DEFAULT_TIME_BUCKET_NS: Final = 10_000_000_000
#: Width of the GNO buckets of the oldest-missing look-up.
DEFAULT_GNO_BUCKET: Final = 100_000

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


def gtid_sources(statements: DataFrame, lag: DataFrame) -> DataFrame:
    """Every source (``source``: a server UUID, ``uuid:tag`` or a MariaDB domain) a produced or
    required set or a replica's sampled state names; to be collected (a handful)."""
    texts = statements.select(
        F.explode(F.array("gtid_produced", "gtid_required")).alias("text")
    ).unionByName(lag.select(_sample_state().alias("text")))
    named = texts.where(F.col("text").isNotNull() & (F.col("text") != ""))
    distinct = named.select(gtid_source_representative(F.col("text")).alias("text")).distinct()
    sources = gtid_sources_of(clean_gtid_text(F.col("text")))
    return distinct.select(F.explode(sources).alias("source")).distinct()


def replica_reads(statements: DataFrame, sources: Sequence[str]) -> DataFrame:
    """One row per read a replica served: its description and, per source ``i``,
    ``req{i}`` (the highest GNO its session had produced before it began, or its level
    required, whichever is higher) and ``wait{i}`` (what its own satisfied wait on that replica
    proved executed); ``digest_only`` marks a required set recorded only as its digest.

    The session's earlier writes come from one sort by session: statements of one session run
    one after another, so "before it began" is "earlier in the session"."""
    read = _replica_read()
    relevant = statements.where(read | F.col("gtid_produced").isNotNull())
    own_wait = (F.col("wait_outcome") == "satisfied") & (
        F.col("wait_target") == F.col("route_target")
    )
    # The session's hash first: the sort then compares longs, and strings only on a tie.
    earlier = (
        Window.partitionBy(F.xxhash64("session_id"), "session_id")
        .orderBy("start_ns", "end_ns", "span_id")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    before = [F.max(_high(F.col("gtid_produced"), s)).over(earlier) for s in sources]
    columns = [
        F.col("span_id"),
        F.col("session_id"),
        F.col("level"),
        F.col("route_target").alias("replica"),
        F.col("route_reason"),
        F.col("start_ns"),
        F.col("end_ns"),
        read.alias("_read"),
        (F.col("gtid_required").isNull() & F.col("gtid_required_digest").isNotNull()).alias(
            "digest_only"
        ),
        *[
            F.greatest(b, _high(F.col("gtid_required"), s)).alias(name)
            for b, s, name in zip(before, sources, _per_source("req", sources), strict=True)
        ],
        *[
            F.when(own_wait, _high(F.col("wait_set"), s)).alias(name)
            for s, name in zip(sources, _per_source("wait", sources), strict=True)
        ],
    ]
    return relevant.select(*columns).where(F.col("_read")).drop("_read")


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


def primary_state(statements: DataFrame, lag: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(at_ns, primary{i}…)``: lower bounds of the primary's executed state: every produced
    set (at its statement's end), the required sets of the levels that read the primary's state
    (``read_all_writes``, ``read_latest``; at the statement's end) and MariaDB samples'
    ``@@gtid_binlog_pos`` (at the sample's end)."""
    from_primary = F.col("level").isin("read_all_writes", "read_latest")
    texts = statements.where(
        F.col("gtid_produced").isNotNull() | (from_primary & F.col("gtid_required").isNotNull())
    ).select(
        F.col("end_ns").alias("at_ns"),
        F.concat_ws(
            ",", F.col("gtid_produced"), F.when(from_primary, F.col("gtid_required"))
        ).alias("text"),
    )
    binlog = lag.where(F.col("lag_primary_gtid_binlog_pos").isNotNull()).select(
        F.col("end_ns").alias("at_ns"), F.col("lag_primary_gtid_binlog_pos").alias("text")
    )
    return texts.unionByName(binlog).select(
        "at_ns",
        *[
            _high(F.col("text"), s).alias(name)
            for s, name in zip(sources, _per_source("primary", sources), strict=True)
        ],
    )


def commits(statements: DataFrame, sources: Sequence[str]) -> DataFrame:
    """``(at_ns, source, high)``: when each produced set's highest GNO per source committed
    (its statement's end)."""
    writes = statements.where(F.col("gtid_produced").isNotNull())
    entries = F.array(
        *[
            F.struct(F.lit(s).alias("source"), _high(F.col("gtid_produced"), s).alias("high"))
            for s in sources
        ]
    )
    return writes.select(
        F.col("end_ns").alias("at_ns"), F.inline(F.filter(entries, lambda e: e["high"].isNotNull()))
    )


def _replica_state_values(
    statements: DataFrame, samples: DataFrame, sources: Sequence[str], i: int
) -> DataFrame:
    """``low``: every value a replica's state of source ``i`` can take in the audit: the
    samples' and the satisfied waits' (read from the inputs, not from the audit's own
    output, which would be computed a second time)."""
    waits = statements.where(F.col("wait_outcome") == "satisfied").select(
        _high(F.col("wait_set"), sources[i]).alias("low")
    )
    values = samples.select(F.col(f"applied{i}").alias("low")).unionByName(waits)
    return values.where(F.col("low").isNotNull()).distinct()


def _oldest_missing(
    looked_up: DataFrame,
    statements: DataFrame,
    samples: DataFrame,
    sources: Sequence[str],
    gno_bucket: int | None,
) -> DataFrame:
    """``looked_up`` with ``oldest{i}``: when the first traced transaction of source ``i``
    above the replica's state ``low{i}`` committed.  The look-up runs over the distinct
    states a replica can be in (few: one per sample or wait), then joins by broadcast."""
    commit_rows = commits(statements, sources)
    result = looked_up
    for i, source in enumerate(sources):
        states = _replica_state_values(statements, samples, sources, i)
        found = asof(
            states.withColumn("source", F.lit(source)),
            commit_rows,
            keys=["source"],
            query_order="low",
            event_order="high",
            outputs={f"oldest{i}": "at_ns"},
            direction="future",
            inclusive=False,
            bucket=gno_bucket,
        ).select(F.col("low").alias(f"low{i}"), f"oldest{i}")
        result = result.join(F.broadcast(found), f"low{i}", "left")
    return result


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


def replica_names(statements: DataFrame) -> DataFrame:
    """The replicas reads were routed to (``replica``), to be collected: the primary's state is
    looked up along each replica's reads."""
    routed = statements.where(F.col("route_role") == "replica")
    return routed.select(F.col("route_target").alias("replica")).distinct()


def analyze_reads(
    statements: DataFrame,
    lag: DataFrame,
    sources: Sequence[str],
    replicas: Sequence[str],
    *,
    bucket_ns: int | None = None,
    gno_bucket: int | None = DEFAULT_GNO_BUCKET,
) -> ReadAnalysis:
    """The audit and staleness of every replica read of ``statements``
    (:data:`analytics.schema.STATEMENT`) against the lag samples ``lag``
    (:data:`analytics.schema.LAG_SAMPLE`); ``sources`` from :func:`gtid_sources` and
    ``replicas`` from :func:`replica_names`, collected.

    The look-ups along time sort each replica's reads and events as one window (two tasks for
    two replicas, which suits a small machine); ``bucket_ns`` also cuts the time axis into
    buckets of that width, for more parallelism on a cluster
    (:func:`analytics.transforms.asof`)."""
    n = range(len(sources))
    reads = replica_reads(statements, sources)
    samples = replica_states(lag, sources)
    # The evidence and the primary's state in one pass along each replica's reads: the
    # primary's events are repeated for every replica.
    # Built in the JVM (no Python rows), so that executors never need Python.
    listed = F.array(*[F.lit(r) for r in replicas]).cast(ArrayType(StringType()))
    names = statements.sparkSession.range(1).select(F.explode(listed).alias("replica"))
    primary = primary_state(statements, lag, sources).crossJoin(F.broadcast(names))
    before = samples.select("replica", F.col("end_ns").alias("at_ns"), *[f"applied{i}" for i in n])
    events = before.unionByName(primary, allowMissingColumns=True)
    with_low = asof(
        reads,
        events,
        keys=["replica"],
        query_order="start_ns",
        event_order="at_ns",
        outputs={
            **{f"ev{i}": f"applied{i}" for i in n},
            **{f"primary{i}": f"primary{i}" for i in n},
        },
        bucket=bucket_ns,
    )
    with_high = asof(
        with_low,
        samples,
        keys=["replica"],
        query_order="end_ns",
        event_order="start_ns",
        outputs={f"high{i}": f"applied{i}" for i in n},
        direction="future",
        bucket=bucket_ns,
    )
    lows = with_high.select(
        "*", *[F.greatest(F.col(f"ev{i}"), F.col(f"wait{i}")).alias(f"low{i}") for i in n]
    )
    looked_up = _oldest_missing(lows, statements, samples, sources, gno_bucket)
    judged = judge(looked_up, sources)
    return ReadAnalysis(judged, violation_rows(judged))
