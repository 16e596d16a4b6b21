"""What the SQLAlchemy integration needs from a ``consistent.dbapi`` connection, in one place.

SQLAlchemy hands dialect hooks and event listeners either the DB-API connection itself or a
pool proxy around it; :func:`raw_connection` finds the connection either way.

:func:`forget_causality` forgets the required set of the session that used a pooled
connection (``Connection.reset_token()``), while keeping the connection's replayable session
state (character set, isolation level…) that SQLAlchemy itself manages; a full reset would
leave replicas at an isolation level the primary has dropped.
"""

from __future__ import annotations

from typing import Any

from consistent.dbapi import Connection

__all__ = ["forget_causality", "raw_connection"]


def raw_connection(connection: Any) -> Connection | None:
    """The ``consistent.dbapi`` connection behind ``connection`` (a DB-API connection or a
    pool proxy), or ``None`` when it is not ours or is gone."""
    if isinstance(connection, Connection):
        return connection
    raw = getattr(connection, "dbapi_connection", None)
    return raw if isinstance(raw, Connection) else None


def forget_causality(raw: Connection) -> None:
    """Empty ``raw``'s required set: the next session that checks it out starts from its own
    token, not from the previous user's."""
    if raw.open:
        raw.reset_token()
