"""The proxy's histograms: bucket counts a statement adds to with one ``bisect`` and one
increment (compiled with the per-statement path, see :mod:`consistent.native`); the
collector in :mod:`proxy.metrics` exports them as Prometheus histograms."""

from __future__ import annotations

import bisect

from consistent.telemetry.buckets import DURATION_BOUNDS

__all__ = ["DURATION_BOUNDS", "Histogram"]


class Histogram:
    """Bucket counts of observed durations (seconds), for one label set.  Not thread-safe: one
    event loop observes it, a scrape reads it (a scrape that races an observation may see the
    count one ahead of a bucket, which the next scrape corrects)."""

    def __init__(self, bounds: tuple[float, ...] | None = None) -> None:
        self.bounds: tuple[float, ...] = bounds if bounds is not None else DURATION_BOUNDS
        #: counts[i]: observations in (bounds[i-1], bounds[i]]; the last one above them all.
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (``le``, observations at or below it), ``+Inf`` last."""
        buckets = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(total)))
        return buckets
