"""SQLAlchemy's dialect compliance suite: the same selection runs on every URL.

One test helper is taught our drivers' names: ``ServerSideCursorsTest._is_server_side`` knows
server-side cursors only by driver (``pymysql``, ``aiomysql``…), so for ``consistent`` it asks
the cursor class whether it streams, and for ``consistent_async`` it asks SQLAlchemy's asyncio
adapter, as it does for ``aiomysql``.  Every other driver gets SQLAlchemy's answer unchanged.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.testing.suite import *  # noqa: F403
from sqlalchemy.testing.suite import ServerSideCursorsTest as _ServerSideCursorsTest


class ServerSideCursorsTest(_ServerSideCursorsTest):
    def _is_server_side(self, cursor: Any) -> bool:
        if self.engine.dialect.driver == "consistent":
            return bool(getattr(cursor, "unbuffered", False))
        if self.engine.dialect.driver == "consistent_async":
            return bool(cursor.server_side)
        return bool(super()._is_server_side(cursor))
