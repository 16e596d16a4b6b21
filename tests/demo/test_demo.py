"""A short demo on the emulator: the workload's ground truth, then the analysis' headline.

The workload runs once (8 s, 8 sessions: one per level and path); the analysis test reads its
traces, so a failure there does not hide what the workload showed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from analytics.startup import java_available
from consistent import trace
from consistent.demo.cli import DemoOutcome, analyse, execute, ground_truth
from consistent.demo.headline import build_headline, failures
from consistent.demo.session import DemoSettings
from consistent.demo.workload import GUARANTEED_LEVELS, LEVELS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

SECONDS = 8.0
SESSIONS = 8


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="module")
def workload_only(out: Path) -> DemoOutcome:
    console = Console(width=160, record=True)
    return execute(
        DemoSettings(seconds=SECONDS, sessions=SESSIONS),
        out,
        console=console,
        with_analysis=False,
    )


def test_the_clients_see_stale_reads_only_at_eventual(workload_only: DemoOutcome) -> None:
    truth = ground_truth(workload_only.workload.tallies)
    assert list(truth) == list(LEVELS)
    assert truth["eventual"].stale > 0
    for level in GUARANTEED_LEVELS:
        assert truth[level].reads > 0, level
        assert truth[level].stale == 0, level
    assert sum(t.errors for t in truth.values()) == 0
    assert workload_only.status == 0


def test_every_level_reads_on_replicas(workload_only: DemoOutcome) -> None:
    truth = ground_truth(workload_only.workload.tallies)
    for level in LEVELS:
        share = truth[level].replica_share
        assert share is not None
        assert share > 0, level


def test_every_path_and_the_lag_sampler_wrote_traces(workload_only: DemoOutcome) -> None:
    traces = workload_only.workload.traces
    for name in ("dbapi.jsonl", "proxy.jsonl", "lag.jsonl"):
        assert (traces / name).stat().st_size > 0, name
    assert workload_only.workload.lag_rounds > 0
    assert workload_only.workload.dropped_spans == 0


def test_the_lag_samples_name_the_replicas_as_the_demo_does(workload_only: DemoOutcome) -> None:
    names: set[str] = set()
    for line in (workload_only.workload.traces / "lag.jsonl").read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {a["key"]: a["value"] for a in span["attributes"]}
                    named = attributes.get(trace.LAG_REPLICA_NAME, {}).get("stringValue")
                    if named is not None:
                        names.add(named)
    assert names == {"replica1", "replica2", "delayed"}


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """Spark for the analysis; not stopped here, as another module's tests may share it
    (``getOrCreate``); the JVM ends with the test process."""
    if not java_available():
        pytest.skip("Spark needs Java")
    from analytics.spark import SparkSettings, build_session

    return build_session(
        SparkSettings(
            app_name="consistent-demo-tests",
            master="local[2]",
            driver_memory="1g",
            shuffle_partitions=2,
        )
    )


@pytest.mark.timeout(600)  # Spark on two shared cores: one to two minutes, more under load
def test_the_audit_finds_violations_only_at_eventual(
    workload_only: DemoOutcome, out: Path, spark: SparkSession
) -> None:
    console = Console(width=160, record=True)
    result = analyse(console, workload_only.workload.traces, out / "analysis", spark)
    rows = {
        row.level: row
        for row in build_headline(
            result.data.cost, result.data.reads, ground_truth(workload_only.workload.tallies)
        )
    }
    assert rows["eventual"].audit_stale > 0
    assert rows["eventual"].client_stale > 0
    for level in GUARANTEED_LEVELS:
        assert rows[level].audit_stale == 0, level
        assert rows[level].client_stale == 0, level
        assert rows[level].reads > 0, level
    for level in ("eventual", "read_own_writes", "read_all_writes"):
        share = rows[level].replica_share
        assert share is not None
        assert share > 0, level
    assert failures(rows.values()) == []
    assert result.layout.report.is_file()
    assert result.layout.report.stat().st_size > 0
