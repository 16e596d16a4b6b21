"""Statements routed, counted by each session (compiled with the per-statement path, see
:mod:`consistent.native`); :class:`proxy.metrics.ProxyMetrics` adds the tallies up when the
totals are read."""

from __future__ import annotations

import collections

__all__ = ["RoutedTally"]


class _Run:
    """The current run of one target: its reason and how many statements it counted."""

    __slots__ = ("count", "reason")

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.count = 1


class RoutedTally:
    """One session's routed statements not yet added to its metrics' totals: per target the
    session went to, the current run of one reason.

    The session's hot path calls :meth:`add` for every statement: one dictionary lookup by
    target (a string whose hash is cached) and one integer increment while the target's reason
    stays the same, whichever targets the statements alternate between (reads spread over
    replicas).  A new reason on a target moves that target's run into the totals (whose keys,
    with enum reasons, are slower to hash) and starts another."""

    __slots__ = ("_into", "_runs")

    def __init__(self, into: collections.Counter[tuple[str, str]]) -> None:
        self._into = into
        self._runs: dict[str, _Run] = {}

    def add(self, target: str, reason: str) -> None:
        """Count one statement routed to ``target`` for ``reason``."""
        run = self._runs.get(target)
        if run is not None and run.reason is reason:
            run.count += 1
            return
        if run is not None:
            self._into[(target, run.reason)] += run.count
        self._runs[target] = _Run(reason)

    def flush(self) -> None:
        """Add every run to the totals."""
        into = self._into
        for key, n in self.pending():
            into[key] += n
        self._runs.clear()

    def pending(self) -> list[tuple[tuple[str, str], int]]:
        """The runs not yet in the totals."""
        return [((target, run.reason), run.count) for target, run in self._runs.items()]
