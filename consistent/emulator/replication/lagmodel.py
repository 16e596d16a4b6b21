"""The lag model of one replication channel: what each pipeline stage costs, and when.

A transaction committed on the source goes through the replica's channel in four stages, each
with a cost drawn from this model (seconds; see :mod:`.channel`):

======================  ========================================================================
``network``             source commit → its first event reaches the replica (receiver starts
                        queueing, ``QUEUEING_TRANSACTION_START_QUEUE_TIMESTAMP``)
``transfer``            start → end of queueing into the relay log (``…_END_QUEUE_TIMESTAMP``)
``buffer``              the coordinator handing the transaction to a worker (START/END_BUFFER)
``apply``               a worker executing it, plus ``apply_per_statement`` × its statements
                        (START/END_APPLY); ``workers`` transactions apply at once
======================  ========================================================================

TCP keeps order: a transaction never reaches the replica before the one sent ahead of it, so a
large network sample also delays those behind it.  ``pauses`` stop a stage during time windows
(a stalled network, a replica busy with a backup) and ``bursts`` add extra cost during windows
(a lag spike); both may repeat (``every``).  Window times are seconds since the channel's model
started (the topology start).  WL#7318's ``SOURCE_DELAY`` is not part of this model: it is the
channel's SQL-level configuration (:mod:`.delay`).

Costs are random only through :class:`Distribution` objects, sampled with the channel's own
``random.Random`` seeded from :attr:`LagModel.seed`, so a seeded topology in virtual time is
reproducible.

What the model cannot express: dependencies between transactions (every transaction may
apply in parallel with any other; there is no writeset or logical-clock scheduling, so hot
rows never serialise workers), costs that depend on a transaction's size in bytes or rows
(only its number of statements), bandwidth limits and congestion shared between channels,
correlated lag across channels (each channel samples on its own), clock drift (only a fixed
per-server skew), lost connections and reconnects, and source-side costs (group commit,
binlog fsync): the source commits instantly and the dump thread sends at once.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from consistent.errors import InterfaceError

__all__ = [
    "Burst",
    "Distribution",
    "Exponential",
    "Fixed",
    "LagModel",
    "LagModelError",
    "LogNormal",
    "Normal",
    "Pause",
    "Stage",
    "Uniform",
    "format_duration",
    "parse_distribution",
    "parse_duration",
]


class LagModelError(InterfaceError):
    """A lag model or one of its durations is invalid (our caller's mistake, not the server's)."""


def _check(value: float, what: str) -> None:
    if not math.isfinite(value) or value < 0:
        raise LagModelError(f"{what} must be a finite number of seconds >= 0, not {value!r}")


@dataclass(frozen=True)
class Fixed:
    """Always ``seconds``."""

    seconds: float = 0.0

    def __post_init__(self) -> None:
        _check(self.seconds, "a fixed duration")

    def sample(self, rng: random.Random) -> float:
        return self.seconds

    @property
    def mean(self) -> float:
        return self.seconds

    def __str__(self) -> str:
        return format_duration(self.seconds)


@dataclass(frozen=True)
class Uniform:
    """Uniform between ``low`` and ``high`` (``--lag 20ms..800ms``)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _check(self.low, "low")
        _check(self.high, "high")
        if self.high < self.low:
            raise LagModelError(f"empty range {self.low}..{self.high}")

    def sample(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def __str__(self) -> str:
        return f"{format_duration(self.low)}..{format_duration(self.high)}"


@dataclass(frozen=True)
class Exponential:
    """Exponential with mean ``mean``, cut at ``cap`` when given (``exp(100ms)``)."""

    mean: float
    cap: float | None = None

    def __post_init__(self) -> None:
        _check(self.mean, "mean")
        if self.cap is not None:
            _check(self.cap, "cap")

    def sample(self, rng: random.Random) -> float:
        value = rng.expovariate(1.0 / self.mean) if self.mean > 0 else 0.0
        return value if self.cap is None else min(value, self.cap)

    def __str__(self) -> str:
        cap = "" if self.cap is None else f",{format_duration(self.cap)}"
        return f"exp({format_duration(self.mean)}{cap})"


@dataclass(frozen=True)
class Normal:
    """Normal with ``mean`` and ``stddev``, never below 0 (``normal(100ms,20ms)``)."""

    mu: float
    stddev: float

    def __post_init__(self) -> None:
        _check(self.mu, "mean")
        _check(self.stddev, "stddev")

    def sample(self, rng: random.Random) -> float:
        return max(0.0, rng.gauss(self.mu, self.stddev))

    @property
    def mean(self) -> float:
        return self.mu

    def __str__(self) -> str:
        return f"normal({format_duration(self.mu)},{format_duration(self.stddev)})"


@dataclass(frozen=True)
class LogNormal:
    """Log-normal with ``median`` and shape ``sigma``: mostly small, with a long tail
    (``lognormal(50ms,0.8)``)."""

    median: float
    sigma: float

    def __post_init__(self) -> None:
        _check(self.median, "median")
        _check(self.sigma, "sigma")

    def sample(self, rng: random.Random) -> float:
        if self.median == 0:
            return 0.0
        return rng.lognormvariate(math.log(self.median), self.sigma)

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)

    def __str__(self) -> str:
        return f"lognormal({format_duration(self.median)},{self.sigma:g})"


Distribution = Fixed | Uniform | Exponential | Normal | LogNormal
"""A duration that may vary per transaction."""

ZERO: Final = Fixed(0.0)


class Stage(Enum):
    """The pipeline stage a :class:`Pause` stops or a :class:`Burst` slows down."""

    RECEIVER = "receiver"
    """The network and the receiver (I/O) thread: nothing reaches the relay log."""
    APPLIER = "applier"
    """The coordinator and its workers (SQL thread): the relay log grows, nothing applies."""


@dataclass(frozen=True)
class _Window:
    start: float
    duration: float
    every: float | None = None

    def __post_init__(self) -> None:
        _check(self.start, "start")
        _check(self.duration, "duration")
        if self.every is not None and (not math.isfinite(self.every) or self.every <= 0):
            raise LagModelError(f"every must be > 0 seconds, not {self.every!r}")
        if self.every is not None and self.every < self.duration:
            raise LagModelError("a repeating window must not be longer than its period")

    def end_if_inside(self, t: float) -> float | None:
        """The end of the window that contains ``t``, or None."""
        if t < self.start:
            return None
        k = 0 if self.every is None else math.floor((t - self.start) / self.every)
        begin = self.start + k * (self.every or 0.0)
        end = begin + self.duration
        return end if begin <= t < end else None


@dataclass(frozen=True)
class Pause(_Window):
    """``stage`` stops for ``duration`` seconds from ``start`` (and again every ``every``)."""

    stage: Stage = Stage.APPLIER


@dataclass(frozen=True)
class Burst(_Window):
    """During the window, each transaction entering ``stage`` costs ``extra`` more."""

    extra: Distribution = ZERO
    stage: Stage = Stage.RECEIVER


@dataclass(frozen=True)
class LagModel:
    """Costs of one channel's stages; see the module docstring.

    ``workers`` is ``replica_parallel_workers``: 0 is the single-threaded applier (the SQL
    thread applies, no coordinator row in performance_schema), N >= 1 a coordinator and N
    workers.  ``preserve_commit_order`` (``replica_preserve_commit_order``) makes workers
    commit in relay-log order even when a later transaction finishes applying first.
    """

    network: Distribution = ZERO
    transfer: Distribution = ZERO
    buffer: Distribution = ZERO
    apply: Distribution = ZERO
    apply_per_statement: Distribution = ZERO
    workers: int = 4
    preserve_commit_order: bool = True
    pauses: tuple[Pause, ...] = field(default=())
    bursts: tuple[Burst, ...] = field(default=())
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.workers <= 1024:
            raise LagModelError(f"workers must be 0..1024, not {self.workers}")

    def rng(self) -> random.Random:
        """A fresh random source for one channel (seeded when :attr:`seed` is set)."""
        return random.Random(self.seed)

    def extra(self, stage: Stage, t: float, rng: random.Random) -> float:
        """Extra cost of a transaction entering ``stage`` at model time ``t`` (bursts)."""
        total = 0.0
        for burst in self.bursts:
            if burst.stage is stage and burst.end_if_inside(t) is not None:
                total += burst.extra.sample(rng)
        return total

    def paused_until(self, stage: Stage, t: float) -> float | None:
        """The model time when ``stage`` may run again, or None when it is not paused at
        ``t``; overlapping and back-to-back pauses are chained."""
        end: float | None = None
        probe = t
        while True:
            found = [
                e
                for p in self.pauses
                if p.stage is stage and (e := p.end_if_inside(probe)) is not None
            ]
            if not found:
                return end
            end = probe = max(found)

    def network_delay(self, t: float, rng: random.Random) -> float:
        """Source commit to first byte at the replica, for a transaction sent at ``t``."""
        return self.network.sample(rng) + self.extra(Stage.RECEIVER, t, rng)

    def apply_cost(self, t: float, statements: int, rng: random.Random) -> float:
        """How long a worker spends executing a transaction of ``statements`` statements."""
        cost = self.apply.sample(rng) + self.extra(Stage.APPLIER, t, rng)
        for _ in range(statements):
            cost += self.apply_per_statement.sample(rng)
        return cost

    def describe(self) -> str:
        """One line for humans (``consistent emulate`` prints it)."""
        parts = [f"network {self.network}"]
        for name in ("transfer", "buffer", "apply", "apply_per_statement"):
            value = getattr(self, name)
            if value != ZERO:
                parts.append(f"{name.replace('_', ' ')} {value}")
        parts.append(f"{self.workers} workers" if self.workers else "single-threaded applier")
        if self.pauses:
            parts.append(f"{len(self.pauses)} pause(s)")
        if self.bursts:
            parts.append(f"{len(self.bursts)} burst(s)")
        return ", ".join(parts)


# ----- text forms ------------------------------------------------------------------------------

_UNITS: Final = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION: Final = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|µs|ms|s|min|m|h)?\s*")
_CALL: Final = re.compile(r"\s*([a-z]+)\s*\((.*)\)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """``"20ms"``, ``"1.5s"``, ``"250us"``, ``"2m"`` or a bare number of seconds."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise LagModelError(f"not a duration: {text!r} (try 20ms, 1.5s, 2m)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def format_duration(seconds: float) -> str:
    """The shortest of ``"800ms"``, ``"2s"``, ``"250us"`` that reads back exactly."""
    if seconds == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        value = seconds / scale
        if value >= 1 and abs(value - round(value, 3)) < 1e-9:
            return f"{round(value, 3):.3f}".rstrip("0").rstrip(".") + unit
    return f"{seconds:.9f}".rstrip("0") + "s"


def parse_distribution(text: str) -> Distribution:
    """``20ms`` (fixed), ``20ms..800ms`` (uniform), ``exp(100ms)``, ``exp(100ms,2s)``
    (capped), ``normal(100ms,20ms)``, ``lognormal(50ms,0.8)``."""
    if ".." in text:
        low, _, high = text.partition("..")
        return Uniform(parse_duration(low), parse_duration(high))
    call = _CALL.fullmatch(text)
    if call is None:
        return Fixed(parse_duration(text))
    name = call.group(1).lower()
    args = [a.strip() for a in call.group(2).split(",")]
    if name in ("exp", "exponential") and len(args) in (1, 2):
        cap = parse_duration(args[1]) if len(args) == 2 else None
        return Exponential(parse_duration(args[0]), cap)
    if name == "normal" and len(args) == 2:
        return Normal(parse_duration(args[0]), parse_duration(args[1]))
    if name == "lognormal" and len(args) == 2:
        try:
            sigma = float(args[1])
        except ValueError:
            raise LagModelError(f"lognormal shape must be a number: {args[1]!r}") from None
        return LogNormal(parse_duration(args[0]), sigma)
    raise LagModelError(f"unknown distribution {text!r}")
