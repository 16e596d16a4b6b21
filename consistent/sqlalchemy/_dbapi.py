"""What the SQLAlchemy integration needs from a ``consistent`` connection, in one place.

Both dialects hand their hooks and event listeners a DB-API connection that may be wrapped:
a pool proxy (both forms), and for ``mysql+consistent_async`` SQLAlchemy's asyncio adapter
around a ``consistent.aio`` connection.  :func:`raw_connection` finds our connection behind
either (both forms are a :class:`~consistent.dbapi.core.SessionCore`), and
:class:`ConsistentConnection` is what the integration uses of it: the part of
``consistent.dbapi.Connection`` and ``consistent.aio.Connection`` that involves no I/O, so
the same tracking code serves both forms.

:func:`forget_causality` forgets the required set of the session that used a pooled
connection (``Connection.reset_token()``), while keeping the connection's replayable session
state (character set, isolation level…) that SQLAlchemy itself manages; a full reset would
leave replicas at an isolation level the primary has dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from sqlalchemy.engine.interfaces import AdaptedConnection

from consistent.dbapi.core import SessionCore

if TYPE_CHECKING:
    from consistent.classify import FunctionRules
    from consistent.policy import Level, SessionPolicy

__all__ = ["ConsistentConnection", "forget_causality", "raw_connection"]


class ConsistentConnection(Protocol):
    """The session-level surface both connection forms share (no I/O)."""

    @property
    def policy(self) -> SessionPolicy: ...
    @property
    def flavor(self) -> str: ...
    @property
    def function_rules(self) -> FunctionRules: ...
    @property
    def open(self) -> bool: ...
    @property
    def token(self) -> str: ...
    @property
    def level(self) -> Level: ...
    @level.setter
    def level(self, value: Level | str) -> None: ...
    def require(self, token: object) -> None: ...
    def reset_token(self) -> None: ...
    def get_autocommit(self) -> bool: ...


def raw_connection(connection: Any) -> ConsistentConnection | None:
    """The ``consistent`` connection behind ``connection`` (a DB-API connection, a pool
    proxy, SQLAlchemy's asyncio adapter or a proxy around that adapter), or ``None`` when it
    is not ours or is gone."""
    for wrapped in (connection, getattr(connection, "dbapi_connection", None)):
        candidate: Any = (
            wrapped.driver_connection if isinstance(wrapped, AdaptedConnection) else wrapped
        )
        if isinstance(candidate, SessionCore):
            # both forms add ``open`` to the core (it depends on their I/O)
            return cast("ConsistentConnection", candidate)
    return None


def forget_causality(raw: ConsistentConnection) -> None:
    """Empty ``raw``'s required set: the next session that checks it out starts from its own
    token, not from the previous user's."""
    if raw.open:
        raw.reset_token()
