"""``best_replica`` (the routing hot path) against the full ranking it shortcuts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.gtid import MariaPosition
from consistent.policy import ReplicaKnowledge, rank_replicas
from consistent.policy.selection import best_replica
from consistent.policy.states import covers

NAMES = ("r1:3306", "r2:3306", "r3:3306")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def position(seq: int) -> MariaPosition:
    return MariaPosition.parse(f"0-1-{seq}")


_replica = st.sampled_from(NAMES)
_event = st.one_of(
    st.tuples(st.just("executed"), _replica, st.integers(1, 20)),
    st.tuples(st.just("lag"), _replica, st.floats(0.0, 1.0)),
    st.tuples(st.just("pick"), _replica, st.just(0)),
    st.tuples(st.just("failure"), _replica, st.just(0)),
    st.tuples(st.just("success"), _replica, st.just(0)),
    st.tuples(st.just("tick"), _replica, st.floats(0.0, 3.0)),
)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_event, max_size=25),
    required=st.one_of(st.none(), st.integers(0, 20)),
    exclude=st.lists(_replica, max_size=2, unique=True),
    max_lag=st.one_of(st.none(), st.floats(0.0, 1.0)),
)
def test_best_replica_is_the_first_ranked_with_its_coverage(
    events: list[tuple[str, str, float]],
    required: int | None,
    exclude: list[str],
    max_lag: float | None,
) -> None:
    clock = Clock()
    knowledge = ReplicaKnowledge(clock=clock, ttl=2.0)
    for event, name, value in events:
        if event == "executed":
            knowledge.record_executed(name, position(int(value)))
        elif event == "lag":
            knowledge.record_lag(name, value)
        elif event == "pick":
            knowledge.record_pick(name)
        elif event == "failure":
            knowledge.record_failure(name)
        elif event == "success":
            knowledge.record_success(name)
        else:
            clock.now += value
    wanted = None if required is None else (position(required) if required else MariaPosition())
    kwargs = {"required": wanted, "exclude": tuple(exclude), "max_lag": max_lag}
    ranked = rank_replicas(knowledge, NAMES, **kwargs)  # type: ignore[arg-type]
    found = best_replica(knowledge, NAMES, **kwargs)  # type: ignore[arg-type]
    if not ranked:
        assert found is None
        return
    assert found is not None
    best, covered = found
    # The same replica, as known now (the hot path's view leaves the pick counts out).
    assert best.name == ranked[0].name
    assert best == knowledge.current(best.name)
    assert covered == (wanted is None or covers(best.executed, wanted))
