"""Delayed replication (WL#7318): ``SOURCE_DELAY`` / ``MASTER_DELAY``, reference §6.2.

The applier waits per transaction, at its GTID event, until ``SOURCE_DELAY`` seconds after
the transaction committed on the *immediate* source::

    sql_delay_end = ceil(immediate_commit_timestamp / 1e6) + SOURCE_DELAY

(``sql/rpl_replica.cc sql_delay_event()``).  A transaction without commit timestamps (from a
5.7 source) ends its delay at its event time, which is the source's clock, plus the replica's
clock difference with that source (``clock_diff_with_master``: replica time minus source time,
taken when the receiver connects), plus ``SOURCE_DELAY``.  While waiting, ``REMAINING_DELAY`` /
``SQL_Remaining_Delay`` is ``max(0, sql_delay_end - now)`` in whole seconds; otherwise NULL.
The configured value survives START/STOP REPLICA; RESET REPLICA sets it back to 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from consistent.emulator.errors import SqlError, parse_error
from consistent.errnos import ER

if TYPE_CHECKING:
    from consistent.emulator.binlog import BinlogTransaction

__all__ = [
    "MAX_SOURCE_DELAY",
    "WAITING_FOR_DELAY",
    "check_delay",
    "remaining_delay",
    "sql_delay_end",
]

#: The largest ``SOURCE_DELAY`` (``MASTER_DELAY_MAX``): 2^31 - 1 seconds.
MAX_SOURCE_DELAY: Final = 2**31 - 1
#: The applier's stage while it waits (``stage_sql_delay``, 8.0.26+ wording).
WAITING_FOR_DELAY: Final = "Waiting until SOURCE_DELAY seconds after source executed event"

_US: Final = 1_000_000


def check_delay(text: str) -> int:
    """The value of ``SOURCE_DELAY = text``: 0..2^31-1.

    As in ``rpl_delayed_slave.result``: ``-1`` and ``blah`` are parse errors (1064; the
    grammar only takes an unsigned number), ``2147483648`` is 1729.
    """
    stripped = text.strip()
    if not stripped.isdigit():
        raise parse_error(text)
    value = int(stripped)
    if value > MAX_SOURCE_DELAY:
        raise SqlError(
            ER.MASTER_DELAY_VALUE_OUT_OF_RANGE,
            f"The requested value {value} for the master delay exceeds the maximum "
            f"{MAX_SOURCE_DELAY}",
            "HY000",
        )
    return value


def sql_delay_end(transaction: BinlogTransaction, delay: int, clock_diff: int = 0) -> int:
    """When (whole seconds since the epoch, replica clock) the applier may execute
    ``transaction``; ``clock_diff`` is the replica's clock minus its source's, in seconds."""
    immediate = transaction.immediate_commit_timestamp
    if immediate > 0:
        return -(-immediate // _US) + delay  # ceil without float rounding
    event_time = next((s.timestamp for s in transaction.statements if s.timestamp), 0.0)
    return int(event_time or 0) + clock_diff + delay


def remaining_delay(end: int, now: float) -> int:
    """``REMAINING_DELAY`` while waiting: whole seconds left, never negative."""
    return max(0, end - int(now))
