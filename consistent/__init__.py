"""consistent: session-consistency middleware for MySQL and MariaDB replication.

Reads go to replicas only once they are safe under the session's consistency level, using the
GTIDs that the server reports in each OK packet (``session_track_gtids`` on MySQL, ``last_gtid``
on MariaDB) and the replica-side wait functions (``WAIT_FOR_EXECUTED_GTID_SET`` /
``MASTER_GTID_WAIT``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consistent.dbapi import Connection
    from consistent.policy import ReplicaKnowledge
    from consistent.telemetry import Telemetry

__version__ = "0.1.0"

__all__ = ["__version__", "connect"]


def connect(
    dsn: str | None = None,
    *,
    knowledge: ReplicaKnowledge | None = None,
    cursorclass: type[Any] | None = None,
    telemetry: Telemetry | None = None,
    **kwargs: Any,
) -> Connection:
    """Open a consistent DB-API connection; see :func:`consistent.dbapi.connect`.

    Imported lazily so that ``import consistent`` stays light for the emulator, the proxy and
    the analytics, which do not need PyMySQL.
    """
    from consistent import dbapi  # noqa: PLC0415 - deliberate lazy import

    return dbapi.connect(
        dsn, knowledge=knowledge, cursorclass=cursorclass, telemetry=telemetry, **kwargs
    )
