"""``SessionPolicy``: one session's routing state machine (sans-I/O).

The machine is told what the session sends and what comes back, and answers where each
statement goes.  It never touches a socket, never sleeps and reads time only through the
knowledge's injected clock, so the DB-API wrapper and the proxy drive the very same rules.

Driving it, per statement::

    d = policy.route(classification, sql)
    while d.action in (Action.FETCH_PRIMARY_STATE, Action.WAIT):
        if d.action is Action.FETCH_PRIMARY_STATE:
            d = policy.on_primary_state(d, <the primary's executed state>)
        else:
            d = policy.on_wait(d, <WaitOutcome>, duration=<seconds>)
    if d.action is Action.FAIL: raise d.error
    if d.action is Action.EXECUTE:
        send d.prelude (each to its own target), then policy.on_prelude_done(d)
        send the statement to d.target
        policy.on_success(d)   or   retry = policy.on_error(d, connection_lost=...)

and whenever an OK packet arrives on any connection, ``policy.observe_gtids(target, state)``.

Where a statement goes (first rule that applies)
------------------------------------------------
1. Inside a transaction that has reached its server: that server.  On a replica (a read-only
   transaction) a write fails as mysqld would fail it (1792); a statement that implicitly
   commits ends the replica transaction and goes to the primary; session state goes to the
   primary and is replayed.
2. ``BEGIN``: read-write to the primary; ``READ ONLY`` is deferred until its first statement,
   which picks a replica (waiting as a read would) and starts the transaction there.
3. Transaction control outside a transaction, session state (``SET``/``USE``): the primary.
4. Diagnostics about the previous statement (``SHOW WARNINGS``): where that statement ran.
5. A ``/* consistent: primary */`` hint: the primary.  ``replica``: a replica, past rules 6-9,
   unless the statement may write (a write, DDL, a locking read, ``GET_LOCK()``, a call of a
   function that may write, ``SELECT … INTO``…): hints never override safety, so it runs on
   the primary with reason ``hint_refused``.  A hint may override only what ties a read to the
   primary session without writing (``LAST_INSERT_ID()``, a user variable read…).
6. A multi-statement that is not all reads, a write, DDL, or a read that must see the primary
   (``FOR UPDATE``, ``GET_LOCK``…): the primary.
7. Autocommit off: the primary (every statement is part of a transaction).
8. Pinned session (temporary table, user variable, ``LOCK TABLES``…): the primary.
9. A read: a replica chosen by :func:`~consistent.policy.selection.rank_replicas`, with no
   wait when it is known to cover the required set, else after waiting for what it lacks; on
   timeout ``on_timeout`` decides; no usable replica: the primary.  A replica whose lag
   estimate reaches ``wait_timeout`` is not waited on (the wait would time out): the next one
   is, and when none is left ``on_timeout`` decides at once (detail ``lag``).

Failures: a replica that cannot be reached during a wait is marked unhealthy and the next
replica is tried.  A replica that fails during a read outside a transaction (lost, or silent
past its deadline) is marked unhealthy and the read is sent once more, as ``on_timeout`` says
(:meth:`SessionPolicy.on_error`); inside a transaction, or on the primary, the error stands.

How each level gets its required set
------------------------------------
* ``read_own_writes``: the GTIDs the primary reports for this session (MySQL ``OWN_GTID``,
  MariaDB ``last_gtid``).  On MariaDB a position also covers every earlier transaction of the
  same domain, so this is never weaker than on MySQL.
* ``read_all_writes``, on both flavours, from what the process already receives (no round
  trip): every GTID the primary reported to any session of the process (or of the proxy)
  feeds the shared :class:`~consistent.policy.acknowledged.AcknowledgedWrites`, and a read
  requires its state as it is when the read is routed (part one: every write acknowledged
  before the read began).  After a read on a replica, what that replica was known to have
  executed when it served the read joins the required set, and so does what a replica reports
  about itself in its OK packets (MySQL ``ALL_GTIDS`` on replica connections).  On MySQL the
  session's primary connection tracks ``ALL_GTIDS``, so its commits report the primary's whole
  set, which is more than enough.  Part two, reads do not go backwards: a read may see more
  than its replica was known to have (a write another session committed but has not yet had
  acknowledged), so the session keeps reading from the replica it last read from, whose state
  only grows, unless another is clearly fresher
  (:func:`~consistent.policy.selection.best_replica`).
  When a read goes elsewhere (that replica failed, lags past ``wait_timeout`` or is clearly
  staler, or the last read ran on the primary) and what the last read saw was not reported
  exactly, the read first fetches the primary's executed state, which covers it.
* ``read_latest``: every read that would go to a replica first fetches the primary's executed
  state (one primary round trip per read), merged into the required set.
* ``eventual``: nothing is waited for, though the session's own GTIDs are still collected so that
  its token stays meaningful if the level is raised later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from consistent import errors
from consistent.classify import Classification, PrimaryReason, RouteTarget, StatementKind
from consistent.classify.session import replay_sql
from consistent.errnos import ER
from consistent.errors import ConsistencyTimeout, OperationalError
from consistent.gtid import GtidState
from consistent.policy._fast import frozen_factory
from consistent.policy.acknowledged import AcknowledgedWrites
from consistent.policy.config import Level, OnTimeout, PolicyConfig, Tracking
from consistent.policy.decision import (
    PRIMARY,
    Action,
    Decision,
    Reason,
    RequiredSources,
    WaitOutcome,
    new_decision,
)
from consistent.policy.knowledge import Learned, ReplicaKnowledge, ReplicaView
from consistent.policy.replay import SCHEMA_KEY, SessionStateLog, quote_schema
from consistent.policy.selection import best_replica
from consistent.policy.states import (
    FlavorName,
    empty_state,
    format_token,
    merge,
    missing,
)
from consistent.policy.states import parse_token as _parse_token

__all__ = ["READ_ONLY_BEGIN", "SessionPolicy", "Transaction"]

logger = logging.getLogger(__name__)

#: Sent on the server a read-only transaction lands on.  A deferred ``START TRANSACTION``'s
#: other options do not matter: it is sent right before the first statement, which is when
#: InnoDB takes the snapshot anyway.
READ_ONLY_BEGIN = "START TRANSACTION READ ONLY"
#: Ends a read-only transaction on its replica before a statement that leaves it.
END_TRANSACTION = "COMMIT"
# mysqld's ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
_SQLSTATE_READ_ONLY_TRANSACTION = "25006"
# Handled by the autocommit mode itself rather than as a pin.
_AUTOCOMMIT_PIN = "autocommit_off"
# Session state a replica refused to replay.
_SESSION_STATE_PIN = "session_state"
# Details of a fallback: the read's replica failed during it; every replica lags too much;
# the replica refused to prepare the statement.
_REPLICA_FAILED = "replica_failed"
_PREPARE_FAILED = "prepare_error"
_LAGGING = "lag"

_K = StatementKind
_ENDS_TRANSACTION = frozenset({_K.COMMIT, _K.ROLLBACK})
# Kinds whose success opens or closes the session's transaction.
_CHANGES_TRANSACTION = frozenset({_K.TRANSACTION_BEGIN, *_ENDS_TRANSACTION})
_SAVEPOINTS = frozenset({_K.SAVEPOINT, _K.RELEASE_SAVEPOINT, _K.ROLLBACK_TO_SAVEPOINT})
# Kinds that must not run on a replica even inside a read-only transaction there.
_LEAVES_REPLICA = frozenset({_K.DDL, _K.LOCK, _K.OTHER})
# Outside a transaction, the reasons of the kinds that go to the primary whatever they say
# (the others, but for reads and ``BEGIN``, are writes).
_PRIMARY_REASONS = {
    **{
        kind: Reason.IN_TRANSACTION
        for kind in _K
        if kind.is_transaction_control and kind is not _K.TRANSACTION_BEGIN
    },
    _K.SESSION_STATE: Reason.SESSION_STATE,
}
# A write's detail when the classifier gives no primary reason.
_KIND_DETAIL = {kind: kind.name.lower() for kind in _K}
_FUNCTION_CALL = PrimaryReason.FUNCTION_CALL.value
# What ties a read to the primary without writing anything: a replica hint may override it.
_HINT_OVERRIDABLE = frozenset(
    {
        PrimaryReason.LAST_INSERT_ID.value,
        PrimaryReason.FOUND_ROWS.value,
        PrimaryReason.ROW_COUNT.value,
        PrimaryReason.CONNECTION_ID.value,
        PrimaryReason.SQL_CALC_FOUND_ROWS.value,
        PrimaryReason.USER_VARIABLE.value,
        PrimaryReason.SERVER_STATE.value,
        PrimaryReason.MULTI_STATEMENT.value,
    }
)
_EXECUTE = Action.EXECUTE
_READ_ALL_WRITES = Level.READ_ALL_WRITES
_READ_LATEST = Level.READ_LATEST
_EVENTUAL = Level.EVENTUAL
_new_sources = frozen_factory(RequiredSources)


@dataclass(frozen=True, slots=True)
class Transaction:
    """The session's explicit transaction."""

    read_only: bool
    #: The server the transaction runs on; ``None`` while a read-only ``BEGIN`` is deferred.
    server: str | None

    @property
    def pending(self) -> bool:
        """True while the transaction waits for its first statement to pick its server."""
        return self.server is None


class _Seed(NamedTuple):
    """What a first decision is derived from (a :class:`Decision` serves the same purpose for
    the later steps of a statement)."""

    statement: Classification
    level: Level
    sql: str
    tried: tuple[str, ...] = ()
    wait_set: GtidState | None = None
    sources: RequiredSources | None = None
    retry: bool = False


_SeedLike = _Seed | Decision


def _inert(stmt: Classification) -> bool:
    """True when the success of ``stmt`` (a single statement) changes nothing that
    :meth:`SessionPolicy._apply` tracks, whatever the session's state."""
    return (
        stmt.kind not in _CHANGES_TRANSACTION
        and not stmt.implicit_commit
        and stmt.sets_autocommit is None
        and stmt.schema is None
        and not stmt.session_variables
        and stmt.pins_session is None
        and stmt.unpins_session is None
    )


def _hint_target(stmt: Classification) -> RouteTarget | None:
    hint = stmt.hint
    return hint.target if hint is not None else None


def _replica_hint_allowed(stmt: Classification) -> bool:
    """True when a replica hint may send ``stmt`` to a replica: every statement in it is a read
    that nothing but the primary session's state ties to the primary."""
    for part in stmt.parts or (stmt,):
        if part.kind is not _K.READ:
            return False
        reason = part.primary_reason
        if part.must_use_primary and (reason is None or reason not in _HINT_OVERRIDABLE):
            return False
    return True


def _primary_detail(stmt: Classification) -> str:
    """The detail of a statement that needs the primary: its primary reason (with the
    functions a ``function_call`` calls), else its kind."""
    reason = stmt.primary_reason
    if reason is None:
        return _KIND_DETAIL[stmt.kind]
    if reason == _FUNCTION_CALL and stmt.functions:
        return reason + ":" + ",".join(stmt.functions)
    return reason


class SessionPolicy:
    """The routing state of one session: required set, transaction, pins, session state.

    ``replicas`` are the names (``host:port``) of the session's replicas; ``knowledge`` and
    ``acknowledged`` (what the primary acknowledged to any of them) are shared by the sessions
    of a process, ``acknowledged`` per primary; without one, the session has its own and
    ``read_all_writes`` covers only what it was told itself.  ``flavor`` is ``"mysql"`` or
    ``"mariadb"``; ``autocommit`` is the connection's initial mode.
    """

    def __init__(
        self,
        *,
        replicas: Sequence[str],
        knowledge: ReplicaKnowledge,
        flavor: FlavorName,
        config: PolicyConfig | None = None,
        autocommit: bool = True,
        acknowledged: AcknowledgedWrites | None = None,
    ) -> None:
        if PRIMARY in replicas:
            raise ValueError(f"{PRIMARY!r} cannot name a replica")
        self._replicas = tuple(dict.fromkeys(replicas))
        self._knowledge = knowledge
        self._acknowledged = acknowledged if acknowledged is not None else AcknowledgedWrites()
        self._flavor: FlavorName = flavor
        self._config = config if config is not None else PolicyConfig()
        self._initial_autocommit = autocommit
        self._autocommit = autocommit
        # The required set (the token) is the union of what the primary reported to this
        # session and the tokens it required (``_own``), what its reads saw (``_seen``) and the
        # acknowledged states its read_all_writes reads required.  It is the very object
        # ``_own`` while nothing else was added.
        self._own: GtidState = empty_state(flavor)
        self._required: GtidState = self._own
        self._seen: GtidState | None = None
        # The acknowledged state last merged, and the last state a read saw: merged again only
        # when they change (they are immutable, so identity says it).
        self._merged_ack: GtidState | None = None
        self._last_saw: GtidState | None = None
        self._txn: Transaction | None = None
        self._pins: dict[str, None] = {}
        self._log = SessionStateLog()
        self._last_target = PRIMARY
        # The last statement known to change nothing in the session when it succeeds, and the
        # fast path's last decision (a repeated statement gets it again while nothing changed).
        self._inert: Classification | None = None
        self._last_primary: Decision | None = None
        # The fast path's last decision on each replica, and the last sources of a
        # read_all_writes read's required set (both reused while nothing in them changed).
        self._last_replica: dict[str, Decision] = {}
        self._sources: RequiredSources | None = None
        # At read_all_writes: the server of the session's last read until it reports its
        # whole executed set (until then, a read elsewhere first fetches the primary's state).
        self._unreported: str | None = None

    # ----------------------------------------------------------------- what the session is

    @property
    def replicas(self) -> tuple[str, ...]:
        """The session's replica names."""
        return self._replicas

    @replicas.setter
    def replicas(self, names: Sequence[str]) -> None:
        """The session's replicas from now on (role discovery moved the primary)."""
        if PRIMARY in names:
            raise ValueError(f"{PRIMARY!r} names the primary, not a replica")
        self._replicas = tuple(dict.fromkeys(names))

    @property
    def knowledge(self) -> ReplicaKnowledge:
        """The process-wide replica knowledge this session reads and feeds."""
        return self._knowledge

    @property
    def acknowledged(self) -> AcknowledgedWrites:
        """What the primary acknowledged to the sessions of this process (shared)."""
        return self._acknowledged

    @property
    def flavor(self) -> FlavorName:
        """``"mysql"`` or ``"mariadb"``."""
        return self._flavor

    @property
    def config(self) -> PolicyConfig:
        """The session's routing configuration (settable)."""
        return self._config

    @config.setter
    def config(self, config: PolicyConfig) -> None:
        self._config = config

    @property
    def level(self) -> Level:
        """The session's consistency level; settable at any time."""
        return self._config.level

    @level.setter
    def level(self, level: Level | str) -> None:
        self.config = replace(self._config, level=Level.parse(level))

    @property
    def tracking(self) -> Tracking:
        """The tracker the primary connection needs at the current level, on this session's
        flavour."""
        return self._config.tracking_on(self._flavor)

    @property
    def required(self) -> GtidState:
        """What a read must see at read_own_writes (may be empty); at read_all_writes, the
        acknowledged state when the read is routed is added to it."""
        return self._required

    @property
    def seen(self) -> GtidState | None:
        """What the session's reads at read_all_writes (and read_latest) are known to have
        seen, beyond its own writes (part of :attr:`required`)."""
        return self._seen

    @property
    def token(self) -> str:
        """The required set as a consistency token (``""`` when nothing is required)."""
        return format_token(self._required)

    def require(self, token: object) -> None:
        """Merge a token from another session (raises ``MalformedGtidSet``, 1772, for
        anything that is not a token's text: ``object``, so that the compiled build checks
        nothing before :func:`parse_token` does and answers as the source does)."""
        self._add_own(_parse_token(token, self._flavor))

    def forget_required(self) -> None:
        """Require nothing any more, keeping every other piece of session state: for a pooled
        connection handed to another logical session, which brings its own token.  (The
        process's acknowledged state is not the session's: it still applies.)"""
        self._own = self._required = empty_state(self._flavor)
        self._seen = self._merged_ack = self._last_saw = None
        self._unreported = None

    def _add_own(self, state: GtidState) -> None:
        previous = self._own
        own = merge(previous, state) or previous
        self._own = own
        required = self._required
        self._required = own if required is previous else (merge(required, state) or required)

    def _saw(self, state: GtidState) -> None:
        """A read of this session saw at least ``state``: later reads must too."""
        if state is self._last_saw or not state:
            return
        self._last_saw = state
        self._seen = merge(self._seen, state)
        self._required = merge(self._required, state) or self._required

    @property
    def autocommit(self) -> bool:
        """The session's autocommit mode as last set."""
        return self._autocommit

    def set_autocommit(self, value: bool) -> None:
        """The driver changed autocommit without SQL (``conn.autocommit(True)``).  Turning it
        on commits an open transaction on the primary, as the server does."""
        txn = self._txn
        if value and txn is not None and txn.server == PRIMARY:
            self._txn = None
        self._autocommit = bool(value)

    @property
    def transaction(self) -> Transaction | None:
        """The open explicit transaction, if any."""
        return self._txn

    @property
    def in_transaction(self) -> bool:
        """True inside an explicit transaction (deferred or started)."""
        return self._txn is not None

    @property
    def pins(self) -> tuple[str, ...]:
        """Why the session is pinned to the primary, in the order the reasons appeared."""
        return tuple(self._pins)

    @property
    def pinned(self) -> str | None:
        """The first pin reason, or ``None`` when the session may use replicas."""
        return next(iter(self._pins), None)

    def pin(self, reason: str) -> None:
        """Pin the session to the primary (it holds state a replica cannot have)."""
        if reason != _AUTOCOMMIT_PIN:
            self._pins.setdefault(reason, None)

    def unpin(self, reason: str) -> None:
        """Release one pin reason (``UNLOCK TABLES`` releases ``lock_tables``)."""
        self._pins.pop(reason, None)

    # ----------------------------------------------------------------- session state replay

    @property
    def replay_seq(self) -> int:
        """Number of the newest replayable session-state statement."""
        return self._log.seq

    def replay_since(self, seq: int) -> tuple[tuple[str, ...], int]:
        """Statements a replica connection that applied everything up to ``seq`` must run to
        carry the session's state (schema, character set, session variables), and the number
        it reaches by running them."""
        return self._log.since(seq)

    def record_schema(self, schema: str) -> None:
        """The session's default schema changed (``USE``, ``select_db()``)."""
        self._log.record(SCHEMA_KEY, quote_schema(schema))

    def record_variable(self, name: str, value_sql: str) -> None:
        """A session setting changed (as ``Classification.session_variables`` reports it)."""
        self._log.record(name, replay_sql(name, value_sql))

    def reset(self) -> None:
        """Forget the session (a connection reset, or a pooled connection handed to a new
        user): required set, transaction, pins, session state.  The driver resets its replica
        connections too."""
        self.forget_required()
        self._txn = None
        self._pins.clear()
        self._log.clear()
        self._autocommit = self._initial_autocommit
        self._last_target = PRIMARY

    # ----------------------------------------------------------------- routing

    def route(self, stmt: Classification, sql: str = "") -> Decision:
        """The first decision for a statement the session is about to send (``sql`` is its
        text, kept on the decision for tracing).

        Most statements take the fast path: outside a transaction, without a hint and not
        following the previous statement, every rule but a replica read names the primary
        from the statement's kind and the session's flags alone, so the decision is built in
        one step (or is the previous one again, for the same statement in the same state).  It
        gives exactly the decision of the general rules (:meth:`_route_general`), which serve
        everything else."""
        if self._txn is None and stmt.hint is None and not stmt.follows_previous:
            kind = stmt.kind
            detail: str | None = None
            if kind is _K.READ and not stmt.must_use_primary:
                if not self._autocommit:
                    reason, detail = Reason.IN_TRANSACTION, _AUTOCOMMIT_PIN
                elif self._pins:
                    reason, detail = Reason.PINNED, next(iter(self._pins))
                elif self._replicas:
                    return self._fast_read(stmt, sql)
                else:
                    reason = Reason.NO_REPLICAS
            elif kind is _K.TRANSACTION_BEGIN:
                return self._route_general(stmt, sql)
            else:
                fixed = _PRIMARY_REASONS.get(kind)
                if fixed is None:
                    reason, detail = Reason.WRITE, _primary_detail(stmt)
                else:
                    reason = fixed
            level = self._config.level
            required = self._required
            last = self._last_primary
            if (
                last is not None
                and last.statement is stmt
                and last.reason is reason
                and last.required is required
                and last.level is level
                and last.detail == detail
                and last.sql == sql
            ):
                return last  # decisions are immutable: an equal one serves again
            last = new_decision(
                _EXECUTE,
                PRIMARY,
                reason,
                stmt,
                level,
                sql,
                detail,
                required,
                None,
                None,
                None,
                None,
                (),
                (),
                None,
                None,
                False,
            )
            self._last_primary = last
            return last
        return self._route_general(stmt, sql)

    def _fast_read(self, stmt: Classification, sql: str) -> Decision:
        """:meth:`_route_read` for a read on :meth:`route`'s fast path (no transaction, no
        hint, nothing tried yet) that needs no wait: the best replica, and the decision taken
        there last time when nothing in it changed (decisions are immutable), else a new one.
        Everything else (read_latest, a wait, no usable replica) goes the general way."""
        level = self._config.level
        if level is _READ_LATEST:
            return self._route_read(_Seed(stmt, level, sql), fetched=False)
        sources: RequiredSources | None = None
        if level is _EVENTUAL:
            required = None
            found = best_replica(
                self._knowledge, self._replicas, required=None, max_lag=self._config.max_lag
            )
        else:
            if level is _READ_ALL_WRITES:
                sources = self._acknowledged_sources()
            required = self._required
            prefer = self._unreported if level is _READ_ALL_WRITES else None
            found = best_replica(self._knowledge, self._replicas, required=required, prefer=prefer)
            if found is not None and prefer is not None and prefer != found[0].name:
                found = None  # the read moves: the general way fetches the primary's state
        if found is None:
            return self._route_read(_Seed(stmt, level, sql), fetched=False)
        best, covered = found
        if required is None:
            reason = Reason.EVENTUAL
        elif not required:
            reason = Reason.NOTHING_REQUIRED
        elif covered:
            reason = Reason.KNOWN_COVERED
        else:
            return self._route_read(_Seed(stmt, level, sql), fetched=False)
        name = best.name
        known = best.executed
        learned = best.learned
        self._knowledge.record_pick(name)
        current = self._required
        last = self._last_replica.get(name)
        if (
            last is not None
            and last.statement is stmt
            and last.reason is reason
            and last.required is current
            and last.known is known
            and last.learned is learned
            and last.sources is sources
            and last.level is level
            and last.sql == sql
        ):
            return last
        last = new_decision(
            _EXECUTE,
            name,
            reason,
            stmt,
            level,
            sql,
            None,
            current,
            known,
            learned,
            None,
            None,
            (),
            (),
            None,
            sources,
            False,
        )
        self._last_replica[name] = last
        return last

    def _route_general(self, stmt: Classification, sql: str) -> Decision:
        """:meth:`route` by every rule, in the order the module docstring gives them."""
        hint = stmt.hint
        level = self._config.level
        if hint is not None and hint.level is not None:
            level = Level.parse(hint.level)
        seed = _Seed(stmt, level, sql)
        txn = self._txn
        if txn is not None and not txn.pending:
            return self._route_in_transaction(seed, txn.server or PRIMARY)
        kind = stmt.kind
        if kind is _K.TRANSACTION_BEGIN:
            return self._route_begin(seed)
        if kind.is_transaction_control:
            if txn is not None and kind in _ENDS_TRANSACTION and not stmt.chain:
                # The deferred BEGIN never reached a server: there is nothing to end.
                self._txn = None
                return self._step(seed, Action.DEFER, PRIMARY, Reason.IN_TRANSACTION, "read_only")
            if txn is None:
                return self._step(seed, Action.EXECUTE, PRIMARY, Reason.IN_TRANSACTION)
        if kind is _K.SESSION_STATE:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.SESSION_STATE)
        if stmt.follows_previous:
            return self._step(seed, Action.EXECUTE, self._last_target, Reason.FOLLOWS_PREVIOUS)
        target = _hint_target(stmt)
        if target is RouteTarget.PRIMARY:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.HINT, "primary")
        if txn is not None:  # a deferred read-only BEGIN: this statement picks its server
            return self._route_pending(seed)
        if target is RouteTarget.REPLICA:
            if not _replica_hint_allowed(stmt):
                detail = _primary_detail(stmt)
                logger.debug("replica hint ignored: the statement may write (%s)", detail)
                return self._step(seed, Action.EXECUTE, PRIMARY, Reason.HINT_REFUSED, detail)
            return self._route_read(seed, fetched=False)
        if kind is not _K.READ or stmt.must_use_primary:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.WRITE, _primary_detail(stmt))
        if not self._autocommit:
            return self._step(
                seed, Action.EXECUTE, PRIMARY, Reason.IN_TRANSACTION, "autocommit_off"
            )
        if self._pins:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.PINNED, self.pinned)
        return self._route_read(seed, fetched=False)

    def on_primary_state(self, decision: Decision, state: GtidState) -> Decision:
        """The primary's executed state, fetched as ``decision`` asked: merged into the
        required set, then routing continues."""
        self._expect(decision, Action.FETCH_PRIMARY_STATE)
        self._saw(state)
        self._unreported = None  # the primary's state covers whatever the last read saw
        return self._route_read(decision, fetched=True)

    def on_wait(
        self, decision: Decision, outcome: WaitOutcome, *, duration: float = 0.0
    ) -> Decision:
        """How the wait ``decision`` asked for ended; returns the next step."""
        self._expect(decision, Action.WAIT)
        replica = decision.target
        wait_set = decision.wait_set
        assert wait_set is not None
        timeout = decision.wait_timeout or self._config.wait_timeout
        knowledge = self._knowledge
        if outcome is WaitOutcome.REACHED:
            knowledge.record_wait(
                replica, wait_set, reached=True, duration=duration, timeout=timeout
            )
            knowledge.record_success(replica)
            return self._on_replica(
                decision, replica, Reason.WAITED, decision.known, decision.learned
            )
        tried = replace(decision, tried=(*decision.tried, replica))
        if outcome is WaitOutcome.FAILED:
            knowledge.record_failure(replica)
            return self._route_read(tried, fetched=True)
        if outcome is WaitOutcome.ERROR:
            return self._to_primary(tried, Reason.TIMEOUT_FALLBACK, "wait_error")
        knowledge.record_wait(replica, wait_set, reached=False, duration=duration, timeout=timeout)
        on_timeout = self._config.on_timeout
        if on_timeout is OnTimeout.ERROR:
            error = ConsistencyTimeout(
                f"replica {replica} did not reach {wait_set} within {timeout:g}s "
                "and on_timeout is 'error'"
            )
            return replace(
                tried, action=Action.FAIL, reason=Reason.TIMEOUT_ERROR, detail=None, error=error
            )
        if on_timeout is OnTimeout.NEXT_REPLICA:
            return self._route_read(tried, fetched=True, fallback=Reason.TIMEOUT_FALLBACK)
        return self._to_primary(tried, Reason.TIMEOUT_FALLBACK)

    def on_prelude_done(self, decision: Decision) -> None:
        """The decision's prelude ran: a deferred read-only transaction has now started on its
        server, or the replica transaction the prelude committed has ended."""
        for target, sql in decision.prelude:
            if sql is READ_ONLY_BEGIN:
                self._txn = Transaction(read_only=True, server=target)
            elif sql is END_TRANSACTION:
                self._txn = None

    def on_success(self, decision: Decision) -> None:
        """The statement ``decision`` sent succeeded: apply its effects on the session."""
        stmt = decision.statement
        target = decision.target
        self._last_target = target
        if decision.level is _READ_ALL_WRITES and stmt.kind is _K.READ:
            self._unreported = target
        if target != PRIMARY:
            self._served(decision)
        if stmt is self._inert:
            return
        if not stmt.parts and _inert(stmt):
            # Remembered by identity (a classification is immutable): a prepared statement
            # or a cached classification repeats with the same object.
            self._inert = stmt
            return
        for part in stmt.parts or (stmt,):
            self._apply(part, target)

    def _served(self, decision: Decision) -> None:
        """A replica served ``decision``'s statement: it is healthy, and at read_all_writes
        the session saw what that replica was known to have when it served the read."""
        self._knowledge.record_success(decision.target)
        if decision.level is _READ_ALL_WRITES:
            known = decision.known
            waited = decision.wait_set
            if waited is not None:
                known = merge(known, waited)
            if known is not None:
                self._saw(known)

    def on_error(
        self, decision: Decision, *, connection_lost: bool, sent: bool = True
    ) -> Decision | None:
        """The statement ``decision`` sent failed; ``connection_lost`` when the connection
        broke or the server missed its deadline (the driver then drops the connection).
        Returns a decision to retry with, or ``None``: raise the error.

        Only a read outside a transaction whose replica failed is retried, and only once: the
        replica is marked unhealthy and the read goes where ``on_timeout`` sends a read whose
        replica did not catch up (the primary; the next replica, else the primary; ``error``:
        another replica, never the primary).  Inside a transaction the transaction is gone
        with its connection.  A statement sent to the primary is never retried: it may have
        written.  With ``retry_reads`` off, neither is a read that was ``sent`` (one that failed
        before leaving, e.g. on connecting, still goes elsewhere)."""
        stmt = decision.statement
        target = decision.target
        self._last_target = target
        txn = self._txn
        if stmt.implicit_commit and txn is not None and txn.server == target:
            self._txn = None  # the implicit commit happened before the statement failed
        if not connection_lost:
            return None
        if target == PRIMARY:
            if self._txn is not None and self._txn.server == PRIMARY:
                self._txn = None  # the server rolled it back with the connection
            return None
        self._knowledge.record_failure(target)
        txn = self._txn
        if txn is not None and txn.server == target:
            self._txn = None
            return None
        retryable = stmt.replica_safe or (
            _hint_target(stmt) is RouteTarget.REPLICA and _replica_hint_allowed(stmt)
        )
        if decision.action is not Action.EXECUTE or not retryable or decision.retry:
            return None
        if sent and not self._config.retry_reads:
            return None
        logger.debug("replica %s failed; retrying the read elsewhere", target)
        seed = replace(decision, tried=(*decision.tried, target), retry=True)
        on_timeout = self._config.on_timeout
        if on_timeout is OnTimeout.PRIMARY:
            return self._to_primary(seed, Reason.TIMEOUT_FALLBACK, _REPLICA_FAILED)
        retry = self._route_read(
            seed, fetched=True, fallback=Reason.TIMEOUT_FALLBACK, detail=_REPLICA_FAILED
        )
        if on_timeout is OnTimeout.ERROR and retry.is_primary:
            return None
        return retry

    def on_replay_failed(self, decision: Decision) -> Decision:
        """The session's state could not be replayed on ``decision.target`` (a setting the
        replica refuses): the state cannot follow, so the session is pinned and the statement
        goes to the primary."""
        self.pin(_SESSION_STATE_PIN)
        return self._to_primary(decision, Reason.PINNED, _SESSION_STATE_PIN)

    def on_prepare_failed(self, decision: Decision) -> Decision:
        """The statement, a prepared one, could not be prepared on ``decision.target`` (the
        replica refused it: a table or function it lacks, a setting it does not have): it
        runs on the primary, as a fallback, and the session is not pinned (the next
        statement may prepare there)."""
        return self._to_primary(decision, Reason.TIMEOUT_FALLBACK, _PREPARE_FAILED)

    def observe_gtids(self, target: str, state: GtidState, *, acknowledge: bool = True) -> None:
        """GTID information from an OK packet on ``target``'s connection.

        On the primary: the session's own GTIDs (or, under ``ALL_GTIDS``, the primary's whole
        set), which the primary has also acknowledged to the process, so they join the shared
        acknowledged state too, unless ``acknowledge`` is false (the driver handed the packet's
        text to it already, as the packet arrived).  On a replica: its executed state, which
        the replica knowledge learns and which, at read_all_writes, the session has seen."""
        if not state:
            return
        if target == PRIMARY:
            self._add_own(state)
            if acknowledge:
                self._acknowledged.add(state)
            if target == self._unreported and self.tracking is Tracking.ALL:
                # ``ALL_GTIDS``: the primary's whole set, after the last read there.
                self._unreported = None
        else:
            self._knowledge.record_executed(target, state)
            if self._config.level is _READ_ALL_WRITES:
                self._saw(state)
                if target == self._unreported:
                    self._unreported = None  # its whole set, after the last read there

    def observe_status(self, target: str, *, in_transaction: bool) -> None:
        """The server status of ``target``'s last OK packet.  A transaction the policy thinks
        open on that server but that the server ended (an implicit commit) is closed."""
        txn = self._txn
        if not in_transaction and txn is not None and txn.server == target:
            self._txn = None

    # ----------------------------------------------------------------- effects

    def _apply(self, stmt: Classification, target: str) -> None:
        kind = stmt.kind
        txn = self._txn
        if kind is _K.TRANSACTION_BEGIN:
            self._txn = Transaction(read_only=stmt.read_only, server=target)
        elif kind in _ENDS_TRANSACTION:
            if not stmt.chain:
                self._txn = None
        elif stmt.implicit_commit and txn is not None and txn.server == target:
            self._txn = None
        if stmt.sets_autocommit is not None:
            self.set_autocommit(stmt.sets_autocommit)
        if stmt.schema is not None:
            self.record_schema(stmt.schema)
        for name, value_sql in stmt.session_variables:
            self.record_variable(name, value_sql)
        if stmt.pins_session is not None:
            self.pin(stmt.pins_session)
        if stmt.unpins_session is not None:
            self.unpin(stmt.unpins_session)

    # ----------------------------------------------------------------- decisions

    def _step(
        self,
        seed: _SeedLike,
        action: Action,
        target: str,
        reason: Reason,
        detail: str | None = None,
        *,
        known: GtidState | None = None,
        learned: Learned | None = None,
        wait_set: GtidState | None = None,
        wait_timeout: float | None = None,
        prelude: tuple[tuple[str, str], ...] = (),
        error: errors.Error | None = None,
    ) -> Decision:
        """A decision for ``seed``'s statement with the current required set."""
        return new_decision(
            action,
            target,
            reason,
            seed.statement,
            seed.level,
            seed.sql,
            detail,
            self._required,
            known,
            learned,
            wait_set,
            wait_timeout,
            seed.tried,
            prelude,
            error,
            seed.sources,
            seed.retry,
        )

    def _to_primary(self, seed: _SeedLike, reason: Reason, detail: str | None = None) -> Decision:
        prelude: tuple[tuple[str, str], ...] = ()
        if self._txn is not None and self._txn.pending:
            prelude = ((PRIMARY, READ_ONLY_BEGIN),)
        return self._step(seed, Action.EXECUTE, PRIMARY, reason, detail, prelude=prelude)

    def _on_replica(
        self,
        seed: _SeedLike,
        replica: str,
        reason: Reason,
        known: GtidState | None,
        learned: Learned | None,
    ) -> Decision:
        """Run ``seed``'s statement on ``replica`` (a deferred read-only transaction starts
        there), known to have executed ``known`` (learnt as ``learned`` says).  After a
        wait, the decision keeps the wait set for tracing."""
        self._knowledge.record_pick(replica)
        prelude: tuple[tuple[str, str], ...] = ()
        txn = self._txn
        if txn is not None and txn.pending:
            prelude = ((replica, READ_ONLY_BEGIN),)
        stmt = seed.statement
        hint = stmt.hint
        # ``_step``, inlined: every replica read comes here.
        return new_decision(
            _EXECUTE,
            replica,
            reason,
            stmt,
            seed.level,
            seed.sql,
            "hint" if hint is not None and hint.target is RouteTarget.REPLICA else None,
            self._required,
            known,
            learned,
            seed.wait_set if reason is Reason.WAITED else None,
            None,
            seed.tried,
            prelude,
            None,
            seed.sources,
            seed.retry,
        )

    def _route_begin(self, seed: _SeedLike) -> Decision:
        stmt = seed.statement
        to_primary = (
            not stmt.read_only
            or not self._replicas
            or bool(self._pins)
            or _hint_target(stmt) is RouteTarget.PRIMARY
        )
        if to_primary:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.IN_TRANSACTION)
        self._txn = Transaction(read_only=True, server=None)
        return self._step(seed, Action.DEFER, PRIMARY, Reason.IN_TRANSACTION, "read_only")

    def _route_pending(self, seed: _SeedLike) -> Decision:
        stmt = seed.statement
        kind = stmt.kind
        if kind is _K.WRITE:
            return self._read_only_violation(seed, PRIMARY)
        if stmt.implicit_commit or kind in _LEAVES_REPLICA:
            self._txn = None  # the implicit commit ends the transaction before it began
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.WRITE, _primary_detail(stmt))
        return self._route_read(seed, fetched=False)

    def _route_in_transaction(self, seed: _SeedLike, server: str) -> Decision:
        if server == PRIMARY:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.IN_TRANSACTION)
        stmt = seed.statement
        kind = stmt.kind
        if kind is _K.SESSION_STATE:
            return self._step(seed, Action.EXECUTE, PRIMARY, Reason.SESSION_STATE)
        if kind is _K.WRITE:
            return self._read_only_violation(seed, server)
        if kind is _K.TRANSACTION_BEGIN and stmt.read_only:
            pass  # commits the read-only transaction and starts another on the same replica
        elif stmt.implicit_commit or kind in _LEAVES_REPLICA:
            # It ends the replica's read-only transaction and must not run on a replica:
            # commit there, then go to the primary.
            if kind is _K.TRANSACTION_BEGIN:
                reason, detail = Reason.IN_TRANSACTION, None
            else:
                reason, detail = Reason.WRITE, _primary_detail(stmt)
            return self._step(
                seed, Action.EXECUTE, PRIMARY, reason, detail, prelude=((server, END_TRANSACTION),)
            )
        view = self._knowledge.view(server)
        return self._step(
            seed,
            Action.EXECUTE,
            server,
            Reason.IN_TRANSACTION,
            known=view.executed,
            learned=view.learned,
        )

    def _read_only_violation(self, seed: _SeedLike, server: str) -> Decision:
        error = OperationalError(
            int(ER.CANT_EXECUTE_IN_READ_ONLY_TRANSACTION),
            "Cannot execute statement in a READ ONLY transaction.",
            sqlstate=_SQLSTATE_READ_ONLY_TRANSACTION,
        )
        return self._step(
            seed, Action.FAIL, server, Reason.IN_TRANSACTION, "read_only", error=error
        )

    def _route_read(
        self,
        seed: _SeedLike,
        *,
        fetched: bool,
        fallback: Reason | None = None,
        detail: str | None = None,
    ) -> Decision:
        """Route a statement that may go to a replica, skipping ``seed.tried``.  ``fetched``
        is true once the primary's state was fetched for it; ``fallback`` (with ``detail``) is
        the reason given to the primary when no replica is left (default: no healthy
        replica)."""
        if not self._replicas:
            return self._to_primary(seed, Reason.NO_REPLICAS)
        level = seed.level
        eventual = level is Level.EVENTUAL
        max_lag = None
        if eventual:
            hint = seed.statement.hint
            max_lag = hint.max_lag if hint is not None and hint.max_lag is not None else None
            if max_lag is None:
                max_lag = self._config.max_lag
        prefer = None
        if level is _READ_ALL_WRITES:
            seed = self._with_acknowledged(seed)
            prefer = self._unreported
        required = None if eventual else self._required
        found = best_replica(
            self._knowledge,
            self._replicas,
            required=required,
            exclude=seed.tried,
            max_lag=max_lag,
            prefer=prefer,
        )
        if found is None:
            if fallback is not None:
                return self._to_primary(seed, fallback, detail)
            return self._to_primary(
                seed, Reason.NO_HEALTHY_REPLICA, "max_lag" if max_lag is not None else None
            )
        best, covered = found
        if eventual:
            return self._on_replica(seed, best.name, Reason.EVENTUAL, best.executed, best.learned)
        if not fetched and level is Level.READ_LATEST:
            return self._fetch_primary_state(seed)
        # Past eventual, ``required`` is the session's required set, which ``covered`` judged.
        timeout = self._config.wait_timeout
        if required and not covered:
            knowledge = self._knowledge
            lag = best.current_lag(knowledge.now(), knowledge.ttl)
            if lag is not None and lag >= timeout:
                other = self._least_lagging(seed, required, best.name, timeout)
                if other is None:
                    return self._lagging_fallback(seed)
                best = other
        if prefer is not None and prefer != best.name:
            # The last read may have seen more than is known of its server: see the docstring.
            return self._fetch_primary_state(seed)
        if not required:
            return self._on_replica(
                seed, best.name, Reason.NOTHING_REQUIRED, best.executed, best.learned
            )
        if covered:
            return self._on_replica(
                seed, best.name, Reason.KNOWN_COVERED, best.executed, best.learned
            )
        lacking = missing(required, best.executed)
        return self._step(
            seed,
            Action.WAIT,
            best.name,
            Reason.WAITED,
            known=best.executed,
            learned=best.learned,
            wait_set=lacking,
            wait_timeout=timeout,
        )

    def _fetch_primary_state(self, seed: _SeedLike) -> Decision:
        """Ask for the primary's executed state before the read is routed further."""
        return self._step(
            seed, Action.FETCH_PRIMARY_STATE, PRIMARY, Reason.WAITED, seed.level.value
        )

    def _with_acknowledged(self, seed: _SeedLike) -> _SeedLike:
        """``seed`` for a read at read_all_writes: everything the process had acknowledged
        until now joins the required set, and the seed records where that set came from."""
        sources = self._acknowledged_sources()
        if isinstance(seed, Decision):
            return replace(seed, sources=sources)
        return _Seed(
            seed.statement, seed.level, seed.sql, seed.tried, seed.wait_set, sources, seed.retry
        )

    def _acknowledged_sources(self) -> RequiredSources:
        """For a read at read_all_writes: everything the process had acknowledged until now
        joins the required set; returns where that set came from (the same object while none
        of its parts changed: they are immutable, so identity says it)."""
        acknowledged = self._acknowledged.state()
        if acknowledged is not None and acknowledged is not self._merged_ack:
            self._merged_ack = acknowledged
            self._required = merge(self._required, acknowledged) or self._required
        own: GtidState | None = self._own
        if not own:
            own = None
        seen = self._seen
        last = self._sources
        if (
            last is not None
            and last.own is own
            and last.seen is seen
            and last.acknowledged is acknowledged
        ):
            return last
        sources = self._sources = _new_sources(own, seen, acknowledged)
        return sources

    def _least_lagging(
        self, seed: _SeedLike, required: GtidState, lagging: str, timeout: float
    ) -> ReplicaView | None:
        """The best usable replica, other than ``lagging``, whose wait is not expected to
        time out (its lag estimate is below ``timeout``); ``None`` when there is none.  Rare:
        only when the best replica lags, so the candidates are ranked again as needed."""
        knowledge = self._knowledge
        skipped = [*seed.tried, lagging]
        while True:
            found = best_replica(knowledge, self._replicas, required=required, exclude=skipped)
            if found is None:
                return None
            view = found[0]
            lag = view.current_lag(knowledge.now(), knowledge.ttl)
            if lag is None or lag < timeout:
                return view
            skipped.append(view.name)

    def _lagging_fallback(self, seed: _SeedLike) -> Decision:
        """Every usable replica lags more than ``wait_timeout``: the waits would time out, so
        none is tried and ``on_timeout`` decides at once."""
        if self._config.on_timeout is OnTimeout.ERROR:
            error = ConsistencyTimeout(
                f"every replica lags more than wait_timeout ({self._config.wait_timeout:g}s) "
                "and on_timeout is 'error'"
            )
            return self._step(
                seed, Action.FAIL, PRIMARY, Reason.TIMEOUT_ERROR, _LAGGING, error=error
            )
        return self._to_primary(seed, Reason.TIMEOUT_FALLBACK, _LAGGING)

    @staticmethod
    def _expect(decision: Decision, action: Action) -> None:
        if decision.action is not action:
            raise ValueError(f"expected a {action.value} decision, got {decision.action.value}")
