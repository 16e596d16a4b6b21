"""What a front end runs around the policy's decisions (:mod:`consistent.policy.driver`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from consistent import flavors
from consistent.classify import classify
from consistent.flavors import Flavor
from consistent.policy import PRIMARY, SessionPolicy, Tracking
from consistent.policy.driver import ReadyKind, ReadyStep, is_ready, ready_steps, wait_query
from consistent.policy.session import Action

from .test_policy import drive, make


@dataclass
class Link:
    applied_seq: int = 0
    tracking: Tracking | None = None


def run(
    steps: object, probe_value: bytes | None = None, fail_at: int | None = None
) -> list[ReadyStep]:
    """Every step of a ready_steps generator, answering probes with ``probe_value``; stops
    (as a failing statement would) before step ``fail_at``."""
    seen: list[ReadyStep] = []
    gen = steps
    assert hasattr(gen, "send")
    value: bytes | None = None
    while True:
        try:
            step = gen.send(value)
        except StopIteration:
            return seen
        if fail_at is not None and len(seen) == fail_at:
            gen.close()
            return seen
        seen.append(step)
        value = probe_value if step.kind is ReadyKind.PROBE else None


def session(flavor: str = "mysql", level: str = "read_own_writes") -> SessionPolicy:
    policy, _, _ = make(flavor=flavor, level=level)
    drive(policy, "SET SESSION sql_mode = 'ANSI'")
    drive(policy, "USE shop")
    return policy


def test_a_replica_gets_the_session_state_then_all_gtids_on_mysql() -> None:
    policy = session()
    link = Link()
    steps = run(ready_steps(policy, flavors.MYSQL, link, primary=False))
    assert [s.kind for s in steps] == [ReadyKind.REPLAY, ReadyKind.REPLAY, ReadyKind.TRACKING]
    assert "sql_mode" in steps[0].sql
    assert "shop" in steps[1].sql
    assert steps[2].sql == "SET SESSION session_track_gtids = ALL_GTIDS"
    assert (link.applied_seq, link.tracking) == (policy.replay_seq, Tracking.ALL)
    assert run(ready_steps(policy, flavors.MYSQL, link, primary=False)) == []


def test_a_mariadb_replica_gets_no_tracker() -> None:
    policy = session("mariadb")
    link = Link()
    steps = run(ready_steps(policy, flavors.MARIADB, link, primary=False))
    assert [s.kind for s in steps] == [ReadyKind.REPLAY, ReadyKind.REPLAY]
    assert link.tracking is Tracking.ALL
    assert run(ready_steps(policy, flavors.MARIADB, link, primary=False)) == []


def test_only_what_came_since_is_replayed() -> None:
    policy = session()
    link = Link(applied_seq=policy.replay_seq, tracking=Tracking.ALL)
    drive(policy, "SET SESSION time_zone = '+00:00'")
    steps = run(ready_steps(policy, flavors.MYSQL, link, primary=False))
    assert [s.kind for s in steps] == [ReadyKind.REPLAY]
    assert "time_zone" in steps[0].sql


def test_a_failed_replay_leaves_the_link_behind() -> None:
    policy = session()
    link = Link()
    run(ready_steps(policy, flavors.MYSQL, link, primary=False), fail_at=1)
    assert (link.applied_seq, link.tracking) == (0, None)


def test_the_primary_tracker_follows_the_level_outside_transactions() -> None:
    policy = session(level="read_all_writes")
    link = Link()
    steps = run(ready_steps(policy, flavors.MYSQL, link, primary=True, replay=False))
    assert steps == [ReadyStep(ReadyKind.TRACKING, "SET SESSION session_track_gtids = ALL_GTIDS")]
    assert link.tracking is Tracking.ALL
    policy.level = "read_own_writes"
    drive(policy, "BEGIN")
    assert run(ready_steps(policy, flavors.MYSQL, link, primary=True, replay=False)) == []
    drive(policy, "COMMIT")
    steps = run(ready_steps(policy, flavors.MYSQL, link, primary=True, replay=False))
    assert [s.sql for s in steps] == ["SET SESSION session_track_gtids = OWN_GTID"]
    assert link.tracking is Tracking.OWN


def test_mariadb_probes_what_the_session_tracks_before_adding_last_gtid() -> None:
    policy = session("mariadb")
    link = Link()
    steps = run(
        ready_steps(policy, flavors.MARIADB, link, primary=True, replay=False),
        probe_value=b"autocommit",
    )
    assert steps[0] == ReadyStep(ReadyKind.PROBE, "SELECT @@SESSION.session_track_system_variables")
    assert [s.kind for s in steps[1:]] == [ReadyKind.TRACKING]
    assert "autocommit" in steps[1].sql
    assert "last_gtid" in steps[1].sql


@pytest.mark.parametrize("flavor", [flavors.MYSQL, flavors.MARIADB], ids=lambda f: f.name)
def test_the_wait_query_is_the_flavours_with_the_decisions_timeout(flavor: Flavor) -> None:
    policy, _, _ = make(flavor=flavor.name, wait_timeout=0.25)
    state = flavor.parse_state(
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5" if flavor is flavors.MYSQL else "0-1-5"
    )
    policy.observe_gtids(PRIMARY, state)
    d = policy.route(classify("SELECT 1"), "SELECT 1")
    assert d.action is Action.WAIT
    query = wait_query(policy, flavor, d)
    assert query.sql == flavor.wait_statement(state, 0.25)
    assert query.timeout == 0.25
    assert query.deadline > query.timeout


def test_a_decision_without_a_wait_set_has_no_wait_query() -> None:
    policy, _, _ = make()
    d = policy.route(classify("SELECT 1"), "SELECT 1")
    with pytest.raises(ValueError, match="waits for nothing"):
        wait_query(policy, flavors.MYSQL, d)


@pytest.mark.parametrize("primary", [True, False], ids=["primary", "replica"])
@pytest.mark.parametrize("flavor", [flavors.MYSQL, flavors.MARIADB], ids=lambda f: f.name)
def test_a_link_is_ready_exactly_when_it_has_no_steps(flavor: Flavor, primary: bool) -> None:
    policy = session(flavor.name)
    link = Link()
    for replay in (True, False):
        steps = ready_steps(policy, flavor, Link(), primary=primary, replay=replay)
        expected = run(steps, probe_value=b"") == []
        assert is_ready(policy, flavor, Link(), primary=primary, replay=replay) is expected
    run(ready_steps(policy, flavor, link, primary=primary), probe_value=b"")
    assert is_ready(policy, flavor, link, primary=primary)
    drive(policy, "SET SESSION time_zone = '+00:00'")
    assert not is_ready(policy, flavor, link, primary=primary)
    assert is_ready(policy, flavor, link, primary=primary, replay=False)
