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

import logging
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from consistent import errors
from consistent.classify import Classification, classify
from consistent.dbapi import _pymysql
from consistent.dbapi._pymysql import TrackingConnection
from consistent.dbapi.config import ConnectConfig
from consistent.dbapi.connbase import ConnectionBase
from consistent.dbapi.core import (
    BEGIN,
    BEGIN_READ_ONLY,
    CALL,
    COMMIT,
    NAMES,
    NOT_CONNECTED,
    OPEN,
    QUERY,
    ROLLBACK,
    VALUE,
    Plan,
    Step,
    check_resolves,
    weak_observer,
)
from consistent.dbapi.cursor import Cursor, SSCursor, cursor_class
from consistent.dbapi.links import ServerLink
from consistent.dbapi.monitor import process_monitors
from consistent.policy import PRIMARY, AcknowledgedWrites, ReplicaKnowledge
from consistent.telemetry import NOOP_SPAN, Telemetry

__all__ = ["Connection"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


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


class Connection(ConnectionBase):
    """A PEP 249 connection that sends reads to replicas when the consistency level allows.

    Create it with :func:`consistent.dbapi.connect`.  Beyond PEP 249: ``token`` /
    ``require()`` carry causality between sessions, ``level`` changes the consistency level,
    ``begin(read_only=True)`` starts a read-only transaction that may run on a replica, and
    ``last_decision`` tells where the last statement went and why.  Spans go to
    ``telemetry`` (the process's :func:`~consistent.telemetry.default_telemetry` when
    ``None``).  ``knowledge`` and ``acknowledged`` default to the process's
    (:func:`~consistent.policy.process_knowledge`,
    :func:`~consistent.policy.process_acknowledged` of the primary's ``host:port``).

    The session's logic lives in :class:`~consistent.dbapi.core.SessionCore`; this class
    drives its plans with PyMySQL's blocking calls (:meth:`_drive`).
    """

    _link_class = ServerLink
    _primary: ServerLink
    _replicas: dict[str, ServerLink]
    # The primary's connection while statements may go straight to it: with no replica
    # there is nothing to route, and this path is all such a connection costs over
    # PyMySQL (its OK packets still feed the token).  See _refresh_direct.
    _direct: TrackingConnection | None

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
        self._init_core(config, knowledge=knowledge, acknowledged=acknowledged, telemetry=telemetry)
        self._cursorclass: type[Cursor] = cursorclass or Cursor
        self._cursor_classes: dict[type[Any], type[Cursor]] = {}
        # The function the running statement's CALL step calls (see _drive).
        self._call: Callable[[TrackingConnection], Any] | None = None
        # The mapping ``escape()`` uses, shared with the primary's PyMySQL connection (so that
        # changes a caller makes to ``conn.encoders`` apply) and kept across reconnects.
        self._encoders: dict[Any, Any] = _pymysql.encoders_for(config.options.get("conv"))
        for spec in config.replicas:
            check_resolves(spec)
        self._observer = weak_observer(self)
        self._primary = self._new_link(config.primary, replica=False)
        if defer_connect:
            self._lost = NOT_CONNECTED
        else:
            self._open()

    # ------------------------------------------------------------------ the driver

    def _drive(self, plan: Plan[T], run: Callable[[TrackingConnection], Any] | None = None) -> T:
        """Run ``plan`` to its end, performing each step with PyMySQL (``run`` is what its
        ``CALL`` step calls)."""
        result: Any = None
        error: Exception | None = None
        while True:
            try:
                step = plan.send(result) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            try:
                result = self._perform(step, run)
            except Exception as exc:
                result = None
                error = exc

    def _perform(self, step: Step, run: Callable[[TrackingConnection], Any] | None) -> Any:
        kind, link, arg = step
        assert isinstance(link, ServerLink)
        if kind is CALL:
            assert run is not None
            return run(link.connection(None))
        if kind is OPEN:
            return link.connection(self._flavor if link.replica else None)
        raw = link.raw
        if raw is None:
            raise errors.InterfaceError(0, "")  # dropped: a lost connection, as PyMySQL says
        if kind is QUERY:
            raw.query(arg)
            return None
        if kind is VALUE:
            sql, timeout = arg
            return _pymysql.query_value(raw, sql, timeout=timeout)
        assert kind is NAMES
        raw.set_character_set(*arg)
        return None

    def _open(self) -> None:
        """Connect to the primary for the first time: learn the flavour, create the session."""
        self._adopt_roles()
        config = self._config
        try:
            raw = self._primary.connection(None)
        except Exception as exc:
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {config.primary.name}: "
            ) from exc
        raw.encoders = self._encoders
        self._start_session(raw.server_version, raw.get_autocommit())
        self._replicas = {spec.name: self._new_link(spec, replica=True) for spec in config.replicas}
        self._escaper = raw.cursor()
        try:
            self._drive(self._tracking_plan(self._primary, self._policy.tracking))
        except Exception as exc:
            self._primary.close()
            raise _pymysql.translate_error(exc, prefix="cannot turn GTID tracking on: ") from exc
        self._lost = None
        self._refresh_direct()
        self._attach_monitor()

    def _reopen(self) -> None:
        """A fresh session on the same servers, as PyMySQL's reconnect gives: the session
        state (schema changes, variables, temporary tables, an open transaction) is gone, the
        character set and autocommit mode set through the API are applied again, and the
        token is kept (what this session wrote is still its own)."""
        self._drain()
        policy = self._policy
        self._direct = None
        for link in (self._primary, *self._replicas.values()):
            link.close()
        try:
            raw = self._primary.connection(None)
            raw.encoders = self._encoders
            names = self._names
            if names is not None and (raw.charset, raw.collation) != names:
                raw.set_character_set(*names)
            if raw.get_autocommit() != policy.autocommit:
                raw.autocommit(policy.autocommit)
            self._reset_session()
            self._escaper = raw.cursor()
            self._drive(self._tracking_plan(self._primary, policy.tracking))
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

    # ------------------------------------------------------------------ properties

    @property
    def autocommit(self) -> _Autocommit:
        """The autocommit mode: call it like PyMySQL (``conn.autocommit(False)``) or use and
        assign it as a boolean."""
        return _Autocommit(self)

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._set_autocommit(bool(value))

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
        self._execute("COMMIT", COMMIT, lambda raw: raw.commit())

    def rollback(self) -> None:
        """Roll the current transaction back (where it runs)."""
        self._check_open()
        self._execute("ROLLBACK", ROLLBACK, lambda raw: raw.rollback())

    def begin(self, read_only: bool = False) -> None:
        """Start a transaction.  A read-only one starts on the replica its first statement
        is routed to; a read-write one on the primary."""
        self._check_open()
        if read_only:
            self._execute(
                "START TRANSACTION READ ONLY",
                BEGIN_READ_ONLY,
                lambda raw: raw.query("START TRANSACTION READ ONLY"),
            )
        else:
            self._execute("BEGIN", BEGIN, lambda raw: raw.begin())

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
            if self._needs_reopen:
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
        self._record_schema(db)

    def escape(self, obj: Any, mapping: Any = None) -> str:
        """Escape a value as an SQL literal for this connection's character set."""
        return str(self._open_primary().escape(obj, mapping))

    def literal(self, obj: Any) -> str:
        """Alias of :meth:`escape`."""
        return self.escape(obj)

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

    def set_character_set(self, charset: str, collation: str | None = None) -> None:
        """``SET NAMES charset [COLLATE collation]`` and PyMySQL's encoding with it, on the
        primary now and on every replica connection before its next statement (the setting
        is session state, replayed like a ``SET NAMES`` the application sends)."""
        self._check_open()
        self._check_charset(charset)
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
        sql = self._kill_statement(thread_id)
        self._check_open()
        self._run_statement(sql, lambda raw: raw.kill(thread_id))

    def show_warnings(self) -> tuple[tuple[Any, ...], ...]:
        """``SHOW WARNINGS`` where the last statement ran."""
        return self._on_target(self._last_target(), lambda raw: tuple(raw.show_warnings() or ()))

    # ------------------------------------------------------------------ internals used by cursors

    def _on_primary(self, run: Callable[[TrackingConnection], T]) -> T:
        return self._on_target(PRIMARY, run)

    def _on_target(self, target: str, run: Callable[[TrackingConnection], T]) -> T:
        """Run something outside the routing (ping, autocommit…) on one server."""
        self._follow_roles()
        return self._drive(self._target_plan(target), run)  # type: ignore[no-any-return]

    def _execute(
        self, sql: str, stmt: Classification, run: Callable[[TrackingConnection], T]
    ) -> T | None:
        """Route ``stmt`` and run it within its span; ``None`` when the policy deferred it
        (nothing sent)."""
        with self._tracer.statement(sql) as span:
            self._span = span
            try:
                self._follow_roles()
                return self._drive(self._route_plan(sql, stmt), run)  # type: ignore[no-any-return]
            finally:
                self._span = NOOP_SPAN

    def _set_autocommit(self, value: bool) -> None:
        self._check_open()
        self._on_primary(lambda raw: raw.autocommit(value))
        self._policy.set_autocommit(value)

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
