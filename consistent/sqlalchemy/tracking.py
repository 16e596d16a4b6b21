"""The consistency token follows the logical session, never a pooled DB-API connection.

SQLAlchemy checks a DB-API connection out of its pool for every ORM transaction and keeps the
connection's ``info`` across checkouts, so nothing about a session may stay on it.  The token
lives where the session lives, and only SQLAlchemy's documented events move it:

* **pool** (``checkout`` / ``checkin``): a DB-API connection forgets the previous user's
  required set, and gets back the consistency level it was opened with, each time it changes
  hands; no session inherits another's causality.
* **ORM Session** (``after_begin``): the DB-API connection the session just got is told the
  session's token (``require``).  The token is taken back into ``Session.info["consistent.token"]``
  after every statement (``after_cursor_execute``), flush, commit and rollback, while the
  connection is still the session's.
* **Core Connection**: a ``Connection`` holds one DB-API connection from ``engine.connect()``
  to ``close()``, so its token is that connection's, live; the pool wipes it at checkin.

* **asyncio** (``mysql+consistent_async``): an ``AsyncSession`` runs on a sync ``Session``
  and an ``AsyncConnection`` on a sync ``Connection``, so the same events serve them; the
  DB-API connection behind the pool is SQLAlchemy's adapter around a ``consistent.aio``
  connection, and :func:`~consistent.sqlalchemy._dbapi.raw_connection` looks through it.

:func:`token` and :func:`require` carry causality across processes (an HTTP cookie, a job
queue): ``require(session, request.cookies["consistent-token"])`` makes that session's reads see
everything the token stands for.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session
from sqlalchemy.orm import Session, scoped_session

from consistent.errors import InterfaceError, MalformedGtidSet
from consistent.policy.states import FlavorName, format_token, merge, parse_token
from consistent.sqlalchemy._dbapi import (
    ConsistentConnection,
    forget_causality,
    raw_connection,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlalchemy.engine.interfaces import DBAPIConnection, DBAPICursor, ExecutionContext
    from sqlalchemy.orm import SessionTransaction
    from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection


__all__ = ["TOKEN_KEY", "TRACKER_OPTION", "SessionTracker", "install", "require", "token"]

logger = logging.getLogger(__name__)

#: Where an ORM session keeps its token: ``session.info[TOKEN_KEY]`` (``""`` or absent: none).
TOKEN_KEY: Final = "consistent.token"
#: Where an ORM session keeps its :class:`SessionTracker` (in ``session.info``).
_TRACKER_KEY: Final = "consistent.tracker"
#: Execution option naming the tracker of the session a Core connection currently serves.
TRACKER_OPTION: Final = "consistent_tracker"
#: ``connection_record.info`` key: the level the DB-API connection was opened with.  This is
#: the connection's own configuration, not a session's state, so the pool may keep it.
_OPENING_LEVEL_KEY: Final = "consistent.opening_level"
_FLAVORS: Final[tuple[FlavorName, ...]] = ("mysql", "mariadb")


def _token_flavor(text: str) -> FlavorName | None:
    """The flavour a token names in its prefix (``mysql:…`` / ``mariadb:…``)."""
    head = text.strip()[:8].lower()
    for flavor in _FLAVORS:
        if head.startswith(f"{flavor}:"):
            return flavor
    return None


def merge_tokens(first: str, second: str) -> str:
    """The token standing for both ``first`` and ``second`` (of one flavour).  Raises
    :class:`~consistent.errors.MalformedGtidSet` for text that is not a token."""
    if not first.strip():
        return _canonical(second)
    if not second.strip():
        return _canonical(first)
    flavor = _token_flavor(first) or _token_flavor(second)
    candidates = (flavor,) if flavor is not None else _FLAVORS
    error: MalformedGtidSet | None = None
    for name in candidates:
        try:
            return format_token(merge(parse_token(first, name), parse_token(second, name)))
        except MalformedGtidSet as exc:
            error = exc
    assert error is not None
    raise error


def _canonical(text: str) -> str:
    if not text.strip():
        return ""
    flavor = _token_flavor(text)
    candidates = (flavor,) if flavor is not None else _FLAVORS
    error: MalformedGtidSet | None = None
    for name in candidates:
        try:
            return format_token(parse_token(text, name))
        except MalformedGtidSet as exc:
            error = exc
    assert error is not None
    raise error


class SessionTracker:
    """The consistency state of one ORM session: the token in ``session.info`` and the Core
    connections of the session's current transaction (which are given back at its end)."""

    __slots__ = ("_connections", "_info", "_seen")

    def __init__(self, info: MutableMapping[Any, Any]) -> None:
        self._info = info
        self._connections: list[Connection] = []
        # DB-API connection id -> the required set last taken from it (an identity check
        # keeps the per-statement capture to a pointer comparison).
        self._seen: dict[int, object] = {}

    @property
    def token(self) -> str:
        """The session's token (``""``: it requires nothing yet)."""
        value = self._info.get(TOKEN_KEY)
        return value if isinstance(value, str) else ""

    def require(self, token: str) -> None:
        """Merge ``token`` into the session's, and into its open connections'."""
        self._info[TOKEN_KEY] = merge_tokens(self.token, token)
        for connection in self._live():
            raw = raw_connection(connection.connection)
            if raw is not None:
                raw.require(token)

    def attach(self, connection: Connection) -> None:
        """``connection`` now serves the session: tell it the session's token.  A token of
        the other flavour (a MySQL token on MariaDB…) names nothing this topology has
        executed: it is dropped with a warning rather than failing every statement."""
        raw = raw_connection(connection.connection)
        if raw is None:
            return
        current = self.token
        if current:
            try:
                raw.require(current)
            except MalformedGtidSet:
                logger.warning(
                    "dropping a %s token a %s server cannot wait for", current, raw.flavor
                )
                self._info[TOKEN_KEY] = ""
        if not any(c is connection for c in self._connections):
            self._connections.append(connection)
            connection.execution_options(**{TRACKER_OPTION: self})

    def absorb(self, raw: ConsistentConnection) -> None:
        """Take ``raw``'s required set into the session's token."""
        if not raw.open:
            return
        policy = raw.policy
        required = policy.required
        if not required or self._seen.get(id(raw)) is required:
            return
        self._seen[id(raw)] = required
        current = self.token
        state = parse_token(current, policy.flavor) if current else None
        self._info[TOKEN_KEY] = format_token(merge(state, required))

    def absorb_all(self) -> None:
        """Take the token of every connection the session still holds."""
        for connection in self._live():
            raw = raw_connection(connection.connection)
            if raw is not None:
                self.absorb(raw)

    def detach_all(self) -> None:
        """The session's transaction ended: forget its connections."""
        for connection in self._connections:
            if not connection.closed:
                connection.execution_options(**{TRACKER_OPTION: None})
        self._connections.clear()
        self._seen.clear()

    def _live(self) -> list[Connection]:
        return [c for c in self._connections if not c.closed and not c.invalidated]


def _tracker(session: Session) -> SessionTracker:
    tracker = session.info.get(_TRACKER_KEY)
    if not isinstance(tracker, SessionTracker):
        tracker = SessionTracker(session.info)
        session.info[_TRACKER_KEY] = tracker
    return tracker


def _is_ours(connection: Connection) -> bool:
    from consistent.sqlalchemy.dialect import ConsistentDialect  # noqa: PLC0415 - import cycle

    return isinstance(connection.dialect, ConsistentDialect)


# ------------------------------------------------------------------------------ ORM session


def _after_begin(session: Session, transaction: SessionTransaction, connection: Connection) -> None:
    if _is_ours(connection):
        _tracker(session).attach(connection)


def _absorb_session(session: Session, *_: Any) -> None:
    tracker = session.info.get(_TRACKER_KEY)
    if isinstance(tracker, SessionTracker):
        tracker.absorb_all()


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is not None:
        return  # a savepoint or subtransaction: the connections stay with the session
    tracker = session.info.get(_TRACKER_KEY)
    if isinstance(tracker, SessionTracker):
        tracker.detach_all()


_SESSION_LISTENERS: Final = (
    ("after_begin", _after_begin),
    ("after_flush", _absorb_session),
    ("after_commit", _absorb_session),
    ("after_rollback", _absorb_session),
    ("after_transaction_end", _after_transaction_end),
)


def _install_session_listeners() -> None:
    """Listen on the ``Session`` class (every session and sessionmaker), once per process.
    The listeners ignore connections of other dialects."""
    for name, listener in _SESSION_LISTENERS:
        if not event.contains(Session, name, listener):
            event.listen(Session, name, listener)


# ------------------------------------------------------------------------------ engine and pool


def _after_cursor_execute(  # noqa: PLR0917 - SQLAlchemy's event signature
    conn: Connection,
    cursor: DBAPICursor,
    statement: str,
    parameters: Any,
    context: ExecutionContext | None,
    executemany: bool,
) -> None:
    options = context.execution_options if context is not None else conn.get_execution_options()
    tracker = options.get(TRACKER_OPTION)
    if isinstance(tracker, SessionTracker):
        raw = raw_connection(conn.connection)
        if raw is not None:
            tracker.absorb(raw)


def _on_connect(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    raw = raw_connection(dbapi_connection)
    if raw is not None:
        record.info[_OPENING_LEVEL_KEY] = raw.level


def _hand_over(dbapi_connection: DBAPIConnection | None, record: ConnectionPoolEntry) -> None:
    """The DB-API connection changes hands: wipe the previous session's causality and level."""
    raw = raw_connection(dbapi_connection)
    if raw is None or not raw.open:
        return
    forget_causality(raw)
    level = record.info.get(_OPENING_LEVEL_KEY)
    if level is not None and raw.level != level:
        raw.level = level


def _on_checkout(
    dbapi_connection: DBAPIConnection,
    record: ConnectionPoolEntry,
    proxy: PoolProxiedConnection,
) -> None:
    _hand_over(dbapi_connection, record)


def install(engine: Engine) -> None:
    """Wire an engine of the ``mysql+consistent`` dialect: pool hand-over, per-statement token
    capture, and the ORM session listeners."""
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "checkout", _on_checkout)
    event.listen(engine, "checkin", _hand_over)
    event.listen(engine, "after_cursor_execute", _after_cursor_execute)
    _install_session_listeners()


# ------------------------------------------------------------------------------ public API

SessionLike = (
    Session
    | scoped_session[Any]
    | Connection
    | AsyncSession
    | async_scoped_session[Any]
    | AsyncConnection
)


def _resolve(target: SessionLike) -> Session | Connection:
    """The sync object behind ``target``: an ``AsyncSession`` runs on its ``sync_session``
    and an ``AsyncConnection`` on its ``sync_connection``, where the listeners work."""
    if isinstance(target, scoped_session):
        session: Session = target()
        return session
    if isinstance(target, async_scoped_session):
        scoped: AsyncSession = target()
        return scoped.sync_session
    if isinstance(target, AsyncSession):
        return target.sync_session
    if isinstance(target, AsyncConnection):
        connection = target.sync_connection
        if connection is None:
            raise InterfaceError("the AsyncConnection is not started: it has no token")
        return connection
    return target


def _core_raw(connection: Connection) -> ConsistentConnection:
    if not _is_ours(connection):
        raise InterfaceError(
            f"{connection.dialect.name}+{connection.dialect.driver} is not mysql+consistent: "
            "it has no consistency token"
        )
    raw = raw_connection(connection.connection)
    if raw is None:
        raise InterfaceError("the connection has no consistent connection")
    return raw


def token(target: SessionLike) -> str:
    """The consistency token of an ORM ``Session`` (or ``scoped_session``, ``AsyncSession``,
    ``async_scoped_session``) or a Core ``Connection`` (or ``AsyncConnection``): ``""`` when
    it requires nothing, else text to hand to :func:`require` in another session or
    process."""
    resolved = _resolve(target)
    if isinstance(resolved, Connection):
        return _core_raw(resolved).token
    tracker = _tracker(resolved)
    tracker.absorb_all()
    return tracker.token


def require(target: SessionLike, token: str | None) -> None:
    """Make the later reads of ``target`` see everything ``token`` stands for.  ``None`` and
    ``""`` require nothing; malformed text raises
    :class:`~consistent.errors.MalformedGtidSet` (1772)."""
    if not token:
        return
    resolved = _resolve(target)
    if isinstance(resolved, Connection):
        _core_raw(resolved).require(token)
        return
    _tracker(resolved).require(token)
