"""``consistent analyze TRACES… --out DIR``: every analytics job, with progress while Spark
works, then the headline numbers.

:func:`add_analyze_command` registers the subcommand on the ``consistent`` parser (its handler
is ``args.handler``); :func:`configure_parser` and :func:`run_analyze` are the same two halves
for a command table; the help is :data:`DESCRIPTION`.  Before Spark starts, the handler checks
what the run needs (the ``spark`` extra, Java, trace files that are traces): each missing piece
is one line and status 2, at once.  Spark is imported only when the command runs, so
``consistent --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from analytics.startup import run_interruptibly, spark_problem, start_spark
from consistent.command import EXIT_FAILURE, CommandError, check_interrupted
from consistent.errors import Error

if TYPE_CHECKING:
    from pyspark import SparkContext

    from analytics.jobs.run import RunResult

__all__ = ["DESCRIPTION", "add_analyze_command", "configure_parser", "run_analyze"]

DESCRIPTION: Final = """\
Analyse consistent's traces on Spark and write a report.

  consistent analyze traces/ --out analysis/
  consistent analyze 'traces/*.jsonl' lag.jsonl --out analysis/ --master spark://host:7077

The traces are OTLP-JSON lines, as the DB-API wrapper, the SQLAlchemy engine, the proxy and
consistent lag-sample write them (CONSISTENT_TRACE_FILE, CONSISTENT_TRACE_DIR).  The jobs
measure replica lag per replica and per hop, how stale each replica read could have been, what
each consistency level cost (waits, timeouts, fallbacks to the primary, reads served by
replicas), and audit the read-your-writes guarantee from the traces alone.  The command prints
the headline per level and writes OUT/report.html, OUT/summary.json and Parquet tables in
OUT/tables/.  It needs the spark extra (pip install 'consistent[spark]') and Java 17 or later.
"""

logger = logging.getLogger(__name__)

_POLL_SECONDS: Final = 0.25
#: Exit status when ``--fail-on-violation`` is given and the guarantee was violated.
EXIT_VIOLATIONS: Final = 3


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The ``analyze`` arguments."""
    parser.add_argument(
        "traces", nargs="*", help="OTLP-JSON trace files, globs, directories or URIs"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--master", help="Spark master (default: spark-submit's, $SPARK_MASTER, local[N])"
    )
    parser.add_argument("--driver-memory", help="local driver memory (default 4g)")
    parser.add_argument(
        "--window", type=float, help="lag time-series window in seconds (default: automatic)"
    )
    parser.add_argument(
        "--skip-ingest",
        action="store_true",
        help="reuse OUT/tables/records from an earlier run instead of reading traces",
    )
    parser.add_argument("--title", help="report title")
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument(
        "--fail-on-violation",
        action="store_true",
        help=f"exit with status {EXIT_VIOLATIONS} when a guaranteed read was stale",
    )


def add_analyze_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``analyze`` to ``subparsers`` (what ``ArgumentParser.add_subparsers`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "analyze",
        help="analyse traces on Spark: lag, staleness, cost, audit; writes an HTML report",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_parser(parser)
    parser.set_defaults(handler=run_analyze)
    return parser


class _SparkProgress:
    """A ``rich`` display of the current step and of Spark's running stages, polled from the
    status tracker on a background thread."""

    def __init__(self, console: Console, context: SparkContext, steps: Sequence[str]) -> None:
        self._context = context
        self._steps = steps
        self._stop = threading.Event()
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._step_task: TaskID = self._progress.add_task("starting", total=len(steps))
        self._spark_task: TaskID = self._progress.add_task("spark: idle", total=1)
        self._thread = threading.Thread(target=self._poll, name="spark-progress", daemon=True)

    def __enter__(self) -> _SparkProgress:
        self._progress.start()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._progress.stop()

    def step(self, index: int, name: str) -> None:
        self._progress.update(
            self._step_task,
            completed=index,
            description=f"step {index + 1}/{len(self._steps)}: {name}",
        )

    def _poll(self) -> None:
        tracker = self._context.statusTracker()
        while not self._stop.wait(_POLL_SECONDS):
            try:
                found = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:  # the context is stopping: nothing more to show
                logger.debug("status tracker unavailable", exc_info=True)
                return
            stages = [s for s in found if s is not None]
            total = sum(int(s.numTasks) for s in stages)
            done = sum(int(s.numCompletedTasks) for s in stages)
            description = (
                "spark: " + ", ".join(f"stage {s.stageId}" for s in stages[:3])
                if stages
                else "spark: idle"
            )
            self._progress.update(
                self._spark_task, total=max(total, 1), completed=done, description=description
            )


@contextmanager
def _quiet_progress() -> Iterator[None]:
    yield


def _inputs(args: argparse.Namespace) -> None:
    """Refuse inputs that cannot be analysed, before Spark starts."""
    from analytics import storage  # noqa: PLC0415 (imports PySpark)
    from analytics.jobs.layout import Layout  # noqa: PLC0415

    if args.skip_ingest:
        records = Path(Layout(args.out).records)
        if not records.is_dir():
            raise CommandError(f"--skip-ingest: no tables of an earlier run in {records}")
        return
    try:
        storage.check_traces(storage.resolve_inputs(args.traces))
    except Error as exc:
        raise CommandError(exc.msg) from exc


def _run(args: argparse.Namespace, console: Console) -> RunResult:
    from analytics.jobs.layout import JobSettings  # noqa: PLC0415 (imports PySpark)
    from analytics.jobs.run import STEPS, run_all  # noqa: PLC0415
    from analytics.spark import SparkSettings  # noqa: PLC0415

    settings = JobSettings(
        window_ns=None if args.window is None else int(args.window * 1e9),
        **({"title": args.title} if args.title else {}),
    )
    if not console.is_terminal:  # a log: say what the next seconds are spent on
        console.print("starting Spark…")
    with console.status("starting Spark…"):
        try:
            spark = start_spark(SparkSettings(master=args.master, driver_memory=args.driver_memory))
        except Error as exc:
            raise CommandError(exc.msg, EXIT_FAILURE) from exc
    check_interrupted()
    show = not args.no_progress and console.is_terminal
    display = _SparkProgress(console, spark.sparkContext, STEPS) if show else None

    def step_line(index: int, name: str) -> None:
        console.print(f"step {index + 1}/{len(STEPS)}: {name}…")

    show_step = display.step if display else step_line

    def on_step(index: int, name: str) -> None:
        check_interrupted()
        show_step(index, name)

    def work() -> RunResult:
        return run_all(
            spark, args.traces, args.out, settings, skip_ingest=args.skip_ingest, on_step=on_step
        )

    try:
        with display or _quiet_progress():
            return run_interruptibly(spark, work)
    except Error as exc:
        raise CommandError(exc.msg) from exc
    except Exception as exc:  # Py4J and PySpark errors share no base class with ours
        logger.debug("the analysis failed", exc_info=True)
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise CommandError(
            f"the Spark analysis failed ({type(exc).__name__}: {detail})", EXIT_FAILURE
        ) from exc


def run_analyze(args: argparse.Namespace) -> int:
    """Run every job for ``args`` (from :func:`configure_parser`); returns the exit status
    (raises :class:`~consistent.command.CommandError` when the analysis cannot run)."""
    if not args.traces and not args.skip_ingest:
        raise CommandError("give trace files, or --skip-ingest")
    problem = spark_problem()
    if problem is not None:
        raise CommandError(problem)
    _inputs(args)
    # Spark and the jobs load only now: they take seconds to import and start.
    from analytics.report import headline, terminal_summary  # noqa: PLC0415

    result = _run(args, Console(stderr=True))
    Console().print(terminal_summary(result.data))
    sys.stdout.write(f"report: {result.layout.report}\n")
    numbers = headline(result.data)
    if args.fail_on_violation and numbers["guarantee_violations"]:
        return EXIT_VIOLATIONS
    return 0
