"""One client connection to an emulated server: its state, transactions and responses.

A :class:`Session` runs SQL text statement by statement (:meth:`Session.query` yields one
:class:`~consistent.emulator.results.Outcome` per statement) and keeps what mysqld keeps per
connection: default schema, session and user variables, temporary tables, prepared statements,
the open transaction, the GTID it owns and its session trackers.

Transactions follow InnoDB + binary log semantics as far as GTIDs are concerned:

* a transaction gets a GTID at commit only if it changed rows of base tables (or is DDL, or
  the session owns an explicit ``GTID_NEXT``);
* DDL first commits the open transaction (its own GTID), then commits itself (the next GTID);
* ROLLBACK produces no GTID and releases an owned one;
* with the binary log on, a committed transaction is appended to it; with it off, and from
  8.0.17 also with it on (InnoDB's GTID persister), the GTID row is written into
  ``mysql.gtid_executed`` inside the transaction (WL#6559).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from consistent.emulator import gtid_table, gtid_waits, outcomes, prepared, sysvars
from consistent.emulator import statements as dispatch
from consistent.emulator.binlog import (
    UNDEFINED_COMMIT_TIMESTAMP,
    BinlogStatement,
    BinlogTransaction,
)
from consistent.emulator.errors import ER, SqlError, parse_error, sql_error
from consistent.emulator.gtid_state import GtidNext, GtidNextType
from consistent.emulator.results import (
    Column,
    Outcome,
    PreparedStatement,
    StmtResult,
    Warning_,
    server_status,
)
from consistent.emulator.sql import functions, infoschema
from consistent.emulator.sql.catalog import TableDef
from consistent.emulator.sql.errors import ErrorContext, map_sqlite_error
from consistent.emulator.sql.lexer import Statement
from consistent.emulator.sql.show import like_match
from consistent.emulator.sql.storage import SessionStore, TxMode
from consistent.emulator.sql.translate import TableRef
from consistent.emulator.tracker import (
    SessionTrackers,
    TrackGtids,
    TrackTransactionInfo,
    TxReadFlags,
    TxState,
)
from consistent.emulator.variables import (
    SESSION_VARIABLES,
    SYSTEM_VARIABLES,
    lookup,
    select_value,
    value_text,
)
from consistent.emulator.xa import XaState, Xid, check_table_access
from consistent.gtid import Gtid
from consistent.protocol.constants import Capability, ServerStatus

if TYPE_CHECKING:
    from consistent.emulator.server import EmulatedServer

__all__ = ["Session", "StmtResult"]

logger = logging.getLogger(__name__)

# Plain ints for the per-statement status word (IntFlag arithmetic costs microseconds a time).
_AUTOCOMMIT: Final = int(ServerStatus.AUTOCOMMIT)
_IN_TRANS: Final = int(ServerStatus.IN_TRANS)
_IN_TRANS_READONLY: Final = int(ServerStatus.IN_TRANS_READONLY)
_NO_BACKSLASH_ESCAPES: Final = int(ServerStatus.NO_BACKSLASH_ESCAPES)
_MORE_RESULTS_EXISTS: Final = int(ServerStatus.MORE_RESULTS_EXISTS)
_SESSION_STATE_CHANGED: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_SESSION_TRACK: Final = int(Capability.SESSION_TRACK)
_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_MULTI_STATEMENTS: Final = int(Capability.MULTI_STATEMENTS)


class Session:
    """A connection's state and commands; see the module docstring."""

    def __init__(
        self,
        server: EmulatedServer,
        connection_id: int,
        user: str,
        database: str | None,
        *,
        client_capabilities: int,
        connect_attrs: Mapping[str, str],
        host: str,
        system: bool,
    ) -> None:
        self.server: EmulatedServer = server
        self.connection_id: int = connection_id
        self.user = user
        self.host = host
        self.client_capabilities = client_capabilities
        self.connect_attrs = dict(connect_attrs)
        self.system = system
        self.database = database
        self.connected_at = server.clock()
        self.vars: dict[str, object] = {
            name: server.global_vars[name] for name in SESSION_VARIABLES
        }
        self.vars["pseudo_thread_id"] = connection_id
        self.user_vars: dict[str, object] = {}
        self.temp_tables: dict[tuple[str, str], TableDef] = {}
        self.store = SessionStore(server.storage)
        self.functions = functions.FunctionHost(
            self.statement_time, self.time_zone, gtid_tags=server.config.gtid_tags
        )
        functions.register_functions(self.store.conn, self.functions)
        self.functions.wait_check = lambda args: gtid_waits.check_now(self, args)
        self.timed_out_waits: set[tuple[str, float | None]] = set()
        """Per-row ``WAIT_FOR_EXECUTED_GTID_SET`` waits that timed out in this statement."""
        self.trackers = SessionTrackers(self._tracked_value, lambda: self.database)
        self._init_trackers()
        self.gtid_next: GtidNext = GtidNext()
        self.owned_gtid: Gtid | None = None
        self.owns_anonymous = False
        """``SET GTID_NEXT = 'ANONYMOUS'`` owns ANONYMOUS until the transaction ends; the next
        statement that may change data takes it again
        (``gtid_reacquire_ownership_if_anonymous``)."""
        self.xa_state = XaState.NOTR
        self.xa_xid: Xid | None = None
        self.skip_transaction = False
        self.in_txn = False
        self.txn_explicit = False
        self.txn_read_only = False
        self.txn_changes: list[BinlogStatement] = []
        self.txn_savepoints: list[tuple[str, int]] = []
        self.stmt_active = False
        self.next_read_only: bool | None = None
        self.next_isolation: str | None = None
        self.warnings: list[Warning_] = []
        self.errors: int = 0
        self._last_insert_id = 0
        self._row_count = -1
        self._found_rows = 0
        self.prepared: dict[int, Any] = {}
        self.sql_prepared: dict[str, Any] = {}
        self._next_stmt_id = 1
        self._statement_started = server.clock()
        self.running: str | None = None
        self._kill_event = asyncio.Event()
        self.killed = False
        self.closed = False
        self._close_listeners: list[Callable[[Session], None]] = []
        self.command = "Sleep"
        self.lock_wait_since: float | None = None

    # ----- trackers -----------------------------------------------------------------------

    def _init_trackers(self) -> None:
        t = self.trackers
        t.set_tracked_variables(str(self.vars["session_track_system_variables"] or ""))
        t.set_schema_tracking(bool(self.vars["session_track_schema"]))
        t.set_state_tracking(bool(self.vars["session_track_state_change"]))
        t.set_gtids_tracking(TrackGtids[str(self.vars["session_track_gtids"])])
        t.transaction.update(TrackTransactionInfo[str(self.vars["session_track_transaction_info"])])
        t.transaction.changed = False
        t.transaction.store()

    def _tracked_value(self, name: str) -> str:
        var = SYSTEM_VARIABLES.get(name)
        if var is None:
            return ""
        return value_text(var, self.get_variable(name, global_scope=not var.has_session))

    # ----- simple properties (StatementContext) -------------------------------------------

    @property
    def autocommit(self) -> bool:
        """``@@autocommit``."""
        return bool(self.vars["autocommit"])

    @property
    def user_host(self) -> str:
        """``USER()``."""
        return f"{self.user}@{self.host}"

    @property
    def last_insert_id(self) -> int:
        """``LAST_INSERT_ID()``."""
        return self._last_insert_id

    @property
    def row_count(self) -> int:
        """``ROW_COUNT()`` of the previous statement."""
        return self._row_count

    @property
    def found_rows(self) -> int:
        """``FOUND_ROWS()``: rows of the previous SELECT."""
        return self._found_rows

    @property
    def server_version(self) -> str:
        """``VERSION()``."""
        return self.server.config.version

    def statement_time(self) -> float:
        """The time ``NOW()`` reports: ``@@timestamp`` if set, else the statement start."""
        fixed = self.vars.get("timestamp")
        if isinstance(fixed, float) and fixed > 0:
            return fixed
        return self._statement_started

    def time_zone(self) -> dt.tzinfo:
        """The session time zone as tzinfo."""
        system = str(self.server.global_vars["system_time_zone"])
        zone = functions.timezone_for(str(self.vars["time_zone"]), system)
        return zone if zone is not None else dt.UTC

    @property
    def owns_gtid(self) -> bool:
        """Whether the session owns a GTID or ANONYMOUS (``@@SESSION.gtid_owned`` not empty)."""
        return self.owned_gtid is not None or self.owns_anonymous

    @property
    def has_session_track(self) -> bool:
        """Whether the client announced ``CLIENT_SESSION_TRACK``."""
        return bool(self.client_capabilities & _SESSION_TRACK)

    # ----- tables -------------------------------------------------------------------------

    def require_database(self) -> str:
        """The default schema or ER_NO_DB_ERROR (1046)."""
        if self.database is None:
            raise sql_error(ER.NO_DB_ERROR)
        return self.database

    def find_table(self, schema: str | None, name: str) -> TableDef | None:
        """A temporary or base table (no virtual tables)."""
        schema = schema if schema is not None else self.require_database()
        temp = self.temp_tables.get((schema, name))
        if temp is not None:
            return temp
        return self.server.catalog.table(schema, name)

    def resolve_table(self, schema: str | None, name: str) -> TableRef:
        """The table a statement names: temporary, base, or virtual (information_schema…)."""
        if schema is None and self.database is None:
            raise sql_error(ER.NO_DB_ERROR)
        target_schema = schema if schema is not None else self.database
        assert target_schema is not None
        table = self.find_table(target_schema, name)
        if table is not None:
            return TableRef(name, table)
        virtual = infoschema.materialize(self, target_schema, name)
        if virtual is not None:
            return TableRef(name, virtual, virtual=True)
        raise sql_error(ER.NO_SUCH_TABLE, target_schema, name)

    # ----- variables ----------------------------------------------------------------------

    def get_variable(self, name: str, *, global_scope: bool) -> object:
        """Raw value of a system variable (session value unless ``global_scope``)."""
        var = lookup(name)
        getter = sysvars.GETTERS.get(var.name)
        if getter is not None:
            return getter(self, global_scope)
        if global_scope or not var.has_session:
            return self.server.global_vars[var.name]
        return self.vars[var.name]

    def system_variable_value(self, name: str, scope: str | None) -> object:
        """``SELECT @@[scope.]name``; 1238 for a scope the variable does not have."""
        var = lookup(name)
        if scope in ("session", "local") and not var.has_session:
            raise sql_error(ER.INCORRECT_GLOBAL_LOCAL_VAR, var.name, "GLOBAL")
        if scope == "global" and not var.has_global:
            raise sql_error(ER.INCORRECT_GLOBAL_LOCAL_VAR, var.name, "SESSION")
        global_scope = scope == "global" or not var.has_session
        return select_value(var, self.get_variable(var.name, global_scope=global_scope))

    def user_variable(self, name: str) -> object:
        """``@name``."""
        return self.user_vars.get(name.lower())

    def set_user_variable(self, name: str, value: object) -> None:
        """``SET @name = value``."""
        self.user_vars[name.lower()] = value
        self.trackers.session_state_changed()

    async def set_variable(self, name: str, value: object, *, global_scope: bool) -> None:
        """``SET [GLOBAL] name = value`` (``value`` None with ``DEFAULT`` handled by caller)."""
        await sysvars.assign(self, name, value, global_scope=global_scope)

    # ----- SQLite ---------------------------------------------------------------------------

    def execute_sql(
        self, sql: str, params: Sequence[object] = (), ctx: ErrorContext | None = None
    ) -> sqlite3.Cursor:
        """Run SQL on the session's SQLite connection; failures become MySQL errors."""
        try:
            return self.store.conn.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            raise map_sqlite_error(exc, self.functions, ctx) from exc

    # ----- warnings -----------------------------------------------------------------------

    def warn(self, code: int, message: str, level: str = "Warning") -> None:
        """Add a row to SHOW WARNINGS."""
        self.warnings.append(Warning_(level, code, message))

    # ----- locking and interruption --------------------------------------------------------

    async def interruptible(self, awaitable: Awaitable[Any], timeout: float | None) -> Any:
        """Await ``awaitable`` unless KILL QUERY arrives first (then ER_QUERY_INTERRUPTED).

        Raises :class:`TimeoutError` after ``timeout`` seconds (``None``: no limit).
        """
        task = asyncio.ensure_future(awaitable)
        killer = asyncio.ensure_future(self._kill_event.wait())
        try:
            done, _ = await asyncio.wait(
                {task, killer}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            task.cancel()
            killer.cancel()
            raise
        if task in done:
            killer.cancel()
            return task.result()
        task.cancel()
        killer.cancel()
        if killer in done:
            raise self._interrupted_error()
        raise TimeoutError

    def _interrupted_error(self) -> SqlError:
        if self.killed:
            return sql_error(ER.CONNECTION_KILLED)
        return sql_error(ER.QUERY_INTERRUPTED)

    async def kill(self, *, query_only: bool) -> None:
        """KILL QUERY interrupts the running statement; KILL CONNECTION also ends the session."""
        if not query_only:
            self.killed = True
            if self.running is None:
                await self.close()
                return
        if self.running is not None:
            self._kill_event.set()

    # ----- transactions -------------------------------------------------------------------

    def _start_implicit_if_needed(self) -> None:
        if not self.in_txn and not self.autocommit:
            self.in_txn = True
            self.txn_explicit = False
            self.txn_read_only = bool(
                self.next_read_only
                if self.next_read_only is not None
                else self.vars["transaction_read_only"]
            )

    def note_read(self) -> None:
        """A statement reads tables: snapshot inside a transaction, tracker 'R'."""
        check_table_access(self)
        self._start_implicit_if_needed()
        if self.in_txn:
            self.store.begin_read()
        self.trackers.transaction.add_state(TxState.READ_TRX, autocommit=self.autocommit)

    async def begin_write(self) -> None:
        """A statement writes base tables: become the writer (lock wait, 1205 on timeout)."""
        check_table_access(self)
        self._start_implicit_if_needed()
        if self.in_txn and self.txn_read_only:
            raise sql_error(ER.CANT_EXECUTE_IN_READ_ONLY_TRANSACTION)
        if not self.in_txn:
            self.stmt_active = True
        await self._acquire_write()
        self.trackers.transaction.add_state(TxState.WRITE_TRX, autocommit=self.autocommit)

    async def _acquire_write(self) -> None:
        if self.store.mode is TxMode.WRITE:
            return
        timeout = float(str(self.vars["innodb_lock_wait_timeout"]))
        if timeout > 0 and self.store.try_begin_write():
            return  # no other writer: nothing to wait for, nothing to interrupt
        self.lock_wait_since = self.server.clock()
        try:
            await self.interruptible(self.store.begin_write(None), timeout)
        except TimeoutError:
            raise sql_error(ER.LOCK_WAIT_TIMEOUT) from None
        finally:
            self.lock_wait_since = None

    async def begin_temp_write(self) -> None:
        """A statement writes only temporary tables: no GTID, no writer lock."""
        self._start_implicit_if_needed()
        if self.in_txn:
            self.store.begin_read()

    async def begin_ddl(self) -> None:
        """DDL: commit the open transaction, then run as a transaction of its own."""
        await self.implicit_commit()
        self.stmt_active = True
        await self._acquire_write()

    async def implicit_commit(self) -> None:
        """Commit the open transaction, as statements that cause an implicit commit do."""
        if self.in_txn:
            await self.commit_transaction()
            self.trackers.collector.after_transaction_commit(
                self.server.gtid_state.executed,
                owns_gtid=False,
                is_rollback=False,
                system=self.system,
            )

    def record_change(self, sql: str, *, insert_id: int | None = None) -> None:
        """Remember a statement that changed base tables (it makes the transaction logged)."""
        self.txn_changes.append(
            BinlogStatement(sql, self.database, self.statement_time(), insert_id)
        )

    def begin_explicit(self, *, read_only: bool | None, snapshot: bool) -> None:
        """BEGIN / START TRANSACTION (after the implicit commit of a previous one)."""
        self.in_txn = True
        self.txn_explicit = True
        if read_only is None:
            read_only = (
                self.next_read_only
                if self.next_read_only is not None
                else bool(self.vars["transaction_read_only"])
            )
        self.txn_read_only = read_only
        tracker = self.trackers.transaction
        tracker.add_state(TxState.EXPLICIT, autocommit=self.autocommit)
        if snapshot:
            tracker.add_state(TxState.WITH_SNAPSHOT, autocommit=self.autocommit)
            self.store.begin_read(snapshot_now=True)

    def _take_original_commit_timestamp(self, immediate: int) -> int:
        value = self.vars["original_commit_timestamp"]
        self.vars["original_commit_timestamp"] = UNDEFINED_COMMIT_TIMESTAMP
        if isinstance(value, int) and value != UNDEFINED_COMMIT_TIMESTAMP:
            return value
        return 0 if self.system else immediate

    def _uses_binlog(self) -> bool:
        if self.server.binlog is None or not self.vars["sql_log_bin"]:
            return False
        return not self.system or self.server.config.log_replica_updates

    def saves_gtid_rows(self) -> bool:
        """Whether this session's commits write their GTID to ``mysql.gtid_executed``: with
        the binary log off, and from 8.0.17 also with it on."""
        return not self._uses_binlog() or self.server.config.gtids_saved_at_commit

    def take_gtid(self, *, logged: bool = True) -> Gtid | None:
        """The GTID a transaction that is being logged commits with: the one the session owns
        (``GTID_NEXT = 'uuid:n'``), else a new automatic one where the mode assigns GTIDs."""
        if not logged:
            return None
        if self.owned_gtid is not None:
            return self.owned_gtid
        state = self.server.gtid_state
        if (
            self.gtid_next.type is GtidNextType.AUTOMATIC
            and state.mode.assigns_gtids
            and (self._uses_binlog() or self.server.binlog is None or self.system)
        ):
            return state.generate(self.connection_id)
        return None

    def log_transaction(
        self,
        statements: tuple[BinlogStatement, ...],
        gtid: Gtid | None,
        *,
        xa: bool = False,
    ) -> None:
        """Append a committed (or XA-prepared) transaction to the binary log, if this session
        writes one."""
        config = self.server.config
        immediate = int(self.server.clock() * 1_000_000) if config.commit_timestamps else 0
        original = self._take_original_commit_timestamp(immediate)
        binlog = self.server.binlog
        if binlog is None or not self._uses_binlog():
            return
        self.server.binlog_append(
            BinlogTransaction(
                gtid=gtid,
                statements=statements,
                original_commit_timestamp=original,
                immediate_commit_timestamp=immediate,
                original_server_version=int(str(self.vars["original_server_version"]))
                if self.system
                else self.server.server_version_id,
                immediate_server_version=self.server.server_version_id,
                server_id=int(str(self.server.global_vars["server_id"])),
                sequence_number=binlog.next_sequence_number(),
                is_ddl=any(_is_ddl(s.sql) for s in statements),
                xa=xa,
            )
        )

    async def commit_transaction(self, *, xa: bool = False) -> Gtid | None:
        """Commit the open (or statement) transaction; returns its GTID, if any."""
        state = self.server.gtid_state
        changes = tuple(self.txn_changes)
        if self.skip_transaction:
            self.store.rollback()
            self._end_transaction()
            return None
        logged = bool(changes) or self.owned_gtid is not None
        gtid = self.take_gtid(logged=logged)
        saves_row = self.saves_gtid_rows()
        if gtid is not None and saves_row:
            if self.store.mode is not TxMode.WRITE:
                await self._acquire_write()
            gtid_table.insert_gtid(self.store.writes, gtid, tagged=self.server.gtid_tagged)
        self.store.commit()
        if logged:
            self.log_transaction(changes, gtid, xa=xa)
        else:
            self.vars["original_commit_timestamp"] = UNDEFINED_COMMIT_TIMESTAMP
        if gtid is not None:
            state.commit(gtid)
            if saves_row:
                self.server.saved_gtids((gtid,))
            self.trackers.collector.after_gtid_executed_update(gtid, system=self.system)
        self._end_transaction()
        return gtid

    def rollback_transaction(self) -> None:
        """Roll back the open (or statement) transaction; an owned GTID is released."""
        self.store.rollback()
        if self.owned_gtid is not None:
            self.server.gtid_state.release(self.owned_gtid)
        if self.xa_xid is not None:  # an XA transaction not prepared yet ends with it
            self.server.xa.active.pop(self.xa_xid, None)
            self.xa_xid = None
        self.xa_state = XaState.NOTR
        self.vars["original_commit_timestamp"] = UNDEFINED_COMMIT_TIMESTAMP
        self._end_transaction()

    def _end_transaction(self) -> None:
        self.end_transaction(track=True)

    def end_transaction(self, *, track: bool) -> None:
        """The transaction is over (committed, rolled back or XA-prepared): GTID ownership is
        released (an assigned ``GTID_NEXT`` becomes undefined); ``track`` also ends it for the
        transaction-state tracker."""
        self.owns_anonymous = False
        was = self.in_txn or self.stmt_active
        self.in_txn = False
        self.txn_explicit = False
        self.txn_read_only = False
        self.txn_changes.clear()
        self.txn_savepoints.clear()
        self.stmt_active = False
        self.skip_transaction = False
        if self.owned_gtid is not None or self.gtid_next.type is GtidNextType.ASSIGNED:
            self.owned_gtid = None
            if self.gtid_next.type is GtidNextType.ASSIGNED:
                self.gtid_next = self.gtid_next.undefined()
        if track and (was or self.next_read_only is not None or self.next_isolation is not None):
            self.next_read_only = None
            self.next_isolation = None
            tracker = self.trackers.transaction
            tracker.end_trx()
            tracker.set_read_flags(TxReadFlags.INHERIT)
            tracker.set_isolation(None)

    # ----- responses ----------------------------------------------------------------------

    def status(self) -> ServerStatus:
        """The server status word of the next response."""
        return server_status(self._status_bits())

    def _status_bits(self) -> int:
        status = _AUTOCOMMIT if self.autocommit else 0
        if self.in_txn:
            status |= _IN_TRANS
            if self.txn_read_only:
                status |= _IN_TRANS_READONLY
        if self.server.global_vars["sql_mode"] and "NO_BACKSLASH_ESCAPES" in str(
            self.vars["sql_mode"]
        ):
            status |= _NO_BACKSLASH_ESCAPES
        return status

    def respond(self, res: StmtResult, *, more: bool = False) -> Outcome:
        """Turn a statement result into a response and run the trackers' end-of-packet step."""
        status = self._status_bits()
        if more:
            status |= _MORE_RESULTS_EXISTS
        can_store = self.has_session_track and (
            res.result is None or bool(self.client_capabilities & _DEPRECATE_EOF)
        )
        blocks, changed = self.trackers.respond(can_store=can_store)
        if changed:
            status |= _SESSION_STATE_CHANGED
        return Outcome(
            result=res.result,
            affected_rows=res.affected_rows,
            last_insert_id=res.last_insert_id,
            status=server_status(status),
            warnings=min(len(self.warnings), 65535),
            info=res.info,
            session_state=blocks,
        )

    def _after_error(self) -> None:
        self.trackers.respond(can_store=False)

    # ----- running statements -------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed or self.killed:
            raise sql_error(ER.CONNECTION_KILLED)

    def query(self, sql: str) -> AsyncIterator[Outcome]:
        """Run a (multi-statement) query; one Outcome per statement.

        Raises :class:`SqlError` at the failing statement, after yielding the earlier ones.
        The steps are :meth:`begin_query`, :meth:`answer` per statement and
        :meth:`end_query`, which a front-end may also call itself.
        """
        return outcomes.query_outcomes(self, sql)

    async def query_all(self, sql: str) -> list[Outcome]:
        """Every Outcome of :meth:`query` as a list (tests, tools, replication appliers)."""
        statements = self.begin_query(sql)
        try:
            last = len(statements) - 1
            return [
                await self.answer(statement, more=index < last)
                for index, statement in enumerate(statements)
            ]
        finally:
            await self.end_query()

    def begin_query(self, sql: str) -> list[Statement]:
        """The statements of a query (1065 for none, 1064 for several without
        ``CLIENT_MULTI_STATEMENTS``; the error is reported to the trackers first)."""
        self._check_open()
        try:
            statements = self.server.statement_cache.split(sql)
            if not statements:
                raise sql_error(ER.EMPTY_QUERY)
            if len(statements) > 1 and not self.client_capabilities & _MULTI_STATEMENTS:
                raise parse_error(_after_first(sql, statements))
        except SqlError:
            self._after_error()
            raise
        return statements

    async def answer(self, statement: Statement, *, more: bool) -> Outcome:
        """Run one statement of a query and make its response (``more``: others follow)."""
        res = await self.run_statement(statement)
        return self.respond(res, more=more)

    async def end_query(self) -> None:
        """After a query, succeeded or not: a session killed meanwhile closes."""
        if self.killed and not self.closed:
            await self.close()

    async def run_statement(self, statement: Statement) -> StmtResult:
        """Run one parsed statement (errors are raised after the tracker bookkeeping)."""
        self._check_open()
        self._kill_event.clear()
        self._statement_started = self.server.clock()
        self.server.queries += 1
        self.running = statement.text
        self.command = "Query"
        handler, kind = dispatch.handler_for(statement, self.server.statement_handlers)
        handler = dispatch.maybe_skip(self, handler, kind, statement)
        if kind is not dispatch.Kind.DIAGNOSTIC:
            self.warnings = []
        try:
            dispatch.pre_statement_checks(self, kind, statement)
            res = await self._run_handler(handler, statement)
            if self.stmt_active:
                await self.commit_transaction()
        except SqlError as exc:
            self._statement_failed(exc)
            raise
        except sqlite3.Error as exc:
            error = map_sqlite_error(exc, self.functions)
            self._statement_failed(error)
            raise error from exc
        finally:
            self.running = None
            self.command = "Sleep"
        self._row_count = res.affected_rows if res.result is None else -1
        if not self.in_txn and kind not in dispatch.NO_COLLECT:
            self.trackers.collector.after_transaction_commit(
                self.server.gtid_state.executed,
                owns_gtid=self.owned_gtid is not None,
                is_rollback=False,
                system=self.system,
            )
        return res

    async def _run_handler(self, handler: dispatch.Handler, statement: Statement) -> StmtResult:
        """Run the handler; when a per-row ``WAIT_FOR_EXECUTED_GTID_SET`` must wait, wait and
        run the statement again (SQLite undid the interrupted statement)."""
        self.timed_out_waits.clear()
        while True:
            try:
                return await handler(self, statement)
            except gtid_waits.WaitNeeded as need:
                await self._row_wait(need)
            except sqlite3.Error as exc:
                error = map_sqlite_error(exc, self.functions)
                if not isinstance(error, gtid_waits.WaitNeeded):
                    raise error from exc
                await self._row_wait(error)

    async def _row_wait(self, need: gtid_waits.WaitNeeded) -> None:
        # Outside a transaction the interrupted statement has nothing to keep: give the writer
        # lock back while waiting, so the commit awaited can happen.
        if not self.in_txn:
            self.store.rollback()
        await gtid_waits.satisfy(self, need)

    def _statement_failed(self, exc: SqlError) -> None:
        if self.stmt_active:
            self.rollback_transaction()
        elif not self.in_txn and self.owns_gtid:
            # The failed statement's rollback releases what the session owned outside a
            # transaction (``binlog_gtid_errors.result``: a refused SET GTID_NEXT frees it).
            self.rollback_transaction()
        self.errors = 1
        self.warnings = [Warning_("Error", exc.code, str(exc.args[1]))]
        self._after_error()

    # ----- other commands -----------------------------------------------------------------

    async def init_db(self, name: str) -> Outcome:
        """COM_INIT_DB."""
        self._check_open()
        try:
            self.change_database(name)
        except SqlError:
            self._after_error()
            raise
        return self.respond(StmtResult())

    def change_database(self, name: str) -> None:
        """USE name (1049 if unknown)."""
        if not self.server.has_database(name):
            raise sql_error(ER.BAD_DB_ERROR, name)
        self.database = name
        db = self.server.catalog.database(name)
        if db is not None:
            self.vars["character_set_database"] = db.charset
            self.vars["collation_database"] = db.collation
        self.trackers.schema_set()

    def ping(self) -> Outcome:
        """COM_PING."""
        self._check_open()
        return self.respond(StmtResult())

    async def reset_connection(self) -> Outcome:
        """COM_RESET_CONNECTION: roll back, drop temp tables and prepared statements,
        restore session variables; the user and schema stay."""
        self._check_open()
        self._reset_state()
        return self.respond(StmtResult())

    async def change_user(self, user: str, database: str | None) -> Outcome:
        """COM_CHANGE_USER (authentication is the front-end's job)."""
        self._check_open()
        if database is not None and not self.server.has_database(database):
            raise sql_error(ER.BAD_DB_ERROR, database)
        self._reset_state()
        self.user = user
        self.database = database
        return self.respond(StmtResult())

    def _reset_state(self) -> None:
        self.rollback_transaction()
        self._drop_temp_tables()
        self.prepared.clear()
        self.user_vars.clear()
        self.vars = {name: self.server.global_vars[name] for name in SESSION_VARIABLES}
        self.vars["pseudo_thread_id"] = self.connection_id
        self.gtid_next = GtidNext()
        self.warnings = []
        self._last_insert_id = 0
        self.trackers = SessionTrackers(self._tracked_value, lambda: self.database)
        self._init_trackers()

    def field_list(self, table: str, wildcard: str = "") -> tuple[Column, ...]:
        """COM_FIELD_LIST: column definitions of ``table`` in the current schema."""
        self._check_open()
        ref = self.resolve_table(None, table)
        return tuple(
            ref.table.result_column(col, col.name, table)
            for col in ref.table.columns
            if not wildcard or like_match(wildcard, col.name)
        )

    def prepare(self, sql: str) -> PreparedStatement:
        """COM_STMT_PREPARE."""
        self._check_open()
        return prepared.prepare(self, sql)

    async def execute_prepared(self, stmt_id: int, params: Sequence[object]) -> Outcome:
        """COM_STMT_EXECUTE with the given parameter values."""
        self._check_open()
        return await prepared.execute(self, stmt_id, params)

    def close_prepared(self, stmt_id: int) -> None:
        """COM_STMT_CLOSE (no response)."""
        self.prepared.pop(stmt_id, None)

    def reset_prepared(self, stmt_id: int) -> None:
        """COM_STMT_RESET."""
        if stmt_id not in self.prepared:
            raise sql_error(ER.UNKNOWN_STMT_HANDLER, str(stmt_id), "mysqld_stmt_reset")

    def new_statement_id(self) -> int:
        """The next prepared statement id of this session."""
        stmt_id = self._next_stmt_id
        self._next_stmt_id += 1
        return stmt_id

    def set_last_insert_id(self, value: int) -> None:
        """Update ``LAST_INSERT_ID()`` after a statement generated ids."""
        self._last_insert_id = value

    def set_found_rows(self, value: int) -> None:
        """Remember the row count of the last SELECT."""
        self._found_rows = value

    def _drop_temp_tables(self) -> None:
        for table in list(self.temp_tables.values()):
            try:
                self.store.conn.execute(f"DROP TABLE IF EXISTS temp.{table.sqlite}")
            except sqlite3.Error:
                logger.debug("dropping %s failed", table.name, exc_info=True)
        self.temp_tables.clear()

    def add_close_listener(self, listener: Callable[[Session], None]) -> None:
        """Call ``listener(session)`` once the session is closed (QUIT, KILL, shutdown), so a
        front-end can drop the client connection as mysqld does."""
        self._close_listeners.append(listener)

    async def close(self) -> None:
        """COM_QUIT: roll back an open transaction, drop temporary tables.  A statement still
        running (e.g. waiting for GTIDs) is interrupted."""
        if self.closed:
            return
        self.closed = True
        if self.running is not None:
            self.killed = True
            self._kill_event.set()
        self.rollback_transaction()
        self._drop_temp_tables()
        self.server.gtid_state.release_all(self.connection_id)
        self.store.close()
        self.server.forget_session(self)
        for listener in self._close_listeners:
            listener(self)

    def abort(self) -> None:
        """The server died under this session (restart without shutdown): its client
        connection is dropped, as a crashed mysqld's are."""
        self.closed = True
        try:
            self.store.conn.close()
        except sqlite3.Error:
            logger.debug("closing session connection failed", exc_info=True)
        for listener in self._close_listeners:
            listener(self)


def _after_first(sql: str, statements: list[Statement]) -> str:
    """Text mysqld quotes when a second statement arrives without CLIENT_MULTI_STATEMENTS."""
    second = statements[1].text
    position = sql.find(second)
    if position < 0:
        return second
    start = sql.rfind(";", 0, position)
    return sql[start:] if start >= 0 else sql[position:]


_DDL_WORDS = ("CREATE", "DROP", "ALTER", "RENAME", "TRUNCATE")


def _is_ddl(sql: str) -> bool:
    return sql.lstrip()[:8].upper().startswith(_DDL_WORDS)  # the longest word has 8 letters
