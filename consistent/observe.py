"""The events a front end reports about a statement, and who hears them.

The DB-API wrapper, the asyncio wrapper and the proxy each report what happened to a routed
statement once, to one :class:`Observer`: the decisions the policy gave, each wait on a
replica, the GTIDs a write produced, a failure, a pinned backend connection, GTIDs a failover
lost.  Subscribers implement the events they care about:

* a statement span of :mod:`consistent.telemetry` records them all (and the routing metrics
  the telemetry pipeline derives from the span);
* the proxy's Prometheus counters (``proxy.metrics``) count the waits.

:class:`Fanout` hands each event to two observers, so that a call site makes one call per
event whoever listens.  The base class is the no-op observer (:data:`NOOP_OBSERVER`): every
method does nothing, so a front end without subscribers pays one method call per event and
allocates nothing.  The events carry the policy's public vocabulary (:class:`Decision
<consistent.policy.Decision>`, :class:`WaitOutcome <consistent.policy.WaitOutcome>`) and
:mod:`consistent.gtid` states, so that subscribers need none of the policy's internal modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from consistent.gtid import GtidState
    from consistent.policy import Decision, WaitOutcome

__all__ = ["NOOP_OBSERVER", "Fanout", "Observer"]


class Observer:
    """What a front end reports about the statement it runs now.  This base class ignores
    every event; subclasses override the ones they record."""

    __slots__ = ()

    def decision(self, decision: Decision) -> None:
        """The policy gave ``decision`` for this statement (the last one is the route; earlier
        ``WAIT`` ones are also reported through :meth:`wait`)."""

    def wait(
        self, decision: Decision, outcome: WaitOutcome, duration: float, *, pipelined: bool = False
    ) -> None:
        """The wait ``decision`` asked for ended with ``outcome`` after ``duration`` seconds;
        ``pipelined`` when it was sent in one round trip with the statement (the proxy)."""

    def produced(self, gtids: GtidState | str) -> None:
        """The primary reported GTIDs this statement produced: parsed, or the session
        tracker's raw text (the subscriber parses it when it needs to)."""

    def fail(self, exc: BaseException) -> None:
        """The statement failed with ``exc`` (reported where the exception does not end the
        statement's ``with`` block on its own)."""

    def pin(self, reasons: str) -> None:
        """The proxy keeps the session's pooled backend connection after the statement, for
        ``reasons`` (comma-separated pin reasons)."""

    def lost(self, gtids: str) -> None:
        """The session required ``gtids``, which the primary it follows never had (a failover
        lost them)."""


#: The observer nobody listens to.
NOOP_OBSERVER: Final = Observer()


class Fanout(Observer):
    """Each event to ``first``, then to ``second``.  Both are attributes: a front end keeps
    one fan-out per session and swaps the statement's span in and out of it, rather than
    allocating one per statement."""

    __slots__ = ("first", "second")

    def __init__(self, first: Observer, second: Observer) -> None:
        self.first = first
        self.second = second

    def decision(self, decision: Decision) -> None:
        self.first.decision(decision)
        self.second.decision(decision)

    def wait(
        self, decision: Decision, outcome: WaitOutcome, duration: float, *, pipelined: bool = False
    ) -> None:
        self.first.wait(decision, outcome, duration, pipelined=pipelined)
        self.second.wait(decision, outcome, duration, pipelined=pipelined)

    def produced(self, gtids: GtidState | str) -> None:
        self.first.produced(gtids)
        self.second.produced(gtids)

    def fail(self, exc: BaseException) -> None:
        self.first.fail(exc)
        self.second.fail(exc)

    def pin(self, reasons: str) -> None:
        self.first.pin(reasons)
        self.second.pin(reasons)

    def lost(self, gtids: str) -> None:
        self.first.lost(gtids)
        self.second.lost(gtids)
