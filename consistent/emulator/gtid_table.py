"""``mysql.gtid_executed`` (WL#6559): the table that keeps GTIDs durable, and its compression.

The functions here work on a SQLite connection the caller has put in a transaction, so the
same code writes a GTID inside a committing transaction (binary log off), saves a whole set at
rotation, and compresses the table.  The compression follows ``sql/rpl_gtid_persist.cc``:
``compress()`` repeats ``compress_in_single_transaction()`` until the scan reaches the end, and
each transaction merges only the *first* run of consecutive rows of one UUID (reference §4).

:class:`GtidTableCompressor` is the ``thread/sql/compress_gtid_table`` background thread as an
asyncio task.  It is signalled at start, after every rotation save, and when the number of
single-GTID saves reaches ``gtid_executed_compression_period``.

``tagged`` is the table of 8.3 and later: a ``gtid_tag`` column in the primary key
(``source_uuid, gtid_tag, interval_start``), ``''`` for untagged GTIDs.  Rows are handled as
``(source, start, end)`` where the source is ``uuid`` or ``uuid:tag``, which sorts as the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from consistent.gtid import Gtid, GtidSet

__all__ = [
    "COMPRESSOR_THREAD_NAME",
    "GTID_TABLE",
    "STAGE_COMPRESSING",
    "STAGE_SUSPENDING",
    "GtidTableCompressor",
    "compress",
    "compress_first_consecutive_range",
    "create_table",
    "delete_all",
    "fetch_gtids",
    "insert_gtid",
    "insert_set",
    "table_rows",
]

logger = logging.getLogger(__name__)

#: The SQLite name of ``mysql.gtid_executed`` in the emulator's data file.
GTID_TABLE: Final = '"mysql.gtid_executed"'
COMPRESSOR_THREAD_NAME: Final = "thread/sql/compress_gtid_table"
STAGE_SUSPENDING: Final = "Suspending"
STAGE_COMPRESSING: Final = "Compressing gtid_executed table"

T = TypeVar("T")
Row = tuple[str, int, int]


def create_table(conn: sqlite3.Connection, *, tagged: bool = False) -> None:
    """Create the table if missing: ``source_uuid CHAR(36), interval_start BIGINT,
    interval_end BIGINT, PRIMARY KEY (source_uuid, interval_start)`` (8.0 layout), or with
    ``gtid_tag CHAR(32)`` after them and in the key (8.3+)."""
    if tagged:
        columns = ", gtid_tag TEXT NOT NULL, PRIMARY KEY (source_uuid, gtid_tag, interval_start)"
    else:
        columns = ", PRIMARY KEY (source_uuid, interval_start)"
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {GTID_TABLE} ("
        "source_uuid TEXT NOT NULL, interval_start INTEGER NOT NULL, "
        f"interval_end INTEGER NOT NULL{columns}) WITHOUT ROWID, STRICT"
    )


def _values(uuid: str, tag: str | None, start: int, end: int, tagged: bool) -> tuple[object, ...]:
    return (uuid, start, end, tag or "") if tagged else (uuid, start, end)


_INSERT_UNTAGGED: Final = f"INSERT OR IGNORE INTO {GTID_TABLE} VALUES (?, ?, ?)"
_INSERT_TAGGED: Final = f"INSERT OR IGNORE INTO {GTID_TABLE} VALUES (?, ?, ?, ?)"


def _insert_sql(tagged: bool) -> str:
    return _INSERT_TAGGED if tagged else _INSERT_UNTAGGED


def insert_gtid(
    conn: sqlite3.Connection | sqlite3.Cursor, gtid: Gtid, *, tagged: bool = False
) -> None:
    """Save one GTID as a one-transaction interval (``Gtid_table_persistor::save(thd, gtid)``).

    A duplicate key is ignored, as mysqld does (it only logs a warning)."""
    conn.execute(_insert_sql(tagged), _values(gtid.uuid, gtid.tag, gtid.gno, gtid.gno, tagged))


def insert_set(conn: sqlite3.Connection, gtids: GtidSet, *, tagged: bool = False) -> None:
    """Save every interval of ``gtids`` as one row (``save(Gtid_set*)``)."""
    conn.executemany(
        _insert_sql(tagged),
        [_values(uuid, tag, start, end, tagged) for uuid, tag, start, end in gtids.intervals()],
    )


def table_rows(conn: sqlite3.Connection, *, tagged: bool = False) -> list[Row]:
    """All rows in primary-key order, as ``(source, start, end)``."""
    if tagged:
        cursor = conn.execute(
            f"SELECT source_uuid, gtid_tag, interval_start, interval_end FROM {GTID_TABLE} "
            "ORDER BY source_uuid, gtid_tag, interval_start"
        )
        return [(f"{u}:{t}" if t else str(u), int(s), int(e)) for u, t, s, e in cursor.fetchall()]
    cursor = conn.execute(
        f"SELECT source_uuid, interval_start, interval_end FROM {GTID_TABLE} "
        "ORDER BY source_uuid, interval_start"
    )
    return [(str(u), int(s), int(e)) for u, s, e in cursor.fetchall()]


def _split(source: str) -> tuple[str, str | None]:
    uuid, _, tag = source.partition(":")
    return uuid, tag or None


def fetch_gtids(conn: sqlite3.Connection, *, tagged: bool = False) -> GtidSet:
    """The set the table holds (``fetch_gtids``), overlapping rows merged."""
    intervals: dict[tuple[str, str | None], list[tuple[int, int]]] = {}
    for source, start, end in table_rows(conn, tagged=tagged):
        intervals.setdefault(_split(source), []).append((start, end))
    return GtidSet.from_intervals(intervals)


def delete_all(conn: sqlite3.Connection) -> None:
    """Delete every row (RESET MASTER); a DELETE, not a TRUNCATE, as in mysqld."""
    conn.execute(f"DELETE FROM {GTID_TABLE}")


def compress_first_consecutive_range(conn: sqlite3.Connection, *, tagged: bool = False) -> bool:
    """Merge the first run of consecutive rows; returns whether the scan reached the end.

    Scans in primary-key order.  A row continues the run when it has the same source as the
    previous row and starts right after its end; continuation rows are deleted and the run's
    first row gets the run's end.  Overlapping rows and other sources end the run.
    """
    sid = ""
    gno_start = 0
    gno_end = 0
    found = False
    complete = True
    to_delete: list[tuple[str, int]] = []
    for cur_sid, cur_start, cur_end in table_rows(conn, tagged=tagged):
        if sid == cur_sid and gno_end + 1 == cur_start:
            found = True
            gno_end = cur_end
            to_delete.append((cur_sid, cur_start))
        else:
            if found:
                complete = False
                break
            sid, gno_start, gno_end = cur_sid, cur_start, cur_end
    if found:
        key = "source_uuid = ? AND gtid_tag = ?" if tagged else "source_uuid = ?"

        def where(source: str, start: int) -> tuple[object, ...]:
            uuid, tag = _split(source)
            return (uuid, tag or "", start) if tagged else (uuid, start)

        conn.executemany(
            f"DELETE FROM {GTID_TABLE} WHERE {key} AND interval_start = ?",
            [where(source, start) for source, start in to_delete],
        )
        conn.execute(
            f"UPDATE {GTID_TABLE} SET interval_end = ? WHERE {key} AND interval_start = ?",
            (gno_end, *where(sid, gno_start)),
        )
    return complete


def compress(conn: sqlite3.Connection, *, tagged: bool = False) -> int:
    """Compress completely in one go (each round in the caller's transaction); returns the
    number of rounds.  The background thread runs one round per transaction instead."""
    rounds = 1
    while not compress_first_consecutive_range(conn, tagged=tagged):
        rounds += 1
    return rounds


RunTransaction = Callable[[Callable[[sqlite3.Connection], T]], Awaitable[T]]


class GtidTableCompressor:
    """The ``compress_gtid_table`` thread: waits for a signal, then compresses the table.

    ``run_transaction(fn)`` must run ``fn(conn)`` in its own write transaction of the server's
    data file and commit it.
    """

    def __init__(
        self, run_transaction: RunTransaction[bool], thread_id: int, *, tagged: bool = False
    ) -> None:
        self._run_transaction = run_transaction
        self._tagged = tagged
        self.thread_id = thread_id
        self.stage = STAGE_SUSPENDING
        self.compressions = 0
        self._count = 0
        self._signal = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the task is alive (it then shows in ``performance_schema.threads``)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the task; like mysqld it compresses once at start."""
        if self.running:
            return
        self._task = asyncio.get_running_loop().create_task(self._main(), name="compress_gtid")
        self.signal()

    async def stop(self) -> None:
        """Terminate the task and wait for it."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.stage = STAGE_SUSPENDING
        self._idle.set()

    def signal(self) -> None:
        """Ask for a compression (``should_compress = true``)."""
        self._idle.clear()
        self._signal.set()

    def note_saved(self, period: int) -> None:
        """Count one single-GTID save; signal when the pre-increment count equals ``period``."""
        if period == 0:
            return
        count = self._count
        self._count += 1
        if count == period:
            self.signal()

    async def wait_idle(self) -> None:
        """Return once no compression is pending or running."""
        await self._idle.wait()

    def _compress_round(self, conn: sqlite3.Connection) -> bool:
        return compress_first_consecutive_range(conn, tagged=self._tagged)

    async def _main(self) -> None:
        while True:
            self.stage = STAGE_SUSPENDING
            if not self._signal.is_set():
                self._idle.set()
            await self._signal.wait()
            self._signal.clear()
            self.stage = STAGE_COMPRESSING
            try:
                complete = False
                while not complete:
                    complete = await self._run_transaction(self._compress_round)
                self.compressions += 1
            except (sqlite3.Error, OSError):
                logger.warning("Failed to compress the gtid_executed table.", exc_info=True)
            self._count = 0
