"""The server error log of an emulated replica: what mysqld writes to its ``.err`` file.

Replication writes messages there that no client sees in a result: WL#7319 F6's warning when
a transaction's original commit timestamp is later than its immediate one (clock skew between
servers) and the note when timestamps are back to normal.  Each entry is also sent to
:mod:`logging`, and ``performance_schema.error_log`` shows them (:mod:`.pfs`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["MESSAGES", "ErrorLog", "LogCode", "LogEntry"]

logger = logging.getLogger(__name__)


class LogCode(IntEnum):
    """Error-log message numbers (shown as ``MY-0nnnnn``).

    https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html
    """

    INVALID_REPLICATION_TIMESTAMPS = 10956
    RPL_TIMESTAMPS_RETURNED_TO_NORMAL = 10957


MESSAGES = {
    LogCode.INVALID_REPLICATION_TIMESTAMPS: (
        "Invalid replication timestamps: original commit timestamp is more recent than the "
        "immediate commit timestamp. This may be an issue if delayed replication is active. "
        "Make sure that servers have their clocks set to the correct time. No further message "
        "will be emitted until after timestamps become valid again."
    ),
    LogCode.RPL_TIMESTAMPS_RETURNED_TO_NORMAL: (
        "The replication timestamps have returned to normal values."
    ),
}


@dataclass(frozen=True)
class LogEntry:
    """One line of the error log (the columns of ``performance_schema.error_log``)."""

    logged: int
    """µs since the epoch."""
    thread_id: int
    prio: str
    code: int
    subsystem: str
    data: str

    @property
    def error_code(self) -> str:
        """``MY-010956`` form."""
        return f"MY-{self.code:06d}"


class ErrorLog:
    """The entries of one server, oldest first, bounded to the newest ``capacity``."""

    def __init__(self, server_name: str, capacity: int = 10_000) -> None:
        self.server_name = server_name
        self.capacity = capacity
        self.entries: list[LogEntry] = []

    def write(self, logged_us: int, thread_id: int, prio: str, code: LogCode) -> LogEntry:
        """Append the message of ``code``."""
        entry = LogEntry(logged_us, thread_id, prio, int(code), "Server", MESSAGES[code])
        self.entries.append(entry)
        del self.entries[: -self.capacity]
        logger.warning("%s [%s] [%s] %s", self.server_name, prio, entry.error_code, entry.data)
        return entry

    def with_code(self, code: LogCode) -> list[LogEntry]:
        """The entries of one message number."""
        return [e for e in self.entries if e.code == code]
