"""The binary log of one emulated server: files of committed transactions.

Each committed transaction that changed data (or any DDL) is appended as one
:class:`BinlogTransaction`, carrying what a ``Gtid_log_event`` carries (GTID, original and
immediate commit timestamps in microseconds, server versions, logical clock) and the statements
to replay it.  A replication applier reads these, and restart recovery takes the GTIDs of the
files (``gtid_executed`` = ``mysql.gtid_executed`` ∪ GTIDs in the binary log).

Statements are logged as SQL text with the context a statement-based replica needs (default
schema, ``@@timestamp`` and the auto-increment value the statement started from).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from consistent.emulator.config import version_number
from consistent.gtid import Gtid, GtidSet

__all__ = [
    "UNDEFINED_COMMIT_TIMESTAMP",
    "BinaryLog",
    "BinlogFile",
    "BinlogStatement",
    "BinlogTransaction",
    "server_version_number",
]

#: ``@@original_commit_timestamp`` when no value was set: 2^55 (``UNDEFINED_COMMIT_TIMESTAMP``).
UNDEFINED_COMMIT_TIMESTAMP = 1 << 55

# Bytes a fresh file holds before its first transaction: the magic number, a
# Format_description_log_event and a Previous_gtids_log_event of an 8.0 server.
_HEADER_BYTES = 4 + 122 + 31
# Fixed part of a Gtid_log_event plus Query_log_event BEGIN / Xid_log_event COMMIT.
_TRANSACTION_OVERHEAD = 79 + 75 + 31


def server_version_number(version: str) -> int:
    """``8.0.36-…`` → 80036, as ``do_server_version_int`` computes it."""
    return version_number(version)


@dataclass(frozen=True)
class BinlogStatement:
    """One logged statement with the session context needed to replay it."""

    sql: str
    database: str | None = None
    timestamp: float | None = None
    insert_id: int | None = None


@dataclass(frozen=True)
class BinlogTransaction:
    """One transaction as the binary log records it (``Gtid_log_event`` + its events).

    ``gtid`` is ``None`` for an anonymous transaction (``gtid_mode=OFF``).  Timestamps are
    microseconds since the epoch, UTC (WL#7319).
    """

    gtid: Gtid | None
    statements: tuple[BinlogStatement, ...]
    original_commit_timestamp: int
    immediate_commit_timestamp: int
    original_server_version: int
    immediate_server_version: int
    server_id: int
    last_committed: int = 0
    sequence_number: int = 0
    is_ddl: bool = False
    xa: bool = False
    """An XA transaction's part (``XA START`` … ``XA PREPARE``, ``XA COMMIT``…): an applier
    runs its statements as they are, without BEGIN/COMMIT around them."""

    @functools.cached_property
    def size(self) -> int:
        """Approximate size in bytes of the transaction's events, for file positions."""
        return _TRANSACTION_OVERHEAD + sum(len(s.sql.encode()) + 60 for s in self.statements)


@dataclass
class BinlogFile:
    """One binary log file: its name, the GTIDs before it, and its transactions."""

    name: str
    previous_gtids: GtidSet
    transactions: list[BinlogTransaction] = field(default_factory=list)
    # Running total of the sizes of transactions[:_counted]: a replica asks for the end
    # position after every transaction, and the file only grows.
    _counted: int = field(default=0, init=False, repr=False, compare=False)
    _counted_size: int = field(default=0, init=False, repr=False, compare=False)

    @property
    def size(self) -> int:
        """End position of the file (what ``SHOW BINARY LOGS`` calls File_size)."""
        transactions = self.transactions
        if len(transactions) < self._counted:  # shrunk: count again
            self._counted = self._counted_size = 0
        for index in range(self._counted, len(transactions)):
            self._counted_size += transactions[index].size
        self._counted = len(transactions)
        return _HEADER_BYTES + self._counted_size

    @property
    def gtids(self) -> GtidSet:
        """GTIDs of the transactions in this file."""
        return GtidSet(t.gtid for t in self.transactions if t.gtid is not None)


Listener = Callable[[BinlogTransaction], None]


class BinaryLog:
    """The ordered binary log files of one server."""

    def __init__(self, basename: str = "binlog") -> None:
        self.basename = basename
        self._next_index = 1
        self.files: list[BinlogFile] = []
        self._listeners: list[Listener] = []
        self._sequence_number = 0
        self.open(GtidSet())

    def _file_name(self) -> str:
        name = f"{self.basename}.{self._next_index:06d}"
        self._next_index += 1
        return name

    @property
    def current(self) -> BinlogFile:
        """The file being written."""
        return self.files[-1]

    def open(self, previous_gtids: GtidSet) -> BinlogFile:
        """Start a new file whose Previous_gtids event holds ``previous_gtids``."""
        self.files.append(BinlogFile(self._file_name(), previous_gtids))
        return self.current

    def rotate(self, executed: GtidSet) -> BinlogFile:
        """FLUSH BINARY LOGS: close the current file and open the next one."""
        return self.open(executed)

    def reset(self) -> None:
        """RESET MASTER: delete every file and start again at ``.000001``."""
        self.files.clear()
        self._next_index = 1
        self._sequence_number = 0
        self.open(GtidSet())

    def purge_to(self, name: str) -> bool:
        """PURGE BINARY LOGS TO ``name``: drop the files before it; False if unknown."""
        names = [f.name for f in self.files]
        if name not in names:
            return False
        del self.files[: names.index(name)]
        return True

    def next_sequence_number(self) -> int:
        """The logical-clock sequence number of the next transaction."""
        self._sequence_number += 1
        return self._sequence_number

    def append(self, transaction: BinlogTransaction) -> None:
        """Write one committed transaction and tell the listeners (dump threads)."""
        self.current.transactions.append(transaction)
        if self._listeners:
            for listener in list(self._listeners):
                listener(transaction)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every appended transaction; returns the unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    @property
    def gtids(self) -> GtidSet:
        """GTIDs of every transaction still in the binary log."""
        result = GtidSet()
        for file in self.files:
            result = result | file.gtids
        return result

    def transactions(self) -> Iterator[BinlogTransaction]:
        """Every transaction in log order."""
        for file in self.files:
            yield from file.transactions

    def transactions_missing_from(self, executed: GtidSet) -> Iterator[BinlogTransaction]:
        """Transactions a replica with ``executed`` still needs (GTID auto-positioning)."""
        for transaction in self.transactions():
            if transaction.gtid is None or transaction.gtid not in executed:
                yield transaction
