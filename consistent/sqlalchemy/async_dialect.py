"""``mysql+consistent_async://``: the ``mysql+consistent`` dialect over ``consistent.aio``.

::

    engine = create_async_engine(
        "mysql+consistent_async://app:pw@db1:3306/shop?replica=db2:3306&level=read_own_writes"
    )
    async with AsyncSession(engine) as session:
        session.add(Order(item="book"))
        await session.commit()
        (await session.scalars(select(Order))).all()    # on a replica that has the insert
        cookie = consistent.sqlalchemy.token(session)

SQLAlchemy runs its asyncio extension on its sync engine inside greenlets; a DB-API module
whose connections and cursors are awaitable is adapted to the sync DB-API the engine expects
(``sqlalchemy.dialects.mysql.aiomysql``'s ``AsyncAdapt_*`` classes, which this module reuses
for ``consistent.aio``, whose API is aiomysql's).  Everything else is ``mysql+consistent``'s,
inherited, not restated: the URL options, the lazily opened primary transaction, the
``dbapi.Error`` tree (``consistent.errors``, which are PyMySQL's classes too),
``is_disconnect``, and the token that follows ORM sessions (an ``AsyncSession`` is a sync
``Session`` underneath).  The only awaited calls the shared code makes are ``begin()`` and
``rollback()`` on the ``consistent.aio`` connection, through :meth:`_begin` / :meth:`_rollback`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, cast

from sqlalchemy import util
from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_module
from sqlalchemy.dialects.mysql.aiomysql import (
    AsyncAdapt_aiomysql_connection,
    AsyncAdapt_aiomysql_cursor,
    AsyncAdapt_aiomysql_ss_cursor,
    AsyncAdaptFallback_aiomysql_connection,
    MySQLDialect_aiomysql,
)
from sqlalchemy.dialects.mysql.mariadb import MariaDBDialect
from sqlalchemy.util.concurrency import await_fallback, await_only

import consistent.dbapi
from consistent.sqlalchemy.dialect import ConsistentDialect
from consistent.sqlalchemy.url import normalize_connect_params

if TYPE_CHECKING:
    from sqlalchemy.connectors.asyncio import AsyncIODBAPIConnection, AsyncIODBAPICursor
    from sqlalchemy.engine.interfaces import DBAPIConnection, DBAPIModule

    from consistent.sqlalchemy._dbapi import ConsistentConnection

__all__ = [
    "AsyncAdaptConsistentDBAPI",
    "ConsistentAsyncDialect",
    "ConsistentAsyncMariaDBDialect",
]

#: The module whose ``connect`` opens the connections.
ASYNC_MODULE: Final = "consistent.aio"
#: PEP 249 module attributes shared with ``consistent.dbapi`` (one error tree, one type set).
_SHARED_NAMES: Final = (
    "Warning",
    "Error",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "NUMBER",
    "STRING",
    "DATETIME",
    "BINARY",
    "Binary",
)


class AsyncAdaptConsistentSSCursor(AsyncAdapt_aiomysql_ss_cursor):
    """An unbuffered cursor: rows stream from whichever server ran the statement."""

    __slots__ = ()

    def _make_new_cursor(self, connection: AsyncIODBAPIConnection) -> AsyncIODBAPICursor:
        return connection.cursor(self._adapt_connection.dbapi.SSCursor)


class AsyncAdaptConsistentConnection(AsyncAdapt_aiomysql_connection):
    __slots__ = ()

    _cursor_cls = AsyncAdapt_aiomysql_cursor
    _ss_cursor_cls = AsyncAdaptConsistentSSCursor


class AsyncAdaptFallbackConsistentConnection(
    AsyncAdaptConsistentConnection, AsyncAdaptFallback_aiomysql_connection
):
    __slots__ = ()


class AsyncAdaptConsistentDBAPI(AsyncAdapt_dbapi_module):
    """The DB-API module SQLAlchemy sees: ``consistent.dbapi``'s names, and a ``connect``
    that awaits ``consistent.aio.connect`` and adapts the connection."""

    #: ``consistent.aio``'s ``ping(reconnect)`` takes the flag, as PyMySQL's does.
    _send_false_to_ping = True

    def __init__(self, aio: ModuleType) -> None:
        self.aio = aio
        self.paramstyle = consistent.dbapi.paramstyle
        for name in _SHARED_NAMES:
            setattr(self, name, getattr(consistent.dbapi, name))
        self.Cursor = aio.Cursor
        self.SSCursor = aio.SSCursor

    def connect(self, *args: Any, **kwargs: Any) -> AsyncAdaptConsistentConnection:
        async_fallback = kwargs.pop("async_fallback", False)
        creator = kwargs.pop("async_creator_fn", self.aio.connect)
        if util.asbool(async_fallback):
            return AsyncAdaptFallbackConsistentConnection(
                self, await_fallback(creator(*args, **kwargs))
            )
        return AsyncAdaptConsistentConnection(self, await_only(creator(*args, **kwargs)))


# mypy sees ``supports_server_side_cursors`` as a property in one base and an attribute in the
# other; both say True.
class ConsistentAsyncDialect(ConsistentDialect, MySQLDialect_aiomysql):  # type: ignore[override]
    """The ``mysql+consistent_async`` dialect (entry point ``mysql.consistent_async``):
    ``mysql+consistent`` first, SQLAlchemy's aiomysql dialect for the asyncio plumbing (pool
    class, termination, the driver connection)."""

    driver = "consistent_async"
    is_async = True
    supports_statement_cache = True
    _sscursor = AsyncAdaptConsistentSSCursor

    @classmethod
    def import_dbapi(cls) -> DBAPIModule:  # type: ignore[override]
        return cast("DBAPIModule", AsyncAdaptConsistentDBAPI(importlib.import_module(ASYNC_MODULE)))

    def connect(self, *cargs: Any, **cparams: Any) -> DBAPIConnection:
        return cast(
            "DBAPIConnection", self.loaded_dbapi.connect(**normalize_connect_params(cparams))
        )

    def _begin(self, raw: ConsistentConnection) -> None:
        await_only(cast("Any", raw).begin())

    def _rollback(self, raw: ConsistentConnection) -> None:
        await_only(cast("Any", raw).rollback())


class ConsistentAsyncMariaDBDialect(MariaDBDialect, ConsistentAsyncDialect):  # type: ignore[override]
    """``mariadb+consistent_async://``: the same, with SQLAlchemy's MariaDB-only behaviour."""

    supports_statement_cache = True
