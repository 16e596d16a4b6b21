"""Ingest: OTLP-JSON trace files → ``tables/statements`` and ``tables/lag_samples`` (Parquet).

The JSON is parsed once; every other job reads the typed Parquet tables, which are a fraction
of the size and columnar.  ``python -m analytics.jobs.ingest TRACES… --out DIR``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from analytics import storage, transforms
from analytics.jobs.layout import TABLE_SCHEMAS, Layout
from analytics.spark import build_session, tune_for_input

__all__ = ["IngestResult", "main", "run"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What was read."""

    files: int
    input_bytes: int
    statements: int
    lag_samples: int


def run(spark: SparkSession, inputs: Sequence[str], layout: Layout) -> IngestResult:
    """Parse every trace file of ``inputs`` and write the two record tables."""
    paths = storage.resolve_inputs(inputs)
    size = storage.input_bytes(paths)
    partitions = tune_for_input(spark, size)
    logger.info("%d trace files, %d bytes, %d shuffle partitions", len(paths), size, partitions)
    # One pass over the JSON: both kinds in one table, partitioned by kind.
    records = transforms.records(storage.read_spans(spark, paths))
    storage.write_parquet(records, layout.records, partition_by=("record",))
    statements = storage.read_parquet(
        spark, layout.table("statements"), TABLE_SCHEMAS["statements"]
    )
    lag = storage.read_parquet(spark, layout.table("lag_samples"), TABLE_SCHEMAS["lag_samples"])
    return IngestResult(len(paths), size, statements.count(), lag.count())


def main(argv: Sequence[str] | None = None) -> int:
    """``ingest TRACES… --out DIR``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    result = run(build_session(), args.traces, Layout(args.out))
    logger.info("%s", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
