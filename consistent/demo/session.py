"""One demo run against running backends: tracing, the proxy, the lag sampler, the sessions.

:func:`run_workload` sets the schema up, starts the proxy (in a process of its own) and the
lag sampler (here) with tracing to files under ``OUT/traces/``, runs the sessions for the
time asked in client processes, one per path (:mod:`consistent.demo.clients`), while
``on_tick`` shows them, then stops everything in order and flushes the traces.  The sampler
also keeps the lag it measured per replica (:mod:`consistent.demo.lagcheck`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pymysql

from consistent.demo.clients import (
    PROXY_PASSWORD,
    PROXY_USER,
    ClientSettings,
    SharedTallies,
    run_clients,
    serve_proxy,
    telemetry_to,
)
from consistent.demo.lagcheck import LagRecorder
from consistent.demo.processes import Child, Children
from consistent.demo.topology import Backends
from consistent.demo.workload import (
    SessionPlan,
    SessionTally,
    WorkloadSettings,
    plan_sessions,
    setup_statements,
    wait_until,
)
from consistent.telemetry import Endpoint, LagSampler
from consistent.telemetry.records import SpanRecord
from consistent.telemetry.sampler import SamplerConnection

__all__ = ["DemoSettings", "WorkloadResult", "run_workload"]

logger = logging.getLogger(__name__)

_CATCH_UP_SECONDS: Final = 30.0
_CONNECT_TIMEOUT: Final = 5
#: Seconds a part has to start (spawning an interpreter and importing the product), and to
#: stop once asked (its sessions finish their statement, its traces are flushed).
_START_SECONDS: Final = 60.0
_STOP_SECONDS: Final = 60.0


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What to run: for how long, how many sessions, and the routing knobs."""

    seconds: float = 75.0
    sessions: int = 16
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
    #: Replica name → the median lag the sampler measured, seconds.
    measured_lag: Mapping[str, float] = field(default_factory=dict)


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


def _proxy_config(backends: Backends, settings: DemoSettings) -> dict[str, Any]:
    return {
        "listen": "127.0.0.1:0",
        "wait_timeout": settings.wait_timeout,
        "backends": {
            "primary": backends.primary.address,
            "replicas": [r.address for r in backends.replicas],
            "user": backends.user,
            "password": backends.password,
            "monitor_interval_ms": 200,
        },
        "users": {PROXY_USER: {"password": PROXY_PASSWORD}},
    }


def _sampler(
    backends: Backends, settings: DemoSettings, emit: Callable[[SpanRecord], None]
) -> LagSampler:
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
        replicas=[Endpoint(r.host, r.port, r.name) for r in backends.replicas],
        primary=Endpoint(backends.primary.host, backends.primary.port),
        connect=connect,
        emit=emit,
        interval=settings.sample_interval,
    )


def _client_settings(
    backends: Backends, settings: DemoSettings, proxy_port: int, traces: Path
) -> ClientSettings:
    return ClientSettings(
        primary=backends.primary.address,
        replicas=tuple(r.address for r in backends.replicas),
        user=backends.user,
        password=backends.password,
        options=backends.options,
        replica_ports=backends.replica_ports,
        proxy_port=proxy_port,
        wait_timeout=settings.wait_timeout,
        trace_file=traces / "dbapi.jsonl",
        workload=settings.workload,
    )


def _start_clients(
    children: Children, plans: Sequence[SessionPlan], settings: ClientSettings
) -> tuple[list[Child], SharedTallies]:
    """One client process per path, each with the sessions of that path."""
    shared = SharedTallies(len(plans))
    clients = []
    for path in dict.fromkeys(plan.path for plan in plans):
        sessions = [(i, plan) for i, plan in enumerate(plans) if plan.path == path]
        clients.append(children.start(f"{path} clients", run_clients, sessions, settings, shared))
    for client in clients:
        client.receive(_START_SECONDS)
    return clients, shared


def _measured(backends: Backends, recorder: LagRecorder) -> dict[str, float]:
    by_address = recorder.medians()
    return {r.name: by_address[r.address] for r in backends.replicas if r.address in by_address}


def run_workload(
    backends: Backends,
    settings: DemoSettings,
    out: Path,
    on_tick: Callable[[Sequence[SessionTally], float], None] | None = None,
    children: Children | None = None,
) -> WorkloadResult:
    """Run the sessions for ``settings.seconds`` against ``backends``, traces to
    ``out/traces``; ``on_tick(tallies, started)`` is called ``settings.refresh`` times a
    second (``started`` is ``time.monotonic()`` when the sessions started).  The proxy and
    the clients run in processes of their own, started in ``children`` (or in a
    :class:`Children` of this call) and stopped before this returns; the lag sampler runs
    here.  Raises :class:`~consistent.demo.processes.ChildFailed` when one of them fails."""
    traces = out / "traces"
    _clean(traces)
    plans = plan_sessions(settings.sessions)
    tallies = tuple(SessionTally(plan) for plan in plans)
    _setup(backends, [plan.key for plan in plans])
    with contextlib.ExitStack() as stack:
        owner = children if children is not None else stack.enter_context(Children())
        lag = telemetry_to(traces / "lag.jsonl", "consistent-demo-lag-sampler")
        stack.callback(lag.shutdown)
        proxy = owner.start(
            "proxy", serve_proxy, _proxy_config(backends, settings), traces / "proxy.jsonl"
        )
        proxy_port = proxy.receive(_START_SECONDS)
        recorder = LagRecorder(lag.emit)
        sampler = _sampler(backends, settings, recorder)
        sampler.start()
        stack.callback(sampler.stop)
        stack.enter_context(backends.disturb())
        client_settings = _client_settings(backends, settings, proxy_port, traces)
        clients, shared = _start_clients(owner, plans, client_settings)
        started = time.monotonic()

        def tick() -> None:
            owner.check()
            for index, tally in enumerate(tallies):
                shared.read(index, tally)
            if on_tick:
                on_tick(tallies, started)

        wait_until(started + settings.seconds, threading.Event(), tick, 1.0 / settings.refresh)
        for client in clients:
            client.request_stop()
        dropped = sum(client.receive(_STOP_SECONDS) for client in clients)
        elapsed = time.monotonic() - started
        for index, tally in enumerate(tallies):
            shared.read(index, tally)
        if on_tick:
            on_tick(tallies, started)
        dropped += proxy.finish(_STOP_SECONDS)
        sampler.stop()
        lag.flush()
        dropped += lag.dropped
    return WorkloadResult(
        tallies, traces, elapsed, dropped, sampler.rounds, _measured(backends, recorder)
    )
