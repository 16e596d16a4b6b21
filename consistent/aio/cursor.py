"""Asyncio cursors whose statements are routed by the connection's policy.

The asyncio form of :mod:`consistent.dbapi.cursor`: a cursor formats its parameters, hands the
SQL to its :class:`~consistent.aio.connection.Connection`, and reads the result from whichever
server ran it through an aiomysql cursor of the matching class on that server's connection.
Four classes, as in aiomysql: buffered or unbuffered (server-side), tuples or dicts; a subclass
of one of aiomysql's classes is accepted wherever a cursor class is (:func:`cursor_class`), and
reads its results, so its row conversion (or its ``_show_warnings``) applies.

aiomysql's API: ``await cur.execute(sql, args)``, ``await cur.fetchone()``, ``async with
conn.cursor() as cur``, ``async for row in cur``, ``await cur.close()``.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable, Callable, Generator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

from consistent import errors
from consistent.aio import _aiomysql
from consistent.classify import StatementKind, classify
from consistent.dbapi import _pymysql
from consistent.dbapi.cursorbase import CursorBase, class_for_driver, driver_classes
from consistent.telemetry import NOOP_SPAN, NOOP_TRACER

if TYPE_CHECKING:
    from consistent.aio.connection import Connection

__all__ = ["Cursor", "DictCursor", "SSCursor", "SSDictCursor", "cursor_class"]

T = TypeVar("T")

Row = tuple[Any, ...] | dict[str, Any]

# What fetchone() and fetchall() ask of the aiomysql cursor (no closure per call).
_FETCHONE: Final = operator.methodcaller("fetchone")
_FETCHALL: Final = operator.methodcaller("fetchall")


class Cursor(CursorBase):
    """A buffered cursor returning rows as tuples."""

    #: The aiomysql cursor class that reads results (``None``: aiomysql's class of this kind).
    driver_class: ClassVar[type[Any] | None] = None

    def __init__(self, connection: Connection) -> None:
        self._connection: Connection | None = connection
        self._arraysize = 1
        self._inner: Any = None
        self._inners: dict[int, Any] = {}
        # The direct path's last (connection, aiomysql cursor): most cursors use only one.
        self._direct: tuple[Any, Any] = (None, None)
        self._deferred: str | None = None
        self._inner_class = (
            self.driver_class or _aiomysql.CURSOR_CLASSES[(self.unbuffered, self.as_dict)]
        )

    # ------------------------------------------------------------------ attributes

    @property
    def connection(self) -> Connection | None:
        """The connection the cursor was made by; ``None`` once closed (as aiomysql)."""
        return self._connection

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._connection is None

    @property
    def arraysize(self) -> int:
        """Rows ``fetchmany()`` returns by default (PEP 249)."""
        return self._arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._arraysize = value
        if self._inner is not None:
            self._inner.arraysize = value

    # ------------------------------------------------------------------ execution

    def _conn(self) -> Connection:
        connection = self._connection
        if connection is None:
            raise errors.ProgrammingError("the cursor is closed")
        return connection

    def _inner_for(self, raw: Any) -> Any:
        inner = self._inners.get(id(raw))
        if inner is None or inner.connection is not raw:
            inner = self._inner_class(raw, False)
            inner.arraysize = self._arraysize
            self._inners[id(raw)] = inner
        return inner

    async def _finish_previous(self) -> None:
        inner = self._inner
        if inner is not None and self.unbuffered:
            try:
                await inner.close()  # drain the rest of an unbuffered result
            except Exception as exc:
                if not _pymysql.is_disconnect(exc):
                    raise _pymysql.translate_error(exc) from exc
        self._inner = None

    async def execute(self, query: str | bytes, args: Any = None) -> int:
        """Run one statement (``args`` fill ``%s`` / ``%(name)s`` placeholders); returns the
        number of affected rows."""
        connection = self._conn()
        raw = connection._direct
        if raw is not None:  # no replicas: hand the statement to aiomysql as it is
            if self.unbuffered and self._inner is not None:
                await self._finish_previous()
            last_raw, inner = self._direct
            if last_raw is not raw or inner._connection is not raw:
                inner = self._inner_for(raw)
                self._direct = (raw, inner)
            self._inner = inner
            tracer = connection._tracer
            if tracer is NOOP_TRACER:  # tracing off: no span to open
                # ``Connection._direct_call`` inlined: one coroutine less per statement.
                watchdog = connection._primary.watchdog
                watchdog.arm(connection._primary.read_timeout)
                try:
                    return int(await inner.execute(query, args))
                except BaseException as exc:
                    raise connection._direct_raised(exc)  # noqa: B904 (the cause is set there)
                finally:
                    watchdog.disarm()
            if isinstance(query, str):
                text = query
            else:
                text = query.decode(errors="replace") if tracer.enabled else ""
            with tracer.statement(text) as span:
                connection._span = span
                try:
                    return int(await connection._direct_call(inner.execute(query, args)))
                finally:
                    connection._span = NOOP_SPAN
        sql = query.decode() if isinstance(query, bytes) else query
        if args is not None:
            sql = connection._mogrify(sql, args)
        return await self._run(sql)

    async def _run(self, sql: str) -> int:
        connection = self._conn()
        await self._finish_previous()
        self._deferred = None

        async def run(raw: Any) -> int:
            inner = self._inner_for(raw)
            self._inner = inner
            rows = await inner.execute(sql)
            return int(rows) if rows is not None else 0

        result = await connection._run_statement(sql, run)
        if result is None:  # deferred by the policy: nothing ran
            self._inner = None
            self._deferred = sql
            return 0
        return int(result)

    async def executemany(self, query: str, args: Sequence[Any]) -> int | None:
        """Run ``query`` once per parameter set in ``args``.  A write runs on the primary,
        where aiomysql batches ``INSERT … VALUES`` into multi-row statements; reads are routed
        one by one."""
        connection = self._conn()
        args_list = list(args)
        if not args_list:
            return None
        stmt = connection.classify(query)
        if stmt.kind is StatementKind.READ and not stmt.must_use_primary:
            total = 0
            for one in args_list:
                total += await self.execute(query, one)
            return total
        await self._finish_previous()
        self._deferred = None

        async def run(raw: Any) -> int:
            inner = self._inner_for(raw)
            self._inner = inner
            rows = await inner.executemany(query, args_list)
            return int(rows) if rows is not None else 0

        result = await connection._run_statement(query, run, stmt)
        return int(result) if result is not None else 0

    async def callproc(self, procname: str, args: Sequence[Any] = ()) -> Sequence[Any]:
        """Call a stored procedure on the primary (it may write); returns ``args``."""
        connection = self._conn()
        await self._finish_previous()
        stmt = classify(f"CALL {procname}()")

        async def run(raw: Any) -> Sequence[Any]:
            inner = self._inner_for(raw)
            self._inner = inner
            return await inner.callproc(procname, args)  # type: ignore[no-any-return]

        result = await connection._run_statement(f"CALL {procname}", run, stmt)
        return result if result is not None else args

    async def nextset(self) -> bool | None:
        """Move to the next result of a multi-result statement; ``None`` when none is left."""
        self._conn()
        inner = self._inner
        if inner is None:
            return None
        try:
            return await inner.nextset()  # type: ignore[no-any-return]
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc

    def mogrify(self, query: str, args: Any = None) -> str:
        """The SQL ``execute(query, args)`` would send."""
        return query if args is None else self._conn()._mogrify(query, args)

    # ------------------------------------------------------------------ fetching

    def _result(self) -> Any:
        self._conn()
        inner = self._inner
        if inner is None:
            raise errors.ProgrammingError("execute() first: there is no result to fetch")
        return inner

    def fetchone(self) -> Awaitable[Row | None]:
        """The next row, or ``None``."""
        return self._fetch(_FETCHONE)

    def fetchmany(self, size: int | None = None) -> Awaitable[Sequence[Row]]:
        """Up to ``size`` rows (default ``arraysize``); an empty sequence at the end."""
        count = size if size is not None else self._arraysize
        return self._fetch(operator.methodcaller("fetchmany", count))

    def fetchall(self) -> Awaitable[Sequence[Row]]:
        """The remaining rows."""
        return self._fetch(_FETCHALL)

    def _fetch(self, fetch: Callable[[Any], Any]) -> Awaitable[Any]:
        """``fetch(inner)``, awaitable, with the driver's errors translated.  A buffered
        aiomysql cursor answers from the rows it holds with a future already done: that
        future is handed on as it is, without a coroutine around it (every SELECT fetches).
        Anything else (an unbuffered cursor reading from the server, a subclass's coroutine)
        is awaited in one that translates what it raises."""
        inner = self._inner
        if inner is None or self._connection is None:
            self._result()  # says why there is nothing to fetch
        try:
            pending = fetch(inner)
        except errors.Error:
            raise
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc
        if isinstance(pending, asyncio.Future) and pending.done():
            return pending
        return _translated(pending)

    async def scroll(self, value: int, mode: str = "relative") -> None:
        """Move in the result (buffered cursors; unbuffered ones only forward)."""
        try:
            await self._result().scroll(value, mode)
        except errors.Error:
            raise
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc

    def __aiter__(self) -> Cursor:
        return self

    async def __anext__(self) -> Row:
        row = await self.fetchone()
        if row is None:
            raise StopAsyncIteration
        return row

    # ------------------------------------------------------------------ lifecycle

    async def setinputsizes(self, *args: Any) -> None:
        """PEP 249 no-op (a coroutine: SQLAlchemy's asyncio adapter awaits it)."""

    def setoutputsizes(self, *args: Any) -> None:
        """PEP 249 no-op."""

    async def close(self) -> None:
        """Close the cursor (an unbuffered result is drained first)."""
        if self._connection is None:
            return
        try:
            await self._finish_previous()
        finally:
            self._connection = None
            self._inners.clear()
            self._direct = (None, None)

    def __await__(self) -> Generator[Any, None, Cursor]:
        """``cur = await conn.cursor()``, as aiomysql allows."""
        yield from ()
        return self

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class SSCursor(Cursor):
    """An unbuffered (server-side) cursor: rows are read as they are fetched."""

    unbuffered = True


class DictCursor(Cursor):
    """A buffered cursor returning rows as dicts."""

    as_dict = True


class SSDictCursor(SSCursor):
    """An unbuffered cursor returning rows as dicts."""

    as_dict = True


_BY_KIND: Final[dict[tuple[bool, bool], type[Cursor]]] = driver_classes(
    Cursor, SSCursor, DictCursor, SSDictCursor
)


def cursor_class(cls: type[Any]) -> type[Cursor]:
    """Our cursor class for ``cls``: ``cls`` itself when it is ours; for aiomysql's four
    classes, ours of the same kind; for a subclass of one of them (SQLAlchemy's aiomysql
    adapter passes such subclasses), a subclass of ours of that kind that reads results
    through ``cls``."""
    return class_for_driver(
        cls,
        Cursor,
        _BY_KIND,
        driver_classes=_aiomysql.CURSOR_CLASSES,
        cursor_kind=_aiomysql.cursor_kind,
        attribute="driver_class",
        module=__name__,
    )


async def _translated(pending: Awaitable[T]) -> T:
    """``await pending``, with the driver's errors translated into ours."""
    try:
        return await pending
    except errors.Error:
        raise
    except Exception as exc:
        raise _pymysql.translate_error(exc) from exc
