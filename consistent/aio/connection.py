"""``Connection``: the asyncio form of :class:`consistent.dbapi.connection.Connection`.

The same session (:class:`~consistent.dbapi.core.SessionCore`: the policy, routing, waits,
replay, tracking, the OK-packet observer, telemetry) driven with aiomysql's coroutines instead
of PyMySQL's blocking calls: :meth:`Connection._drive` performs the steps of the core's plans
with ``await``.  Behaviour is the blocking form's, statement for statement.

Deadlines: a :class:`~consistent.aio.deadline.Watchdog` bounds each round trip on a server by
that server's read deadline (``read_timeout`` on the primary, ``replica_read_timeout`` on
replicas; a wait statement by its own timeout plus a margin); opening a connection is bounded
by ``connect_timeout``.  A server that misses one counts as a lost connection (error 2013): a
read outside a transaction goes elsewhere once, everything else fails, a write is never
re-sent.

Cancellation: a task cancelled while a statement runs leaves that server's connection in the
middle of a reply, so the connection is closed.  On a replica the logical connection carries on
(the next statement opens a fresh one); on the primary the session is lost, as when the primary
goes away: later calls raise ``OperationalError`` (2013) until ``ping(reconnect=True)``.

The API follows aiomysql's (so that code, and SQLAlchemy's aiomysql adapter, written for it
runs unchanged): ``await conn.commit()``, ``async with conn.cursor() as cur``, ``close()`` /
``await ensure_closed()``…; plus the blocking form's ``token``, ``require()``, ``level``,
``begin(read_only=True)`` and ``last_decision``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from consistent import errors
from consistent.aio import _aiomysql
from consistent.aio._aiomysql import TrackingConnection
from consistent.aio.cursor import Cursor, cursor_class
from consistent.aio.links import AsyncServerLink
from consistent.classify import Classification, classify
from consistent.dbapi import _pymysql
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
from consistent.dbapi.monitor import process_monitors
from consistent.policy import PRIMARY, AcknowledgedWrites, ReplicaKnowledge
from consistent.telemetry import NOOP_SPAN, Telemetry

__all__ = ["Connection"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Run = Callable[[TrackingConnection], Awaitable[Any]]


class Connection(ConnectionBase):
    """A logical asyncio connection that sends reads to replicas when the consistency level
    allows.  Create it with ``await consistent.aio.connect(...)``."""

    _link_class = AsyncServerLink
    _primary: AsyncServerLink
    _replicas: dict[str, AsyncServerLink]
    # The primary's connection while statements may go straight to it (no replicas).
    _direct: TrackingConnection | None

    def __init__(
        self,
        config: ConnectConfig,
        *,
        knowledge: ReplicaKnowledge | None = None,
        acknowledged: AcknowledgedWrites | None = None,
        cursorclass: type[Cursor] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """Not opened yet: ``await conn.connect()`` (:func:`consistent.aio.connect` does)."""
        self._init_core(config, knowledge=knowledge, acknowledged=acknowledged, telemetry=telemetry)
        self._cursorclass: type[Cursor] = cursorclass or Cursor
        self._cursor_classes: dict[type[Any], type[Cursor]] = {}
        for spec in config.replicas:
            check_resolves(spec)
        self._observer = weak_observer(self)
        self._primary = self._new_link(config.primary, replica=False)
        self._replicas = {spec.name: self._new_link(spec, replica=True) for spec in config.replicas}
        self._lost = NOT_CONNECTED
        self._escaper: Any = None

    # ------------------------------------------------------------------ the driver

    async def _drive(self, plan: Plan[T], run: Run | None = None) -> T:
        """Run ``plan`` to its end, performing each step with aiomysql (``run`` is what its
        ``CALL`` step awaits)."""
        result: Any = None
        error: Exception | None = None
        while True:
            try:
                step = plan.send(result) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            try:
                result = await self._perform(step, run)
            except Exception as exc:
                result = None
                error = exc

    async def _perform(self, step: Step, run: Run | None) -> Any:
        kind, link, arg = step
        assert isinstance(link, AsyncServerLink)
        if kind is OPEN:
            try:
                return await link.connection(self._flavor if link.replica else None)
            except asyncio.CancelledError:
                self._interrupted(link)
                raise
        raw = link.raw
        if raw is None:
            raise errors.InterfaceError(0, "")  # dropped: a lost connection, as PyMySQL says
        timeout = link.read_timeout
        if kind is VALUE and arg[1] is not None:
            timeout = arg[1]
        watchdog = link.watchdog
        watchdog.arm(timeout)
        try:
            if kind is CALL:
                assert run is not None
                return await run(raw)
            if kind is QUERY:
                await raw.query(arg)
                return None
            if kind is VALUE:
                return await _aiomysql.query_value(raw, arg[0])
            assert kind is NAMES
            await _aiomysql.set_character_set(raw, *arg)
            return None
        except asyncio.CancelledError:
            if watchdog.expired():
                link.drop()
                raise link.missed_deadline(timeout) from None
            self._interrupted(link)
            raise
        finally:
            watchdog.disarm()

    async def connect(self) -> None:
        """Open the connection: the first time, or (after ``close()`` or a lost primary) a
        fresh session on the same servers that keeps the token, as the blocking form's
        ``connect()``."""
        if self._policy_or_none is None:
            self._closed = False
            await self._open()
        else:
            await self._reopen()

    async def _open(self) -> None:
        """Connect to the primary for the first time: learn the flavour, create the session."""
        self._adopt_roles()
        config = self._config
        try:
            raw = await self._primary.connection(None)
        except Exception as exc:
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {config.primary.name}: "
            ) from exc
        self._start_session(raw.server_version, raw.get_autocommit())
        self._escaper = _aiomysql.CURSOR_CLASSES[(False, False)](raw)
        try:
            await self._drive(self._tracking_plan(self._primary, self._policy.tracking))
        except Exception as exc:
            self._primary.drop()
            raise _pymysql.translate_error(exc, prefix="cannot turn GTID tracking on: ") from exc
        self._lost = None
        self._refresh_direct()
        self._attach_monitor()

    async def _reopen(self) -> None:
        self._drain()
        policy = self._policy
        self._direct = None
        for link in (self._primary, *self._replicas.values()):
            await link.close()
        try:
            raw = await self._primary.connection(None)
            names = self._names
            if names is not None and raw.charset != names[0]:
                await _aiomysql.set_character_set(raw, *names)
            if raw.get_autocommit() != policy.autocommit:
                await raw.autocommit(policy.autocommit)
            self._reset_session()
            self._escaper = _aiomysql.CURSOR_CLASSES[(False, False)](raw)
            await self._drive(self._tracking_plan(self._primary, policy.tracking))
        except Exception as exc:
            self._primary.drop()
            raise _pymysql.translate_error(
                exc, prefix=f"cannot connect to the primary {self._config.primary.name}: "
            ) from exc
        if self._closed:
            self._attach_monitor()
        self._closed = False
        self._lost = None
        self._refresh_direct()

    # ------------------------------------------------------------------ properties

    @property
    def closed(self) -> bool:
        """aiomysql's attribute: True once closed or lost (``not open``)."""
        return not self.open

    # ------------------------------------------------------------------ PEP 249, async

    def cursor(self, *cursors: type[Any]) -> Cursor:
        """A new cursor (``async with conn.cursor() as cur``, or ``cur = await
        conn.cursor()``).  The class is one of ours, one of aiomysql's, or a subclass of
        either (see :func:`~consistent.aio.cursor.cursor_class`); several are combined as
        aiomysql combines them (``conn.cursor(DictCursor, SSCursor)``)."""
        self._check_open()
        if not cursors:
            cls = self._cursorclass
        else:
            key: Any = cursors[0] if len(cursors) == 1 else cursors
            known = self._cursor_classes.get(key)
            if known is None:
                known = self._cursor_classes[key] = _combined(cursors)
            cls = known
        return cls(self)

    async def commit(self) -> None:
        """Commit the current transaction (where it runs)."""
        self._check_open()
        await self._execute("COMMIT", COMMIT, _commit)

    async def rollback(self) -> None:
        """Roll the current transaction back (where it runs)."""
        self._check_open()
        await self._execute("ROLLBACK", ROLLBACK, _rollback)

    async def begin(self, read_only: bool = False) -> None:
        """Start a transaction.  A read-only one starts on the replica its first statement
        is routed to; a read-write one on the primary."""
        self._check_open()
        if read_only:
            await self._execute("START TRANSACTION READ ONLY", BEGIN_READ_ONLY, _begin_read_only)
        else:
            await self._execute("BEGIN", BEGIN, _begin)

    async def autocommit(self, value: bool) -> None:
        """Turn autocommit on or off (aiomysql's coroutine)."""
        self._check_open()
        flag = bool(value)

        async def run(raw: TrackingConnection) -> None:
            await raw.autocommit(flag)

        await self._on_target(PRIMARY, run)
        self._policy.set_autocommit(flag)

    def close(self) -> None:
        """Close every server connection at once, without ``COM_QUIT`` (aiomysql's
        ``close()``); closing twice does nothing."""
        if self._closed:
            return
        self._shut()
        for link in (self._primary, *self._replicas.values()):
            link.drop()

    async def ensure_closed(self) -> None:
        """Say goodbye to every server (``COM_QUIT``) and close (aiomysql's coroutine)."""
        if self._closed:
            return
        self._shut()
        for link in (self._primary, *self._replicas.values()):
            await link.close()

    def _shut(self) -> None:
        self._closed = True
        self._direct = None
        if self._replicas and self._policy_or_none is not None:
            process_monitors().detach(self)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close, as aiomysql's connection does: politely when the block succeeded, at once
        when it raised (an open transaction is rolled back by the server either way)."""
        if exc_type is None:
            await self.ensure_closed()
        else:
            self.close()

    async def ping(self, reconnect: bool = False) -> None:
        """Check that the primary answers.  With ``reconnect=True`` a closed or lost
        connection, or one whose primary does not answer, is opened again as
        :meth:`connect` does: a fresh session that keeps its token."""
        if reconnect and self._needs_reopen:
            await self.connect()
            return
        self._check_open()
        try:
            await self._on_target(PRIMARY, _ping)
        except errors.Error:
            if not reconnect:
                raise
            await self.connect()
            await self._on_target(PRIMARY, _ping)

    async def select_db(self, db: str) -> None:
        """Change the default schema (replayed on replica connections)."""
        self._check_open()

        async def run(raw: TrackingConnection) -> None:
            await raw.select_db(db)

        await self._on_target(PRIMARY, run)
        self._record_schema(db)

    async def kill(self, thread_id: int) -> None:
        """``KILL thread_id`` on the primary, where :meth:`thread_id` numbers connections."""
        sql = self._kill_statement(thread_id)
        self._check_open()

        async def run(raw: TrackingConnection) -> None:
            await raw.kill(thread_id)

        await self._run_statement(sql, run)

    async def show_warnings(self) -> tuple[tuple[Any, ...], ...]:
        """``SHOW WARNINGS`` where the last statement ran."""

        async def run(raw: TrackingConnection) -> tuple[tuple[Any, ...], ...]:
            return tuple(await raw.show_warnings() or ())

        return await self._on_target(self._last_target(), run)  # type: ignore[no-any-return]

    async def set_charset(self, charset: str) -> None:
        """``SET NAMES charset`` and the connection's encoding with it, on the primary now
        and on every replica connection before its next statement (aiomysql's coroutine)."""
        self._check_open()
        self._check_charset(charset)

        async def run(raw: TrackingConnection) -> None:
            await _aiomysql.set_character_set(raw, charset)
            self._names = (charset, None)

        await self._run_statement(f"SET NAMES {charset}", run)

    # ------------------------------------------------------------------ synchronous extras

    def escape(self, obj: Any) -> str:
        """Escape a value as an SQL literal for this connection's character set."""
        return str(self._open_primary().escape(obj))

    def literal(self, obj: Any) -> str:
        """Alias of :meth:`escape`."""
        return self.escape(obj)

    def character_set_name(self) -> str:
        """The connection character set."""
        raw = self._primary.raw
        if raw is not None:
            return str(raw.character_set_name())
        return str(self._config.options.get("charset") or "")

    @property
    def charset(self) -> str:
        """The connection character set's name."""
        return self.character_set_name()

    def get_transaction_status(self) -> bool:
        """True while the session is in a transaction (aiomysql's method)."""
        return self._policy.in_transaction

    @property
    def host(self) -> str:
        """The primary's host."""
        return self._config.primary.host

    @property
    def port(self) -> int:
        """The primary's port."""
        return self._config.primary.port

    @property
    def user(self) -> str | None:
        """The user name the connection logs in with."""
        user = self._config.options.get("user")
        return None if user is None else str(user)

    @property
    def db(self) -> str | None:
        """The default schema the connection was opened with."""
        db = self._config.options.get("database")
        return None if db is None else str(db)

    @property
    def echo(self) -> bool:
        """aiomysql's statement logging: always off (spans record statements)."""
        return False

    # ------------------------------------------------------------------ internals used by cursors

    async def _on_target(self, target: str, run: Run) -> Any:
        """Run something outside the routing (ping, autocommit…) on one server."""
        self._follow_roles()
        return await self._drive(self._target_plan(target), run)

    async def _execute(self, sql: str, stmt: Classification, run: Run) -> Any:
        """Route ``stmt`` and run it within its span; ``None`` when the policy deferred it
        (nothing sent)."""
        with self._tracer.statement(sql) as span:
            self._span = span
            try:
                self._follow_roles()
                return await self._drive(self._route_plan(sql, stmt), run)
            finally:
                self._span = NOOP_SPAN

    async def _run_statement(self, sql: str, run: Run, stmt: Classification | None = None) -> Any:
        """Entry point for cursors: route ``sql`` (classified unless ``stmt`` is given) and
        await ``run`` with the chosen server's aiomysql connection."""
        if self._replicas:
            self._check_open()
            result = await self._execute(
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
                    result = await self._on_target(PRIMARY, run)
                    self._refresh_direct()
                    return result
                return await self._direct_call(run(raw))
            finally:
                self._span = NOOP_SPAN

    async def _direct_call(self, call: Awaitable[T]) -> T:
        """Await ``call`` on the primary's connection outside the routing (no replicas),
        with the primary's read deadline; failures as the routed path reports them.  This
        is the whole per-statement cost of a connection without replicas."""
        link = self._primary
        watchdog = link.watchdog
        watchdog.arm(link.read_timeout)
        try:
            return await call
        except BaseException as exc:
            raise self._direct_raised(exc)  # noqa: B904 (the cause is set there)
        finally:
            watchdog.disarm()

    def _direct_raised(self, exc: BaseException) -> BaseException:
        """What to raise for ``exc``, raised by a statement of the direct path (no replicas)
        while the primary's watchdog was armed: a missed deadline or a lost connection loses
        the primary, a cancellation in the middle of a statement drops the connection and goes
        on as it is, and a driver error becomes ours."""
        if isinstance(exc, asyncio.CancelledError):
            link = self._primary
            if link.watchdog.expired():
                failure = self._primary_lost(link.missed_deadline(link.read_timeout))
                failure.__suppress_context__ = True  # as ``raise failure from None``
                return failure
            self._interrupted(link)
            return exc
        if isinstance(exc, Exception):
            failure = self._direct_failure(exc)
            if failure is not exc:  # as ``raise failure from exc``
                failure.__cause__ = exc
                failure.__suppress_context__ = True
            return failure
        return exc


def _combined(cursors: tuple[type[Any], ...]) -> type[Cursor]:
    if len(cursors) == 1:
        return cursor_class(cursors[0])
    classes = [cursor_class(c) for c in cursors]
    unbuffered = any(c.unbuffered for c in classes)
    as_dict = any(c.as_dict for c in classes)
    return cursor_class(_aiomysql.CURSOR_CLASSES[(unbuffered, as_dict)])


async def _commit(raw: TrackingConnection) -> None:
    await raw.commit()


async def _rollback(raw: TrackingConnection) -> None:
    await raw.rollback()


async def _begin(raw: TrackingConnection) -> None:
    await raw.begin()


async def _begin_read_only(raw: TrackingConnection) -> None:
    await raw.query("START TRANSACTION READ ONLY")


async def _ping(raw: TrackingConnection) -> None:
    await raw.ping(False)
