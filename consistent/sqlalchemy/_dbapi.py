"""What the SQLAlchemy integration needs from a ``consistent`` connection, in one place.

Both dialects hand their hooks and event listeners a DB-API connection that may be wrapped:
a pool proxy (both forms), and for ``mysql+consistent_async`` SQLAlchemy's asyncio adapter
around a ``consistent.aio`` connection.  :func:`raw_connection` finds our connection behind
either, and :class:`ConsistentConnection` is what the integration uses of it: the part of
``consistent.dbapi.Connection`` and ``consistent.aio.Connection`` that involves no I/O, so
the same tracking code serves both forms.

:func:`forget_causality` forgets the required set of the session that used a pooled
connection (``Connection.reset_token()``), while keeping the connection's replayable session
state (character set, isolation level…) that SQLAlchemy itself manages; a full reset would
leave replicas at an isolation level the primary has dropped.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine.interfaces import AdaptedConnection

from consistent.dbapi import Connection

if TYPE_CHECKING:
    from consistent.classify import FunctionRules
    from consistent.policy import Level, SessionPolicy

__all__ = ["ConsistentConnection", "forget_causality", "is_open", "raw_connection"]

#: The asyncio form's module; looked up, never imported here: while nothing imported it, no
#: connection of it can exist.
_ASYNC_MODULE = "consistent.aio"


class ConsistentConnection(Protocol):
    """The session-level surface both connection forms share (no I/O)."""

    @property
    def policy(self) -> SessionPolicy: ...
    @property
    def flavor(self) -> str: ...
    @property
    def function_rules(self) -> FunctionRules: ...
    @property
    def token(self) -> str: ...
    @property
    def level(self) -> Level: ...
    @level.setter
    def level(self, value: Level | str) -> None: ...
    def require(self, token: object) -> None: ...
    def reset_token(self) -> None: ...
    def get_autocommit(self) -> bool: ...


def _is_ours(candidate: object) -> bool:
    if isinstance(candidate, Connection):
        return True
    aio = sys.modules.get(_ASYNC_MODULE)
    async_class = getattr(aio, "Connection", None)
    return isinstance(async_class, type) and isinstance(candidate, async_class)


def raw_connection(connection: Any) -> ConsistentConnection | None:
    """The ``consistent`` connection behind ``connection`` (a DB-API connection, a pool
    proxy, SQLAlchemy's asyncio adapter or a proxy around that adapter), or ``None`` when it
    is not ours or is gone."""
    for wrapped in (connection, getattr(connection, "dbapi_connection", None)):
        candidate: Any = (
            wrapped.driver_connection if isinstance(wrapped, AdaptedConnection) else wrapped
        )
        if _is_ours(candidate):
            found: ConsistentConnection = candidate
            return found
    return None


def is_open(raw: ConsistentConnection) -> bool:
    """Whether ``raw`` still has its session: PyMySQL's ``open`` for the sync form,
    aiomysql's ``closed`` for the asyncio form."""
    closed = getattr(raw, "closed", None)
    if isinstance(closed, bool):
        return not closed
    return bool(getattr(raw, "open", False))


def forget_causality(raw: ConsistentConnection) -> None:
    """Empty ``raw``'s required set: the next session that checks it out starts from its own
    token, not from the previous user's."""
    if is_open(raw):
        raw.reset_token()
