"""The client's side of a session: framing its byte stream into commands.

Commands arrive one at a time; what the client sends while one runs is buffered (reading pauses
beyond a bound) and served afterwards, except the file a LOCAL INFILE request asked for, which
flows to the backend as it arrives.  A framing violation (sequence id, size) closes this client
only, after an ERR saying why.

A ``COM_QUERY`` longer than :data:`~consistent.classify.MAX_CLASSIFIED_LENGTH` is never gathered
whole: it is *streamed*.  Its first bytes are served as the command (the classifier routes an
oversized statement from them, to the primary), and the rest of the packet, 16 MiB pieces and
their sequence ids included, is passed to the backend as it arrives, with reading from the
client paused while the backend's write buffer is full or while the route is being decided
(what arrives meanwhile is buffered, bounded).  A command the proxy answers itself drops the
rest.  Until the last piece has arrived, whatever the session sends the client for this command
(an early ERR 1153 from a server whose ``max_allowed_packet`` is smaller, or the proxy's own
answer) is held back, then renumbered after the client's last sequence id, as a server's answer
would be: the client reads nothing before it has sent its whole command.
"""

from __future__ import annotations

import logging
from typing import Final

from consistent.classify import MAX_CLASSIFIED_LENGTH
from consistent.errnos import ER
from consistent.protocol import (
    ErrPacket,
    build_err,
)
from consistent.protocol.constants import MAX_PACKET_PAYLOAD, Command
from proxy.backends import BackendConnection
from proxy.relay import ResponseRelay
from proxy.sessionbase import (
    SessionBase,
)
from proxy.stream import frame, header, renumber

__all__ = ["ClientInput"]

logger = logging.getLogger(__name__)

_CLIENT_BUFFER_LIMIT: Final = 1 << 20
_MAX: Final = MAX_PACKET_PAYLOAD
#: A COM_QUERY packet longer than this streams (its statement is oversized).
STREAM_THRESHOLD: Final = 1 + MAX_CLASSIFIED_LENGTH
#: The first bytes of a streamed packet that are served as its command.
_HEAD: Final = STREAM_THRESHOLD
_COM_QUERY: Final = int(Command.QUERY)
#: mysqld's message for ER_NET_PACKET_TOO_LARGE.
_TOO_LARGE: Final = "Got a packet bigger than 'max_allowed_packet' bytes"


class ClientInput(SessionBase):
    """Framing of the client's stream (see the module docstring)."""

    def _on_client_data(self, data: bytes) -> None:
        if not self._cbuf:
            if not self._busy and self._infile is None:
                n = len(data)
                if n >= 5:
                    length = data[0] | data[1] << 8 | data[2] << 16
                    if n == length + 4 and length < _MAX and data[3] == 0:
                        self._command(data, data[4:], 1)
                        return
            elif self._streaming:
                used = self._stream_feed(data)
                if self._stream_complete():
                    self._cbuf += data[used:]  # the commands after it, served once it ends
                    self._stream_end()
                    return
                if used == len(data):
                    return
                data = data[used:]
        self._cbuf += data
        self._pump()

    def _pump(self) -> None:
        """Serve what the client buffer holds, as far as the session's state allows."""
        while not self._closing:
            if self._streaming:
                if not self._stream_buffered():
                    self._check_buffer()
                    return
                continue
            if self._infile is not None:
                if not self._forward_infile():
                    return
                continue
            if self._busy:
                self._check_buffer()
                return
            started = self._start_stream()
            if started:
                continue
            packet = None if started is not None else self._take_packet()
            if packet is None:
                self._check_buffer()
                return
            raw, payload, next_seq = packet
            self._command(raw, payload, next_seq)

    def _check_buffer(self) -> None:
        """Bound what waits behind a running command: reading from the client pauses beyond
        the limit and resumes once the session is idle, and pauses while a streamed command's
        backend cannot take more.  A single command being received is bounded by
        ``max_allowed_packet`` instead (its header announces its size)."""
        transport = self.client.transport
        if transport is None:
            return
        if self._stream_blocked or (self._busy and len(self._cbuf) > _CLIENT_BUFFER_LIMIT):
            if not self._paused_reading:
                self._paused_reading = True
                transport.pause_reading()
        elif self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()

    # ----------------------------------------------------------------- streamed commands

    def _start_stream(self) -> bool | None:
        """Start streaming the COM_QUERY at the head of the buffer when it is long enough to
        (True), once its first bytes are here (False: wait); ``None`` for anything else."""
        buf = self._cbuf
        if len(buf) < 5 or buf[4] != _COM_QUERY or buf[3] != 0:
            return None
        length = buf[0] | buf[1] << 8 | buf[2] << 16
        if length <= STREAM_THRESHOLD or length > self._config.max_allowed_packet:
            return None  # gathered (or refused) by _take_packet
        if len(buf) < 4 + _HEAD:
            return False
        raw = bytes(buf[: 4 + _HEAD])
        del buf[: 4 + _HEAD]
        self._streaming = True
        self._stream_left = length - _HEAD
        self._stream_more = length == _MAX
        self._stream_seq = 1
        self._stream_size = length
        self._stream_to = None
        self._stream_drop = False
        self._gate = bytearray()
        self._write = self._hold
        self._metrics.streamed_commands += 1
        self._command(raw, raw[4:], 1)
        if self._stream_complete():
            self._stream_end()
        return True

    def _stream_buffered(self) -> bool:
        """Pass on the streamed packet's bytes the buffer holds; True once it has ended."""
        buf = self._cbuf
        used = self._stream_feed(buf)
        if used:
            del buf[:used]
        if self._stream_complete():
            self._stream_end()
        return not self._streaming

    def _stream_complete(self) -> bool:
        """The streamed packet has arrived whole (:meth:`_stream_end` is due)."""
        return self._streaming and not self._stream_left and not self._stream_more

    def _hold(self, data: bytes | bytearray | memoryview) -> None:
        """The client's sink while a streamed command arrives."""
        gate = self._gate
        if gate is not None:
            gate += data

    def _stream_feed(self, data: bytes | bytearray) -> int:
        """Pass (or drop) the streamed packet's bytes at the start of ``data``; returns how
        many belong to it.  Nothing is taken while the command's route is being decided.
        The caller ends the stream once it is complete, after removing those bytes."""
        conn = self._stream_to
        if conn is None and not self._stream_drop:
            return 0
        n = len(data)
        pos = 0
        start = 0  # data[start:pos] is to be written to the backend
        while True:
            left = self._stream_left
            if left:
                take = min(left, n - pos)
                pos += take
                self._stream_left = left - take
                if self._stream_left:
                    break
            if not self._stream_more:
                break
            if n - pos < 4:
                break
            length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            if data[pos + 3] != self._stream_seq:
                self._stream_violation(
                    ER.NET_PACKETS_OUT_OF_ORDER, "Got packets out of order", conn
                )
                return n
            self._stream_size += length
            if self._stream_size > self._config.max_allowed_packet:
                self._stream_violation(ER.NET_PACKET_TOO_LARGE, _TOO_LARGE, conn)
                return n
            if conn is not None:
                limit = conn.max_allowed_packet
                if limit is not None and self._stream_size > limit:
                    if pos > start:
                        conn.write(data[start:pos])
                    self._stream_refused(conn)
                    conn = None
                    start = pos
            self._stream_seq = (self._stream_seq + 1) & 0xFF
            self._stream_more = length == _MAX
            self._stream_left = length
            pos += 4
        if conn is not None and pos > start:
            whole = start == 0 and pos == n and isinstance(data, bytes)
            conn.write(data if whole else data[start:pos])
        return pos

    def _stream_violation(self, errno: int, message: str, conn: BackendConnection | None) -> None:
        if conn is not None:
            self._forget(conn)  # it holds part of a command: its stream is lost
        self._stream_reset()
        self._protocol_error(errno, "08S01", message, self._stream_seq)

    def _stream_attach(self, conn: BackendConnection) -> None:
        """The streamed command was sent to ``conn``: the rest of it follows."""
        self._stream_to = conn
        conn.on_write_paused = self._stream_write_paused
        if conn.write_paused:
            self._stream_write_paused(True)
        if self._cbuf:
            self._pump()

    def _stream_refused(self, conn: BackendConnection | None = None) -> None:
        """The streamed command is larger than its server's ``max_allowed_packet``: the
        client gets the server's own error (1153), the rest is dropped, and ``conn``, which
        holds part of the command, is closed (as the server closes it)."""
        relay = self._relay
        if relay is not None:
            relay.on_done = None  # the answer is the proxy's now
            relay.on_lost = None
        self._relay = None
        self._stream_to = None
        self._stream_drop = True
        self._stream_blocked = False
        if conn is not None:
            if conn.on_write_paused is not None:
                conn.on_write_paused = None
            conn.abort()  # the session hears of it as of any lost connection
        self._reply_err(ER.NET_PACKET_TOO_LARGE, "08S01", _TOO_LARGE, self._reply_seq)

    def _stream_lost(self) -> None:
        """The backend of a streamed command went away (a server refusing a packet larger
        than its ``max_allowed_packet`` answers 1153 and closes): the rest is dropped."""
        self._stream_to = None
        self._stream_drop = True
        self._stream_blocked = False
        self._check_buffer()
        if self._cbuf:
            self._pump()

    def _stream_write_paused(self, paused: bool) -> None:
        self._stream_blocked = paused
        self._check_buffer()

    def _stream_reset(self) -> None:
        conn = self._stream_to
        if conn is not None and conn.on_write_paused is not None:
            conn.on_write_paused = None
        self._streaming = False
        self._stream_to = None
        self._stream_drop = False
        self._stream_blocked = False
        self._stream_left = 0
        self._stream_more = False

    def _stream_end(self) -> None:
        """The streamed packet has arrived whole: release what was held for the client,
        renumbered after the client's last sequence id."""
        self._stream_reset()
        seq = self._stream_seq
        self._reply_seq = seq
        gate = self._gate
        self._gate = None
        self._write = self.client.write
        relay = self._relay
        if gate:
            first = gate[3]
            renumbered, whole = renumber(gate, seq)
            if whole != len(gate):
                logger.error("session %d: a partial packet was held back; closing", self.id)
                self.abort()
                return
            self._write(renumbered)
            if relay is not None and not relay.done:
                relay.write = self._write
                relay.shift((seq - first) & 0xFF)
        elif relay is not None and not relay.done:
            relay.write = self._write
            relay.expect(seq)
        self._check_buffer()
        if self._done_deferred:
            self._done_deferred = False
            self._done()

    def _take_packet(self) -> tuple[bytes, bytes, int] | None:
        """The next complete command from the buffer: wire bytes, payload, and the sequence
        id the reply starts at.  Closes the client on a framing violation."""
        buf = self._cbuf
        end = len(buf)
        pos = 0
        parts: list[bytes] = []
        seq = 0
        limit = self._config.max_allowed_packet
        while True:
            if end - pos < 4:
                return None
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if buf[pos + 3] != seq:
                self._protocol_error(
                    ER.NET_PACKETS_OUT_OF_ORDER, "08S01", "Got packets out of order", seq + 1
                )
                return None
            size = sum(len(p) for p in parts) + length
            if size > limit:
                self._protocol_error(ER.NET_PACKET_TOO_LARGE, "08S01", _TOO_LARGE, seq + 1)
                return None
            if end - pos - 4 < length:
                return None
            parts.append(bytes(buf[pos + 4 : pos + 4 + length]))
            pos += 4 + length
            seq = (seq + 1) & 0xFF
            if length < _MAX:
                break
        raw = bytes(buf[:pos])
        del buf[:pos]
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        return raw, payload, seq

    def _protocol_error(self, errno: int, sqlstate: str, message: str, seq: int) -> None:
        self._metrics.client_protocol_errors += 1
        self._write = self.client.write
        self._gate = None
        self._write(frame(build_err(ErrPacket(errno, sqlstate, message), self.caps), seq))
        self._cbuf.clear()
        self.close(message)

    def _forward_infile(self) -> bool:
        """Pass the client's LOCAL INFILE packets to the backend; True when the empty packet
        that ends the file was passed (the backend's answer then ends the command)."""
        buf = self._cbuf
        conn = self._infile
        assert conn is not None
        pos = 0
        end = len(buf)
        finished = False
        while end - pos >= 4:
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if end - pos - 4 < length:
                break
            last = length == 0 and not self._infile_cont
            self._infile_cont = length == _MAX
            pos += 4 + length
            if last:
                finished = True
                break
        if pos:
            conn.write(bytes(buf[:pos]))
            del buf[:pos]
        if finished:
            self._infile = None
        return finished

    def _client_write_paused(self, paused: bool) -> None:
        """Flow control: stop reading the backend that feeds a slow client."""
        conn = self._conn
        transport = conn.transport if conn is not None else None
        if transport is None:
            return
        if paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def _on_infile(self, relay: ResponseRelay) -> None:
        conn = self._conn
        if conn is None:
            return
        if relay.local_infile:
            self._infile = conn
            self._infile_cont = False
            if self._cbuf:
                self._pump()
        else:
            conn.write(header(0, relay.infile_seq + 1))
