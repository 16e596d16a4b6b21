"""Lag: ``tables/lag_windows`` (the time series) and ``tables/lag_summary`` from the samples."""

from __future__ import annotations

from typing import Final

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from analytics import metrics, storage
from analytics.jobs.layout import TABLE_SCHEMAS, JobSettings, Layout

__all__ = ["nice_window_ns", "run"]

_S: Final = 1_000_000_000
#: Window widths the automatic choice picks from.
_STEPS_NS: Final = tuple(
    s * _S for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
)
_WINDOWS: Final = 150


def nice_window_ns(span_ns: int, windows: int = _WINDOWS) -> int:
    """The smallest round width (1 s, 2 s, 5 s … 1 day) giving at most ``windows`` windows
    over ``span_ns``."""
    for step in _STEPS_NS:
        if span_ns <= step * windows:
            return step
    return _STEPS_NS[-1]


def run(spark: SparkSession, layout: Layout, settings: JobSettings) -> int:
    """Write the lag tables; returns the window width used."""
    lag = storage.read_parquet(spark, layout.table("lag_samples"), TABLE_SCHEMAS["lag_samples"])
    points = metrics.lag_points(lag)
    window = settings.window_ns
    if window is None:
        bounds = points.agg(F.min("at_ns").alias("a"), F.max("at_ns").alias("b")).first()
        span = 0 if bounds is None or bounds["a"] is None else int(bounds["b"] - bounds["a"])
        window = nice_window_ns(span)
    storage.write_parquet(metrics.lag_windows(points, window), layout.table("lag_windows"))
    storage.write_parquet(metrics.lag_summary(points), layout.table("lag_summary"))
    return window
