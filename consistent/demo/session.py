"""One demo run against running backends: tracing, the proxy, the lag sampler, the sessions.

:func:`run_workload` sets the schema up, starts the proxy and the lag sampler with tracing to
files under ``OUT/traces/``, runs the sessions for the time asked while ``on_tick`` shows them,
then stops everything in order and flushes the traces.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pymysql

import consistent.dbapi
from consistent.demo.topology import Backends
from consistent.demo.workload import Connection as SessionConnection
from consistent.demo.workload import (
    SessionPlan,
    SessionTally,
    WorkloadSettings,
    plan_sessions,
    setup_statements,
    start_sessions,
    wait_until,
)
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.telemetry import Endpoint, LagSampler, Telemetry, TelemetryConfig
from consistent.telemetry.sampler import SamplerConnection
from proxy.config import parse
from proxy.testing import ProxyThread

__all__ = ["DemoSettings", "WorkloadResult", "run_workload"]

logger = logging.getLogger(__name__)

_PROXY_USER: Final = "demo"
_PROXY_PASSWORD: Final = "demo-secret"
_CATCH_UP_SECONDS: Final = 30.0
_CONNECT_TIMEOUT: Final = 5
_READ_TIMEOUT: Final = 30


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What to run: for how long, how many sessions, and the routing knobs."""

    seconds: float = 75.0
    sessions: int = 32
    #: Seconds a read may wait for a replica to catch up (then it runs on the primary).
    wait_timeout: float = 1.0
    #: Lag sampler period, seconds: often enough that the audit can judge most reads, not so
    #: often that sampling loads the servers.
    sample_interval: float = 0.2
    #: Display refreshes per second.
    refresh: float = 4.0
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """What the workload did and where its traces are."""

    tallies: tuple[SessionTally, ...]
    traces: Path
    seconds: float
    #: Spans the telemetry pipelines had to drop (full queues).
    dropped_spans: int
    lag_rounds: int


def _telemetry(path: Path, service: str) -> Telemetry:
    """A pipeline writing OTLP-JSON lines to ``path``; its queue is large enough that a
    demo on a busy machine drops nothing."""
    return Telemetry(
        TelemetryConfig(
            service_name=service,
            traces_exporters=("file",),
            trace_file=path,
            max_queue_size=200_000,
            schedule_delay=0.5,
        )
    )


def _clean(traces: Path) -> None:
    traces.mkdir(parents=True, exist_ok=True)
    for old in traces.glob("*.jsonl*"):
        old.unlink()


def _setup(backends: Backends, keys: Sequence[int]) -> None:
    connection = pymysql.connect(**backends.connect_kwargs(backends.primary))
    try:
        with connection.cursor() as cursor:
            for statement in setup_statements(keys):
                cursor.execute(statement)
    finally:
        connection.close()
    backends.catch_up(_CATCH_UP_SECONDS)


def _proxy(backends: Backends, settings: DemoSettings, telemetry: Telemetry) -> ProxyThread:
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "wait_timeout": settings.wait_timeout,
            "backends": {
                "primary": backends.primary.address,
                "replicas": [r.address for r in backends.replicas],
                "user": backends.user,
                "password": backends.password,
                "monitor_interval_ms": 200,
            },
            "users": {_PROXY_USER: {"password": _PROXY_PASSWORD}},
        }
    )
    return ProxyThread(config, telemetry=telemetry)


def _sampler(backends: Backends, settings: DemoSettings, telemetry: Telemetry) -> LagSampler:
    def connect(endpoint: Endpoint) -> SamplerConnection:
        kwargs = {
            **backends.connect_kwargs(backends.primary),
            "host": endpoint.host,
            "port": endpoint.port,
            "connect_timeout": _CONNECT_TIMEOUT,
            # performance_schema DATETIME(6) columns are read as UTC.
            "init_command": "SET time_zone = '+00:00'",
        }
        connection: SamplerConnection = pymysql.connect(**kwargs)
        return connection

    return LagSampler(
        flavor="mariadb" if backends.flavor == "mariadb" else "mysql",
        replicas=[Endpoint(r.host, r.port) for r in backends.replicas],
        primary=Endpoint(backends.primary.host, backends.primary.port),
        connect=connect,
        emit=telemetry.emit,
        interval=settings.sample_interval,
    )


def _connector(
    backends: Backends, settings: DemoSettings, telemetry: Telemetry, proxy_port: int
) -> Callable[[SessionPlan], SessionConnection]:
    """How a session connects: the DB-API wrapper straight to the servers, or PyMySQL to the
    proxy with the level set by ``SET @@consistent_level``."""
    knowledge = ReplicaKnowledge()
    acknowledged = AcknowledgedWrites()
    options = dict(backends.options)

    def dbapi(plan: SessionPlan) -> SessionConnection:
        return consistent.dbapi.connect(
            primary=backends.primary.address,
            replicas=[r.address for r in backends.replicas],
            level=plan.level,
            wait_timeout=settings.wait_timeout,
            user=backends.user,
            password=backends.password,
            connect_timeout=_CONNECT_TIMEOUT,
            read_timeout=_READ_TIMEOUT,
            knowledge=knowledge,
            acknowledged=acknowledged,
            telemetry=telemetry,
            **options,
        )

    def through_proxy(plan: SessionPlan) -> SessionConnection:
        connection: SessionConnection = pymysql.connect(
            host="127.0.0.1",
            port=proxy_port,
            user=_PROXY_USER,
            password=_PROXY_PASSWORD,
            autocommit=True,
            connect_timeout=_CONNECT_TIMEOUT,
            read_timeout=_READ_TIMEOUT,
        )
        cursor = connection.cursor()
        try:
            cursor.execute("SET @@consistent_level = %s", (plan.level,))
        finally:
            cursor.close()
        return connection

    paths: dict[str, Callable[[SessionPlan], SessionConnection]] = {
        "dbapi": dbapi,
        "proxy": through_proxy,
    }
    return lambda plan: paths[plan.path](plan)


@contextlib.contextmanager
def _pipelines(traces: Path) -> Iterator[dict[str, Telemetry]]:
    pipelines = {
        "dbapi": _telemetry(traces / "dbapi.jsonl", "consistent-demo-dbapi"),
        "proxy": _telemetry(traces / "proxy.jsonl", "consistent-demo-proxy"),
        "lag": _telemetry(traces / "lag.jsonl", "consistent-demo-lag-sampler"),
    }
    try:
        yield pipelines
    finally:
        for pipeline in pipelines.values():
            pipeline.shutdown()


def run_workload(
    backends: Backends,
    settings: DemoSettings,
    out: Path,
    on_tick: Callable[[Sequence[SessionTally], float], None] | None = None,
) -> WorkloadResult:
    """Run the sessions for ``settings.seconds`` against ``backends``, traces to
    ``out/traces``; ``on_tick(tallies, started)`` is called ``settings.refresh`` times a
    second (``started`` is ``time.monotonic()`` when the sessions started)."""
    traces = out / "traces"
    _clean(traces)
    plans = plan_sessions(settings.sessions)
    tallies = tuple(SessionTally(plan) for plan in plans)
    _setup(backends, [plan.key for plan in plans])
    stop = threading.Event()
    with _pipelines(traces) as pipelines:
        sampler = _sampler(backends, settings, pipelines["lag"])
        sampler.start()
        try:
            with _proxy(backends, settings, pipelines["proxy"]) as proxy, backends.disturb():
                connect = _connector(backends, settings, pipelines["dbapi"], proxy.port)
                started = time.monotonic()
                threads = start_sessions(
                    tallies, connect, backends.replica_ports, stop, settings.workload
                )
                try:
                    wait_until(
                        started + settings.seconds,
                        threading.Event(),
                        lambda: on_tick(tallies, started) if on_tick else None,
                        1.0 / settings.refresh,
                    )
                finally:
                    stop.set()
                    for thread in threads:
                        thread.join(_READ_TIMEOUT)
                elapsed = time.monotonic() - started
                if on_tick:
                    on_tick(tallies, started)
        finally:
            sampler.stop()
        for pipeline in pipelines.values():
            pipeline.flush()
        dropped = sum(p.dropped for p in pipelines.values())
    return WorkloadResult(tallies, traces, elapsed, dropped, sampler.rounds)
