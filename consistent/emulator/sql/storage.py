"""SQLite underneath: one data file per server, one connection per session.

The file is in WAL mode, so readers see the last committed state while a writer works, and
an uncommitted change stays invisible to other sessions.  SQLite allows one writer at a time;
the :class:`Storage` write lock (an :class:`asyncio.Lock`) serialises writers at the
emulator level, so a second writer *awaits* the first one's commit like an InnoDB lock wait
(``innodb_lock_wait_timeout``, error 1205) instead of blocking the event loop.

A session connection moves through three states: no SQLite transaction, a read snapshot
(``BEGIN``, taken when a MySQL transaction first reads), and a write transaction
(``BEGIN IMMEDIATE`` under the write lock).  Upgrading from a snapshot to writing ends the
snapshot first, so writes always apply to the latest committed data, as InnoDB's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import Callable
from enum import Enum

from consistent.emulator.sql.catalog import quote_ident

__all__ = ["SessionStore", "Storage", "TxMode", "WriterLock"]


class TxMode(Enum):
    """SQLite transaction state of a session connection."""

    NONE = "none"
    READ = "read"
    WRITE = "write"


class WriterLock:
    """A first-come first-served lock that is taken without awaiting when it is free.

    Like :class:`asyncio.Lock`, but :meth:`try_acquire` takes a free lock synchronously (a
    writer that finds no other writer must not pay for a task and a wait), and
    :meth:`release` hands the lock straight to the longest waiter.
    """

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        """Whether someone holds the lock."""
        return self._locked

    def try_acquire(self) -> bool:
        """Take the lock if it is free and nobody waits for it."""
        if self._locked or self._waiters:
            return False
        self._locked = True
        return True

    async def acquire(self) -> None:
        """Take the lock, waiting behind earlier waiters."""
        if self.try_acquire():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed over just before the cancellation: pass it on
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(future)

    def release(self) -> None:
        """Give the lock to the first waiter still waiting, or free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._locked = False


class Storage:
    """The data file of one server and its writer lock."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = WriterLock()
        self.writer: object | None = None
        bootstrap = self.connect()
        bootstrap.execute("PRAGMA journal_mode=WAL")
        bootstrap.close()

    def connect(self) -> sqlite3.Connection:
        """A new connection in manual-transaction mode."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def try_acquire(self, owner: object) -> bool:
        """Take the writer lock for ``owner`` if nobody holds it or waits for it."""
        if self.writer is owner:
            return True
        if not self.lock.try_acquire():
            return False
        self.writer = owner
        return True

    async def acquire(self, owner: object, timeout: float | None) -> None:
        """Take the writer lock for ``owner``; TimeoutError after ``timeout`` seconds."""
        if self.writer is owner:
            return
        if timeout is None:
            await self.lock.acquire()
        else:
            await asyncio.wait_for(self.lock.acquire(), timeout)
        self.writer = owner

    def release(self, owner: object) -> None:
        """Give the writer lock back (no-op if ``owner`` does not hold it)."""
        if self.writer is owner:
            self.writer = None
            self.lock.release()


class SessionStore:
    """One session's SQLite connection and its transaction state."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.conn = storage.connect()
        self.writes = self.conn.cursor()
        """A cursor for statements whose rows nobody reads (transaction control, the GTID
        row): ``conn.execute`` would make a new cursor for each."""
        self.mode = TxMode.NONE
        self.savepoints: list[str] = []

    def close(self) -> None:
        """Roll back whatever is open and close the connection."""
        self.rollback()
        self.conn.close()

    def begin_read(self, *, snapshot_now: bool = False) -> None:
        """Open a read transaction if none is open; its snapshot is taken at the first read
        (as InnoDB's), or right away with ``snapshot_now`` (WITH CONSISTENT SNAPSHOT)."""
        if self.mode is TxMode.NONE:
            self.writes.execute("BEGIN")
            self.mode = TxMode.READ
            if snapshot_now:
                self.conn.execute("SELECT COUNT(*) FROM main.sqlite_master").fetchone()

    async def begin_write(
        self, timeout: float | None, wait: Callable[[asyncio.Future[None]], object] | None = None
    ) -> None:
        """Make this connection the writer (waits for the lock; TimeoutError on timeout)."""
        if self.mode is TxMode.WRITE:
            return
        await self.storage.acquire(self, timeout)
        self._write_locked()

    def try_begin_write(self) -> bool:
        """:meth:`begin_write` if the writer lock is free right now; False (nothing done)
        when it would have to wait."""
        if self.mode is TxMode.WRITE:
            return True
        if not self.storage.try_acquire(self):
            return False
        self._write_locked()
        return True

    def _write_locked(self) -> None:
        if self.mode is TxMode.READ:
            self.writes.execute("COMMIT")
        self.writes.execute("BEGIN IMMEDIATE")
        self.mode = TxMode.WRITE
        for name in self.savepoints:
            self.writes.execute(f"SAVEPOINT {quote_ident(name)}")

    def commit(self) -> None:
        """Commit the SQLite transaction (if any) and release the writer lock."""
        if self.mode is not TxMode.NONE:
            self.writes.execute("COMMIT")
        self._end()

    def rollback(self) -> None:
        """Roll back the SQLite transaction (if any) and release the writer lock."""
        if self.mode is not TxMode.NONE:
            with contextlib.suppress(sqlite3.OperationalError):
                self.writes.execute("ROLLBACK")
        self._end()

    def _end(self) -> None:
        self.mode = TxMode.NONE
        self.savepoints.clear()
        self.storage.release(self)

    def savepoint(self, name: str) -> None:
        """SAVEPOINT (replacing one of the same name, as MySQL does)."""
        if self.mode is TxMode.NONE:
            self.begin_read()
        if name in self.savepoints:
            self.release_savepoint(name)
        self.writes.execute(f"SAVEPOINT {quote_ident(name)}")
        self.savepoints.append(name)

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TO SAVEPOINT: later savepoints disappear, this one stays."""
        self.writes.execute(f"ROLLBACK TO {quote_ident(name)}")
        del self.savepoints[self.savepoints.index(name) + 1 :]

    def release_savepoint(self, name: str) -> None:
        """RELEASE SAVEPOINT: this one and later ones disappear."""
        self.writes.execute(f"RELEASE {quote_ident(name)}")
        del self.savepoints[self.savepoints.index(name) :]
