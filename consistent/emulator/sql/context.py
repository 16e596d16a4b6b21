"""What the SQL layer needs from the session that runs a statement.

The SQL modules are written against this protocol so they do not import the session, and a
test can drive them with a stub.
"""

from __future__ import annotations

from typing import Protocol

from consistent.emulator.sql.translate import TableRef

__all__ = ["StatementContext"]


class StatementContext(Protocol):
    """The session as seen by the SQL translation of one statement."""

    @property
    def database(self) -> str | None:
        """The default schema."""

    @property
    def user_host(self) -> str:
        """``USER()``: ``user@host``."""

    @property
    def connection_id(self) -> int:
        """``CONNECTION_ID()``."""

    @property
    def last_insert_id(self) -> int:
        """``LAST_INSERT_ID()``."""

    @property
    def row_count(self) -> int:
        """``ROW_COUNT()``."""

    @property
    def found_rows(self) -> int:
        """``FOUND_ROWS()``."""

    @property
    def server_version(self) -> str:
        """``VERSION()``."""

    def resolve_table(self, schema: str | None, name: str) -> TableRef:
        """The table a name refers to (1046 / 1146 when there is none)."""

    def system_variable_value(self, name: str, scope: str | None) -> object:
        """``@@[scope.]name`` as SELECT returns it."""

    def user_variable(self, name: str) -> object:
        """``@name`` (NULL when never set)."""
