"""The bucket bounds of the duration histograms, the proxy's (:mod:`proxy.histogram`) and the
OpenTelemetry metrics' (:mod:`consistent.telemetry.metrics`): one scale, in seconds."""

from __future__ import annotations

__all__ = ["DURATION_BOUNDS", "FINE_DURATION_BOUNDS"]

#: Upper bounds (seconds) of the wait and statement-duration buckets, 500 µs to 10 s.  Not
#: ``Final``: a compiled module reads it (see :mod:`proxy.histogram`), and compiled, a ``Final``
#: tuple of floats is inlined where it is read and the module's own name is left unset.
DURATION_BOUNDS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
#: The same with two finer buckets below, 100 µs to 10 s (the OpenTelemetry SDK's defaults
#: suit milliseconds).
FINE_DURATION_BOUNDS: tuple[float, ...] = (0.0001, 0.00025, *DURATION_BOUNDS)
