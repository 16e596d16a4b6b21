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
from typing import Final

from pyspark.sql import SparkSession

from analytics import storage, transforms
from analytics.jobs.layout import TABLE_SCHEMAS, Layout
from analytics.spark import build_session, tune_for_input
from consistent.errors import InterfaceError

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
    _require_both_kinds(layout, inputs)
    statements = storage.read_parquet(
        spark, layout.table("statements"), TABLE_SCHEMAS["statements"]
    )
    lag = storage.read_parquet(spark, layout.table("lag_samples"), TABLE_SCHEMAS["lag_samples"])
    return IngestResult(len(paths), size, statements.count(), lag.count())


#: What each record table holds, and where it comes from, for the error when one is empty.
_SOURCES: Final = {
    "statements": "statement spans (from the DB-API wrapper, SQLAlchemy or the proxy)",
    "lag_samples": "lag samples (from consistent lag-sample)",
}


def _require_both_kinds(layout: Layout, inputs: Sequence[str]) -> None:
    """Every later job reads both tables: say which kind of record the traces lack (Spark
    writes no partition for a kind it saw no record of) rather than fail on a missing path."""
    for table, what in _SOURCES.items():
        if not Path(layout.table(table)).is_dir():
            shown = ", ".join(inputs[:3]) + (", …" if len(inputs) > 3 else "")
            raise InterfaceError(f"the traces in {shown} hold no {what}")


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
