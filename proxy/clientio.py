"""The client's side of a session: framing its byte stream into commands.

Commands arrive one at a time; what the client sends while one runs is buffered (reading pauses
beyond a bound) and served afterwards, except the file a LOCAL INFILE request asked for, which
flows to the backend as it arrives.  A framing violation (sequence id, size) closes this client
only, after an ERR saying why.
"""

from __future__ import annotations

import logging
from typing import Final

from consistent.protocol import (
    ErrPacket,
    build_err,
)
from consistent.protocol.constants import MAX_PACKET_PAYLOAD
from proxy.relay import ResponseRelay
from proxy.sessionbase import (
    ER_NET_PACKET_TOO_LARGE,
    ER_NET_PACKETS_OUT_OF_ORDER,
    SessionBase,
)
from proxy.stream import frame, header

__all__ = ["ClientInput"]

logger = logging.getLogger(__name__)

_CLIENT_BUFFER_LIMIT: Final = 1 << 20
_MAX: Final = MAX_PACKET_PAYLOAD


class ClientInput(SessionBase):
    """Framing of the client's stream (see the module docstring)."""

    def _on_client_data(self, data: bytes) -> None:
        if not self._cbuf and not self._busy and self._infile is None:
            n = len(data)
            if n >= 5:
                length = data[0] | data[1] << 8 | data[2] << 16
                if n == length + 4 and length < _MAX and data[3] == 0:
                    self._command(data, data[4:], 1)
                    return
        self._cbuf += data
        self._pump()

    def _pump(self) -> None:
        """Serve what the client buffer holds, as far as the session's state allows."""
        while not self._closing:
            if self._infile is not None:
                if not self._forward_infile():
                    return
                continue
            if self._busy:
                self._check_buffer()
                return
            packet = self._take_packet()
            if packet is None:
                self._check_buffer()
                return
            raw, payload, next_seq = packet
            self._command(raw, payload, next_seq)

    def _check_buffer(self) -> None:
        """Bound what waits behind a running command: reading from the client pauses beyond
        the limit and resumes once the session is idle.  A single command being received is
        bounded by ``max_allowed_packet`` instead (its header announces its size)."""
        transport = self.client.transport
        if transport is None:
            return
        if self._busy and len(self._cbuf) > _CLIENT_BUFFER_LIMIT:
            if not self._paused_reading:
                self._paused_reading = True
                transport.pause_reading()
        elif self._paused_reading:
            self._paused_reading = False
            transport.resume_reading()

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
                    ER_NET_PACKETS_OUT_OF_ORDER, "08S01", "Got packets out of order", seq + 1
                )
                return None
            size = sum(len(p) for p in parts) + length
            if size > limit:
                self._protocol_error(
                    ER_NET_PACKET_TOO_LARGE,
                    "08S01",
                    "Got a packet bigger than 'max_allowed_packet' bytes",
                    seq + 1,
                )
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
