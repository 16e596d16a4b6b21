"""The asyncio TCP server in front of an :class:`~consistent.emulator.server.EmulatedServer`.

Real clients (PyMySQL, SQLAlchemy, the ``mariadb`` command-line client) connect to it as to a
MySQL 8.0 server.  One task per connection, owned by the :class:`WireServer` and awaited when
it closes::

    async with await serve(EmulatedServer()) as wire:
        print(wire.port)

Closing is graceful: the listening socket closes first, idle connections close at once, busy
ones after their current command; :meth:`WireServer.wait_closed` cancels what is still
running after ``shutdown_timeout``.  Each connection closes its engine session.  The engine
itself belongs to the caller (``EmulatedServer.shutdown`` is not called here).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Final, cast

from consistent.emulator.wire.auth import Authenticator
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.connection import Connection
from consistent.emulator.wire.errors import wire_error
from consistent.emulator.wire.stream import PacketStream
from consistent.emulator.wire.transport import PacketProtocol
from consistent.errnos import ER
from consistent.errors import Error
from consistent.protocol.constants import Capability
from consistent.protocol.responses import build_err

if TYPE_CHECKING:
    from consistent.emulator.server import EmulatedServer
    from consistent.emulator.session import Session

__all__ = ["DEFAULT_HOST", "WireServer", "serve"]

logger = logging.getLogger(__name__)

DEFAULT_HOST: Final = "127.0.0.1"
_PRE_AUTH_USER: Final = "unauthenticated user"  # what SHOW PROCESSLIST shows before login


def _client_host(peer: tuple[str, int] | None) -> str:
    """The host part of ``'user'@'host'``: ``localhost`` for loopback, as mysqld resolves it."""
    if peer is None:
        return "localhost"
    try:
        if ipaddress.ip_address(peer[0]).is_loopback:
            return "localhost"
    except ValueError:
        pass
    return peer[0]


class WireServer:
    """Serves one emulated server over TCP; see the module docstring."""

    def __init__(self, server: EmulatedServer, config: WireConfig | None = None) -> None:
        self._server = server
        self._config = config or WireConfig()
        self._auth = Authenticator(
            lambda: server.users,
            timeout=self._config.connect_timeout,
            rsa_key_bits=self._config.rsa_key_bits,
            rsa_private_key_pem=self._config.rsa_private_key_pem,
        )
        self._listener: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections: dict[int, Connection] = {}
        self._closing = False
        self._closed = asyncio.Event()
        self._address: tuple[str, int] | None = None

    # ----- ConnectionHost ------------------------------------------------------------------------

    @property
    def server(self) -> EmulatedServer:
        """The engine behind this front-end."""
        return self._server

    @property
    def auth(self) -> Authenticator:
        """Authentication state (RSA key, caching_sha2_password cache)."""
        return self._auth

    @property
    def config(self) -> WireConfig:
        """Limits and timeouts."""
        return self._config

    def _session_closed(self, session: Session) -> None:
        """The engine closed a session (``KILL`` from another connection, a crash): its
        connection closes now if idle, else after its command."""
        connection = self._connections.get(session.connection_id)
        if connection is not None and not connection.busy:
            connection.request_close()

    def reap(self) -> None:
        """Close idle connections whose session the engine closed or killed (a ``KILL`` issued
        by another connection); busy ones notice after their command."""
        for connection in list(self._connections.values()):
            if connection.session_gone and not connection.busy:
                connection.request_close()

    # ----- lifecycle ------------------------------------------------------------------------------

    async def start(self, host: str = DEFAULT_HOST, port: int = 0) -> None:
        """Listen on ``host:port`` (port 0: a free port, see :attr:`port`)."""
        if self._listener is not None:
            raise RuntimeError("the server is already listening")
        loop = asyncio.get_running_loop()
        # PacketProtocol is compiled, so not an asyncio.Protocol subclass; loops call its
        # methods by name.
        factory = cast("Callable[[], asyncio.Protocol]", lambda: PacketProtocol(self._accept))
        self._listener = await loop.create_server(factory, host, port)
        name = self._listener.sockets[0].getsockname()
        self._address = (str(name[0]), int(name[1]))

    @property
    def port(self) -> int:
        """The TCP port the server listens (or listened) on."""
        return self._bound()[1]

    @property
    def host(self) -> str:
        """The address the server listens (or listened) on."""
        return self._bound()[0]

    def _bound(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("the server was never started")
        return self._address

    @property
    def connections(self) -> Mapping[int, Connection]:
        """Open connections by connection id."""
        return MappingProxyType(self._connections)

    def close(self) -> None:
        """Stop accepting; close idle connections now and busy ones after their command."""
        if self._closing:
            return
        self._closing = True
        self._closed.set()
        if self._listener is not None:
            self._listener.close()
        for connection in list(self._connections.values()):
            connection.request_close()

    async def wait_closed(self) -> None:
        """Wait until :meth:`close` is called (by anyone) and every connection ended; after
        ``shutdown_timeout`` the commands still running are cancelled (their connections
        close, their sessions too)."""
        await self._closed.wait()  # the server's whole life: no timeout on purpose
        timeout = self._config.shutdown_timeout
        tasks = set(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                _, stuck = await asyncio.wait(pending, timeout=timeout)
                for task in stuck:
                    logger.error("connection task %r ignored cancellation", task.get_name())
        if self._listener is not None:
            async with asyncio.timeout(timeout):
                await self._listener.wait_closed()

    async def __aenter__(self) -> WireServer:
        if self._listener is None:
            await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        await self.wait_closed()

    async def kill(self, connection_id: int, *, query_only: bool) -> None:
        """``KILL [QUERY] connection_id`` from outside any connection (tests, tools)."""
        await self._server.kill(connection_id, query_only=query_only)
        self.reap()

    # ----- connections ----------------------------------------------------------------------------

    def _accept(self, protocol: PacketProtocol) -> None:
        if self._closing:
            if protocol.transport is not None:
                protocol.transport.close()
            return
        task = asyncio.get_running_loop().create_task(self._run_connection(protocol))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("connection task failed", exc_info=task.exception())

    async def _run_connection(self, protocol: PacketProtocol) -> None:
        config = self._config
        stream = PacketStream(
            protocol,
            max_payload=config.max_allowed_packet,
            read_timeout=config.net_read_timeout,
            write_timeout=config.net_write_timeout,
        )
        host = _client_host(stream.peer)
        try:
            session = self._server.open_session(_PRE_AUTH_USER, host=host)
        except Error as e:
            logger.warning("refusing a connection: %s", e)
            err = wire_error(ER.SERVER_SHUTDOWN)
            with contextlib.suppress(OSError, TimeoutError):
                await stream.send(build_err(err, Capability.PROTOCOL_41))
            await stream.close(config.net_write_timeout)
            return
        connection = Connection(self, stream, session, host)
        self._connections[connection.connection_id] = connection
        session.add_close_listener(self._session_closed)
        if self._closing:
            connection.request_close()
        try:
            await connection.run()
        finally:
            self._connections.pop(connection.connection_id, None)


async def serve(
    server: EmulatedServer,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    config: WireConfig | None = None,
) -> WireServer:
    """Start a :class:`WireServer` for ``server`` on ``host:port`` and return it."""
    wire = WireServer(server, config)
    await wire.start(host, port)
    return wire
