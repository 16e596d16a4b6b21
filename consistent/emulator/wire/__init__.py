"""The emulator's wire front-end: a MySQL 8.0 server socket in front of the engine.

:func:`serve` / :class:`WireServer` run on an asyncio loop; :class:`EmulatorThread` runs an
engine and its front-end in a background thread for synchronous code.
"""

from __future__ import annotations

from consistent.emulator.wire.auth import SERVER_CAPABILITIES, Authenticator
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.connection import Connection
from consistent.emulator.wire.server import DEFAULT_HOST, WireServer, serve
from consistent.emulator.wire.thread import EmulatorThread

__all__ = [
    "DEFAULT_HOST",
    "SERVER_CAPABILITIES",
    "Authenticator",
    "Connection",
    "EmulatorThread",
    "WireConfig",
    "WireServer",
    "serve",
]
