"""What the blocking and the asyncio connections share above the session core: reading the
primary's driver connection without I/O (its ids, version, protocol, encoding, counters),
the checks of some arguments, and attaching the background monitor.

:class:`ConnectionBase` is :class:`~consistent.dbapi.core.SessionCore` plus these; each form's
``Connection`` (:mod:`consistent.dbapi.connection`, :mod:`consistent.aio.connection`) inherits
it and adds the methods that talk to the servers, blocking or awaited.
"""

from __future__ import annotations

from typing import Any, Protocol

from consistent import errors
from consistent.dbapi import _pymysql
from consistent.dbapi.core import NOT_CONNECTED, Link, SessionCore
from consistent.dbapi.monitor import process_monitors

__all__ = ["ConnectionBase"]


class _ServerLink(Link, Protocol):
    @property
    def options(self) -> dict[str, Any]:
        """The PyMySQL keywords that reach the server (the monitor connects with them)."""


class ConnectionBase(SessionCore):
    """The session core plus what both connection forms read from the primary's connection."""

    _primary: _ServerLink
    _escaper: Any

    # ------------------------------------------------------------------ properties

    @property
    def open(self) -> bool:
        """True until closed (or until the primary connection was lost)."""
        return not self._closed and self._lost is None and self._primary.connected

    @property
    def _needs_reopen(self) -> bool:
        """Closed, lost, or without an open primary connection: what ``ping(reconnect=True)``
        opens again."""
        return self._closed or self._lost is not None or not self._primary.connected

    @property
    def server_version(self) -> str:
        """The primary's version string."""
        return self.get_server_info()

    @property
    def encoding(self) -> str:
        """The Python codec of the connection character set (the driver's attribute)."""
        raw = self._primary.raw
        if raw is None:
            raise errors.InterfaceError(0, NOT_CONNECTED)
        return str(raw.encoding)

    # ------------------------------------------------------------------ the primary's connection

    def _open_primary(self) -> Any:
        """The primary's driver connection, the logical connection being open."""
        self._check_open()
        raw = self._primary.raw
        assert raw is not None
        return raw

    def insert_id(self) -> int:
        """``LAST_INSERT_ID`` of the last statement on the primary."""
        raw = self._primary.raw
        return int(raw.insert_id() or 0) if raw is not None else 0

    def thread_id(self) -> int:
        """The primary connection's server thread id."""
        raw = self._primary.raw
        return int(raw.thread_id()) if raw is not None else 0

    def get_server_info(self) -> str:
        """The primary's version string."""
        raw = self._primary.raw
        return str(raw.get_server_info()) if raw is not None else ""

    def get_host_info(self) -> str:
        """How the primary connection is made (``"socket host:port"``), as the driver says."""
        raw = self._primary.raw
        return str(raw.get_host_info()) if raw is not None else "Not connected"

    def get_proto_info(self) -> int:
        """The primary's protocol version, as the driver says."""
        raw = self._primary.raw
        return int(raw.get_proto_info()) if raw is not None else 0

    def affected_rows(self) -> int:
        """Rows the last cursor statement affected (or returned), on the server that ran it,
        as the driver's method reports them."""
        raw = self._link(self._query_target).raw
        return int(raw.affected_rows() or 0) if raw is not None else 0

    def _mogrify(self, query: str, args: Any) -> str:
        return str(self._escaper.mogrify(query, args))

    # ------------------------------------------------------------------ checks and monitoring

    @staticmethod
    def _kill_statement(thread_id: int) -> str:
        """``KILL thread_id``, once ``thread_id`` is known to be an integer."""
        if not isinstance(thread_id, int):
            raise TypeError("thread_id must be an integer")
        return f"KILL {thread_id:d}"

    @staticmethod
    def _check_charset(charset: str) -> None:
        if not _pymysql.charset_known(charset):
            raise errors.ProgrammingError(f"unknown character set {charset!r}")

    def _attach_monitor(self) -> None:
        """Have the process's monitor follow the replicas, when there are replicas and a
        ``monitor_interval``."""
        config = self._config
        interval = config.monitor_interval
        if config.replicas and interval is not None:
            process_monitors().attach(
                self,
                self._policy.knowledge,
                self._flavor,
                (config.primary.name, self._primary.options),
                [(name, link.options) for name, link in self._replicas.items()],
                interval=interval,
            )
