"""PEP 249 cursors whose statements are routed by the connection's policy.

A cursor formats its parameters (``pyformat``, escaped for the connection's character set),
hands the SQL to its :class:`~consistent.dbapi.connection.Connection`, and reads the result from
whichever server ran it through a PyMySQL cursor of the matching class on that server's
connection.  Four classes, as in PyMySQL: buffered or unbuffered (server-side), tuples or dicts.
A subclass of one of PyMySQL's cursor classes (say one that sets ``dict_type``) is accepted
wherever a cursor class is: :func:`cursor_class` gives the matching class of ours, which reads
its results through the subclass, so its row conversion applies.

What the PyMySQL cursor returns is returned as it is: ``fetchall()`` gives a tuple on the
buffered tuple cursor and a list on the others, ``fetchmany()`` an empty tuple at the end, as
PyMySQL does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from consistent import errors
from consistent.classify import StatementKind, classify
from consistent.dbapi import _pymysql
from consistent.dbapi.cursorbase import CursorBase, class_for_driver, driver_classes
from consistent.telemetry import NOOP_SPAN, NOOP_TRACER

if TYPE_CHECKING:
    from consistent.dbapi.connection import Connection

__all__ = ["Cursor", "DictCursor", "SSCursor", "SSDictCursor", "cursor_class"]

Row = tuple[Any, ...] | dict[str, Any]


class Cursor(CursorBase):
    """A buffered cursor returning rows as tuples."""

    #: The PyMySQL cursor class that reads results (``None``: PyMySQL's class of this name).
    pymysql_class: ClassVar[type[Any] | None] = None

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        #: Rows ``fetchmany()`` returns by default (PEP 249).
        self.arraysize = 1
        self._inner: Any = None
        self._inners: dict[int, Any] = {}
        # The direct path's last (connection, PyMySQL cursor): most cursors use only one.
        self._direct: tuple[Any, Any] = (None, None)
        self._closed = False
        # The text of a statement the policy deferred (nothing was sent, no PyMySQL cursor ran
        # it): what ``_executed`` reports until the next statement.
        self._deferred: str | None = None
        self._inner_class = (
            self.pymysql_class or _pymysql.CURSOR_CLASSES[(self.unbuffered, self.as_dict)]
        )

    # ------------------------------------------------------------------ PEP 249 attributes

    @staticmethod
    def _inner_executed(inner: Any) -> str | bytes | bytearray | None:
        """PyMySQL's text of the statement (bytes for a multi-row ``INSERT`` built by
        ``executemany``)."""
        return _pymysql.executed(inner)

    @property
    def warning_count(self) -> int:
        """Warnings the last statement raised, from its OK or EOF packet (as PyMySQL; an
        unbuffered cursor knows it once every row was read)."""
        inner = self._inner
        return int(inner.warning_count) if inner is not None else 0

    # ------------------------------------------------------------------ execution

    def _check(self) -> None:
        if self._closed:
            raise errors.ProgrammingError("the cursor is closed")

    def _inner_for(self, raw: Any) -> Any:
        inner = self._inners.get(id(raw))
        if inner is None or inner.connection is not raw:
            inner = raw.cursor(self._inner_class)
            self._inners[id(raw)] = inner
        return inner

    def _finish_previous(self) -> None:
        inner = self._inner
        if inner is not None and self.unbuffered:
            try:
                inner.close()  # drain the rest of an unbuffered result
            except Exception as exc:
                if not _pymysql.is_disconnect(exc):
                    raise _pymysql.translate_error(exc) from exc
        self._inner = None

    def _run(self, sql: str) -> int:
        self._finish_previous()
        self._deferred = None

        def run(raw: Any) -> int:
            inner = self._inner_for(raw)
            self._inner = inner
            rows = inner.execute(sql)
            return int(rows) if rows is not None else 0

        result = self.connection._run_statement(sql, run)
        if result is None:  # deferred by the policy: nothing ran
            self._inner = None
            self._deferred = sql
            return 0
        return result

    def execute(self, query: str | bytes, args: Any = None) -> int:
        """Run one statement (``args`` fill ``%s`` / ``%(name)s`` placeholders); returns the
        number of affected rows, as PyMySQL does."""
        if self._closed:
            raise errors.ProgrammingError("the cursor is closed")
        connection = self.connection
        raw = connection._direct
        if raw is not None:  # no replicas: hand the statement to PyMySQL as it is
            if self.unbuffered and self._inner is not None:
                self._finish_previous()
            last_raw, inner = self._direct
            if last_raw is not raw or inner.connection is not raw:
                inner = self._inner_for(raw)
                self._direct = (raw, inner)
            self._inner = inner
            # The statement's span, as Connection._execute makes it (the OK observer reports
            # the produced GTIDs to connection._span).  The template, not the bound SQL, is
            # the span's text: the values are not formatted just for tracing.
            tracer = connection._tracer
            if tracer is NOOP_TRACER:  # tracing off: no span to open
                return _direct_execute(connection, inner, query, args)
            if isinstance(query, str):
                text = query
            else:  # rare; decoded only when someone records it
                text = query.decode(errors="replace") if tracer.enabled else ""
            with tracer.statement(text) as span:
                connection._span = span
                try:
                    return _direct_execute(connection, inner, query, args)
                finally:
                    connection._span = NOOP_SPAN
        sql = query.decode() if isinstance(query, bytes) else query
        if args is not None:
            sql = connection._mogrify(sql, args)
        return self._run(sql)

    def executemany(self, query: str, args: Sequence[Any]) -> int | None:
        """Run ``query`` once per parameter set in ``args`` (PyMySQL's name, so
        ``executemany(sql, args=rows)`` works).  A write runs on the primary, where PyMySQL
        batches ``INSERT … VALUES`` into multi-row statements; reads are routed one by one."""
        self._check()
        args_list = list(args)
        if not args_list:
            return None
        connection = self.connection
        stmt = connection.classify(query)
        if stmt.kind is StatementKind.READ and not stmt.must_use_primary:
            total = 0
            for one in args_list:
                total += self.execute(query, one)
            return total
        self._finish_previous()
        self._deferred = None

        def run(raw: Any) -> int:
            inner = self._inner_for(raw)
            self._inner = inner
            rows = inner.executemany(query, args_list)
            return int(rows) if rows is not None else 0

        result = connection._run_statement(query, run, stmt)
        return result if result is not None else 0

    def callproc(self, procname: str, args: Sequence[Any] = ()) -> Sequence[Any]:
        """Call a stored procedure on the primary (it may write); returns ``args`` as
        PyMySQL does (OUT values are read with ``SELECT @_procname_n``)."""
        self._check()
        self._finish_previous()
        stmt = classify(f"CALL {procname}()")

        def run(raw: Any) -> Sequence[Any]:
            inner = self._inner_for(raw)
            self._inner = inner
            return inner.callproc(procname, args)  # type: ignore[no-any-return]

        result = self.connection._run_statement(f"CALL {procname}", run, stmt)
        return result if result is not None else args

    def nextset(self) -> bool | None:
        """Move to the next result of a multi-result statement; ``None`` when none is left."""
        self._check()
        inner = self._inner
        if inner is None:
            return None
        return self._call(inner.nextset)  # type: ignore[no-any-return]

    def mogrify(self, query: str, args: Any = None) -> str:
        """The SQL ``execute(query, args)`` would send."""
        return query if args is None else self.connection._mogrify(query, args)

    # ------------------------------------------------------------------ fetching

    def _call(self, method: Any, *args: Any) -> Any:
        try:
            return method(*args)
        except errors.Error:
            raise
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc

    def _result(self) -> Any:
        self._check()
        inner = self._inner
        if inner is None:
            raise errors.ProgrammingError("execute() first: there is no result to fetch")
        return inner

    def fetchone(self) -> Row | None:
        """The next row, or ``None``."""
        inner = self._inner
        if inner is None or self._closed:
            self._result()  # raises the right error
        try:
            return inner.fetchone()  # type: ignore[no-any-return]
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc

    def fetchmany(self, size: int | None = None) -> Sequence[Row]:
        """Up to ``size`` rows (default ``arraysize``); an empty sequence at the end."""
        return self._call(  # type: ignore[no-any-return]
            self._result().fetchmany, size if size is not None else self.arraysize
        )

    def fetchall(self) -> Sequence[Row]:
        """The remaining rows: a tuple of tuples on the buffered tuple cursor, a list on the
        others, as PyMySQL returns them."""
        inner = self._inner
        if inner is None or self._closed:
            self._result()  # raises the right error
        try:
            return inner.fetchall()  # type: ignore[no-any-return]
        except Exception as exc:
            raise _pymysql.translate_error(exc) from exc

    def scroll(self, value: int, mode: str = "relative") -> None:
        """Move in the result (buffered cursors; unbuffered ones only forward)."""
        self._call(self._result().scroll, value, mode)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchone, None)

    # ------------------------------------------------------------------ lifecycle

    def setinputsizes(self, *args: Any) -> None:
        """PEP 249 no-op."""

    def setoutputsize(self, *args: Any) -> None:
        """PEP 249 no-op."""

    def close(self) -> None:
        """Close the cursor (an unbuffered result is drained first)."""
        if self._closed:
            return
        try:
            self._finish_previous()
        finally:
            self._closed = True
            self._inners.clear()
            self._direct = (None, None)

    def __enter__(self) -> Cursor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SSCursor(Cursor):
    """An unbuffered (server-side) cursor: rows are read as they are fetched."""

    unbuffered = True

    def fetchall_unbuffered(self) -> Iterator[Row]:
        """The remaining rows one at a time, without holding them all (PyMySQL's extension
        of its unbuffered cursors)."""
        return iter(self.fetchone, None)


class DictCursor(Cursor):
    """A buffered cursor returning rows as dicts."""

    as_dict = True


class SSDictCursor(SSCursor):
    """An unbuffered cursor returning rows as dicts."""

    as_dict = True


_BY_KIND: Final[dict[tuple[bool, bool], type[Cursor]]] = driver_classes(
    Cursor, SSCursor, DictCursor, SSDictCursor
)


def _direct_execute(connection: Connection, inner: Any, query: str | bytes, args: Any) -> int:
    """``query`` sent as it is on the primary by PyMySQL's cursor ``inner`` (no replicas);
    failures as the routed path reports them."""
    try:
        return int(inner.execute(query, args))
    except Exception as exc:
        raise connection._direct_failure(exc) from exc


def cursor_class(cls: type[Any]) -> type[Cursor]:
    """Our cursor class for ``cls``: ``cls`` itself when it is ours; for PyMySQL's four
    classes, ours of the same kind; for a subclass of one of them, a subclass of ours of that
    kind (named after it) that reads results through ``cls``, so that its ``dict_type`` or
    ``_conv_row`` shapes the rows."""
    return class_for_driver(
        cls,
        Cursor,
        _BY_KIND,
        driver_classes=_pymysql.CURSOR_CLASSES,
        cursor_kind=_pymysql.cursor_kind,
        attribute="pymysql_class",
        module=__name__,
    )
