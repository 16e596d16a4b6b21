"""Measured replica lag beside the lag the topology was configured with.

On the emulator, a replica's lag comes from the lag models of the channels between it and
the primary.  :func:`model_medians` says what median lag those models give (by sampling
them: a sum of distributions, bursts and ``SOURCE_DELAY`` has no closed form);
:class:`LagRecorder` collects what the lag sampler measured (the apply lag of the last
transaction each replica applied, per sampling round); :func:`compare` sets the two side by
side and flags a replica whose measured median is more than 50% away from the model's: then
the emulated lag is not what was configured, because the machine could not keep up.
"""

from __future__ import annotations

import random
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from consistent.emulator.replication import ChannelSpec, TopologySpec
from consistent.telemetry.records import SpanRecord
from consistent.trace import LAG_APPLY_LAG_US, LAG_REPLICA

__all__ = [
    "TOLERANCE",
    "LagCheck",
    "LagRecorder",
    "compare",
    "model_medians",
    "overloaded",
]

#: The largest relative difference between measured and modelled median lag that is fine.
TOLERANCE: Final = 0.5
_SAMPLES: Final = 20_000
#: Model time over which transactions are drawn: several periods of any burst or pause.
_HORIZON: Final = 600.0


def _path(spec: TopologySpec, replica: str) -> list[ChannelSpec]:
    """The channels from a root of ``spec`` down to ``replica`` (the first source of each)."""
    path: list[ChannelSpec] = []
    name = replica
    while True:
        channel = next((c for c in spec.channels if c.replica == name), None)
        if channel is None or channel in path:
            return path[::-1]
        path.append(channel)
        name = channel.source


def _one_hop(channel: ChannelSpec, t: float, rng: random.Random) -> float:
    lag = channel.lag
    return (
        lag.network_delay(t, rng)
        + lag.transfer.sample(rng)
        + lag.buffer.sample(rng)
        + lag.apply_cost(t, 1, rng)
        + channel.delay
    )


def model_medians(spec: TopologySpec, samples: int = _SAMPLES, seed: int = 1) -> dict[str, float]:
    """Replica name → the median lag (seconds, from commit on the primary to applied on the
    replica) that the channels' models give a transaction, queueing aside."""
    rng = random.Random(seed)
    medians: dict[str, float] = {}
    for replica in spec.replicas:
        path = _path(spec, replica)
        lags = []
        for _ in range(samples):
            t = rng.uniform(0.0, _HORIZON)
            lags.append(sum(_one_hop(channel, t, rng) for channel in path))
        medians[replica] = statistics.median(lags)
    return medians


class LagRecorder:
    """Wraps the lag sampler's ``emit``: keeps each replica's measured apply lag (seconds),
    by the replica's ``host:port``, and passes every record on."""

    def __init__(self, emit: Callable[[SpanRecord], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._lags: dict[str, list[float]] = {}

    def __call__(self, record: SpanRecord) -> None:
        value = record.attributes.get(LAG_APPLY_LAG_US)
        replica = record.attributes.get(LAG_REPLICA)
        if isinstance(value, int) and replica is not None:
            with self._lock:
                self._lags.setdefault(str(replica), []).append(value / 1e6)
        self._emit(record)

    def medians(self) -> dict[str, float]:
        """``host:port`` → the median of the lags measured there."""
        with self._lock:
            return {name: statistics.median(lags) for name, lags in self._lags.items() if lags}


@dataclass(frozen=True, slots=True)
class LagCheck:
    """One replica's measured median lag beside its model's (seconds; ``measured`` is None
    when the sampler measured nothing)."""

    replica: str
    model: float
    measured: float | None

    @property
    def within(self) -> bool:
        """Whether the measured median is within :data:`TOLERANCE` of the model's."""
        if self.measured is None:
            return False
        return abs(self.measured - self.model) <= TOLERANCE * self.model

    def line(self) -> str:
        """``replica1  measured 0.034 s  model 0.035 s`` (and by how much they differ)."""
        measured = "nothing" if self.measured is None else f"{self.measured:.3f} s"
        text = f"{self.replica:<9} measured median lag {measured:>9}, model {self.model:.3f} s"
        if self.measured is not None and self.model > 0:
            text += f" ({(self.measured - self.model) / self.model:+.0%})"
        return text


def compare(models: Mapping[str, float], measured: Mapping[str, float]) -> list[LagCheck]:
    """One :class:`LagCheck` per replica of ``models`` (name → model median); ``measured``
    maps the same names to measured medians."""
    return [LagCheck(name, model, measured.get(name)) for name, model in models.items()]


def overloaded(checks: Sequence[LagCheck]) -> list[LagCheck]:
    """The replicas whose measured lag is not what their model says."""
    return [check for check in checks if not check.within]
