"""One physical connection per server of a logical connection, opened when first needed.

A :class:`ServerLink` owns the PyMySQL connection to one server: it opens it (replicas with a
short retry and backoff through tenacity), turns the GTID tracker on, remembers which session
state it has replayed, and drops the connection when it fails so the next use reconnects.

Deadlines: opening a connection, the server's greeting and the login included, is bounded by
``connect_timeout`` (PyMySQL bounds only the TCP connect with it, and the rest with the read
timeout); a replica is tried again only when the first attempt failed faster than that, so a
server that accepts connections and never answers costs one ``connect_timeout``.  Once open,
the connection has its read and write deadlines (PyMySQL's ``read_timeout`` and
``write_timeout``): a server silent past one makes PyMySQL raise error 2013 and close the
socket, which the caller reports to the policy as a lost connection.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from consistent.dbapi import _pymysql
from consistent.dbapi._pymysql import TrackingConnection
from consistent.dbapi.config import ServerSpec
from consistent.flavors import Flavor
from consistent.policy import Tracking

__all__ = ["LinkBase", "ServerLink"]

logger = logging.getLogger(__name__)

#: Attempts to open a replica connection before the read goes elsewhere.
REPLICA_CONNECT_ATTEMPTS: Final = 2
# PyMySQL's own default connect_timeout.
_PYMYSQL_CONNECT_TIMEOUT: Final = 10.0


class _DriverConnection(Protocol):
    @property
    def open(self) -> Any: ...


ConnT = TypeVar("ConnT", bound=_DriverConnection)


class LinkBase(Generic[ConnT]):
    """What a server link remembers, blocking or asyncio alike: which server, its options,
    the open connection and the session state replayed on it."""

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        options: dict[str, Any],
        *,
        replica: bool,
        observer: Callable[[str, int, bytes], None],
    ) -> None:
        self.name = name
        self.spec = spec
        self.replica = replica
        self._options = options
        self._observer = observer
        self._conn: ConnT | None = None
        #: Session-state replay number this connection has reached.
        self.applied_seq = 0
        #: Tracker mode currently set on the connection (``None``: not set).
        self.tracking: Tracking | None = None
        #: Replay the session's state when the connection opens (a primary moved to).
        self.replay = False

    @property
    def address(self) -> str:
        """``host:port`` of the server."""
        return self.spec.name

    @property
    def connected(self) -> bool:
        """True while a connection is open."""
        return self._conn is not None and bool(self._conn.open)

    @property
    def raw(self) -> ConnT | None:
        """The open driver connection, if any."""
        return self._conn

    @property
    def options(self) -> dict[str, Any]:
        """The PyMySQL keywords that reach this server (a copy: a background monitor's
        connection takes what it needs of them)."""
        return dict(self._options)

    @property
    def connect_timeout(self) -> float:
        """Seconds opening the connection may take (PyMySQL's default when not set)."""
        value = self._options.get("connect_timeout")
        return float(value) if value is not None else _PYMYSQL_CONNECT_TIMEOUT

    def _replica_retry(self) -> dict[str, Any]:
        """tenacity's keywords for opening a replica: a few quick attempts, within
        ``connect_timeout``, only after a disconnect."""
        return {
            "stop": stop_after_attempt(REPLICA_CONNECT_ATTEMPTS)
            | stop_after_delay(self.connect_timeout),
            "wait": wait_exponential(multiplier=0.05, max=0.5),
            "retry": retry_if_exception(_pymysql.is_disconnect),
            "reraise": True,
        }

    def _opened(self, conn: ConnT) -> None:
        """Take ``conn`` as the link's new connection (nothing replayed on it yet)."""
        self._conn = conn
        self.applied_seq = 0
        self.tracking = None

    def _close_now(self, conn: ConnT) -> None:
        """Close ``conn``'s socket without ceremony, as its driver does."""
        raise NotImplementedError

    def drop(self) -> None:
        """Forget the connection (closing its socket without ceremony)."""
        conn = self._forget()
        if conn is not None:
            with contextlib.suppress(Exception):
                self._close_now(conn)

    def _forget(self) -> ConnT | None:
        """Let go of the connection, which is returned for the caller to close."""
        conn, self._conn = self._conn, None
        self.applied_seq = 0
        self.tracking = None
        return conn


class ServerLink(LinkBase[TrackingConnection]):
    """The connection to one server (``name`` is ``"primary"`` or the replica's name)."""

    def _open_once(self) -> TrackingConnection:
        options = dict(self._options)
        options["read_timeout"] = self.connect_timeout  # the greeting and the login
        conn = TrackingConnection(observer=functools.partial(self._observer, self.name), **options)
        _pymysql.set_read_timeout(conn, self._options.get("read_timeout"))
        return conn

    def connection(self, flavor: Flavor | None) -> TrackingConnection:
        """The open connection, connecting first if needed (``flavor`` sets its tracker)."""
        conn = self._conn
        if conn is not None and conn.open:
            return conn
        self.drop()
        if self.replica:
            conn = Retrying(**self._replica_retry())(self._open_once)
        else:
            conn = self._open_once()
        self._opened(conn)
        if self.replica and flavor is not None:
            statement = flavor.replica_tracking_statement()
            if statement is not None:
                conn.query(statement)
            self.tracking = Tracking.ALL
        return conn

    def _close_now(self, conn: TrackingConnection) -> None:
        _pymysql.force_close(conn)

    def close(self) -> None:
        """Close the connection politely (``COM_QUIT``)."""
        conn, self._conn = self._conn, None
        if conn is not None and conn.open:
            with contextlib.suppress(Exception):
                conn.close()
