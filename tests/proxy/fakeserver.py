"""A scripted MySQL server for failure tests: it dies exactly when a test says so.

It accepts any login, answers the proxy's own statements (tracking setup, executed-state polls)
and, for the test's statements, follows a script: rows to return, or die before answering, or
die after a given number of response packets.  Every statement it receives is logged, so a test
can prove that a write was never sent twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from consistent.protocol import (
    Capability,
    ColumnDefinition41,
    EofPacket,
    HandshakeV10,
    OkPacket,
    ServerStatus,
    build_column_count,
    build_column_definition41,
    build_eof,
    build_handshake_v10,
    build_ok,
    build_text_row,
    parse_handshake_response41,
)

CAPS = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.CONNECT_WITH_DB
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PS_MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Capability.SESSION_TRACK
    | Capability.DEPRECATE_EOF
)


@dataclass
class Script:
    """What to do with a statement: ``rows`` (text values) or death."""

    rows: list[str] = field(default_factory=list)
    die_before: bool = False
    die_after_packets: int | None = None


class FakeServer:
    """One fake server on 127.0.0.1 (port 0) in a background thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.log: list[str] = []
        self.scripts: dict[str, Script] = {}
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> FakeServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=5))
        loop.close()

    def call(self, fn: Callable[[], None]) -> None:
        assert self._loop is not None
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def kill_connections(self) -> None:
        """Drop every open connection (a crashed server, for the client side)."""
        self.call(lambda: [w.transport.abort() for w in list(self._writers)])

    def stop(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or not self._thread.is_alive():
            return

        def stop() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            loop.stop()

        loop.call_soon_threadsafe(stop)
        self._thread.join(10)

    # ----------------------------------------------------------------- protocol

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._session(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    @staticmethod
    def _frame(payload: bytes, seq: int) -> bytes:
        return len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload

    async def _read(self, reader: asyncio.StreamReader) -> tuple[int, bytes]:
        head = await reader.readexactly(4)
        return head[3], await reader.readexactly(int.from_bytes(head[:3], "little"))

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = HandshakeV10(
            server_version="5.5.5-10.11.0-MariaDB-fake",
            connection_id=1,
            auth_plugin_data=b"abcdefghijklmnopqrst",
            capabilities=CAPS,
            status=ServerStatus.AUTOCOMMIT,
            auth_plugin_name="mysql_native_password",
        )
        writer.write(self._frame(build_handshake_v10(hello), 0))
        seq, payload = await self._read(reader)
        caps = int(parse_handshake_response41(payload, CAPS).capabilities) & CAPS
        writer.write(self._frame(build_ok(OkPacket(status=ServerStatus.AUTOCOMMIT), caps), seq + 1))
        in_transaction = False
        while True:
            _seq, payload = await self._read(reader)
            command = payload[0]
            if command == 0x01:
                return
            if command != 0x03:
                writer.write(
                    self._frame(build_ok(OkPacket(status=ServerStatus.AUTOCOMMIT), caps), 1)
                )
                continue
            sql = payload[1:].decode()
            self.log.append(sql)
            word = sql.split(None, 1)[0].upper() if sql.strip() else ""
            if word in ("BEGIN", "START"):
                in_transaction = True
            elif word in ("COMMIT", "ROLLBACK"):
                in_transaction = False
            status = ServerStatus.AUTOCOMMIT | (ServerStatus.IN_TRANS if in_transaction else 0)
            script = self._script(sql)
            if script is None:
                writer.write(self._frame(build_ok(OkPacket(status=status), caps), 1))
                continue
            if script.die_before:
                writer.transport.abort()
                return
            packets = self._result(script.rows, caps)
            if script.die_after_packets is not None:
                data = b"".join(
                    self._frame(p, i + 1) for i, p in enumerate(packets[: script.die_after_packets])
                )
                writer.write(data)
                await writer.drain()
                writer.transport.abort()
                return
            writer.write(b"".join(self._frame(p, i + 1) for i, p in enumerate(packets)))
            await writer.drain()

    def _script(self, sql: str) -> Script | None:
        upper = sql.upper()
        if "GTID_SLAVE_POS" in upper or "GTID_BINLOG_POS" in upper:
            return Script(rows=["0-1-1"])
        if "SESSION_TRACK_SYSTEM_VARIABLES" in upper and upper.startswith("SELECT"):
            return Script(rows=["last_gtid"])
        if "MASTER_GTID_WAIT" in upper:
            return Script(rows=["0"])
        for key, script in self.scripts.items():
            if key in sql:
                return script
        if upper.startswith("SELECT"):
            return Script(rows=[self.name])
        return None

    @staticmethod
    def _result(rows: list[str], caps: int) -> list[bytes]:
        packets = [
            build_column_count(1, caps),
            build_column_definition41(ColumnDefinition41(name="v"), caps),
        ]
        if not caps & Capability.DEPRECATE_EOF:
            packets.append(build_eof(EofPacket(0, ServerStatus.AUTOCOMMIT), caps))
        packets += [build_text_row([r]) for r in rows]
        if caps & Capability.DEPRECATE_EOF:
            packets.append(build_ok(OkPacket(status=ServerStatus.AUTOCOMMIT, header=0xFE), caps))
        else:
            packets.append(build_eof(EofPacket(0, ServerStatus.AUTOCOMMIT), caps))
        return packets
