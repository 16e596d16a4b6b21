"""Which replica to try: the one most likely to have caught up (DESIGN step 4).

Candidates are the session's healthy replicas not yet tried for this statement (and, at
``eventual`` with ``max_lag``, not known to lag more).  They are ranked by:

1. whether they are known to cover the required set (then no wait at all);
2. their recent lag (how long their waits took lately), in classes that double from 5 ms, so
   that noise does not count but a replica that just made a read wait goes after one that
   answered at once;
3. how much of the required set their recently learnt state lacks, in doubling classes;
4. how recently they were picked, so equally good replicas take turns;
5. consecutive failures, then name, so the order is deterministic.

A ``prefer``-red replica comes first while it is usable, unless it lags at least 20 ms and
another is known to lag at most a quarter as much (two lag classes less; an unknown lag is no
reason to move): a ``read_all_writes`` session keeps reading from the replica it last read
from, whose state only grows, so that its reads never go backwards, and moves (at the cost of
a round trip to the primary, see :class:`consistent.policy.session.SessionPolicy`) only to a
clearly fresher one.

What is known about a replica is a lower bound that ages: a lag or executed state older than
the knowledge's ``ttl`` ranks as unknown, and unknown ranks as good.  Otherwise the replica the
process happened to learn most about would take every read and the others would starve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from consistent.gtid import GtidState
from consistent.policy.knowledge import ReplicaKnowledge, ReplicaView
from consistent.policy.states import covers, distance

__all__ = ["best_replica", "lag_class", "rank_replicas"]

# Lags below this are all "caught up"; above it, each doubling is one class.
_LAG_FLOOR = 0.005
# A preferred replica is left for one this many lag classes fresher, from 20 ms of lag on.
_MOVE_CLASSES = 2
_MOVE_FROM_CLASS = 3


def lag_class(lag: float | None) -> int:
    """0 for an unknown lag or one below 5 ms, then one class per doubling."""
    if lag is None or lag < _LAG_FLOOR:
        return 0
    return 1 + math.floor(math.log2(lag / _LAG_FLOOR))


def _usable(
    knowledge: ReplicaKnowledge,
    replicas: Sequence[str],
    *,
    exclude: Sequence[str],
    max_lag: float | None,
    now: float,
    ttl: float,
) -> list[ReplicaView]:
    views = [v for v in knowledge.views(replicas) if v.healthy(now) and v.name not in exclude]
    if max_lag is not None:
        views = [v for v in views if (v.current_lag(now, ttl) or 0.0) <= max_lag]
    return views


def _rank_key(
    v: ReplicaView, required: GtidState | None, now: float, ttl: float
) -> tuple[bool, int, int, int, int, str]:
    """``required`` is ``None`` when nothing is required (never an empty state: the callers
    test emptiness once rather than once per replica)."""
    executed = v.executed
    if required is None or (executed is not None and covers(executed, required)):
        uncovered, gap = False, 0
    else:
        fresh = v.fresh_executed(now, ttl)
        uncovered, gap = True, 0 if fresh is None else distance(required, fresh)
    lag, lag_at = v.lag, v.lag_at  # ``v.current_lag``, inlined: every read ranks every replica
    fresh_lag = None if lag is None or lag_at is None or now - lag_at > ttl else lag
    return (
        uncovered,
        0 if fresh_lag is None or fresh_lag < _LAG_FLOOR else lag_class(fresh_lag),
        gap.bit_length(),
        v.last_pick,
        v.failures,
        v.name,
    )


def rank_replicas(
    knowledge: ReplicaKnowledge,
    replicas: Sequence[str],
    *,
    required: GtidState | None,
    exclude: Sequence[str] = (),
    max_lag: float | None = None,
) -> list[ReplicaView]:
    """The usable replicas among ``replicas``, best first."""
    now = knowledge.now()
    ttl = knowledge.ttl
    views = _usable(knowledge, replicas, exclude=exclude, max_lag=max_lag, now=now, ttl=ttl)
    if len(views) < 2:
        return views
    wanted = required or None
    views.sort(key=lambda v: _rank_key(v, wanted, now, ttl))
    return views


def best_replica(
    knowledge: ReplicaKnowledge,
    replicas: Sequence[str],
    *,
    required: GtidState | None,
    exclude: Sequence[str] = (),
    max_lag: float | None = None,
    prefer: str | None = None,
) -> tuple[ReplicaView, bool] | None:
    """The first of :func:`rank_replicas`, or ``prefer`` while it is usable and not clearly
    laggier (see the module docstring), and whether it is known to cover ``required`` (true
    when nothing is required); ``None`` when no replica is usable.  Routing only needs the
    best one: this finds it in one pass without sorting or building keys, and its coverage
    without a second check.  The view is :meth:`ReplicaKnowledge.current`'s: it does not
    carry the pick counts."""
    now = knowledge.now()
    ttl = knowledge.ttl
    wanted = required or None
    best: ReplicaView | None = None
    # The best one's key of ``_rank_key``, field by field (no tuple per replica).
    b_uncovered = b_lag_known = False
    b_lag = b_gap = b_pick = b_failures = 0
    preferred: ReplicaView | None = None
    p_uncovered = False
    p_lag = 0
    # One pass, the filters of ``_usable`` inlined: every read outside a transaction comes here.
    for name in replicas:
        if exclude and name in exclude:
            continue
        v = knowledge.current(name)
        until = v.unhealthy_until
        if until is not None and now < until:
            continue
        lag, lag_at = v.lag, v.lag_at  # ``v.current_lag``, inlined
        fresh_lag = None if lag is None or lag_at is None or now - lag_at > ttl else lag
        if max_lag is not None and (fresh_lag or 0.0) > max_lag:
            continue
        executed = v.executed
        if wanted is None or (executed is not None and covers(executed, wanted)):
            uncovered, gap = False, 0
        else:
            fresh = v.fresh_executed(now, ttl)
            uncovered, gap = True, 0 if fresh is None else distance(wanted, fresh).bit_length()
        lag_rank = 0 if fresh_lag is None or fresh_lag < _LAG_FLOOR else lag_class(fresh_lag)
        if name == prefer:
            preferred, p_uncovered, p_lag = v, uncovered, lag_rank
        pick = knowledge.last_pick(name)
        failures = v.failures
        if best is not None and not _before(
            uncovered=uncovered,
            lag=lag_rank,
            gap=gap,
            pick=pick,
            failures=failures,
            name=name,
            b_uncovered=b_uncovered,
            b_lag=b_lag,
            b_gap=b_gap,
            b_pick=b_pick,
            b_failures=b_failures,
            b_name=best.name,
        ):
            continue
        best = v
        b_uncovered, b_lag, b_gap, b_pick, b_failures = uncovered, lag_rank, gap, pick, failures
        b_lag_known = fresh_lag is not None
    if best is None:
        return None
    if preferred is not None and (
        p_lag < _MOVE_FROM_CLASS or not b_lag_known or p_lag - b_lag < _MOVE_CLASSES
    ):
        return preferred, not p_uncovered
    return best, not b_uncovered


def _before(
    *,
    uncovered: bool,
    lag: int,
    gap: int,
    pick: int,
    failures: int,
    name: str,
    b_uncovered: bool,
    b_lag: int,
    b_gap: int,
    b_pick: int,
    b_failures: int,
    b_name: str,
) -> bool:
    """Whether the first key ranks before the second (``_rank_key``'s order, unpacked so
    that no tuple is built per replica)."""
    if uncovered is not b_uncovered:
        return not uncovered
    if lag != b_lag:
        return lag < b_lag
    if gap != b_gap:
        return gap < b_gap
    if pick != b_pick:
        return pick < b_pick
    if failures != b_failures:
        return failures < b_failures
    return name < b_name
