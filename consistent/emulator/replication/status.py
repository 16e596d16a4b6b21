"""What each replication stage reports: the WL#7374 transaction fields and last errors.

Every stage of a channel (receiver, coordinator, each worker) keeps one :class:`StageStatus`:
the transaction it is handling now (``QUEUEING_`` / ``PROCESSING_`` / ``APPLYING_TRANSACTION``)
and the last one it finished (``LAST_QUEUED_`` / ``LAST_PROCESSED_`` / ``LAST_APPLIED_``), each a
:class:`TrxStamp` with the GTID, the original and immediate commit timestamps from the
transaction's ``Gtid_log_event`` and the stage's own start/end times (reference §6.1):

* while X is handled, the "now" stamp is X (OCT, ICT, START set; no END) and "last" is the
  previous transaction;
* after X, "now" is empty (``''`` and zero timestamps) and "last" is X with the same OCT, ICT
  and START, plus END >= START;
* on an error the "now" stamp is kept and "last" is not updated.

Timestamps are integers of microseconds since the epoch (0 shows as
``0000-00-00 00:00:00.000000``), so nothing is lost to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from consistent.emulator.binlog import BinlogTransaction

__all__ = ["NO_ERROR", "NO_TRX", "ErrorInfo", "ServiceState", "StageStatus", "TrxStamp"]


@dataclass(frozen=True)
class TrxStamp:
    """One transaction as a stage reports it; all timestamps in µs since the epoch, 0 = none."""

    gtid: str = ""
    original_commit: int = 0
    immediate_commit: int = 0
    start: int = 0
    end: int = 0

    @classmethod
    def of(cls, transaction: BinlogTransaction, start: int) -> TrxStamp:
        """``transaction`` starting now at ``start`` (µs)."""
        gtid = str(transaction.gtid) if transaction.gtid is not None else "ANONYMOUS"
        return cls(
            gtid,
            transaction.original_commit_timestamp,
            transaction.immediate_commit_timestamp,
            start,
        )

    @property
    def empty(self) -> bool:
        """Whether no transaction is shown."""
        return self.gtid == ""


NO_TRX: Final = TrxStamp()


@dataclass
class StageStatus:
    """The "now handling" and "last handled" transactions of one stage."""

    current: TrxStamp = NO_TRX
    last: TrxStamp = NO_TRX

    def begin(self, transaction: BinlogTransaction, now_us: int) -> None:
        """The stage starts handling ``transaction``."""
        self.current = TrxStamp.of(transaction, now_us)

    def finish(self, now_us: int) -> None:
        """The stage is done with the current transaction."""
        if self.current.empty:
            return
        self.last = replace(self.current, end=max(now_us, self.current.start))
        self.current = NO_TRX

    def clear_current(self) -> None:
        """Forget the transaction in progress (restart of the thread)."""
        self.current = NO_TRX

    def clear(self) -> None:
        """Forget both (RESET REPLICA, a new worker)."""
        self.current = NO_TRX
        self.last = NO_TRX


@dataclass(frozen=True)
class ErrorInfo:
    """``LAST_ERROR_NUMBER`` / ``_MESSAGE`` / ``_TIMESTAMP`` (µs; 0 = never)."""

    number: int = 0
    message: str = ""
    timestamp: int = 0


NO_ERROR: Final = ErrorInfo()


class ServiceState(Enum):
    """``SERVICE_STATE`` of performance_schema's replication tables."""

    ON = "ON"
    OFF = "OFF"
    CONNECTING = "CONNECTING"
