"""Every job in order: ingest, lag, reads (audit and staleness), cost, report.

``consistent analyze TRACES… --out DIR`` runs this with a progress display; on a cluster, from
a checkout (the driver runs the project; the executors run Python for one step only, the
audit's look-ups, whose code and data Spark ships pickled by value: their Python, named by
``PYSPARK_PYTHON``, needs numpy and pyarrow and nothing of the project)::

    PYTHONPATH=. PYSPARK_PYTHON=/opt/py311/bin/python PYSPARK_DRIVER_PYTHON=.venv/bin/python \\
    spark-submit --master spark://spark-master:7077 --deploy-mode client \\
        analytics/jobs/run.py 'hdfs:///traces/*.jsonl' --out /mnt/shared/analysis

``--out`` must be a directory every executor and the driver see at the same path (the
executors write the Parquet tables, the driver the report).  README.md, "Running the analytics
on a cluster", says what each side needs.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

from analytics import report
from analytics.jobs import cost, ingest, lag, reads
from analytics.jobs import report as report_job
from analytics.jobs.layout import JobSettings, Layout
from analytics.spark import build_session, tune_for_input

__all__ = ["STEPS", "RunResult", "main", "run_all"]

logger = logging.getLogger(__name__)

#: The steps, in order, as shown by progress displays.
STEPS: Final = ("ingest traces", "replica lag", "audit and staleness", "cost and pinning", "report")
#: Parquet is about an eighth of the OTLP JSON it came from.
_PARQUET_EXPANSION: Final = 8

OnStep = Callable[[int, str], None]


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run produced."""

    layout: Layout
    data: report.ReportData
    ingested: ingest.IngestResult | None
    #: Seconds per step.
    timings: dict[str, float] = field(default_factory=dict)


def _tables_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet")) if path.is_dir() else 0


def run_all(
    spark: SparkSession,
    inputs: Sequence[str],
    out: Path,
    settings: JobSettings | None = None,
    *,
    skip_ingest: bool = False,
    on_step: OnStep | None = None,
) -> RunResult:
    """Run every job; ``skip_ingest`` reuses ``OUT/tables/records`` from an earlier run
    (``inputs`` are then ignored).  ``on_step(index, name)`` is called as each step starts."""
    settings = settings or JobSettings()
    layout = Layout(out)
    timings: dict[str, float] = {}
    notify = on_step or (lambda _i, _n: None)

    def step(index: int) -> float:
        notify(index, STEPS[index])
        return time.perf_counter()

    started = step(0)
    ingested = None
    if skip_ingest:
        tune_for_input(spark, _tables_bytes(Path(layout.records)) * _PARQUET_EXPANSION)
    else:
        ingested = ingest.run(spark, inputs, layout)
    timings[STEPS[0]] = time.perf_counter() - started
    started = step(1)
    window = lag.run(spark, layout, settings)
    timings[STEPS[1]] = time.perf_counter() - started
    started = step(2)
    reads.run(spark, layout, settings)
    timings[STEPS[2]] = time.perf_counter() - started
    started = step(3)
    cost.run(spark, layout, settings)
    timings[STEPS[3]] = time.perf_counter() - started
    started = step(4)
    data = report_job.run(spark, layout, settings, window)
    timings[STEPS[4]] = time.perf_counter() - started
    return RunResult(layout, data, ingested, timings)


def main(argv: Sequence[str] | None = None) -> int:
    """``run.py TRACES… --out DIR`` (the spark-submit entry point)."""
    parser = argparse.ArgumentParser(description="consistent trace analytics (all jobs)")
    parser.add_argument("traces", nargs="*", help="trace files, globs, directories or URIs")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--skip-ingest", action="store_true")
    args = parser.parse_args(argv)
    if not args.traces and not args.skip_ingest:
        parser.error("give trace files, or --skip-ingest")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    result = run_all(
        build_session(),
        args.traces,
        args.out,
        JobSettings(),
        skip_ingest=args.skip_ingest,
        on_step=lambda i, name: logger.info("step %d/%d: %s", i + 1, len(STEPS), name),
    )
    numbers = report.headline(result.data)
    logger.info("report: %s", result.layout.report)
    logger.info("headline: %s", numbers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
