"""The jobs on a real Spark standalone cluster, submitted as the README says.

A master and one worker from PySpark's own distribution (``spark-class``), on 127.0.0.1 with
ports the system picks; ``spark-submit --master spark://…`` runs ``analytics/jobs/run.py`` on a
small synthetic trace set, exactly as README.md's "Running the analytics on a cluster" spells
it (``PYTHONPATH=.`` for the driver, ``PYSPARK_PYTHON`` for the executors).  Every output table
must equal the one of a ``local[2]`` run of the same traces.

The executors' Python is the driver's interpreter with the project hidden (no ``analytics``,
no ``consistent``): the README says an executor needs numpy and pyarrow only, and this checks
it.  The master and the worker are stopped by pid whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO

import pytest
from pyspark.sql import DataFrame, SparkSession

from analytics.jobs.run import run_all

pytestmark = [pytest.mark.spark_cluster, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
_STARTUP_SECONDS = 90.0
_SUBMIT_SECONDS = 240.0
_RECORDS = 6000

# The executors' interpreter: this one, with the project's editable install and any checkout
# taken off the import path (what the README says an executor does not need).
_HIDDEN_PROJECT = """#!{python}
import importlib.util
import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path_hooks[:] = [h for h in sys.path_hooks if "editable" not in repr(h).lower()]
sys.path[:] = [p for p in sys.path if p not in ("", ".", {checkout!r})]
sys.path_importer_cache.clear()
for name in ("analytics", "consistent"):
    if importlib.util.find_spec(name) is not None:
        sys.exit(f"the executor's Python must not see the project, yet it imports {{name}}")
args = sys.argv[1:]
while args and args[0] != "-m":
    args.pop(0)
if len(args) < 2:
    sys.exit(f"expected -m MODULE, got {{sys.argv[1:]}}")
sys.argv = [args[1], *args[2:]]
runpy.run_module(args[1], run_name="__main__", alter_sys=True)
"""


@dataclass
class Daemon:
    """A Spark daemon started here, and the lines of its log seen so far."""

    process: subprocess.Popen[str]
    lines: list[str]

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern)
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                found = compiled.search(self.lines[seen])
                seen += 1
                if found:
                    return found
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        log = "".join(self.lines[-40:])
        raise AssertionError(f"no {pattern!r} in the daemon's log:\n{log}")

    def stop(self) -> None:
        """Stop the daemon, then whatever it started in its process group (executors)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def _pump(stream: IO[str], lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


def _environment(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(work / "logs"),
            "SPARK_PID_DIR": str(work / "pids"),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_DAEMON_MEMORY": "512m",
        }
    )
    return env


def _start(args: list[str], env: dict[str, str], cwd: Path) -> Daemon:
    process = subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the JVM is stopped with the script
    )
    lines: list[str] = []
    assert process.stdout is not None
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    return Daemon(process, lines)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with one registered worker (2 cores, 1 GiB)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java not found (Spark needs it)")
    work = tmp_path_factory.mktemp("spark-cluster")
    env = _environment(work)
    daemons: list[Daemon] = []
    try:
        master = _start(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0"],
            env, work,
        )  # fmt: skip
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)",
                              _STARTUP_SECONDS).group(1)  # fmt: skip
        worker_dir = work / "worker"
        worker_dir.mkdir()
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0", "--cores", "2", "--memory", "1g", "--work-dir",
             str(worker_dir), url],
            env, work,
        )  # fmt: skip
        daemons.append(worker)
        worker.wait_for(r"Successfully registered with master", _STARTUP_SECONDS)
        yield url
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


@pytest.fixture(scope="module")
def traces(
    spark: SparkSession, synthetic: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A few thousand synthetic records as OTLP-JSON lines (one file)."""
    config = synthetic.SyntheticConfig(
        sessions=50,
        burst_period_s=40.0,
        first_hop_peak_ms=400.0,
        second_hop_peak_ms=200.0,
        wait_timeout_ms=150.0,
        replica_names=("replica1", "replica2"),
    )
    lines = synthetic.otlp_lines(synthetic.generate(spark, _RECORDS, config), batch=256)
    out = tmp_path_factory.mktemp("cluster-traces") / "traces.jsonl"
    out.write_text("".join(row["value"] + "\n" for row in lines.collect()), encoding="utf-8")
    return out


@contextlib.contextmanager
def _submitted(master: str, traces: Path, out: Path, executor_python: Path) -> Iterator[None]:
    """The README's command, from the checkout, running while the ``with`` block does (the
    local run, to share the wait for the cluster's executors); checked on leaving it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "PYTHONPATH": ".",
            "PYSPARK_PYTHON": str(executor_python),
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(SPARK_HOME),
        }
    )
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master", master, "--deploy-mode", "client",
        "--driver-memory", "1g", "--executor-memory", "768m",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "analytics/jobs/run.py", str(traces), "--out", str(out),
    ]  # fmt: skip
    log = out.with_suffix(".log")
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            command, cwd=CHECKOUT, env=env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            yield
            returncode = process.wait(_SUBMIT_SECONDS)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(15)
    assert returncode == 0, log.read_text(encoding="utf-8")[-12000:]


def _differences(left: DataFrame, right: DataFrame) -> tuple[int, int]:
    return left.exceptAll(right).count(), right.exceptAll(left).count()


@pytest.mark.timeout(600)  # about a minute on two idle cores; several under load
def test_the_jobs_on_a_standalone_cluster_equal_a_local_run(
    spark: SparkSession, cluster: str, traces: Path, tmp_path: Path
) -> None:
    executor_python = tmp_path / "python-without-the-project"
    executor_python.write_text(
        _HIDDEN_PROJECT.format(python=sys.executable, checkout=str(CHECKOUT)), encoding="utf-8"
    )
    executor_python.chmod(0o755)
    on_cluster = tmp_path / "cluster"
    with _submitted(cluster, traces, on_cluster, executor_python):
        local = run_all(spark, [str(traces)], tmp_path / "local")
    assert (on_cluster / "report.html").is_file()
    names = sorted(p.name for p in (local.layout.root / "tables").iterdir() if p.is_dir())
    assert names == sorted(p.name for p in (on_cluster / "tables").iterdir() if p.is_dir())
    assert {"records", "read_audit", "lag_windows", "cost_by_level"} <= set(names)
    for name in names:
        cluster_table = spark.read.parquet(str(on_cluster / "tables" / name))
        local_table = spark.read.parquet(str(local.layout.root / "tables" / name))
        assert cluster_table.schema == local_table.schema, name
        assert local_table.count() > 0 or name == "violations", name
        assert _differences(cluster_table, local_table) == (0, 0), name
