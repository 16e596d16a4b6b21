"""The asyncio form: one logical connection over a primary and its replicas, on aiomysql.

::

    import consistent.aio

    conn = await consistent.aio.connect(primary="db1:3306", replicas=["db2:3306"],
                                        user="app", password="…", database="shop")
    async with conn.cursor() as cur:
        await cur.execute("INSERT INTO orders (item) VALUES (%s)", ("book",))
        await cur.execute("SELECT * FROM orders")   # on a replica that has the insert
        rows = await cur.fetchall()
    token = conn.token                               # other_conn.require(token)
    await conn.ensure_closed()

:func:`connect` takes what :func:`consistent.dbapi.connect` takes (keywords or a URL, levels,
``wait_timeout`` / ``on_timeout`` / ``max_lag``, the deadlines, ``read_only_functions``,
``telemetry``, ``knowledge``, ``acknowledged``) and drives the same
:class:`~consistent.policy.SessionPolicy` through the same session core
(:mod:`consistent.dbapi.core`).  The connection and cursors follow aiomysql's API, so that
code (and SQLAlchemy's aiomysql adapter) written for aiomysql runs on them; errors are the
``consistent.errors`` classes, which are ``pymysql.err`` classes too (aiomysql raises those).

Differences from aiomysql, on purpose: ``autocommit`` is on by default (as in the blocking
form; ``autocommit=False`` gives aiomysql's); a read whose replica fails is sent elsewhere once;
a lost primary is not reconnected behind the caller's back; ``defer_connect`` is not taken
(``await connect()`` opens the connection, ``Connection(config)`` plus ``await conn.connect()``
defers it).
"""

from __future__ import annotations

from collections.abc import Generator
from types import TracebackType
from typing import Any

from consistent.aio.connection import Connection
from consistent.aio.cursor import Cursor, DictCursor, SSCursor, SSDictCursor, cursor_class
from consistent.dbapi.pep249 import (
    apilevel,
    connect_params,
    paramstyle,
    session_config,
    threadsafety,
)
from consistent.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)
from consistent.policy import AcknowledgedWrites, Level, OnTimeout, ReplicaKnowledge
from consistent.telemetry import Telemetry

__all__ = [
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "DictCursor",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "Level",
    "NotSupportedError",
    "OnTimeout",
    "OperationalError",
    "ProgrammingError",
    "SSCursor",
    "SSDictCursor",
    "Warning",
    "apilevel",
    "connect",
    "cursor_class",
    "paramstyle",
    "threadsafety",
]


class _Connecting:
    """What :func:`connect` returns: await it for the connection, or use it as ``async with
    connect(...) as conn`` (closed at the end of the block), as aiomysql's ``connect()``."""

    __slots__ = ("_conn", "_opened")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._opened: Connection | None = None

    async def _open(self) -> Connection:
        await self._conn.connect()
        self._opened = self._conn
        return self._conn

    def __await__(self) -> Generator[Any, None, Connection]:
        return self._open().__await__()

    async def __aenter__(self) -> Connection:
        return await self._open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn = self._opened
        if conn is not None:
            await conn.__aexit__(exc_type, exc, tb)


def connect(
    dsn: str | None = None,
    *,
    knowledge: ReplicaKnowledge | None = None,
    acknowledged: AcknowledgedWrites | None = None,
    cursorclass: type[Any] | None = None,
    telemetry: Telemetry | None = None,
    **kwargs: Any,
) -> _Connecting:
    """Open a logical asyncio connection: ``conn = await connect(...)`` or ``async with
    connect(...) as conn``.  Arguments as :func:`consistent.dbapi.connect` (``cursorclass``:
    ours, aiomysql's, or a subclass of either).  Bad arguments raise at once, before
    anything is awaited."""
    params = connect_params(dsn, kwargs)
    if params.pop("defer_connect", False):
        raise NotSupportedError(
            "defer_connect is not taken by consistent.aio: build Connection(config) and "
            "await its connect() instead"
        )
    params.pop("loop", None)  # aiomysql's, long deprecated: the running loop is used
    config, telemetry = session_config(params, telemetry)
    cls = cursor_class(cursorclass) if cursorclass is not None else None
    return _Connecting(
        Connection(
            config,
            knowledge=knowledge,
            acknowledged=acknowledged,
            cursorclass=cls,
            telemetry=telemetry,
        )
    )
