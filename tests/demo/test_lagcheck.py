"""The measured lag beside the model's: the medians of a model, the 50% rule, the warning."""

from __future__ import annotations

import pytest

from consistent.demo.cli import lag_report
from consistent.demo.lagcheck import LagCheck, LagRecorder, compare, model_medians, overloaded
from consistent.demo.topology import DELAY_SECONDS, emulated_spec
from consistent.emulator.replication import ChannelSpec, LagModel, ServerSpec, TopologySpec
from consistent.emulator.replication.lagmodel import Fixed, LogNormal
from consistent.telemetry.records import SpanKind, SpanRecord
from consistent.trace import LAG_APPLY_LAG_US, LAG_REPLICA


@pytest.mark.parametrize(
    ("measured", "within"),
    [
        (0.100, True),
        (0.149, True),
        (0.051, True),
        (0.151, False),
        (0.049, False),
        (0.600, False),
        (None, False),
    ],
)
def test_a_replica_is_within_the_model_when_less_than_half_away(
    measured: float | None, within: bool
) -> None:
    assert LagCheck("replica1", 0.100, measured).within is within


def test_only_the_replicas_off_their_model_are_reported() -> None:
    models = {"replica1": 0.035, "replica2": 0.014, "delayed": 2.05}
    measured = {"replica1": 0.55, "replica2": 0.015}
    checks = compare(models, measured)
    assert [c.replica for c in checks] == ["replica1", "replica2", "delayed"]
    assert [c.replica for c in overloaded(checks)] == ["replica1", "delayed"]


def test_the_report_warns_of_an_overloaded_machine_only_when_a_replica_is_off() -> None:
    models = {"replica1": 0.035, "replica2": 0.014}
    fine = lag_report(models, {"replica1": 0.04, "replica2": 0.012})
    assert len(fine) == 2
    assert "0.040 s" in fine[0]
    assert "0.035 s" in fine[0]
    assert not any("overloaded" in line for line in fine)
    starved = lag_report(models, {"replica1": 0.52, "replica2": 0.012})
    assert len(starved) == 3
    assert "overloaded" in starved[-1]
    assert "replica1" in starved[-1]
    assert "replica2" not in starved[-1]


def test_nothing_is_reported_when_the_lag_is_not_modelled() -> None:
    assert lag_report({}, {"replica1": 0.2}) == []


def test_the_model_median_of_a_chain_adds_its_hops_and_the_delay() -> None:
    spec = TopologySpec(
        (ServerSpec("a", server_id=1), ServerSpec("b", server_id=2), ServerSpec("c", server_id=3)),
        (
            ChannelSpec("a", "b", lag=LagModel(network=Fixed(0.02), apply=Fixed(0.01))),
            ChannelSpec("b", "c", lag=LagModel(network=Fixed(0.05)), delay=3),
        ),
    )
    medians = model_medians(spec, samples=50)
    assert medians["b"] == pytest.approx(0.03)
    assert medians["c"] == pytest.approx(3.08)


def test_a_log_normal_model_has_its_median() -> None:
    spec = TopologySpec(
        (ServerSpec("a", server_id=1), ServerSpec("b", server_id=2)),
        (ChannelSpec("a", "b", lag=LagModel(network=LogNormal(0.03, 0.6))),),
    )
    assert model_medians(spec)["b"] == pytest.approx(0.03, rel=0.05)


def test_the_demo_topology_models_what_its_help_says() -> None:
    medians = model_medians(emulated_spec())
    assert set(medians) == {"replica1", "replica2", "delayed"}
    assert 0.03 < medians["replica1"] < 0.045
    assert medians["replica2"] < medians["replica1"]
    assert DELAY_SECONDS < medians["delayed"] < DELAY_SECONDS + 0.1


def _sample(replica: str, lag_us: int | None) -> SpanRecord:
    attributes: dict[str, str | int] = {LAG_REPLICA: replica}
    if lag_us is not None:
        attributes[LAG_APPLY_LAG_US] = lag_us
    return SpanRecord("lag", SpanKind.INTERNAL, 1, 2, 0, 0, attributes)


def test_the_recorder_keeps_the_median_per_replica_and_passes_every_record_on() -> None:
    passed: list[SpanRecord] = []
    recorder = LagRecorder(passed.append)
    records = [
        _sample("127.0.0.1:1", 10_000),
        _sample("127.0.0.1:1", 30_000),
        _sample("127.0.0.1:1", 500_000),
        _sample("127.0.0.1:2", 2_000_000),
        _sample("127.0.0.1:3", None),
    ]
    for record in records:
        recorder(record)
    assert passed == records
    assert recorder.medians() == {"127.0.0.1:1": 0.03, "127.0.0.1:2": 2.0}
