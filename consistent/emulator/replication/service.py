"""Replication on one emulated server: its channels, error log and SQL/performance_schema hooks.

A :class:`ReplicationService` is attached to every server of a topology.  It owns the server's
channels (a replica has one per source; multi-source replicas have several, named), installs
the replication statements (:mod:`.sql`) and the ``performance_schema`` replication tables
(:mod:`.pfs`) through the server's extension points, and stops the channels on close.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from consistent.emulator.replication import pfs, sql
from consistent.emulator.replication.channel import Channel, Resolver, SourceConfig
from consistent.emulator.replication.errorlog import ErrorLog
from consistent.emulator.replication.lagmodel import LagModel

if TYPE_CHECKING:
    from consistent.emulator.server import EmulatedServer

__all__ = ["ReplicationService"]


class ReplicationService:
    """The replication side of one server; see the module docstring.

    ``default_lag`` is the lag model of channels created over SQL (``CHANGE REPLICATION
    SOURCE TO … FOR CHANNEL``); ``origin`` is the loop time lag-model windows count from.
    """

    def __init__(
        self,
        server: EmulatedServer,
        *,
        name: str,
        resolver: Resolver,
        default_lag: LagModel | None = None,
        origin: float | None = None,
    ) -> None:
        self.server = server
        self.name = name
        self.resolver = resolver
        self.default_lag = default_lag or LagModel()
        self.origin = origin
        self.error_log = ErrorLog(name)
        self.channels: dict[str, Channel] = {}

    def channel(self, name: str = "") -> Channel | None:
        """The channel called ``name`` (``''`` is the default channel), if it exists."""
        return self.channels.get(name.lower())

    def add_channel(
        self, name: str = "", *, config: SourceConfig | None = None, lag: LagModel | None = None
    ) -> Channel:
        """Create (or return) the channel ``name``; ``config``/``lag`` apply to a new one."""
        key = name.lower()
        existing = self.channels.get(key)
        if existing is not None:
            return existing
        channel = Channel(
            self.server,
            key,
            resolver=self.resolver,
            lag=lag or self.default_lag,
            config=config,
            error_log=self.error_log,
            origin=self.origin,
        )
        self.channels[key] = channel
        return channel

    def remove_channel(self, name: str) -> None:
        """RESET REPLICA ALL: forget the channel (its threads must be stopped)."""
        self.channels.pop(name.lower(), None)

    def configured(self) -> list[Channel]:
        """Channels with a source, in name order (what SHOW REPLICA STATUS lists)."""
        return [self.channels[k] for k in sorted(self.channels) if self.channels[k].config.host]

    def install(self) -> None:
        """Register the replication statements, SHOW forms and performance_schema tables."""
        sql.install(self)
        pfs.install(self)

    async def start_all(self) -> None:
        """START REPLICA on every configured channel."""
        for channel in self.configured():
            await channel.start()

    async def close(self) -> None:
        """Stop every channel's threads."""
        await asyncio.gather(*(c.close() for c in self.channels.values()))
