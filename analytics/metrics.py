"""Aggregations: replica lag, the cost of consistency, pinning, the headline numbers.

Percentiles are nearest-rank (``percentile_approx`` with accuracy 10 000: the smallest value
with at least p of the values at or below it; exact below 10 000 values per group, within
1/10 000 of the rank above), so that a p99 is always a latency that happened.  Durations are
reported in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)
from pyspark.sql.types import DoubleType, LongType

__all__ = [
    "FALLBACK_REASONS",
    "NO_LEVEL",
    "PERCENTILES",
    "cost_by_level",
    "lag_points",
    "lag_summary",
    "lag_windows",
    "pinning",
    "read_summary",
    "wait_histogram",
]

#: The percentiles reported everywhere.
PERCENTILES: Final = (0.5, 0.95, 0.99)
_ACCURACY: Final = 10_000
_NS_PER_MS: Final = 1e6
_US_PER_MS: Final = 1e3
_US_PER_S: Final = 1_000_000
#: Reasons a read that wanted a replica ran on the primary.
FALLBACK_REASONS: Final = ("timeout_fallback", "no_healthy_replica")
#: The level label of statements no policy decision governed (no replicas configured).
NO_LEVEL: Final = "none"


def _percentiles(column: Column, prefix: str) -> list[Column]:
    values = F.percentile_approx(column, list(PERCENTILES), _ACCURACY)
    names = [f"{prefix}_p{round(p * 100)}_ms" for p in PERCENTILES]
    return [values[i].cast(DoubleType()).alias(name) for i, name in enumerate(names)] + [
        F.max(column).cast(DoubleType()).alias(f"{prefix}_max_ms")
    ]


def _count(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1))).cast(LongType())


# --- lag -----------------------------------------------------------------------------------------


def lag_points(lag: DataFrame) -> DataFrame:
    """One point per reachable lag sample: ``replica, channel, at_ns`` (the sample's end) and,
    in ms, ``lag_ms`` (end to end: applied vs *original* commit; MariaDB:
    ``Seconds_Behind_Master``), ``hop_lag_ms`` (this hop only: applied vs *immediate*
    commit, WL#7374), ``queue_lag_ms`` and ``hop_queue_lag_ms`` (the same for the receiver)."""
    behind = F.col("lag_seconds_behind_master") * F.lit(_US_PER_S)
    reachable = F.coalesce(F.col("lag_reachable"), F.lit(True))
    return lag.where(reachable).select(
        F.col("lag_replica").alias("replica"),
        F.coalesce(F.col("lag_channel"), F.lit("")).alias("channel"),
        F.col("end_ns").alias("at_ns"),
        (F.coalesce(F.col("lag_apply_lag_us"), behind) / F.lit(_US_PER_MS)).alias("lag_ms"),
        (F.col("lag_hop_apply_lag_us") / F.lit(_US_PER_MS)).alias("hop_lag_ms"),
        (F.col("lag_queue_lag_us") / F.lit(_US_PER_MS)).alias("queue_lag_ms"),
        (F.col("lag_hop_queue_lag_us") / F.lit(_US_PER_MS)).alias("hop_queue_lag_ms"),
    )


def _lag_aggregates() -> list[Column]:
    return [
        F.count(F.lit(1)).cast(LongType()).alias("samples"),
        *_percentiles(F.col("lag_ms"), "lag"),
        *_percentiles(F.col("hop_lag_ms"), "hop_lag"),
    ]


def lag_windows(points: DataFrame, window_ns: int) -> DataFrame:
    """Lag percentiles per replica, channel and time window of ``window_ns``
    (``window_start_ns`` aligned on multiples of it): the time series."""
    start = (F.floor(F.col("at_ns") / F.lit(window_ns)) * F.lit(window_ns)).cast(LongType())
    return (
        points.withColumn("window_start_ns", start)
        .groupBy("replica", "channel", "window_start_ns")
        .agg(*_lag_aggregates())
    )


def lag_summary(points: DataFrame) -> DataFrame:
    """Lag percentiles per replica and channel over the whole trace."""
    return points.groupBy("replica", "channel").agg(
        F.min("at_ns").alias("first_ns"), F.max("at_ns").alias("last_ns"), *_lag_aggregates()
    )


# --- cost of consistency -------------------------------------------------------------------------


def _level() -> Column:
    return F.coalesce(F.col("level"), F.lit(NO_LEVEL)).alias("level")


def cost_by_level(statements: DataFrame) -> DataFrame:
    """Per level, over reads: how many, how many replicas served (``offload_ratio``), how many
    waited and how long (wait percentiles over the reads that waited), timeouts, fallbacks to
    the primary, timeout errors, read latency, and the latency added against ``eventual``
    (null without eventual reads)."""
    reads = statements.where(F.col("statement_kind") == "read").select(
        _level(),
        "route_role",
        "route_reason",
        "wait_count",
        "wait_outcome",
        "wait_duration_ms",
        ((F.col("end_ns") - F.col("start_ns")) / F.lit(_NS_PER_MS)).alias("latency_ms"),
    )
    waited = F.coalesce(F.col("wait_count"), F.lit(0)) > 0
    per_level = reads.groupBy("level").agg(
        F.count(F.lit(1)).cast(LongType()).alias("reads"),
        _count(F.col("route_role") == "replica").alias("replica_reads"),
        _count(waited).alias("waited"),
        _count(F.col("wait_outcome") == "timeout").alias("timeouts"),
        _count(F.col("route_reason").isin(*FALLBACK_REASONS)).alias("fallbacks"),
        _count(F.col("route_reason") == "timeout_error").alias("timeout_errors"),
        *_percentiles(F.when(waited, F.col("wait_duration_ms")), "wait"),
        *_percentiles(F.col("latency_ms"), "read"),
    )
    # Eventual's latency, next to every level's: over the few aggregated rows (one per
    # level), so that the reads are aggregated once.
    every_level = Window.partitionBy(F.lit(0))

    def eventual(column: str) -> Column:
        return F.max(F.when(F.col("level") == "eventual", F.col(column))).over(every_level)

    return per_level.select(
        "*",
        (F.col("replica_reads").cast(DoubleType()) / F.col("reads")).alias("offload_ratio"),
        (F.col("read_p50_ms") - eventual("read_p50_ms")).alias("added_p50_ms"),
        (F.col("read_p95_ms") - eventual("read_p95_ms")).alias("added_p95_ms"),
    )


def _bucket_edge(ms: Column) -> Column:
    """The lower edge of a wait-time bucket in ms: 0, then powers of two."""
    return F.when(ms < 1, F.lit(0.0)).otherwise(F.pow(F.lit(2.0), F.floor(F.log2(ms))))


def wait_histogram(statements: DataFrame) -> DataFrame:
    """Waits per level and power-of-two bucket of their duration (``bucket_ms`` is the lower
    edge: 0 for under 1 ms, else 1, 2, 4…), by how they ended."""
    waits = statements.where(F.coalesce(F.col("wait_count"), F.lit(0)) > 0)
    return waits.groupBy(
        _level(),
        _bucket_edge(F.col("wait_duration_ms")).alias("bucket_ms"),
        F.col("wait_outcome").alias("outcome"),
    ).agg(F.count(F.lit(1)).cast(LongType()).alias("waits"))


# --- pinning ------------------------------------------------------------------------------------


def pinning(statements: DataFrame) -> DataFrame:
    """Why reads ran on the primary: per reason and detail (for ``pinned``: the pin reason),
    how many reads and how many distinct sessions."""
    primary_reads = statements.where(
        (F.col("statement_kind") == "read") & (F.col("route_role") == "primary")
    )
    detail = F.coalesce(F.col("route_pinned_reason"), F.col("route_detail"), F.lit(""))
    return primary_reads.groupBy(F.col("route_reason").alias("reason"), detail.alias("detail")).agg(
        F.count(F.lit(1)).cast(LongType()).alias("reads"),
        F.countDistinct("session_id").cast(LongType()).alias("sessions"),
    )


# --- reads ----------------------------------------------------------------------------------------


def read_summary(read_audit: DataFrame, by: Sequence[str] = ("level",)) -> DataFrame:
    """Audit verdicts and staleness at read time per ``by`` (default: level): replica reads,
    covered / stale / unproven counts, and behind-in-time and in-transactions percentiles
    (over the reads whose staleness is known)."""
    behind = F.percentile_approx(F.col("behind_transactions"), list(PERCENTILES), _ACCURACY)
    return read_audit.groupBy(*by).agg(
        F.count(F.lit(1)).cast(LongType()).alias("replica_reads"),
        _count(F.col("status") == "covered").alias("covered"),
        _count(F.col("status") == "stale").alias("stale"),
        _count(F.col("status") == "unproven").alias("unproven"),
        *_percentiles(F.col("behind_ms"), "behind"),
        behind[1].cast(LongType()).alias("behind_transactions_p95"),
        F.max("behind_transactions").cast(LongType()).alias("behind_transactions_max"),
    )
