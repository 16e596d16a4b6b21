"""From a real workload to the report: the emulator replicates, the DB-API wrapper routes and
traces to an OTLP-JSON lines file, the lag sampler samples the replicas into the same file,
and every job runs on it.

The workload records its own ground truth: each session writes a new value and reads it
straight back, so a read that returns an older value was stale.  While it runs, both replicas'
appliers are stopped now and then, so that ``eventual`` reads really are stale sometimes.  The
audit must then find stale ``eventual`` reads, each of them one the workload saw stale, and no
stale ``read_own_writes`` read; the share of reads on replicas must be what the trace file says
(counted here with nothing but :mod:`json`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pyspark.sql import SparkSession

import consistent.dbapi as db
from analytics.jobs.run import RunResult, run_all
from analytics.report import headline
from consistent import trace
from consistent.cli import main as consistent_main
from consistent.emulator.replication.threaded import TopologyThread, start_topology
from consistent.policy import ReplicaKnowledge
from consistent.policy.roles import RoleVerdict
from consistent.telemetry import Telemetry, TelemetryConfig
from consistent.telemetry.roles import role_change_record
from consistent.telemetry.sampler import Endpoint, LagSampler

LEVELS = ("eventual", "read_own_writes")
ROUNDS = 30


@dataclass(frozen=True)
class Observed:
    """One read of the workload: when it ran and whether it returned the value just written."""

    level: str
    started_ns: int
    ended_ns: int
    fresh: bool


@dataclass(frozen=True)
class Workload:
    traces: Path
    reads: list[Observed]


def _session(topo: TopologyThread, database: str, telemetry: Telemetry, level: str) -> Any:
    primary = topo.connection_params(None, database)
    replicas = [f"{r.host}:{r.port}" for r in topo.replicas]
    return db.connect(
        primary=f"{primary.host}:{primary.port}",
        replicas=replicas,
        level=level,
        wait_timeout=0.1,
        knowledge=ReplicaKnowledge(),
        telemetry=telemetry,
        **{k: v for k, v in primary.pymysql_kwargs().items() if k not in ("host", "port")},
    )


def _run(topo: TopologyThread, database: str, telemetry: Telemetry) -> list[Observed]:
    sessions = {level: _session(topo, database, telemetry, level) for level in LEVELS}
    observed: list[Observed] = []
    try:
        for key, conn in enumerate(sessions.values()):
            conn.cursor().execute("INSERT INTO kv (k, v) VALUES (%s, 0)", (key,))
        for step in range(1, ROUNDS + 1):
            lagging = step % 10 < 5  # five rounds with the appliers stopped, five without
            for index in range(len(topo.replicas)):
                (topo.pause if lagging else topo.resume)(index)
            for key, (level, conn) in enumerate(sessions.items()):
                cur = conn.cursor()
                cur.execute("UPDATE kv SET v = %s WHERE k = %s", (step, key))
                started = time.time_ns()
                cur.execute("SELECT v FROM kv WHERE k = %s", (key,))
                [(value,)] = cur.fetchall()
                ended = time.time_ns()
                observed.append(Observed(level, started, ended, value == step))
            time.sleep(0.03)
    finally:
        for index in range(len(topo.replicas)):
            topo.resume(index)
        for conn in sessions.values():
            conn.close()
    return observed


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    traces = tmp_path_factory.mktemp("traces") / "traces.jsonl"
    config = TelemetryConfig(
        service_name="e2e", traces_exporters=("file",), trace_file=traces, schedule_delay=0.2
    )
    telemetry = Telemetry(config)
    with start_topology(replicas=2) as topo:
        topo.create_database("app")
        topo.connect(None, "app").cursor().execute(
            "CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL)"
        )
        topo.wait_for_all()
        params = topo.connection_params(None, "app").pymysql_kwargs()
        credentials = {k: params[k] for k in ("user", "password") if k in params}

        def connect(endpoint: Endpoint) -> Any:
            return pymysql.connect(host=endpoint.host, port=endpoint.port, **credentials)

        sampler = LagSampler(
            flavor="mysql",
            replicas=[Endpoint(r.host, r.port) for r in topo.replicas],
            connect=connect,
            emit=telemetry.emit,
            interval=0.01,
        )
        sampler.start()
        try:
            reads = _run(topo, "app", telemetry)
            # A switchover, as the proxy and the wrapper record it (twice, from two
            # processes): the report marks it once on the lag chart.
            moved = RoleVerdict(f"127.0.0.1:{topo.replicas[0].port}", (), split_brain=False)
            for _ in range(2):
                telemetry.emit(role_change_record(f"127.0.0.1:{topo.primary.port}", moved, "mysql"))
        finally:
            sampler.stop()
            sampler.close()
            telemetry.shutdown()
    return Workload(traces, reads)


@pytest.fixture(scope="module")
def result(
    spark: SparkSession, workload: Workload, tmp_path_factory: pytest.TempPathFactory
) -> RunResult:
    return run_all(spark, [str(workload.traces)], tmp_path_factory.mktemp("analysis"))


def _trace_reads(path: Path) -> dict[str, tuple[int, int]]:
    """Per level, (reads, reads a replica served), counted from the file with json alone."""
    counts: dict[str, tuple[int, int]] = {}
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attrs = {a["key"]: a["value"] for a in span["attributes"]}
                    if attrs.get(trace.STATEMENT_KIND, {}).get("stringValue") != "read":
                        continue
                    level = attrs[trace.LEVEL]["stringValue"]
                    replica = attrs[trace.ROUTE_ROLE]["stringValue"] == "replica"
                    reads, served = counts.get(level, (0, 0))
                    counts[level] = (reads + 1, served + int(replica))
    return counts


def test_the_workload_saw_stale_eventual_reads_and_no_stale_guaranteed_one(
    workload: Workload,
) -> None:
    stale = {lv: sum(not r.fresh for r in workload.reads if r.level == lv) for lv in LEVELS}
    assert stale["eventual"] > 0
    assert stale["read_own_writes"] == 0


def test_the_report_exists_with_the_headline_numbers(result: RunResult, workload: Workload) -> None:
    assert result.layout.report.is_file()
    page = result.layout.report.read_text()
    assert "<img" in page
    assert {p.name for p in result.layout.images.iterdir()} >= {"lag.png", "waits.png"}
    numbers = headline(result.data)
    levels = numbers["levels"]
    counted = _trace_reads(workload.traces)
    for level in LEVELS:
        reads, served = counted[level]
        assert levels[level]["reads"] == reads
        assert levels[level]["replica_share"] == pytest.approx(served / reads)
    assert levels["read_own_writes"]["violations"] == 0
    assert numbers["guarantee_violations"] == 0
    summary = json.loads(result.layout.summary.read_text())
    assert summary["headline"]["levels"]["eventual"]["reads"] == counted["eventual"][0]
    assert summary["headline"]["primary_changes"] == 1
    assert "The primary changed (dashed lines)" in page


def test_the_audit_finds_stale_reads_that_really_happened(
    spark: SparkSession, result: RunResult, workload: Workload
) -> None:
    audited = spark.read.parquet(result.layout.table("read_audit")).collect()
    truth = [r for r in workload.reads if r.level == "eventual"]

    def observed(row: Any) -> Observed:
        [match] = [
            r for r in truth if r.started_ns <= row["start_ns"] and row["end_ns"] <= r.ended_ns
        ]
        return match

    eventual = [row for row in audited if row["level"] == "eventual"]
    stale = [row for row in eventual if row["status"] == "stale"]
    covered = [row for row in eventual if row["status"] == "covered"]
    # Sound: a read the audit calls stale was stale, one it calls covered was fresh.
    assert stale
    assert all(not observed(row).fresh for row in stale)
    assert all(observed(row).fresh for row in covered)
    # And it misses few: the sampler runs every 10 ms, the appliers stop for five rounds at a time.
    really_stale = sum(not r.fresh for r in truth)
    assert len(stale) >= really_stale // 2
    levels = headline(result.data)["levels"]
    assert levels["eventual"]["violations"] == len(stale)


def test_consistent_analyze(workload: Workload, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "cli"
    status = consistent_main(["analyze", str(workload.traces), "--out", str(out), "--no-progress"])
    assert status == 0
    assert (out / "report.html").is_file()
    printed = capsys.readouterr().out
    assert "guarantee violations: 0" in printed
    assert str(out / "report.html") in printed
