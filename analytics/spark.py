"""The SparkSession the jobs run in: any cluster unchanged, sensible defaults on one machine.

Where the master comes from, first match wins:

1. the ``master`` argument;
2. ``spark-submit``: when the driver was started by ``spark-submit`` (which passes the gateway
   to Python in ``PYSPARK_GATEWAY_PORT``), its ``--master`` and ``--conf`` already hold and
   nothing is overridden;
3. the ``SPARK_MASTER`` environment variable (``spark://host:7077``, ``yarn``, ``k8s://…``);
4. ``local[N]`` with N the machine's cores.

In local mode the driver's RPC endpoint and block manager bind to 127.0.0.1 only, the web
UI is off unless asked for (then on 127.0.0.1 too), and Python workers run the driver's
interpreter (unless ``PYSPARK_PYTHON`` says otherwise).  Timestamps are UTC.  Shuffle partitions
start from the data's size (:func:`shuffle_partitions_for`) and adaptive query execution
merges the small ones.

https://spark.apache.org/docs/latest/submitting-applications.html
https://spark.apache.org/docs/latest/configuration.html
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from pyspark import SparkConf
from pyspark.sql import SparkSession

__all__ = [
    "COLLAPSE_PROJECT",
    "SparkSettings",
    "build_session",
    "is_local",
    "resolve_master",
    "shuffle_partitions_for",
    "tune_for_input",
    "without_optimizer_rules",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the master when not under ``spark-submit``.
MASTER_ENV: Final = "SPARK_MASTER"
#: Environment variable overriding the local driver memory (``4g``…).
DRIVER_MEMORY_ENV: Final = "SPARK_DRIVER_MEMORY"
_SUBMIT_ENV: Final = "PYSPARK_GATEWAY_PORT"
_PYTHON_ENV: Final = "PYSPARK_PYTHON"
_LOOPBACK: Final = "127.0.0.1"
_DEFAULT_DRIVER_MEMORY: Final = "4g"
#: Bytes of input per shuffle partition (compressed JSON expands several-fold in Spark).
_BYTES_PER_PARTITION: Final = 64 * 1024 * 1024
_MAX_PARTITIONS: Final = 2000
#: The JIT may compile Spark's generated methods past 8000 bytes of bytecode (wide projections
#: otherwise run interpreted, several times slower), and the heap is collected for throughput
#: (a batch job has no pauses to keep short: about 10% faster than G1 on bench/analytics.py).
#: A method is compiled after three times the calls it takes by default: the JIT compiled
#: Spark's own code for about a quarter of a 10M-record run's CPU, much of it code that ran a
#: few times only (CompileThresholdScaling=3: 26 instead of 34-36 CPU-seconds of compiling,
#: 64 s instead of 66-68 s in one session).
_JVM_OPTIONS: Final = "-XX:-DontCompileHugeMethods -XX:+UseParallelGC -XX:CompileThresholdScaling=3"
#: Rows per Arrow batch between the JVM and Python (the audit's look-ups, the step functions
#: collected to the driver): five times Spark's default, so that the per-batch work of the
#: look-ups is paid less often (under a second of the audit's pass on 10M records).
_ARROW_BATCH_ROWS: Final = 50_000
#: The optimizer rule that merges a projection into the one above it.
COLLAPSE_PROJECT: Final = "org.apache.spark.sql.catalyst.optimizer.CollapseProject"
_EXCLUDED_RULES: Final = "spark.sql.optimizer.excludedRules"


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """How to build the session; every field has a default that suits this project."""

    app_name: str = "consistent-analytics"
    #: ``None``: from spark-submit, ``SPARK_MASTER`` or local (see the module docstring).
    master: str | None = None
    #: ``None``: ``SPARK_DRIVER_MEMORY`` or 4g (local mode only; a cluster sets its own).
    driver_memory: str | None = None
    #: Initial shuffle partitions; ``None``: twice the cores.
    shuffle_partitions: int | None = None
    #: The web UI (bound to 127.0.0.1 in local mode).
    ui: bool = False
    #: Anything else, as ``spark.*`` key/value pairs (applied last).
    extra: Mapping[str, str] = field(default_factory=dict)


def _cores() -> int:
    return max(1, os.cpu_count() or 1)


def resolve_master(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The master to set, or ``None`` when spark-submit has set it already."""
    environ = os.environ if env is None else env
    if explicit:
        return explicit
    if environ.get(_SUBMIT_ENV):
        return None
    configured = environ.get(MASTER_ENV, "").strip()
    return configured or f"local[{_cores()}]"


def is_local(master: str | None) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``."""
    return master is not None and (master == "local" or master.startswith("local["))


def shuffle_partitions_for(input_bytes: int, cores: int | None = None) -> int:
    """Shuffle partitions for ``input_bytes`` of traces: at least two per core, one more per
    64 MiB, at most 2000 (adaptive execution merges the small ones afterwards)."""
    parallelism = cores if cores is not None else _cores()
    wanted = max(2 * parallelism, -(-input_bytes // _BYTES_PER_PARTITION))
    return min(wanted, _MAX_PARTITIONS)


def _configuration(settings: SparkSettings, master: str | None) -> dict[str, str]:
    conf: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # A record that repeats an attribute keeps the last value instead of failing the job.
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions or 2 * _cores()),
        "spark.ui.enabled": "true" if settings.ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(_ARROW_BATCH_ROWS),
        "spark.driver.extraJavaOptions": _JVM_OPTIONS,
        "spark.executor.extraJavaOptions": _JVM_OPTIONS,
    }
    if is_local(master):
        memory = settings.driver_memory or os.environ.get(DRIVER_MEMORY_ENV, "").strip()
        conf.update(
            {
                "spark.driver.bindAddress": _LOOPBACK,
                "spark.driver.host": _LOOPBACK,
                "spark.driver.memory": memory or _DEFAULT_DRIVER_MEMORY,
                "spark.default.parallelism": str(_cores()),
            }
        )
    conf.update(settings.extra)
    return conf


def build_session(settings: SparkSettings | None = None) -> SparkSession:
    """The SparkSession (an existing one in this process is reused, as Spark does)."""
    settings = settings or SparkSettings()
    master = resolve_master(settings.master)
    builder = SparkSession.builder.appName(settings.app_name)
    if master is not None:
        builder = builder.master(master)
    configuration = _configuration(settings, master)
    if is_local(master):
        # Read by the JVM as it starts: every local endpoint on loopback from the first one
        # (and no warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", _LOOPBACK)
        # Python workers (the audit's look-ups) run this interpreter, whose packages the
        # driver has, unless told otherwise (PySpark's default is whatever python3 is found).
        os.environ.setdefault(_PYTHON_ENV, sys.executable)
    if master is None:  # spark-submit: its --conf wins over our defaults
        submitted = SparkConf()
        configuration = {
            key: value
            for key, value in configuration.items()
            if key in settings.extra or not submitted.contains(key)
        }
    for key, value in configuration.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    logger.info("spark %s on %s", session.version, session.sparkContext.master)
    return session


def tune_for_input(session: SparkSession, input_bytes: int) -> int:
    """Size the shuffle partitions to ``input_bytes`` of traces; returns the number set."""
    cores = session.sparkContext.defaultParallelism
    partitions = shuffle_partitions_for(input_bytes, cores)
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


@contextlib.contextmanager
def without_optimizer_rules(session: SparkSession, *rules: str) -> Iterator[None]:
    """Plan the actions run inside without the optimizer rules ``rules`` (class names, added to
    those ``spark.sql.optimizer.excludedRules`` already names); the setting is restored after.
    A plan is optimized when an action runs it, so only those actions are affected."""
    before = session.conf.get(_EXCLUDED_RULES, None)
    named = [r for r in (before or "").split(",") if r]
    session.conf.set(_EXCLUDED_RULES, ",".join([*named, *(r for r in rules if r not in named)]))
    try:
        yield
    finally:
        if before is None:
            session.conf.unset(_EXCLUDED_RULES)
        else:
            session.conf.set(_EXCLUDED_RULES, before)
