"""An emulated server on its own event loop in a background thread, for synchronous callers.

Tests, benchmarks and examples use blocking clients (PyMySQL, SQLAlchemy, a subprocess); they
run the emulator next to them with::

    with EmulatorThread() as emu:
        conn = pymysql.connect(host="127.0.0.1", port=emu.port, user="root")
        emu.call(emu.server.flush_binary_logs())

The engine is built inside the thread (its SQLite connections and asyncio primitives belong to
that loop); everything that touches it from outside goes through :meth:`EmulatorThread.call`
or :meth:`EmulatorThread.run`.  Leaving the ``with`` block closes the front-end, shuts the
engine down and releases its data directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from consistent.emulator.config import Clock, ServerConfig
from consistent.emulator.loopthread import DEFAULT_TIMEOUT, LoopThread
from consistent.emulator.server import EmulatedServer
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.server import DEFAULT_HOST, WireServer, serve

__all__ = ["EmulatorThread"]


class EmulatorThread(LoopThread):
    """Runs an :class:`EmulatedServer` and its :class:`WireServer` in a daemon thread.

    ``factory`` builds the engine (default: ``EmulatedServer(config, clock=clock)``); it runs
    in the emulator's thread.  ``timeout`` bounds start-up, shutdown and, by default, each
    :meth:`call`.
    """

    _label: ClassVar[str] = "emulator"

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        clock: Clock = time.time,
        factory: Callable[[], EmulatedServer] | None = None,
        wire_config: WireConfig | None = None,
        host: str = DEFAULT_HOST,
        port: int = 0,
        timeout: float = DEFAULT_TIMEOUT,
        fast_loop: bool = False,
    ) -> None:
        super().__init__(timeout=timeout, fast_loop=fast_loop)
        self._factory = factory or (lambda: EmulatedServer(config, clock=clock))
        self._wire_config = wire_config
        self._host = host
        self._port = port
        self._server: EmulatedServer | None = None
        self._wire: WireServer | None = None

    # ----- access -----------------------------------------------------------------------------

    @property
    def server(self) -> EmulatedServer:
        """The engine (touch it only through :meth:`call` / :meth:`run`)."""
        return self._running(self._server)

    @property
    def wire(self) -> WireServer:
        """The TCP front-end."""
        return self._running(self._wire)

    @property
    def host(self) -> str:
        """The address clients connect to."""
        return self.wire.host

    @property
    def port(self) -> int:
        """The TCP port clients connect to."""
        return self.wire.port

    # ----- lifecycle ----------------------------------------------------------------------------

    async def _open(self) -> None:
        server = self._factory()
        try:
            await server.start()
            wire = await serve(server, self._host, self._port, config=self._wire_config)
        except BaseException:
            server.close()
            raise
        self._server, self._wire = server, wire

    async def _close(self) -> None:
        server, wire = self.server, self.wire
        wire.close()
        await wire.wait_closed()
        try:
            await server.shutdown()
        finally:
            server.close()
