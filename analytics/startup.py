"""Starting the analysis: what it needs, checked before any work, and Spark started and run
so that Ctrl-C stops it cleanly.

``consistent analyze`` and ``consistent demo`` call :func:`spark_problem` first: without the
``spark`` extra (PySpark and the libraries the jobs use) or without a Java runtime for
Spark's driver, they say so in one line at once, rather than after minutes of work.  This
module imports no PySpark, so that the check itself works where PySpark is missing.

Ctrl-C and Spark need care, for PySpark's own handling of it leaves debris:

- an interrupt while the JVM starts makes PySpark delete the directory where the JVM is about
  to write its address, and the half-started JVM then never exits;
- an interrupt that lands in a Py4J call makes Py4J log a traceback, and the SIGINT handler
  PySpark installs in the main thread calls into Py4J from within the signal handler.

So the Spark work runs on a worker thread while the main thread waits (PySpark installs no
handler off the main thread, and the interrupt reaches the main thread outside Py4J):
:func:`start_spark` lets a start finish before it raises the interrupt,
:func:`run_interruptibly` turns Spark's logs off, cancels its jobs, stops it and raises it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from consistent.errors import OperationalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from analytics.spark import SparkSettings

__all__ = [
    "INSTALL_SPARK",
    "SPARK_MODULES",
    "SparkUnavailable",
    "java_available",
    "missing_modules",
    "run_interruptibly",
    "spark_problem",
    "start_spark",
]

T = TypeVar("T")

#: What the jobs import: PySpark, and the libraries of the audit's look-ups and the report.
SPARK_MODULES: Final = ("pyspark", "pyarrow", "pandas", "numpy", "matplotlib")
#: How to install them.
INSTALL_SPARK: Final = "pip install 'consistent[spark]'"
#: Set by spark-submit, whose JVM is already running: no Java to look for.
_SUBMIT_ENV: Final = "PYSPARK_GATEWAY_PORT"


class SparkUnavailable(OperationalError):
    """Spark could not start (the message says why, and what to do)."""


def missing_modules(names: tuple[str, ...] = SPARK_MODULES) -> list[str]:
    """The modules of ``names`` that cannot be imported here (without importing them)."""
    return [name for name in names if importlib.util.find_spec(name) is None]


def java_available(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Spark can find a Java runtime (``JAVA_HOME`` or ``java`` on the path)."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME", "").strip()
    if home and (Path(home) / "bin" / "java").exists():
        return True
    return shutil.which("java", path=env.get("PATH")) is not None


def spark_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the analysis cannot run here, in one sentence, or None."""
    missing = missing_modules()
    if missing:
        return (
            f"the analysis needs the spark extra, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed ({INSTALL_SPARK})"
        )
    env = os.environ if environ is None else environ
    if not env.get(_SUBMIT_ENV) and not java_available(env):
        return (
            "Spark needs Java 17 or later, and none was found (set JAVA_HOME or put java on "
            "the PATH; on Debian: apt-get install default-jre-headless)"
        )
    return None


def start_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The SparkSession of :func:`analytics.spark.build_session`, or :class:`SparkUnavailable`
    with Spark's own reason (its first line) when the JVM does not start.  Ctrl-C meanwhile
    takes effect once the JVM is up (see the module docstring)."""
    from analytics.spark import build_session  # noqa: PLC0415 (PySpark loads only now)

    worker = _Worker(lambda: build_session(settings))
    interrupted = False
    while True:
        try:
            worker.join()
            break
        except KeyboardInterrupt:
            interrupted = True  # stopping now would leave the starting JVM behind
    if interrupted:
        raise KeyboardInterrupt
    try:
        return worker.outcome()
    except Exception as exc:  # PySpark raises its own types, and plain ones for Java
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise SparkUnavailable(
            f"Spark did not start ({type(exc).__name__}{': ' + detail if detail else ''}); "
            "it needs Java 17 or later (JAVA_HOME or java on the PATH)"
        ) from exc


def run_interruptibly(spark: SparkSession, work: Callable[[], T]) -> T:
    """``work()``, run on a worker thread while the main thread waits; on Ctrl-C, Spark's jobs
    are cancelled and ``KeyboardInterrupt`` is raised, with no Py4J traceback (see the module
    docstring)."""
    worker = _Worker(work)
    try:
        worker.join()
    except KeyboardInterrupt:
        _stop_quietly(spark)
        raise
    return worker.outcome()


def _stop_quietly(spark: SparkSession) -> None:
    """Cancel the jobs and stop Spark with its logs off: the worker's job now fails as
    cancelled, and the JVM would otherwise log the tasks it kills as errors, with their Java
    stack traces, on its way out."""
    logging.disable(logging.CRITICAL)
    context = spark.sparkContext
    with contextlib.suppress(Exception):
        context.setLogLevel("OFF")
    with contextlib.suppress(Exception):
        context.cancelAllJobs()
    with contextlib.suppress(Exception):
        spark.stop()


class _Worker(Generic[T]):
    """``work()`` on a daemon thread (off the main thread: run in place), its result or its
    exception kept for :meth:`outcome`."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._results: list[T] = []
        self._failures: list[BaseException] = []
        # An event rather than Thread.join: an interrupted join may mark a live thread done.
        self._done = threading.Event()
        if threading.current_thread() is threading.main_thread():
            threading.Thread(target=self._run, name="consistent-spark", daemon=True).start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self._results.append(self._work())
        except BaseException as exc:  # handed to the waiting thread, which raises it
            self._failures.append(exc)
        finally:
            self._done.set()

    def join(self) -> None:
        """Wait for the work to end, with SIGINT raising ``KeyboardInterrupt`` meanwhile
        (whatever handler a SparkSession built in this thread installed)."""
        if self._done.is_set():
            return
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self._done.wait()
        finally:
            signal.signal(signal.SIGINT, previous)

    def outcome(self) -> T:
        """The work's result, or its exception raised."""
        if self._failures:
            raise self._failures[0]
        return self._results[0]
