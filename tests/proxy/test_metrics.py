"""Routed-statement counts: each session tallies its runs locally, and the totals (``routed``,
``/metrics``) add the live tallies to what ended sessions handed over."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from proxy.metrics import BackendSample, ProxyMetrics, RoutedTally, Snapshot

KEYS = [
    ("primary", "no_replicas"),
    ("primary", "write"),
    ("10.0.0.2:3306", "known_covered"),
    ("10.0.0.2:3306", "nothing_required"),
    ("10.0.0.3:3306", "known_covered"),
]


def count(tally: RoutedTally, key: tuple[str, str]) -> None:
    """What a session does per statement (``Router._account``)."""
    tally.add(*key)


@given(
    events=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(KEYS)), max_size=80),
    retired=st.sets(st.integers(0, 2)),
)
def test_totals_are_every_statement_counted_live_or_retired(
    events: list[tuple[int, tuple[str, str]]], retired: set[int]
) -> None:
    metrics = ProxyMetrics(process=False)
    tallies = [metrics.tally() for _ in range(3)]
    expected: collections.Counter[tuple[str, str]] = collections.Counter()
    for index, key in events:
        count(tallies[index], key)
        expected[key] += 1
        assert metrics.routed == expected
    for index in retired:
        metrics.retire(tallies[index])
    assert metrics.routed == expected
    metrics.count_routed("primary", "write", 2)
    expected[("primary", "write")] += 2
    assert metrics.routed == expected


def test_the_exposition_shows_live_counts_labelled_by_address_and_role() -> None:
    metrics = ProxyMetrics(process=False)
    metrics.snapshot = lambda: Snapshot(
        backends=(
            BackendSample("primary", "10.0.0.1:3306", "primary", True, 1, 1, 0),
            BackendSample("10.0.0.2:3306", "10.0.0.2:3306", "replica", False, 0, 1, 3, 0.25),
        )
    )
    tally = metrics.tally()
    for _ in range(3):
        tally.add("primary", "no_replicas")
    tally.add("10.0.0.2:3306", "known_covered")
    text = metrics.render().decode()
    assert (
        'consistent_proxy_statements_total{backend="10.0.0.1:3306",reason="no_replicas",'
        'role="primary"} 3.0'
    ) in text
    assert (
        'consistent_proxy_statements_total{backend="10.0.0.2:3306",reason="known_covered",'
        'role="replica"} 1.0'
    ) in text
    assert 'consistent_proxy_backend_up{backend="10.0.0.2:3306",role="replica"} 0.0' in text
    assert 'consistent_proxy_replica_lag_seconds{backend="10.0.0.2:3306",role="replica"} 0.25' in (
        text
    )
    assert 'consistent_proxy_backend_connect_failures_total{backend="10.0.0.2:3306"' in text
    assert "process_" not in text


def test_histograms_count_each_observation_in_its_bucket_and_above() -> None:
    metrics = ProxyMetrics(process=False)
    primary = metrics.statement_duration("10.0.0.1:3306", "primary")
    assert metrics.statement_duration("10.0.0.1:3306", "primary") is primary
    for seconds in (0.0004, 0.002, 0.002, 7.0, 30.0):
        primary.observe(seconds)
    metrics.observe_wait("reached", 0.01, pipelined=True)
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    buckets = {
        s.labels["le"]: s.value
        for s in families["consistent_proxy_statement_duration_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert buckets["0.0005"] == 1
    assert buckets["0.0025"] == 3
    assert buckets["5.0"] == 3
    assert buckets["10.0"] == 4
    assert buckets["+Inf"] == 5
    (total,) = [
        s.value
        for s in families["consistent_proxy_statement_duration_seconds"].samples
        if s.name.endswith("_sum")
    ]
    assert total == pytest.approx(37.0044)
    wait = {s.name: s.value for s in families["consistent_proxy_wait_duration_seconds"].samples}
    assert wait["consistent_proxy_wait_duration_seconds_count"] == 1
    waits = families["consistent_proxy_waits"].samples
    assert [(s.labels["outcome"], s.value) for s in waits] == [("reached", 1.0)]
    assert families["consistent_proxy_pipelined_waits"].samples[0].value == 1
