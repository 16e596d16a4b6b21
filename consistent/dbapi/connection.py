"""``Connection``: one logical PEP 249 connection over a primary and its replicas.

Every statement is classified and handed to the session's
:class:`~consistent.policy.SessionPolicy`; this module only does what the policy asks (fetch the
primary's state, wait on a replica, send the statement and its prelude) and reports back.  The
primary connection opens at once (its handshake tells the flavour); replica connections open on
first use.

Failures: a replica that cannot be reached, or dies during a wait or a read outside a
transaction, is reported to the policy, which marks it unhealthy and names another server; the
caller sees nothing (``retry_reads=False``: a read that was sent is not run again).  A
statement sent to the primary is never retried.  Losing the primary breaks the logical
connection: that call and every later one raise ``OperationalError`` saying so, with the
original client errno (2006/2013…) so that pools recognise a disconnect, until
``ping(reconnect=True)`` or ``connect()`` opens a fresh session.

PyMySQL's connection API is kept where a logical connection can honour it: ``defer_connect``
and :meth:`Connection.connect`, ``ping(reconnect=True)`` (a fresh session on the same servers,
keeping the token), ``affected_rows()``, ``encoders``, ``set_character_set()`` (which follows
the session onto replicas, PyMySQL's encoding included), ``kill()``.

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

import dataclasses
import logging
import socket
import time
import warnings
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, TypeVar

from consistent import errors
from consistent.classify import Classification, FunctionRules, classify
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
    AcknowledgedWrites,
    Action,
    Decision,
    Level,
    ReplicaKnowledge,
    SessionPolicy,
    Tracking,
    WaitOutcome,
    process_acknowledged,
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
#: What a connection opened with ``defer_connect=True`` says until ``connect()``; raised as
#: ``InterfaceError(0, …)``, as PyMySQL raises ``InterfaceError(0, '')`` on an unopened one.
_NOT_CONNECTED: Final = "not connected yet (defer_connect=True): call connect() first"


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
    ``None``).  ``knowledge`` and ``acknowledged`` default to the process's
    (:func:`~consistent.policy.process_knowledge`,
    :func:`~consistent.policy.process_acknowledged` of the primary's ``host:port``).
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
        acknowledged: AcknowledgedWrites | None = None,
        cursorclass: type[Cursor] | None = None,
        telemetry: Telemetry | None = None,
        defer_connect: bool = False,
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
        self._cursor_classes: dict[type[Any], type[Cursor]] = {}
        self.last_decision: Decision | None = None
        # Where the last cursor statement ran: ``affected_rows()`` asks that server's link.
        self._query_target = PRIMARY
        # The mapping ``escape()`` uses, shared with the primary's PyMySQL connection (so that
        # changes a caller makes to ``conn.encoders`` apply) and kept across reconnects.
        self._encoders: dict[Any, Any] = _pymysql.encoders_for(config.options.get("conv"))
        # ``(charset, collation)`` set with set_character_set(); replica connections follow it.
        self._names: tuple[str, str | None] | None = None
        self._knowledge_arg = knowledge
        self._telemetry_arg = telemetry
        # Until the primary's handshake names its family, only built-ins of both are safe.
        self._functions = FunctionRules(None, config.read_only_functions)
        # Every OK packet of the primary feeds the acknowledged state as it arrives (_on_ok),
        # whatever the level, so that read_all_writes sessions of the process see the write.
        self._acknowledged = (
            acknowledged if acknowledged is not None else process_acknowledged(config.primary.name)
        )
        self._replicas: dict[str, ServerLink] = {}
        for spec in config.replicas:
            _check_resolves(spec)
        primary_options = config.server_options(config.primary, replica=False)
        primary_options["autocommit"] = config.autocommit
        self._observer = _weak_observer(self)
        self._primary = ServerLink(
            PRIMARY, config.primary, primary_options, replica=False, observer=self._observer
        )
        if defer_connect:
            self._lost = _NOT_CONNECTED
        else:
            self._open()

    def _open(self) -> None:
        """Connect to the primary for the first time: learn the flavour, create the session."""
        config = self._config
        knowledge = self._knowledge_arg
        try:
            raw = self._primary.connection(None)
        except Exception as exc:
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {config.primary.name}: "
            ) from exc
        raw.encoders = self._encoders
        flavor = config.flavor or detect_flavor(raw.server_version)
        self._flavor: FlavorSQL = flavor_sql(flavor, raw.server_version)
        self._functions = FunctionRules(flavor, config.read_only_functions)
        self._pending = PendingGtids(flavor, tags=self._flavor.gtid_tags)
        autocommit = config.autocommit
        self._policy_or_none = SessionPolicy(
            replicas=[spec.name for spec in config.replicas],
            knowledge=knowledge if knowledge is not None else process_knowledge(),
            flavor=flavor,
            config=config.policy,
            # None: the server's default, which the handshake's status reported.
            autocommit=raw.get_autocommit() if autocommit is None else autocommit,
            acknowledged=self._acknowledged,
        )
        self._replicas = {spec.name: self._replica_link(spec) for spec in config.replicas}
        telemetry = self._telemetry_arg
        self._tracer = (telemetry if telemetry is not None else default_telemetry()).session(
            system=self._flavor.name,
            addresses={
                PRIMARY: (config.primary.host, config.primary.port),
                **{spec.name: (spec.host, spec.port) for spec in config.replicas},
            },
        )
        self._tracer.set_namespace(config.options.get("database"))
        self._escaper = raw.cursor()
        try:
            self._primary.set_tracking(self._flavor, self._policy.tracking)
        except Exception as exc:
            self._primary.close()
            raise _pymysql.translate_error(exc, prefix="cannot turn GTID tracking on: ") from exc
        self._lost = None
        self._refresh_direct()
        interval = config.monitor_interval
        if config.replicas and interval is not None:
            process_monitors().attach(
                self,
                self._policy.knowledge,
                self._flavor,
                (config.primary.name, self._primary.options),
                [(name, link.options) for name, link in self._replicas.items()],
                interval=interval,
            )

    def _reopen(self) -> None:
        """A fresh session on the same servers, as PyMySQL's reconnect gives: the session
        state (schema changes, variables, temporary tables, an open transaction) is gone, the
        character set and autocommit mode set through the API are applied again, and the
        token is kept (what this session wrote is still its own)."""
        self._drain()
        policy = self._policy
        token = policy.token
        autocommit = policy.autocommit
        self._direct = None
        for link in (self._primary, *self._replicas.values()):
            link.close()
        try:
            raw = self._primary.connection(None)
            raw.encoders = self._encoders
            names = self._names
            if names is not None and (raw.charset, raw.collation) != names:
                raw.set_character_set(*names)
            if raw.get_autocommit() != autocommit:
                raw.autocommit(autocommit)
            policy.reset()
            policy.set_autocommit(autocommit)
            if token:
                policy.require(token)
            self._escaper = raw.cursor()
            self._primary.set_tracking(self._flavor, policy.tracking)
        except Exception as exc:
            self._primary.drop()
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {self._config.primary.name}: "
            ) from exc
        self._closed = False
        self._lost = None
        self._refresh_direct()

    def connect(self, sock: object = None) -> None:
        """Open the connection: the first time after ``defer_connect=True``, otherwise a
        fresh session as :meth:`_reopen` describes (PyMySQL's ``connect()`` reconnects too).
        ``sock`` (PyMySQL's pre-connected socket) is refused: a logical connection opens a
        socket to each of its servers itself."""
        if sock is not None:
            raise errors.NotSupportedError(
                "connect(sock) is not supported: the connection opens its servers' sockets"
            )
        if self._policy_or_none is None:
            self._closed = False
            self._open()
        else:
            self._reopen()

    def _replica_link(self, spec: ServerSpec) -> ServerLink:
        options = self._config.server_options(spec, replica=True)
        options["autocommit"] = True
        return ServerLink(spec.name, spec, options, replica=True, observer=self._observer)

    # ------------------------------------------------------------------ properties

    @property
    def _policy(self) -> SessionPolicy:
        policy = self._policy_or_none
        if policy is None:
            raise errors.InterfaceError(0, _NOT_CONNECTED)
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
                raise errors.InterfaceError(0, _NOT_CONNECTED)
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
        """The session's autocommit mode (before ``connect()``: the one it will ask for)."""
        policy = self._policy_or_none
        return policy.autocommit if policy is not None else bool(self._config.autocommit)

    # ------------------------------------------------------------------ PEP 249

    def cursor(self, cursor: type[Any] | None = None, *, unbuffered: bool = False) -> Cursor:
        """A new cursor; ``unbuffered=True`` (or ``cursor=SSCursor``) streams rows.  ``cursor``
        is one of our classes, one of PyMySQL's, or a subclass of either (see
        :func:`~consistent.dbapi.cursor.cursor_class`)."""
        self._check_open()
        if cursor is None:
            cls = self._cursorclass
        else:
            known = self._cursor_classes.get(cursor)
            if known is None:
                known = self._cursor_classes[cursor] = cursor_class(cursor)
            cls = known
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
        """Check that the primary answers.  With ``reconnect=True`` (deprecated by PyMySQL,
        which warns, as this does) a closed or lost connection, or one whose primary does not
        answer, is opened again as :meth:`connect` does: a fresh session that keeps its
        token."""
        if reconnect:
            warnings.warn(
                "The 'reconnect' argument is deprecated. Create a new connection if you want "
                "to reconnect.",
                DeprecationWarning,
                stacklevel=2,
            )
            if self._closed or self._lost is not None or not self._primary.connected:
                self.connect()
                return
        self._check_open()
        try:
            self._on_primary(lambda raw: raw.ping(False))
        except errors.Error:
            if not reconnect:
                raise
            self.connect()
            self._on_primary(lambda raw: raw.ping(False))

    def select_db(self, db: str) -> None:
        """Change the default schema (replayed on replica connections)."""
        self._check_open()
        self._on_primary(lambda raw: raw.select_db(db))
        self._policy.record_schema(db)
        self._tracer.set_namespace(db)

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

    @property
    def charset(self) -> str:
        """The connection character set's name (PyMySQL's attribute)."""
        raw = self._primary.raw
        if raw is not None:
            return str(raw.charset)
        names = self._names
        return names[0] if names is not None else str(self._config.options.get("charset") or "")

    @property
    def encoding(self) -> str:
        """The Python codec of the connection character set (PyMySQL's attribute)."""
        raw = self._primary.raw
        if raw is None:
            raise errors.InterfaceError(0, _NOT_CONNECTED)
        return str(raw.encoding)

    @property
    def encoders(self) -> dict[Any, Any]:
        """Python type -> function that renders a value as an SQL literal: the mapping
        ``escape()`` and parameter interpolation use, as PyMySQL's attribute (changes to it
        apply, on every server connection and across reconnects)."""
        return self._encoders

    @encoders.setter
    def encoders(self, mapping: dict[Any, Any]) -> None:
        self._encoders = mapping
        raw = self._primary.raw
        if raw is not None:
            raw.encoders = mapping

    def get_host_info(self) -> str:
        """How the primary connection is made (``"socket host:port"``), as PyMySQL."""
        raw = self._primary.raw
        return str(raw.get_host_info()) if raw is not None else "Not connected"

    def get_proto_info(self) -> int:
        """The primary's protocol version, as PyMySQL."""
        raw = self._primary.raw
        return int(raw.get_proto_info()) if raw is not None else 0

    def affected_rows(self) -> int:
        """Rows the last cursor statement affected (or returned), on the server that ran it,
        as PyMySQL's method reports them."""
        raw = self._link(self._query_target).raw
        return int(raw.affected_rows()) if raw is not None else 0

    def set_character_set(self, charset: str, collation: str | None = None) -> None:
        """``SET NAMES charset [COLLATE collation]`` and PyMySQL's encoding with it, on the
        primary now and on every replica connection before its next statement (the setting
        is session state, replayed like a ``SET NAMES`` the application sends)."""
        self._check_open()
        if not _pymysql.charset_known(charset):
            raise errors.ProgrammingError(f"unknown character set {charset!r}")
        sql = f"SET NAMES {charset}" + (f" COLLATE {collation}" if collation else "")
        names = (charset, collation or None)

        def run(raw: TrackingConnection) -> None:
            raw.set_character_set(charset, collation)
            self._names = names

        self._run_statement(sql, run)

    def set_charset(self, charset: str) -> None:
        """Deprecated by PyMySQL (which warns, as this does): :meth:`set_character_set`."""
        warnings.warn(
            "'set_charset' is deprecated, use 'set_character_set' instead",
            DeprecationWarning,
            stacklevel=2,
        )
        self.set_character_set(charset)

    def kill(self, thread_id: int) -> None:
        """``KILL thread_id`` on the primary, where :meth:`thread_id` numbers connections."""
        if not isinstance(thread_id, int):
            raise TypeError("thread_id must be an integer")
        self._check_open()
        self._run_statement(f"KILL {thread_id:d}", lambda raw: raw.kill(thread_id))

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
            if self._policy_or_none is None:
                raise errors.InterfaceError(0, self._lost)
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
        if name == PRIMARY:
            # Acknowledged to the process now, before the statement returns: a read_all_writes
            # read of any session that begins after it must see it.
            self._acknowledged.note(text, self._flavor.name)
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
                    self._policy.observe_gtids(PRIMARY, state, acknowledge=False)
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
            return parse_tracked(text, self._flavor.name, tags=self._flavor.gtid_tags)
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
            names = self._names
            if names is not None and (raw.charset, raw.collation) != names:
                # set_character_set() changed PyMySQL's encoding as well as the session's:
                # this connection's encoding follows, then the replay below sets the session.
                try:
                    raw.set_character_set(*names)
                except Exception as exc:
                    if _pymysql.is_disconnect(exc):
                        raise
                    raise _ReplayFailed(f"SET NAMES {names[0]}") from exc
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
            "open a new connection (or call ping(reconnect=True))"
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
            sent = False
            try:
                if decision.prelude:
                    self._run_prelude(decision)
                raw = self._ready(link)
                sent = True
                result = run(raw)
            except _ReplayFailed as exc:
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
            result = self._execute(
                sql, stmt if stmt is not None else classify(sql, self._functions), run
            )
            if result is not None:
                self._query_target = self._last_target()
            return result
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


def _weak_observer(conn: Connection) -> Callable[[str, int, bytes], None]:
    """``conn._on_ok`` through a weak reference.  The server connections hold their observer;
    a strong one would make a cycle, and a connection the application drops would stay open
    until the garbage collector finds the cycle, where PyMySQL's closes at once."""
    ref = weakref.ref(conn)

    def observe(name: str, status: int, tail: bytes) -> None:
        owner = ref()
        if owner is not None:
            owner._on_ok(name, status, tail)

    return observe


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
