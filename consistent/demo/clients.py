"""The demo's client sessions, in processes of their own, and the proxy's process.

:func:`run_clients` is the target of a client process (see :mod:`consistent.demo.processes`):
it runs some of the sessions of :mod:`consistent.demo.workload` on threads, through one path
(the DB-API wrapper straight to the servers, or PyMySQL through the proxy), and publishes
their counters in shared memory (:class:`SharedTallies`), where the parent reads them for the
live display and the totals.  :func:`serve_proxy` is the target of the proxy's process.
Both trace to OTLP-JSON files of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pymysql

import consistent.dbapi
from consistent.demo.processes import shared_counters
from consistent.demo.workload import Connection as SessionConnection
from consistent.demo.workload import SessionPlan, SessionTally, WorkloadSettings, start_sessions
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.telemetry import Telemetry, TelemetryConfig
from proxy.config import parse
from proxy.testing import ProxyThread

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = [
    "PROXY_PASSWORD",
    "PROXY_USER",
    "ClientSettings",
    "SharedTallies",
    "run_clients",
    "serve_proxy",
    "telemetry_to",
]

PROXY_USER: Final = "demo"
PROXY_PASSWORD: Final = "demo-secret"
_CONNECT_TIMEOUT: Final = 5
_READ_TIMEOUT: Final = 30
#: How often a client process publishes its sessions' counters, seconds.
_PUBLISH_EVERY: Final = 0.1
_COUNTERS: Final = ("writes", "reads", "replica_reads", "stale", "stale_on_replica", "errors")


def telemetry_to(path: Path, service: str) -> Telemetry:
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


class SharedTallies:
    """The counters of every session in memory shared between processes: a client process
    :meth:`publish` es its sessions' counters, the parent :meth:`read` s them (plain integers:
    a reader sees recent values, which is all the display and the final totals need, since
    the final values are published before a client process ends)."""

    def __init__(self, sessions: int) -> None:
        self._values = shared_counters(sessions * len(_COUNTERS))

    def publish(self, index: int, tally: SessionTally) -> None:
        """Store the counters of the session at ``index``."""
        base = index * len(_COUNTERS)
        for offset, name in enumerate(_COUNTERS):
            self._values[base + offset] = getattr(tally, name)

    def read(self, index: int, tally: SessionTally) -> None:
        """Copy the counters of the session at ``index`` into ``tally``."""
        base = index * len(_COUNTERS)
        for offset, name in enumerate(_COUNTERS):
            setattr(tally, name, self._values[base + offset])


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What a client process needs to connect its sessions (plain values: it is pickled)."""

    primary: str
    replicas: tuple[str, ...]
    user: str
    password: str
    options: tuple[tuple[str, Any], ...]
    replica_ports: Mapping[int, str]
    proxy_port: int
    wait_timeout: float
    #: Where the DB-API path's spans go.
    trace_file: Path
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)


def _connector(
    settings: ClientSettings, telemetry: Telemetry | None
) -> Callable[[SessionPlan], SessionConnection]:
    """How a session connects: the DB-API wrapper straight to the servers, or PyMySQL to the
    proxy with the level set by ``SET @@consistent_level``."""
    knowledge = ReplicaKnowledge()
    acknowledged = AcknowledgedWrites()
    options = dict(settings.options)

    def dbapi(plan: SessionPlan) -> SessionConnection:
        return consistent.dbapi.connect(
            primary=settings.primary,
            replicas=list(settings.replicas),
            level=plan.level,
            wait_timeout=settings.wait_timeout,
            user=settings.user,
            password=settings.password,
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
            port=settings.proxy_port,
            user=PROXY_USER,
            password=PROXY_PASSWORD,
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


def run_clients(
    channel: Connection,
    stop: threading.Event,
    sessions: Sequence[tuple[int, SessionPlan]],
    settings: ClientSettings,
    shared: SharedTallies,
) -> None:
    """A client process: run ``sessions`` (index in ``shared``, plan) until ``stop`` is set,
    publishing their counters; then send ``("done", dropped spans)``."""
    tallies = [(index, SessionTally(plan)) for index, plan in sessions]
    dbapi = any(plan.path == "dbapi" for _index, plan in sessions)
    telemetry = telemetry_to(settings.trace_file, "consistent-demo-dbapi") if dbapi else None
    try:
        halt = threading.Event()
        threads = start_sessions(
            [tally for _index, tally in tallies],
            _connector(settings, telemetry),
            settings.replica_ports,
            halt,
            settings.workload,
        )
        channel.send(("ready", None))
        while not stop.wait(_PUBLISH_EVERY):
            for index, tally in tallies:
                shared.publish(index, tally)
        halt.set()
        for thread in threads:
            thread.join(_READ_TIMEOUT)
        for index, tally in tallies:
            shared.publish(index, tally)
    finally:
        if telemetry is not None:
            telemetry.flush()
            telemetry.shutdown()
    channel.send(("done", telemetry.dropped if telemetry is not None else 0))


def serve_proxy(
    channel: Connection, stop: threading.Event, config: Mapping[str, Any], trace_file: Path
) -> None:
    """The proxy's process: the proxy of ``config`` (as :func:`proxy.config.parse` reads it)
    tracing to ``trace_file``; sends ``("ready", port)``, then ``("done", dropped spans)``
    once ``stop`` is set and the proxy has stopped."""
    telemetry = telemetry_to(trace_file, "consistent-demo-proxy")
    try:
        with ProxyThread(parse(dict(config)), telemetry=telemetry) as proxy:
            channel.send(("ready", proxy.port))
            stop.wait()
    finally:
        telemetry.flush()
        telemetry.shutdown()
    channel.send(("done", telemetry.dropped))
