"""One connection's bytes as the event loop delivers them: a buffer, a waiter, flow control.

:class:`PacketProtocol` is the asyncio protocol of an accepted socket.  It appends what
arrives to :attr:`PacketProtocol.buffer` and wakes the one reader (the connection's
:class:`~consistent.emulator.wire.stream.PacketStream`) once the buffer holds as many bytes
as it waits for, so that a command that arrived whole costs no wake-up at all.  Reading
pauses while more than :data:`READ_HIGH_WATER` bytes beyond what the reader asked for are
buffered (a client that pipelines, or floods); writing waits while the transport's own
buffer is above its high-water mark.

Deadlines are checked by one timer per connection, armed when a wait needs one and moved
only when it fires (see :meth:`PacketProtocol.want`): an idle connection's
``wait_timeout`` does not cost a timer per command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, Protocol

__all__ = ["READ_HIGH_WATER", "PacketProtocol", "Transport"]

#: Bytes buffered beyond the awaited size before reading from the socket pauses.
READ_HIGH_WATER: Final = 1 << 17


class Transport(Protocol):
    """What a connection uses of its transport (asyncio's, or uvloop's, which is not an
    :class:`asyncio.Transport` subclass)."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


class _Timer(Protocol):
    def cancel(self) -> None: ...


class PacketProtocol:
    """The transport side of one accepted connection (an :class:`asyncio.Protocol`, compiled;
    the event loops call its methods by name); see the module docstring.

    ``on_connect(protocol)`` is called once the transport exists (it starts the connection's
    task).  :attr:`closed` is set when the peer closed or the connection was lost;
    :attr:`lost` is the error it was lost with, if any (a reader raises it).
    """

    def __init__(self, on_connect: Callable[[PacketProtocol], None]) -> None:
        self.buffer = bytearray()
        self.loop = asyncio.get_running_loop()  # protocols are made on the serving loop
        self.transport: Transport | None = None
        self.closed = False
        self.lost: BaseException | None = None
        self._on_connect = on_connect
        self._wanted = 0
        self._waiter: asyncio.Future[None] | None = None
        self._deadline: float | None = None
        self._timer: _Timer | None = None
        self._timer_at = 0.0
        self._reading_paused = False
        #: Whether the transport's write buffer is above its high-water mark.
        self.writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._finished = False
        self._gone: asyncio.Future[None] | None = None

    # ----- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: Transport) -> None:
        self.transport = transport
        self._on_connect(self)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        size = len(buffer)
        if size >= self._wanted:
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                if not waiter.done():
                    waiter.set_result(None)
            if size - self._wanted > READ_HIGH_WATER and not self._reading_paused:
                self._reading_paused = True
                assert self.transport is not None
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._end(None)
        return True  # half-closed: what the client sent before is still answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._finished = True
        self._end(exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        drain = self._drain_waiter
        if drain is not None and not drain.done():
            drain.set_exception(ConnectionResetError("connection lost"))
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        drain = self._drain_waiter
        if drain is not None and not drain.done():
            drain.set_result(None)

    # ----- for the reader ------------------------------------------------------------------

    def _end(self, exc: BaseException | None) -> None:
        self.closed = True
        if exc is not None and self.lost is None:
            self.lost = exc
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def consumed(self) -> None:
        """The reader took bytes out of :attr:`buffer`: resume reading if it was paused."""
        if self._reading_paused and len(self.buffer) - self._wanted <= READ_HIGH_WATER:
            self._reading_paused = False
            if self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def want(self, size: int, deadline: float | None) -> asyncio.Future[None] | None:
        """A future that is done once :attr:`buffer` holds ``size`` bytes or the connection
        ended (:attr:`closed`), and fails with :class:`TimeoutError` once the loop's clock
        passes ``deadline`` (``None``: no bound); ``None`` when that is already so.  Call
        :meth:`unwant` after awaiting it."""
        self._wanted = size
        self.consumed()
        if len(self.buffer) >= size or self.closed:
            return None
        loop = self.loop
        self._deadline = deadline
        if deadline is not None and (self._timer is None or self._timer_at > deadline):
            self._arm(loop, deadline)
        waiter = loop.create_future()
        self._waiter = waiter
        return waiter

    def unwant(self) -> None:
        """The wait of :meth:`want` is over (done, failed or cancelled)."""
        self._waiter = None
        self._deadline = None

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        """The deadline timer fired: time out the wait if it is past its deadline, else
        follow the wait's (later) deadline; with no wait, stay disarmed until the next."""
        self._timer = None
        deadline = self._deadline
        waiter = self._waiter
        if deadline is None or waiter is None or waiter.done():
            return
        loop = self.loop
        if loop.time() >= deadline:
            self._waiter = None
            waiter.set_exception(TimeoutError())
        else:
            self._arm(loop, deadline)

    # ----- for the writer ------------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its low-water mark
        (:class:`ConnectionResetError` if the connection is lost meanwhile)."""
        if self._finished:
            raise ConnectionResetError("connection lost")
        if not self.writing_paused:
            return
        waiter = self.loop.create_future()
        self._drain_waiter = waiter
        try:
            await waiter
        finally:
            self._drain_waiter = None

    async def wait_gone(self) -> None:
        """Wait until the connection is lost (after :meth:`asyncio.Transport.close`)."""
        if self._finished or self.transport is None:
            return
        if self._gone is None:
            self._gone = self.loop.create_future()
        await self._gone
