"""Cost of consistency and pinning: ``tables/cost_by_level``, ``wait_histogram``, ``pinning``
and ``sessions``."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analytics import metrics, storage, transforms
from analytics.jobs.layout import TABLE_SCHEMAS, JobSettings, Layout

__all__ = ["run"]


def run(spark: SparkSession, layout: Layout, settings: JobSettings) -> None:
    """Write the cost and pinning tables."""
    del settings
    statements = storage.read_parquet(
        spark, layout.table("statements"), TABLE_SCHEMAS["statements"]
    )
    storage.write_parquet(metrics.cost_by_level(statements), layout.table("cost_by_level"))
    storage.write_parquet(metrics.wait_histogram(statements), layout.table("wait_histogram"))
    storage.write_parquet(metrics.pinning(statements), layout.table("pinning"))
    storage.write_parquet(transforms.sessionize(statements), layout.table("sessions"))
