"""A connection lost while the server answers ends quietly: the session and the socket are
closed, nothing is reported as a failure of the server (compiled or not)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import pymysql
import pytest

from consistent.emulator.wire import EmulatorThread
from consistent.emulator.wire import server as wire_server
from consistent.emulator.wire.transport import PacketProtocol, Transport


class _LosingTransport:
    """A transport whose connection is lost once ``lost`` is set: what is written then never
    reaches the client, and writing raises as a reset socket does."""

    def __init__(self, transport: Transport, lost: threading.Event) -> None:
        self._transport = transport
        self._lost = lost

    def write(self, data: bytes) -> None:
        if self._lost.is_set():
            raise ConnectionResetError("Connection lost")
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def test_a_connection_lost_while_answering_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lost = threading.Event()

    def losing_protocol(on_connect: Callable[[PacketProtocol], None]) -> PacketProtocol:
        def connected(protocol: PacketProtocol) -> None:
            assert protocol.transport is not None
            protocol.transport = cast(Transport, _LosingTransport(protocol.transport, lost))
            on_connect(protocol)

        return PacketProtocol(connected)

    monkeypatch.setattr(wire_server, "PacketProtocol", losing_protocol)
    caplog.set_level(logging.DEBUG, logger="consistent.emulator")
    with EmulatorThread() as emu:
        conn = pymysql.connect(host="127.0.0.1", port=emu.port, user="root", read_timeout=10)
        lost.set()
        with pytest.raises(pymysql.err.OperationalError):
            conn.query("SELECT 1")
        deadline = time.monotonic() + 10
        while emu.wire.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not emu.wire.connections
        lost.clear()
    messages = [r.getMessage() for r in caplog.records]
    assert any("connection lost: Connection lost" in m for m in messages)
    assert [
        m for r, m in zip(caplog.records, messages, strict=True) if r.levelno >= logging.ERROR
    ] == []
