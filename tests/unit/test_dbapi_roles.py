"""The wrapper's shared roles: one verdict per topology from its monitors' observations, and
the options that steer it."""

from __future__ import annotations

import pytest

import consistent.dbapi as db
from consistent.dbapi.config import build_config, parse_url
from consistent.policy.roles import AllowList, OnSplitBrain, ServerObservation, SharedRoles

A, B, C = "10.0.0.1:3306", "10.0.0.2:3306", "10.0.0.3:3306"


def seen(
    address: str,
    *,
    read_only: bool | None,
    sources: frozenset[str] | None = None,
    reachable: bool = True,
) -> ServerObservation:
    return ServerObservation(address, reachable=reachable, read_only=read_only, sources=sources)


def test_a_replica_seen_first_does_not_take_the_primary_before_the_primary_is_seen() -> None:
    roles = SharedRoles(A, [A, B, C])
    # A misconfigured replica (writable, replicating from nobody), seen before anything else.
    roles.observe(seen(B, read_only=False, sources=frozenset()))
    assert roles.primary == A
    assert roles.split_brain  # A is unknown, so it counts as configured: two candidates
    roles.observe(seen(A, read_only=False, sources=frozenset()))
    assert (roles.primary, roles.changes) == (A, 0)


def test_the_primary_moves_when_only_the_promoted_server_accepts_writes() -> None:
    roles = SharedRoles(A, [A, B, C])
    roles.observe(seen(A, read_only=False, sources=frozenset()))
    roles.observe(seen(B, read_only=True, sources=frozenset({A})))
    roles.observe(seen(C, read_only=True, sources=frozenset({A})))
    assert (roles.primary, roles.changes, roles.split_brain) == (A, 0, False)
    roles.observe(seen(A, read_only=True, sources=frozenset()))  # the switchover starts
    assert roles.primary == A  # no candidate: the last known primary stays
    assert roles.verdict is not None
    assert roles.verdict.no_writable
    roles.observe(seen(B, read_only=False, sources=frozenset()))
    assert (roles.primary, roles.changes) == (B, 1)


def test_a_dead_primary_and_a_promoted_replica() -> None:
    roles = SharedRoles(A, [A, B])
    roles.observe(seen(A, read_only=False, sources=frozenset()))
    roles.observe(seen(A, read_only=False, sources=frozenset(), reachable=False))
    roles.observe(seen(B, read_only=False, sources=frozenset()))
    assert roles.primary == B


def test_servers_outside_the_topology_are_ignored() -> None:
    roles = SharedRoles(A, [A, B])
    roles.observe(seen(C, read_only=False, sources=frozenset()))
    assert roles.verdict is None
    assert roles.primary == A


def test_split_brain_keeps_the_known_primary_and_resolves() -> None:
    roles = SharedRoles(A, [A, B])
    roles.observe(seen(A, read_only=False, sources=frozenset()))
    roles.observe(seen(B, read_only=False, sources=frozenset()))
    assert (roles.primary, roles.split_brain) == (A, True)
    roles.observe(seen(B, read_only=True, sources=frozenset()))
    assert (roles.primary, roles.split_brain, roles.changes) == (A, False, 0)


def test_options_from_keywords_and_urls() -> None:
    config = build_config(primary=A, replicas=[B], discover_roles=False, on_split_brain="REFUSE")
    assert (config.discover_roles, config.on_split_brain) == (False, OnSplitBrain.REFUSE)
    defaults = build_config(primary=A, replicas=[B])
    assert (defaults.discover_roles, defaults.on_split_brain) == (True, OnSplitBrain.KEEP)
    parsed = parse_url(f"mysql://u@{A}/?replica={B}&discover_roles=off&on_split_brain=refuse")
    assert (parsed["discover_roles"], parsed["on_split_brain"]) == (False, "refuse")
    with pytest.raises(db.InterfaceError, match="on_split_brain must be"):
        build_config(primary=A, on_split_brain="panic")


def test_with_primary_swaps_the_roles_of_two_servers() -> None:
    config = build_config(primary=A, replicas=[B, C])
    moved = config.with_primary(C)
    assert moved.primary.name == C
    assert [s.name for s in moved.replicas] == [A, B]
    assert {s.name for s in moved.servers} == {A, B, C}


def test_listed_replicas_join_when_allowed_and_leave_when_no_longer_listed() -> None:
    roles = SharedRoles(A, [A, B])
    assert roles.listed(frozenset({B, C})) == (frozenset(), frozenset())  # discovery off
    roles.allow = AllowList.parse("10.0.0.0/24")
    version = roles.discovered_version
    assert roles.listed(frozenset({B, C, "192.168.1.1:3306"})) == (frozenset({C}), frozenset())
    assert roles.servers == {A, B, C}
    assert roles.discovered_version == version + 1
    roles.observe(seen(A, read_only=True, sources=frozenset()))
    roles.observe(seen(B, read_only=True, sources=frozenset({A})))
    roles.observe(seen(C, read_only=False, sources=frozenset()))  # a discovered one promoted
    assert roles.primary == C
    assert roles.listed(frozenset({A, B})) == (frozenset(), frozenset())  # it stays
    roles.observe(seen(C, read_only=True, sources=frozenset({A})))
    roles.observe(seen(A, read_only=False, sources=frozenset()))
    assert roles.primary == A
    assert roles.listed(frozenset({B})) == (frozenset(), frozenset({C}))
    assert roles.servers == {A, B}


def test_allow_lists() -> None:
    allow = AllowList.parse(["10.1.0.0/16", "DB9.example", "::1", ""])
    assert allow
    assert not AllowList.parse(None)
    assert allow.allows("10.1.2.3")
    assert not allow.allows("10.2.0.1")
    assert allow.allows("db9.example")
    assert allow.allows("[::1]")
    with pytest.raises(db.InterfaceError, match="neither a network nor a host name"):
        AllowList.parse("10.0.0.0/99")
