"""Session state that follows the session onto replica connections.

``USE``, ``SET NAMES`` and session variables run on the primary when the application sends them;
a replica connection opened or reused later must be brought to the same state before it runs a
statement of the session.  The log keeps one statement per setting (the latest), numbered, so a
connection remembers the number it reached and replays only what came after.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SCHEMA_KEY", "SessionStateLog"]

#: The log key of the default schema (no variable can be named so: ``@`` is not allowed).
SCHEMA_KEY = "@schema"


class SessionStateLog:
    """Latest replay statement per setting, in the order the settings last changed."""

    __slots__ = ("_entries", "_seq")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, str]] = {}
        self._seq = 0

    @property
    def seq(self) -> int:
        """Number of the newest entry (0 when empty)."""
        return self._seq

    def record(self, key: str, sql: str) -> None:
        """``sql`` re-applies setting ``key``; it replaces the setting's earlier statement."""
        self._seq += 1
        self._entries.pop(key, None)
        self._entries[key] = (self._seq, sql)

    def record_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Record several ``(key, sql)`` settings in order."""
        for key, sql in items:
            self.record(key, sql)

    def since(self, seq: int) -> tuple[tuple[str, ...], int]:
        """The statements a connection that reached ``seq`` must run, in order, and the number
        it reaches by running them."""
        if seq >= self._seq:
            return (), seq
        return tuple(sql for n, sql in self._entries.values() if n > seq), self._seq

    def clear(self) -> None:
        """Forget everything (connection reset).  Numbers keep growing so that a connection
        that applied old entries is not mistaken for one that applied new ones."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def quote_schema(schema: str) -> str:
    """``USE`` statement for ``schema`` with the name quoted as an identifier."""
    return "USE `" + schema.replace("`", "``") + "`"
