"""Ctrl-C stops every long-running command with status 130 and one line
(``consistent <command>: interrupted``), never a ``KeyboardInterrupt`` traceback, and leaves
nothing running: the topology, the proxy, the workload and Spark's JVM end with the command.

Each case starts the command in a process of its own, waits until it is at work (a line it
prints), then sends it SIGINT.  Bounds are generous: Spark's JVM takes 5-30 s to start on a
busy 2-core machine, and the command lets a starting JVM finish before it stops.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

from analytics.startup import spark_problem

from .commands import INTERRUPTED, Finished, interrupt, run

#: An environment variable that marks the processes a test started.
_MARK = "CONSISTENT_TEST_RUN"

needs_spark = pytest.mark.skipif(
    spark_problem() is not None, reason=f"Spark cannot run here: {spark_problem()}"
)


def _stopped_cleanly(result: Finished, prog: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "KeyboardInterrupt" not in result.stderr, result.stderr
    assert result.status == INTERRUPTED, (result.status, result.stderr[-3000:])
    assert result.stderr_lines[-1] == f"{prog}: interrupted", result.stderr[-3000:]
    assert sum(line.startswith("consistent") for line in result.stderr_lines) == 1


def _all_gone(mark: str, timeout: float = 60) -> None:
    """No process started with ``mark`` in its environment (the command, and the JVM it
    started, which inherits it) is left once ``timeout`` has passed."""
    needle = f"{_MARK}={mark}".encode()
    deadline = time.monotonic() + timeout
    while True:
        left = [entry.name for entry in Path("/proc").iterdir() if _has(entry, needle)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not left, f"still running: {left}"


def _has(entry: Path, needle: bytes) -> bool:
    if not entry.name.isdigit():
        return False
    try:
        return needle in (entry / "environ").read_bytes()
    except OSError:  # it ended while we looked, or is not ours to read
        return False


def test_emulate() -> None:
    result = interrupt(["emulate", "--replicas", "1", "--json"], once='"servers"')
    _stopped_cleanly(result, "consistent emulate")


def test_lag_sample() -> None:
    with socket.socket() as probe:  # nothing listens: every round records "unreachable"
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["lag-sample", "--replica", f"127.0.0.1:{port}", "--flavor", "mysql"]
    result = interrupt([*argv, "--interval-ms", "100"], once="unreachable")
    _stopped_cleanly(result, "consistent lag-sample")


def test_proxy_drains_then_exits_with_130(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    config = tmp_path / "proxy.toml"
    config.write_text(
        'listen = "127.0.0.1:0"\n[backends]\n'
        f'primary = "127.0.0.1:{free}"\nflavor = "mysql"\n'
        '[users.app]\npassword = "app-secret"\n'
    )
    result = interrupt(["proxy", "--config", str(config)], once="listening", on="stderr")
    _stopped_cleanly(result, "consistent proxy")
    assert "draining sessions" in result.stderr


def test_demo_during_the_workload(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    argv = ["demo", "--seconds", "120", "--sessions", "8", "--skip-analysis", "--out", str(out)]
    result = interrupt([*argv, "--no-progress"], once="running the workload")
    _stopped_cleanly(result, "consistent demo")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real traces: a short demo's workload (8 s), without its analysis."""
    out = tmp_path_factory.mktemp("demo")
    argv = ["--seconds", "6", "--sessions", "8", "--skip-analysis", "--no-progress"]
    done = run(["demo", *argv, "--out", str(out)], timeout=300)
    assert done.status == 0, done.stderr
    return out / "traces"


@needs_spark
def test_analyze_while_spark_starts(traces: Path, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    result = interrupt(
        ["analyze", str(traces), "--out", str(tmp_path / "analysis")],
        once="starting Spark",
        on="stderr",
        env={_MARK: mark},
        stop_timeout=180,
    )
    _stopped_cleanly(result, "consistent analyze")
    _all_gone(mark)


@needs_spark
def test_analyze_while_a_job_runs(traces: Path, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    result = interrupt(
        ["analyze", str(traces), "--out", str(tmp_path / "analysis")],
        once="step 1/",
        on="stderr",
        env={_MARK: mark},
        start_timeout=240,
        stop_timeout=120,
    )
    _stopped_cleanly(result, "consistent analyze")
    _all_gone(mark)
