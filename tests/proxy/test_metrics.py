"""Routed-statement counts: each session tallies its runs locally, and the totals (``routed``,
``/metrics``) add the live tallies to what ended sessions handed over."""

from __future__ import annotations

import collections

from hypothesis import given
from hypothesis import strategies as st

from proxy.metrics import ProxyMetrics, RoutedTally

KEYS = [
    ("primary", "no_replicas"),
    ("primary", "write"),
    ("10.0.0.2:3306", "known_covered"),
    ("10.0.0.2:3306", "nothing_required"),
    ("10.0.0.3:3306", "known_covered"),
]


def count(tally: RoutedTally, key: tuple[str, str]) -> None:
    """What a session does per statement (``SessionBase._account``)."""
    target, reason = key
    if reason is tally.reason and target is tally.target:
        tally.count += 1
    else:
        tally.switch(target, reason)


@given(
    events=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(KEYS)), max_size=80),
    retired=st.sets(st.integers(0, 2)),
)
def test_totals_are_every_statement_counted_live_or_retired(
    events: list[tuple[int, tuple[str, str]]], retired: set[int]
) -> None:
    metrics = ProxyMetrics()
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


def test_the_exposition_shows_live_counts() -> None:
    metrics = ProxyMetrics()
    tally = metrics.tally()
    tally.switch("primary", "no_replicas")
    tally.count += 2  # two more of the same run
    text = metrics.render()
    assert b'consistent_proxy_statements_total{reason="no_replicas",target="primary"} 3.0' in text
