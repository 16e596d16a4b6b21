"""The aggregations, each on a few hand-built rows whose expected values were worked out by
hand (percentiles are nearest-rank: the smallest value with at least p of the values at or
below it)."""

from __future__ import annotations

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from analytics import metrics, schema

from .conftest import frame

MS = 1_000_000


def _read(span: str, level: str, role: str, reason: str, latency_ms: int, **more: object) -> dict[str, object]:  # fmt: skip  # noqa: E501
    return {"span_id": span, "session_id": span, "level": level, "statement_kind": "read",
            "route_role": role, "route_reason": reason, "start_ns": 0,
            "end_ns": latency_ms * MS, "wait_count": 0, "wait_outcome": "none",
            "wait_duration_ms": 0.0, **more}  # fmt: skip


STATEMENTS = [
    _read("e1", "eventual", "replica", "eventual", 1),
    _read("e2", "eventual", "replica", "eventual", 3),
    _read("o1", "read_own_writes", "replica", "known_covered", 2),
    _read("o2", "read_own_writes", "replica", "waited", 6, wait_count=1,
          wait_outcome="satisfied", wait_duration_ms=4.0),
    _read("o3", "read_own_writes", "primary", "timeout_fallback", 12, wait_count=1,
          wait_outcome="timeout", wait_duration_ms=10.0),
    _read("o4", "read_own_writes", "primary", "pinned", 1, route_pinned_reason="temporary_table"),
    _read("w1", "read_own_writes", "primary", "write", 1, statement_kind="write"),
]  # fmt: skip


def test_cost_by_level(spark: SparkSession) -> None:
    cost = metrics.cost_by_level(frame(spark, schema.STATEMENT, STATEMENTS)).select(
        "level", "reads", "replica_reads", "waited", "timeouts", "fallbacks", "wait_p50_ms",
        "wait_p99_ms", "read_p50_ms", "offload_ratio", "added_p50_ms",
    )  # fmt: skip
    expected = [
        # eventual: 2 reads on replicas, no waits; read latencies 1, 3 ms: p50 1.
        Row(level="eventual", reads=2, replica_reads=2, waited=0, timeouts=0, fallbacks=0,
            wait_p50_ms=None, wait_p99_ms=None, read_p50_ms=1.0, offload_ratio=1.0,
            added_p50_ms=0.0),
        # read_own_writes: 4 reads (the write is not one), 2 on replicas; waits 4 and 10 ms;
        # latencies 1, 2, 6, 12: p50 2, one more than eventual's.
        Row(level="read_own_writes", reads=4, replica_reads=2, waited=2, timeouts=1,
            fallbacks=1, wait_p50_ms=4.0, wait_p99_ms=10.0, read_p50_ms=2.0, offload_ratio=0.5,
            added_p50_ms=1.0),
    ]  # fmt: skip
    assertDataFrameEqual(cost, expected)


def test_wait_histogram_and_pinning(spark: SparkSession) -> None:
    statements = frame(spark, schema.STATEMENT, STATEMENTS)
    # 4 ms falls in [4, 8), 10 ms in [8, 16).
    assertDataFrameEqual(
        metrics.wait_histogram(statements),
        [
            Row(level="read_own_writes", bucket_ms=4.0, outcome="satisfied", waits=1),
            Row(level="read_own_writes", bucket_ms=8.0, outcome="timeout", waits=1),
        ],
    )
    assertDataFrameEqual(
        metrics.pinning(statements),
        [
            Row(reason="timeout_fallback", detail="", reads=1, sessions=1),
            Row(reason="pinned", detail="temporary_table", reads=1, sessions=1),
        ],
    )


def test_lag_points_windows_and_summary(spark: SparkSession) -> None:
    r1, r2 = "10.0.0.1:3306", "10.0.0.2:3306"
    lag = frame(
        spark,
        schema.LAG_SAMPLE,
        [
            {
                "span_id": "a",
                "lag_replica": r1,
                "end_ns": 1_000 * MS,
                "lag_reachable": True,
                "lag_apply_lag_us": 1_500,
                "lag_hop_apply_lag_us": 500,
            },
            {
                "span_id": "b",
                "lag_replica": r1,
                "end_ns": 1_400 * MS,
                "lag_reachable": True,
                "lag_apply_lag_us": 3_000,
                "lag_hop_apply_lag_us": 1_000,
            },
            {
                "span_id": "c",
                "lag_replica": r1,
                "end_ns": 2_100 * MS,
                "lag_reachable": True,
                "lag_apply_lag_us": 500,
                "lag_hop_apply_lag_us": 250,
            },
            # Unreachable: no point.
            {"span_id": "d", "lag_replica": r1, "end_ns": 2_200 * MS, "lag_reachable": False},
            # MariaDB: Seconds_Behind_Master only.
            {
                "span_id": "e",
                "lag_replica": r2,
                "end_ns": 1_000 * MS,
                "lag_reachable": True,
                "lag_seconds_behind_master": 2,
            },
        ],
    )
    points = metrics.lag_points(lag)
    assertDataFrameEqual(
        points.select("replica", "at_ns", "lag_ms", "hop_lag_ms"),
        [
            Row(replica=r1, at_ns=1_000 * MS, lag_ms=1.5, hop_lag_ms=0.5),
            Row(replica=r1, at_ns=1_400 * MS, lag_ms=3.0, hop_lag_ms=1.0),
            Row(replica=r1, at_ns=2_100 * MS, lag_ms=0.5, hop_lag_ms=0.25),
            Row(replica=r2, at_ns=1_000 * MS, lag_ms=2000.0, hop_lag_ms=None),
        ],
    )
    # One-second windows: r1 has [1 s, 2 s) with 1.5 and 3.0 ms, [2 s, 3 s) with 0.5 ms.
    windows = metrics.lag_windows(points, 1_000 * MS).select(
        "replica", "window_start_ns", "samples", "lag_p50_ms", "lag_max_ms", "hop_lag_p99_ms"
    )
    assertDataFrameEqual(
        windows,
        [
            Row(replica=r1, window_start_ns=1_000 * MS, samples=2, lag_p50_ms=1.5,
                lag_max_ms=3.0, hop_lag_p99_ms=1.0),
            Row(replica=r1, window_start_ns=2_000 * MS, samples=1, lag_p50_ms=0.5,
                lag_max_ms=0.5, hop_lag_p99_ms=0.25),
            Row(replica=r2, window_start_ns=1_000 * MS, samples=1, lag_p50_ms=2000.0,
                lag_max_ms=2000.0, hop_lag_p99_ms=None),
        ],
    )  # fmt: skip
    summary = metrics.lag_summary(points).select("replica", "samples", "lag_p50_ms", "lag_p99_ms")
    assertDataFrameEqual(
        summary,
        [
            Row(replica=r1, samples=3, lag_p50_ms=1.5, lag_p99_ms=3.0),
            Row(replica=r2, samples=1, lag_p50_ms=2000.0, lag_p99_ms=2000.0),
        ],
    )
