"""``Connection``: one logical PEP 249 connection over a primary and its replicas.

Every statement is classified and handed to the session's
:class:`~consistent.policy.SessionPolicy`; this module only does what the policy asks (fetch the
primary's state, wait on a replica, send the statement and its prelude) and reports back.  The
primary connection opens at once (its handshake tells the flavour); replica connections open on
first use.

Failures: a replica that cannot be reached, or dies during a wait or a read outside a
transaction, is reported to the policy, which marks it unhealthy and names another server; the
caller sees nothing.  A statement sent to the primary is never retried.  Losing the primary
breaks the logical connection: that call and every later one raise ``OperationalError`` saying
so, with the original client errno (2006/2013…) so that pools recognise a disconnect.

Deadlines: every server connection has a read and a write deadline (see
:mod:`consistent.dbapi.links`); a server silent past one counts as a lost connection, so a read
outside a transaction whose replica froze goes elsewhere once (as ``on_timeout`` says), and a
statement on the primary fails with 2013 and is never re-sent.  The wait statement's own read
deadline is its timeout plus :data:`~consistent.policy.deadlines.WAIT_SOCKET_MARGIN`.

Monitoring: a connection with replicas registers with the process's background monitors
(:mod:`consistent.dbapi.monitor`), which keep the replica knowledge current (health, executed
state, lag), and unregisters when it closes.

Telemetry: every routed statement (cursor statements, ``commit()``, ``rollback()``,
``begin()``) is one span of the session's :class:`~consistent.telemetry.StatementTracer`.  The
span gets every decision the policy gives, each wait with its outcome and duration, and the
GTIDs the primary reports for the statement.  With tracing off the tracer is the shared no-op
one and the span is :data:`~consistent.telemetry.NOOP_SPAN`: nothing is allocated.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, TypeVar

from consistent import errors
from consistent.classify import Classification, classify
from consistent.dbapi import _pymysql
from consistent.dbapi._flavor import FlavorSQL, detect_flavor, flavor_sql
from consistent.dbapi._pymysql import TrackingConnection
from consistent.dbapi.config import ConnectConfig, ServerSpec
from consistent.dbapi.cursor import Cursor, SSCursor, cursor_class
from consistent.dbapi.links import ServerLink
from consistent.dbapi.monitor import process_monitors
from consistent.dbapi.pending import PendingGtids, parse_tracked
from consistent.gtid import GtidState
from consistent.policy import (
    END_TRANSACTION,
    PRIMARY,
    Action,
    Decision,
    Level,
    ReplicaKnowledge,
    SessionPolicy,
    Tracking,
    WaitOutcome,
    process_knowledge,
)
from consistent.policy.deadlines import wait_deadline
from consistent.protocol.constants import ClientErrno
from consistent.telemetry import (
    NOOP_SPAN,
    NOOP_TRACER,
    StatementSpan,
    StatementTracer,
    Telemetry,
    default_telemetry,
)

__all__ = ["Connection"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_BEGIN: Final = classify("BEGIN")
_BEGIN_READ_ONLY: Final = classify("START TRANSACTION READ ONLY")
_COMMIT: Final = classify("COMMIT")
_ROLLBACK: Final = classify("ROLLBACK")
_PRIMARY_LOST: Final = int(ClientErrno.CR_SERVER_LOST)


class _ReplayFailed(Exception):
    """Session state could not be replayed on a replica connection."""


class _Autocommit:
    """``conn.autocommit`` works both as PyMySQL's method (``conn.autocommit(True)``) and as a
    boolean attribute (``if conn.autocommit:``, ``conn.autocommit = False``)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __call__(self, value: bool) -> None:
        self._conn._set_autocommit(bool(value))

    def __bool__(self) -> bool:
        return self._conn.get_autocommit()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, bool | int):
            return bool(self) == bool(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(bool(self))

    def __repr__(self) -> str:
        return repr(bool(self))


class Connection:
    """A PEP 249 connection that sends reads to replicas when the consistency level allows.

    Create it with :func:`consistent.dbapi.connect`.  Beyond PEP 249: ``token`` /
    ``require()`` carry causality between sessions, ``level`` changes the consistency level,
    ``begin(read_only=True)`` starts a read-only transaction that may run on a replica, and
    ``last_decision`` tells where the last statement went and why.  Spans go to
    ``telemetry`` (the process's :func:`~consistent.telemetry.default_telemetry` when
    ``None``).
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

    def __init__(
        self,
        config: ConnectConfig,
        *,
        knowledge: ReplicaKnowledge | None = None,
        cursorclass: type[Cursor] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        # The span of the statement running now.  Set first: the primary's OK packets reach
        # _on_ok while connecting, before the policy (and the tracer) exist.
        self._span: StatementSpan = NOOP_SPAN
        self._tracer: StatementTracer = NOOP_TRACER
        self._config = config
        self._closed = False
        self._lost: str | None = None
        # The primary's connection while statements may go straight to it: with no replica
        # there is nothing to route, and this path is all such a connection costs over
        # PyMySQL (its OK packets still feed the token).  See _refresh_direct.
        self._direct: TrackingConnection | None = None
        self._policy_or_none: SessionPolicy | None = None
        self._pending: PendingGtids | None = None
        self._cursorclass: type[Cursor] = cursorclass or Cursor
        self.last_decision: Decision | None = None
        for spec in config.replicas:
            _check_resolves(spec)
        primary_options = config.server_options(config.primary, replica=False)
        primary_options["autocommit"] = config.autocommit
        self._primary = ServerLink(
            PRIMARY, config.primary, primary_options, replica=False, observer=self._on_ok
        )
        try:
            raw = self._primary.connection(None)
        except Exception as exc:
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {config.primary.name}: "
            ) from exc
        flavor = config.flavor or detect_flavor(raw.server_version)
        self._flavor: FlavorSQL = flavor_sql(flavor)
        self._pending = PendingGtids(flavor)
        self._policy_or_none = SessionPolicy(
            replicas=[spec.name for spec in config.replicas],
            knowledge=knowledge if knowledge is not None else process_knowledge(),
            flavor=flavor,
            config=config.policy,
            autocommit=config.autocommit,
        )
        self._replicas: dict[str, ServerLink] = {
            spec.name: self._replica_link(spec) for spec in config.replicas
        }
        self._tracer = (telemetry if telemetry is not None else default_telemetry()).session(
            system=self._flavor.name,
            addresses={
                PRIMARY: (config.primary.host, config.primary.port),
                **{spec.name: (spec.host, spec.port) for spec in config.replicas},
            },
        )
        self._escaper = raw.cursor()
        try:
            self._primary.set_tracking(self._flavor, self._policy.tracking)
        except Exception as exc:
            self._primary.close()
            raise _pymysql.translate_error(exc, prefix="cannot turn GTID tracking on: ") from exc
        self._refresh_direct()
        interval = config.monitor_interval
        if config.replicas and interval is not None:
            process_monitors().attach(
                self,
                self._policy.knowledge,
                self._flavor,
                (config.primary.name, primary_options),
                [(name, link.options) for name, link in self._replicas.items()],
                interval=interval,
            )

    def _replica_link(self, spec: ServerSpec) -> ServerLink:
        options = self._config.server_options(spec, replica=True)
        options["autocommit"] = True
        return ServerLink(spec.name, spec, options, replica=True, observer=self._on_ok)

    # ------------------------------------------------------------------ properties

    @property
    def _policy(self) -> SessionPolicy:
        policy = self._policy_or_none
        assert policy is not None
        return policy

    @property
    def policy(self) -> SessionPolicy:
        """The session's routing state machine (read it; drive it only through this object)."""
        self._drain()
        return self._policy

    def _drain(self) -> None:
        """Hand the GTIDs noted from OK packets to the policy."""
        pending = self._pending
        if pending:
            policy = self._policy
            for target, state in pending.drain():
                policy.observe_gtids(target, state)

    @property
    def tracer(self) -> StatementTracer:
        """The session's tracer; its ``session_id`` names this connection in the traces
        (``""`` when tracing is off)."""
        return self._tracer

    @property
    def flavor(self) -> str:
        """``"mysql"`` or ``"mariadb"``."""
        return self._flavor.name

    @property
    def replicas(self) -> tuple[str, ...]:
        """The replicas' names (``host:port``)."""
        return tuple(self._replicas)

    @property
    def level(self) -> Level:
        """The consistency level; assign a :class:`Level` or its name to change it."""
        return self._policy.level

    @level.setter
    def level(self, value: Level | str) -> None:
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

    @property
    def open(self) -> bool:
        """True until closed (or until the primary connection was lost)."""
        return not self._closed and self._lost is None and self._primary.connected

    @property
    def autocommit(self) -> _Autocommit:
        """The autocommit mode: call it like PyMySQL (``conn.autocommit(False)``) or use and
        assign it as a boolean."""
        return _Autocommit(self)

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._set_autocommit(bool(value))

    def get_autocommit(self) -> bool:
        """The session's autocommit mode."""
        return self._policy.autocommit

    # ------------------------------------------------------------------ PEP 249

    def cursor(self, cursor: type[Cursor] | None = None, *, unbuffered: bool = False) -> Cursor:
        """A new cursor; ``unbuffered=True`` (or ``cursor=SSCursor``) streams rows."""
        self._check_open()
        cls = cursor_class(cursor) if cursor is not None else self._cursorclass
        if unbuffered and not cls.unbuffered:
            cls = SSCursor
        return cls(self)

    def commit(self) -> None:
        """Commit the current transaction (where it runs)."""
        self._check_open()
        self._execute("COMMIT", _COMMIT, lambda raw: raw.commit())

    def rollback(self) -> None:
        """Roll the current transaction back (where it runs)."""
        self._check_open()
        self._execute("ROLLBACK", _ROLLBACK, lambda raw: raw.rollback())

    def begin(self, read_only: bool = False) -> None:
        """Start a transaction.  A read-only one starts on the replica its first statement
        is routed to; a read-write one on the primary."""
        self._check_open()
        if read_only:
            self._execute("START TRANSACTION READ ONLY", _BEGIN_READ_ONLY, _query_ok)
        else:
            self._execute("BEGIN", _BEGIN, lambda raw: raw.begin())

    def close(self) -> None:
        """Close every server connection.  Closing twice raises ``Error`` (as PyMySQL)."""
        if self._closed:
            raise errors.Error("Already closed")
        self._closed = True
        self._direct = None
        if self._replicas:
            process_monitors().detach(self)
        for link in (self._primary, *self._replicas.values()):
            link.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Commit when the block succeeded, roll back when it raised, then close."""
        if self._closed:
            return
        try:
            if exc_type is None and self.open:
                self.commit()
            elif self.open:
                try:
                    self.rollback()
                except errors.Error:
                    logger.debug("rollback on error failed", exc_info=True)
        finally:
            self.close()

    # ------------------------------------------------------------------ PyMySQL extras

    def ping(self, reconnect: bool = False) -> None:
        """Check that the primary answers (``reconnect`` must stay false: a lost primary
        means a new logical connection)."""
        self._check_open()
        if reconnect:
            raise errors.NotSupportedError("reconnect=True is not supported: open a new connection")
        self._on_primary(lambda raw: raw.ping(False))

    def select_db(self, db: str) -> None:
        """Change the default schema (replayed on replica connections)."""
        self._check_open()
        self._on_primary(lambda raw: raw.select_db(db))
        self._policy.record_schema(db)

    def escape(self, obj: Any, mapping: Any = None) -> str:
        """Escape a value as an SQL literal for this connection's character set."""
        self._check_open()
        raw = self._primary.raw
        assert raw is not None
        return str(raw.escape(obj, mapping))

    def literal(self, obj: Any) -> str:
        """Alias of :meth:`escape`."""
        return self.escape(obj)

    def insert_id(self) -> int:
        """``LAST_INSERT_ID`` of the last statement on the primary."""
        raw = self._primary.raw
        return int(raw.insert_id()) if raw is not None else 0

    def thread_id(self) -> int:
        """The primary connection's server thread id."""
        raw = self._primary.raw
        return int(raw.thread_id()) if raw is not None else 0

    def get_server_info(self) -> str:
        """The primary's version string."""
        raw = self._primary.raw
        return str(raw.get_server_info()) if raw is not None else ""

    @property
    def server_version(self) -> str:
        """The primary's version string."""
        return self.get_server_info()

    def character_set_name(self) -> str:
        """The connection character set."""
        raw = self._primary.raw
        return str(raw.character_set_name()) if raw is not None else ""

    def show_warnings(self) -> tuple[tuple[Any, ...], ...]:
        """``SHOW WARNINGS`` where the last statement ran."""
        return self._on_target(self._last_target(), lambda raw: tuple(raw.show_warnings() or ()))

    # ------------------------------------------------------------------ internals used by cursors

    def _check_not_closed(self) -> None:
        if self._closed:
            raise errors.InterfaceError("the connection is closed")

    def _check_open(self) -> None:
        self._check_not_closed()
        if self._lost is not None:
            raise errors.OperationalError(_PRIMARY_LOST, self._lost)

    def _mogrify(self, query: str, args: Any) -> str:
        return str(self._escaper.mogrify(query, args))

    def _last_target(self) -> str:
        decision = self.last_decision
        return decision.target if decision is not None else PRIMARY

    def _set_autocommit(self, value: bool) -> None:
        self._check_open()
        self._on_primary(lambda raw: raw.autocommit(value))
        self._policy.set_autocommit(value)

    def _on_ok(self, name: str, status: int, tail: bytes) -> None:
        pending = self._pending
        if pending is None:
            return  # an OK while connecting, before the session exists
        try:
            text = _pymysql.tracked_gtid_text(status, tail)
        except errors.RemoteProtocolError:
            logger.warning("undecodable session-state data from %s: %r", name, tail)
            return
        if text is None:
            return
        span = self._span
        if span is not NOOP_SPAN and name == PRIMARY and span.recording and self._own_gtids():
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
                    self._policy.observe_gtids(PRIMARY, state)
                    return
        if pending.add(name, text):
            self._drain()

    def _own_gtids(self) -> bool:
        """The primary's OK packets carry the statement's own GTIDs: MariaDB's ``last_gtid``
        always, MySQL's tracker only at ``OWN_GTID`` (``ALL_GTIDS`` reports the whole
        executed set, which no statement produced alone)."""
        return self._flavor.name == "mariadb" or self._primary.tracking is Tracking.OWN

    def _parse_gtids(self, text: str) -> GtidState | None:
        """``text`` parsed; ``None`` when it does not parse (the policy's drain reports it)."""
        try:
            return parse_tracked(text, self._flavor.name)
        except errors.MalformedGtidSet:
            return None

    def _link(self, target: str) -> ServerLink:
        return self._primary if target == PRIMARY else self._replicas[target]

    def _ready(self, link: ServerLink) -> TrackingConnection:
        """``link``'s connection, opened, with the session's state replayed on it."""
        policy = self._policy
        if link is self._primary:
            if self._lost is not None:
                raise errors.OperationalError(_PRIMARY_LOST, self._lost)
            raw = link.connection(None)
            if link.tracking is not policy.tracking and not policy.in_transaction:
                link.set_tracking(self._flavor, policy.tracking)
            return raw
        raw = link.connection(self._flavor)
        if link.applied_seq < policy.replay_seq:
            statements, seq = policy.replay_since(link.applied_seq)
            for sql in statements:
                try:
                    raw.query(sql)
                except Exception as exc:
                    if _pymysql.is_disconnect(exc):
                        raise
                    raise _ReplayFailed(sql) from exc
            link.applied_seq = seq
        return raw

    def _primary_lost(self, exc: BaseException) -> errors.Error:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else _PRIMARY_LOST
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        self._lost = (
            f"lost the connection to the primary {self._config.primary.name}: {detail}; "
            "open a new connection"
        )
        self._direct = None
        self._primary.drop()
        return errors.OperationalError(code, self._lost)

    def _on_primary(self, run: Callable[[TrackingConnection], T]) -> T:
        return self._on_target(PRIMARY, run)

    def _on_target(self, target: str, run: Callable[[TrackingConnection], T]) -> T:
        """Run something outside the routing (ping, autocommit…) on one server."""
        link = self._link(target)
        try:
            return run(self._ready(link))
        except (errors.Error, _ReplayFailed):
            raise
        except Exception as exc:
            if link is self._primary and _pymysql.is_disconnect(exc):
                raise self._primary_lost(exc) from exc
            if _pymysql.is_disconnect(exc):
                link.drop()
            raise _pymysql.translate_error(exc) from exc

    def _execute(
        self, sql: str, stmt: Classification, run: Callable[[TrackingConnection], T]
    ) -> T | None:
        """Route ``stmt`` and run it within its span; ``None`` when the policy deferred it
        (nothing sent)."""
        with self._tracer.statement(sql) as span:
            self._span = span
            try:
                return self._route_and_run(sql, stmt, run)
            finally:
                self._span = NOOP_SPAN

    def _route_and_run(
        self, sql: str, stmt: Classification, run: Callable[[TrackingConnection], T]
    ) -> T | None:
        """:meth:`_execute` inside the span: route, do what the policy asks, run, report."""
        self._drain()
        policy = self._policy
        decision = policy.route(stmt, sql)
        while True:
            decision = self._settle(decision)
            self.last_decision = decision
            if decision.action is Action.DEFER:
                return None
            link = self._link(decision.target)
            try:
                if decision.prelude:
                    self._run_prelude(decision)
                raw = self._ready(link)
                result = run(raw)
            except _ReplayFailed as exc:
                logger.info("session state cannot follow to %s (%s): pinning", link.name, exc)
                decision = policy.on_replay_failed(decision)
                continue
            except errors.Error:
                raise
            except Exception as exc:
                lost = _pymysql.is_disconnect(exc)
                retry = policy.on_error(decision, connection_lost=lost)
                if lost and link is self._primary:
                    raise self._primary_lost(exc) from exc
                if lost:
                    link.drop()
                if retry is None:
                    raise _pymysql.translate_error(exc) from exc
                decision = retry
                continue
            policy.on_success(decision)
            if link is self._primary and policy.in_transaction:
                policy.observe_status(PRIMARY, in_transaction=raw.in_transaction)
            return result

    def _run_prelude(self, decision: Decision) -> None:
        for target, sql in decision.prelude:
            link = self._link(target)
            if sql is END_TRANSACTION:
                try:
                    self._ready(link).query(sql)
                except Exception as exc:
                    if not _pymysql.is_disconnect(exc) or link is self._primary:
                        raise
                    link.drop()  # the read-only transaction died with its connection
            else:
                self._ready(link).query(sql)
        self._policy.on_prelude_done(decision)

    def _settle(self, decision: Decision) -> Decision:
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
                value = self._on_primary(
                    lambda raw: _pymysql.query_value(raw, self._flavor.primary_executed)
                )
                decision = policy.on_primary_state(decision, self._flavor.parse_executed(value))
            else:
                outcome, duration = self._wait(decision)
                self._span.wait(decision, outcome, duration)
                decision = policy.on_wait(decision, outcome, duration=duration)

    def _wait(self, decision: Decision) -> tuple[WaitOutcome, float]:
        link = self._replicas[decision.target]
        wait_set = decision.wait_set
        assert wait_set is not None
        timeout = decision.wait_timeout or self._policy.config.wait_timeout
        started = time.monotonic()
        try:
            raw = link.connection(self._flavor)
            value = _pymysql.query_value(
                raw,
                self._flavor.wait_statement(wait_set, timeout),
                timeout=wait_deadline(timeout),
            )
        except Exception as exc:
            if _pymysql.is_disconnect(exc):
                link.drop()
                logger.info("replica %s unreachable during a wait: %s", link.name, exc)
                return WaitOutcome.FAILED, time.monotonic() - started
            if isinstance(exc, errors.Error) or not _is_server_error(exc):
                raise
            logger.warning("replica %s refused the wait: %s", link.name, exc)
            return WaitOutcome.ERROR, time.monotonic() - started
        return self._flavor.wait_outcome(value), time.monotonic() - started

    def _run_statement(
        self, sql: str, run: Callable[[Any], T], stmt: Classification | None = None
    ) -> T | None:
        """Entry point for cursors: route ``sql`` (classified unless ``stmt`` is given) and
        call ``run`` with the chosen server's PyMySQL connection."""
        if self._replicas:
            self._check_open()
            return self._execute(sql, stmt if stmt is not None else classify(sql), run)
        raw = self._direct
        if raw is None:
            self._check_open()
        with self._tracer.statement(sql) as span:
            self._span = span
            try:
                if raw is None:
                    result = self._on_primary(run)
                    self._refresh_direct()
                    return result
                try:
                    return run(raw)
                except Exception as exc:
                    raise self._direct_failure(exc) from exc
            finally:
                self._span = NOOP_SPAN

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

    def _direct_failure(self, exc: Exception) -> errors.Error:
        """The error to raise for ``exc`` from a statement sent by the direct path."""
        if isinstance(exc, errors.Error):
            return exc
        if _pymysql.is_disconnect(exc):
            return self._primary_lost(exc)
        return _pymysql.translate_error(exc)


def _query_ok(raw: TrackingConnection) -> None:
    raw.query("START TRANSACTION READ ONLY")


def _is_server_error(exc: BaseException) -> bool:
    return _pymysql.is_server_error(exc)


def _check_resolves(spec: ServerSpec) -> None:
    """:class:`~consistent.errors.InterfaceError` when a replica's host does not resolve.

    Replicas connect lazily, so a mistyped one would otherwise surface only when a read picks
    it, and then be skipped as if it were down: say so at ``connect()`` instead."""
    try:
        socket.getaddrinfo(spec.host, spec.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise errors.InterfaceError(
            f"replica {spec.name}: unknown host {spec.host!r} ({exc.strerror or exc})"
        ) from None
