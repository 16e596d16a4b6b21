"""The client's side of a session: its byte stream framed into commands.

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

The reader hands each command to the session's :class:`~proxy.commands.CommandHandler` and
writes to the client through :attr:`ClientReader.write` (the held-back sink while a command
streams in).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from consistent.classify import MAX_CLASSIFIED_LENGTH
from consistent.errnos import ER
from consistent.protocol import ErrPacket, build_err
from consistent.protocol.constants import MAX_PACKET_PAYLOAD, Command
from proxy.backends import BackendConnection
from proxy.stream import frame, renumber

if TYPE_CHECKING:
    from proxy.session import Session

__all__ = ["STREAM_THRESHOLD", "ClientReader"]

logger = logging.getLogger(__name__)

_CLIENT_BUFFER_LIMIT: Final = 1 << 20
_MAX: Final = MAX_PACKET_PAYLOAD
#: A COM_QUERY packet longer than this streams (its statement is oversized).
STREAM_THRESHOLD: Final = 1 + MAX_CLASSIFIED_LENGTH
#: The first bytes of a streamed packet that are served as its command.
_HEAD: Final = STREAM_THRESHOLD
_COM_QUERY: Final = int(Command.QUERY)
#: mysqld's message for ER_NET_PACKET_TOO_LARGE.
TOO_LARGE: Final = "Got a packet bigger than 'max_allowed_packet' bytes"


class ClientReader:
    """Framing of the client's stream (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._max_packet = session.config.max_allowed_packet
        #: What the client sent that is not served yet.
        self.buffer = bytearray()
        #: Where whatever the session sends the client goes (see the module docstring).
        self.write: Callable[[bytes | bytearray | memoryview], None] = session.client.write
        self._paused_reading = False
        self._infile: BackendConnection | None = None
        self._infile_cont = False
        #: A COM_QUERY is streaming: the packet being passed on as it arrives.
        self.streaming = False
        self._stream_left = 0  # bytes of the current physical packet still to come
        self._stream_more = False  # a 16 MiB piece: another physical packet follows
        self._stream_seq = 0  # sequence id of the next physical packet
        #: Payload bytes of the streamed packet announced so far.
        self.stream_size = 0
        self._stream_to: BackendConnection | None = None
        self._stream_drop = False  # answered without a server: the rest is dropped
        self._stream_blocked = False  # the backend's write buffer is full
        self._gate: bytearray | None = None  # what the client gets once the command is in
        self._done_deferred = False

    def on_data(self, data: bytes) -> None:
        """The client's bytes, as they arrive (the stream-mode sink of its endpoint)."""
        if not self.buffer:
            handler = self._session.handler
            if not handler.busy and self._infile is None:
                n = len(data)
                if n >= 5:
                    length = data[0] | data[1] << 8 | data[2] << 16
                    if n == length + 4 and length < _MAX and data[3] == 0:
                        handler.command(data, data[4:], 1)
                        return
            elif self.streaming:
                used = self._stream_feed(data)
                if self._stream_complete():
                    self.buffer += data[used:]  # the commands after it, served once it ends
                    self._stream_end()
                    return
                if used == len(data):
                    return
                data = data[used:]
        self.buffer += data
        self.pump()

    def pump(self) -> None:
        """Serve what the client buffer holds, as far as the session's state allows."""
        session = self._session
        handler = session.handler
        while not session.closing:
            if self.streaming:
                if not self._stream_buffered():
                    self.check_buffer()
                    return
                continue
            if self._infile is not None:
                if not self._forward_infile():
                    return
                continue
            if handler.busy:
                self.check_buffer()
                return
            started = self._start_stream()
            if started:
                continue
            packet = None if started is not None else self._take_packet()
            if packet is None:
                self.check_buffer()
                return
            raw, payload, next_seq = packet
            handler.command(raw, payload, next_seq)

    @property
    def reading_paused(self) -> bool:
        """Whether reading from the client is paused (a full buffer, or a streamed command's
        backend that cannot take more)."""
        return self._paused_reading

    def check_buffer(self) -> None:
        """Bound what waits behind a running command: reading from the client pauses beyond
        the limit and resumes once the session is idle, and pauses while a streamed command's
        backend cannot take more.  A single command being received is bounded by
        ``max_allowed_packet`` instead (its header announces its size)."""
        transport = self._session.client.transport
        if transport is None:
            return
        if self._stream_blocked or (
            self._session.handler.busy and len(self.buffer) > _CLIENT_BUFFER_LIMIT
        ):
            if not self._paused_reading:
                self._paused_reading = True
                transport.pause_reading()
        elif self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()

    def take_all(self) -> bytes:
        """Everything buffered, taken out (what follows COM_CHANGE_USER is its auth)."""
        leftover = bytes(self.buffer)
        self.buffer.clear()
        return leftover

    def protocol_error(self, errno: int, sqlstate: str, message: str, seq: int) -> None:
        """The client broke the protocol: an ERR saying why, then the connection closes."""
        session = self._session
        session.metrics.client_protocol_errors += 1
        self.write = session.client.write
        self._gate = None
        self.write(frame(build_err(ErrPacket(errno, sqlstate, message), session.caps), seq))
        self.buffer.clear()
        session.close(message)

    # ----------------------------------------------------------------- LOCAL INFILE

    def start_infile(self, conn: BackendConnection) -> None:
        """The server asked for a LOCAL INFILE: what the client sends next goes to ``conn``."""
        self._infile = conn
        self._infile_cont = False
        if self.buffer:
            self.pump()

    def _forward_infile(self) -> bool:
        """Pass the client's LOCAL INFILE packets to the backend; True when the empty packet
        that ends the file was passed (the backend's answer then ends the command)."""
        buf = self.buffer
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

    # ----------------------------------------------------------------- streamed commands

    def _start_stream(self) -> bool | None:
        """Start streaming the COM_QUERY at the head of the buffer when it is long enough to
        (True), once its first bytes are here (False: wait); ``None`` for anything else."""
        buf = self.buffer
        if len(buf) < 5 or buf[4] != _COM_QUERY or buf[3] != 0:
            return None
        length = buf[0] | buf[1] << 8 | buf[2] << 16
        if length <= STREAM_THRESHOLD or length > self._max_packet:
            return None  # gathered (or refused) by _take_packet
        if len(buf) < 4 + _HEAD:
            return False
        raw = bytes(buf[: 4 + _HEAD])
        del buf[: 4 + _HEAD]
        self.streaming = True
        self._stream_left = length - _HEAD
        self._stream_more = length == _MAX
        self._stream_seq = 1
        self.stream_size = length
        self._stream_to = None
        self._stream_drop = False
        self._gate = bytearray()
        self.write = self._hold
        self._session.metrics.streamed_commands += 1
        self._session.handler.command(raw, raw[4:], 1)
        if self._stream_complete():
            self._stream_end()
        return True

    def _stream_buffered(self) -> bool:
        """Pass on the streamed packet's bytes the buffer holds; True once it has ended."""
        buf = self.buffer
        used = self._stream_feed(buf)
        if used:
            del buf[:used]
        if self._stream_complete():
            self._stream_end()
        return not self.streaming

    def _stream_complete(self) -> bool:
        """The streamed packet has arrived whole (:meth:`_stream_end` is due)."""
        return self.streaming and not self._stream_left and not self._stream_more

    def _hold(self, data: bytes | bytearray | memoryview) -> None:
        """The client's sink while a streamed command arrives."""
        gate = self._gate
        if gate is not None:
            gate += data

    def flush_held(self) -> None:
        """The session closes mid-stream: the held-back answer goes out, numbered as if the
        command had ended here."""
        gate = self._gate
        if gate:
            self._gate = None
            client = self._session.client
            self.write = client.write
            client.write(renumber(gate, self._stream_seq)[0])

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
            self.stream_size += length
            if self.stream_size > self._max_packet:
                self._stream_violation(ER.NET_PACKET_TOO_LARGE, TOO_LARGE, conn)
                return n
            if conn is not None:
                limit = conn.max_allowed_packet
                if limit is not None and self.stream_size > limit:
                    if pos > start:
                        conn.write(data[start:pos])
                    self.refused(conn)
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
            self._session.backends.forget(conn)  # it holds part of a command: its stream is lost
        self._stream_reset()
        self.protocol_error(errno, "08S01", message, self._stream_seq)

    def attach(self, conn: BackendConnection) -> None:
        """The streamed command was sent to ``conn``: the rest of it follows."""
        self._stream_to = conn
        conn.on_write_paused = self._stream_write_paused
        if conn.write_paused:
            self._stream_write_paused(True)
        if self.buffer:
            self.pump()

    def refused(self, conn: BackendConnection | None = None) -> None:
        """The streamed command is larger than its server's ``max_allowed_packet``: the
        client gets the server's own error (1153), the rest is dropped, and ``conn``, which
        holds part of the command, is closed (as the server closes it)."""
        session = self._session
        session.router.drop_relay()  # the answer is the proxy's now
        self._stream_to = None
        self._stream_drop = True
        self._stream_blocked = False
        # The write of the command's last bytes to ``conn`` may have just paused reading from
        # the client (its buffer full): with nothing left to block on, reading resumes, or
        # the rest of the command would never arrive.
        self.check_buffer()
        if conn is not None:
            if conn.on_write_paused is not None:
                conn.on_write_paused = None
            conn.abort()  # the session hears of it as of any lost connection
        handler = session.handler
        handler.reply_err(ER.NET_PACKET_TOO_LARGE, "08S01", TOO_LARGE, handler.reply_seq)

    def backend_closed(self, conn: BackendConnection) -> None:
        """A backend connection ended: if the streamed command was going to it (a server
        refusing a packet larger than its ``max_allowed_packet`` answers 1153 and closes),
        the rest is dropped."""
        if conn is not self._stream_to:
            return
        self._stream_to = None
        self._stream_drop = True
        self._stream_blocked = False
        self.check_buffer()
        if self.buffer:
            self.pump()

    def _stream_write_paused(self, paused: bool) -> None:
        self._stream_blocked = paused
        self.check_buffer()

    def _stream_reset(self) -> None:
        conn = self._stream_to
        if conn is not None and conn.on_write_paused is not None:
            conn.on_write_paused = None
        self.streaming = False
        self._stream_to = None
        self._stream_drop = False
        self._stream_blocked = False
        self._stream_left = 0
        self._stream_more = False

    def defer_done(self) -> None:
        """The streamed command was answered before all of it arrived: it ends once the rest
        is here (dropped if no server takes it)."""
        self._done_deferred = True
        if self._stream_to is None and not self._stream_drop:
            self._stream_drop = True
            if self.buffer:
                self.pump()

    def _stream_end(self) -> None:
        """The streamed packet has arrived whole: release what was held for the client,
        renumbered after the client's last sequence id."""
        self._stream_reset()
        session = self._session
        seq = self._stream_seq
        handler = session.handler
        handler.reply_seq = seq
        gate = self._gate
        self._gate = None
        self.write = session.client.write
        relay = session.router.relay
        if gate:
            first = gate[3]
            renumbered, whole = renumber(gate, seq)
            if whole != len(gate):
                logger.error("session %d: a partial packet was held back; closing", session.id)
                session.abort()
                return
            self.write(renumbered)
            if relay is not None and not relay.done:
                relay.write = self.write
                relay.shift((seq - first) & 0xFF)
        elif relay is not None and not relay.done:
            relay.write = self.write
            relay.expect(seq)
        self.check_buffer()
        if self._done_deferred:
            self._done_deferred = False
            handler.done()

    def _take_packet(self) -> tuple[bytes, bytes, int] | None:
        """The next complete command from the buffer: wire bytes, payload, and the sequence
        id the reply starts at.  Closes the client on a framing violation."""
        buf = self.buffer
        end = len(buf)
        pos = 0
        parts: list[bytes] = []
        seq = 0
        limit = self._max_packet
        while True:
            if end - pos < 4:
                return None
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if buf[pos + 3] != seq:
                self.protocol_error(
                    ER.NET_PACKETS_OUT_OF_ORDER, "08S01", "Got packets out of order", seq + 1
                )
                return None
            size = sum(len(p) for p in parts) + length
            if size > limit:
                self.protocol_error(ER.NET_PACKET_TOO_LARGE, "08S01", TOO_LARGE, seq + 1)
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
