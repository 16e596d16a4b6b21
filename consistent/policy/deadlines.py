"""How long a server may keep a session waiting: the deadlines both forms put on every backend
connection, and the background monitor's rhythm.

Part of the driver plan (DESIGN "Architecture"): the DB-API wrapper and the proxy take their
defaults, their validation and the wait statement's socket deadline from here, so that a frozen
or silent server costs the same in both.

A deadline is a limit on silence, as a socket timeout is: a read deadline is the longest a
server may leave a request unanswered (or pause in the middle of an answer), a write deadline
the longest it may leave our bytes unsent.  A long result that keeps streaming never misses one.
What happens on a miss is the policy's business (``SessionPolicy.on_error``): the connection is
dropped, a replica is marked unhealthy and a read outside a transaction is sent elsewhere once;
everything else gets error 2013 (``CR_SERVER_LOST``) and is never re-sent.

Defaults, chosen for OLTP traffic and documented in the README:

* replicas: read deadline :data:`DEFAULT_REPLICA_READ_TIMEOUT` (a read that takes longer is
  retried elsewhere, so a long report on a replica needs a larger ``replica_read_timeout``);
* the primary: :data:`DEFAULT_READ_TIMEOUT` (a longer statement, an ``ALTER TABLE`` on a big
  table say, needs a larger ``read_timeout``, or ``0`` for none);
* both: write deadline :data:`DEFAULT_WRITE_TIMEOUT`.

The wait statement (``WAIT_FOR_EXECUTED_GTID_SET`` / ``MASTER_GTID_WAIT``) legitimately stays
silent for up to its own timeout: its read deadline is :func:`wait_deadline`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from consistent.errors import InterfaceError

__all__ = [
    "DEFAULT_MONITOR_INTERVAL",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_REPLICA_READ_TIMEOUT",
    "DEFAULT_WRITE_TIMEOUT",
    "WAIT_SOCKET_MARGIN",
    "Deadlines",
    "monitor_poll_timeout",
    "parse_deadline",
    "wait_deadline",
]

#: Seconds a replica may stay silent on a read before the read goes elsewhere.
DEFAULT_REPLICA_READ_TIMEOUT: Final = 5.0
#: Seconds the primary may stay silent on a statement before the client gets 2013.
DEFAULT_READ_TIMEOUT: Final = 30.0
#: Seconds any server may leave our bytes unsent.
DEFAULT_WRITE_TIMEOUT: Final = 30.0
#: Extra seconds the socket waits for a wait statement's answer beyond its own timeout.
WAIT_SOCKET_MARGIN: Final = 1.0
#: Seconds between two polls of one server by the background monitor.
DEFAULT_MONITOR_INTERVAL: Final = 0.2
# A monitor poll is one tiny SELECT: it may take this long, or five intervals, whichever is more.
_MIN_POLL_TIMEOUT: Final = 2.0


def parse_deadline(label: str, value: object) -> float | None:
    """A deadline in seconds from configuration: a positive number, or ``None`` / ``0`` for
    none.  :class:`InterfaceError` naming ``label`` for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InterfaceError(f"{label} must be a number of seconds, not {value!r}")
    if value == 0:
        return None
    if not math.isfinite(value) or value < 0:
        raise InterfaceError(f"{label} must be positive (or 0 for none), not {value!r}")
    return float(value)


def wait_deadline(wait_timeout: float) -> float:
    """The read deadline of a wait statement that may take ``wait_timeout`` seconds."""
    return wait_timeout + WAIT_SOCKET_MARGIN


def monitor_poll_timeout(interval: float) -> float:
    """How long one monitor poll may take before the server counts as unreachable."""
    return max(_MIN_POLL_TIMEOUT, 5 * interval)


@dataclass(frozen=True, slots=True)
class Deadlines:
    """The deadlines of one form's backend connections (``None``: no deadline)."""

    #: Read deadline on replica connections.
    replica_read: float | None = DEFAULT_REPLICA_READ_TIMEOUT
    #: Read deadline on primary connections.
    read: float | None = DEFAULT_READ_TIMEOUT
    #: Write deadline on every connection.
    write: float | None = DEFAULT_WRITE_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("replica_read", "read", "write"):
            object.__setattr__(self, name, parse_deadline(f"{name}_timeout", getattr(self, name)))

    def read_for(self, *, replica: bool) -> float | None:
        """The read deadline of a connection to a replica or to the primary."""
        return self.replica_read if replica else self.read
