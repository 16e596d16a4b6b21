"""``consistent demo``: the whole product on one machine, from workload to staleness report.

:data:`DESCRIPTION` says what it runs (it is the command's help); :func:`execute` runs it and
:func:`run_demo` is the command's handler.  Exit status: 0 when every guaranteed level kept its
promise, 3 when one did not (by the audit or by the clients), 2 when the demo could not run (no
Java, no ``spark`` extra, no MariaDB, …; checked before anything starts where it can be), 130
after Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.live import Live
from rich.panel import Panel

from analytics.startup import run_interruptibly, spark_problem, start_spark
from consistent.command import CommandError
from consistent.demo.headline import (
    HeadlineRow,
    build_headline,
    failures,
    ground_truth_table,
    headline_table,
)
from consistent.demo.lagcheck import TOLERANCE, compare, overloaded
from consistent.demo.processes import Children
from consistent.demo.progress import live_view
from consistent.demo.session import DemoSettings, WorkloadResult, run_workload
from consistent.demo.topology import Backends, emulated, mariadb
from consistent.demo.workload import LEVELS, SessionTally, Totals, WorkloadSettings, totals_by
from consistent.errors import Error, OperationalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from analytics.jobs.run import RunResult

__all__ = [
    "DESCRIPTION",
    "EXIT_UNAVAILABLE",
    "EXIT_VIOLATIONS",
    "DemoError",
    "DemoOutcome",
    "add_demo_command",
    "analyse",
    "configure_parser",
    "execute",
    "ground_truth",
    "lag_report",
    "run_demo",
]

logger = logging.getLogger(__name__)

#: A guaranteed level showed a violation.
EXIT_VIOLATIONS: Final = 3
#: Something the demo needs is missing (Java, MariaDB) or failed to start.
EXIT_UNAVAILABLE: Final = 2
_DEFAULT_OUT: Final = Path("out/demo")
_DEFAULTS: Final = DemoSettings()

DESCRIPTION: Final = f"""\
Run the whole product on this machine, from workload to staleness report.

  consistent demo                             # {_DEFAULTS.seconds:g} s of workload, then Spark
  consistent demo --seconds 20                # shorter
  consistent demo --skip-analysis             # the workload only: no Spark, no Java
  consistent demo --mariadb                   # on real MariaDB servers (mariadbd)

It starts a replication topology (emulated MySQL by default, real MariaDB with --mariadb): a
primary, two replicas with realistic and bursty lag, and a delayed replica in a chain.  Then
the proxy in front of it, a lag sampler, and sessions that write then read back, through the
DB-API wrapper and through the proxy, at every consistency level, all traced to OUT/traces/.
The topology, the proxy and the clients (one process per path) run in processes of
their own.  The clients check each read on the data (did it see the session's own write?);
each replica's measured median lag is shown beside its model's, with a warning when the
machine is too loaded to keep to the model.  Spark then
analyses the traces (OUT/analysis/report.html) and the headline table sets the audit's
findings beside what the clients saw.

Exit status: 0 when every guaranteed level kept its promise, 3 when one did not, 2 when the
demo cannot run (it says why: no Java, no spark extra, …), 130 after Ctrl-C.
"""
#: Columns when the output is not a terminal (a log, a pipe): the tables stay unwrapped.
_PLAIN_WIDTH: Final = 150


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` arguments."""
    parser.add_argument(
        "--seconds",
        type=float,
        default=_DEFAULTS.seconds,
        help=f"how long the workload runs (default {_DEFAULTS.seconds:g})",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=_DEFAULTS.sessions,
        help=f"concurrent sessions, spread over levels and paths (default {_DEFAULTS.sessions})",
    )
    parser.add_argument(
        "--out", type=Path, default=_DEFAULT_OUT, help=f"output directory (default {_DEFAULT_OUT})"
    )
    parser.add_argument(
        "--mariadb",
        action="store_true",
        help="run against real MariaDB servers (mariadbd) instead of the emulator",
    )
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=_DEFAULTS.wait_timeout,
        help="seconds a read may wait for a replica before it runs on the primary",
    )
    parser.add_argument(
        "--skip-analysis", action="store_true", help="run the workload only (no Spark)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no live display")


def add_demo_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``demo`` to ``subparsers`` (what ``ArgumentParser.add_subparsers`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the demonstration: topology, proxy, workload, staleness report",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_parser(parser)
    parser.set_defaults(handler=run_demo)
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    return DemoSettings(
        seconds=args.seconds,
        sessions=args.sessions,
        wait_timeout=args.wait_timeout,
        workload=WorkloadSettings(),
    )


def _check(args: argparse.Namespace) -> str | None:
    """Why the demo cannot run as asked, or None."""
    if args.seconds <= 0:
        return "--seconds must be positive"
    if args.sessions < 1:
        return "--sessions must be at least 1"
    if args.wait_timeout <= 0:
        return "--wait-timeout must be positive"
    if not args.skip_analysis:
        problem = spark_problem()
        if problem is not None:
            return f"{problem}; or run with --skip-analysis"
    return None


def _workload(  # noqa: PLR0917 (the parts of one run)
    console: Console,
    backends: Backends,
    settings: DemoSettings,
    out: Path,
    live: bool,
    children: Children,
) -> WorkloadResult:
    if not live:
        console.print(f"running the workload for {settings.seconds:g} s…")
        return run_workload(backends, settings, out, children=children)
    with Live(console=console, refresh_per_second=settings.refresh, transient=False) as view:

        def tick(tallies: Sequence[SessionTally], started: float) -> None:
            view.update(live_view(tallies, started, settings.seconds))

        return run_workload(backends, settings, out, on_tick=tick, children=children)


def lag_report(models: Mapping[str, float], measured: Mapping[str, float]) -> list[str]:
    """The lines that set each replica's measured median lag beside its model's, and a
    warning when one differs by more than 50% (nothing when the lag is not modelled)."""
    checks = compare(models, measured)
    lines = [check.line() for check in checks]
    off = overloaded(checks)
    if off:
        names = ", ".join(check.replica for check in off)
        lines.append(
            f"[bold yellow]warning:[/] the measured lag of {names} differs from the "
            f"configured model by more than {TOLERANCE:.0%}: the machine is overloaded "
            "(the emulated lag is CPU starvation, not the model); fewer --sessions, or an "
            "idle machine, show the model"
        )
    return lines


class DemoError(OperationalError):
    """A part of the demo could not run (Spark did not start, …)."""


def analyse(console: Console, traces: Path, out: Path, spark: SparkSession | None) -> RunResult:
    """Every analytics job over ``traces``, written to ``out`` (``spark``: the session to use,
    or None to start one)."""
    # Spark and the jobs load only now, the jobs once a session runs: they take seconds to
    # import and start, and some build Spark columns when imported.
    with console.status("starting Spark…") as status:
        session = spark if spark is not None else start_spark()
        from analytics.jobs.layout import JobSettings  # noqa: PLC0415 (see the comment above)
        from analytics.jobs.run import STEPS, run_all  # noqa: PLC0415

        started = time.monotonic()

        def on_step(index: int, name: str) -> None:
            status.update(f"analysing the traces: step {index + 1}/{len(STEPS)}, {name}…")

        result = run_interruptibly(
            session,
            lambda: run_all(
                session,
                [str(traces)],
                out,
                JobSettings(title="consistent demo — staleness report"),
                on_step=on_step,
            ),
        )
    console.print(f"analysis: {time.monotonic() - started:.0f} s on Spark {session.version}")
    return result


def _analysis(console: Console, traces: Path, out: Path, spark: SparkSession | None) -> RunResult:
    """:func:`analyse`, with whatever goes wrong in Spark turned into a :class:`DemoError`
    that says how to run the analysis again on the traces kept."""
    try:
        return analyse(console, traces, out, spark)
    except Error:
        raise
    except Exception as exc:  # Py4J, PySpark and import errors share no base class
        logger.debug("the analysis failed", exc_info=True)
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise DemoError(
            f"the Spark analysis failed ({type(exc).__name__}: {detail}); the traces are "
            f"kept in {traces}: `consistent analyze {traces} --out {out}` runs it again"
        ) from exc


def ground_truth(tallies: Sequence[SessionTally]) -> dict[str, Totals]:
    """The clients' counts per level, weakest level first."""
    by_level = totals_by(tallies, lambda plan: plan.level)
    return {level: by_level[level] for level in LEVELS if level in by_level}


def _header(console: Console, backends: Backends, settings: DemoSettings, out: Path) -> None:
    kind = "real MariaDB" if backends.flavor == "mariadb" else "emulated MySQL"
    lines = [
        f"[bold]consistent demo[/] on {kind}: {settings.sessions} sessions for "
        f"{settings.seconds:g} s, through the DB-API wrapper and the proxy, at "
        f"{', '.join(LEVELS)}",
        *backends.description,
        *(f"[yellow]note:[/] {note}" for note in backends.notes),
        f"traces: {out / 'traces'}",
    ]
    console.print(Panel("\n".join(lines), expand=False))


def _finish(console: Console, rows: Sequence[HeadlineRow], result: RunResult | None) -> int:
    if result is not None:
        console.print(headline_table(rows, "headline: the audit of the traces, per level"))
        console.print(
            "RYW violations: replica reads the audit proved stale (it saw, after the read, "
            "that the replica still lacked one of the session's writes); unproven: no lag "
            "sample, wait or replica state learnt before the read close enough to decide.  "
            "Stale reads seen by clients: reads that returned "
            "an older value than the session had just written / all reads."
        )
        for note in result.data.notes:
            console.print(f"[yellow]note:[/] {note}")
        console.print(f"report: [bold]{result.layout.report}[/]")
    broken = failures(rows)
    for line in broken:
        console.print(f"[bold red]violation[/] {line}")
    if broken:
        return EXIT_VIOLATIONS
    eventual = next((r for r in rows if r.level == "eventual"), None)
    if eventual is not None:
        console.print(
            f"eventual: {eventual.client_stale:,} stale reads seen by clients"
            + ("" if result is None else f", {eventual.audit_stale:,} found by the audit")
            + "; every guaranteed level: 0."
        )
    return 0


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """What a demo run found."""

    #: The headline, one row per level (audit columns zero without the analysis).
    rows: tuple[HeadlineRow, ...]
    workload: WorkloadResult
    #: The analysis (None when skipped).
    analysis: RunResult | None
    #: The exit status: 0, or :data:`EXIT_VIOLATIONS`.
    status: int


def execute(
    settings: DemoSettings,
    out: Path,
    *,
    console: Console,
    use_mariadb: bool = False,
    with_analysis: bool = True,
    live: bool = False,
    spark: SparkSession | None = None,
) -> DemoOutcome:
    """Run the demo: topology, workload, analysis (unless ``with_analysis`` is false; ``spark``
    replaces the session it would build), headline.  Raises :class:`consistent.errors.Error`
    when a part cannot start."""
    with (
        Children() as children,
        mariadb() if use_mariadb else emulated(children=children) as backends,
    ):
        _header(console, backends, settings, out)
        workload = _workload(console, backends, settings, out, live, children)
    truth = ground_truth(workload.tallies)
    console.print(ground_truth_table(truth, "what the clients saw, per level"))
    for line in lag_report(backends.lag_models, workload.measured_lag):
        console.print(line)
    if workload.dropped_spans:
        console.print(f"[yellow]note:[/] {workload.dropped_spans} spans were dropped")
    result = _analysis(console, workload.traces, out / "analysis", spark) if with_analysis else None
    cost = result.data.cost if result is not None else ()
    reads = result.data.reads if result is not None else ()
    rows = tuple(build_headline(cost, reads, truth))
    status = _finish(console, rows, result)
    return DemoOutcome(rows, workload, result, status)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo as ``args`` says; returns the exit status (raises
    :class:`~consistent.command.CommandError` when the demo cannot run)."""
    problem = _check(args)
    if problem is not None:
        raise CommandError(problem, EXIT_UNAVAILABLE)
    console = Console()
    if not console.is_terminal:
        console = Console(width=_PLAIN_WIDTH)
    try:
        outcome = execute(
            _settings(args),
            args.out,
            console=console,
            use_mariadb=args.mariadb,
            with_analysis=not args.skip_analysis,
            live=not args.no_progress and console.is_terminal,
        )
    except Error as exc:
        raise CommandError(exc.msg, EXIT_UNAVAILABLE) from exc
    return outcome.status
