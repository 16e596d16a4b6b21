"""One emulated mysqld: configuration, data, GTID state, binary log, sessions.

The server is socket-free: a wire front-end (or a test) opens :class:`Session` objects and
drives them with SQL text.  Everything runs on one asyncio event loop; waits
(``WAIT_FOR_EXECUTED_GTID_SET``, lock waits, ``SLEEP``) are awaits, never blocking calls.

Lifecycle: ``await server.start()`` starts the background ``compress_gtid_table`` task;
``await server.shutdown()`` closes sessions and saves the GTIDs of the last binary log into
``mysql.gtid_executed``; :meth:`restart` rebuilds ``gtid_executed`` from that table and the
binary log, as mysqld does at start (after a clean shutdown or a crash alike).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from consistent.emulator import gtid_table
from consistent.emulator.binlog import BinaryLog, BinlogTransaction, server_version_number
from consistent.emulator.config import Account, Clock, GtidMode, ServerConfig
from consistent.emulator.errors import ER, sql_error
from consistent.emulator.gtid_state import GtidState
from consistent.emulator.session import Session
from consistent.emulator.sql.catalog import Catalog, ColumnDef, Database, IndexDef, TableDef
from consistent.emulator.sql.infoschema import VirtualTable, default_virtual_tables
from consistent.emulator.sql.stmtcache import StatementCache
from consistent.emulator.sql.storage import Storage, WriterLock
from consistent.emulator.sql.types import TypeSpec
from consistent.emulator.statements import Handler, Kind
from consistent.emulator.variables import SYSTEM_VARIABLES
from consistent.emulator.xa import XaRegistry
from consistent.gtid import Gtid, GtidSet
from consistent.protocol.constants import Capability

__all__ = ["DEFAULT_CLIENT_CAPABILITIES", "EmulatedServer"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: GTIDs saved by commits that are taken into the saved set at once (see ``_saved_since``).
_SAVED_BATCH = 1024

#: What a modern client (libmysqlclient 8, PyMySQL with SESSION_TRACK) announces.
DEFAULT_CLIENT_CAPABILITIES = int(
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PS_MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.SESSION_TRACK
)


def _gtid_executed_def(tagged: bool) -> TableDef:
    """``mysql.gtid_executed`` as the server's version defines it (``gtid_tag`` from 8.3)."""
    columns = [
        ColumnDef("source_uuid", TypeSpec("char", 36, charset="utf8mb4"), nullable=False),
        ColumnDef("interval_start", TypeSpec("bigint"), nullable=False),
        ColumnDef("interval_end", TypeSpec("bigint"), nullable=False),
    ]
    key = ["source_uuid", "interval_start"]
    if tagged:
        columns.append(
            ColumnDef("gtid_tag", TypeSpec("char", 32, charset="utf8mb4"), nullable=False)
        )
        key.insert(1, "gtid_tag")
    return TableDef(
        "mysql",
        "gtid_executed",
        tuple(columns),
        (IndexDef("PRIMARY", tuple(key), unique=True, primary=True),),
        charset="utf8mb4",
    )


class EmulatedServer:
    """One mysqld with its data, GTID state and sessions; see the module docstring."""

    def __init__(self, config: ServerConfig | None = None, *, clock: Clock = time.time) -> None:
        self.config = config or ServerConfig()
        self.clock = clock
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if self.config.data_dir is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="consistent-emulator-")
            data_dir = self._tmpdir.name
        else:
            data_dir = self.config.data_dir
            os.makedirs(data_dir, exist_ok=True)
        self.data_path = os.path.join(data_dir, "data.sqlite")
        self.storage = Storage(self.data_path)
        self._internal = self.storage.connect()
        self.gtid_tagged = self.config.gtid_tags
        """Whether ``mysql.gtid_executed`` has the ``gtid_tag`` column (8.3+)."""
        gtid_table.create_table(self._internal, tagged=self.gtid_tagged)
        self.catalog = Catalog()
        self.catalog.add_database(Database("mysql"))
        self.catalog.put_table(_gtid_executed_def(self.gtid_tagged))
        self.catalog.add_database(Database("sys"))
        self.global_vars: dict[str, object] = self._initial_globals()
        self.gtid_state: GtidState = GtidState(
            self.config.server_uuid, self.config.gtid_mode, log_bin=self.config.log_bin
        )
        self.binlog: BinaryLog | None = (
            BinaryLog(self.config.log_bin_basename) if self.config.log_bin else None
        )
        self._saved = GtidSet()
        self._saved_since: list[Gtid] = []
        """GTIDs commits wrote into the table since ``_saved`` last took them in: adding each
        to a set at every commit costs more than taking in a batch when the set is read."""
        self.xa = XaRegistry()
        """XA transactions: the XIDs sessions started and the prepared ones (:mod:`.xa`)."""
        self.sessions: dict[int, Session] = {}
        self._next_thread_id = 1
        self.compressor = gtid_table.GtidTableCompressor(
            self.run_internal_transaction, self._new_thread_id(), tagged=self.gtid_tagged
        )
        self.started_at = clock()
        self.running = True
        self.queries = 0
        self.server_version_id = server_version_number(self.config.version)
        self.virtual_tables: dict[tuple[str, str], VirtualTable] = default_virtual_tables()
        self.show_handlers: dict[str, Any] = {}
        """Extra SHOW forms, keyed by the words after SHOW (see :mod:`.sql.show`)."""
        self.statement_handlers: dict[str, tuple[Handler, Kind]] = {}
        """Extra statements (replication: CHANGE REPLICATION SOURCE, START/STOP REPLICA…)."""
        self.statement_cache = StatementCache()
        """Parsed statement shapes and DML plans (see :mod:`.sql.stmtcache`)."""

    # ----- configuration ------------------------------------------------------------------

    def _initial_globals(self) -> dict[str, object]:
        values: dict[str, object] = {name: var.default for name, var in SYSTEM_VARIABLES.items()}
        config = self.config
        values.update(
            {
                "server_uuid": config.server_uuid.lower(),
                "server_id": config.server_id,
                "version": config.version,
                "version_comment": config.version_comment,
                "hostname": config.hostname,
                "port": config.port,
                "log_bin": config.log_bin,
                "log_bin_basename": config.log_bin_basename if config.log_bin else "",
                "log_replica_updates": config.log_replica_updates,
                "log_slave_updates": config.log_replica_updates,
                "gtid_executed_compression_period": config.gtid_executed_compression_period,
                "system_time_zone": config.system_time_zone,
                "enforce_gtid_consistency": "ON" if config.enforce_gtid_consistency else "OFF",
                "gtid_mode": config.gtid_mode.value,
            }
        )
        for name, text in config.system_variables.items():
            var = SYSTEM_VARIABLES.get(name.lower())
            if var is None:
                raise sql_error(ER.UNKNOWN_SYSTEM_VARIABLE, name)
            values[var.name] = var.coerce(_option_value(text))
        return values

    @property
    def users(self) -> Mapping[str, Account]:
        """Accounts by user name (plain password and ``mysql_native_password`` hash)."""
        return MappingProxyType({a.user: a for a in self.config.accounts})

    @property
    def uptime(self) -> float:
        """Seconds since the server (re)started."""
        return self.clock() - self.started_at

    def _new_thread_id(self) -> int:
        thread_id = self._next_thread_id
        self._next_thread_id += 1
        return thread_id

    # ----- sessions -----------------------------------------------------------------------

    def open_session(
        self,
        user: str = "root",
        database: str | None = None,
        *,
        client_capabilities: int = DEFAULT_CLIENT_CAPABILITIES,
        connect_attrs: Mapping[str, str] | None = None,
        host: str = "localhost",
        system: bool = False,
    ) -> Session:
        """A new connection, already authenticated as ``user``.

        ``database`` must exist (ER_BAD_DB_ERROR otherwise).  ``system`` marks a replication
        applier thread: it never tracks GTIDs and ``WAIT_FOR_EXECUTED_GTID_SET`` returns NULL.
        """
        if not self.running:
            raise sql_error(ER.UNKNOWN_ERROR, "The server is shut down")
        if database is not None and not self.has_database(database):
            raise sql_error(ER.BAD_DB_ERROR, database)
        session = Session(
            self,
            self._new_thread_id(),
            user,
            database,
            client_capabilities=client_capabilities,
            connect_attrs=dict(connect_attrs or {}),
            host=host,
            system=system,
        )
        self.sessions[session.connection_id] = session
        return session

    def forget_session(self, session: Session) -> None:
        """Called by :meth:`Session.close`."""
        self.sessions.pop(session.connection_id, None)

    def has_database(self, name: str) -> bool:
        """Whether ``name`` is a database (including the virtual system schemas)."""
        return self.catalog.database(name) is not None or name.lower() in (
            "information_schema",
            "performance_schema",
        )

    async def kill(self, connection_id: int, *, query_only: bool) -> None:
        """KILL [QUERY] ``connection_id`` (ER_NO_SUCH_THREAD if unknown)."""
        session = self.sessions.get(connection_id)
        if session is None:
            raise sql_error(ER.NO_SUCH_THREAD, connection_id)
        await session.kill(query_only=query_only)

    # ----- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start background tasks (the gtid_executed compression thread)."""
        self.compressor.start()

    async def __aenter__(self) -> EmulatedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Close every session, stop background tasks, save the last binlog's GTIDs."""
        for session in list(self.sessions.values()):
            await session.close()
        await self.compressor.stop()
        for prepared in self.xa.prepared.values():
            prepared.store.close()  # the emulator does not recover prepared XA transactions
        self.xa.forget()
        if self.binlog is not None:
            self._save_binlog_gtids()
        self.running = False

    def restart(self) -> None:
        """Start again from the data directory.

        Without a prior :meth:`shutdown` this is a crash: sessions vanish without COMMIT and
        nothing is saved.  Either way ``gtid_executed`` becomes ``mysql.gtid_executed`` ∪ the
        GTIDs of the binary log, and ``gtid_purged`` the part not in the binary log.
        """
        for session in list(self.sessions.values()):
            session.abort()
        self.sessions.clear()
        for prepared in self.xa.prepared.values():
            prepared.store.conn.close()
        self.xa.forget()
        if self.storage.writer is not None:
            self.storage.writer = None
            self.storage.lock = WriterLock()
        self._internal.close()
        self._internal = self.storage.connect()
        table = gtid_table.fetch_gtids(self._internal, tagged=self.gtid_tagged)
        if self.binlog is not None:
            logged = self.binlog.gtids
            executed = table | logged
            purged = executed - logged
            missing = logged - table
            if not missing.is_empty():
                # ``Gtid_state::read_gtid_executed_from_table`` + ``save(&logged_gtids)``: what
                # the binary log has and the table lacks (nothing was saved at the crash or
                # shutdown) is written to the table at start.
                self._internal.execute("BEGIN IMMEDIATE")
                gtid_table.insert_set(self._internal, missing, tagged=self.gtid_tagged)
                self._internal.execute("COMMIT")
                table = table | missing
            self.binlog.rotate(executed)
        else:
            executed = table
            purged = table
        self.gtid_state = GtidState(
            self.config.server_uuid,
            GtidMode(self.global_vars["gtid_mode"]),
            log_bin=self.config.log_bin,
        )
        self.gtid_state.restore(executed, purged)
        self._saved_to_table = table
        self.compressor = gtid_table.GtidTableCompressor(
            self.run_internal_transaction, self._new_thread_id(), tagged=self.gtid_tagged
        )
        self.started_at = self.clock()
        self.running = True

    def close(self) -> None:
        """Release the data directory (a temporary one is deleted)."""
        self._internal.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    # ----- internal transactions ----------------------------------------------------------

    async def run_internal_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in its own write transaction on the server's internal connection."""
        owner = object()
        await self.storage.acquire(owner, None)
        try:
            self._internal.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._internal)
            except BaseException:
                self._internal.execute("ROLLBACK")
                raise
            self._internal.execute("COMMIT")
            return result
        finally:
            self.storage.release(owner)

    def _save_binlog_gtids(self) -> None:
        """``save_gtids_of_last_binlog_into_table`` (runs synchronously: no writer active)."""
        pending = self.gtid_state.executed - self._saved_to_table
        if pending.is_empty():
            return
        self._internal.execute("BEGIN IMMEDIATE")
        gtid_table.insert_set(self._internal, pending, tagged=self.gtid_tagged)
        self._internal.execute("COMMIT")
        self._saved_to_table = self._saved_to_table | pending

    # ----- GTID operations used by statements ---------------------------------------------

    async def flush_binary_logs(self) -> None:
        """FLUSH BINARY LOGS: save the last file's GTIDs into the table, compress, rotate."""
        if self.binlog is None:
            return
        pending = self.gtid_state.executed - self._saved_to_table
        if not pending.is_empty():
            await self.run_internal_transaction(
                lambda c: gtid_table.insert_set(c, pending, tagged=self.gtid_tagged)
            )
            self._saved_to_table = self._saved_to_table | pending
        # Rotation wakes the compression thread, also when commits already wrote the rows.
        self.compressor.signal()
        self.binlog.rotate(self.gtid_state.executed)

    async def reset_binary_logs_and_gtids(self) -> None:
        """RESET MASTER / RESET BINARY LOGS AND GTIDS."""
        await self.run_internal_transaction(gtid_table.delete_all)
        self.gtid_state.reset()
        self._saved_to_table = GtidSet()
        if self.binlog is not None:
            self.binlog.reset()

    async def add_gtid_purged(self, gtids: GtidSet, *, plus: bool) -> None:
        """SET GLOBAL gtid_purged (the set is also saved into the table, as mysqld does)."""
        added = self.gtid_state.add_purged(gtids, plus=plus)
        if not added.is_empty():
            await self.run_internal_transaction(
                lambda c: gtid_table.insert_set(c, added, tagged=self.gtid_tagged)
            )
            self._saved_to_table = self._saved_to_table | added

    def purge_binary_logs_to(self, name: str) -> bool:
        """PURGE BINARY LOGS TO 'name'."""
        if self.binlog is None:
            raise sql_error(ER.NO_BINARY_LOGGING)
        before = self.binlog.gtids
        if not self.binlog.purge_to(name):
            return False
        self.gtid_state.add_lost(before - self.binlog.gtids)
        return True

    @property
    def _saved_to_table(self) -> GtidSet:
        """The GTIDs ``mysql.gtid_executed`` is known to hold."""
        return self._take_in_saved()

    @_saved_to_table.setter
    def _saved_to_table(self, gtids: GtidSet) -> None:
        self._saved = gtids
        self._saved_since.clear()

    def _take_in_saved(self) -> GtidSet:
        if self._saved_since:
            self._saved = self._saved | GtidSet(self._saved_since)
            self._saved_since.clear()
        return self._saved

    def saved_gtids(self, gtids: Iterable[Gtid]) -> None:
        """Record GTIDs a committing transaction wrote into the table itself."""
        self._saved_since.extend(gtids)
        if len(self._saved_since) >= _SAVED_BATCH:
            self._take_in_saved()
        self.compressor.note_saved(int(str(self.global_vars["gtid_executed_compression_period"])))

    def binlog_append(self, transaction: BinlogTransaction) -> None:
        """Write a committed transaction to the binary log (rotating by size if configured)."""
        if self.binlog is None:
            return
        self.binlog.append(transaction)
        limit = self.config.max_binlog_transactions
        if limit and len(self.binlog.current.transactions) >= limit:
            pending = self.gtid_state.executed - self._saved_to_table
            if not pending.is_empty():
                self._internal.execute("BEGIN")
                gtid_table.insert_set(self._internal, pending, tagged=self.gtid_tagged)
                self._internal.execute("COMMIT")
                self._saved_to_table = self._saved_to_table | pending
                self.compressor.signal()
            self.binlog.rotate(self.gtid_state.executed)

    async def apply_transaction(
        self, transaction: BinlogTransaction, *, session: Session | None = None
    ) -> bool:
        """Apply one replicated transaction as a statement-based applier thread does.

        The GTID is taken with ``SET GTID_NEXT`` and ``@@original_commit_timestamp`` /
        ``@@original_server_version`` carry the source's values, so this server's binary log
        records the original timestamp unchanged and its own commit time as the immediate one
        (WL#7319).  Returns ``False`` when the GTID was already executed (the transaction is
        skipped, as with GTID auto-positioning).  ``session`` lets an applier reuse its thread.
        """
        gtid = transaction.gtid
        if gtid is not None and self.gtid_state.is_executed(gtid):
            return False
        applier = session or self.open_session("system user", system=True)
        try:
            next_value = str(gtid) if gtid is not None else "ANONYMOUS"
            await applier.query_all(f"SET GTID_NEXT = '{next_value}'")
            applier.vars["original_commit_timestamp"] = transaction.original_commit_timestamp
            applier.vars["original_server_version"] = transaction.original_server_version
            framed = not transaction.is_ddl and not transaction.xa
            if framed:
                await applier.query_all("BEGIN")
            for statement in transaction.statements:
                if statement.database is not None and self.has_database(statement.database):
                    applier.database = statement.database
                applier.vars["timestamp"] = float(statement.timestamp or 0.0)
                await applier.query_all(statement.sql)
            if framed:
                await applier.query_all("COMMIT")
            applier.vars["timestamp"] = 0.0
            await applier.query_all("SET GTID_NEXT = 'AUTOMATIC'")
        except BaseException:
            applier.rollback_transaction()
            raise
        finally:
            if session is None:
                await applier.close()
        return True

    def gtid_table_rows(self) -> list[tuple[str, int, int]]:
        """Current rows of ``mysql.gtid_executed`` (committed state)."""
        return gtid_table.table_rows(self._internal, tagged=self.gtid_tagged)


def _option_value(text: str) -> object:
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    return stripped
