"""The audit and staleness at read time: ``tables/read_audit`` (one row per replica read),
``tables/violations`` (the reads not shown covered) and ``tables/read_summary`` (per level).

The sources (a handful) and the step functions the audit looks up are collected first, in
one pass over the statements when the lag samples name every source
(:func:`analytics.audit.sources_and_lookups`); the audit itself is one pass written once, and
the two smaller tables are read back from it.

The audit's pass is planned without :data:`~analytics.spark.COLLAPSE_PROJECT`: merged into the
look-up UDF's arguments, the projection that reads the GTID texts into numbers would run
outside whole-stage code generation, without common subexpressions shared, and the texts
would be carried beside every read while the UDF runs (about a fifth of the pass).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from analytics import audit, metrics, storage
from analytics.jobs.layout import TABLE_SCHEMAS, JobSettings, Layout
from analytics.spark import COLLAPSE_PROJECT, without_optimizer_rules

__all__ = ["run"]


def run(spark: SparkSession, layout: Layout, settings: JobSettings) -> None:
    """Write the audit tables."""
    del settings

    def read(name: str) -> DataFrame:
        return storage.read_parquet(spark, layout.table(name), TABLE_SCHEMAS[name])

    statements = read("statements")
    lag = read("lag_samples")
    sources, collected = audit.sources_and_lookups(statements, lag)
    found = audit.analyze_reads(statements, lag, sources, collected)
    with without_optimizer_rules(spark, COLLAPSE_PROJECT):
        storage.write_parquet(
            found.reads, layout.table("read_audit"), without_dictionary=("span_id", "session_id")
        )
    checked = read("read_audit")
    storage.write_parquet(audit.violation_rows(checked), layout.table("violations"))
    storage.write_parquet(metrics.read_summary(checked), layout.table("read_summary"))
