"""Forgetting the required set keeps the rest of the session (what a pool needs)."""

from __future__ import annotations

from consistent.policy import ReplicaKnowledge, SessionPolicy


def test_forget_required_empties_the_token_and_keeps_replayable_state() -> None:
    policy = SessionPolicy(replicas=["r:1"], knowledge=ReplicaKnowledge(), flavor="mariadb")
    policy.require("mariadb:0-1-5")
    policy.record_variable("time_zone", "'+00:00'")
    replay_before = policy.replay_since(0)
    assert policy.token == "mariadb:0-1-5"
    policy.forget_required()
    assert policy.token == ""
    assert policy.replay_since(0) == replay_before
    assert replay_before  # the session variable was recorded, so the check above means something
