"""consistent: session-consistency middleware for MySQL and MariaDB replication.

Reads go to replicas only once they are safe under the session's consistency level, using the
GTIDs that the server reports in each OK packet (``session_track_gtids`` on MySQL, ``last_gtid``
on MariaDB) and the replica-side wait functions (``WAIT_FOR_EXECUTED_GTID_SET`` /
``MASTER_GTID_WAIT``).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
