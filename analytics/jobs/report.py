"""The report: collects the small result tables, renders ``report.html`` (and ``img/*.png``) and
writes the headline numbers to ``summary.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from analytics import audit, report, storage
from analytics.jobs.layout import TABLE_SCHEMAS, JobSettings, Layout

__all__ = ["collect", "replica_names", "role_changes", "run", "write"]

#: Records of one change of primary from several processes fall in one such bucket.
_SAME_CHANGE_NS = 5_000_000_000


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def _table(spark: SparkSession, layout: Layout, name: str) -> DataFrame:
    """A small result table (written by this run, so its schema is the one written)."""
    schema = TABLE_SCHEMAS.get(name)
    path = layout.table(name)
    return storage.read_parquet(spark, path, schema) if schema else spark.read.parquet(path)


def replica_names(lag_samples: DataFrame) -> dict[str, str]:
    """``host:port`` → the name the lag sampler was given for it (the latest one, should it
    have changed); replicas without a name are left out."""
    named = lag_samples.where(
        F.col("lag_replica_name").isNotNull() & (F.col("lag_replica_name") != "")
    )
    latest = named.groupBy("lag_replica").agg(
        F.max_by("lag_replica_name", "start_ns").alias("name")
    )
    return {str(row["lag_replica"]): str(row["name"]) for row in latest.collect()}


def role_changes(spark: SparkSession, layout: Layout) -> list[dict[str, Any]]:
    """Every change of primary the traces recorded, in time order (none when the traces hold
    no role change: Spark writes no partition for a kind it saw no record of)."""
    if not Path(layout.table("role_changes")).is_dir():
        return []
    frame = _table(spark, layout, "role_changes").select(
        "start_ns", "role_previous", "role_primary"
    )
    # Every process that followed the change recorded it, within a few monitor intervals:
    # one row per change.
    bucket = F.floor(F.col("start_ns") / _SAME_CHANGE_NS).alias("bucket")
    first = frame.groupBy("role_previous", "role_primary", bucket).agg(
        F.min("start_ns").alias("start_ns")
    )
    return _rows(first.select("start_ns", "role_previous", "role_primary").orderBy("start_ns"))


def collect(
    spark: SparkSession, layout: Layout, settings: JobSettings, window_ns: int
) -> report.ReportData:
    """Everything the report shows, as plain Python values."""
    # The sessions table holds every statement once (a null session is a group too): the
    # totals come from it, not from another pass over the statements.
    totals = (
        _table(spark, layout, "sessions")
        .agg(
            F.coalesce(F.sum("statements"), F.lit(0)).alias("statements"),
            F.min("first_ns").alias("first_ns"),
            F.max("last_ns").alias("last_ns"),
            F.count(F.lit(1)).alias("sessions"),
        )
        .first()
    )
    lag_samples = _table(spark, layout, "lag_samples").count()
    violations = _table(spark, layout, "violations")
    guaranteed = violations.where(F.col("guaranteed"))
    # Only a read the audit proved stale broke the guarantee; the undecided ones apart.
    proven = guaranteed.where(F.col("status") == audit.STALE)
    unproven = guaranteed.where(F.col("status") == audit.UNPROVEN).withColumn(
        "why", audit.unproven_reason()
    )
    eventual = violations.where(~F.col("guaranteed") & (F.col("status") == audit.STALE))
    limit = settings.shown_violations
    reasons = unproven.groupBy("level", "why").agg(F.count(F.lit(1)).alias("reads"))
    return report.ReportData(
        totals={
            "statements": totals["statements"] if totals else 0,
            "first_ns": totals["first_ns"] if totals else None,
            "last_ns": totals["last_ns"] if totals else None,
            "lag_samples": lag_samples,
            "sessions": totals["sessions"] if totals else 0,
        },
        lag_summary=_rows(_table(spark, layout, "lag_summary")),
        lag_windows=_rows(_table(spark, layout, "lag_windows")),
        window_ns=window_ns,
        cost=_rows(_table(spark, layout, "cost_by_level")),
        wait_histogram=_rows(_table(spark, layout, "wait_histogram")),
        reads=_rows(_table(spark, layout, "read_summary")),
        pinning=_rows(_table(spark, layout, "pinning")),
        violations=_rows(proven.orderBy("start_ns", "span_id").limit(limit)),
        violation_count=proven.count(),
        unproven=_rows(unproven.orderBy("start_ns", "span_id").limit(limit // 4)),
        unproven_reasons=_rows(reasons),
        replica_names=replica_names(_table(spark, layout, "lag_samples")),
        role_changes=role_changes(spark, layout),
        eventual_stale=_rows(eventual.orderBy("start_ns", "span_id").limit(limit // 4)),
        eventual_stale_count=eventual.count(),
    )


def write(data: report.ReportData, layout: Layout, title: str) -> dict[str, Any]:
    """Write the page, its images and ``summary.json``; returns the headline numbers."""
    rendered = report.render_html(data, title)
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.report.write_text(rendered.html, encoding="utf-8")
    layout.images.mkdir(exist_ok=True)
    for name, png in rendered.images.items():
        (layout.images / name).write_bytes(png)
    numbers = report.headline(data)
    summary = {
        "headline": numbers,
        "lag": data.lag_summary,
        "levels": data.cost,
        "reads": data.reads,
        "pinning": data.pinning,
        "window_ns": data.window_ns,
        "first_ns": data.totals.get("first_ns"),
        "last_ns": data.totals.get("last_ns"),
    }
    layout.summary.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return numbers


def run(
    spark: SparkSession, layout: Layout, settings: JobSettings, window_ns: int
) -> report.ReportData:
    """Collect and write the report; returns what it shows."""
    data = collect(spark, layout, settings, window_ns)
    write(data, layout, settings.title)
    return data
