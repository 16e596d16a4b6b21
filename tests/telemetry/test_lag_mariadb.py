"""The lag sampler and ``consistent lag-sample`` against a real MariaDB primary and replicas."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from consistent import trace
from consistent.telemetry import SpanRecord
from consistent.telemetry.cli import add_lag_sample_command
from consistent.telemetry.sampler import Endpoint, LagSampler, SamplerConnection
from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase

pytestmark = pytest.mark.mariadb


def endpoint(server: Any) -> Endpoint:
    return Endpoint(server.host, server.port)


def sampler(topology: MariaDBTopology, records: list[SpanRecord]) -> LagSampler:
    by_port = {server.port: server for server in topology.servers}

    def connect(target: Endpoint) -> SamplerConnection:
        params = topology.connection_params(by_port[target.port]).pymysql_kwargs()
        connection: SamplerConnection = pymysql.connect(autocommit=True, **params)
        return connection

    return LagSampler(
        flavor="mariadb",
        replicas=[endpoint(r) for r in topology.replicas],
        primary=endpoint(topology.primary),
        connect=connect,
        emit=records.append,
    )


def by_replica(records: list[SpanRecord]) -> dict[str, dict[str, Any]]:
    return {str(r.attributes[trace.LAG_REPLICA]): dict(r.attributes) for r in records}


def test_caught_up_replicas_are_zero_behind(mariadb_topology: MariaDBTopology) -> None:
    mariadb_topology.wait_for_all()
    records: list[SpanRecord] = []
    lag = sampler(mariadb_topology, records)
    try:
        lag.sample()
    finally:
        lag.close()
    samples = by_replica(records)
    primary_pos = mariadb_topology.primary_position()
    assert set(samples) == {endpoint(r).name for r in mariadb_topology.replicas}
    for record in records:
        assert trace.check_attributes(record.name, record.attributes) == ()
    for a in samples.values():
        assert a[trace.LAG_REACHABLE] is True
        assert (a[trace.LAG_IO_RUNNING], a[trace.LAG_SQL_RUNNING]) == (True, True)
        assert a[trace.LAG_PRIMARY_GTID_BINLOG_POS] == primary_pos
        assert a[trace.LAG_GTID_SLAVE_POS] == primary_pos
        assert a[trace.LAG_TRANSACTIONS_BEHIND] == 0
        assert a[trace.LAG_SECONDS_BEHIND_MASTER] == 0
        assert a[trace.DB_SYSTEM_NAME] == "mariadb"
        assert a[trace.LAG_READ_ONLY] is True  # the test topology's replicas are read-only
        assert trace.LAG_SUPER_READ_ONLY not in a


def test_a_writable_replica_shows_in_the_samples(mariadb_topology: MariaDBTopology) -> None:
    writable = mariadb_topology.replicas[1]
    writable.query("SET GLOBAL read_only = 0")
    records: list[SpanRecord] = []
    lag = sampler(mariadb_topology, records)
    try:
        lag.sample()
    finally:
        lag.close()
        writable.query("SET GLOBAL read_only = 1")
    samples = by_replica(records)
    assert samples[endpoint(writable).name][trace.LAG_READ_ONLY] is False
    assert samples[endpoint(mariadb_topology.replicas[0]).name][trace.LAG_READ_ONLY] is True


def _wait_received(topology: MariaDBTopology, index: int, position: str) -> None:
    deadline = time.monotonic() + 10
    while topology.replica_status(index)["Gtid_IO_Pos"] != position:
        assert time.monotonic() < deadline, "the replica did not receive the transactions"
        time.sleep(0.02)


def test_a_paused_applier_shows_transactions_received_but_not_applied(
    mariadb_topology: MariaDBTopology, mariadb_database: CleanDatabase
) -> None:
    topology = mariadb_topology
    with contextlib.closing(mariadb_database.connect()) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    topology.wait_for_all()
    topology.pause(0)
    with contextlib.closing(mariadb_database.connect()) as conn, conn.cursor() as cursor:
        for k in range(5):
            cursor.execute("INSERT INTO t VALUES (%s)", (k,))
    position = topology.primary_position()
    _wait_received(topology, 0, position)
    topology.wait_for_catchup(1)
    records: list[SpanRecord] = []
    lag = sampler(topology, records)
    try:
        lag.sample()
        paused = by_replica(records)[endpoint(topology.replicas[0]).name]
        running = by_replica(records)[endpoint(topology.replicas[1]).name]
        assert paused[trace.LAG_SQL_RUNNING] is False
        assert paused[trace.LAG_IO_RUNNING] is True
        assert paused[trace.LAG_TRANSACTIONS_BEHIND] == 5
        assert paused[trace.LAG_TRANSACTIONS_QUEUED] == 5
        assert paused[trace.LAG_GTID_IO_POS] == position
        assert trace.LAG_SECONDS_BEHIND_MASTER not in paused  # NULL while stopped
        assert running[trace.LAG_TRANSACTIONS_BEHIND] == 0

        topology.resume(0)
        topology.wait_for_catchup(0)
        records.clear()
        lag.sample()
        assert (
            by_replica(records)[endpoint(topology.replicas[0]).name][trace.LAG_TRANSACTIONS_BEHIND]
            == 0
        )
    finally:
        lag.close()


def test_the_lag_sample_command_writes_the_trace_file(
    mariadb_topology: MariaDBTopology, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = mariadb_topology
    parser = argparse.ArgumentParser(prog="consistent")
    add_lag_sample_command(parser.add_subparsers(dest="command"))
    trace_file = tmp_path / "lag.jsonl"
    argv = ["lag-sample", "--count", "2", "--interval-ms", "50", "--trace-file", str(trace_file)]
    for replica in topology.replicas:
        argv += ["--replica", endpoint(replica).name]
    argv += ["--primary", endpoint(topology.primary).name]
    argv += ["--user", topology.app_user, "--password", topology.app_password]
    args = parser.parse_args(argv)
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 * len(topology.replicas)
    assert all("behind_trx=0" in line for line in out)
    spans = []
    for line in trace_file.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                spans.extend(scope["spans"])
    assert len(spans) == 2 * len(topology.replicas)
    for span in spans:
        assert span["name"] == trace.LAG_SAMPLE_SPAN
        attributes = {a["key"]: a["value"] for a in span["attributes"]}
        assert attributes[trace.DB_SYSTEM_NAME] == {"stringValue": "mariadb"}
        assert attributes[trace.LAG_TRANSACTIONS_BEHIND] == {"intValue": "0"}
