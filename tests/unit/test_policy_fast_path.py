"""``SessionPolicy.route``'s fast path and ``on_success``'s shortcut for statements that change
nothing: for any session state and any sequence of statements, the same decisions and the same
session state as the general rules (``_route_general`` and ``_apply`` for every statement)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.classify import Classification, StatementKind, classify
from consistent.gtid import GtidSet, GtidState, MariaPosition
from consistent.policy import (
    PRIMARY,
    Action,
    Decision,
    Level,
    Reason,
    ReplicaKnowledge,
    SessionPolicy,
)
from consistent.policy.states import FlavorName

A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
R1 = "10.0.0.2:3306"
R2 = "10.0.0.3:3306"

STATEMENTS = [
    "SELECT c FROM sbtest1 WHERE id = 7",
    "SELECT 1",
    "SELECT * FROM t FOR UPDATE",
    "SELECT GET_LOCK('x', 1)",
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET a = 2",
    "DELETE FROM t",
    "BEGIN",
    "START TRANSACTION READ ONLY",
    "START TRANSACTION READ WRITE",
    "COMMIT",
    "COMMIT AND CHAIN",
    "ROLLBACK",
    "SAVEPOINT s1",
    "RELEASE SAVEPOINT s1",
    "ROLLBACK TO SAVEPOINT s1",
    "SET @x = 1",
    "SET autocommit = 0",
    "SET autocommit = 1",
    "SET NAMES utf8mb4",
    "SET SESSION sql_mode = 'ANSI'",
    "USE shop",
    "CREATE TABLE t2 (a INT)",
    "CREATE TEMPORARY TABLE tmp (a INT)",
    "LOCK TABLES t READ",
    "UNLOCK TABLES",
    "SHOW WARNINGS",
    "SHOW TABLES",
    "DO 1",
    "/* consistent: primary */ SELECT 1",
    "/* consistent: replica */ SELECT 1",
    "/* consistent: level=eventual */ SELECT 1",
    "/* consistent: level=read_latest */ SELECT 1",
    "/* consistent: level=eventual max_lag=0.5 */ SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT 1; INSERT INTO t VALUES (1)",
]
# One classification per text, reused as a driver reuses a prepared statement's.
CLASSIFIED = {sql: classify(sql) for sql in STATEMENTS}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state_of(flavor: FlavorName, n: int) -> GtidState:
    if flavor == "mysql":
        return GtidSet.parse(f"{A}:1-{n}")
    return MariaPosition.parse(f"0-1-{n}")


@dataclasses.dataclass(frozen=True)
class Setup:
    flavor: FlavorName
    replicas: tuple[str, ...]
    level: Level
    autocommit: bool
    replica_states: tuple[int | None, ...]


def make(setup: Setup) -> SessionPolicy:
    # A fixed wall clock: the two paths' decisions carry when a state was learnt.
    knowledge = ReplicaKnowledge(clock=Clock(), wall_clock=lambda: 1_700_000_000_000_000_000)
    for name, n in zip(setup.replicas, setup.replica_states, strict=False):
        if n is not None:
            knowledge.record_executed(name, state_of(setup.flavor, n))
    policy = SessionPolicy(
        replicas=setup.replicas,
        knowledge=knowledge,
        flavor=setup.flavor,
        autocommit=setup.autocommit,
    )
    policy.level = setup.level
    return policy


def general_success(policy: SessionPolicy, d: Decision) -> None:
    """``on_success`` as the general rules have it: every part applied."""
    policy._last_target = d.target
    stmt = d.statement
    if d.level is Level.READ_ALL_WRITES and stmt.kind is StatementKind.READ:
        policy._unreported = d.target  # reads elsewhere fetch the primary's state first
    if d.target != PRIMARY:
        policy._served(d)
    for part in stmt.parts or (stmt,):
        policy._apply(part, d.target)


def comparable(d: Decision) -> tuple[Decision, str]:
    """A decision without its error (exceptions compare by identity), and the error's text."""
    return dataclasses.replace(d, error=None), repr(d.error)


def session_state(policy: SessionPolicy) -> tuple[object, ...]:
    return (
        policy.transaction,
        policy.pins,
        policy.autocommit,
        policy.required,
        policy.replay_since(0),
        policy.level,
        policy._last_target,
        policy._unreported,
    )


def drive(
    setup: Setup, steps: Sequence[tuple[str, int | None, str | None]]
) -> list[tuple[tuple[Decision, str], tuple[object, ...]]]:
    """Run the same steps through ``route``/``on_success`` and through the general rules;
    assert at every step that both agree; return what the fast side saw."""
    fast, general = make(setup), make(setup)
    seen = []
    for sql, gtid, token in steps:
        if token is not None:
            fast.require(token)
            general.require(token)
        stmt: Classification = CLASSIFIED[sql]
        d_fast = fast.route(stmt, sql)
        d_general = general._route_general(stmt, sql)
        assert comparable(d_fast) == comparable(d_general), sql
        if d_fast.action is Action.EXECUTE:
            fast.on_prelude_done(d_fast)
            general.on_prelude_done(d_general)
            fast.on_success(d_fast)
            general_success(general, d_general)
            if gtid is not None and d_fast.target == PRIMARY:
                produced = state_of(setup.flavor, gtid)
                fast.observe_gtids(PRIMARY, produced)
                general.observe_gtids(PRIMARY, produced)
        assert session_state(fast) == session_state(general), sql
        seen.append((comparable(d_fast), session_state(fast)))
    return seen


setups = st.builds(
    Setup,
    flavor=st.sampled_from(["mysql", "mariadb"]),
    replicas=st.sampled_from([(), (R1,), (R1, R2)]),
    level=st.sampled_from(list(Level)),
    autocommit=st.booleans(),
    replica_states=st.tuples(st.none() | st.integers(1, 20), st.none() | st.integers(1, 20)),
)
step = st.tuples(
    st.sampled_from(STATEMENTS),
    st.none() | st.integers(1, 20),
    st.none() | st.sampled_from([f"{A}:1-3", "0-1-3"]),
)


@settings(max_examples=300, deadline=None)
@given(setup=setups, steps=st.lists(step, min_size=1, max_size=25))
def test_fast_path_gives_the_general_decisions(
    setup: Setup, steps: list[tuple[str, int | None, str | None]]
) -> None:
    tokens_fit = [
        (sql, gtid, token if token is None or (":" in token) == (setup.flavor == "mysql") else None)
        for sql, gtid, token in steps
    ]
    drive(setup, tokens_fit)


def test_a_repeated_primary_read_reuses_its_decision_until_the_state_changes() -> None:
    policy = SessionPolicy(replicas=(), knowledge=ReplicaKnowledge(), flavor="mysql")
    stmt = CLASSIFIED["SELECT 1"]
    first = policy.route(stmt, "SELECT 1")
    assert (first.target, first.reason) == (PRIMARY, Reason.NO_REPLICAS)
    assert policy.route(stmt, "SELECT 1") is first
    policy.observe_gtids(PRIMARY, state_of("mysql", 4))
    after_write = policy.route(stmt, "SELECT 1")
    assert after_write is not first
    assert after_write.required == state_of("mysql", 4)
    policy.pin("user_variable")
    pinned = policy.route(stmt, "SELECT 1")
    assert (pinned.reason, pinned.detail) == (Reason.PINNED, "user_variable")
    policy.unpin("user_variable")
    policy.set_autocommit(False)
    implicit = policy.route(stmt, "SELECT 1")
    assert (implicit.reason, implicit.detail) == (Reason.IN_TRANSACTION, "autocommit_off")


def test_fast_path_covers_every_primary_reason_it_serves() -> None:
    """The drive above must actually reach the fast path's reasons (not only the general
    rules): one sequence that shows each."""
    setup = Setup("mysql", (), Level.READ_OWN_WRITES, True, (None, None))
    seen = drive(
        setup,
        [
            ("SELECT 1", None, None),
            ("INSERT INTO t VALUES (1)", 3, None),
            ("COMMIT", None, None),
            ("SET NAMES utf8mb4", None, None),
            ("SELECT * FROM t FOR UPDATE", None, None),
            ("SET @x = 1", None, None),
            ("SELECT 1", None, None),
        ],
    )
    reasons = [(d.reason, d.detail) for (d, _err), _state in seen]
    assert reasons == [
        (Reason.NO_REPLICAS, None),
        (Reason.WRITE, "write"),
        (Reason.IN_TRANSACTION, None),
        (Reason.SESSION_STATE, None),
        (Reason.WRITE, "for_update"),
        (Reason.SESSION_STATE, None),
        (Reason.PINNED, "user_variable"),
    ]
    assert seen[2][0][0].required == state_of("mysql", 3)
