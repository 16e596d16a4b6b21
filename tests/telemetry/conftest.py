"""Shared pieces of the telemetry tests: an in-memory pipeline and a driver that routes a
statement through the real policy making exactly the span calls the wrapper makes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import pytest

from consistent.classify import classify
from consistent.gtid import GtidState
from consistent.policy import (
    PRIMARY,
    Action,
    Decision,
    Level,
    OnTimeout,
    PolicyConfig,
    ReplicaKnowledge,
    SessionPolicy,
    WaitOutcome,
)
from consistent.telemetry import MemoryExporter, SpanRecord, StatementTracer, Telemetry
from consistent.telemetry.config import TelemetryConfig

R1 = "10.0.0.2:3306"
R2 = "10.0.0.3:3307"
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


class Clock:
    """Monotonic seconds the test moves by hand (the policy's knowledge reads it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    """A policy session with its tracer, recording into memory."""

    telemetry: Telemetry
    memory: MemoryExporter
    policy: SessionPolicy
    knowledge: ReplicaKnowledge
    tracer: StatementTracer
    clock: Clock
    decisions: list[Decision] = field(default_factory=list)

    def run(
        self,
        sql: str,
        *,
        waits: Mapping[str, WaitOutcome] | WaitOutcome = WaitOutcome.REACHED,
        wait_seconds: float = 0.02,
        primary_state: GtidState | None = None,
        produced: GtidState | None = None,
    ) -> Decision:
        """Route and "run" ``sql`` as ``consistent.dbapi`` does, with the span calls the
        wrapper makes: ``decision`` for every step, ``wait`` after each wait, ``produced``
        for the primary's GTIDs."""
        policy = self.policy
        with self.tracer.statement(sql) as span:
            decision = policy.route(classify(sql), sql)
            while True:
                span.decision(decision)
                if decision.action is Action.FETCH_PRIMARY_STATE:
                    assert primary_state is not None
                    decision = policy.on_primary_state(decision, primary_state)
                elif decision.action is Action.WAIT:
                    outcome = (
                        waits.get(decision.target, WaitOutcome.REACHED)
                        if isinstance(waits, Mapping)
                        else waits
                    )
                    span.wait(decision, outcome, wait_seconds)
                    decision = policy.on_wait(decision, outcome, duration=wait_seconds)
                else:
                    break
            self.decisions.append(decision)
            if decision.action is Action.FAIL:
                assert decision.error is not None
                raise decision.error
            if decision.action is Action.EXECUTE:
                if decision.prelude:
                    policy.on_prelude_done(decision)
                if produced is not None and decision.target == PRIMARY:
                    span.produced(produced)
                    policy.observe_gtids(PRIMARY, produced)
                policy.on_success(decision)
        return decision

    def records(self) -> list[SpanRecord]:
        assert self.telemetry.flush(10)
        return self.memory.records

    def last(self) -> SpanRecord:
        return self.records()[-1]


HarnessFactory = Callable[..., Harness]


@pytest.fixture
def harness() -> Iterator[HarnessFactory]:
    """``harness(level=…, on_timeout=…, replicas=…, config=…)`` builds a :class:`Harness`."""
    made: list[Telemetry] = []

    def build(
        *,
        level: str = "read_own_writes",
        on_timeout: str = "primary",
        replicas: tuple[str, ...] = (R1, R2),
        flavor: str = "mysql",
        config: TelemetryConfig | None = None,
        meter_provider: object = None,
    ) -> Harness:
        memory = MemoryExporter()
        telemetry = Telemetry(
            config or TelemetryConfig(),
            exporters=[memory],
            meter_provider=meter_provider,  # type: ignore[arg-type]
        )
        made.append(telemetry)
        clock = Clock()
        knowledge = ReplicaKnowledge(clock=clock)
        policy = SessionPolicy(
            replicas=replicas,
            knowledge=knowledge,
            flavor=flavor,  # type: ignore[arg-type]
            config=PolicyConfig(level=Level(level), on_timeout=OnTimeout(on_timeout)),
        )
        tracer = telemetry.session(system=flavor, addresses={PRIMARY: ("db-primary.example", 3306)})
        return Harness(telemetry, memory, policy, knowledge, tracer, clock)

    yield build
    for telemetry in made:
        telemetry.shutdown(5)
