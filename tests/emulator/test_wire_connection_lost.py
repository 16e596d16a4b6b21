"""A connection lost while the server answers ends quietly: the session and the socket are
closed, nothing is reported as a failure of the server (compiled or not)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pymysql
import pytest

from consistent.emulator.wire import EmulatorThread


def test_a_connection_lost_while_answering_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lost = threading.Event()
    write = asyncio.StreamWriter.write
    drain = asyncio.StreamWriter.drain

    def lost_write(self: asyncio.StreamWriter, data: bytes | bytearray | memoryview) -> None:
        # A lost connection delivers nothing: the answer must not reach the client.
        if not lost.is_set():
            write(self, data)

    async def failing_drain(self: asyncio.StreamWriter) -> None:
        if lost.is_set():
            raise ConnectionResetError("Connection lost")
        await drain(self)

    monkeypatch.setattr(asyncio.StreamWriter, "write", lost_write)
    monkeypatch.setattr(asyncio.StreamWriter, "drain", failing_drain)
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
