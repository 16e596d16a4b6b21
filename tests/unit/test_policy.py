"""The session state machine: every level, every route reason, tokens, transactions, pins,
timeouts, knowledge shared between sessions, fallbacks — driven without any server, the way
the DB-API wrapper and the proxy drive it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.classify import classify
from consistent.errors import ConsistencyTimeout, MalformedGtidSet, OperationalError
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.policy import (
    END_TRANSACTION,
    PRIMARY,
    READ_ONLY_BEGIN,
    Action,
    Decision,
    Level,
    OnTimeout,
    PolicyConfig,
    Reason,
    ReplicaKnowledge,
    SessionPolicy,
    Tracking,
    Transaction,
    WaitOutcome,
)

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
R1 = "10.0.0.2:3306"
R2 = "10.0.0.3:3306"
R3 = "10.0.0.4:3306"


def gs(text: str) -> GtidSet:
    return GtidSet.parse(text)


def mp(text: str) -> MariaPosition:
    return MariaPosition.parse(text)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(
    *,
    level: str = "read_own_writes",
    replicas: Sequence[str] = (R1, R2),
    flavor: str = "mysql",
    on_timeout: str = "primary",
    wait_timeout: float = 1.0,
    max_lag: float | None = None,
    autocommit: bool = True,
    knowledge: ReplicaKnowledge | None = None,
    clock: Clock | None = None,
) -> tuple[SessionPolicy, ReplicaKnowledge, Clock]:
    clock = clock or Clock()
    knowledge = knowledge or ReplicaKnowledge(clock=clock, cooldown=2.0, max_cooldown=16.0)
    config = PolicyConfig(
        level=Level(level),
        wait_timeout=wait_timeout,
        on_timeout=OnTimeout(on_timeout),
        max_lag=max_lag,
    )
    policy = SessionPolicy(
        replicas=replicas,
        knowledge=knowledge,
        flavor=flavor,  # type: ignore[arg-type]
        config=config,
        autocommit=autocommit,
    )
    return policy, knowledge, clock


WaitAnswer = WaitOutcome | Callable[[Decision], WaitOutcome]


@dataclass
class Trace:
    """Every step the policy asked for while one statement was routed."""

    steps: list[Decision] = field(default_factory=list)

    @property
    def final(self) -> Decision:
        return self.steps[-1]

    @property
    def waits(self) -> list[Decision]:
        return [s for s in self.steps if s.action is Action.WAIT]

    @property
    def fetches(self) -> list[Decision]:
        return [s for s in self.steps if s.action is Action.FETCH_PRIMARY_STATE]


def drive(
    policy: SessionPolicy,
    sql: str,
    *,
    waits: Mapping[str, WaitAnswer] | WaitAnswer = WaitOutcome.REACHED,
    primary_state: GtidState | None = None,
    succeed: bool = True,
) -> Trace:
    """Route ``sql`` to its end, answering waits from ``waits`` (per replica or for all) and
    fetches with ``primary_state``; report success of an EXECUTE when ``succeed``."""
    trace = Trace()
    d = policy.route(classify(sql), sql)
    trace.steps.append(d)
    while d.action in (Action.WAIT, Action.FETCH_PRIMARY_STATE):
        if d.action is Action.FETCH_PRIMARY_STATE:
            assert primary_state is not None, "the policy asked for the primary's state"
            d = policy.on_primary_state(d, primary_state)
        else:
            answer = (
                waits.get(d.target, WaitOutcome.REACHED) if isinstance(waits, Mapping) else waits
            )
            outcome = answer(d) if callable(answer) else answer
            d = policy.on_wait(d, outcome, duration=0.01)
        trace.steps.append(d)
    if d.action is Action.EXECUTE and succeed:
        if d.prelude:
            policy.on_prelude_done(d)
        policy.on_success(d)
    return trace


def write(policy: SessionPolicy, sql: str, produced: GtidState | None) -> Decision:
    """Run a write on the primary and report the GTIDs its OK packet carried."""
    trace = drive(policy, sql)
    if produced is not None:
        policy.observe_gtids(trace.final.target, produced)
    return trace.final


# --- writes, reads, required sets -------------------------------------------------------------


def test_a_write_goes_to_the_primary() -> None:
    policy, _, _ = make()
    d = drive(policy, "INSERT INTO t VALUES (1)").final
    assert (d.action, d.target, d.reason, d.detail) == (
        Action.EXECUTE,
        PRIMARY,
        Reason.WRITE,
        "write",
    )


@pytest.mark.parametrize(
    ("sql", "detail"),
    [
        ("UPDATE t SET a = 1", "write"),
        ("CREATE TABLE t (a INT)", "ddl"),
        ("SELECT * FROM t FOR UPDATE", "for_update"),
        ("SELECT * FROM t LOCK IN SHARE MODE", "lock_in_share_mode"),
        ("SELECT LAST_INSERT_ID()", "last_insert_id"),
        ("SELECT * FROM t INTO OUTFILE '/tmp/x'", "select_into"),
        ("CALL p()", "call"),
        ("INSERT INTO t VALUES (1); SELECT 1", "write"),
        ("SELECT audit_row(k) FROM t", "function_call:AUDIT_ROW"),
        ("SELECT shop.audit(1), f(2)", "function_call:SHOP.AUDIT,F"),
        ("SELECT MASTER_GTID_WAIT('0-1-1', 1)", "server_state"),
    ],
)
def test_statements_that_must_see_the_primary_go_there(sql: str, detail: str) -> None:
    policy, _, _ = make()
    d = drive(policy, sql).final
    assert (d.target, d.reason, d.detail) == (PRIMARY, Reason.WRITE, detail)


def test_a_read_with_nothing_required_goes_to_a_replica_without_waiting() -> None:
    policy, _, _ = make()
    trace = drive(policy, "SELECT * FROM t")
    assert trace.waits == []
    assert trace.final.target in (R1, R2)
    assert trace.final.reason is Reason.NOTHING_REQUIRED


def test_equally_good_replicas_share_the_reads() -> None:
    policy, _, _ = make()
    targets = [drive(policy, "SELECT 1").final.target for _ in range(6)]
    assert targets.count(R1) == 3
    assert targets.count(R2) == 3


def test_own_gtids_become_the_required_set_and_the_token() -> None:
    policy, _, _ = make()
    assert policy.token == ""
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:5"))
    write(policy, "INSERT INTO t VALUES (2)", gs(f"{A}:7"))
    assert policy.required == gs(f"{A}:5:7")
    assert policy.token == f"mysql:{A}:5:7"


def test_read_your_writes_waits_for_the_own_write_then_reads_on_that_replica() -> None:
    policy, knowledge, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "SELECT * FROM t")
    [wait] = trace.waits
    assert wait.wait_set == gs(f"{A}:1")
    assert wait.wait_timeout == 1.0
    assert wait.reason is Reason.WAITED
    final = trace.final
    assert (final.action, final.target, final.reason) == (
        Action.EXECUTE,
        wait.target,
        Reason.WAITED,
    )
    assert final.wait_set == gs(f"{A}:1")
    assert final.required == gs(f"{A}:1")
    assert knowledge.view(wait.target).executed == gs(f"{A}:1")


def test_a_replica_known_to_cover_gets_no_wait_at_all() -> None:
    policy, _, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    first = drive(policy, "SELECT 1")
    second = drive(policy, "SELECT 2")
    assert second.waits == []
    assert second.final.target == first.final.target
    assert second.final.reason is Reason.KNOWN_COVERED
    assert second.final.known == gs(f"{A}:1")


def test_the_wait_covers_only_what_the_replica_is_not_known_to_have() -> None:
    policy, knowledge, _ = make(replicas=(R1,))
    knowledge.record_executed(R1, gs(f"{A}:1-4"))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:3"))
    write(policy, "INSERT INTO t VALUES (2)", gs(f"{A}:6"))
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.wait_set == gs(f"{A}:6")
    assert wait.known == gs(f"{A}:1-4")


def test_the_replica_most_likely_caught_up_is_chosen() -> None:
    policy, knowledge, _ = make(replicas=(R1, R2, R3))
    knowledge.record_executed(R1, gs(f"{A}:1-2"))
    knowledge.record_executed(R2, gs(f"{A}:1-5"))
    knowledge.record_executed(R3, gs(f"{A}:1-9"))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:8"))
    write(policy, "INSERT INTO t VALUES (2)", gs(f"{A}:10"))
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.target == R3
    assert wait.wait_set == gs(f"{A}:10")


def test_a_replica_that_just_made_a_read_wait_goes_after_one_that_did_not() -> None:
    policy, _, _ = make(replicas=(R1, R2))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    slow = policy.route(classify("SELECT 1"))
    policy.on_wait(slow, WaitOutcome.REACHED, duration=0.08)
    fast = R2 if slow.target == R1 else R1
    write(policy, "INSERT INTO t VALUES (2)", gs(f"{A}:2"))
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.target == fast


def test_what_is_known_about_a_replica_ages() -> None:
    policy, knowledge, clock = make(replicas=(R1, R2))
    knowledge.record_executed(R1, gs(f"{A}:1-5"))
    knowledge.record_executed(R2, gs(f"{A}:1"))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:5-6"))
    assert policy.route(classify("SELECT 1")).target == R1  # lacks less, by what we know
    clock.advance(3.0)  # older than the knowledge's ttl: both rank as unknown now
    knowledge.record_pick(R1)
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.target == R2
    assert wait.wait_set == gs(f"{A}:5-6")  # the wait itself still uses what is known


def test_no_replicas_means_the_primary() -> None:
    policy, _, _ = make(replicas=())
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason) == (PRIMARY, Reason.NO_REPLICAS)


def test_eventual_never_waits_even_with_a_required_set() -> None:
    policy, _, _ = make(level="eventual")
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "SELECT 1")
    assert trace.waits == []
    assert trace.final.target in (R1, R2)
    assert trace.final.reason is Reason.EVENTUAL
    assert policy.token == f"mysql:{A}:1"  # still collected


def test_eventual_max_lag_skips_lagging_replicas() -> None:
    policy, knowledge, _ = make(level="eventual", max_lag=1.0)
    knowledge.record_lag(R1, 4.0)
    assert drive(policy, "SELECT 1").final.target == R2
    knowledge.record_lag(R2, 2.0)
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason, d.reason_text) == (
        PRIMARY,
        Reason.NO_HEALTHY_REPLICA,
        "no_healthy_replica(max_lag)",
    )


def test_the_level_can_change_during_the_session() -> None:
    policy, _, _ = make(level="eventual")
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    policy.level = "read_own_writes"  # type: ignore[assignment]
    assert policy.level is Level.READ_OWN_WRITES
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.wait_set == gs(f"{A}:1")


# --- timeouts and failures --------------------------------------------------------------------


def test_a_timeout_falls_back_to_the_primary_by_default() -> None:
    policy, knowledge, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "SELECT 1", waits=WaitOutcome.TIMED_OUT)
    assert len(trace.waits) == 1
    d = trace.final
    assert (d.action, d.target, d.reason) == (Action.EXECUTE, PRIMARY, Reason.TIMEOUT_FALLBACK)
    assert d.tried == (trace.waits[0].target,)
    assert knowledge.view(trace.waits[0].target).executed is None
    lag = knowledge.view(trace.waits[0].target).lag
    assert lag is not None
    assert lag >= 1.0


def test_next_replica_tries_every_replica_then_the_primary() -> None:
    policy, _, _ = make(on_timeout="next_replica", replicas=(R1, R2, R3))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "SELECT 1", waits=WaitOutcome.TIMED_OUT)
    assert sorted(w.target for w in trace.waits) == [R1, R2, R3]
    assert (trace.final.target, trace.final.reason) == (PRIMARY, Reason.TIMEOUT_FALLBACK)
    assert sorted(trace.final.tried) == [R1, R2, R3]


def test_next_replica_reads_on_the_first_replica_that_catches_up() -> None:
    policy, _, _ = make(on_timeout="next_replica")
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    first = policy.route(classify("SELECT 1"))
    assert first.action is Action.WAIT
    other = R2 if first.target == R1 else R1
    trace = drive(policy, "SELECT 1", waits={first.target: WaitOutcome.TIMED_OUT})
    assert [w.target for w in trace.waits] == [first.target, other]
    assert (trace.final.target, trace.final.reason) == (other, Reason.WAITED)
    assert trace.final.tried == (first.target,)
    # The replica that timed out now has a lag estimate: the next read tries the other first.
    write(policy, "INSERT INTO t VALUES (2)", gs(f"{A}:2"))
    assert policy.route(classify("SELECT 1")).target == other


def test_on_timeout_error_raises_a_consistency_timeout_that_is_not_a_disconnect() -> None:
    policy, _, _ = make(on_timeout="error")
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    d = drive(policy, "SELECT 1", waits=WaitOutcome.TIMED_OUT).final
    assert d.action is Action.FAIL
    assert d.reason is Reason.TIMEOUT_ERROR
    assert isinstance(d.error, ConsistencyTimeout)
    assert isinstance(d.error, OperationalError)
    assert d.error.errno not in {1927, 2006, 2013, 2014, 2045, 2055, 4031}
    assert f"{A}:1" in d.error.msg


def test_a_failed_wait_marks_the_replica_unhealthy_and_reads_elsewhere() -> None:
    policy, knowledge, clock = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    dead = policy.route(classify("SELECT 1")).target
    alive = R2 if dead == R1 else R1
    trace = drive(policy, "SELECT 1", waits={dead: WaitOutcome.FAILED})
    assert (trace.final.target, trace.final.reason) == (alive, Reason.WAITED)
    assert not knowledge.healthy(dead)
    # While it cools down nobody uses it, even for reads with nothing to wait for.
    fresh, _, _ = make(knowledge=knowledge, clock=clock)
    assert {drive(fresh, "SELECT 1").final.target for _ in range(4)} == {alive}
    clock.advance(2.5)
    assert dead in {drive(fresh, "SELECT 1").final.target for _ in range(4)}


def test_no_healthy_replica_means_the_primary() -> None:
    policy, knowledge, _ = make()
    knowledge.record_failure(R1)
    knowledge.record_failure(R2)
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason, d.detail) == (PRIMARY, Reason.NO_HEALTHY_REPLICA, None)


def test_a_wait_refused_by_the_replica_falls_back_to_the_primary() -> None:
    policy, knowledge, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "SELECT 1", waits=WaitOutcome.ERROR)
    d = trace.final
    assert (d.target, d.reason_text) == (PRIMARY, "timeout_fallback(wait_error)")
    assert knowledge.healthy(trace.waits[0].target)


def test_a_replica_lost_during_a_read_is_retried_once_as_on_timeout_says() -> None:
    policy, knowledge, _ = make(on_timeout="next_replica")
    d = policy.route(classify("SELECT 1"), "SELECT 1")
    retry = policy.on_error(d, connection_lost=True)
    assert retry is not None
    assert retry.action is Action.EXECUTE
    assert retry.target not in (d.target, PRIMARY)
    assert retry.tried == (d.target,)
    assert not knowledge.healthy(d.target)
    assert policy.on_error(retry, connection_lost=True) is None
    # By default the retry goes to the primary.
    policy, knowledge, _ = make()
    d = policy.route(classify("SELECT 1"), "SELECT 1")
    retry = policy.on_error(d, connection_lost=True)
    assert retry is not None
    assert (retry.target, retry.reason_text) == (PRIMARY, "timeout_fallback(replica_failed)")


def test_with_retry_reads_off_a_sent_read_is_not_retried() -> None:
    policy, knowledge, _ = make()
    policy.config = PolicyConfig(retry_reads=False)
    d = policy.route(classify("SELECT 1"), "SELECT 1")
    assert policy.on_error(d, connection_lost=True) is None
    assert not knowledge.healthy(d.target)  # still known to be down
    # A read that never left (its replica could not be reached) still goes elsewhere.
    other = policy.route(classify("SELECT 2"), "SELECT 2")
    assert other.target not in (d.target, PRIMARY)
    retry = policy.on_error(other, connection_lost=True, sent=False)
    assert retry is not None
    assert (retry.target, retry.tried) == (PRIMARY, (other.target,))


def test_an_sql_error_on_a_replica_is_not_retried() -> None:
    policy, knowledge, _ = make()
    d = policy.route(classify("SELECT nope FROM t"))
    assert policy.on_error(d, connection_lost=False) is None
    assert knowledge.healthy(d.target)


@pytest.mark.parametrize("lost", [True, False])
def test_a_statement_sent_to_the_primary_is_never_retried(lost: bool) -> None:
    policy, _, _ = make()
    d = policy.route(classify("INSERT INTO t VALUES (1)"))
    assert policy.on_error(d, connection_lost=lost) is None


def test_a_primary_lost_inside_a_transaction_ends_it() -> None:
    policy, _, _ = make()
    drive(policy, "BEGIN")
    d = policy.route(classify("INSERT INTO t VALUES (1)"))
    assert policy.on_error(d, connection_lost=True) is None
    assert policy.transaction is None


def test_a_failed_statement_has_no_effect_on_the_session() -> None:
    policy, _, _ = make()
    d = policy.route(classify("CREATE TEMPORARY TABLE tmp (a INT)"))
    policy.on_error(d, connection_lost=False)
    assert policy.pinned is None
    b = policy.route(classify("BEGIN"))
    policy.on_error(b, connection_lost=False)
    assert policy.transaction is None


# --- read_latest and read_all_writes ----------------------------------------------------------


def test_read_latest_fetches_the_primary_state_then_waits_for_it() -> None:
    policy, _, _ = make(level="read_latest")
    trace = drive(policy, "SELECT 1", primary_state=gs(f"{A}:1-40,{B}:1-2"))
    [fetch] = trace.fetches
    assert fetch.target == PRIMARY
    assert fetch.reason_text == "waited(read_latest)"
    [wait] = trace.waits
    assert wait.wait_set == gs(f"{A}:1-40,{B}:1-2")
    assert trace.final.reason is Reason.WAITED
    assert policy.required == gs(f"{A}:1-40,{B}:1-2")


def test_read_latest_fetches_on_every_read_but_waits_only_when_needed() -> None:
    policy, _, _ = make(level="read_latest", replicas=(R1,))
    drive(policy, "SELECT 1", primary_state=gs(f"{A}:1-40"))
    again = drive(policy, "SELECT 1", primary_state=gs(f"{A}:1-40"))
    assert len(again.fetches) == 1
    assert again.waits == []
    assert again.final.reason is Reason.KNOWN_COVERED
    newer = drive(policy, "SELECT 1", primary_state=gs(f"{A}:1-41"))
    assert [w.wait_set for w in newer.waits] == [gs(f"{A}:41")]


def test_read_latest_without_a_usable_replica_does_not_fetch() -> None:
    policy, knowledge, _ = make(level="read_latest")
    knowledge.record_failure(R1)
    knowledge.record_failure(R2)
    trace = drive(policy, "SELECT 1")
    assert trace.fetches == []
    assert trace.final.target == PRIMARY


def test_read_all_writes_on_mysql_uses_the_all_gtids_set_without_fetching() -> None:
    policy, _, _ = make(level="read_all_writes", replicas=(R1,))
    assert policy.tracking is Tracking.ALL
    # Another session committed A:1-7; this session's commit reports the whole set.
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1-8"))
    trace = drive(policy, "SELECT 1")
    assert trace.fetches == []
    assert [w.wait_set for w in trace.waits] == [gs(f"{A}:1-8")]


def test_read_own_writes_on_mariadb_waits_only_for_lagging_domains() -> None:
    policy, knowledge, _ = make(flavor="mariadb", replicas=(R1,))
    knowledge.record_executed(R1, mp("0-1-20,1-1-3"))
    write(policy, "INSERT INTO t VALUES (1)", mp("0-1-12"))
    assert drive(policy, "SELECT 1").final.reason is Reason.KNOWN_COVERED
    policy.require("mariadb:1-1-5")
    [wait] = drive(policy, "SELECT 1").waits
    assert wait.wait_set == mp("1-1-5")
    assert policy.token == "mariadb:0-1-12,1-1-5"


# --- tokens across sessions -------------------------------------------------------------------


def test_require_merges_a_token_from_another_session() -> None:
    writer, knowledge, clock = make()
    write(writer, "INSERT INTO t VALUES (1)", gs(f"{A}:3"))
    reader, _, _ = make(knowledge=knowledge, clock=clock)
    reader.require(writer.token)
    assert reader.required == gs(f"{A}:3")
    [wait] = drive(reader, "SELECT 1").waits
    assert wait.wait_set == gs(f"{A}:3")


def test_a_malformed_token_raises_1772_and_changes_nothing() -> None:
    policy, _, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:3"))
    with pytest.raises(MalformedGtidSet) as info:
        policy.require("mysql:not-a-set")
    assert info.value.errno == 1772
    with pytest.raises(MalformedGtidSet):
        policy.require("mariadb:0-1-3")
    assert policy.required == gs(f"{A}:3")


def test_knowledge_learnt_by_one_session_spares_another_the_wait() -> None:
    a, knowledge, clock = make()
    write(a, "INSERT INTO t VALUES (1)", gs(f"{A}:9"))
    waited = drive(a, "SELECT 1").final
    b, _, _ = make(knowledge=knowledge, clock=clock)
    b.require(a.token)
    trace = drive(b, "SELECT 1")
    assert trace.waits == []
    assert (trace.final.target, trace.final.reason) == (waited.target, Reason.KNOWN_COVERED)


def test_all_gtids_on_a_replica_connection_feed_the_knowledge() -> None:
    policy, knowledge, _ = make()
    policy.observe_gtids(R2, gs(f"{A}:1-100"))
    assert knowledge.view(R2).executed == gs(f"{A}:1-100")
    assert policy.required == GtidSet()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:100"))
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason) == (R2, Reason.KNOWN_COVERED)


# --- transactions -------------------------------------------------------------------------------


def test_a_read_write_transaction_runs_entirely_on_the_primary() -> None:
    policy, _, _ = make()
    begin = drive(policy, "BEGIN").final
    assert (begin.target, begin.reason) == (PRIMARY, Reason.IN_TRANSACTION)
    assert policy.transaction == Transaction(read_only=False, server=PRIMARY)
    read = drive(policy, "SELECT 1").final
    assert (read.target, read.reason) == (PRIMARY, Reason.IN_TRANSACTION)
    commit = drive(policy, "COMMIT").final
    assert commit.target == PRIMARY
    assert policy.transaction is None
    assert drive(policy, "SELECT 1").final.target != PRIMARY


def test_commit_and_chain_keeps_the_transaction() -> None:
    policy, _, _ = make()
    drive(policy, "BEGIN")
    drive(policy, "COMMIT AND CHAIN")
    assert policy.in_transaction
    drive(policy, "ROLLBACK")
    assert not policy.in_transaction


def test_an_implicit_commit_ends_the_transaction() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION")
    drive(policy, "CREATE TABLE x (a INT)")
    assert policy.transaction is None


def test_the_server_status_closes_a_transaction_the_server_ended() -> None:
    policy, _, _ = make()
    drive(policy, "BEGIN")
    policy.observe_status(PRIMARY, in_transaction=True)
    assert policy.in_transaction
    policy.observe_status(PRIMARY, in_transaction=False)
    assert not policy.in_transaction


def test_autocommit_off_sends_everything_to_the_primary() -> None:
    policy, _, _ = make(autocommit=False)
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason_text) == (PRIMARY, "in_transaction(autocommit_off)")
    policy.set_autocommit(True)
    assert drive(policy, "SELECT 1").final.target != PRIMARY


def test_set_autocommit_in_sql_is_followed() -> None:
    policy, _, _ = make()
    drive(policy, "SET autocommit = 0")
    assert policy.autocommit is False
    assert policy.pinned is None  # autocommit is its own rule, not a pin
    assert drive(policy, "SELECT 1").final.target == PRIMARY
    drive(policy, "SET autocommit = 1")
    assert drive(policy, "SELECT 1").final.target != PRIMARY


def test_turning_autocommit_on_commits_the_open_transaction() -> None:
    policy, _, _ = make()
    drive(policy, "BEGIN")
    policy.set_autocommit(True)
    assert policy.transaction is None


def test_a_read_only_transaction_is_deferred_to_its_first_statement() -> None:
    policy, _, _ = make()
    begin = drive(policy, "START TRANSACTION READ ONLY").final
    assert begin.action is Action.DEFER
    assert begin.reason_text == "in_transaction(read_only)"
    assert policy.transaction == Transaction(read_only=True, server=None)
    first = drive(policy, "SELECT 1").final
    assert first.target in (R1, R2)
    assert first.prelude == ((first.target, READ_ONLY_BEGIN),)
    assert policy.transaction == Transaction(read_only=True, server=first.target)
    # It stays on that replica, without waits, until it ends there.
    policy.require(f"mysql:{A}:1")
    for _ in range(3):
        trace = drive(policy, "SELECT 2")
        assert trace.waits == []
        assert (trace.final.target, trace.final.reason) == (first.target, Reason.IN_TRANSACTION)
    end = drive(policy, "COMMIT").final
    assert (end.target, end.prelude) == (first.target, ())
    assert policy.transaction is None


def test_a_read_only_transaction_waits_like_a_read_before_it_starts() -> None:
    policy, _, _ = make(replicas=(R1,))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    drive(policy, "START TRANSACTION READ ONLY")
    trace = drive(policy, "SELECT 1")
    assert [w.wait_set for w in trace.waits] == [gs(f"{A}:1")]
    assert trace.final.prelude == ((R1, READ_ONLY_BEGIN),)


def test_a_read_only_transaction_that_times_out_starts_on_the_primary() -> None:
    policy, _, _ = make(replicas=(R1,))
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    drive(policy, "START TRANSACTION READ ONLY")
    final = drive(policy, "SELECT 1", waits=WaitOutcome.TIMED_OUT).final
    assert final.prelude == ((PRIMARY, READ_ONLY_BEGIN),)
    assert policy.transaction == Transaction(read_only=True, server=PRIMARY)
    assert drive(policy, "SELECT 2").final.target == PRIMARY


def test_ending_a_read_only_transaction_that_never_started_sends_nothing() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    d = drive(policy, "ROLLBACK").final
    assert d.action is Action.DEFER
    assert policy.transaction is None


def test_a_write_in_a_read_only_transaction_fails_like_mysqld() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    pending = drive(policy, "INSERT INTO t VALUES (1)").final
    assert pending.action is Action.FAIL
    assert isinstance(pending.error, OperationalError)
    assert pending.error.errno == 1792
    assert pending.error.sqlstate == "25006"
    drive(policy, "SELECT 1")
    started = drive(policy, "UPDATE t SET a = 2").final
    assert started.action is Action.FAIL
    assert started.target in (R1, R2)


def test_ddl_in_a_read_only_transaction_commits_it_and_goes_to_the_primary() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    replica = drive(policy, "SELECT 1").final.target
    d = drive(policy, "CREATE TABLE x (a INT)").final
    assert d.target == PRIMARY
    assert d.prelude == ((replica, END_TRANSACTION),)
    assert policy.transaction is None


def test_a_read_write_begin_inside_a_replica_transaction_moves_to_the_primary() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    replica = drive(policy, "SELECT 1").final.target
    d = drive(policy, "BEGIN").final
    assert (d.target, d.prelude) == (PRIMARY, ((replica, END_TRANSACTION),))
    assert policy.transaction == Transaction(read_only=False, server=PRIMARY)


def test_session_state_inside_a_replica_transaction_goes_to_the_primary_for_replay() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    drive(policy, "SELECT 1")
    d = drive(policy, "SET NAMES utf8mb4").final
    assert (d.target, d.reason) == (PRIMARY, Reason.SESSION_STATE)
    assert policy.replay_since(0)[0] == ("SET NAMES utf8mb4",)


def test_a_replica_lost_inside_its_transaction_is_an_error() -> None:
    policy, knowledge, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    replica = drive(policy, "SELECT 1").final.target
    d = policy.route(classify("SELECT 2"))
    assert policy.on_error(d, connection_lost=True) is None
    assert policy.transaction is None
    assert not knowledge.healthy(replica)


def test_a_pinned_session_runs_read_only_transactions_on_the_primary() -> None:
    policy, _, _ = make()
    drive(policy, "CREATE TEMPORARY TABLE tmp (a INT)")
    d = drive(policy, "START TRANSACTION READ ONLY").final
    assert (d.action, d.target) == (Action.EXECUTE, PRIMARY)


# --- pins -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("CREATE TEMPORARY TABLE tmp (a INT)", "temporary_table"),
        ("SET @x = 1", "user_variable"),
        ("SELECT @y := 2", "user_variable"),
        ("LOCK TABLES t READ", "lock_tables"),
        ("SELECT GET_LOCK('job', 1)", "get_lock"),
        ("PREPARE s FROM 'SELECT 1'", "prepare"),
    ],
)
def test_state_a_replica_cannot_have_pins_the_session(sql: str, reason: str) -> None:
    policy, _, _ = make()
    assert drive(policy, sql).final.target == PRIMARY
    assert policy.pinned == reason
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason) == (PRIMARY, Reason.PINNED)
    assert d.reason_text == f"pinned({reason})"


def test_xa_statements_are_primary_only_transaction_control() -> None:
    """XA START … XA COMMIT run on the primary and pin the session there (an XA transaction
    is bound to its connection until XA PREPARE, and XA COMMIT may name one prepared
    elsewhere); the GTIDs XA PREPARE and XA COMMIT report become the required set."""
    policy, _, _ = make()
    steps = [
        ("XA START 'x'", None),
        ("INSERT INTO t VALUES (1)", None),
        ("SELECT * FROM t", None),
        ("XA END 'x'", None),
        ("XA PREPARE 'x'", gs(f"{A}:7")),
        ("XA COMMIT 'x'", gs(f"{A}:8")),
        ("XA RECOVER", None),
    ]
    for sql, produced in steps:
        d = write(policy, sql, produced)
        assert (d.action, d.target) == (Action.EXECUTE, PRIMARY), sql
    assert policy.pinned == "xa_transaction"
    d = drive(policy, "SELECT 1").final
    assert (d.target, d.reason) == (PRIMARY, Reason.PINNED)
    assert policy.token == f"mysql:{A}:7-8"


def test_unlock_tables_releases_the_lock_tables_pin() -> None:
    policy, _, _ = make()
    drive(policy, "LOCK TABLES t READ")
    drive(policy, "CREATE TEMPORARY TABLE tmp (a INT)")
    drive(policy, "UNLOCK TABLES")
    assert policy.pins == ("temporary_table",)
    drive(policy, "DROP TEMPORARY TABLE tmp")
    assert policy.pinned == "temporary_table"  # other temporary tables may remain


def test_reset_forgets_the_session() -> None:
    policy, _, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    drive(policy, "SET @x = 1")
    drive(policy, "USE app")
    drive(policy, "BEGIN")
    policy.reset()
    assert (policy.token, policy.pins, policy.transaction) == ("", (), None)
    assert policy.replay_since(0) == ((), policy.replay_seq)


# --- session state replay ---------------------------------------------------------------------


def test_session_state_runs_on_the_primary_and_is_replayed_on_replicas() -> None:
    policy, _, _ = make()
    d = drive(policy, "SET NAMES utf8mb4").final
    assert (d.target, d.reason) == (PRIMARY, Reason.SESSION_STATE)
    drive(policy, "USE app")
    drive(policy, "SET SESSION sql_mode = 'ANSI_QUOTES'")
    statements, seq = policy.replay_since(0)
    assert statements == (
        "SET NAMES utf8mb4",
        "USE `app`",
        "SET SESSION sql_mode = 'ANSI_QUOTES'",
    )
    assert policy.replay_since(seq) == ((), seq)
    drive(policy, "SET NAMES latin1")
    assert policy.replay_since(seq) == (("SET NAMES latin1",), seq + 1)
    # A connection starting from scratch gets only the latest value of each setting.
    assert policy.replay_since(0)[0] == (
        "USE `app`",
        "SET SESSION sql_mode = 'ANSI_QUOTES'",
        "SET NAMES latin1",
    )


def test_settings_that_only_matter_to_writes_are_not_replayed() -> None:
    policy, _, _ = make()
    drive(policy, "SET SESSION sql_log_bin = 0")
    drive(policy, "SET session_track_gtids = OWN_GTID")
    assert policy.replay_since(0)[0] == ()
    assert policy.pinned is None


def test_a_failed_set_is_not_replayed() -> None:
    policy, _, _ = make()
    d = policy.route(classify("SET SESSION nope = 1"), "SET SESSION nope = 1")
    policy.on_error(d, connection_lost=False)
    assert policy.replay_since(0)[0] == ()


def test_schema_names_are_quoted_for_replay() -> None:
    policy, _, _ = make()
    policy.record_schema("we`ird")
    assert policy.replay_since(0)[0] == ("USE `we``ird`",)


# --- hints and diagnostics --------------------------------------------------------------------


def test_a_primary_hint_sends_a_read_to_the_primary() -> None:
    policy, _, _ = make()
    d = drive(policy, "/* consistent: primary */ SELECT 1").final
    assert (d.target, d.reason_text) == (PRIMARY, "hint(primary)")


def test_a_replica_hint_overrides_pins_and_still_waits() -> None:
    policy, _, _ = make(replicas=(R1,))
    drive(policy, "SET @x = 1")
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "/* consistent: replica */ SELECT @x")
    assert [w.wait_set for w in trace.waits] == [gs(f"{A}:1")]
    assert (trace.final.target, trace.final.reason_text) == (R1, "waited(hint)")


@pytest.mark.parametrize(
    ("sql", "detail"),
    [
        ("INSERT INTO t VALUES (1)", "write"),
        ("UPDATE t SET a = 1", "write"),
        ("CALL p()", "call"),
        ("CREATE TABLE t2 (a INT)", "ddl"),
        ("DROP TABLE t2", "ddl"),
        ("SELECT * FROM t FOR UPDATE", "for_update"),
        ("SELECT * FROM t FOR SHARE", "for_share"),
        ("SELECT * FROM t LOCK IN SHARE MODE", "lock_in_share_mode"),
        ("SELECT GET_LOCK('k', 1)", "get_lock"),
        ("SELECT audit_row(1)", "function_call:AUDIT_ROW"),
        ("SELECT NEXTVAL(s)", "sequence"),
        ("SELECT @x := 1", "user_variable_assignment"),
        ("SELECT * FROM t INTO OUTFILE '/tmp/x'", "select_into"),
        ("DO audit_row(1)", "do"),
        ("LOCK TABLES t READ", "lock_tables"),
        ("SELECT 1; INSERT INTO t VALUES (1)", "write"),
        ("SELECT 1; SELECT audit_row(1)", "function_call:AUDIT_ROW"),
    ],
)
def test_a_replica_hint_never_sends_what_may_write_to_a_replica(sql: str, detail: str) -> None:
    policy, _, _ = make()
    d = drive(policy, f"/* consistent: replica */ {sql}").final
    assert (d.action, d.target, d.reason, d.detail) == (
        Action.EXECUTE,
        PRIMARY,
        Reason.HINT_REFUSED,
        detail,
    )
    assert d.reason_text == f"hint_refused({detail})"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "SELECT LAST_INSERT_ID()",
        "SELECT FOUND_ROWS()",
        "SELECT CONNECTION_ID()",
        "SELECT @x",
        "SHOW PROCESSLIST",
        "SELECT MASTER_POS_WAIT('log.000001', 4)",
    ],
)
def test_a_replica_hint_may_override_what_only_ties_a_read_to_the_primary(sql: str) -> None:
    policy, _, _ = make()
    d = drive(policy, f"/* consistent: replica */ {sql}").final
    assert d.target in (R1, R2)
    assert d.detail == "hint"


def test_a_refused_replica_hint_is_not_retried_on_a_replica() -> None:
    policy, _, _ = make()
    d = drive(policy, "/* consistent: replica */ SELECT audit_row(1)", succeed=False).final
    assert d.reason is Reason.HINT_REFUSED
    assert policy.on_error(d, connection_lost=True) is None


def test_a_level_hint_governs_one_statement() -> None:
    policy, _, _ = make()
    write(policy, "INSERT INTO t VALUES (1)", gs(f"{A}:1"))
    trace = drive(policy, "/* consistent: level=eventual */ SELECT 1")
    assert trace.waits == []
    assert trace.final.level is Level.EVENTUAL
    assert policy.level is Level.READ_OWN_WRITES
    assert len(drive(policy, "SELECT 1").waits) == 1


def test_a_max_lag_hint_bounds_an_eventual_read() -> None:
    policy, knowledge, _ = make(level="eventual")
    knowledge.record_lag(R1, 5.0)
    knowledge.record_lag(R2, 5.0)
    assert drive(policy, "SELECT 1").final.target != PRIMARY
    d = drive(policy, "/* consistent: level=eventual max_lag=1 */ SELECT 1").final
    assert d.target == PRIMARY


def test_show_warnings_runs_where_the_previous_statement_ran() -> None:
    policy, _, _ = make()
    read = drive(policy, "SELECT 1").final
    assert drive(policy, "SHOW WARNINGS").final.target == read.target
    drive(policy, "INSERT INTO t VALUES (1)")
    d = drive(policy, "SHOW WARNINGS").final
    assert (d.target, d.reason) == (PRIMARY, Reason.FOLLOWS_PREVIOUS)


def test_a_read_only_multi_statement_may_use_a_replica() -> None:
    policy, _, _ = make()
    assert drive(policy, "SELECT 1; SELECT 2").final.target != PRIMARY


def test_a_multi_statement_applies_each_part() -> None:
    policy, _, _ = make()
    drive(policy, "BEGIN; INSERT INTO t VALUES (1)")
    assert policy.transaction == Transaction(read_only=False, server=PRIMARY)
    drive(policy, "INSERT INTO t VALUES (2); COMMIT; SET NAMES utf8mb4")
    assert policy.transaction is None
    assert policy.replay_since(0)[0] == ("SET NAMES utf8mb4",)


def test_transaction_control_outside_a_transaction_goes_to_the_primary() -> None:
    policy, _, _ = make()
    for sql in ("COMMIT", "ROLLBACK", "SAVEPOINT s"):
        d = drive(policy, sql).final
        assert (d.action, d.target, d.reason) == (Action.EXECUTE, PRIMARY, Reason.IN_TRANSACTION)


def test_a_decision_step_of_the_wrong_kind_is_refused() -> None:
    policy, _, _ = make()
    d = policy.route(classify("SELECT 1"))
    with pytest.raises(ValueError, match="expected a wait decision"):
        policy.on_wait(d, WaitOutcome.REACHED)
    with pytest.raises(ValueError, match="expected a fetch_primary_state decision"):
        policy.on_primary_state(d, GtidSet())


def test_primary_cannot_name_a_replica() -> None:
    with pytest.raises(ValueError, match="cannot name a replica"):
        make(replicas=(PRIMARY,))


# --- the guarantee itself, against a simulated topology ---------------------------------------

UUID = "cccccccc-cccc-cccc-cccc-cccccccccccc"
REPLICAS = (R1, R2, R3)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2)),
        st.tuples(st.just("read"), st.integers(0, 2)),
        st.tuples(st.just("apply"), st.sampled_from(REPLICAS)),
        st.tuples(st.just("tick"), st.integers(0, 3)),
        st.tuples(st.just("die"), st.sampled_from(REPLICAS)),
        st.tuples(st.just("token"), st.integers(0, 2)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    operations,
    st.sampled_from(["read_own_writes", "read_all_writes", "read_latest"]),
    st.sampled_from(["primary", "next_replica", "error"]),
)
def test_property_a_read_sent_to_a_replica_sees_what_the_level_requires(
    ops: list[tuple[str, object]], level: str, on_timeout: str
) -> None:
    """Three sessions share knowledge over a simulated primary and three lagging replicas whose
    waits answer truthfully.  Whatever happens, a read the policy sends to a replica runs where
    every transaction the level requires has been applied."""
    clock = Clock()
    knowledge = ReplicaKnowledge(clock=clock, cooldown=2.0)
    sessions = [
        make(
            level=level, replicas=REPLICAS, on_timeout=on_timeout, knowledge=knowledge, clock=clock
        )[0]
        for _ in range(3)
    ]
    own: list[GtidSet] = [GtidSet() for _ in sessions]
    seen_all: list[GtidSet] = [GtidSet() for _ in sessions]
    primary = GtidSet()
    applied = dict.fromkeys(REPLICAS, GtidSet())
    dead: set[str] = set()

    def answer(d: Decision) -> WaitOutcome:
        if d.target in dead:
            return WaitOutcome.FAILED
        assert d.wait_set is not None
        return WaitOutcome.REACHED if d.wait_set <= applied[d.target] else WaitOutcome.TIMED_OUT

    for op, arg in ops:
        if op == "write":
            i = int(arg)  # type: ignore[call-overload]
            gno = len(primary) + 1
            primary = primary.add_interval(UUID, gno, gno)
            own[i] = own[i].add_interval(UUID, gno, gno)
            seen_all[i] = primary
            reported = primary if level == "read_all_writes" else gs(f"{UUID}:{gno}")
            write(sessions[i], "INSERT INTO t VALUES (1)", reported)
        elif op == "apply":
            r = str(arg)
            gap = primary - applied[r]
            if gap:
                first = next(gap.intervals())[2]
                applied[r] = applied[r].add_interval(UUID, first, first)
        elif op == "tick":
            clock.advance(float(arg))  # type: ignore[arg-type]
        elif op == "die":
            dead.add(str(arg))
        elif op == "token":
            i = int(arg)  # type: ignore[call-overload]
            j = (i + 1) % len(sessions)
            sessions[j].require(sessions[i].token)
            own[j] = own[j] | own[i]
            seen_all[j] = seen_all[j] | seen_all[i]
        else:
            i = int(arg)  # type: ignore[call-overload]
            before = primary
            trace = drive(sessions[i], "SELECT v FROM t", waits=answer, primary_state=primary)
            final = trace.final
            if final.action is Action.FAIL:
                assert on_timeout == "error"
                assert isinstance(final.error, ConsistencyTimeout)
                continue
            assert final.action is Action.EXECUTE
            if final.target == PRIMARY:
                continue
            assert final.target not in dead or not trace.waits
            must_see = {
                "read_own_writes": own[i],
                "read_all_writes": seen_all[i] | own[i],
                "read_latest": before | own[i],
            }[level]
            assert must_see <= applied[final.target], (final, applied[final.target])


def test_state_a_replica_refuses_to_replay_pins_the_session() -> None:
    policy, _, _ = make()
    drive(policy, "SET SESSION some_setting = 1")
    first = policy.route(classify("SELECT 1"), "SELECT 1")
    assert first.target != PRIMARY
    d = policy.on_replay_failed(first)
    assert (d.action, d.target, d.reason_text) == (
        Action.EXECUTE,
        PRIMARY,
        "pinned(session_state)",
    )
    assert drive(policy, "SELECT 2").final.target == PRIMARY


def test_a_statement_a_replica_cannot_prepare_falls_back_to_the_primary_unpinned() -> None:
    policy, _, _ = make()
    first = policy.route(classify("SELECT 1"), "SELECT 1")
    assert first.target != PRIMARY
    d = policy.on_prepare_failed(first)
    assert (d.action, d.target, d.reason_text) == (
        Action.EXECUTE,
        PRIMARY,
        "timeout_fallback(prepare_error)",
    )
    assert d.wait_set is None
    assert not policy.pins
    assert drive(policy, "SELECT 2").final.target != PRIMARY


def test_a_prepare_failure_in_a_deferred_read_only_transaction_starts_it_on_the_primary() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    first = policy.route(classify("SELECT 1"), "SELECT 1")
    d = policy.on_prepare_failed(first)
    assert (d.target, d.prelude) == (PRIMARY, ((PRIMARY, READ_ONLY_BEGIN),))


def test_a_replay_failure_in_a_deferred_read_only_transaction_starts_it_on_the_primary() -> None:
    policy, _, _ = make()
    drive(policy, "START TRANSACTION READ ONLY")
    first = policy.route(classify("SELECT 1"), "SELECT 1")
    d = policy.on_replay_failed(first)
    assert (d.target, d.prelude) == (PRIMARY, ((PRIMARY, READ_ONLY_BEGIN),))
