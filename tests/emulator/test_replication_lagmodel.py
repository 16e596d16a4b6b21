"""The lag model: durations and distributions as text, windows, sampling, and the clock."""

from __future__ import annotations

import asyncio
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.emulator.replication import (
    Burst,
    Exponential,
    Fixed,
    LagModel,
    LagModelError,
    LogNormal,
    Normal,
    Pause,
    RealClock,
    SkewedClock,
    Stage,
    Uniform,
    VirtualClock,
    as_lag_model,
    parse_distribution,
    parse_duration,
    run_virtual,
)
from consistent.emulator.replication.lagmodel import format_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20ms", 0.02), ("1.5s", 1.5), ("250us", 0.00025), ("2m", 120.0), ("3", 3.0), (".5s", 0.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-1s", "1 parsec", "1e3ms"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(LagModelError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50ms", Fixed(0.05)),
        ("20ms..800ms", Uniform(0.02, 0.8)),
        ("exp(100ms)", Exponential(0.1)),
        ("exp(100ms, 2s)", Exponential(0.1, 2.0)),
        ("normal(100ms,20ms)", Normal(0.1, 0.02)),
        ("lognormal(50ms,0.8)", LogNormal(0.05, 0.8)),
    ],
)
def test_parse_distribution(text: str, expected: object) -> None:
    assert parse_distribution(text) == expected


@pytest.mark.parametrize("text", ["800ms..20ms", "gamma(1s)", "normal(1s)", "lognormal(1s,x)"])
def test_parse_distribution_rejects(text: str) -> None:
    with pytest.raises(LagModelError):
        parse_distribution(text)


@given(st.integers(min_value=0, max_value=10**9))
def test_format_duration_reads_back(micros: int) -> None:
    seconds = micros / 1e6
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-9)


def test_text_of_distributions_reads_back() -> None:
    for text in (
        "50ms",
        "20ms..800ms",
        "exp(100ms,2s)",
        "normal(100ms,20ms)",
        "lognormal(50ms,0.8)",
    ):
        distribution = parse_distribution(text)
        assert parse_distribution(str(distribution)) == distribution


def test_samples_stay_in_range_and_seed_reproduces() -> None:
    rng = random.Random(1)
    uniform = Uniform(0.02, 0.8)
    values = [uniform.sample(rng) for _ in range(500)]
    assert min(values) >= 0.02
    assert max(values) <= 0.8
    assert abs(sum(values) / len(values) - uniform.mean) < 0.05
    capped = Exponential(1.0, cap=1.5)
    assert max(capped.sample(rng) for _ in range(500)) == 1.5
    assert min(Normal(0.0, 1.0).sample(rng) for _ in range(200)) == 0.0
    model = LagModel(network=uniform, seed=42)
    first = [model.network_delay(0.0, model.rng()) for _ in range(3)]
    assert first == [model.network_delay(0.0, model.rng()) for _ in range(3)]
    lognormal = LogNormal(0.05, 0.8)
    assert lognormal.mean == pytest.approx(0.05 * math.exp(0.32))


def test_pause_windows_repeat_and_chain() -> None:
    model = LagModel(
        pauses=(
            Pause(start=1.0, duration=1.0, every=10.0),
            Pause(start=2.0, duration=0.5, stage=Stage.APPLIER),
            Pause(start=0.0, duration=5.0, stage=Stage.RECEIVER),
        )
    )
    assert model.paused_until(Stage.APPLIER, 0.5) is None
    assert model.paused_until(Stage.APPLIER, 1.5) == 2.5  # back-to-back windows chain
    assert model.paused_until(Stage.APPLIER, 11.25) == 12.0
    assert model.paused_until(Stage.APPLIER, 12.0) is None
    assert model.paused_until(Stage.RECEIVER, 4.0) == 5.0


def test_bursts_add_cost_inside_their_window_only() -> None:
    rng = random.Random(0)
    model = LagModel(
        network=Fixed(0.1),
        apply=Fixed(0.2),
        apply_per_statement=Fixed(0.01),
        bursts=(
            Burst(start=5.0, duration=2.0, extra=Fixed(1.0)),
            Burst(start=0.0, duration=1.0, every=60.0, extra=Fixed(3.0), stage=Stage.APPLIER),
        ),
    )
    assert model.network_delay(4.0, rng) == pytest.approx(0.1)
    assert model.network_delay(6.0, rng) == pytest.approx(1.1)
    assert model.apply_cost(60.5, 3, rng) == pytest.approx(3.23)
    assert model.apply_cost(30.0, 0, rng) == pytest.approx(0.2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LagModel(workers=-1),
        lambda: Fixed(-0.1),
        lambda: Fixed(math.nan),
        lambda: Pause(start=0, duration=5, every=2),
        lambda: Pause(start=0, duration=1, every=0),
    ],
)
def test_invalid_models(make: object) -> None:
    with pytest.raises(LagModelError):
        make()  # type: ignore[operator]


def test_shorthands_and_description() -> None:
    assert as_lag_model("20ms..800ms").network == Uniform(0.02, 0.8)
    assert as_lag_model(0.5).network == Fixed(0.5)
    assert as_lag_model(None, workers=0).workers == 0
    assert as_lag_model(Exponential(0.1), seed=9).seed == 9
    text = LagModel(network=Uniform(0.02, 0.8), apply=Fixed(0.002), workers=0).describe()
    assert text == "network 20ms..800ms, apply 2ms, single-threaded applier"


def test_virtual_loop_jumps_to_the_next_timer() -> None:
    async def scenario(clock: VirtualClock) -> tuple[float, list[str]]:
        order: list[str] = []

        async def after(seconds: float, name: str) -> None:
            await asyncio.sleep(seconds)
            order.append(f"{name}@{clock() - clock.epoch:g}")

        await asyncio.gather(after(3600, "hour"), after(0.5, "half"), after(60, "minute"))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), timeout=30)
        return clock() - clock.epoch, order

    elapsed, order = run_virtual(scenario)
    assert order == ["half@0.5", "minute@60", "hour@3600"]
    assert elapsed == 3630


def test_clocks() -> None:
    real = RealClock()
    skewed = SkewedClock(real, -3.0)
    assert abs(real() - skewed() - 3.0) < 0.5
    idle = VirtualClock(epoch=10.0)
    assert idle() == 10.0

    async def wrong_loop() -> None:
        VirtualClock()()

    with pytest.raises(RuntimeError, match="VirtualTimeLoop"):
        asyncio.run(wrong_loop())
