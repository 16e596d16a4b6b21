"""The policy's answers: where a statement goes, what to wait for first, and why.

A routed statement is a short conversation between a driver (the DB-API wrapper or the proxy)
and :class:`~consistent.policy.session.SessionPolicy`: ``route()`` gives a first
:class:`Decision`; when its action is ``FETCH_PRIMARY_STATE`` or ``WAIT`` the driver does that
and reports the result, and gets the next decision, until one says ``EXECUTE`` (run the
statement), ``DEFER`` (send nothing now) or ``FAIL`` (raise ``decision.error``).  Each decision
carries everything a trace needs: the reason, the required set, the replica's known state (and
when and how it was learnt) and the wait set.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from consistent.classify import Classification
from consistent.errors import Error
from consistent.gtid import GtidState
from consistent.policy._fast import frozen_factory
from consistent.policy.config import Level
from consistent.policy.knowledge import Learned
from consistent.vocabulary import WaitOutcome

if TYPE_CHECKING:
    from consistent.flavors import Flavor

__all__ = [
    "PRIMARY",
    "Action",
    "Decision",
    "Reason",
    "RequiredSources",
    "WaitOutcome",
    "new_decision",
    "wait_outcome",
]

#: The target name of the primary.  Replicas are named by their address, so never clash.
PRIMARY: Final = "primary"


class Action(StrEnum):
    """What the driver must do next for the statement being routed."""

    #: Send the statement (after ``prelude``) to ``target``, then report success or failure.
    EXECUTE = "execute"
    #: Run the flavour's wait for ``wait_set`` on replica ``target`` (at most ``wait_timeout``
    #: seconds), then call ``SessionPolicy.on_wait``.
    WAIT = "wait"
    #: Read the primary's executed state (``read_latest``), then call
    #: ``SessionPolicy.on_primary_state``.
    FETCH_PRIMARY_STATE = "fetch_primary_state"
    #: Send nothing: a read-only ``BEGIN`` waits for its first statement to know its server, and
    #: ending a transaction that never reached a server has nothing to end.
    DEFER = "defer"
    #: Raise ``error`` (a consistency timeout with ``on_timeout="error"``, or a write inside a
    #: read-only transaction).
    FAIL = "fail"


class Reason(StrEnum):
    """Why a statement goes where it goes; lands in the statement's span."""

    #: A write, DDL, or a read that must see the primary (``detail`` says which).
    WRITE = "write"
    #: Transaction control, or a statement inside a transaction (``detail``: ``autocommit_off``
    #: when the transaction is implicit).
    IN_TRANSACTION = "in_transaction"
    #: The session holds state a replica cannot have (``detail``: temporary_table…).
    PINNED = "pinned"
    #: A session-state statement (``USE``, ``SET``): run on the primary, replayed on replicas.
    SESSION_STATE = "session_state"
    #: Diagnostics about the previous statement (``SHOW WARNINGS``): where that one ran.
    FOLLOWS_PREVIOUS = "follows_previous"
    #: A routing hint in the statement's leading comment (``detail``: primary/replica/level).
    HINT = "hint"
    #: A ``/* consistent: replica */`` hint on a statement that may write (a write, DDL, a
    #: locking read, ``GET_LOCK()``, a call of a function that may write…) was ignored: the
    #: statement runs on the primary (``detail`` says why it must).
    HINT_REFUSED = "hint_refused"
    #: Level ``eventual``: any healthy replica, no wait.
    EVENTUAL = "eventual"
    #: The session requires nothing yet: any healthy replica, no wait.
    NOTHING_REQUIRED = "nothing_required"
    #: The chosen replica is known to have executed the required set: no wait.
    KNOWN_COVERED = "known_covered"
    #: Waiting first (action ``WAIT``/``FETCH_PRIMARY_STATE``), or waited and caught up.
    WAITED = "waited"
    #: No replica caught up in time; the primary serves the read (``detail``: ``lag`` when
    #: every usable replica lags more than ``wait_timeout``, so nothing was waited for;
    #: ``replica_failed`` when the read's replica failed during it; ``wait_error``…).
    TIMEOUT_FALLBACK = "timeout_fallback"
    #: No replica caught up in time and ``on_timeout="error"`` (``detail``: ``lag`` when no
    #: wait was tried because every usable replica lags more than ``wait_timeout``).
    TIMEOUT_ERROR = "timeout_error"
    #: Every replica is cooling down after failures (or lags beyond ``max_lag``).
    NO_HEALTHY_REPLICA = "no_healthy_replica"
    #: The session has no replicas configured.
    NO_REPLICAS = "no_replicas"


def wait_outcome(flavor: Flavor, value: object) -> WaitOutcome:
    """The outcome to report for the value ``flavor``'s wait function returned (int, text or
    bytes, as a driver gives it): :meth:`consistent.flavors.Flavor.wait_outcome`."""
    return flavor.wait_outcome(value)


@dataclass(frozen=True, slots=True)
class RequiredSources:
    """Where a ``read_all_writes`` read's required set came from: it is the union of the three
    (they may overlap)."""

    #: The session's own: what the primary reported to it (its GTIDs; the primary's whole set
    #: under ``ALL_GTIDS``) and the tokens it required.
    own: GtidState | None
    #: What the session's earlier reads saw (what their servers were known to have).
    seen: GtidState | None
    #: What the primary had acknowledged to any session of the process (or the proxy) when
    #: the read was routed.
    acknowledged: GtidState | None


@dataclass(frozen=True, slots=True)
class Decision:
    """One step of routing a statement."""

    action: Action
    #: :data:`PRIMARY` or a replica's name.
    target: str
    reason: Reason
    #: The statement being routed (its classification).
    statement: Classification
    #: The level that governed this statement (a hint may override the session's).
    level: Level
    #: The statement's text as the driver gave it (replayed when it is session state).
    sql: str = ""
    #: Refines ``reason`` (pin reason, primary reason, hint…).
    detail: str | None = None
    #: The session's required set for this statement (after any primary-state fetch).
    required: GtidState | None = None
    #: What ``target`` was known to have executed when this decision was taken.
    known: GtidState | None = None
    #: When and how ``known`` was learnt (the evidence a trace gives of it).
    learned: Learned | None = None
    #: For ``WAIT``: the part of ``required`` the replica must still reach.
    wait_set: GtidState | None = None
    #: For ``WAIT``: seconds the wait may take.
    wait_timeout: float | None = None
    #: Replicas already tried (and abandoned) for this statement, in order.
    tried: tuple[str, ...] = ()
    #: Statements to send first, each with its own target: the deferred ``START TRANSACTION
    #: READ ONLY`` on the replica a read-only transaction lands on, or the ``COMMIT`` that ends
    #: it before a statement that leaves it.  Report them with ``on_prelude_done``.
    prelude: tuple[tuple[str, str], ...] = ()
    #: For ``FAIL``: the error to raise.
    error: Error | None = None
    #: For a read at ``read_all_writes``: where ``required`` came from.
    sources: RequiredSources | None = None
    #: True when the statement is being sent again because its replica failed during the
    #: read (lost, or silent past its deadline): it is not sent a third time.
    retry: bool = False

    @property
    def is_primary(self) -> bool:
        """True when the statement (or this step) goes to the primary."""
        return self.target == PRIMARY

    @property
    def reason_text(self) -> str:
        """``reason`` with its detail, as traces show it: ``pinned(temporary_table)``."""
        return f"{self.reason.value}({self.detail})" if self.detail else self.reason.value


#: ``Decision`` from all its fields, positionally, in declaration order (the routing hot path).
new_decision = frozen_factory(Decision)
