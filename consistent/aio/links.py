"""One aiomysql connection per server of an asyncio logical connection, opened when needed.

:class:`AsyncServerLink` is :class:`consistent.dbapi.links.ServerLink` for asyncio: it opens
its server's connection (replicas with a short retry and backoff through tenacity), turns a
MySQL replica's tracker on, remembers which session state it has replayed, and drops the
connection when it fails so the next use reconnects.

Deadlines: opening a connection, the greeting and the login included, is bounded by
``connect_timeout`` (``asyncio.timeout`` around aiomysql's whole connect, which bounds only the
TCP connect itself); a replica is tried again only when the first attempt failed faster than
that.  Once open, :attr:`read_timeout` bounds each round trip the connection driver
(:class:`consistent.aio.connection.Connection`) makes on it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any, Final

import pymysql.err
from tenacity import AsyncRetrying

from consistent.aio import _aiomysql
from consistent.aio._aiomysql import TrackingConnection
from consistent.aio.deadline import Watchdog
from consistent.dbapi.config import ServerSpec
from consistent.dbapi.links import LinkBase
from consistent.errnos import CR
from consistent.flavors import Flavor
from consistent.policy import Tracking

__all__ = ["AsyncServerLink"]

logger = logging.getLogger(__name__)

_CONN_HOST_ERROR: Final = int(CR.CONN_HOST_ERROR)
_SERVER_LOST: Final = int(CR.SERVER_LOST)


class AsyncServerLink(LinkBase[TrackingConnection]):
    """The connection to one server (``name`` is ``"primary"`` or the replica's name)."""

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        options: dict[str, Any],
        *,
        replica: bool,
        observer: Callable[[str, int, bytes], None],
    ) -> None:
        super().__init__(name, spec, options, replica=replica, observer=observer)
        self._driver_options = _aiomysql.driver_options(options, spec.name)
        #: Seconds the server may take over one round trip (``None``: no deadline).
        self.read_timeout: float | None = options.get("read_timeout")
        #: Enforces :attr:`read_timeout` on the round trips the driver makes.
        self.watchdog = Watchdog()

    async def _open_once(self) -> TrackingConnection:
        conn = TrackingConnection(
            observer=functools.partial(self._observer, self.name), **self._driver_options
        )
        timeout = self.connect_timeout
        try:
            async with asyncio.timeout(timeout):
                await conn._connect()
        except TimeoutError as exc:
            conn.close()
            raise pymysql.err.OperationalError(
                _CONN_HOST_ERROR,
                f"Can't connect to MySQL server on {self.spec.name} (no answer in {timeout:g}s)",
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    async def connection(self, flavor: Flavor | None) -> TrackingConnection:
        """The open connection, connecting first if needed (``flavor`` sets its tracker)."""
        conn = self._conn
        if conn is not None and conn.open:
            return conn
        self.drop()
        if self.replica:
            opened: TrackingConnection = await AsyncRetrying(**self._replica_retry())(
                self._open_once
            )
        else:
            opened = await self._open_once()
        self._opened(opened)
        if self.replica and flavor is not None:
            statement = flavor.replica_tracking_statement()
            if statement is not None:
                try:
                    async with asyncio.timeout(self.read_timeout):
                        await opened.query(statement)
                except TimeoutError as exc:
                    self.drop()
                    raise self.missed_deadline(self.read_timeout) from exc
                except BaseException:
                    self.drop()
                    raise
            self.tracking = Tracking.ALL
        return opened

    def missed_deadline(self, timeout: float | None) -> pymysql.err.OperationalError:
        """The error a round trip that missed its deadline raises (2013, a lost connection,
        as PyMySQL's socket timeout gives); the caller drops the connection."""
        return pymysql.err.OperationalError(
            _SERVER_LOST,
            f"Lost connection to MySQL server during query ({self.spec.name} did not answer "
            f"within {timeout:g}s)",
        )

    def _close_now(self, conn: TrackingConnection) -> None:
        conn.close()

    def drop(self) -> None:
        """Forget the connection (closing its socket without ceremony)."""
        self.watchdog.close()
        super().drop()

    async def close(self) -> None:
        """Close the connection politely (``COM_QUIT``)."""
        self.watchdog.close()
        conn = self._forget()
        if conn is not None and conn.open:
            try:
                await conn.ensure_closed()
            except Exception:
                conn.close()
