"""What operators plug the proxy into: ``/metrics`` as Prometheus scrapes it (a proxy in front
of the emulator, its exposition parsed with ``prometheus_client``'s own parser, the numbers
followed as traffic goes through and a replica dies), the admin endpoint over HTTPS, and
statement spans sent to the process's OpenTelemetry provider."""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from consistent import trace
from consistent.emulator import start_topology
from consistent.emulator.replication import Fixed, LagModel
from consistent.emulator.replication.threaded import TopologyThread
from proxy.admin import AdminServer
from proxy.config import Address, AdminConfig, ConfigError, parse
from proxy.metrics import METRICS, STANDARD_METRICS
from proxy.testing import ProxyThread

from .conftest import ADMIN_TOKEN, USERS, connect, self_signed

Families = dict[str, list[Sample]]


@pytest.fixture
def emulated() -> Iterator[TopologyThread]:
    with start_topology(replicas=2, lag=LagModel(network=Fixed(0.02), workers=1)) as topology:
        yield topology


@pytest.fixture
def proxy(emulated: TopologyThread) -> Iterator[ProxyThread]:
    params = emulated.connection_params()
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "wait_timeout": 2.0,
            "backends": {
                "primary": f"127.0.0.1:{emulated.primary.port}",
                "replicas": [f"127.0.0.1:{r.port}" for r in emulated.replicas],
                "user": params.user,
                "password": params.password,
                "monitor_interval_ms": 50,
            },
            "users": USERS,
            "admin": {"listen": "127.0.0.1:0", "token": ADMIN_TOKEN},
        }
    )
    with ProxyThread(config) as running:
        yield running


def scrape(proxy: ProxyThread) -> Families:
    """family name -> its samples, as ``prometheus_client``'s parser reads them."""
    request = urllib.request.Request(f"http://127.0.0.1:{proxy.admin_port}/metrics")
    request.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def total(families: Families, sample: str, **labels: str) -> float:
    """The sum of ``sample``'s values whose labels include ``labels``."""
    return sum(
        s.value
        for samples in families.values()
        for s in samples
        if s.name == sample and labels.items() <= s.labels.items()
    )


def eventually(
    proxy: ProxyThread, check: Callable[[Families], bool], seconds: float = 10.0
) -> Families:
    """Scrape until ``check`` holds (the monitor polls every 50 ms)."""
    give_up = time.monotonic() + seconds
    while True:
        families = scrape(proxy)
        if check(families):
            return families
        assert time.monotonic() < give_up, f"never held; last scrape: {families}"
        time.sleep(0.05)


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def backends(emulated: TopologyThread) -> dict[str, str]:
    """``host:port`` -> role, as the ``backend`` and ``role`` labels must show them."""
    found = {f"127.0.0.1:{emulated.primary.port}": "primary"}
    found.update({f"127.0.0.1:{r.port}": "replica" for r in emulated.replicas})
    return found


def test_the_families_are_the_declared_ones_with_consistent_labels(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    conn = connect(proxy)
    try:
        rows(conn, "SELECT 1")
    finally:
        conn.close()
    families = eventually(
        proxy, lambda f: total(f, "consistent_proxy_backend_up") == len(backends(emulated))
    )
    declared = {spec.name for spec in METRICS}
    standard = {name.removesuffix("_total") for name in STANDARD_METRICS}
    assert set(families) == declared | standard
    expected = backends(emulated)
    for spec in METRICS:
        for sample in families[spec.name]:
            assert set(sample.labels) - {"le"} == set(spec.labels), sample
            if "backend" in spec.labels:
                # Never "primary" in one series and an address in another.
                assert expected[sample.labels["backend"]] == sample.labels["role"], sample
    up = {s.labels["backend"]: s.value for s in families["consistent_proxy_backend_up"]}
    assert up == dict.fromkeys(expected, 1.0)
    assert total(families, "process_resident_memory_bytes") > 0
    assert total(families, "process_cpu_seconds_total") > 0
    assert families["python_info"]


def test_routed_statements_and_their_durations_move_with_traffic(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    eventually(proxy, lambda f: total(f, "consistent_proxy_backend_up") == 3)
    conn = connect(proxy)
    try:
        rows(conn, "CREATE DATABASE IF NOT EXISTS metrics")
        rows(conn, "CREATE TABLE IF NOT EXISTS metrics.kv (k INT PRIMARY KEY, v INT)")
        rows(conn, "REPLACE INTO metrics.kv VALUES (1, 0)")
        emulated.wait_for_all()
        before = scrape(proxy)
        reads = 20
        for _ in range(reads):
            rows(conn, "SELECT v FROM metrics.kv WHERE k = 1")
        middle = scrape(proxy)
        writes = 10
        for i in range(writes):
            rows(conn, "UPDATE metrics.kv SET v = %s WHERE k = 1", (i,))
            rows(conn, "SELECT v FROM metrics.kv WHERE k = 1")
        after = scrape(proxy)
    finally:
        conn.close()

    def moved(name: str, old: Families, new: Families, **labels: str) -> float:
        return total(new, name, **labels) - total(old, name, **labels)

    # Reads that need nothing go to replicas: the replica route counter moves, by each read.
    statements = "consistent_proxy_statements_total"
    assert moved(statements, before, middle) == reads
    assert moved(statements, before, middle, role="replica") == reads
    durations = "consistent_proxy_statement_duration_seconds_count"
    assert moved(durations, before, middle, role="replica") == reads
    assert moved(durations, before, middle, role="primary") == 0
    assert moved("consistent_proxy_statement_duration_seconds_sum", before, middle) > 0
    # The writes went to the primary; each read after one is a read of the session's own write.
    assert moved(statements, middle, after, role="primary") >= writes
    assert moved(statements, middle, after) == 2 * writes
    waits = moved("consistent_proxy_waits_total", middle, after)
    # Most reads of a write 20 ms old wait for a replica (some find it caught up already).
    assert waits >= writes // 2
    assert waits == moved("consistent_proxy_wait_duration_seconds_count", middle, after)
    buckets = [
        s for s in after["consistent_proxy_wait_duration_seconds"] if s.name.endswith("_bucket")
    ]
    assert buckets[-1].labels["le"] == "+Inf"
    assert buckets[-1].value == total(after, "consistent_proxy_wait_duration_seconds_count")
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)
    assert total(after, "consistent_proxy_sessions_total") >= 1
    assert total(after, "consistent_proxy_backend_connects_total", role="replica") >= 2


def test_a_killed_replica_goes_down_and_comes_back(
    proxy: ProxyThread, emulated: TopologyThread
) -> None:
    victim = f"127.0.0.1:{emulated.replicas[0].port}"
    other = f"127.0.0.1:{emulated.replicas[1].port}"

    def up(families: Families, backend: str) -> float:
        return total(families, "consistent_proxy_backend_up", backend=backend)

    eventually(proxy, lambda f: up(f, victim) == 1 and up(f, other) == 1)
    emulated.kill(emulated.replicas[0])
    try:
        down = eventually(proxy, lambda f: up(f, victim) == 0)
        assert up(down, other) == 1
        assert up(down, f"127.0.0.1:{emulated.primary.port}") == 1
    finally:
        emulated.restart(emulated.replicas[0])
    eventually(proxy, lambda f: up(f, victim) == 1)


def test_replica_lag_is_a_gauge_in_seconds(proxy: ProxyThread, emulated: TopologyThread) -> None:
    conn = connect(proxy)
    lag = "consistent_proxy_replica_lag_seconds"
    try:
        rows(conn, "CREATE DATABASE IF NOT EXISTS metrics")
        rows(conn, "CREATE TABLE IF NOT EXISTS metrics.t (a INT)")

        def estimated(families: Families) -> bool:
            rows(conn, "INSERT INTO metrics.t VALUES (1)")
            return len(families[lag]) == len(emulated.replicas)

        families = eventually(proxy, estimated)
    finally:
        conn.close()
    for sample in families[lag]:
        assert sample.labels["role"] == "replica"
        assert 0 <= sample.value < 2.0  # a 20 ms lag model, on a loaded machine


def test_the_admin_endpoint_speaks_https_with_a_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    config = AdminConfig(Address("127.0.0.1", 0), ADMIN_TOKEN, tls_cert=cert, tls_key=key)

    def fetch(url: str, context: ssl.SSLContext | None) -> tuple[int, bytes]:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    async def main() -> None:
        server = AdminServer(config, metrics=lambda: b"metric 1\n", status=dict)
        await server.start()
        try:
            trusted = ssl.create_default_context(cafile=str(cert))
            url = f"https://127.0.0.1:{server.port}/metrics"
            assert await asyncio.to_thread(fetch, url, trusted) == (200, b"metric 1\n")
            with pytest.raises((urllib.error.URLError, ConnectionError)):
                await asyncio.to_thread(fetch, f"http://127.0.0.1:{server.port}/metrics", None)
        finally:
            await server.close()

    asyncio.run(main())


def test_statement_spans_go_to_the_process_provider_when_the_toml_says_so(
    emulated: TopologyThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(otel_trace, "get_tracer_provider", lambda: provider)
    params = emulated.connection_params()
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "tracer_provider": "global",
            "backends": {
                "primary": f"127.0.0.1:{emulated.primary.port}",
                "replicas": [f"127.0.0.1:{r.port}" for r in emulated.replicas],
                "user": params.user,
                "password": params.password,
            },
            "users": USERS,
        }
    )
    assert config.tracer_provider == "global"
    with ProxyThread(config) as running:
        conn = connect(running)
        try:
            rows(conn, "CREATE DATABASE IF NOT EXISTS traced")
            rows(conn, "USE traced")
            rows(conn, "CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY)")
            rows(conn, "SELECT id FROM orders WHERE id = 1")
        finally:
            conn.close()
        assert running.server.telemetry.flush(10)
    (select,) = [s for s in exporter.get_finished_spans() if s.name == "SELECT orders"]
    attributes = dict(select.attributes or {})
    assert attributes[trace.DB_NAMESPACE] == "traced"
    assert attributes[trace.DB_COLLECTION_NAME] == "orders"
    assert attributes[trace.RECORD_KIND] == "statement"
    assert select.kind is SpanKind.CLIENT
    assert "USE" in [s.name for s in exporter.get_finished_spans()]


@pytest.mark.parametrize("value", ["local", True, 1])
def test_the_proxy_refuses_another_tracer_provider(emulated: TopologyThread, value: object) -> None:
    with pytest.raises(ConfigError, match='tracer_provider must be "global"'):
        parse(
            {
                "tracer_provider": value,
                "backends": {"primary": f"127.0.0.1:{emulated.primary.port}"},
                "users": USERS,
            }
        )
