"""What every front end runs around the policy's decisions, without doing any I/O.

The DB-API wrapper, its asyncio twin and the proxy each move bytes their own way (PyMySQL,
aiomysql, the proxy's backend connections), but what they send to make a server connection
fit for a session's statement, and what they send to wait, is decided here once:

* :func:`ready_steps`: what a connection must run before the session's next statement can go
  there.  The session's replayable state first (``SET`` statements, the schema: see
  :mod:`consistent.policy.replay`), then the GTID tracker: on the primary, what the session's
  level needs (:attr:`SessionPolicy.tracking <consistent.policy.session.SessionPolicy.tracking>`),
  changed only outside a transaction; on a MySQL replica, ``ALL_GTIDS``, so that its OK packets
  report its executed set (MariaDB has no such tracker).  The steps are a generator: the
  driver runs each statement, sends back the value of a :attr:`ReadyKind.PROBE`, and the
  generator records on the connection's :class:`LinkState` what has been applied as it goes;
* :func:`wait_query`: the statement that waits for a decision's wait set, and the socket
  deadline of its round trip.  The wait's value becomes the policy's outcome through
  :func:`consistent.policy.wait_outcome`.

A front end maps a failed step by its kind: a failed :attr:`ReadyKind.REPLAY` statement means
the session's state cannot follow to that server, and the policy decides what happens
(:meth:`~consistent.policy.session.SessionPolicy.on_replay_failed`), as it does for a
statement a replica cannot prepare
(:meth:`~consistent.policy.session.SessionPolicy.on_prepare_failed`); a failed tracker makes the
connection unusable.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from consistent.policy.deadlines import wait_deadline
from consistent.vocabulary import Tracking

if TYPE_CHECKING:
    from consistent.flavors import Flavor
    from consistent.policy.decision import Decision
    from consistent.policy.session import SessionPolicy

__all__ = [
    "LinkState",
    "ReadyKind",
    "ReadyStep",
    "ReadySteps",
    "WaitQuery",
    "is_ready",
    "ready_steps",
    "tracking_steps",
    "wait_query",
]


class ReadyKind(enum.Enum):
    """What a statement of :func:`ready_steps` is for (what its failure means)."""

    REPLAY = "replay"
    """Session state replayed: failing, the state cannot follow to this server."""
    PROBE = "probe"
    """A read whose single value the next step needs (send it back to the generator)."""
    TRACKING = "tracking"
    """The GTID tracker: failing, the connection cannot serve the session."""


@dataclass(frozen=True, slots=True)
class ReadyStep:
    """One statement to run on the connection."""

    kind: ReadyKind
    sql: str


class LinkState(Protocol):
    """What a front end keeps per server connection, read and updated by :func:`ready_steps`."""

    #: The replay sequence number the connection has applied up to.
    applied_seq: int
    #: The tracker it has on, ``None`` when none was turned on (a fresh connection).
    tracking: Tracking | None


ReadySteps = Generator[ReadyStep, "bytes | str | None", None]


def ready_steps(
    policy: SessionPolicy, flavor: Flavor, link: LinkState, *, primary: bool, replay: bool = True
) -> ReadySteps:
    """The statements ``link``'s connection needs before the session's next statement (none
    when it is ready); ``link`` is updated as each part completes.  ``replay`` false skips
    the session state (a primary connection that ran it all itself)."""
    if replay and link.applied_seq < policy.replay_seq:
        statements, seq = policy.replay_since(link.applied_seq)
        for sql in statements:
            yield ReadyStep(ReadyKind.REPLAY, sql)
        link.applied_seq = seq
    if primary:
        if not policy.in_transaction:
            yield from tracking_steps(flavor, link, policy.tracking)
    elif link.tracking is None:
        statement = flavor.replica_tracking_statement()
        if statement is not None:
            yield ReadyStep(ReadyKind.TRACKING, statement)
        link.tracking = Tracking.ALL


def is_ready(
    policy: SessionPolicy, flavor: Flavor, link: LinkState, *, primary: bool, replay: bool = True
) -> bool:
    """Whether :func:`ready_steps` has nothing for ``link`` to run (a front end's fast path
    sends the statement at once)."""
    if replay and link.applied_seq < policy.replay_seq:
        return False
    if primary:
        return link.tracking is policy.tracking or policy.in_transaction
    return link.tracking is not None or Tracking.ALL not in flavor.supported_modes


def tracking_steps(flavor: Flavor, link: LinkState, want: Tracking) -> ReadySteps:
    """Turn the primary connection's tracker to ``want`` unless it already is."""
    if link.tracking is want:
        return
    probe = flavor.tracking_probe()
    current = (yield ReadyStep(ReadyKind.PROBE, probe)) if probe is not None else None
    statement = flavor.tracking_statement(flavor.tracker(want), current)
    if statement is not None:
        yield ReadyStep(ReadyKind.TRACKING, statement)
    link.tracking = want


@dataclass(frozen=True, slots=True)
class WaitQuery:
    """The wait a decision asks for."""

    #: The ``SELECT`` of the flavour's wait function.
    sql: str
    #: The server-side timeout, seconds.
    timeout: float
    #: The round trip's socket deadline, seconds: the timeout and a margin.
    deadline: float


def wait_query(policy: SessionPolicy, flavor: Flavor, decision: Decision) -> WaitQuery:
    """The wait for ``decision``'s wait set on its target (the decision's timeout, else the
    policy's)."""
    wait_set = decision.wait_set
    if wait_set is None:
        raise ValueError(f"the decision waits for nothing: {decision.reason_text}")
    timeout = decision.wait_timeout or policy.config.wait_timeout
    return WaitQuery(flavor.wait_statement(wait_set, timeout), timeout, wait_deadline(timeout))
