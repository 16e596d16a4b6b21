"""Integer and string encodings of the MySQL protocol: fixed-length little-endian integers,
length-encoded integers and strings, NUL-terminated strings.

:class:`Reader` walks a payload without copying it (it keeps a :class:`memoryview`); every
read that would run past the end, and every invalid length prefix, raises
:class:`~consistent.errors.RemoteProtocolError`, because the bytes came from the peer.  The
``pack_*`` helpers raise :class:`~consistent.errors.LocalProtocolError`, because a value that
cannot be encoded is our own mistake.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_dt_integers.html
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_dt_strings.html
"""

from __future__ import annotations

import struct
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import LenencPrefix

__all__ = [
    "Reader",
    "decode_text",
    "encode_text",
    "lenenc_int_size",
    "pack_lenenc_bytes",
    "pack_lenenc_int",
    "pack_nul_bytes",
]

_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_U16_PREFIXED: Final = struct.Struct("<BH")
_U64_PREFIXED: Final = struct.Struct("<BQ")

_NULL: Final = int(LenencPrefix.NULL)
_PREFIX_U16: Final = int(LenencPrefix.UINT16)
_PREFIX_U24: Final = int(LenencPrefix.UINT24)
_PREFIX_U64: Final = int(LenencPrefix.UINT64)
_MAX_U64: Final = (1 << 64) - 1

# One-byte encodings are the common case (every short string, every small count): build them
# once so pack_lenenc_int does not allocate for them.
_SMALL: Final = tuple(bytes((n,)) for n in range(_NULL))


def encode_text(text: str) -> bytes:
    """Encode text for the wire: UTF-8, with ``surrogateescape`` so that bytes which were not
    UTF-8 when parsed come back unchanged (parsing uses :func:`decode_text`)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise LocalProtocolError(f"text cannot be encoded: {e}") from e


def decode_text(data: bytes | memoryview) -> str:
    """Decode wire text as UTF-8; undecodable bytes become lone surrogates instead of failing,
    so a parser never raises on a name in another character set and round trips are exact."""
    return bytes(data).decode("utf-8", "surrogateescape")


def lenenc_int_size(n: int) -> int:
    """Number of bytes :func:`pack_lenenc_int` uses for ``n``."""
    if n < _NULL:
        return 1
    if n < 1 << 16:
        return 3
    if n < 1 << 24:
        return 4
    return 9


def pack_lenenc_int(n: int) -> bytes:
    """Encode ``n`` (0 ≤ n < 2**64) as a length-encoded integer, in its shortest form."""
    if 0 <= n < _NULL:
        return _SMALL[n]
    if n < 0 or n > _MAX_U64:
        raise LocalProtocolError(f"length-encoded integer out of range: {n}")
    if n < 1 << 16:
        return _U16_PREFIXED.pack(_PREFIX_U16, n)
    if n < 1 << 24:
        return bytes((_PREFIX_U24, n & 0xFF, (n >> 8) & 0xFF, n >> 16))
    return _U64_PREFIXED.pack(_PREFIX_U64, n)


def pack_lenenc_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    """Encode a length-encoded string; ``str`` is encoded with :func:`encode_text`."""
    if isinstance(data, str):
        data = encode_text(data)
    return pack_lenenc_int(len(data)) + data


def pack_nul_bytes(data: bytes | str) -> bytes:
    """Encode a NUL-terminated string; an embedded NUL cannot be expressed."""
    if isinstance(data, str):
        data = encode_text(data)
    if b"\x00" in data:
        raise LocalProtocolError("a NUL-terminated string cannot contain NUL")
    return data + b"\x00"


class Reader:
    """Sequential reader over one packet payload.

    The payload is wrapped in a :class:`memoryview`: reads of fixed-size fields slice it without
    copying, and only the returned ``bytes`` are copies.
    """

    __slots__ = ("_buf", "_end", "_pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = memoryview(buf)
        if view.format != "B":
            view = view.cast("B")
        self._buf = view
        self._end = len(view)
        self._pos = pos

    @property
    def pos(self) -> int:
        """Offset of the next unread byte."""
        return self._pos

    def remaining(self) -> int:
        """Number of unread bytes."""
        return self._end - self._pos

    def at_end(self) -> bool:
        """Whether every byte has been read."""
        return self._pos >= self._end

    def _need(self, n: int) -> int:
        pos = self._pos
        if n < 0 or pos + n > self._end:
            raise RemoteProtocolError(
                f"packet truncated: need {n} byte(s) at offset {pos}, have {self._end - pos}"
            )
        self._pos = pos + n
        return pos

    def peek(self) -> int:
        """The next byte, without consuming it."""
        if self._pos >= self._end:
            raise RemoteProtocolError(f"packet truncated at offset {self._pos}")
        return self._buf[self._pos]

    def skip(self, n: int) -> None:
        """Skip ``n`` bytes."""
        self._need(n)

    def u8(self) -> int:
        """A 1-byte integer."""
        pos = self._pos
        if pos >= self._end:
            raise RemoteProtocolError(f"packet truncated at offset {pos}")
        self._pos = pos + 1
        return self._buf[pos]

    def u16(self) -> int:
        """A 2-byte little-endian integer."""
        value: int = _U16.unpack_from(self._buf, self._need(2))[0]
        return value

    def u24(self) -> int:
        """A 3-byte little-endian integer."""
        pos = self._need(3)
        buf = self._buf
        return buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16

    def u32(self) -> int:
        """A 4-byte little-endian integer."""
        value: int = _U32.unpack_from(self._buf, self._need(4))[0]
        return value

    def u64(self) -> int:
        """An 8-byte little-endian integer."""
        value: int = _U64.unpack_from(self._buf, self._need(8))[0]
        return value

    def uint(self, n: int) -> int:
        """An ``n``-byte little-endian unsigned integer (``int<n>``)."""
        pos = self._need(n)
        return int.from_bytes(self._buf[pos : pos + n], "little")

    def lenenc_int(self) -> int:
        """A length-encoded integer; ``0xFB`` (NULL) and ``0xFF`` are invalid here."""
        pos = self._pos
        if pos < self._end:
            first = self._buf[pos]
            if first < _NULL:  # the one-byte form, by far the most common
                self._pos = pos + 1
                return first
        value = self.lenenc_int_or_null()
        if value is None:
            raise RemoteProtocolError(
                f"0xFB (NULL) where a length-encoded integer was expected at offset {self._pos - 1}"
            )
        return value

    def lenenc_int_or_null(self) -> int | None:
        """A length-encoded integer, or ``None`` for the ``0xFB`` NULL marker of rows."""
        first = self.u8()
        if first < _NULL:
            return first
        if first == _PREFIX_U16:
            return self.u16()
        if first == _PREFIX_U24:
            return self.u24()
        if first == _PREFIX_U64:
            return self.u64()
        if first == _NULL:
            return None
        raise RemoteProtocolError(f"invalid length-encoded integer prefix 0xFF at {self._pos - 1}")

    def lenenc_bytes(self) -> bytes:
        """A length-encoded string."""
        n = self.lenenc_int()
        pos = self._need(n)
        return bytes(self._buf[pos : pos + n])

    def lenenc_bytes_or_null(self) -> bytes | None:
        """A length-encoded string, or ``None`` for ``0xFB`` (a NULL column in a text row)."""
        n = self.lenenc_int_or_null()
        if n is None:
            return None
        pos = self._need(n)
        return bytes(self._buf[pos : pos + n])

    def lenenc_view(self) -> memoryview:
        """A length-encoded string as a view into the payload (no copy)."""
        n = self.lenenc_int()
        pos = self._need(n)
        return self._buf[pos : pos + n]

    def lenenc_text(self) -> str:
        """A length-encoded string decoded with :func:`decode_text`."""
        return decode_text(self.lenenc_view())

    def fixed(self, n: int) -> bytes:
        """Exactly ``n`` bytes."""
        pos = self._need(n)
        return bytes(self._buf[pos : pos + n])

    def view(self, n: int) -> memoryview:
        """Exactly ``n`` bytes as a view into the payload (no copy)."""
        pos = self._need(n)
        return self._buf[pos : pos + n]

    def nul_bytes(self) -> bytes:
        """A NUL-terminated string, without its terminator; a missing NUL is malformed."""
        pos = self._pos
        # memoryview has no find(); search the underlying object when it is bytes-like.
        obj = self._buf.obj
        if isinstance(obj, bytes | bytearray) and len(obj) == len(self._buf):
            end = obj.find(b"\x00", pos, self._end)
        else:
            end = bytes(self._buf[pos : self._end]).find(b"\x00")
            end = -1 if end < 0 else pos + end
        if end < 0:
            raise RemoteProtocolError(f"unterminated string at offset {pos}")
        self._pos = end + 1
        return bytes(self._buf[pos:end])

    def nul_text(self) -> str:
        """A NUL-terminated string decoded with :func:`decode_text`."""
        return decode_text(self.nul_bytes())

    def rest(self) -> bytes:
        """Every unread byte (``string<EOF>``)."""
        pos = self._pos
        self._pos = self._end
        return bytes(self._buf[pos : self._end])

    def rest_view(self) -> memoryview:
        """Every unread byte as a view (no copy)."""
        pos = self._pos
        self._pos = self._end
        return self._buf[pos : self._end]
