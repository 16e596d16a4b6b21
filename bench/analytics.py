"""Time the whole analytics job (lag, audit and staleness, cost, report) on ``local[2]``.

Two inputs:

* synthetic records (default): ``--records N…`` (default 1M and 10M) records with the shape of
  real traces (:mod:`bench._synthetic`: 2 000 concurrent sessions, one statement per ms,
  a write in five, two chained replicas with lag bursts, 2 % lag samples).  Spark generates
  them straight into the typed record tables (what the ingest step writes), untimed; the
  timed part is every job after ingest, from those tables to the report;
* trace files: ``--traces PATH…`` (files, globs, directories; e.g. the emulator's output):
  the timed part is the full job, OTLP-JSON parsing included.

Prints one line per run (records, seconds, records per second, seconds per step) and, with
``--json PATH``, writes them as one JSON object.  Timings on a shared machine vary with what
else runs; the JSON records the load average at the start and end of each run.

    python bench/analytics.py --records 1000000 10000000 --json out.json
    python bench/analytics.py --traces /tmp/traces/ --json out.json

``--work DIR --reuse`` keeps the generated records in ``DIR`` and times the next run on them
(generation is untimed but takes a while at 10M).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

# Run as a script, this file's directory comes first on sys.path, and this file is called
# analytics: take it out so that the analytics package is found.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pyspark.sql import SparkSession  # noqa: E402

from analytics import storage  # noqa: E402
from analytics.jobs.layout import JobSettings, Layout  # noqa: E402
from analytics.jobs.run import run_all  # noqa: E402
from analytics.spark import SparkSettings, build_session  # noqa: E402

# The generator sits beside this file; ``analytics`` is imported by now, so this file's
# directory can come back on the path without shadowing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _synthetic import generate  # noqa: E402

#: Marks a working directory whose record tables were generated completely.
_GENERATED: Final = "generated"


def _load() -> float:
    return os.getloadavg()[0]


def _synthetic(
    spark: SparkSession, records: int, root: Path, settings: JobSettings, *, reuse: bool
) -> dict[str, Any]:
    layout = Layout(root)
    started = time.perf_counter()
    marker = root / _GENERATED
    if not (reuse and marker.is_file()):
        traces = generate(spark, records)
        storage.write_parquet(traces.statements, layout.table("statements"))
        storage.write_parquet(traces.lag_samples, layout.table("lag_samples"))
        marker.write_text(f"{records}\n", encoding="utf-8")
    generated = time.perf_counter() - started
    load_before = _load()
    started = time.perf_counter()
    result = run_all(spark, [], root, settings, skip_ingest=True)
    seconds = time.perf_counter() - started
    return {
        "input": "synthetic",
        "records": records,
        "generate_seconds": round(generated, 2),
        "seconds": round(seconds, 2),
        "records_per_second": round(records / seconds),
        "steps": {k: round(v, 2) for k, v in result.timings.items()},
        "load_average": [round(load_before, 2), round(_load(), 2)],
        "audited_reads": sum(int(r["replica_reads"]) for r in result.data.reads),
    }


def _traces(
    spark: SparkSession, inputs: Sequence[str], root: Path, settings: JobSettings
) -> dict[str, Any]:
    load_before = _load()
    started = time.perf_counter()
    result = run_all(spark, inputs, root, settings)
    seconds = time.perf_counter() - started
    ingested = result.ingested
    records = (ingested.statements + ingested.lag_samples) if ingested else 0
    return {
        "input": "traces",
        "files": ingested.files if ingested else 0,
        "input_bytes": ingested.input_bytes if ingested else 0,
        "records": records,
        "seconds": round(seconds, 2),
        "records_per_second": round(records / seconds) if seconds else None,
        "steps": {k: round(v, 2) for k, v in result.timings.items()},
        "load_average": [round(load_before, 2), round(_load(), 2)],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--traces", nargs="+", help="time the full job on these trace files")
    parser.add_argument("--json", type=Path, help="write the figures as a JSON object here")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the generated records in --work and reuse them on the next run",
    )
    args = parser.parse_args(argv)
    if args.reuse and args.work is None:
        parser.error("--reuse needs --work")
    settings = JobSettings()
    spark = build_session(
        SparkSettings(
            app_name="consistent-analytics-bench",
            master=args.master,
            driver_memory=args.driver_memory,
        )
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="analytics-bench-"))
    runs: list[dict[str, Any]] = []
    try:
        if args.traces:
            runs.append(_traces(spark, args.traces, work / "traces", settings))
        else:
            for records in args.records:
                root = work / f"n{records}"
                runs.append(_synthetic(spark, records, root, settings, reuse=args.reuse))
                if not args.reuse:
                    shutil.rmtree(root, ignore_errors=True)
                run = runs[-1]
                sys.stdout.write(
                    f"{run['records']:>12,} records  {run['seconds']:8.1f} s  "
                    f"{run['records_per_second']:>10,} records/s  steps {run['steps']}  "
                    f"load {run['load_average']}\n"
                )
        if args.traces:
            run = runs[-1]
            sys.stdout.write(f"{run['records']:,} records in {run['seconds']} s: {run}\n")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    figures = {
        "benchmark": "analytics",
        "master": args.master,
        "cores": os.cpu_count(),
        "runs": runs,
    }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
