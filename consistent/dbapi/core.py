"""What a logical connection does, apart from I/O: shared by the blocking and the asyncio forms.

:class:`SessionCore` holds a session's state (its :class:`~consistent.policy.SessionPolicy`,
the flavour, the GTID texts waiting for the policy, the span of the running statement, the
server links) and every decision about it.  The steps that need a server are written as
*plans*: generators that yield one :data:`Step` at a time (open a server's connection, send a
statement, read one value, set the character set, run the caller's statement) and receive its
result, or have the step's exception thrown in.  Each form drives the same plans with its own
I/O: :meth:`consistent.dbapi.connection.Connection._drive` with PyMySQL's blocking calls,
``consistent.aio``'s connection with aiomysql's coroutines.  Routing, waits and their outcome,
session-state replay, tracker setup, error classification and the OK-packet observer are
therefore one piece of code for both forms.

A driver performs a step on the step's link (:class:`Link`, implemented by
:class:`~consistent.dbapi.links.ServerLink` and its asyncio counterpart):

* ``(OPEN, link, None)`` → the link's open connection (connecting first; a replica's with its
  tracker on);
* ``(QUERY, link, sql)`` → ``None``, after running ``sql`` on it;
* ``(VALUE, link, (sql, timeout))`` → the first column of the first row (``timeout``: the read
  deadline for this statement, ``None`` for the link's own);
* ``(NAMES, link, (charset, collation))`` → ``None``, after ``SET NAMES`` and the driver's
  encoding follow;
* ``(CALL, link, None)`` → what the caller's statement function returned.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
import time
import weakref
from collections.abc import Callable, Generator
from typing import Any, Final, Protocol, TypeVar

from consistent import errors
from consistent.classify import Classification, FunctionRules, classify
from consistent.dbapi import _pymysql
from consistent.dbapi.config import ConnectConfig, ServerSpec
from consistent.dbapi.pending import PendingGtids, parse_tracked
from consistent.errnos import CR, ER
from consistent.errors import ReplayFailed
from consistent.flavors import Flavor, ServerRole, server_flavor
from consistent.gtid import GtidState
from consistent.policy import (
    END_TRANSACTION,
    PRIMARY,
    AcknowledgedWrites,
    Action,
    Decision,
    FlavorName,
    Level,
    ReplicaKnowledge,
    SessionPolicy,
    Tracking,
    WaitOutcome,
    process_acknowledged,
    process_knowledge,
)
from consistent.policy.driver import (
    ReadyKind,
    ReadySteps,
    ready_steps,
    tracking_steps,
    wait_query,
)
from consistent.policy.roles import OnSplitBrain, SharedRoles
from consistent.telemetry import (
    NOOP_SPAN,
    NOOP_TRACER,
    StatementSpan,
    StatementTracer,
    Telemetry,
    default_telemetry,
)

__all__ = [
    "BEGIN",
    "BEGIN_READ_ONLY",
    "COMMIT",
    "NOT_CONNECTED",
    "PRIMARY_LOST",
    "ROLLBACK",
    "Link",
    "Plan",
    "SessionCore",
    "Step",
    "StepKind",
    "check_resolves",
    "weak_observer",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

BEGIN: Final = classify("BEGIN")
BEGIN_READ_ONLY: Final = classify("START TRANSACTION READ ONLY")
COMMIT: Final = classify("COMMIT")
ROLLBACK: Final = classify("ROLLBACK")
PRIMARY_LOST: Final = int(CR.SERVER_LOST)
#: What a connection opened with ``defer_connect=True`` says until ``connect()``; raised as
#: ``InterfaceError(0, …)``, as PyMySQL raises ``InterfaceError(0, '')`` on an unopened one.
NOT_CONNECTED: Final = "not connected yet (defer_connect=True): call connect() first"


class StepKind(enum.Enum):
    """What a plan asks its driver to do (see the module's docstring)."""

    OPEN = "open"
    QUERY = "query"
    VALUE = "value"
    NAMES = "names"
    CALL = "call"


OPEN: Final = StepKind.OPEN
QUERY: Final = StepKind.QUERY
VALUE: Final = StepKind.VALUE
NAMES: Final = StepKind.NAMES
CALL: Final = StepKind.CALL


class Link(Protocol):
    """The connection to one server, as plans see it (the driver owns the I/O)."""

    name: str
    replica: bool
    #: Session-state replay number the connection has reached.
    applied_seq: int
    #: Tracker mode currently set on the connection (``None``: not set).
    tracking: Tracking | None
    #: The session's state is to be replayed when the connection opens (a primary the
    #: session moved to).
    replay: bool

    @property
    def raw(self) -> Any:
        """The open driver connection, if any."""

    @property
    def connected(self) -> bool:
        """True while a connection is open."""

    def drop(self) -> None:
        """Forget the connection, closing its socket without ceremony."""


Step = tuple[StepKind, Link, Any]
Plan = Generator[Step, Any, T]


class SessionCore:
    """The state of one logical connection and every decision about it (no I/O).

    Subclasses (the two forms) create ``_primary`` and ``_replicas`` links, call
    :meth:`_start_session` once the primary's handshake is known, and drive the plans.
    """

    Warning = errors.Warning
    Error = errors.Error
    InterfaceError = errors.InterfaceError
    DatabaseError = errors.DatabaseError
    DataError = errors.DataError
    OperationalError = errors.OperationalError
    IntegrityError = errors.IntegrityError
    InternalError = errors.InternalError
    ProgrammingError = errors.ProgrammingError
    NotSupportedError = errors.NotSupportedError

    _primary: Link
    _replicas: dict[str, Any]
    _flavor: Flavor
    _direct: Any

    def _init_core(
        self,
        config: ConnectConfig,
        *,
        knowledge: ReplicaKnowledge | None,
        acknowledged: AcknowledgedWrites | None,
        telemetry: Telemetry | None,
    ) -> None:
        # The span of the statement running now.  Set first: the primary's OK packets reach
        # _on_ok while connecting, before the policy (and the tracer) exist.
        self._span: StatementSpan = NOOP_SPAN
        self._tracer: StatementTracer = NOOP_TRACER
        self._config = config
        self._closed = False
        self._lost: str | None = None
        self._direct = None
        # The topology's roles, as the monitors learn them (None: no role discovery).
        self._roles: SharedRoles | None = None
        # The history of the primary the session moved to that was last checked, and the
        # required GTIDs that primary never had (a failover lost them).
        self._history: object = None
        self._lost_gtids: str | None = None
        # The discovered replicas the session reads from, as of the roles' version.
        self._discovered: frozenset[str] = frozenset()
        self._discovered_version = 0
        self._policy_or_none: SessionPolicy | None = None
        self._pending: PendingGtids | None = None
        self.last_decision: Decision | None = None
        # Where the last cursor statement ran: ``affected_rows()`` asks that server's link.
        self._query_target = PRIMARY
        self._knowledge_arg = knowledge
        self._telemetry_arg = telemetry
        # Until the primary's handshake names its family, only built-ins of both are safe.
        self._functions = FunctionRules(None, config.read_only_functions)
        # Every OK packet of the primary feeds the acknowledged state as it arrives (_on_ok),
        # whatever the level, so that read_all_writes sessions of the process see the write.
        self._acknowledged = (
            acknowledged if acknowledged is not None else process_acknowledged(config.primary.name)
        )
        self._replicas = {}

    def _start_session(self, server_version: str | bytes | None, server_autocommit: bool) -> None:
        """The session, once the primary's handshake told its version: flavour, policy,
        tracer."""
        config = self._config
        knowledge = self._knowledge_arg
        self._flavor = server_flavor(config.flavor, server_version)
        flavor = self._flavor.name
        # Read by the OK-packet observer after every write: kept rather than recomputed.
        self._flavor_name: FlavorName = flavor
        self._functions = FunctionRules(flavor, config.read_only_functions)
        self._pending = PendingGtids(flavor, tags=self._flavor.gtid_tags)
        autocommit = config.autocommit
        self._policy_or_none = SessionPolicy(
            replicas=[spec.name for spec in config.replicas],
            knowledge=knowledge if knowledge is not None else process_knowledge(),
            flavor=flavor,
            config=config.policy,
            # None: the server's default, which the handshake's status reported.
            autocommit=server_autocommit if autocommit is None else autocommit,
            acknowledged=self._acknowledged,
        )
        telemetry = self._telemetry_arg
        self._tracer = (telemetry if telemetry is not None else default_telemetry()).session(
            system=self._flavor.name,
            addresses={
                PRIMARY: (config.primary.host, config.primary.port),
                **{spec.name: (spec.host, spec.port) for spec in config.replicas},
            },
        )
        self._tracer.set_namespace(config.options.get("database"))

    def _record_schema(self, db: str) -> None:
        """The default schema is now ``db`` (``select_db()``): replayed on replica connections,
        the spans' ``db.namespace``."""
        self._policy.record_schema(db)
        self._tracer.set_namespace(db)

    def _reset_session(self) -> None:
        """A fresh session on the same servers keeps the token and the autocommit mode."""
        policy = self._policy
        token = policy.token
        autocommit = policy.autocommit
        policy.reset()
        policy.set_autocommit(autocommit)
        if token:
            policy.require(token)

    # ------------------------------------------------------------------ properties

    @property
    def _policy(self) -> SessionPolicy:
        policy = self._policy_or_none
        if policy is None:
            raise errors.InterfaceError(0, NOT_CONNECTED)
        return policy

    @property
    def policy(self) -> SessionPolicy:
        """The session's routing state machine (read it; drive it only through this object)."""
        self._drain()
        return self._policy

    def _drain(self) -> None:
        """Hand the GTIDs noted from OK packets to the policy (the primary's are in the
        acknowledged state already)."""
        pending = self._pending
        if pending:
            policy = self._policy
            for target, state in pending.drain():
                policy.observe_gtids(target, state, acknowledge=False)

    @property
    def tracer(self) -> StatementTracer:
        """The session's tracer; its ``session_id`` names this connection in the traces
        (``""`` when tracing is off)."""
        return self._tracer

    @property
    def flavor(self) -> str:
        """``"mysql"`` or ``"mariadb"``."""
        if self._policy_or_none is None:
            if self._config.flavor is None:
                raise errors.InterfaceError(0, NOT_CONNECTED)
            return self._config.flavor
        return self._flavor.name

    @property
    def replicas(self) -> tuple[str, ...]:
        """The replicas' names (``host:port``)."""
        return tuple(self._replicas)

    @property
    def function_rules(self) -> FunctionRules:
        """Which function calls a replica may run here: the built-ins of the primary's server
        family and the functions declared with ``read_only_functions``."""
        return self._functions

    def classify(self, sql: str) -> Classification:
        """How this connection classifies ``sql`` before routing it (with
        :attr:`function_rules`)."""
        return classify(sql, self._functions)

    @property
    def level(self) -> Level:
        """The consistency level; assign a :class:`Level` or its name to change it."""
        policy = self._policy_or_none
        return policy.level if policy is not None else self._config.policy.level

    @level.setter
    def level(self, value: Level | str) -> None:
        if self._policy_or_none is None and not self._closed:
            policy = dataclasses.replace(self._config.policy, level=Level.parse(value))
            self._config = dataclasses.replace(self._config, policy=policy)
            return
        self._check_open()
        self._policy.level = Level.parse(value)
        self._refresh_direct()

    @property
    def token(self) -> str:
        """The session's consistency token (``""`` when it requires nothing).
        :class:`~consistent.errors.InterfaceError` once the connection is closed."""
        self._check_not_closed()
        self._drain()
        return self._policy.token

    def require(self, token: object) -> None:
        """Make later reads see everything ``token`` stands for (from another session).
        Raises :class:`~consistent.errors.MalformedGtidSet` (1772) for anything that is not a
        token's text, and :class:`~consistent.errors.InterfaceError` once the connection is
        closed."""
        self._check_not_closed()
        self._drain()
        self._policy.require(token)

    def reset_token(self) -> None:
        """Require nothing any more (the session state that follows the session is kept): a
        pool hands this connection to another logical session, which brings its own token."""
        self._drain()
        self._policy.forget_required()
        self._lost_gtids = None

    def get_autocommit(self) -> bool:
        """The session's autocommit mode (before ``connect()``: the one it will ask for)."""
        policy = self._policy_or_none
        return policy.autocommit if policy is not None else bool(self._config.autocommit)

    # ------------------------------------------------------------------ checks

    def _check_not_closed(self) -> None:
        if self._closed:
            raise errors.InterfaceError("the connection is closed")

    def _check_open(self) -> None:
        self._check_not_closed()
        if self._lost is not None:
            if self._policy_or_none is None:
                raise errors.InterfaceError(0, self._lost)
            raise errors.OperationalError(PRIMARY_LOST, self._lost)

    def _last_target(self) -> str:
        decision = self.last_decision
        return decision.target if decision is not None else PRIMARY

    def _refresh_direct(self) -> None:
        """Allow the direct path only while it is valid: no replicas, open, not lost, and the
        tracker in the mode the level needs (otherwise the slow path sets it first)."""
        raw = self._primary.raw
        ok = (
            not self._replicas
            and not self._closed
            and self._lost is None
            and raw is not None
            and self._primary.tracking is self._policy.tracking
        )
        self._direct = raw if ok else None

    def _primary_lost(self, exc: BaseException) -> errors.Error:
        """Mark the primary lost (after ``exc``) and return the error that says so."""
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else PRIMARY_LOST
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        self._lost = (
            f"lost the connection to the primary {self._config.primary.name}: {detail}; "
            "open a new connection (or call ping(reconnect=True))"
        )
        self._direct = None
        self._primary.drop()
        return errors.OperationalError(code, self._lost)

    def _interrupted(self, link: Link) -> None:
        """A step on ``link`` stopped midway (its task was cancelled): the connection is out of
        step with its server and is dropped.  On the primary that loses the session (what ran
        there is unknown), as a lost connection does; a replica's transaction, if any, is gone
        with it."""
        if link is self._primary:
            self._primary_lost(
                errors.OperationalError(PRIMARY_LOST, "a statement was cancelled while it ran")
            )
            return
        link.drop()
        policy = self._policy_or_none
        if policy is not None:
            policy.observe_status(link.name, in_transaction=False)

    def _direct_failure(self, exc: BaseException) -> errors.Error:
        """The error to raise for ``exc`` from a statement sent by the direct path."""
        if isinstance(exc, errors.Error):
            return exc
        if _pymysql.is_disconnect(exc):
            return self._primary_lost(exc)
        return _pymysql.translate_error(exc)

    # ------------------------------------------------------------------ OK packets

    def _on_ok(self, name: str, status: int, tail: bytes) -> None:
        """An OK packet of server ``name`` reported a session-state change (``tail``: the
        bytes after its warning count).  Without a span to tell, its GTIDs are only noted:
        decoding and parsing wait until a routing decision, a token or a read_all_writes read
        needs them, and then take many tails at once."""
        pending = self._pending
        if pending is None:
            return  # an OK while connecting, before the session exists
        span = self._span
        if span is NOOP_SPAN or name != PRIMARY or not span.recording:
            if name == PRIMARY:
                # Acknowledged to the process now, before the statement returns: a
                # read_all_writes read of any session that begins after it must see it.
                self._acknowledged.note_tail(tail, self._flavor_name)
            if pending.add_tail(name, tail):
                self._drain()
            return
        try:
            text = _pymysql.tracked_gtid_text(status, tail)
        except errors.RemoteProtocolError:
            logger.warning("undecodable session-state data from %s: %r", name, tail)
            return
        if text is None:
            return
        self._acknowledged.note(text, self._flavor_name)
        if self._own_gtids():
            if not self._replicas:
                # The span parses the text off this thread; the text also waits unparsed
                # for the policy as usual (only ``token`` ever needs it without replicas).
                span.produced(text)
            else:
                state = self._parse_gtids(text)
                if state is not None:
                    span.produced(state)
                    # The next routing decision would parse the text again: give the policy
                    # this state now.
                    self._policy.observe_gtids(PRIMARY, state, acknowledge=False)
                    return
        if pending.add(name, text):
            self._drain()

    def _own_gtids(self) -> bool:
        """The primary's OK packets carry the statement's own GTIDs: MariaDB's ``last_gtid``
        always, MySQL's tracker only at ``OWN_GTID`` (``ALL_GTIDS`` reports the whole
        executed set, which no statement produced alone)."""
        return self._flavor_name == "mariadb" or self._primary.tracking is Tracking.OWN

    def _parse_gtids(self, text: str) -> GtidState | None:
        """``text`` parsed; ``None`` when it does not parse (the policy's drain reports it)."""
        try:
            return parse_tracked(text, self._flavor.name, tags=self._flavor.gtid_tags)
        except errors.MalformedGtidSet:
            return None

    # ------------------------------------------------------------------ plans

    def _link(self, target: str) -> Link:
        return self._primary if target == PRIMARY else self._replicas[target]

    def _tracking_plan(self, link: Link, tracking: Tracking) -> Plan[None]:
        """Turn the primary's tracker to ``tracking`` unless it already is."""
        if link.raw is None:
            return
        yield from self._steps_plan(link, tracking_steps(self._flavor, link, tracking))

    def _ready_plan(self, link: Link) -> Plan[Any]:
        """``link``'s connection, opened, with the session's state replayed on it and the
        tracker its role needs (:func:`~consistent.policy.driver.ready_steps`)."""
        if link is self._primary:
            if self._lost is not None:
                raise errors.OperationalError(PRIMARY_LOST, self._lost)
            roles = self._roles
            if (
                roles is not None
                and roles.split_brain
                and self._config.on_split_brain is OnSplitBrain.REFUSE
            ):
                raise errors.OperationalError(
                    int(ER.OPTION_PREVENTS_STATEMENT),
                    f"split brain: {', '.join(roles.verdict.writable if roles.verdict else ())} "
                    "all accept writes; nothing goes to the primary until one of them is "
                    "read-only again (on_split_brain=refuse)",
                )
            raw = yield (OPEN, link, None)
            # A primary the session moved to gets its state, as a replica does; the primary
            # it started on ran it all itself.
            replay, link.replay = link.replay, False
            try:
                yield from self._ready_steps_plan(link, raw, primary=True, replay=replay)
            except ReplayFailed as exc:
                raise self._primary_lost(
                    errors.OperationalError(
                        PRIMARY_LOST,
                        f"the session's state could not follow the primary: {exc}",
                    )
                ) from exc
            return raw
        raw = yield (OPEN, link, None)
        yield from self._ready_steps_plan(link, raw, primary=False, replay=True)
        return raw

    def _ready_steps_plan(self, link: Link, raw: Any, *, primary: bool, replay: bool) -> Plan[None]:
        """Run :func:`~consistent.policy.driver.ready_steps` on ``link``'s connection ``raw``;
        a replayed statement that fails raises :class:`ReplayFailed`."""
        policy = self._policy
        names = self._names
        if (
            replay
            and link.applied_seq < policy.replay_seq
            and names is not None
            and (raw.charset, getattr(raw, "collation", None)) != names
        ):
            # set_character_set() changed the driver's encoding as well as the session's:
            # this connection's encoding follows, then the replay sets the session.
            try:
                yield (NAMES, link, names)
            except Exception as exc:
                if _pymysql.is_disconnect(exc):
                    raise
                raise ReplayFailed(f"SET NAMES {names[0]}") from exc
        steps = ready_steps(policy, self._flavor, link, primary=primary, replay=replay)
        yield from self._steps_plan(link, steps)

    def _steps_plan(self, link: Link, steps: ReadySteps) -> Plan[None]:
        """Run each of ``steps`` on ``link``, answering probes with their value."""
        value: Any = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return
            value = None
            try:
                if step.kind is ReadyKind.PROBE:
                    value = yield (VALUE, link, (step.sql, None))
                else:
                    yield (QUERY, link, step.sql)
            except Exception as exc:
                if step.kind is not ReadyKind.REPLAY or _pymysql.is_disconnect(exc):
                    raise
                raise ReplayFailed(step.sql) from exc

    def _target_plan(self, target: str, step: StepKind = CALL, arg: Any = None) -> Plan[Any]:
        """Run something outside the routing (ping, autocommit…) on one server: ``step``
        (the caller's function by default) once its connection is ready."""
        link = self._link(target)
        try:
            yield from self._ready_plan(link)
            return (yield (step, link, arg))
        except (errors.Error, ReplayFailed):
            raise
        except Exception as exc:
            if link is self._primary and _pymysql.is_disconnect(exc):
                raise self._primary_lost(exc) from exc
            if _pymysql.is_disconnect(exc):
                link.drop()
            raise _pymysql.translate_error(exc) from exc

    def _route_plan(self, sql: str, stmt: Classification) -> Plan[Any]:
        """Route ``stmt``, do what the policy asks, run it, report; ``None`` when the policy
        deferred it (nothing sent).  Runs inside the statement's span."""
        self._drain()
        policy = self._policy
        decision = policy.route(stmt, sql)
        while True:
            decision = yield from self._settle_plan(decision)
            self.last_decision = decision
            if decision.action is Action.DEFER:
                return None
            link = self._link(decision.target)
            sent = False
            try:
                if decision.prelude:
                    yield from self._prelude_plan(decision)
                raw = yield from self._ready_plan(link)
                sent = True
                result = yield (CALL, link, None)
            except ReplayFailed as exc:
                logger.info("session state cannot follow to %s (%s): pinning", link.name, exc)
                decision = policy.on_replay_failed(decision)
                continue
            except errors.Error:
                raise
            except Exception as exc:
                lost = _pymysql.is_disconnect(exc)
                retry = policy.on_error(decision, connection_lost=lost, sent=sent)
                if lost and link is self._primary:
                    raise self._primary_lost(exc) from exc
                if lost:
                    link.drop()
                if retry is None:
                    raise _pymysql.translate_error(exc) from exc
                decision = retry
                continue
            policy.on_success(decision)
            if stmt.schema is not None:
                self._tracer.set_namespace(stmt.schema)
            if link is self._primary and policy.in_transaction:
                policy.observe_status(PRIMARY, in_transaction=raw.in_transaction)
            return result

    def _prelude_plan(self, decision: Decision) -> Plan[None]:
        for target, sql in decision.prelude:
            link = self._link(target)
            if sql is END_TRANSACTION:
                try:
                    yield from self._ready_plan(link)
                    yield (QUERY, link, sql)
                except Exception as exc:
                    if not _pymysql.is_disconnect(exc) or link is self._primary:
                        raise
                    link.drop()  # the read-only transaction died with its connection
            else:
                yield from self._ready_plan(link)
                yield (QUERY, link, sql)
        self._policy.on_prelude_done(decision)

    def _settle_plan(self, decision: Decision) -> Plan[Decision]:
        """Do what the policy asks until it names where the statement goes."""
        policy = self._policy
        while True:
            self._span.decision(decision)
            action = decision.action
            if action is Action.EXECUTE or action is Action.DEFER:
                return decision
            if action is Action.FAIL:
                self.last_decision = decision
                assert decision.error is not None
                raise decision.error
            if action is Action.FETCH_PRIMARY_STATE:
                value = yield from self._target_plan(
                    PRIMARY,
                    VALUE,
                    (self._flavor.executed_state_statement(ServerRole.PRIMARY), None),
                )
                decision = policy.on_primary_state(decision, self._flavor.parse_executed(value))
            else:
                outcome, duration = yield from self._wait_plan(decision)
                self._span.wait(decision, outcome, duration)
                decision = policy.on_wait(decision, outcome, duration=duration)

    def _wait_plan(self, decision: Decision) -> Plan[tuple[WaitOutcome, float]]:
        link = self._replicas[decision.target]
        wait = wait_query(self._policy, self._flavor, decision)
        started = time.monotonic()
        try:
            yield (OPEN, link, None)
            value = yield (VALUE, link, (wait.sql, wait.deadline))
        except Exception as exc:
            if _pymysql.is_disconnect(exc):
                link.drop()
                logger.info("replica %s unreachable during a wait: %s", link.name, exc)
                return WaitOutcome.FAILED, time.monotonic() - started
            if isinstance(exc, errors.Error) or not _pymysql.is_server_error(exc):
                raise
            logger.warning("replica %s refused the wait: %s", link.name, exc)
            return WaitOutcome.ERROR, time.monotonic() - started
        return self._flavor.wait_outcome(value), time.monotonic() - started

    _names: tuple[str, str | None] | None = None


class _Observed(Protocol):
    def _on_ok(self, name: str, status: int, tail: bytes) -> None: ...


def weak_observer(conn: _Observed) -> Callable[[str, int, bytes], None]:
    """``conn._on_ok`` through a weak reference.  The server connections hold their observer;
    a strong one would make a cycle, and a connection the application drops would stay open
    until the garbage collector finds the cycle, where PyMySQL's closes at once."""
    ref = weakref.ref(conn)

    def observe(name: str, status: int, tail: bytes) -> None:
        owner = ref()
        if owner is not None:
            owner._on_ok(name, status, tail)

    return observe


def check_resolves(spec: ServerSpec) -> None:
    """:class:`~consistent.errors.InterfaceError` when a replica's host does not resolve.

    Replicas connect lazily, so a mistyped one would otherwise surface only when a read picks
    it, and then be skipped as if it were down: say so at ``connect()`` instead."""
    try:
        socket.getaddrinfo(spec.host, spec.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise errors.InterfaceError(
            f"replica {spec.name}: unknown host {spec.host!r} ({exc.strerror or exc})"
        ) from None
