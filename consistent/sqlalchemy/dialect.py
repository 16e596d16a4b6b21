"""``mysql+consistent://``: SQLAlchemy's ``mysql+pymysql`` dialect over ``consistent.dbapi``.

Everything SQL-related (compiler, types, reflection, error codes) is ``mysql+pymysql``'s; this
class changes only what the DB-API underneath requires.

**Transactions.**  ``consistent.dbapi`` sends reads to replicas only between transactions
(with autocommit on); inside a read-write transaction everything runs on the primary.
SQLAlchemy, like PEP 249, starts transactions implicitly and ends them with ``commit()`` /
``rollback()``.  The dialect keeps the DB-API connection in autocommit mode and opens the
primary transaction lazily: a SQLAlchemy transaction's reads run as single statements on a
replica (each one waiting, as the level says, for what the session requires) until its first
statement that needs a transaction (a write, a locking read, a savepoint, ``GET_LOCK()``…);
``BEGIN`` is sent to the primary right before that statement, and the rest of the
transaction, reads included, runs there.  A rollback undoes every write, as with
``mysql+pymysql``; what differs is only that the reads before the first write are not part of
the write transaction's snapshot (as when a router sends them to a replica connection).  A
transaction that never wrote sends no ``COMMIT``/``ROLLBACK`` at all.  With
``isolation_level="AUTOCOMMIT"`` no ``BEGIN`` is ever sent; with ``autocommit=False`` in the URL
or ``connect_args`` the DB-API connection works as PyMySQL's does and everything runs on the
primary.

**Errors.**  ``is_disconnect`` is ``mysql+pymysql``'s (errnos 1927, 2006, 2013, 2014, 2045,
2055, 4031, "already closed"…), plus an ``InterfaceError`` from a closed connection (PyMySQL's
``(0, '')``); a :class:`~consistent.errors.ConsistencyTimeout` (errno 4900) is never one: a
replica that did not catch up says nothing about the pooled connection.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from pymysql.constants import CLIENT
from sqlalchemy.dialects.mysql.mariadb import MariaDBDialect
from sqlalchemy.dialects.mysql.mysqldb import MySQLExecutionContext_mysqldb
from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql

import consistent.dbapi
from consistent import errors
from consistent.classify import DEFAULT_RULES, FunctionRules, PrimaryReason, StatementKind, classify
from consistent.sqlalchemy import tracking
from consistent.sqlalchemy._dbapi import ConsistentConnection, raw_connection
from consistent.sqlalchemy.url import consistency_options, normalize_connect_params, split_query

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine
    from sqlalchemy.engine.interfaces import (
        ConnectArgsType,
        DBAPIConnection,
        DBAPICursor,
        DBAPIModule,
        ExecutionContext,
        IsolationLevel,
        _DBAPIMultiExecuteParams,
        _DBAPISingleExecuteParams,
    )
    from sqlalchemy.pool import PoolProxiedConnection

__all__ = ["ConsistentDialect", "ConsistentExecutionContext", "ConsistentMariaDBDialect"]

#: A statement SQLAlchemy itself sends that must see the primary's own session.
PRIMARY_HINT: Final = "/* consistent: primary */"
_AUTOCOMMIT: Final = "AUTOCOMMIT"
#: Statement texts whose "does it open a transaction" answer is remembered (SQLAlchemy
#: compiles each statement once, so the texts repeat).
_CACHE_SIZE: Final = 512

_K = StatementKind
# Statements that never need a transaction opened before them: transaction control manages
# its own, session state is replayed, and an implicitly committing statement would end it.
_NO_BEGIN_KINDS: Final = frozenset({_K.TRANSACTION_BEGIN, _K.COMMIT, _K.ROLLBACK, _K.SESSION_STATE})


def opens_transaction(statement: str, rules: FunctionRules = DEFAULT_RULES) -> bool:
    """True when ``statement`` needs the primary transaction of a SQLAlchemy transaction to
    have begun: anything but a replica-safe read, transaction control, session state, an XA
    statement or a statement that commits implicitly.  ``rules`` are the connection's (which
    function calls a replica may run)."""
    stmt = classify(statement, rules)
    if stmt.replica_safe or stmt.follows_previous or stmt.implicit_commit:
        return False
    if stmt.kind in _NO_BEGIN_KINDS:
        return False
    return stmt.primary_reason != PrimaryReason.XA


class ConsistentExecutionContext(MySQLExecutionContext_mysqldb):
    """Keeps an INSERT's ``lastrowid`` from the moment it ran: SQLAlchemy reads
    ``CursorResult.lastrowid`` after it closed the cursor, and a ``consistent.dbapi`` cursor
    forgets its last result when closed (PyMySQL's keeps the attribute)."""

    _kept_lastrowid: int | None = None

    def post_exec(self) -> None:
        super().post_exec()
        if self.isinsert:
            lastrowid = self.cursor.lastrowid
            self._kept_lastrowid = int(lastrowid) if lastrowid is not None else None

    def get_lastrowid(self) -> int:
        kept = self._kept_lastrowid
        return kept if kept is not None else super().get_lastrowid()


class ConsistentDialect(MySQLDialect_pymysql):
    """The ``mysql+consistent`` dialect (entry point ``mysql.consistent``)."""

    driver = "consistent"
    supports_statement_cache = True
    execution_ctx_cls = ConsistentExecutionContext
    # PyMySQL's unbuffered cursor, through our DB-API: the rows stream from whichever server
    # ran the statement.
    _sscursor: type[Any] = consistent.dbapi.SSCursor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # DB-API connections SQLAlchemy put in AUTOCOMMIT isolation.  Per connection, weakly:
        # SQLAlchemy resets the isolation level itself at checkin.
        self._autocommit: weakref.WeakSet[Any] = weakref.WeakSet()
        self._opens_by_text: OrderedDict[tuple[str, FunctionRules], bool] = OrderedDict()

    # ------------------------------------------------------------------ DB-API module and URL

    @classmethod
    def import_dbapi(cls) -> DBAPIModule:
        return cast("DBAPIModule", consistent.dbapi)

    @classmethod
    def load_provisioning(cls) -> None:
        """The test suite's MySQL provisioning (schemas, temporary tables) applies as is."""
        __import__("sqlalchemy.dialects.mysql.provision")

    @property
    def supports_server_side_cursors(self) -> bool:  # type: ignore[override]
        return True

    def _found_rows_client_flag(self) -> int:
        # ``mysql+pymysql`` finds the flag as ``<dbapi>.constants.CLIENT``; ours is PyMySQL's.
        # FOUND_ROWS makes UPDATE report matched rows, which the ORM's rowcount checks need.
        return int(CLIENT.FOUND_ROWS)

    def create_connect_args(
        self, url: URL, _translate_args: dict[str, Any] | None = None
    ) -> ConnectArgsType:
        ours, rest = split_query(url.query)
        cargs, cparams = super().create_connect_args(url.set(query=rest), _translate_args)
        params = dict(cparams)
        params.update(consistency_options(ours))
        return cast("ConnectArgsType", (list(cargs), params))

    def connect(self, *cargs: Any, **cparams: Any) -> DBAPIConnection:
        return cast(
            "DBAPIConnection", consistent.dbapi.connect(**normalize_connect_params(cparams))
        )

    @classmethod
    def engine_created(cls, engine: Engine) -> None:
        tracking.install(engine)

    # ------------------------------------------------------------------ server facts

    def initialize(self, connection: Connection) -> None:
        """Learn the server's version, modes and defaults from the primary, not from
        whichever replica a read would reach (inside a read-write transaction every statement
        runs on the primary)."""
        raw = raw_connection(connection.connection)
        pinned = raw is not None and raw.get_autocommit() and not raw.policy.in_transaction
        if pinned:
            assert raw is not None
            self._begin(raw)
        try:
            super().initialize(connection)
        finally:
            if pinned:
                assert raw is not None
                self._rollback(raw)

    def get_isolation_level(self, dbapi_connection: DBAPIConnection) -> IsolationLevel:
        # As mysql+pymysql: MySQL renamed tx_isolation in 5.7.20; MariaDB 10.11 has the old name.
        version = self.server_version_info or ()
        modern = not self.is_mariadb and version >= (5, 7, 20)
        variable = "@@transaction_isolation" if modern else "@@tx_isolation"
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"{PRIMARY_HINT} SELECT {variable}")
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            raise NotImplementedError("the primary did not report its isolation level")
        value = row[0]
        if isinstance(value, bytes):
            value = value.decode()
        return cast("IsolationLevel", str(value).upper().replace("-", " "))

    def set_isolation_level(self, dbapi_connection: DBAPIConnection, level: IsolationLevel) -> None:
        # The DB-API connection stays in autocommit mode whatever SQLAlchemy asks (see the
        # module docstring); AUTOCOMMIT only stops the dialect from opening transactions.
        raw = raw_connection(dbapi_connection)
        if level == _AUTOCOMMIT:
            self._autocommit.add(raw if raw is not None else dbapi_connection)
            return
        self._autocommit.discard(raw if raw is not None else dbapi_connection)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
        finally:
            cursor.close()

    def detect_autocommit_setting(self, dbapi_conn: DBAPIConnection) -> bool:
        raw = raw_connection(dbapi_conn)
        return (raw if raw is not None else dbapi_conn) in self._autocommit

    # ------------------------------------------------------------------ transactions

    def _begin(self, raw: ConsistentConnection) -> None:
        """Open the primary transaction on ``raw`` (the asyncio dialect awaits it)."""
        cast("consistent.dbapi.Connection", raw).begin()

    def _rollback(self, raw: ConsistentConnection) -> None:
        """Roll ``raw``'s primary transaction back (the asyncio dialect awaits it)."""
        cast("consistent.dbapi.Connection", raw).rollback()

    def _opens(self, statement: str, rules: FunctionRules) -> bool:
        cache = self._opens_by_text
        key = (statement, rules)
        answer = cache.get(key)
        if answer is None:
            answer = opens_transaction(statement, rules)
            cache[key] = answer
            if len(cache) > _CACHE_SIZE:
                with contextlib.suppress(KeyError):  # another thread evicted it first
                    cache.popitem(last=False)
        return answer

    def _before_statement(self, cursor: DBAPICursor, statement: str, context: Any) -> None:
        """Open the primary transaction right before the first statement that needs it."""
        if context is None:
            return
        raw = raw_connection(context.root_connection.connection)
        if raw is None or raw in self._autocommit:
            return
        if not context.root_connection.in_transaction():
            return
        policy = raw.policy
        if not policy.autocommit or policy.in_transaction:
            return
        if self._opens(statement, raw.function_rules):
            self._begin(raw)

    def do_execute(
        self,
        cursor: DBAPICursor,
        statement: str,
        parameters: _DBAPISingleExecuteParams | None,
        context: ExecutionContext | None = None,
    ) -> None:
        self._before_statement(cursor, statement, context)
        super().do_execute(cursor, statement, parameters, context)  # type: ignore[no-untyped-call]

    def do_execute_no_params(
        self,
        cursor: DBAPICursor,
        statement: str,
        context: ExecutionContext | None = None,
    ) -> None:
        self._before_statement(cursor, statement, context)
        super().do_execute_no_params(cursor, statement, context)  # type: ignore[no-untyped-call]

    def do_executemany(
        self,
        cursor: DBAPICursor,
        statement: str,
        parameters: _DBAPIMultiExecuteParams,
        context: ExecutionContext | None = None,
    ) -> None:
        self._before_statement(cursor, statement, context)
        super().do_executemany(cursor, statement, parameters, context)

    @staticmethod
    def _idle(dbapi_connection: Any) -> bool:
        """No transaction is open anywhere: there is nothing to commit or roll back."""
        raw = raw_connection(dbapi_connection)
        if raw is None or not raw.open:
            return False
        policy = raw.policy
        return policy.autocommit and not policy.in_transaction

    def do_commit(self, dbapi_connection: PoolProxiedConnection) -> None:
        if not self._idle(dbapi_connection):
            super().do_commit(dbapi_connection)  # type: ignore[no-untyped-call]

    def do_rollback(self, dbapi_connection: PoolProxiedConnection) -> None:
        if not self._idle(dbapi_connection):
            super().do_rollback(dbapi_connection)  # type: ignore[no-untyped-call]

    # ------------------------------------------------------------------ errors and liveness

    def do_ping(self, dbapi_connection: DBAPIConnection) -> Literal[True]:
        # Pings the primary; a lost primary raises a disconnect errno.  ``reconnect`` stays
        # false, as ``mysql+pymysql`` passes it: a new logical connection is the pool's job.
        dbapi_connection.ping(False)
        return True

    def _extract_error_code(self, exception: BaseException) -> Any:
        args = exception.args
        if args and isinstance(args[0], BaseException):
            args = args[0].args
        return args[0] if args else None

    def is_disconnect(
        self,
        e: DBAPIModule.Error,
        connection: PoolProxiedConnection | DBAPIConnection | None,
        cursor: DBAPICursor | None,
    ) -> bool:
        if isinstance(e, errors.ConsistencyTimeout):
            return False
        if super().is_disconnect(e, connection, cursor):
            return True
        if isinstance(e, errors.InterfaceError):
            raw = raw_connection(connection)
            return raw is not None and not raw.open
        return False


class ConsistentMariaDBDialect(MariaDBDialect, ConsistentDialect):
    """``mariadb+consistent://``: the same, with SQLAlchemy's MariaDB-only behaviour."""

    supports_statement_cache = True
