"""What the background monitors teach the replica knowledge (health, executed state, lag from
the primary's history), and how the policy uses it: no wait on a replica expected to time out,
a failed replica back as soon as a poll answers, a read whose replica failed sent elsewhere once.
Driven without any server, as the wrapper and the proxy drive it."""

from __future__ import annotations

import pytest

from consistent.classify import classify
from consistent.errors import ConsistencyTimeout
from consistent.gtid import GtidSet, MariaPosition
from consistent.policy import (
    PRIMARY,
    Action,
    Decision,
    Level,
    OnTimeout,
    PolicyConfig,
    Reason,
    ReplicaKnowledge,
    SessionPolicy,
    WaitOutcome,
)
from consistent.policy.deadlines import (
    Deadlines,
    monitor_poll_timeout,
    parse_deadline,
    wait_deadline,
)
from consistent.policy.knowledge import HISTORY_LIMIT

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
R1, R2 = "10.0.0.2:3306", "10.0.0.3:3306"
P = "10.0.0.1:3306"  # their primary


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gs(text: str) -> GtidSet:
    return GtidSet.parse(text)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def knowledge(clock: Clock) -> ReplicaKnowledge:
    return ReplicaKnowledge(clock=clock, cooldown=2.0, max_cooldown=30.0, ttl=2.0)


def session(
    knowledge: ReplicaKnowledge,
    *,
    on_timeout: str = "primary",
    replicas: tuple[str, ...] = (R1, R2),
    wait_timeout: float = 1.0,
) -> SessionPolicy:
    return SessionPolicy(
        replicas=replicas,
        knowledge=knowledge,
        flavor="mysql",
        config=PolicyConfig(
            level=Level.READ_OWN_WRITES,
            wait_timeout=wait_timeout,
            on_timeout=OnTimeout(on_timeout),
        ),
    )


def committed(policy: SessionPolicy, gno: int) -> GtidSet:
    """The session writes on the primary, which reports GTID ``A:gno``."""
    d = policy.route(classify("INSERT INTO t VALUES (1)"))
    policy.on_success(d)
    produced = gs(f"{A}:{gno}")
    policy.observe_gtids(PRIMARY, produced)
    return produced


def read(policy: SessionPolicy) -> Decision:
    return policy.route(classify("SELECT v FROM t"), "SELECT v FROM t")


# --- the lag estimate -----------------------------------------------------------------------


def test_a_replica_behind_the_primary_history_lags_by_the_age_of_what_it_lacks(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_primary_state(P, gs(f"{A}:1-10"))
    clock.now += 3.0
    knowledge.record_primary_state(P, gs(f"{A}:1-20"))
    clock.now += 1.5
    # It has the first state, not the second (seen 1.5 s ago): at least 1.5 s behind.
    knowledge.record_poll(R1, gs(f"{A}:1-12"), started=clock.now, primary=P)
    assert knowledge.view(R1).lag == pytest.approx(1.5)
    # Caught up with everything the primary was seen to have: no lag.
    knowledge.record_poll(R2, gs(f"{A}:1-20"), started=clock.now, primary=P)
    assert knowledge.view(R2).lag == 0.0


def test_the_apply_delay_of_a_delayed_replica_outlives_an_idle_primary(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    """A replica that applies every transaction 5 s late: once the monitor saw it apply one,
    the estimate stays 5 s while nothing new happens, although the replica then has all the
    primary has (the next write will take 5 s again)."""
    knowledge.record_primary_state(P, gs(f"{A}:1"))
    knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    clock.now += 1.0
    knowledge.record_primary_state(P, gs(f"{A}:1-2"))  # written at 101
    for _ in range(25):  # polls every 0.2 s; the replica lacks A:2 until 106
        clock.now += 0.2
        knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    assert knowledge.view(R1).lag == pytest.approx(5.0)
    clock.now += 0.2
    knowledge.record_poll(R1, gs(f"{A}:1-2"), started=clock.now, primary=P)
    # It took at least until its previous poll (106) to apply what was seen at 101.
    assert knowledge.view(R1).lag == pytest.approx(5.0)
    for _ in range(20):
        clock.now += 0.2
        knowledge.record_poll(R1, gs(f"{A}:1-2"), started=clock.now, primary=P)
    view = knowledge.view(R1)
    assert view.lag == pytest.approx(5.0)
    assert view.current_lag(clock.now, knowledge.ttl) == pytest.approx(5.0)


def test_a_replica_that_applies_quickly_measures_no_delay(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    for gno in range(1, 30):
        knowledge.record_primary_state(P, gs(f"{A}:1-{gno}"))
        clock.now += 0.1
        knowledge.record_poll(R1, gs(f"{A}:1-{gno}"), started=clock.now, primary=P)
        clock.now += 0.1
    assert knowledge.view(R1).lag == 0.0


def test_a_timed_out_wait_keeps_the_estimate_up_until_the_replica_is_seen_to_apply(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_primary_state(P, gs(f"{A}:1"))
    knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    knowledge.record_primary_state(P, gs(f"{A}:1-2"))
    knowledge.record_wait(R1, gs(f"{A}:2"), reached=False, duration=1.0, timeout=1.0)
    clock.now += 0.2
    knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    lag = knowledge.view(R1).lag
    assert lag is not None
    assert lag >= 1.0
    clock.now += 0.2
    knowledge.record_primary_state(P, gs(f"{A}:1-3"))
    clock.now += 0.2
    knowledge.record_poll(R1, gs(f"{A}:1-3"), started=clock.now, primary=P)  # applied at once
    assert knowledge.view(R1).lag == 0.0


def test_the_history_restarts_when_the_primary_goes_backwards(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_primary_state(P, gs(f"{A}:1-100"))
    clock.now += 10.0
    knowledge.record_primary_state(P, gs(f"{A}:1-3"))  # a rebuilt server
    knowledge.record_poll(R1, gs(f"{A}:1-3"), started=clock.now, primary=P)
    assert knowledge.view(R1).lag == 0.0


def test_the_history_is_bounded(knowledge: ReplicaKnowledge, clock: Clock) -> None:
    for gno in range(1, HISTORY_LIMIT + 50):
        clock.now += 0.01
        knowledge.record_primary_state(P, gs(f"{A}:1-{gno}"))
    clock.now += 1.0
    # Behind everything kept: at least as old as the oldest state kept.
    knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    lag = knowledge.view(R1).lag
    assert lag is not None
    assert 1.0 + 0.01 * (HISTORY_LIMIT - 2) <= lag <= 1.0 + 0.01 * HISTORY_LIMIT


def test_lag_on_mariadb_positions(knowledge: ReplicaKnowledge, clock: Clock) -> None:
    knowledge.record_primary_state(P, MariaPosition.parse("0-1-10"))
    clock.now += 2.0
    knowledge.record_primary_state(P, MariaPosition.parse("0-1-11,1-1-3"))
    clock.now += 2.0
    knowledge.record_poll(R1, MariaPosition.parse("0-1-11"), started=clock.now, primary=P)
    assert knowledge.view(R1).lag == pytest.approx(2.0)


def test_each_primary_has_its_own_history(knowledge: ReplicaKnowledge, clock: Clock) -> None:
    """One process may watch two topologies, even of two flavours: a replica is compared with
    its own primary only."""
    other = "10.9.9.9:3306"
    knowledge.record_primary_state(P, gs(f"{A}:1-10"))
    knowledge.record_primary_state(other, MariaPosition.parse("0-1-500"))
    clock.now += 4.0
    knowledge.record_primary_state(other, MariaPosition.parse("0-1-900"))
    clock.now += 1.0
    knowledge.record_poll(R1, gs(f"{A}:1-10"), started=clock.now, primary=P)
    knowledge.record_poll(
        "10.9.9.10:3306", MariaPosition.parse("0-1-500"), started=clock.now, primary=other
    )
    assert knowledge.view(R1).lag == 0.0
    assert knowledge.view("10.9.9.10:3306").lag == pytest.approx(1.0)
    # A replica given the wrong primary (another flavour) gets no estimate rather than an error.
    knowledge.record_poll(R2, gs(f"{A}:1-10"), started=clock.now, primary=other)
    assert knowledge.view(R2).lag is None


def test_without_a_primary_history_a_poll_teaches_state_and_health_only(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    knowledge.record_wait(R1, gs(f"{A}:1"), reached=True, duration=0.3, timeout=1.0)
    knowledge.record_poll(R1, gs(f"{A}:1-7"), started=clock.now, primary=P)
    view = knowledge.view(R1)
    assert view.executed == gs(f"{A}:1-7")
    assert view.lag == pytest.approx(0.3)
    assert view.polled_at == clock.now


# --- health: the monitor, not user reads, finds out when a replica is back -----------------------


def test_a_poll_that_started_after_a_failure_clears_it(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    for _ in range(6):  # the cool-down has grown to its cap
        knowledge.record_failure(R1)
    assert not knowledge.healthy(R1)
    clock.now += 0.2
    knowledge.record_poll(R1, gs(f"{A}:1"), started=clock.now, primary=P)
    assert knowledge.healthy(R1)
    assert knowledge.view(R1).failures == 0


def test_a_poll_that_started_before_a_failure_clears_nothing(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    started = clock.now
    clock.now += 0.1
    knowledge.record_failure(R1)
    clock.now += 0.1
    knowledge.record_poll(R1, gs(f"{A}:1"), started=started)
    assert not knowledge.healthy(R1)
    knowledge.record_success(R1, since=started)
    assert not knowledge.healthy(R1)
    knowledge.record_success(R1, since=clock.now)
    assert knowledge.healthy(R1)


# --- the policy: no wait that the estimate says would time out --------------------------------


def lagging(knowledge: ReplicaKnowledge, clock: Clock, **delays: float) -> None:
    """The monitors, polling every replica every 0.2 s, saw each apply the primary's newest
    state as late as ``delays`` says (``R1=3.0``…), and keep polling until the slowest did."""
    names = {"R1": R1, "R2": R2}
    knowledge.record_primary_state(P, gs(f"{A}:1-50"))
    seen = clock.now
    for name in delays:
        knowledge.record_poll(names[name], gs(f"{A}:1-49"), started=clock.now, primary=P)
    while clock.now <= seen + max(delays.values()):
        clock.now += 0.2
        for name, delay in delays.items():
            state = gs(f"{A}:1-50") if clock.now > seen + delay + 1e-9 else gs(f"{A}:1-49")
            knowledge.record_poll(names[name], state, started=clock.now, primary=P)


def test_a_replica_lagging_beyond_wait_timeout_is_not_waited_on(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    policy = session(knowledge, replicas=(R1,))
    lagging(knowledge, clock, R1=3.0)
    committed(policy, 51)
    d = read(policy)
    assert (d.action, d.target, d.reason_text) == (
        Action.EXECUTE,
        PRIMARY,
        "timeout_fallback(lag)",
    )
    assert d.tried == ()


def test_the_other_replica_is_waited_on_instead(knowledge: ReplicaKnowledge, clock: Clock) -> None:
    policy = session(knowledge)
    lagging(knowledge, clock, R1=3.0, R2=0.0)
    for gno in (51, 52, 53):
        committed(policy, gno)
        d = read(policy)
        assert (d.action, d.target) == (Action.WAIT, R2)
        assert policy.on_wait(d, WaitOutcome.REACHED, duration=0.01).target == R2


def test_every_replica_lagging_with_on_timeout_error_fails_at_once(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    policy = session(knowledge, on_timeout="error")
    lagging(knowledge, clock, R1=2.0, R2=1.2)
    committed(policy, 51)
    d = read(policy)
    assert (d.action, d.reason_text) == (Action.FAIL, "timeout_error(lag)")
    assert isinstance(d.error, ConsistencyTimeout)


@pytest.mark.parametrize("on_timeout", ["primary", "next_replica"])
def test_every_replica_lagging_falls_back_to_the_primary_at_once(
    knowledge: ReplicaKnowledge, clock: Clock, on_timeout: str
) -> None:
    policy = session(knowledge, on_timeout=on_timeout)
    lagging(knowledge, clock, R1=2.0, R2=4.0)
    committed(policy, 51)
    d = read(policy)
    assert (d.action, d.target, d.reason_text) == (
        Action.EXECUTE,
        PRIMARY,
        "timeout_fallback(lag)",
    )


def test_a_lagging_replica_still_serves_what_it_is_known_to_have(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    policy = session(knowledge, replicas=(R1,))
    lagging(knowledge, clock, R1=3.0)
    policy.require(f"mysql:{A}:1-40")
    d = read(policy)
    assert (d.target, d.reason) == (R1, Reason.KNOWN_COVERED)
    policy.forget_required()
    assert read(policy).reason is Reason.NOTHING_REQUIRED


def test_without_a_monitor_an_old_estimate_is_tried_again(
    knowledge: ReplicaKnowledge, clock: Clock
) -> None:
    policy = session(knowledge, replicas=(R1,))
    committed(policy, 1)
    d = read(policy)
    assert d.action is Action.WAIT
    assert policy.on_wait(d, WaitOutcome.TIMED_OUT, duration=1.0).target == PRIMARY
    committed(policy, 2)
    assert read(policy).reason_text == "timeout_fallback(lag)"
    clock.now += knowledge.ttl + 0.1
    committed(policy, 3)
    assert read(policy).action is Action.WAIT


# --- a read whose replica failed is sent elsewhere once ----------------------------------------


def test_a_failed_read_goes_to_the_primary_by_default(knowledge: ReplicaKnowledge) -> None:
    policy = session(knowledge)
    d = read(policy)
    retry = policy.on_error(d, connection_lost=True)
    assert retry is not None
    assert (retry.action, retry.target, retry.reason_text) == (
        Action.EXECUTE,
        PRIMARY,
        "timeout_fallback(replica_failed)",
    )
    assert (retry.tried, retry.retry) == ((d.target,), True)
    assert not knowledge.healthy(d.target)


@pytest.mark.parametrize("on_timeout", ["next_replica", "error"])
def test_a_failed_read_goes_to_another_replica_and_no_further(
    knowledge: ReplicaKnowledge, on_timeout: str
) -> None:
    policy = session(knowledge, on_timeout=on_timeout)
    d = read(policy)
    retry = policy.on_error(d, connection_lost=True)
    assert retry is not None
    assert retry.target not in (d.target, PRIMARY)
    assert retry.retry
    # The second replica fails too: the error reaches the client (2013), no third try.
    assert policy.on_error(retry, connection_lost=True) is None
    assert not knowledge.healthy(retry.target)


def test_next_replica_with_no_replica_left_retries_on_the_primary(
    knowledge: ReplicaKnowledge,
) -> None:
    policy = session(knowledge, on_timeout="next_replica", replicas=(R1,))
    retry = policy.on_error(read(policy), connection_lost=True)
    assert retry is not None
    assert (retry.target, retry.reason_text) == (PRIMARY, "timeout_fallback(replica_failed)")


def test_on_timeout_error_never_retries_on_the_primary(knowledge: ReplicaKnowledge) -> None:
    policy = session(knowledge, on_timeout="error", replicas=(R1,))
    assert policy.on_error(read(policy), connection_lost=True) is None


def test_a_read_retried_after_a_wait_keeps_its_one_retry(
    knowledge: ReplicaKnowledge,
) -> None:
    """The retry may have to wait on the other replica; what comes after still counts as the
    retry."""
    policy = session(knowledge, on_timeout="next_replica")
    committed(policy, 1)
    first = read(policy)
    assert first.action is Action.WAIT
    d = policy.on_wait(first, WaitOutcome.REACHED, duration=0.01)
    retry = policy.on_error(d, connection_lost=True)
    assert retry is not None
    assert (retry.action, retry.retry) == (Action.WAIT, True)
    served = policy.on_wait(retry, WaitOutcome.REACHED, duration=0.01)
    assert (served.action, served.retry) == (Action.EXECUTE, True)
    assert policy.on_error(served, connection_lost=True) is None


def test_a_replica_failing_inside_a_read_only_transaction_ends_it_without_retry(
    knowledge: ReplicaKnowledge,
) -> None:
    policy = session(knowledge)
    begin = policy.route(classify("START TRANSACTION READ ONLY"))
    assert begin.action is Action.DEFER
    d = read(policy)
    assert d.prelude
    policy.on_prelude_done(d)
    assert policy.in_transaction
    assert policy.on_error(d, connection_lost=True) is None
    assert not policy.in_transaction
    # The COMMIT that follows has nothing to commit anywhere.
    commit = policy.route(classify("COMMIT"))
    assert commit.target == PRIMARY


def test_a_write_whose_primary_failed_is_never_retried(knowledge: ReplicaKnowledge) -> None:
    policy = session(knowledge)
    d = policy.route(classify("INSERT INTO t VALUES (1)"))
    assert policy.on_error(d, connection_lost=True) is None


# --- the deadlines' configuration --------------------------------------------------------------


def test_deadline_values() -> None:
    assert parse_deadline("read_timeout", 2) == 2.0
    assert parse_deadline("read_timeout", 0) is None
    assert parse_deadline("read_timeout", None) is None
    for bad in (-1, float("inf"), float("nan"), "3", True):
        with pytest.raises(Exception, match="read_timeout"):
            parse_deadline("read_timeout", bad)
    deadlines = Deadlines(replica_read=1.5, read=0, write=7)
    assert (deadlines.read_for(replica=True), deadlines.read_for(replica=False)) == (1.5, None)
    assert deadlines.write == 7.0
    with pytest.raises(Exception, match="replica_read_timeout"):
        Deadlines(replica_read=-2)
    assert wait_deadline(1.0) > 1.0
    assert monitor_poll_timeout(0.2) >= 1.0
    assert monitor_poll_timeout(3.0) == 15.0
