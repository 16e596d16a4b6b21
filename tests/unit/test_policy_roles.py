"""Role discovery (consistent/policy/roles.py): which server is the primary, from what the
servers say of themselves."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from consistent.policy.roles import RoleVerdict, ServerObservation, discover_roles

A, B, C = "10.0.0.1:3306", "10.0.0.2:3306", "10.0.0.3:3306"


def obs(
    address: str,
    *,
    read_only: bool | None,
    sources: frozenset[str] | None = frozenset(),
    reachable: bool = True,
) -> ServerObservation:
    return ServerObservation(address, reachable, read_only, sources)


def test_the_configured_primary_stays_while_it_is_the_one_writable_server() -> None:
    verdict = discover_roles(
        [
            obs(A, read_only=False),
            obs(B, read_only=True, sources=frozenset({A})),
            obs(C, read_only=True, sources=frozenset({A})),
        ],
        current=A,
    )
    assert verdict == RoleVerdict(A, (A,), split_brain=False)


def test_a_promoted_replica_becomes_the_primary() -> None:
    # A switchover: B stopped replicating and became writable, A is read-only and B's replica.
    verdict = discover_roles(
        [
            obs(A, read_only=True, sources=frozenset({B})),
            obs(B, read_only=False),
            obs(C, read_only=True, sources=frozenset({B})),
        ],
        current=A,
    )
    assert (verdict.primary, verdict.split_brain) == (B, False)


def test_a_writable_replica_is_a_misconfigured_replica_not_a_primary() -> None:
    verdict = discover_roles(
        [obs(A, read_only=False), obs(B, read_only=False, sources=frozenset({A}))], current=A
    )
    assert verdict == RoleVerdict(A, (A,), split_brain=False)


def test_midway_through_a_switchover_the_last_primary_stays_and_none_is_writable() -> None:
    verdict = discover_roles(
        [obs(A, read_only=True), obs(B, read_only=True), obs(C, read_only=True)], current=A
    )
    assert (verdict.primary, verdict.no_writable, verdict.split_brain) == (A, True, False)


def test_a_dead_primary_with_no_promotion_stays_the_primary() -> None:
    verdict = discover_roles(
        [obs(A, read_only=None, reachable=False), obs(B, read_only=True, sources=frozenset({A}))],
        current=A,
    )
    assert (verdict.primary, verdict.no_writable) == (A, True)


def test_two_writable_servers_are_split_brain_and_the_last_primary_stays() -> None:
    verdict = discover_roles(
        [obs(A, read_only=False), obs(B, read_only=False), obs(C, read_only=True)], current=A
    )
    assert verdict == RoleVerdict(A, (A, B), split_brain=True)


def test_servers_not_yet_observed_count_as_configured() -> None:
    verdict = discover_roles([obs(A, read_only=None), obs(B, read_only=None)], current=A)
    assert verdict == RoleVerdict(A, (A,), split_brain=False)
    # Writable, but whether it replicates is unknown (no privilege to ask): not a candidate.
    unknown = discover_roles(
        [obs(A, read_only=False, sources=None), obs(B, read_only=False, sources=None)], current=A
    )
    assert unknown == RoleVerdict(A, (A,), split_brain=False)


def test_a_server_that_replicates_is_no_candidate_whatever_its_source_is_called() -> None:
    # A replica may name its source by a host name the configuration does not use.
    verdict = discover_roles(
        [obs(A, read_only=False), obs(B, read_only=False, sources=frozenset({"db-a:3306"}))],
        current=B,
    )
    assert verdict == RoleVerdict(A, (A,), split_brain=False)


SERVERS = [f"10.0.0.{n}:3306" for n in range(1, 6)]
OBSERVATIONS = st.lists(
    st.builds(
        ServerObservation,
        st.sampled_from(SERVERS),
        st.booleans(),
        st.one_of(st.none(), st.booleans()),
        st.one_of(st.none(), st.frozensets(st.sampled_from(SERVERS), max_size=2)),
    ),
    max_size=5,
    unique_by=lambda o: o.address,
)


@given(OBSERVATIONS, st.sampled_from(SERVERS), st.randoms(use_true_random=False))
def test_a_verdict_names_the_unique_candidate_or_keeps_the_current_primary(
    seen: list[ServerObservation], current: str, rng: random.Random
) -> None:
    verdict = discover_roles(seen, current)
    candidates = sorted(
        o.address
        for o in seen
        if o.reachable
        and (o.read_only is False or (o.read_only is None and o.address == current))
        and (o.sources == frozenset() or (o.sources is None and o.address == current))
    )
    assert list(verdict.writable) == candidates
    assert verdict.split_brain == (len(candidates) > 1)
    assert verdict.primary == (candidates[0] if len(candidates) == 1 else current)
    shuffled = list(seen)
    rng.shuffle(shuffled)
    assert discover_roles(shuffled, current) == verdict  # the order of the servers is no input
