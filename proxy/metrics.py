"""The proxy's metrics, exposed in Prometheus text format by the admin endpoint.

The hot path only increments plain integers in :class:`ProxyMetrics` and in pre-bound
:class:`Histogram` objects (a backend connection carries its server's statement-duration
histogram, so that a statement's duration is one ``bisect`` and one increment, no label lookup);
a ``prometheus_client`` collector turns them into metric families when ``/metrics`` is scraped.
Live values (sessions, backends' health, lag, connections) are read from a :class:`Snapshot`
the proxy builds at scrape time.  :data:`METRICS` declares every family: its name, type,
labels and meaning; the collector emits exactly those (plus ``prometheus_client``'s process
and platform collectors), and the README's table is :func:`metrics_markdown`.

Statements routed, the one count every statement adds to, are counted by each session in its own
:class:`~proxy.tally.RoutedTally` (a statement is one lookup by target and one integer
increment while the target's reason stays the same); the totals add up the tallies when they are
read.  Each proxy has its own
``CollectorRegistry`` (no process-global registry), so several proxies in one process (tests)
do not mix their numbers.

:class:`ProxyMetrics` is also an :class:`~consistent.observe.Observer` of the sessions'
statements: a session reports each event once, to the metrics alone or, when tracing, to a
:class:`~consistent.observe.Fanout` of the statement's span and the metrics; the metrics count
the waits.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from consistent.observe import Observer
from proxy.histogram import DURATION_BOUNDS, Histogram
from proxy.tally import RoutedTally

if TYPE_CHECKING:
    from consistent.policy import Decision, WaitOutcome

__all__ = [
    "DURATION_BOUNDS",
    "METRICS",
    "PRIMARY_ROLE",
    "REPLICA_ROLE",
    "STANDARD_METRICS",
    "BackendSample",
    "Histogram",
    "MetricSpec",
    "PoolSample",
    "ProxyMetrics",
    "RoutedTally",
    "Snapshot",
    "metrics_markdown",
]

#: The ``role`` label's values.
PRIMARY_ROLE: Final = "primary"
REPLICA_ROLE: Final = "replica"
#: The routing name of the primary (``consistent.policy.PRIMARY``): statements routed to it
#: are labelled with its address, as every backend is.
_PRIMARY_TARGET: Final = "primary"


@dataclass(frozen=True, slots=True)
class BackendSample:
    """One backend as a scrape sees it."""

    #: The routing name: ``"primary"`` or the replica's address.
    target: str
    #: ``host:port``: the ``backend`` label.
    backend: str
    #: :data:`PRIMARY_ROLE` or :data:`REPLICA_ROLE`.
    role: str
    #: The monitor's last poll succeeded.
    up: bool
    open_connections: int
    connects: int
    connect_failures: int
    #: Estimated replication lag in seconds (replicas, once estimated).
    lag_seconds: float | None = None
    #: ``@@read_only`` as the monitor last read it (replicas, once read).
    read_only: bool | None = None


@dataclass(frozen=True, slots=True)
class PoolSample:
    """One shared connection pool as a scrape sees it (:mod:`proxy.pool`)."""

    #: ``primary 127.0.0.1:3306 as app``: the ``pool`` label.
    pool: str
    borrowed: int
    idle: int
    waiting: int
    exhausted: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The proxy's live state at scrape time."""

    sessions: int = 0
    logins_in_progress: int = 0
    backends: tuple[BackendSample, ...] = ()
    pools: tuple[PoolSample, ...] = ()


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric family: what the README's table shows and the collector emits."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()

    @property
    def exposed(self) -> str:
        """The name as scraped (a counter's samples end in ``_total``)."""
        return self.name + "_total" if self.kind == "counter" else self.name


_BACKEND = ("backend", "role")
#: Every family the proxy exports, in exposition order.
METRICS: Final[tuple[MetricSpec, ...]] = (
    MetricSpec("consistent_proxy_sessions", "counter", "Client sessions opened"),
    MetricSpec("consistent_proxy_tls_sessions", "counter", "Client sessions opened over TLS"),
    MetricSpec("consistent_proxy_open_sessions", "gauge", "Client sessions open now"),
    MetricSpec("consistent_proxy_logins_in_progress", "gauge", "Client logins not finished yet"),
    MetricSpec("consistent_proxy_auth_failures", "counter", "Failed client logins"),
    MetricSpec(
        "consistent_proxy_connections_refused",
        "counter",
        "Client connections closed by a connection limit before the handshake",
    ),
    MetricSpec(
        "consistent_proxy_handshake_timeouts",
        "counter",
        "Client logins that missed the handshake deadline (connect_timeout)",
    ),
    MetricSpec(
        "consistent_proxy_client_protocol_errors",
        "counter",
        "Client connections closed for malformed packets",
    ),
    MetricSpec(
        "consistent_proxy_statements",
        "counter",
        "Statements routed, by the backend that ran them and the routing reason",
        (*_BACKEND, "reason"),
    ),
    MetricSpec(
        "consistent_proxy_statement_duration_seconds",
        "histogram",
        "Time from a statement's arrival to the end of its backend's answer (waits included)",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_statement_errors",
        "counter",
        "Statements answered with an error by a backend",
    ),
    MetricSpec(
        "consistent_proxy_intercepted_statements",
        "counter",
        "Statements answered by the proxy itself",
    ),
    MetricSpec(
        "consistent_proxy_streamed_statements",
        "counter",
        "Oversized statements streamed to a backend as they arrived",
    ),
    MetricSpec("consistent_proxy_retries", "counter", "Reads retried on another backend"),
    MetricSpec(
        "consistent_proxy_backend_lost",
        "counter",
        "Statements whose backend connection died under them",
    ),
    MetricSpec(
        "consistent_proxy_waits",
        "counter",
        "Replica waits for a session's writes, by outcome",
        ("outcome",),
    ),
    MetricSpec(
        "consistent_proxy_pipelined_waits",
        "counter",
        "Replica waits sent in one round trip with their read",
    ),
    MetricSpec(
        "consistent_proxy_primary_changes",
        "counter",
        "Times role discovery found another server to be the primary",
    ),
    MetricSpec(
        "consistent_proxy_lost_gtid_sessions",
        "counter",
        "Sessions that required GTIDs a failover lost (the new primary never had them)",
    ),
    MetricSpec(
        "consistent_proxy_split_brain",
        "gauge",
        "1 while two or more servers accept writes and replicate from none of the others",
    ),
    MetricSpec(
        "consistent_proxy_wait_duration_seconds",
        "histogram",
        "Time replica waits took, whatever their outcome",
    ),
    MetricSpec(
        "consistent_proxy_backend_up",
        "gauge",
        "1 if the proxy's monitor reached the backend at its last poll, else 0",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_replica_lag_seconds",
        "gauge",
        "Estimated replication lag of a replica (absent until estimated)",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_backend_read_only",
        "gauge",
        "1 if a replica has @@read_only on, 0 if it accepts writes (absent until read)",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_backend_open_connections",
        "gauge",
        "Connections open to the backend (sessions' and the monitor's)",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_backend_connects",
        "counter",
        "Connections to the backend opened",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_backend_connect_failures",
        "counter",
        "Connections to the backend that could not be opened",
        _BACKEND,
    ),
    MetricSpec(
        "consistent_proxy_pool_connections",
        "gauge",
        "Connections of a shared backend pool, borrowed by a session or idle",
        ("pool", "state"),
    ),
    MetricSpec(
        "consistent_proxy_pool_waiting",
        "gauge",
        "Sessions waiting for a connection of an exhausted pool",
        ("pool",),
    ),
    MetricSpec(
        "consistent_proxy_pool_exhausted",
        "counter",
        "Sessions that waited for a pool's connection past pool.wait_timeout (error 1040)",
        ("pool",),
    ),
)
#: Families that ``prometheus_client``'s process and platform collectors add (Linux).
STANDARD_METRICS: Final[tuple[str, ...]] = (
    "process_cpu_seconds",
    "process_max_fds",
    "process_open_fds",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_virtual_memory_bytes",
    "python_info",
)


def metrics_markdown() -> str:
    """The README's table of metrics."""
    lines = ["| Metric | Type | Labels | Meaning |", "|---|---|---|---|"]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "none"
        lines.append(f"| `{spec.exposed}` | {spec.kind} | {labels} | {spec.help} |")
    standard = ", ".join(f"`{name}`" for name in STANDARD_METRICS)
    lines.append(
        f"| {standard} | (standard) | | The process's CPU, memory, file descriptors and start "
        "time, and the Python version (`prometheus_client`'s process and platform collectors) |"
    )
    return "\n".join(lines)


class ProxyMetrics(Observer):
    """Counters and histograms of one proxy.  ``snapshot`` supplies the live state (sessions,
    backends) at scrape time; ``process`` adds the process and platform collectors (a proxy
    process wants them; tests that build many may leave them out)."""

    def __init__(self, *, process: bool = True) -> None:
        self.sessions_total = 0
        #: Sessions whose client upgraded to TLS.
        self.tls_sessions_total = 0
        self.auth_failures = 0
        #: Connections closed before the handshake by a limit (``max_connections``,
        #: ``max_unauthenticated``, ``max_unauthenticated_per_address``).
        self.connections_refused = 0
        #: Logins that did not finish within ``connect_timeout`` (the handshake deadline).
        self.handshake_timeouts = 0
        self.client_protocol_errors = 0
        # (target, reason) -> statements routed, but for the live tallies' runs.
        self._routed: collections.Counter[tuple[str, str]] = collections.Counter()
        self._tallies: dict[RoutedTally, None] = {}
        #: outcome -> waits run.
        self.waits: collections.Counter[str] = collections.Counter()
        self.pipelined_waits = 0
        self.wait_duration = Histogram()
        # (backend, role) -> the duration of statements that backend answered.
        self._durations: dict[tuple[str, str], Histogram] = {}
        self.statement_errors = 0
        self.backend_lost = 0
        #: Role discovery found another primary (see ``proxy.server``).
        self.primary_changes = 0
        #: Sessions that required GTIDs a failover lost.
        self.lost_gtid_sessions = 0
        #: Two or more servers accept writes and replicate from none of the others, now.
        self.split_brain = False
        self.retries = 0
        self.intercepted = 0
        #: COM_QUERY packets passed to a backend as they arrived (oversized statements).
        self.streamed_commands = 0
        self.snapshot: Callable[[], Snapshot] = Snapshot
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    def tally(self) -> RoutedTally:
        """A new session's tally of routed statements (:meth:`retire` it when it ends)."""
        tally = RoutedTally(self._routed)
        self._tallies[tally] = None
        return tally

    def retire(self, tally: RoutedTally) -> None:
        """A session ended: its tally's run goes into the totals."""
        tally.flush()
        self._tallies.pop(tally, None)

    def count_routed(self, target: str, reason: str, n: int = 1) -> None:
        """Count statements routed outside any session's tally."""
        self._routed[(target, reason)] += n

    @property
    def routed(self) -> collections.Counter[tuple[str, str]]:
        """(target: "primary" or a replica's name, reason) -> statements routed so far."""
        totals = collections.Counter(self._routed)
        for tally in self._tallies:
            for key, n in tally.pending():
                totals[key] += n
        return totals

    def statement_duration(self, backend: str, role: str) -> Histogram:
        """The statement-duration histogram of one backend (``host:port``) in one role, to be
        bound to its connections."""
        key = (backend, role)
        histogram = self._durations.get(key)
        if histogram is None:
            histogram = self._durations[key] = Histogram()
        return histogram

    def wait(
        self, decision: Decision, outcome: WaitOutcome, duration: float, *, pipelined: bool = False
    ) -> None:
        self.observe_wait(outcome.value, duration, pipelined=pipelined)

    def observe_wait(self, outcome: str, seconds: float, *, pipelined: bool) -> None:
        """One wait that ended with ``outcome`` after ``seconds``."""
        self.waits[outcome] += 1
        if pipelined:
            self.pipelined_waits += 1
        self.wait_duration.observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


def _labels(snapshot: Snapshot) -> Callable[[str], tuple[str, str]]:
    """(backend, role) of a routing target, from the backends configured now."""
    known = {s.target: (s.backend, s.role) for s in snapshot.backends}

    def of(target: str) -> tuple[str, str]:
        found = known.get(target)
        if found is not None:
            return found
        # A backend a reload removed: replicas are named by their address; the primary
        # always exists, so this is only a primary that was never configured (no address).
        return (target, REPLICA_ROLE) if target != _PRIMARY_TARGET else ("", PRIMARY_ROLE)

    return of


class _Collector(Collector):
    def __init__(self, metrics: ProxyMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._m
        snapshot = m.snapshot()
        labels_of = _labels(snapshot)
        values: dict[str, list[tuple[tuple[str, ...], float]]] = {
            "consistent_proxy_sessions": [((), m.sessions_total)],
            "consistent_proxy_tls_sessions": [((), m.tls_sessions_total)],
            "consistent_proxy_open_sessions": [((), snapshot.sessions)],
            "consistent_proxy_logins_in_progress": [((), snapshot.logins_in_progress)],
            "consistent_proxy_auth_failures": [((), m.auth_failures)],
            "consistent_proxy_connections_refused": [((), m.connections_refused)],
            "consistent_proxy_handshake_timeouts": [((), m.handshake_timeouts)],
            "consistent_proxy_client_protocol_errors": [((), m.client_protocol_errors)],
            "consistent_proxy_statements": [
                ((*labels_of(target), str(reason)), n)
                for (target, reason), n in sorted(m.routed.items())
            ],
            "consistent_proxy_statement_errors": [((), m.statement_errors)],
            "consistent_proxy_intercepted_statements": [((), m.intercepted)],
            "consistent_proxy_streamed_statements": [((), m.streamed_commands)],
            "consistent_proxy_retries": [((), m.retries)],
            "consistent_proxy_backend_lost": [((), m.backend_lost)],
            "consistent_proxy_waits": [((o,), n) for o, n in sorted(m.waits.items())],
            "consistent_proxy_pipelined_waits": [((), m.pipelined_waits)],
            "consistent_proxy_primary_changes": [((), m.primary_changes)],
            "consistent_proxy_lost_gtid_sessions": [((), m.lost_gtid_sessions)],
            "consistent_proxy_split_brain": [((), float(m.split_brain))],
        }
        backends = snapshot.backends
        values["consistent_proxy_backend_up"] = [
            ((b.backend, b.role), float(b.up)) for b in backends
        ]
        values["consistent_proxy_replica_lag_seconds"] = [
            ((b.backend, b.role), b.lag_seconds) for b in backends if b.lag_seconds is not None
        ]
        values["consistent_proxy_backend_read_only"] = [
            ((b.backend, b.role), float(b.read_only)) for b in backends if b.read_only is not None
        ]
        values["consistent_proxy_backend_open_connections"] = [
            ((b.backend, b.role), b.open_connections) for b in backends
        ]
        values["consistent_proxy_backend_connects"] = [
            ((b.backend, b.role), b.connects) for b in backends
        ]
        values["consistent_proxy_backend_connect_failures"] = [
            ((b.backend, b.role), b.connect_failures) for b in backends
        ]
        pools = snapshot.pools
        values["consistent_proxy_pool_connections"] = [
            ((p.pool, state), n)
            for p in pools
            for state, n in (("borrowed", p.borrowed), ("idle", p.idle))
        ]
        values["consistent_proxy_pool_waiting"] = [((p.pool,), p.waiting) for p in pools]
        values["consistent_proxy_pool_exhausted"] = [((p.pool,), p.exhausted) for p in pools]
        histograms: dict[str, list[tuple[tuple[str, ...], Histogram]]] = {
            "consistent_proxy_wait_duration_seconds": [((), m.wait_duration)],
            "consistent_proxy_statement_duration_seconds": sorted(m._durations.items()),
        }
        for spec in METRICS:
            if spec.kind == "histogram":
                yield _histogram(spec, histograms[spec.name])
            else:
                yield _family(spec, values[spec.name])


def _family(spec: MetricSpec, samples: list[tuple[tuple[str, ...], float]]) -> Metric:
    family: CounterMetricFamily | GaugeMetricFamily
    if spec.kind == "counter":
        family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    else:
        family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
    for labels, value in samples:
        family.add_metric(list(labels), value)
    return family


def _histogram(spec: MetricSpec, samples: list[tuple[tuple[str, ...], Histogram]]) -> Metric:
    family = HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
    for labels, histogram in samples:
        family.add_metric(list(labels), histogram.cumulative(), histogram.sum)
    return family
