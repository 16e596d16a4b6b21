"""The proxy's metrics, exposed in Prometheus text format by the admin endpoint.

The hot path only increments plain integers in :class:`ProxyMetrics`; a ``prometheus_client``
collector turns them into metric families when ``/metrics`` is scraped.  Statements routed, the
one count every statement adds to, are counted by each session in its own
:class:`RoutedTally` (a run of the same target and reason is one integer increment, no
dictionary); the totals add up the tallies when they are read.  Each proxy has its own
``CollectorRegistry`` (no process-global registry), so several proxies in one process (tests)
do not mix their numbers.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ProxyMetrics", "RoutedTally"]

_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)


class RoutedTally:
    """One session's routed statements not yet added to its metrics' totals: the current run
    of one (target, reason), counted in ``count``, and the runs of the other targets the
    session went to, parked.

    The session's hot path does ``if d.reason is tally.reason and d.target is tally.target:
    tally.count += 1`` and calls :meth:`switch` otherwise.  Reads that alternate between
    replicas switch at every statement: a switch parks the current run under its target and
    resumes the parked run of the new one, which costs no more than that alternation (the
    totals' keys, whose reasons are enums, are slower to hash)."""

    __slots__ = ("_into", "_parked", "count", "reason", "target")

    def __init__(self, into: collections.Counter[tuple[str, str]]) -> None:
        self._into = into
        #: target -> (reason, count) of its last run; never the current run's target.
        self._parked: dict[str, tuple[str, int]] = {}
        self.target: str | None = None
        self.reason: str | None = None
        self.count = 0

    def switch(self, target: str, reason: str) -> None:
        """Count one statement for a (target, reason) other than the current run's."""
        parked = self._parked
        current = self.target
        if current is not None and self.reason is not None and self.count:
            parked[current] = (self.reason, self.count)
        count = 1
        run = parked.pop(target, None)
        if run is not None:
            if run[0] is reason:
                count += run[1]
            else:
                self._into[(target, run[0])] += run[1]
        self.target = target
        self.reason = reason
        self.count = count

    def flush(self) -> None:
        """Add the current run and the parked ones to the totals."""
        into = self._into
        for key, n in self.pending():
            into[key] += n
        self._parked.clear()
        self.count = 0

    def pending(self) -> list[tuple[tuple[str, str], int]]:
        """The runs not yet in the totals."""
        runs = [((target, reason), n) for target, (reason, n) in self._parked.items()]
        if self.count and self.target is not None and self.reason is not None:
            runs.append(((self.target, self.reason), self.count))
        return runs


class ProxyMetrics:
    """Counters of one proxy.  ``gauges`` supplies live values (sessions, connections) at
    scrape time."""

    def __init__(self) -> None:
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
        self.wait_seconds_sum = 0.0
        self.wait_buckets = [0] * (len(_WAIT_BUCKETS) + 1)
        self.statement_errors = 0
        self.backend_lost = 0
        self.retries = 0
        self.intercepted = 0
        #: COM_QUERY packets passed to a backend as they arrived (oversized statements).
        self.streamed_commands = 0
        self.gauges: Callable[[], dict[str, float]] = dict
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

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

    def observe_wait(self, outcome: str, seconds: float, *, pipelined: bool) -> None:
        self.waits[outcome] += 1
        if pipelined:
            self.pipelined_waits += 1
        self.wait_seconds_sum += seconds
        for i, bound in enumerate(_WAIT_BUCKETS):
            if seconds <= bound:
                self.wait_buckets[i] += 1
                return
        self.wait_buckets[-1] += 1

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


class _Collector(Collector):
    def __init__(self, metrics: ProxyMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._m
        yield _counter("consistent_proxy_sessions", "Client sessions opened", m.sessions_total)
        yield _counter(
            "consistent_proxy_tls_sessions", "Client sessions over TLS", m.tls_sessions_total
        )
        yield _counter("consistent_proxy_auth_failures", "Failed client logins", m.auth_failures)
        yield _counter(
            "consistent_proxy_connections_refused",
            "Connections refused by a connection limit before the handshake",
            m.connections_refused,
        )
        yield _counter(
            "consistent_proxy_handshake_timeouts",
            "Logins that missed the handshake deadline (connect_timeout)",
            m.handshake_timeouts,
        )
        yield _counter(
            "consistent_proxy_client_protocol_errors",
            "Clients closed for malformed packets",
            m.client_protocol_errors,
        )
        routed = CounterMetricFamily(
            "consistent_proxy_statements",
            "Statements routed, by target and reason",
            labels=["target", "reason"],
        )
        for (target, reason), count in sorted(m.routed.items()):
            routed.add_metric([target, str(reason)], count)
        yield routed
        waits = CounterMetricFamily(
            "consistent_proxy_waits", "Replica waits, by outcome", labels=["outcome"]
        )
        for outcome, count in sorted(m.waits.items()):
            waits.add_metric([outcome], count)
        yield waits
        yield _counter(
            "consistent_proxy_pipelined_waits",
            "Waits sent in one round trip with their read",
            m.pipelined_waits,
        )
        yield _counter(
            "consistent_proxy_wait_seconds", "Total time spent in waits", m.wait_seconds_sum
        )
        yield _counter(
            "consistent_proxy_statement_errors", "Statements answered with ERR", m.statement_errors
        )
        yield _counter(
            "consistent_proxy_backend_lost",
            "Statements whose backend connection died",
            m.backend_lost,
        )
        yield _counter("consistent_proxy_retries", "Reads retried on another server", m.retries)
        yield _counter(
            "consistent_proxy_intercepted", "Statements answered by the proxy", m.intercepted
        )
        yield _counter(
            "consistent_proxy_streamed_statements",
            "Oversized statements streamed to a backend as they arrived",
            m.streamed_commands,
        )
        gauges = GaugeMetricFamily("consistent_proxy_state", "Live proxy state", labels=["name"])
        for name, value in sorted(m.gauges().items()):
            gauges.add_metric([name], value)
        yield gauges


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)
