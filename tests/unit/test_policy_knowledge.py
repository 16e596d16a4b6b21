"""Process-wide replica knowledge and the ranking of replicas."""

from __future__ import annotations

import threading

import pytest

from consistent.gtid import GtidSet, MariaPosition
from consistent.policy import ReplicaKnowledge, rank_replicas
from consistent.policy.knowledge import KnownSource, Learned

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
R1, R2, R3 = "r1:3306", "r2:3306", "r3:3306"


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def gs(text: str) -> GtidSet:
    return GtidSet.parse(text)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def knowledge(clock: Clock) -> ReplicaKnowledge:
    return ReplicaKnowledge(clock=clock, cooldown=2.0, max_cooldown=10.0, ttl=2.0)


def test_a_replica_never_seen_is_healthy_and_unknown(knowledge: ReplicaKnowledge) -> None:
    view = knowledge.view(R1)
    assert view.name == R1
    assert view.executed is None
    assert view.lag is None
    assert knowledge.healthy(R1)


def test_executed_state_only_grows(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_executed(R1, gs(f"{A}:1-5"))
    knowledge.record_executed(R1, gs(f"{A}:3"))
    knowledge.record_executed(R1, gs(f"{A}:8"))
    assert knowledge.view(R1).executed == gs(f"{A}:1-5:8")


class WallClock:
    """Nanoseconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000_000

    def __call__(self) -> int:
        return self.now


def test_what_is_known_says_when_it_was_learnt_and_from_what(clock: Clock) -> None:
    """The time is that of the last growth: what did not grow keeps its (earlier) time, so
    the whole known state was known by then; a failure forgets both."""
    wall = WallClock()
    knowledge = ReplicaKnowledge(clock=clock, wall_clock=wall)
    assert knowledge.view(R1).learned is None
    knowledge.record_executed(R1, gs(f"{A}:1-5"))
    first = wall.now
    assert knowledge.view(R1).learned == Learned(first, KnownSource.TRACKED)
    wall.now += 1000
    knowledge.record_executed(R1, gs(f"{A}:1-3"))  # nothing new
    knowledge.record_wait(R1, gs(f"{A}:2"), reached=True, duration=0.1, timeout=1.0)
    knowledge.record_poll(R1, gs(f"{A}:1-4"), started=clock.now)
    assert knowledge.view(R1).learned == Learned(first, KnownSource.TRACKED)
    wall.now += 1000
    knowledge.record_wait(R1, gs(f"{A}:6"), reached=True, duration=0.1, timeout=1.0)
    assert knowledge.view(R1).learned == Learned(first + 1000 * 2, KnownSource.WAIT)
    knowledge.record_wait(R1, gs(f"{A}:9"), reached=False, duration=1.0, timeout=1.0)
    assert knowledge.view(R1).learned == Learned(first + 1000 * 2, KnownSource.WAIT)
    wall.now += 1000
    knowledge.record_poll(R1, gs(f"{A}:1-7"), started=clock.now)
    assert knowledge.view(R1).learned == Learned(first + 1000 * 3, KnownSource.MONITOR)
    knowledge.record_failure(R1)
    view = knowledge.view(R1)
    assert (view.executed, view.learned) == (None, None)
    knowledge.record_poll(R1, gs(f"{A}:1-7"), started=clock.now + 1)
    assert knowledge.view(R1).learned == Learned(first + 1000 * 3, KnownSource.MONITOR)
    knowledge.record_failure(R1)
    wall.now += 1000
    knowledge.record_poll(R1, gs(f"{A}:1-7"), started=clock.now + 1)
    assert knowledge.view(R1).learned == Learned(first + 1000 * 4, KnownSource.MONITOR)


def test_a_reached_wait_teaches_the_waited_set_and_the_lag(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_executed(R1, gs(f"{A}:1-3"))
    knowledge.record_wait(R1, gs(f"{A}:4-6"), reached=True, duration=0.2, timeout=1.0)
    view = knowledge.view(R1)
    assert view.executed == gs(f"{A}:1-6")
    assert view.lag == pytest.approx(0.2)


def test_a_timed_out_wait_teaches_no_state_and_a_lag_of_at_least_the_timeout(
    knowledge: ReplicaKnowledge,
) -> None:
    knowledge.record_wait(R1, gs(f"{A}:1"), reached=True, duration=0.01, timeout=1.0)
    knowledge.record_wait(R1, gs(f"{A}:2"), reached=False, duration=1.0, timeout=1.0)
    view = knowledge.view(R1)
    assert view.executed == gs(f"{A}:1")
    assert view.lag is not None
    assert view.lag >= 1.0


def test_lag_estimate_is_a_moving_average(knowledge: ReplicaKnowledge) -> None:
    for _ in range(3):
        knowledge.record_wait(R1, gs(f"{A}:1"), reached=True, duration=0.5, timeout=1.0)
    knowledge.record_wait(R1, gs(f"{A}:1"), reached=True, duration=0.0, timeout=1.0)
    lag = knowledge.view(R1).lag
    assert lag is not None
    assert 0.0 < lag < 0.5


def test_a_monitor_lag_replaces_the_estimate(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_wait(R1, gs(f"{A}:1"), reached=False, duration=1.0, timeout=1.0)
    knowledge.record_lag(R1, 0.05)
    assert knowledge.view(R1).lag == 0.05


def test_a_failure_cools_the_replica_down_and_forgets_its_state(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_executed(R1, gs(f"{A}:1-9"))
    knowledge.record_failure(R1)
    view = knowledge.view(R1)
    assert view.executed is None
    assert view.failures == 1
    assert not knowledge.healthy(R1)
    clock.now += 1.99
    assert not knowledge.healthy(R1)
    clock.now += 0.02
    assert knowledge.healthy(R1)


def test_cool_down_doubles_per_consecutive_failure_up_to_a_cap(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    pauses = []
    for _ in range(5):
        knowledge.record_failure(R1)
        view = knowledge.view(R1)
        assert view.unhealthy_until is not None
        pauses.append(view.unhealthy_until - clock.now)
    assert pauses == [2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_success_clears_the_failure_record(knowledge: ReplicaKnowledge, clock: Clock) -> None:
    knowledge.record_failure(R1)
    knowledge.record_failure(R1)
    knowledge.record_success(R1)
    view = knowledge.view(R1)
    assert view.failures == 0
    assert knowledge.healthy(R1)
    knowledge.record_failure(R1)
    assert knowledge.view(R1).unhealthy_until == clock.now + 2.0


def test_forget_drops_everything(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_executed(R1, gs(f"{A}:1"))
    knowledge.record_pick(R1)
    knowledge.forget(R1)
    assert knowledge.view(R1).executed is None
    assert knowledge.view(R1).picks == 0


def test_knowledge_is_safe_to_share_between_threads(knowledge: ReplicaKnowledge) -> None:
    def learn(first: int) -> None:
        for gno in range(first, 2000, 4):
            knowledge.record_executed(R1, gs(f"{A}:{gno}"))
            knowledge.record_pick(R2)

    threads = [threading.Thread(target=learn, args=(i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert knowledge.view(R1).executed == gs(f"{A}:1-1999")
    assert knowledge.view(R2).picks == 1999


# --- ranking ----------------------------------------------------------------------------------


def names(knowledge: ReplicaKnowledge, **kwargs: object) -> list[str]:
    return [v.name for v in rank_replicas(knowledge, (R1, R2, R3), **kwargs)]  # type: ignore[arg-type]


def test_the_replica_known_to_cover_comes_first(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_executed(R3, gs(f"{A}:1-10"))
    knowledge.record_executed(R2, gs(f"{A}:1-8"))
    knowledge.record_executed(R1, gs(f"{A}:1-3"))
    assert names(knowledge, required=gs(f"{A}:1-10")) == [R3, R2, R1]


def test_then_the_one_with_the_least_recent_lag(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_lag(R1, 0.004)  # noise: below the first class
    knowledge.record_lag(R2, 0.05)
    knowledge.record_lag(R3, 0.012)
    assert names(knowledge, required=gs(f"{A}:1")) == [R1, R3, R2]


def test_then_the_one_missing_least_by_what_was_learnt_lately(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_executed(R1, gs(f"{A}:1-2"))
    knowledge.record_executed(R2, gs(f"{A}:1-9"))
    knowledge.record_executed(R3, gs(f"{A}:1-5"))
    assert names(knowledge, required=gs(f"{A}:1-10")) == [R2, R3, R1]
    clock.now += 1.0
    knowledge.record_executed(R3, gs(f"{A}:6"))
    clock.now += 1.5  # R1 and R2 were learnt too long ago: they rank as unknown, i.e. good
    assert names(knowledge, required=gs(f"{A}:1-10")) == [R1, R2, R3]


def test_equal_replicas_are_ordered_by_lag_then_load_then_name(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    assert names(knowledge, required=None) == [R1, R2, R3]
    knowledge.record_pick(R1)
    assert names(knowledge, required=None) == [R2, R3, R1]
    knowledge.record_lag(R2, 0.5)
    assert names(knowledge, required=None) == [R3, R1, R2]
    clock.now += 2.5  # the lag estimate is too old to count
    assert names(knowledge, required=None) == [R2, R3, R1]


def test_recently_failed_replicas_rank_after_the_others(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_failure(R1)
    assert R1 not in names(knowledge, required=None)
    clock.now += 5
    assert names(knowledge, required=None)[-1] == R1


def test_ranking_skips_excluded_and_lagging_replicas(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_lag(R2, 3.0)
    assert names(knowledge, required=None, exclude=(R1,), max_lag=1.0) == [R3]


def test_ranking_works_on_mariadb_positions(knowledge: ReplicaKnowledge) -> None:
    knowledge.record_executed(R1, MariaPosition.parse("0-1-3"))
    knowledge.record_executed(R2, MariaPosition.parse("0-1-9"))
    assert names(knowledge, required=MariaPosition.parse("0-1-9"))[0] == R2
