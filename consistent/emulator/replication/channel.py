"""One replication channel of a replica: receiver → relay log → coordinator → workers.

This is mysqld's replica pipeline, with each stage's cost taken from the channel's
:class:`~.lagmodel.LagModel` and its progress reported as WL#7374 describes (:mod:`.status`):

* the **receiver** (I/O thread) connects to the source, asks for every transaction the replica
  has neither executed nor retrieved (GTID auto-positioning) and follows the source's binary
  log; each transaction reaches the replica after the model's network delay, in order, and is
  queued into the relay log (``QUEUEING_`` → ``LAST_QUEUED_TRANSACTION``,
  ``Retrieved_Gtid_Set``);
* the **coordinator** (SQL thread) reads the relay log in order, waits ``SOURCE_DELAY``
  (WL#7318, at the transaction's GTID event) and hands each transaction to an idle worker
  (``PROCESSING_`` → ``LAST_PROCESSED_TRANSACTION``); with ``workers == 0`` the SQL thread
  applies by itself and there is no coordinator;
* a **worker** spends the model's apply cost, waits for its turn when commit order is
  preserved, and applies the transaction with
  :meth:`~consistent.emulator.server.EmulatedServer.apply_transaction` on its own system
  session, which keeps the GTID and the original commit timestamp and gives the replica's own
  commit time as the immediate one (``APPLYING_`` → ``LAST_APPLIED_TRANSACTION``).

An apply error stops the SQL thread: the worker keeps its ``APPLYING_`` fields, its
``LAST_APPLIED_`` fields are not updated, and ``Last_SQL_Errno`` / ``LAST_ERROR_*`` tell why.
START REPLICA clears the ``…ING_`` fields; with workers it starts fresh workers, so their
``LAST_APPLIED_`` fields are cleared too, while a single-threaded applier keeps them
(reference §6.1).  A transaction interrupted by STOP is rolled back and applied again after
START, from the relay log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from consistent.emulator.binlog import BinlogTransaction
from consistent.emulator.errors import SqlError
from consistent.emulator.replication.delay import WAITING_FOR_DELAY, remaining_delay, sql_delay_end
from consistent.emulator.replication.errorlog import ErrorLog, LogCode
from consistent.emulator.replication.lagmodel import LagModel, Stage
from consistent.emulator.replication.status import (
    NO_ERROR,
    ErrorInfo,
    ServiceState,
    StageStatus,
    TrxStamp,
)
from consistent.errnos import CR, ER
from consistent.gtid import GtidSet

if TYPE_CHECKING:
    from consistent.emulator.server import EmulatedServer
    from consistent.emulator.session import Session

__all__ = [
    "Channel",
    "RelayEntry",
    "Resolver",
    "SourceConfig",
    "Worker",
]

logger = logging.getLogger(__name__)

_US: Final = 1_000_000
_SYSTEM_USER: Final = "system user"

# Thread states (SHOW REPLICA STATUS Replica_IO_State / Replica_SQL_Running_State), 8.0.26+.
IO_CONNECTING: Final = "Connecting to source"
IO_WAITING: Final = "Waiting for source to send event"
IO_QUEUEING: Final = "Queueing source event to the relay log"
IO_RECONNECTING: Final = "Reconnecting after a failed source event read"
SQL_IDLE: Final = "Replica has read all relay log; waiting for more updates"
SQL_READING: Final = "Reading event from the relay log"
SQL_WAITING_WORKER: Final = "Waiting for replica workers to process their queues"
SQL_APPLYING: Final = "Applying batch of row changes (write)"
SQL_PAUSED: Final = "Waiting for an event from Coordinator"


@dataclass(frozen=True)
class SourceConfig:
    """What ``CHANGE REPLICATION SOURCE TO`` sets for a channel."""

    host: str = ""
    port: int = 3306
    user: str = ""
    password: str = ""
    auto_position: bool = True
    delay: int = 0
    connect_retry: int = 60
    retry_count: int = 86400
    heartbeat_period: float = 30.0


Resolver = Callable[[SourceConfig], "EmulatedServer | None"]
"""Finds the emulated server a channel's ``SOURCE_HOST``/``SOURCE_PORT`` name (None: nobody
listens there)."""


@dataclass
class RelayEntry:
    """One transaction in the relay log."""

    transaction: BinlogTransaction
    queued: TrxStamp
    applied: bool = False


@dataclass
class Worker:
    """One applier worker (or the single-threaded SQL thread, ``worker_id`` 0)."""

    worker_id: int
    thread_id: int = 0
    session: Session | None = None
    status: StageStatus = field(default_factory=StageStatus)
    error: ErrorInfo = NO_ERROR
    busy: bool = False
    running: bool = False


class Channel:
    """One source → replica channel; see the module docstring.

    ``origin`` is the loop time lag-model windows count from (default: now).
    """

    def __init__(
        self,
        replica: EmulatedServer,
        name: str = "",
        *,
        resolver: Resolver,
        lag: LagModel | None = None,
        config: SourceConfig | None = None,
        error_log: ErrorLog | None = None,
        origin: float | None = None,
    ) -> None:
        self.replica = replica
        self.name = name
        self.resolver = resolver
        self.config = config or SourceConfig()
        self.lag = lag or LagModel()
        self.error_log = error_log or ErrorLog(replica.config.hostname)
        self._rng = self.lag.rng()
        self._origin = origin
        self.retrieved = GtidSet()
        self.relay: list[RelayEntry] = []
        self._cursor = 0
        self._relay_grew = asyncio.Event()
        self.receiver = StageStatus()
        self.coordinator = StageStatus()
        self.workers: list[Worker] = [Worker(0)]
        self.io_state = ServiceState.OFF
        self.io_stage = ""
        self.io_error = NO_ERROR
        self.sql_running = False
        self.sql_stage = ""
        self.sql_error = NO_ERROR
        self.coordinator_error = NO_ERROR
        self.io_thread_id = 0
        self.sql_thread_id = 0
        self.delay_end: int | None = None
        self.clock_diff = 0
        """The replica's clock minus the source's, in whole seconds, as the receiver saw it
        when it connected (``clock_diff_with_master``)."""
        self.source_uuid = ""
        self.source_server_id = 0
        self.source_log_file = ""
        self.source_log_pos = 4
        self.timestamps_warning_logged = False
        self._io_task: asyncio.Task[None] | None = None
        self._sql_task: asyncio.Task[None] | None = None
        self._worker_tasks: set[asyncio.Task[None]] = set()
        self._io_session: Session | None = None
        self._sql_session: Session | None = None
        self._idle = asyncio.Condition()
        self._turn = asyncio.Condition()
        self._next_ticket = 0
        self._commit_ticket = 0
        self._lock = asyncio.Lock()
        self.queued_count = 0
        self.applied_count = 0

    # ----- state ----------------------------------------------------------------------------

    @property
    def io_running(self) -> bool:
        """Whether the receiver thread runs (connected or still connecting)."""
        return self.io_state is not ServiceState.OFF

    @property
    def multi_threaded(self) -> bool:
        """Whether a coordinator hands transactions to workers (``workers >= 1``)."""
        return self.lag.workers > 0

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    def _model_origin(self) -> float:
        """Loop time lag-model windows count from (fixed on first use)."""
        if self._origin is None:
            self._origin = self._loop_time()
        return self._origin

    def _model_time(self) -> float:
        return self._loop_time() - self._model_origin()

    def _now_us(self) -> int:
        return int(self.replica.clock() * _US)

    def pending(self) -> list[RelayEntry]:
        """Relay-log transactions not applied yet, oldest first."""
        return [e for e in self.relay if not e.applied]

    def seconds_behind_source(self) -> int | None:
        """``Seconds_Behind_Source``: NULL without an SQL thread; 0 when the relay log is
        applied and the receiver runs; else now minus the immediate commit time of the oldest
        transaction not applied yet (delay included)."""
        if not self.sql_running:
            return None
        pending = self.pending()
        if not pending:
            return 0 if self.io_running else None
        immediate = pending[0].transaction.immediate_commit_timestamp
        return max(0, int(self.replica.clock()) - immediate // _US)

    def remaining_delay(self) -> int | None:
        """``SQL_Remaining_Delay`` / ``REMAINING_DELAY``: seconds left while the applier waits
        for ``SOURCE_DELAY``, else None."""
        if self.delay_end is None or not self.sql_running:
            return None
        return remaining_delay(self.delay_end, self.replica.clock())

    def set_lag(self, lag: LagModel) -> None:
        """Change the lag model; costs change for the next transactions, the number of
        workers at the next start of the SQL thread (as ``replica_parallel_workers``)."""
        self.lag = lag
        self._rng = lag.rng()

    # ----- lifecycle --------------------------------------------------------------------------

    async def start(self, *, io: bool = True, sql: bool = True) -> bool:
        """START REPLICA [IO_THREAD] [SQL_THREAD]; False when every requested thread ran."""
        async with self._lock:
            started = False
            if io and not self.io_running:
                self._start_io()
                started = True
            if sql and not self.sql_running:
                self._start_sql()
                started = True
        if started:
            # Like mysqld, return once the threads have started: the receiver has made its
            # first connection attempt and the applier has looked at the relay log.
            await asyncio.sleep(0)
        return started

    async def stop(self, *, io: bool = True, sql: bool = True) -> bool:
        """STOP REPLICA [IO_THREAD] [SQL_THREAD]; False when no requested thread ran."""
        async with self._lock:
            stopped = False
            if io and self.io_running:
                await self._stop_io()
                stopped = True
            if sql and self.sql_running:
                await self._stop_sql()
                stopped = True
            return stopped

    async def close(self) -> None:
        """Stop both threads (server shutdown, topology close)."""
        await self.stop()
        await self._join_sql_tasks()

    def reset(self) -> None:
        """RESET REPLICA (threads stopped): forget the relay log, the retrieved set, the
        delay and the monitoring data; the connection settings stay."""
        self.relay.clear()
        self._cursor = 0
        self.retrieved = GtidSet()
        self.config = replace(self.config, delay=0)
        self.delay_end = None
        self.receiver.clear()
        self.coordinator.clear()
        self.workers = [Worker(0)]
        self.io_error = self.sql_error = self.coordinator_error = NO_ERROR
        self.source_log_file = ""
        self.source_log_pos = 4

    # ----- receiver -------------------------------------------------------------------------

    def _start_io(self) -> None:
        self.receiver.clear_current()
        self.io_error = NO_ERROR
        session = self.replica.open_session(_SYSTEM_USER, system=True)
        session.command = "Connect"
        self._io_session = session
        self.io_thread_id = session.connection_id
        self.io_state = ServiceState.CONNECTING
        self.io_stage = IO_CONNECTING
        self._io_task = asyncio.get_running_loop().create_task(
            self._receive(), name=f"replica-io:{self.replica.config.hostname}:{self.name}"
        )

    async def _stop_io(self) -> None:
        task, self._io_task = self._io_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_session(self._io_session)
        self._io_session = None
        self.io_state = ServiceState.OFF
        self.io_stage = ""

    async def _connect(self) -> EmulatedServer:
        attempts = 0
        while True:
            source = self.resolver(self.config)
            if source is not None and source.running and source.binlog is not None:
                if source.config.server_uuid.lower() == self.replica.config.server_uuid.lower():
                    raise _Fatal(
                        ER.SLAVE_FATAL_ERROR,
                        "Fatal error: The replica I/O thread stops because source and replica "
                        "have equal MySQL server UUIDs; these UUIDs must be different for "
                        "replication to work.",
                    )
                return source
            attempts += 1
            if source is not None and source.binlog is None:
                raise _Fatal(
                    ER.MASTER_FATAL_ERROR_READING_BINLOG,
                    "Got fatal error 1236 from source when reading data from binary log: "
                    "'Binary logging not possible. Message: the source has no binary log'",
                )
            self.io_error = ErrorInfo(
                CR.CONN_HOST_ERROR,
                f"error connecting to source '{self.config.user}@{self.config.host}:"
                f"{self.config.port}' - retry-time: {self.config.connect_retry}  retries: "
                f"{attempts}  message: Can't connect to MySQL server on "
                f"'{self.config.host}:{self.config.port}' (111)",
                self._now_us(),
            )
            if attempts > self.config.retry_count:
                raise _Fatal(self.io_error.number, self.io_error.message)
            await asyncio.sleep(max(self.config.connect_retry, 1))

    async def _receive(self) -> None:
        try:
            source = await self._connect()
        except _Fatal as fatal:
            self.io_error = ErrorInfo(fatal.number, fatal.message, self._now_us())
            self.io_state = ServiceState.OFF
            self.io_stage = ""
            session, self._io_session = self._io_session, None
            await self._close_session(session)
            return
        binlog = source.binlog
        assert binlog is not None
        self.io_error = NO_ERROR
        self.io_state = ServiceState.ON
        self.io_stage = IO_WAITING
        self.source_uuid = source.config.server_uuid.lower()
        self.source_server_id = int(str(source.global_vars["server_id"]))
        # ``clock_diff_with_master``: time(0) here minus the source's UNIX_TIMESTAMP().
        self.clock_diff = int(self.replica.clock()) - int(source.clock())
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[BinlogTransaction, float]] = asyncio.Queue()
        unsubscribe = binlog.subscribe(lambda t: inbox.put_nowait((t, loop.time())))
        try:
            have = self.replica.gtid_state.executed | self.retrieved
            now = loop.time()
            for transaction in binlog.transactions_missing_from(have):
                inbox.put_nowait((transaction, now))
            self.source_log_file = binlog.current.name
            last_arrival = now
            while True:
                transaction, sent = await inbox.get()
                delay = self.lag.network_delay(sent - self._model_origin(), self._rng)
                last_arrival = max(last_arrival, sent + delay)
                await asyncio.sleep(max(0.0, last_arrival - loop.time()))
                await self._unpaused(Stage.RECEIVER)
                await self._queue(transaction, binlog.current.name, binlog.current.size)
                last_arrival = loop.time()
        finally:
            unsubscribe()

    async def _queue(self, transaction: BinlogTransaction, log_file: str, log_pos: int) -> None:
        self.io_stage = IO_QUEUEING
        self.receiver.begin(transaction, self._now_us())
        transfer = self.lag.transfer.sample(self._rng)
        if transfer > 0:
            await asyncio.sleep(transfer)
        self.relay.append(RelayEntry(transaction, self.receiver.current))
        if transaction.gtid is not None:
            self.retrieved = self.retrieved.add(transaction.gtid)
        self.receiver.finish(self._now_us())
        self.relay[-1].queued = self.receiver.last
        self.source_log_file, self.source_log_pos = log_file, log_pos
        self.queued_count += 1
        self.io_stage = IO_WAITING
        self._relay_grew.set()

    async def _unpaused(self, stage: Stage) -> None:
        while True:
            until = self.lag.paused_until(stage, self._model_time())
            if until is None:
                return
            await asyncio.sleep(max(until - self._model_time(), 0.0))

    # ----- applier ----------------------------------------------------------------------------

    def _start_sql(self) -> None:
        self.sql_error = self.coordinator_error = NO_ERROR
        self.coordinator.clear_current()
        self.delay_end = None
        if self.multi_threaded:
            self.workers = [Worker(i + 1) for i in range(self.lag.workers)]
        else:
            single = self.workers[0] if len(self.workers) == 1 else Worker(0)
            single.worker_id = 0
            single.status.clear_current()
            single.error = NO_ERROR
            self.workers = [single]
        sql_session = self.replica.open_session(_SYSTEM_USER, system=True)
        sql_session.command = "Query"
        self._sql_session = sql_session
        self.sql_thread_id = sql_session.connection_id
        for worker in self.workers:
            if self.multi_threaded:
                worker.session = self.replica.open_session(_SYSTEM_USER, system=True)
                worker.thread_id = worker.session.connection_id
            else:
                worker.session = sql_session
                worker.thread_id = sql_session.connection_id
            worker.running = True
            worker.busy = False
        self._next_ticket = self._commit_ticket = 0
        self._cursor = 0
        self._purge()
        self.sql_running = True
        self.sql_stage = SQL_READING
        self._sql_task = asyncio.get_running_loop().create_task(
            self._coordinate(), name=f"replica-sql:{self.replica.config.hostname}:{self.name}"
        )

    async def _stop_sql(self) -> None:
        tasks = [t for t in (self._sql_task, *self._worker_tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sql_task = None
        self._worker_tasks.clear()
        await self._release_sql_sessions()

    async def _join_sql_tasks(self) -> None:
        tasks = [t for t in (self._sql_task, *self._worker_tasks) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _release_sql_sessions(self) -> None:
        self.sql_running = False
        self.sql_stage = ""
        self.delay_end = None
        sessions = {id(w.session): w.session for w in self.workers if w.session is not None}
        if self._sql_session is not None:
            sessions[id(self._sql_session)] = self._sql_session
        for worker in self.workers:
            worker.session = None
            worker.running = False
            worker.busy = False
        self._sql_session = None
        for session in sessions.values():
            await self._close_session(session)

    async def _close_session(self, session: Session | None) -> None:
        if session is None or session.closed:
            return
        session.rollback_transaction()
        await session.close()

    def _purge(self) -> None:
        """relay_log_purge: drop applied transactions from the head of the relay log."""
        drop = 0
        while drop < min(self._cursor, len(self.relay)) and self.relay[drop].applied:
            drop += 1
        if drop:
            del self.relay[:drop]
            self._cursor -= drop

    async def _next_entry(self) -> RelayEntry:
        while True:
            while self._cursor < len(self.relay) and self.relay[self._cursor].applied:
                self._cursor += 1
            if self._cursor < len(self.relay):
                entry = self.relay[self._cursor]
                self._cursor += 1
                return entry
            self.sql_stage = SQL_IDLE
            self._relay_grew.clear()
            await self._relay_grew.wait()

    async def _coordinate(self) -> None:
        while True:
            entry = await self._next_entry()
            self.sql_stage = SQL_READING
            await self._unpaused(Stage.APPLIER)
            await self._sql_delay(entry.transaction)
            gtid = entry.transaction.gtid
            if gtid is not None and self.replica.gtid_state.is_executed(gtid):
                entry.applied = True
                self._purge()
                continue
            if self.multi_threaded:
                await self._dispatch(entry)
            elif not await self._apply(self.workers[0], entry, None):
                await self._release_sql_sessions()
                return

    async def _sql_delay(self, transaction: BinlogTransaction) -> None:
        delay = self.config.delay
        if delay <= 0:
            return
        end = sql_delay_end(transaction, delay, self.clock_diff)
        if end <= self.replica.clock():
            return
        self.delay_end = end
        self.sql_stage = WAITING_FOR_DELAY
        try:
            while (left := end - self.replica.clock()) > 0:
                await asyncio.sleep(left)
        finally:
            self.delay_end = None
        self.sql_stage = SQL_READING

    async def _dispatch(self, entry: RelayEntry) -> None:
        self.coordinator.begin(entry.transaction, self._now_us())
        self.sql_stage = SQL_WAITING_WORKER
        async with self._idle:
            await self._idle.wait_for(lambda: any(not w.busy for w in self.workers))
            worker = next(w for w in self.workers if not w.busy)
            worker.busy = True
        buffer = self.lag.buffer.sample(self._rng)
        if buffer > 0:
            await asyncio.sleep(buffer)
        ticket = self._next_ticket
        self._next_ticket += 1
        task = asyncio.get_running_loop().create_task(
            self._work(worker, entry, ticket), name=f"replica-worker-{worker.worker_id}"
        )
        self._worker_tasks.add(task)
        task.add_done_callback(self._worker_tasks.discard)
        self.coordinator.finish(self._now_us())
        self.sql_stage = SQL_READING

    async def _work(self, worker: Worker, entry: RelayEntry, ticket: int) -> None:
        ok = await self._apply(worker, entry, ticket)
        if not ok:
            await self._fail_from_worker()
            return
        async with self._idle:
            worker.busy = False
            self._idle.notify_all()

    async def _fail_from_worker(self) -> None:
        """A worker failed: stop the coordinator and the other workers (the SQL thread)."""
        async with self._lock:
            current = asyncio.current_task()
            others = [t for t in (self._sql_task, *self._worker_tasks) if t not in (None, current)]
            for task in others:
                assert task is not None
                task.cancel()
            await asyncio.gather(*[t for t in others if t is not None], return_exceptions=True)
            self._sql_task = None
            await self._release_sql_sessions()

    async def _apply(self, worker: Worker, entry: RelayEntry, ticket: int | None) -> bool:
        """Apply one transaction on ``worker``; False when it failed (SQL thread stops)."""
        transaction = entry.transaction
        worker.status.begin(transaction, self._now_us())
        if not self.multi_threaded:
            self.sql_stage = SQL_APPLYING
        cost = self.lag.apply_cost(self._model_time(), len(transaction.statements), self._rng)
        if cost > 0:
            await asyncio.sleep(cost)
        ordered = ticket is not None and self.lag.preserve_commit_order
        if ordered:
            async with self._turn:
                await self._turn.wait_for(lambda: self._commit_ticket == ticket)
        session = worker.session
        assert session is not None
        try:
            await self.replica.apply_transaction(transaction, session=session)
        except SqlError as exc:
            self._record_apply_error(worker, transaction, exc)
            return False
        self._check_timestamps(transaction, session)
        worker.status.finish(self._now_us())
        entry.applied = True
        self.applied_count += 1
        self._purge()
        if ordered:
            async with self._turn:
                self._commit_ticket += 1
                self._turn.notify_all()
        if not self.multi_threaded:
            self.sql_stage = SQL_READING
        return True

    def _record_apply_error(
        self, worker: Worker, transaction: BinlogTransaction, exc: SqlError
    ) -> None:
        now = self._now_us()
        gtid = str(transaction.gtid) if transaction.gtid is not None else "ANONYMOUS"
        detail = f"Error '{exc.args[1]}' on query."
        if self.multi_threaded:
            message = (
                f"Worker {worker.worker_id} failed executing transaction '{gtid}' at source "
                f"log {self.source_log_file}, end_log_pos {self.source_log_pos}; {detail}"
            )
            worker.error = ErrorInfo(exc.code, message, now)
            self.coordinator_error = ErrorInfo(
                exc.code,
                "Coordinator stopped because there were error(s) in the worker(s). The most "
                f"recent failure being: Worker {worker.worker_id} failed executing transaction "
                f"'{gtid}' at source log {self.source_log_file}, end_log_pos "
                f"{self.source_log_pos}. See error log and/or performance_schema."
                "replication_applier_status_by_worker table for more details about this "
                "failure or others, if any.",
                now,
            )
            self.sql_error = self.coordinator_error
        else:
            worker.error = ErrorInfo(exc.code, detail, now)
            self.sql_error = worker.error
        logger.warning(
            "replica %s channel %r: applier stopped: %s",
            self.replica.config.hostname,
            self.name,
            self.sql_error.message,
        )

    def _check_timestamps(self, transaction: BinlogTransaction, session: Session) -> None:
        """WL#7319 F6: one warning when original > immediate, one when back to normal."""
        binlog = self.replica.binlog
        immediate = self._now_us()
        if binlog is not None and binlog.current.transactions:
            last = binlog.current.transactions[-1]
            if last.gtid == transaction.gtid:
                immediate = last.immediate_commit_timestamp
        original = transaction.original_commit_timestamp
        if original > immediate and not self.timestamps_warning_logged:
            self.error_log.write(
                immediate, session.connection_id, "Warning", LogCode.INVALID_REPLICATION_TIMESTAMPS
            )
            self.timestamps_warning_logged = True
        elif self.timestamps_warning_logged and original <= immediate:
            self.error_log.write(
                immediate,
                session.connection_id,
                "Warning",
                LogCode.RPL_TIMESTAMPS_RETURNED_TO_NORMAL,
            )
            self.timestamps_warning_logged = False


class _Fatal(Exception):
    """The receiver cannot go on (the I/O thread stops with this error)."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(number, message)
        self.number = number
        self.message = message
