"""The response relay: finds where each backend response ends, and rewrites only what it must.

A backend's answer to one command is fed to a :class:`ResponseRelay` chunk by chunk as the socket
delivers it.  The relay walks the packet headers (3-byte length, 1-byte sequence id) and knows,
from the command and the packets seen so far, what each packet is:

==============  =====================================================================
command          response
==============  =====================================================================
COM_QUERY        OK | ERR | LOCAL INFILE request | result set; result sets and OKs repeat
                 while their status has ``SERVER_MORE_RESULTS_EXISTS``
COM_STMT_EXEC    OK | ERR | binary result set (or column definitions and a cursor)
COM_STMT_PREP    PREPARE_OK, parameter definitions, column definitions | ERR
COM_FIELD_LIST   column definitions, then a terminator | ERR
COM_STMT_FETCH   rows, then a terminator | ERR
others           one packet (OK, ERR, EOF, or COM_STATISTICS' string)
==============  =====================================================================

A result set is: column count, column definitions, [EOF], rows, terminator.  Without
``CLIENT_DEPRECATE_EOF`` the terminator is a 5-byte EOF and an EOF also follows the column
definitions; with it there is no middle EOF and the terminator is an OK packet with a 0xFE
header, which can carry session state (reference §1.1, §1.5).

Bytes pass through untouched wherever no change is needed; only row packets' first byte and the
small OK/EOF/ERR packets are ever looked at.  The relay changes the stream in exactly these
cases, keeping every later sequence id correct (``_delta`` counts packets injected minus
packets removed):

* the client and the backend differ on ``CLIENT_DEPRECATE_EOF``: the EOF after column (and
  parameter) definitions is injected or removed, and terminators are translated EOF <-> OK;
* the client lacks ``CLIENT_SESSION_TRACK``: session state is removed from OK packets (and
  ``SERVER_SESSION_STATE_CHANGED`` cleared) so that the packet stays what that client expects;
* COM_STMT_PREPARE: the statement id is replaced by the one the client sees;
* a LOCAL INFILE request the configuration refuses: it never reaches the client, the backend
  gets an empty file, and the client gets an ERR instead of the final OK.

OK packets whose status says the session state changed are kept in :attr:`ResponseRelay.state_oks`
so that the session can feed the GTIDs they carry to the policy.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from consistent.errnos import ER
from consistent.errors import RemoteProtocolError
from consistent.protocol import (
    Capability,
    ErrPacket,
    OkPacket,
    PacketDecoder,
    ServerStatus,
    build_err,
    build_ok,
    parse_column_definition41,
    parse_err,
    parse_ok,
    parse_text_row,
)
from consistent.protocol.constants import MAX_PACKET_PAYLOAD

__all__ = [
    "QueryResult",
    "ResponseKind",
    "ResponseRelay",
    "discard",
    "parse_response",
]

_HEADER: Final = struct.Struct("<I")
_EOF41: Final = struct.Struct("<BHH")  # 0xFE, warnings, status
_OK_FE: Final = struct.Struct("<BBBHH")
_TERMINATOR_EOF: Final = struct.Struct(
    "<IBHH"
)  # header, then an EOF's payload  # 0xFE, 0 affected, 0 insert id, status, warnings
_MAX: Final = MAX_PACKET_PAYLOAD
_EOF_MAX_LENGTH: Final = 9  # an EOF is shorter than 9 bytes (reference §1.1)

_DEPRECATE_EOF: Final = int(Capability.DEPRECATE_EOF)
_SESSION_TRACK: Final = int(Capability.SESSION_TRACK)
_STATE_CHANGED: Final = int(ServerStatus.SESSION_STATE_CHANGED)
_MORE_RESULTS: Final = int(ServerStatus.MORE_RESULTS_EXISTS)
_CURSOR_EXISTS: Final = int(ServerStatus.CURSOR_EXISTS)
_AUTOCOMMIT: Final = int(ServerStatus.AUTOCOMMIT)


class ResponseKind(IntEnum):
    """Which command a response answers (it decides the response's shape)."""

    #: COM_QUERY: OK, ERR, LOCAL INFILE, text result sets, multi-results.
    QUERY = 1
    #: COM_STMT_EXECUTE: OK, ERR, binary result sets, a cursor.
    EXECUTE = 2
    #: COM_STMT_PREPARE.
    PREPARE = 3
    #: COM_FIELD_LIST: column definitions and a terminator.
    FIELD_LIST = 4
    #: COM_STMT_FETCH: rows and a terminator.
    FETCH = 5
    #: One packet: OK, ERR, EOF (COM_SET_OPTION) or a string (COM_STATISTICS).
    SIMPLE = 6


class _S(IntEnum):
    """Relay states (what the next packet is)."""

    FIRST = 0  # first packet of a result: OK / ERR / INFILE / column count
    COLDEFS = 1  # column definitions of a result set, counted
    COLDEF_EOF = 2  # the EOF after them (backend without DEPRECATE_EOF)
    ROWS = 3  # rows until a terminator or ERR
    PREPARE_FIRST = 4
    PARAMS = 5  # parameter definitions of a prepared statement, counted
    PCOLS = 6  # column definitions of a prepared statement, counted
    BLOCK_EOF = 7  # the EOF after a prepared statement's definitions
    SIMPLE = 8
    INFILE_REFUSED = 9  # the backend's answer to the empty file we sent instead of the client
    DONE = 10


# Plain ints for the feed loop (enum attribute lookups cost more than the comparisons).
_FIRST: Final = int(_S.FIRST)
_ROWS: Final = int(_S.ROWS)
_DONE: Final = int(_S.DONE)
_COUNTED: Final = frozenset({int(_S.COLDEFS), int(_S.PARAMS), int(_S.PCOLS)})

_INITIAL: Final = {
    ResponseKind.QUERY: _S.FIRST,
    ResponseKind.EXECUTE: _S.FIRST,
    ResponseKind.PREPARE: _S.PREPARE_FIRST,
    ResponseKind.FIELD_LIST: _S.ROWS,
    ResponseKind.FETCH: _S.ROWS,
    ResponseKind.SIMPLE: _S.SIMPLE,
}


def discard(_data: bytes | bytearray | memoryview) -> None:
    """A sink that drops what it is given (a pipelined read whose wait timed out)."""


def _skip_lenenc(payload: bytes, pos: int) -> int:
    first = payload[pos]
    if first < 0xFB:
        return pos + 1
    if first == 0xFC:
        return pos + 3
    if first == 0xFD:
        return pos + 4
    if first == 0xFE:
        return pos + 9
    raise RemoteProtocolError(f"invalid length-encoded integer prefix 0x{first:02x}")


def _ok_status(payload: bytes) -> tuple[int, int]:
    """Status flags and warning count of an OK packet (0x00 or 0xFE header)."""
    if len(payload) >= 7 and payload[1] < 0xFB and payload[2] < 0xFB:
        return payload[3] | payload[4] << 8, payload[5] | payload[6] << 8
    pos = _skip_lenenc(payload, _skip_lenenc(payload, 1))
    if len(payload) < pos + 4:
        raise RemoteProtocolError("truncated OK packet")
    return payload[pos] | payload[pos + 1] << 8, payload[pos + 2] | payload[pos + 3] << 8


def _ok_insert_id(payload: bytes) -> int:
    """The ``last_insert_id`` of an OK packet (its second length-encoded integer)."""
    if payload[1] < 0xFB and payload[2] < 0xFB:
        return payload[2]
    pos = _skip_lenenc(payload, 1)
    if len(payload) <= pos:
        raise RemoteProtocolError("truncated OK packet")
    return _lenenc_value(payload[pos:])


def _eof_status(payload: bytes) -> tuple[int, int]:
    """Status flags and warning count of a 5-byte EOF packet."""
    if len(payload) < 5:
        return _AUTOCOMMIT, 0
    return payload[3] | payload[4] << 8, payload[1] | payload[2] << 8


def _lenenc_value(payload: bytes) -> int:
    first = payload[0]
    if first < 0xFB:
        return first
    end = _skip_lenenc(payload, 0)
    if len(payload) < end:
        raise RemoteProtocolError("truncated column count")
    return int.from_bytes(payload[1:end], "little")


class ResponseRelay:
    """Relays one response from a backend connection to a sink (see the module docstring).

    ``write`` receives the bytes for the client (it may be replaced until the first byte is
    fed, which is how a pipelined read is released or discarded).  ``status_hint`` is the
    status used for an injected EOF.  ``local_infile`` allows LOCAL INFILE requests to reach
    the client; ``client_stmt_id`` is the id the client sees for a statement being prepared.
    """

    __slots__ = (
        "_after",
        "_bcaps",
        "_bdep",
        "_ccaps",
        "_cdep",
        "_cont",
        "_count",
        "_ctrack",
        "_data",
        "_delta",
        "_drop",
        "_eof_after",
        "_expect",
        "_general",
        "_infile_pending",
        "_need",
        "_next",
        "_parts",
        "_pending_eof",
        "_pos",
        "_region",
        "_stash",
        "_state",
        "client_stmt_id",
        "deadline",
        "done",
        "error",
        "infile",
        "infile_seq",
        "insert_id",
        "kind",
        "last_seq",
        "local_infile",
        "on_done",
        "on_infile",
        "on_lost",
        "prepared",
        "state_oks",
        "status",
        "write",
        "wrote",
    )

    def __init__(
        self,
        kind: ResponseKind,
        backend_caps: int,
        client_caps: int,
        write: Callable[[bytes | bytearray | memoryview], object],
        *,
        status_hint: int = _AUTOCOMMIT,
        local_infile: bool = False,
        client_stmt_id: int | None = None,
    ) -> None:
        self.kind = kind
        self.write = write
        self._bcaps = backend_caps
        self._ccaps = client_caps
        self._bdep = bool(backend_caps & _DEPRECATE_EOF)
        self._cdep = bool(client_caps & _DEPRECATE_EOF)
        self._ctrack = bool(client_caps & _SESSION_TRACK)
        self._state = _INITIAL[kind]
        self._expect = -1
        self._clear_general()
        #: The walk over one fed chunk (see :meth:`feed`): the chunk (after what was stashed),
        #: the position reached, where the bytes passed unchanged begin, and what goes to the
        #: sink before them once anything had to be changed (``None`` while nothing was).
        self._data = b""
        self._pos = 0
        self._region = 0
        self._parts: list[bytes] | None = None
        self.local_infile = local_infile
        self.client_stmt_id = client_stmt_id
        #: True once the response's last packet was processed.
        self.done = False
        #: Seconds the server may stay silent on this response, when not the connection's
        #: read deadline (a wait statement is silent up to its own timeout).
        self.deadline: float | None = None
        #: Status flags of the last OK/EOF seen (the hint until then).
        self.status = status_hint
        #: The ERR payload, when the response ended with an error.
        self.error: bytes | None = None
        #: OK payloads (as the backend sent them) that carry session state.
        self.state_oks: list[bytes] | None = None
        #: The last non-zero ``last_insert_id`` of the response's OK packets (0: none).
        self.insert_id = 0
        #: True once any byte went to the sink.
        self.wrote = False
        #: Sequence id of the last packet given to the sink (-1: none yet).
        self.last_seq = -1
        #: COM_STMT_PREPARE: (backend statement id, number of columns, number of params).
        self.prepared: tuple[int, int, int] | None = None
        #: The file name of a LOCAL INFILE request passed to the client.
        self.infile: bytes | None = None
        #: Backend sequence id of that request (the file's packets follow it).
        self.infile_seq = 0
        #: Called with the relay when a LOCAL INFILE request arrived (passed or refused).
        self.on_infile: Callable[[ResponseRelay], None] | None = None
        #: Called with the relay when the response is complete.
        self.on_done: Callable[[ResponseRelay], None] | None = None
        #: Called with the relay and the reason when the backend connection died first.
        self.on_lost: Callable[[ResponseRelay, BaseException | None], None] | None = None

    def _clear_general(self) -> None:
        """The state only the general feed loop changes (the one-pass path never does)."""
        self._general = False
        self._count = 0
        self._need = 0
        self._cont = False
        self._delta = 0
        self._drop = False
        self._after = False
        self._eof_after = False
        self._infile_pending = False
        self._stash = b""
        self._pending_eof = False
        self._next = _S.DONE
        self.prepared = None
        self.infile = None
        self.infile_seq = 0

    def reuse(self, kind: ResponseKind, status_hint: int) -> None:
        """Make this finished relay ready for the next response on the same connection, to
        the same sink and with the same callbacks: cheaper than a new relay per command.
        Only what the last response changed is reset."""
        if not self.done:
            raise RuntimeError("a relay is reused only once its response is complete")
        if self._general:
            self._clear_general()
        self.kind = kind
        self._state = _INITIAL[kind]
        self._expect = -1
        self.done = False
        self.deadline = None
        self.wrote = False
        self.last_seq = -1
        self.status = status_hint
        self.error = None
        self.state_oks = None
        self.insert_id = 0

    @property
    def mid_packet(self) -> bool:
        """True when part of a packet went to the sink and the rest has not arrived: the
        client's stream cannot take another packet until the connection is closed."""
        return self._need > 0

    @property
    def next_seq(self) -> int:
        """The sequence id a packet appended to the client's stream must carry."""
        return (self.last_seq + 1) & 0xFF

    def expect(self, seq: int) -> None:
        """The response (not fed yet) must reach the sink numbered from ``seq``, whatever
        sequence id the backend gives its first packet (an early error to a command that was
        still arriving is numbered after the part the backend had read)."""
        self._expect = seq & 0xFF

    def shift(self, offset: int) -> None:
        """Number every packet still to come ``offset`` further (what was already written was
        renumbered by the caller)."""
        self._general = True
        self._delta = (self._delta + offset) & 0xFF
        if self.last_seq >= 0:
            self.last_seq = (self.last_seq + offset) & 0xFF

    def fail_seq(self, command_seq: int) -> int:
        """Sequence id for an ERR that replaces the rest of this response."""
        return self.next_seq if self.last_seq >= 0 else (command_seq + 1) & 0xFF

    # ----------------------------------------------------------------- the feed loop

    def feed(self, chunk: bytes) -> int:
        """Process a chunk from the backend; returns how many of its bytes belong to this
        response (all of them unless :attr:`done`).  Raises :class:`RemoteProtocolError` on
        bytes that are not a valid response."""
        if self._expect >= 0 and len(self._stash) + len(chunk) >= 4:
            self._number_from_expected(chunk)
        if (
            self.last_seq < 0
            and self._state == _FIRST
            and not self._stash
            and not self._delta
            and self._whole(chunk)
        ):
            return len(chunk)
        self._general = True
        stash = self._stash
        if stash:
            data = stash + chunk
            offset = len(stash)
            self._stash = b""
        else:
            data = chunk
            offset = 0
        n = len(data)
        self._data = data
        self._pos = 0
        self._region = 0
        self._parts = None
        self._walk(n)
        pos = self._pos
        if not self.done and pos < n and not self._need:
            self._stash = data[pos:]
        self._write_walked(n)
        if self.done:
            return pos - offset
        return len(chunk)

    def _number_from_expected(self, chunk: bytes) -> None:
        """Renumber the response so that its first packet carries the id :meth:`expect` set."""
        first_seq = (self._stash + chunk[:4])[3]
        self._delta = (self._delta + self._expect - first_seq) & 0xFF
        self._expect = -1

    def _walk(self, n: int) -> None:
        """Walk the packets of ``_data[:n]`` from ``_pos`` until the chunk or the response
        ends, collecting the changes (``_parts``, ``_region``) for :meth:`_write_walked`."""
        data = self._data
        while True:
            if self._need and not self._skip_body(n):
                return
            pos = self._pos
            if n - pos < 4:
                return
            length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            seq = data[pos + 3]
            if self._cont or self._state in _COUNTED:
                if self._pass_unseen(length, seq):
                    return
                continue
            if self._state == _ROWS:
                if n - pos < 5:
                    return
                first = data[pos + 4]
                if not (
                    (first == 0xFE and length < _MAX and (self._bdep or length < _EOF_MAX_LENGTH))
                    or first == 0xFF
                ):
                    self._pass_row(length, seq)
                    continue
                if n - pos - 4 < length:
                    return
                rep = self._rows_end(data[pos + 4 : pos + 4 + length], first, seq)
            else:
                if n - pos - 4 < length:
                    return
                if length >= _MAX:
                    raise RemoteProtocolError("unexpected 16 MiB packet in a response")
                rep = _HANDLERS[self._state](self, data[pos + 4 : pos + 4 + length])
            if self._relay_read(length, seq, rep):
                return

    def _skip_body(self, n: int) -> bool:
        """Pass the rest of the current packet's body unseen; False when the chunk ends first
        or the response is complete."""
        need = self._need
        pos = self._pos
        if n - pos < need:
            self._need = need - (n - pos)
            self._pos = n
            return False
        self._pos = pos + need
        self._need = 0
        return not (self._after and self._close_block())

    def _pass_unseen(self, length: int, seq: int) -> bool:
        """A packet passed through without looking inside: a continuation packet, or a column
        or parameter definition (counted).  True when the response is complete."""
        self._pass_header(length, seq)
        if length == _MAX:
            self._cont = True
            return False
        was_cont = self._cont
        self._cont = False
        if was_cont or self._state == _ROWS:
            return False
        self._count -= 1
        if self._count:
            return False
        self._end_block()
        # An empty last definition: its block closes now, not at the next body.
        return not self._need and self._after and self._close_block()

    def _pass_row(self, length: int, seq: int) -> None:
        """A row passed through unseen, after the EOF a client without DEPRECATE_EOF expects
        before the first row."""
        if self._pending_eof:
            self._pending_eof = False
            self._inject_eof(seq + self._delta)
        self._pass_header(length, seq)
        self._cont = length == _MAX

    def _rows_end(self, payload: bytes, first: int, seq: int) -> bytes | None:
        """The terminator or ERR after the rows (``first`` is its first byte), after the EOF
        still owed to a client without DEPRECATE_EOF (not before a cursor's terminator: its
        response has no rows)."""
        if self._pending_eof:
            self._pending_eof = False
            cursor = (
                first == 0xFE
                and self.kind == ResponseKind.EXECUTE
                and _ok_status(payload)[0] & _CURSOR_EXISTS
            )
            if not cursor:
                self._inject_eof(seq + self._delta)
        return self._terminator(payload) if first == 0xFE else self._err(payload)

    def _relay_read(self, length: int, seq: int, rep: bytes | None) -> bool:
        """Relay the packet a handler read whole: dropped, replaced by ``rep``, or passed
        renumbered.  True when the response is complete."""
        pos = self._pos
        end = pos + 4 + length
        if self._drop:
            self._drop = False
            self._replace(pos, end, b"")
            self._delta -= 1
        elif rep is not None:
            delta = self._delta
            self._replace(pos, end, _HEADER.pack(len(rep) | ((seq + delta) & 0xFF) << 24) + rep)
            self.last_seq = (seq + delta) & 0xFF
        else:
            self._renumber(length, seq)
        self._pos = end
        if self._infile_pending:
            self._infile_request(seq)
        if self._state == _DONE:
            self.done = True
            return True
        return False

    def _infile_request(self, seq: int) -> None:
        """A LOCAL INFILE request was relayed (or refused): tell the session."""
        self._infile_pending = False
        self.infile_seq = seq
        if not self.local_infile:
            self._delta -= 1  # the empty file the session sends takes a sequence id
        if self.on_infile is not None:
            self.on_infile(self)

    def _close_block(self) -> bool:
        """The last counted definition is complete: inject the EOF a client without
        DEPRECATE_EOF expects after it, if owed.  True when the response is complete."""
        self._after = False
        if self._eof_after:
            self._eof_after = False
            self._inject_eof(self.last_seq + 1)
        if self._state == _DONE:
            self.done = True
            return True
        return False

    def _pass_header(self, length: int, seq: int) -> None:
        """The current packet's header, renumbered; its body (``length`` bytes) passes
        unseen."""
        self._renumber(length, seq)
        self._pos += 4
        self._need = length

    def _renumber(self, length: int, seq: int) -> None:
        """The current packet's header with its sequence id moved by ``_delta`` (left as it
        is when nothing was injected or removed before it)."""
        delta = self._delta
        if delta:
            pos = self._pos
            self._replace(pos, pos + 4, _HEADER.pack(length | ((seq + delta) & 0xFF) << 24))
        self.last_seq = (seq + delta) & 0xFF

    def _inject_eof(self, seq: int) -> None:
        """An EOF numbered ``seq`` before the current packet; every later packet is numbered
        one further."""
        pos = self._pos
        self._replace(pos, pos, self._frame_eof(seq))
        self._delta += 1

    def _replace(self, start: int, end: int, inserted: bytes) -> None:
        """The walk's output: the bytes passed unchanged up to ``start``, then ``inserted``
        in place of ``_data[start:end]``."""
        parts = self._parts
        if parts is None:
            parts = self._parts = []
        parts.append(self._data[self._region : start])
        parts.append(inserted)
        self._region = end

    def _write_walked(self, n: int) -> None:
        """Write what the walk passed (``_data[:_pos]`` with its changes) to the sink."""
        data = self._data
        region = self._region
        pos = self._pos
        parts = self._parts
        self._data = b""
        self._parts = None
        if parts is None:
            if region < pos:
                self.wrote = True
                self.write(data if region == 0 and pos == n else data[region:pos])
        else:
            if region < pos:
                parts.append(data[region:pos])
            self.wrote = True
            self.write(b"".join(parts))

    def _whole(self, data: bytes) -> bool:
        """The fast path: ``data`` is exactly one whole response to a query or an execute, of
        the commonest shapes (an OK, an ERR, or one result set), and needs at most the EOF
        translation for a client without DEPRECATE_EOF.  It is relayed with one walk over
        the packet headers and one write.  Returns False, having changed nothing, for
        anything else (partial or several responses, multi-results, cursors, LOCAL INFILE,
        16 MiB packets, session state to strip, a backend without DEPRECATE_EOF for a client
        with it), which the general loop then handles."""
        n = len(data)
        if n < 5:
            return False
        length = data[0] | data[1] << 8 | data[2] << 16
        first = data[4]
        if first in {0x00, 0xFF}:
            if length + 4 != n:
                return False
            payload = data[4:]
            if first == 0xFF:
                self.error = payload
            else:
                status = _ok_status(payload)[0]
                if status & _MORE_RESULTS:
                    return False
                if status & _STATE_CHANGED:
                    if not self._ctrack:
                        return False
                    self.state_oks = [payload]
                self.status = status
                if payload[2] or payload[1] >= 0xFB:
                    self.insert_id = _ok_insert_id(payload)
            self._finish(data, data[3])
            return True
        if first >= 0xFB:
            return False  # LOCAL INFILE, a large column count, or not a result
        bdep = self._bdep
        pos = 4 + length
        for _ in range(first):  # the column definitions
            if n - pos < 4:
                return False
            length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            if length >= _MAX:
                return False
            pos += 4 + length
        if not bdep:  # the EOF after them
            if n - pos < 9 or data[pos + 4] != 0xFE or data[pos + 7] & _CURSOR_EXISTS:
                return False
            pos += 4 + (data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16)
        rows = pos
        while True:
            if n - pos < 5:
                return False
            length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            if length >= _MAX:
                return False
            first = data[pos + 4]
            if first == 0xFE and (bdep or length < _EOF_MAX_LENGTH):
                break
            if first == 0xFF:
                return False
            pos += 4 + length
        if pos + 4 + length != n:
            return False
        payload = data[pos + 4 :]
        status, warnings = _ok_status(payload) if bdep else _eof_status(payload)
        if status & (_MORE_RESULTS | _CURSOR_EXISTS):
            return False
        cdep = self._cdep
        if cdep and not bdep:
            return False
        changed = bdep and status & _STATE_CHANGED
        if changed and cdep and not self._ctrack:
            return False
        if bdep == cdep:
            out = data
            seq = data[pos + 3]
        else:
            # A DEPRECATE_EOF backend, a client without it: an EOF after the definitions
            # (with the status known before this response), every later packet one sequence
            # id further, and the OK terminator as an EOF.
            out = self._translated(data, rows, pos, status, warnings)
            seq = (data[pos + 3] + 1) & 0xFF
        if changed:
            self.state_oks = [payload]
        self.status = status
        self._finish(out, seq)
        return True

    def _translated(self, data: bytes, rows: int, pos: int, status: int, warnings: int) -> bytes:
        """``_whole``'s EOF translation: ``rows`` is where the rows start, ``pos`` where the
        terminator is."""
        # The injected EOF takes the sequence id of the first row (as ``_frame_eof`` frames
        # it, in one pack).
        eof = _TERMINATOR_EOF.pack(
            5 | data[rows + 3] << 24, 0xFE, 0, self.status & ~_STATE_CHANGED & ~_MORE_RESULTS
        )
        renumbered = bytearray(data[rows:pos])
        at = 0
        end = pos - rows
        while at < end:
            renumbered[at + 3] = (renumbered[at + 3] + 1) & 0xFF
            at += 4 + (renumbered[at] | renumbered[at + 1] << 8 | renumbered[at + 2] << 16)
        seq = (data[pos + 3] + 1) & 0xFF
        terminator = _TERMINATOR_EOF.pack(5 | seq << 24, 0xFE, warnings, status & ~_STATE_CHANGED)
        return b"".join((data[:rows], eof, renumbered, terminator))

    def _finish(self, out: bytes, last_seq: int) -> None:
        self._state = _S.DONE
        self.done = True
        self.wrote = True
        self.last_seq = last_seq
        self.write(out)

    # ----------------------------------------------------------------- packet handlers

    def _frame_eof(self, seq: int) -> bytes:
        status = self.status & ~_STATE_CHANGED & ~_MORE_RESULTS
        payload = _EOF41.pack(0xFE, 0, status)
        self.last_seq = seq & 0xFF
        return _HEADER.pack(len(payload) | (seq & 0xFF) << 24) + payload

    def _end_block(self) -> None:
        """After the last counted definition: decide what comes next.  The EOF a client
        without DEPRECATE_EOF expects is injected after the packet's body (prepared
        statements) or before the first row (result sets, see ``_pending_eof``: a cursor's
        response has no rows and its own terminator)."""
        state = self._state
        self._after = True
        if state == _S.COLDEFS:
            if self._bdep:
                self._state = _S.ROWS
                self._pending_eof = not self._cdep
            else:
                self._state = _S.COLDEF_EOF
            return
        nxt = _S.DONE
        if state == _S.PARAMS and self.prepared is not None and self.prepared[1]:
            nxt = _S.PCOLS
            self._count = self.prepared[1]
        if self._bdep:
            self._state = nxt
            self._eof_after = not self._cdep
        else:
            self._state = _S.BLOCK_EOF
            self._next = nxt

    def _first(self, payload: bytes) -> bytes | None:
        if not payload:
            raise RemoteProtocolError("empty response packet")
        first = payload[0]
        if first == 0x00:
            rep = self._ok(payload)
            if not self.status & _MORE_RESULTS:
                self._state = _S.DONE
            return rep
        if first == 0xFF:
            return self._err(payload)
        if first == 0xFB and self.kind == ResponseKind.QUERY:
            return self._infile(payload)
        if first == 0xFE:
            raise RemoteProtocolError("unexpected 0xFE packet at the start of a result")
        count = _lenenc_value(payload)
        if count == 0:
            raise RemoteProtocolError("a result set without columns")
        self._count = count
        self._state = _S.COLDEFS
        return None

    def _coldef_eof(self, payload: bytes) -> bytes | None:
        if not payload or payload[0] != 0xFE:
            raise RemoteProtocolError("expected an EOF after the column definitions")
        status, warnings = _eof_status(payload)
        self.status = status
        if status & _CURSOR_EXISTS and self.kind == ResponseKind.EXECUTE:
            # A cursor was opened: no rows follow (they come with COM_STMT_FETCH).
            self._state = _S.DONE
            if self._cdep:
                return _OK_FE.pack(0xFE, 0, 0, status, warnings)
            return None
        self._state = _S.ROWS
        if self._cdep:
            self._drop = True
        return None

    def _block_eof(self, payload: bytes) -> bytes | None:
        if not payload or payload[0] != 0xFE:
            raise RemoteProtocolError("expected an EOF after the definitions")
        self._state = self._next
        if self._cdep:
            self._drop = True
        return None

    def _prepare_first(self, payload: bytes) -> bytes | None:
        if not payload:
            raise RemoteProtocolError("empty response packet")
        if payload[0] == 0xFF:
            return self._err(payload)
        if payload[0] != 0x00 or len(payload) < 9:
            raise RemoteProtocolError("not a COM_STMT_PREPARE_OK")
        stmt_id = int.from_bytes(payload[1:5], "little")
        columns = payload[5] | payload[6] << 8
        params = payload[7] | payload[8] << 8
        self.prepared = (stmt_id, columns, params)
        if params:
            self._state = _S.PARAMS
            self._count = params
        elif columns:
            self._state = _S.PCOLS
            self._count = columns
        else:
            self._state = _S.DONE
        if self.client_stmt_id is None:
            return None
        return payload[:1] + self.client_stmt_id.to_bytes(4, "little") + payload[5:]

    def _simple(self, payload: bytes) -> bytes | None:
        self._state = _S.DONE
        if not payload:
            return None
        first = payload[0]
        if first == 0x00:
            return self._ok(payload)
        if first == 0xFF:
            return self._err(payload)
        if first == 0xFE and (self._bdep or len(payload) < _EOF_MAX_LENGTH):
            rep = self._terminator(payload)
            self._state = _S.DONE
            return rep
        return None

    def _ok(self, payload: bytes) -> bytes | None:
        status, _warnings = _ok_status(payload)
        self.status = status
        if payload[2] or payload[1] >= 0xFB:
            insert_id = _ok_insert_id(payload)
            if insert_id:
                self.insert_id = insert_id
        if status & _STATE_CHANGED:
            if self.state_oks is None:
                self.state_oks = [payload]
            else:
                self.state_oks.append(payload)
            if not self._ctrack:
                return self._strip(payload, status)
        return None

    def _strip(self, payload: bytes, status: int) -> bytes:
        """The OK without its session state, for a client without CLIENT_SESSION_TRACK."""
        ok = parse_ok(payload, self._bcaps)
        bare = OkPacket(
            ok.affected_rows,
            ok.last_insert_id,
            ServerStatus(status & ~_STATE_CHANGED),
            ok.warnings,
            ok.info,
            (),
            ok.header,
        )
        return build_ok(bare, self._ccaps)

    def _terminator(self, payload: bytes) -> bytes | None:
        """The packet that ends a result set (or answers COM_SET_OPTION): an OK with a 0xFE
        header from a DEPRECATE_EOF backend, else an EOF; translated for the client."""
        if self._bdep:
            status, warnings = _ok_status(payload)
            self.status = status
            self._state = _S.FIRST if status & _MORE_RESULTS else _S.DONE
            if status & _STATE_CHANGED:
                if self.state_oks is None:
                    self.state_oks = [payload]
                else:
                    self.state_oks.append(payload)
            if not self._cdep:
                return _EOF41.pack(0xFE, warnings, status & ~_STATE_CHANGED)
            if status & _STATE_CHANGED and not self._ctrack:
                return self._strip(payload, status)
            return None
        status, warnings = _eof_status(payload)
        self.status = status
        self._state = _S.FIRST if status & _MORE_RESULTS else _S.DONE
        if self._cdep:
            return _OK_FE.pack(0xFE, 0, 0, status, warnings)
        return None

    def _err(self, payload: bytes) -> bytes | None:
        self.error = payload
        self._state = _S.DONE
        return None

    def _infile(self, payload: bytes) -> bytes | None:
        self.infile = payload[1:]
        self._infile_pending = True
        if not self.local_infile:
            # Refused: the client never sees the request; the session sends the backend an
            # empty file and the backend's answer becomes an ERR.
            self._drop = True
            self._state = _S.INFILE_REFUSED
        return None

    def _infile_refused(self, payload: bytes) -> bytes | None:
        if payload and payload[0] == 0x00:
            self.status = _ok_status(payload)[0] & ~_MORE_RESULTS
        self._state = _S.DONE
        err = build_err(
            ErrPacket(
                ER.NOT_ALLOWED_COMMAND,
                "42000",
                "LOAD DATA LOCAL INFILE is disabled by the proxy configuration",
            ),
            self._ccaps,
        )
        self.error = err
        return err


#: Handlers of the states whose packets are read whole.
_HANDLERS: Final[dict[int, Callable[[ResponseRelay, bytes], bytes | None]]] = {
    _S.FIRST: ResponseRelay._first,
    _S.COLDEF_EOF: ResponseRelay._coldef_eof,
    _S.PREPARE_FIRST: ResponseRelay._prepare_first,
    _S.BLOCK_EOF: ResponseRelay._block_eof,
    _S.SIMPLE: ResponseRelay._simple,
    _S.INFILE_REFUSED: ResponseRelay._infile_refused,
}


# ----------------------------------------------------------------- internal queries


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What an internal query returned: an OK, an ERR, or the rows of a text result set."""

    ok: OkPacket | None = None
    error: ErrPacket | None = None
    rows: tuple[tuple[bytes | None, ...], ...] = ()
    #: The columns' names (only when asked: ``parse_response(..., named=True)``).
    columns: tuple[str, ...] = ()

    def scalar(self) -> bytes | None:
        """The first column of the first row (``None`` when there is none)."""
        return self.rows[0][0] if self.rows and self.rows[0] else None


def parse_response(data: bytes, capabilities: int, *, named: bool = False) -> QueryResult:
    """Parse the complete response to one text query, as collected by an identity relay
    (client capabilities equal to the backend's).  Only the first result set is kept;
    ``named``: with the columns' names."""
    packets = PacketDecoder().feed(data)
    if not packets:
        raise RemoteProtocolError("empty response")
    first = packets[0].payload
    if first[:1] == b"\xff":
        return QueryResult(error=parse_err(first, capabilities))
    if first[:1] == b"\x00":
        return QueryResult(ok=parse_ok(first, capabilities))
    count = _lenenc_value(first)
    index = 1 + count
    if not capabilities & _DEPRECATE_EOF:
        index += 1
    rows: list[tuple[bytes | None, ...]] = []
    deprecate = bool(capabilities & _DEPRECATE_EOF)
    for packet in packets[index:]:
        payload = packet.payload
        if payload[:1] == b"\xff":
            return QueryResult(error=parse_err(payload, capabilities), rows=tuple(rows))
        if payload[:1] == b"\xfe" and (deprecate or len(payload) < _EOF_MAX_LENGTH):
            break
        rows.append(parse_text_row(payload, count))
    if not named:
        return QueryResult(rows=tuple(rows))
    names = tuple(
        parse_column_definition41(packet.payload, capabilities).name
        for packet in packets[1 : 1 + count]
    )
    return QueryResult(rows=tuple(rows), columns=names)
