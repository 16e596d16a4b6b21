"""What a process knows about its replicas, shared by every session of that process.

A replica's executed state only grows, so anything learnt once stays true until the server is
replaced: a successful wait proves the replica has the waited set, ALL_GTIDS tracking on a replica
connection and the background monitor report its whole executed state.  Sessions use that to skip
waits (DESIGN step 3) and to pick the replica most likely caught up (step 4).

Health: a replica whose connection failed (or missed a deadline) is left alone for a cool-down
that doubles with each consecutive failure (capped); one success clears the record.  Where a
background monitor watches the replica, it finds out when the replica is back: each failed poll
extends the cool-down and the first poll that succeeds after the failure clears it, so user
reads are never spent on probing, and a recovered replica serves again one interval after it
answers.  Without a monitor the replica is tried again once the cool-down ends.  A failure also
forgets the replica's executed state, because a reconnect may reach a rebuilt server whose state
went backwards.

Lag: the monitor of the primary records the primary's executed state as it grows
(:meth:`ReplicaKnowledge.record_primary_state`), a short history of when each state was first
seen, one per primary.  Each poll of a replica (:meth:`ReplicaKnowledge.record_poll`) is
compared with its primary's:

* *behind*: the replica lacks a state the primary had at time ``t``, so it is at least
  ``now - t`` behind (0 when it has the newest state seen);
* *apply delay*: the newest primary state the replica reached since its previous poll was first
  seen at ``t``; the replica lacked it at its previous poll, so it took at least
  ``previous poll - t`` to apply it.  Without new transactions the last delay is kept: it is
  what the next write will take (a delayed replica stays delayed while the primary is idle).

The estimate is the larger of the two, refreshed every poll.  A wait that timed out raises it to
at least the wait's timeout until the monitor sees the replica apply something newer.  The
policy does not wait on a replica whose estimate reaches ``wait_timeout``: the wait would time
out (DESIGN step 4).  All of it is lower bounds, so a replica that could serve is rarely skipped.

Evidence: each view also says when its executed state was learnt (:class:`Learned`: the wall
clock reading of the last time the state grew, and what made it grow), so that a statement's
span can show the audit *why* its replica was known to cover the read and since when (a state
learnt before the read began is proof that the replica had it when the read ran).
"""

from __future__ import annotations

import functools
import threading
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from consistent.gtid import GtidState
from consistent.policy.states import covers, merge

__all__ = ["KnownSource", "Learned", "ReplicaKnowledge", "ReplicaView", "process_knowledge"]

#: Primary states kept to estimate lag (one per monitor poll that saw the primary move: at
#: 200 ms polls under constant writes, the last 3 minutes and a half).
HISTORY_LIMIT = 1024


class KnownSource(StrEnum):
    """What last raised a replica's known executed state (``consistent.replica.known_source``
    in the traces)."""

    #: A wait for a set on that replica succeeded.
    WAIT = "wait"
    #: The replica's OK packets reported its executed state (MySQL ``ALL_GTIDS`` tracking on
    #: a replica connection).
    TRACKED = "tracked"
    #: The background monitor read it in a poll.
    MONITOR = "monitor"


@dataclass(frozen=True, slots=True)
class Learned:
    """When the process learnt a replica's known executed state, and from what: ``at_ns`` is
    the wall clock (``time.time_ns``, the clock of the spans) read after the answer that
    raised it last arrived, so the replica had executed the whole state by then (a state only
    grows, and every earlier part of it was learnt earlier still)."""

    at_ns: int
    source: KnownSource


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A snapshot of what is known about one replica (safe to keep: it never changes)."""

    name: str
    #: Lower bound of the replica's executed state; ``None`` when nothing is known.
    executed: GtidState | None = None
    #: Clock reading when ``executed`` was last raised.
    executed_at: float | None = None
    #: Estimated replication lag in seconds (monitor polls, or the time waits took).
    lag: float | None = None
    #: Clock reading of the last lag observation.
    lag_at: float | None = None
    #: Consecutive connection failures; 0 once the replica answers again.
    failures: int = 0
    #: Clock reading of the last failure.
    failed_at: float | None = None
    #: Until this clock reading the replica is cooling down and not chosen.
    unhealthy_until: float | None = None
    #: How many statements were routed here.
    picks: int = 0
    #: Order of the last pick among all picks of the process (0: never picked); the least
    #: recently picked of equally good replicas goes next, so they share the load.
    last_pick: int = 0
    #: Clock reading when the last successful monitor poll started.
    polled_at: float | None = None
    #: When and how ``executed`` was learnt (its last growth); ``None`` when it is.
    learned: Learned | None = None

    def healthy(self, now: float) -> bool:
        """True unless the replica is inside its cool-down."""
        return self.unhealthy_until is None or now >= self.unhealthy_until

    def fresh_executed(self, now: float, ttl: float) -> GtidState | None:
        """``executed`` if it was learnt less than ``ttl`` seconds ago: an old lower bound
        says little about how far behind the replica is now."""
        if self.executed_at is None or now - self.executed_at > ttl:
            return None
        return self.executed

    def current_lag(self, now: float, ttl: float) -> float | None:
        """The lag estimate if it is younger than ``ttl`` seconds: an old estimate says little
        (and ignoring it lets a replica that once lagged be tried again)."""
        if self.lag is None or self.lag_at is None or now - self.lag_at > ttl:
            return None
        return self.lag


class _Picks:
    """How often one replica was picked, and the order of its last pick: counters bumped in
    place, so a pick builds nothing."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0


def _probe() -> None:
    """Defined to tell, at import, whether this module runs compiled (see below)."""


#: True when this module runs compiled by mypyc (a compiled function is not a Python
#: function).  Compiled, bumping a native object's integer field runs no Python code, so no
#: other thread can run in the middle of it: a pick needs no lock.  From source, ``+=`` is a
#: read then a write that another thread may interleave with, so picks take the lock.
_NATIVE_INCREMENTS = not isinstance(_probe, types.FunctionType)


class ReplicaKnowledge:
    """Thread-safe store of :class:`ReplicaView` by replica name (its ``host:port``).

    ``clock`` is injected so tests control time; ``cooldown`` is the first cool-down after a
    failure, doubled per consecutive failure up to ``max_cooldown``; ``lag_smoothing`` is the
    weight of a new observation in the lag estimate's moving average; a lag estimate or an
    executed state older than ``ttl`` seconds is not used to rank replicas (an executed state
    is still used to skip waits: it never stops being true).  ``wall_clock`` (nanoseconds
    since the epoch) dates what is learnt for the traces (:class:`Learned`): it must be the
    clock the spans read.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        cooldown: float = 2.0,
        max_cooldown: float = 30.0,
        lag_smoothing: float = 0.3,
        ttl: float = 2.0,
        wall_clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._cooldown = cooldown
        self._max_cooldown = max_cooldown
        self._alpha = lag_smoothing
        self._ttl = ttl
        self._pick_seq = 0
        self._lock = threading.Lock()
        # Views without pick counts (those are in ``_picks``), and the empty view of each
        # replica nothing is known about yet, built once.
        self._views: dict[str, ReplicaView] = {}
        self._blank: dict[str, ReplicaView] = {}
        self._picks: dict[str, _Picks] = {}
        # Per primary (by name): (clock reading, state) each time a poll saw its state grow.
        self._histories: dict[str, list[tuple[float, GtidState]]] = {}

    @property
    def clock(self) -> Callable[[], float]:
        """The clock used for health decisions."""
        return self._clock

    def now(self) -> float:
        """The injected clock's current reading."""
        return self._clock()

    @property
    def ttl(self) -> float:
        """Seconds a lag estimate or executed state stays meaningful for ranking."""
        return self._ttl

    def view(self, name: str) -> ReplicaView:
        """What is known about ``name`` (an empty view for a replica never seen), with its
        pick counts."""
        view = self._views.get(name) or ReplicaView(name)
        picks = self._picks.get(name)
        if picks is None or not picks.count:
            return view
        return ReplicaView(
            view.name,
            view.executed,
            view.executed_at,
            view.lag,
            view.lag_at,
            view.failures,
            view.failed_at,
            view.unhealthy_until,
            picks.count,
            picks.last,
            view.polled_at,
            view.learned,
        )

    def views(self, names: Iterable[str]) -> tuple[ReplicaView, ...]:
        """Snapshots of several replicas, with their pick counts."""
        return tuple([self.view(n) for n in names])

    def current(self, name: str) -> ReplicaView:
        """What is known about ``name`` but its picks (``picks`` and ``last_pick`` are 0:
        see :meth:`last_pick`); the routing hot path, so it builds nothing."""
        view = self._views.get(name)
        if view is not None:
            return view
        view = self._blank.get(name)
        if view is None:
            view = self._blank.setdefault(name, ReplicaView(name))
        return view

    def last_pick(self, name: str) -> int:
        """Order of the last pick of ``name`` among all picks (0: never picked)."""
        picks = self._picks.get(name)
        return 0 if picks is None else picks.last

    def healthy(self, name: str) -> bool:
        """True unless ``name`` is cooling down after a failure."""
        return self.current(name).healthy(self._clock())

    def _update(self, name: str, **changes: object) -> ReplicaView:
        # Callers hold the lock.
        view = replace(self._views.get(name) or ReplicaView(name), **changes)  # type: ignore[arg-type]
        self._views[name] = view
        return view

    def _learned(self, source: KnownSource) -> Learned:
        return Learned(self._wall_clock(), source)

    def record_executed(
        self, name: str, state: GtidState, source: KnownSource = KnownSource.TRACKED
    ) -> None:
        """``name`` has executed at least ``state``, as ``source`` showed (by default what
        its OK packets reported: ALL_GTIDS tracking)."""
        with self._lock:
            current = self._views.get(name)
            known = current.executed if current is not None else None
            merged = merge(known, state)
            if current is None or merged != known:
                self._update(
                    name,
                    executed=merged,
                    executed_at=self._clock(),
                    learned=self._learned(source),
                )

    def record_wait(
        self, name: str, waited: GtidState, *, reached: bool, duration: float, timeout: float
    ) -> None:
        """Learn from a wait: a reached set is executed there, and how long the wait took (or
        that it took longer than ``timeout``) feeds the lag estimate."""
        with self._lock:
            current = self._views.get(name) or ReplicaView(name)
            sample = duration if reached else max(duration, timeout)
            lag = (
                sample
                if current.lag is None
                else (1 - self._alpha) * current.lag + (self._alpha * sample)
            )
            if not reached and current.lag is not None:
                lag = max(lag, timeout)
            now = self._clock()
            if reached:
                known = current.executed
                executed = merge(known, waited)
                learned = current.learned
                if executed != known or learned is None:
                    learned = self._learned(KnownSource.WAIT)
                self._update(
                    name,
                    executed=executed,
                    executed_at=now,
                    lag=lag,
                    lag_at=now,
                    learned=learned,
                )
            else:
                self._update(name, lag=lag, lag_at=now)

    def record_primary_state(self, primary: str, state: GtidState) -> None:
        """The whole executed state of the primary named ``primary`` (its address), as a
        monitor poll just read it.  A process may watch several primaries: each has its own
        history."""
        with self._lock:
            history = self._histories.setdefault(primary, [])
            if history:
                last = history[-1][1]
                if state == last:
                    return
                if type(state) is not type(last) or not covers(state, last):
                    history.clear()  # the primary went backwards: a rebuilt server
            history.append((self._clock(), state))
            if len(history) > HISTORY_LIMIT:
                del history[: len(history) - HISTORY_LIMIT]

    @staticmethod
    def _first_lacking(history: list[tuple[float, GtidState]], state: GtidState) -> int:
        """Index of the oldest primary state ``state`` does not cover (the length of the
        history when it covers them all).  The states only grow, so coverage is a prefix."""
        low, high = 0, len(history)
        while low < high:
            middle = (low + high) // 2
            if covers(state, history[middle][1]):
                low = middle + 1
            else:
                high = middle
        return low

    def _estimate_lag(
        self, primary: str | None, view: ReplicaView, state: GtidState, started: float
    ) -> float | None:
        """The lag of a replica of ``primary`` polled at ``started`` with ``state``, from the
        primary's history (see the module docstring); ``None`` when there is no history of
        that primary, in that flavour, to compare with."""
        history = self._histories.get(primary) if primary is not None else None
        if not history or type(history[-1][1]) is not type(state):
            return None
        lacking = self._first_lacking(history, state)
        behind = started - history[lacking][0] if lacking < len(history) else 0.0
        known = view.executed
        same = known is not None and type(known) is type(state)
        before = self._first_lacking(history, known) if known is not None and same else lacking
        if lacking > before:
            newest = history[lacking - 1][0]
            previous = view.polled_at if view.polled_at is not None else started
            applied = previous - newest
        else:
            applied = view.lag if view.lag is not None else 0.0
        return max(0.0, behind, applied)

    def record_poll(
        self, name: str, state: GtidState, *, started: float, primary: str | None = None
    ) -> None:
        """The background monitor read ``name``'s executed state ``state`` in a poll that
        started at clock reading ``started``: the replica answers (a failure recorded before
        the poll started is cleared), has executed ``state``, and lags what the history of its
        primary (named ``primary``) says."""
        with self._lock:
            current = self._views.get(name) or ReplicaView(name)
            now = self._clock()
            known = current.executed
            executed = merge(known, state)
            changes: dict[str, object] = {
                "executed": executed,
                "executed_at": now,
                "polled_at": started,
            }
            if executed != known or current.learned is None:
                changes["learned"] = self._learned(KnownSource.MONITOR)
            lag = self._estimate_lag(primary, current, state, started)
            if lag is not None:
                changes["lag"] = lag
                changes["lag_at"] = now
            failed_at = current.failed_at
            if failed_at is None or started >= failed_at:
                changes["failures"] = 0
                changes["unhealthy_until"] = None
            self._update(name, **changes)

    def record_lag(self, name: str, seconds: float) -> None:
        """A measured lag (monitor poll); replaces the estimate."""
        with self._lock:
            self._update(name, lag=max(0.0, float(seconds)), lag_at=self._clock())

    def record_failure(self, name: str) -> None:
        """The replica's connection failed: cool it down and forget its executed state."""
        with self._lock:
            current = self._views.get(name) or ReplicaView(name)
            failures = current.failures + 1
            now = self._clock()
            pause = min(self._max_cooldown, self._cooldown * 2 ** (failures - 1))
            self._update(
                name,
                executed=None,
                executed_at=None,
                learned=None,
                failures=failures,
                failed_at=now,
                unhealthy_until=now + pause,
            )

    def record_success(self, name: str, *, since: float | None = None) -> None:
        """The replica answered: clear its failure record.  ``since`` is when the request that
        got the answer was sent: an answer to a request older than the last failure proves
        nothing about the replica now, and clears nothing."""
        current = self._views.get(name)  # a racy read is fine: it only skips the lock
        if current is None or not (current.failures or current.unhealthy_until is not None):
            return
        with self._lock:
            current = self._views.get(name)
            if current is None or not (current.failures or current.unhealthy_until is not None):
                return
            failed_at = current.failed_at
            if since is not None and failed_at is not None and since < failed_at:
                return
            self._update(name, failures=0, unhealthy_until=None)

    def record_pick(self, name: str) -> None:
        """A statement was routed to ``name``.  (Every read comes here: two counters bumped
        in place, without the lock where that is safe, see ``_NATIVE_INCREMENTS``.)"""
        picks = self._picks.get(name)
        if picks is None:
            picks = self._picks.setdefault(name, _Picks())
        if _NATIVE_INCREMENTS:
            self._bump(picks)
        else:
            with self._lock:
                self._bump(picks)

    def _bump(self, picks: _Picks) -> None:
        seq = self._pick_seq + 1
        self._pick_seq = seq
        picks.count += 1
        picks.last = seq

    def forget(self, name: str) -> None:
        """Drop everything known about ``name`` (for example when the server is replaced)."""
        with self._lock:
            self._views.pop(name, None)
            self._picks.pop(name, None)


@functools.cache
def process_knowledge() -> ReplicaKnowledge:
    """The knowledge shared by every session of this process that was not given its own.

    This is the one piece of process state the policy keeps, on purpose: what a replica has
    executed is a fact about the server, not about a session (DESIGN "How a read gets to a
    replica", step 3).  Pass an explicit :class:`ReplicaKnowledge` to isolate sessions.
    """
    return ReplicaKnowledge()
