"""SQLAlchemy's dialect compliance suite: the same selection runs on every URL.

One test helper is taught our driver's name: ``ServerSideCursorsTest._is_server_side`` knows
server-side cursors only by driver (``pymysql``, ``mysqldb``…), so for ``consistent`` it asks
the cursor class whether it streams.  Every other driver gets SQLAlchemy's answer unchanged.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.testing.suite import *  # noqa: F403
from sqlalchemy.testing.suite import ServerSideCursorsTest as _ServerSideCursorsTest


class ServerSideCursorsTest(_ServerSideCursorsTest):
    def _is_server_side(self, cursor: Any) -> bool:
        if self.engine.dialect.driver == "consistent":
            return bool(getattr(cursor, "unbuffered", False))
        return bool(super()._is_server_side(cursor))
