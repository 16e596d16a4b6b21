"""Session-state tracker blocks carried by OK packets when ``CLIENT_SESSION_TRACK`` is on.

The session-state blob of an OK packet is a sequence of blocks, each ``type`` (length-encoded
integer) followed by its entity as a length-encoded string.  The entity layouts are those that
mysqld writes (``sql/session_tracker.cc``) and libmysqlclient reads (``read_ok_ex`` in
``sql-common/client.cc``); reference §1.2 and §1.3:

=====  ===============================  ================================================
type   block                            entity
=====  ===============================  ================================================
0      :class:`SystemVariable`          ``lenenc(name) lenenc(value)``, one per variable
1      :class:`Schema`                  ``lenenc(name)``
2      :class:`StateChange`             the single byte ``'1'`` (so the block is ``02 01 31``)
3      :class:`Gtids`                   ``lenenc(encoding=0) lenenc(gtid set text)``
4      :class:`TransactionCharacteristics`  ``lenenc(text)``
5      :class:`TransactionState`        ``lenenc(8 characters)`` (so ``05 09 08 ...``)
=====  ===============================  ================================================

Blocks of any other type are kept as :class:`UnknownBlock`, skipped by their entity length
as libmysqlclient does, because forks add types (6 ``RESP_ATTR``) and a parser that chokes on
them breaks connections (vitess PR #10871, reference §1.5).

The GTIDs a blob carries are read here and nowhere else: :func:`gtid_text` from parsed blocks,
:func:`ok_tail_gtid_text` from raw bytes without building blocks (it runs after every write),
:func:`gtid_info` parsed.  They share one rule for a blob that repeats a block: every block
counts, in wire order, and the answer is their union.  mysqld writes at most one GTIDS block
and one ``last_gtid`` per OK packet, but libmysqlclient (``read_ok_ex``) keeps every block it
reads, in wire order, none replacing another; a client that kept only the first or the last
would forget GTIDs the server reported, and a session that waits for fewer GTIDs than its
writes produced can read stale data.  The union is also what two OK packets in a row give.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_ok_packet.html
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

from consistent.errors import MalformedGtidSet, RemoteProtocolError
from consistent.gtid import GtidSet, MariaPosition
from consistent.protocol.constants import SessionStateType
from consistent.protocol.lenenc import Reader, pack_lenenc_bytes, pack_lenenc_int

if TYPE_CHECKING:
    from consistent.protocol.responses import OkPacket

__all__ = [
    "MARIADB_LAST_GTID",
    "Gtids",
    "Schema",
    "SessionStateChange",
    "StateChange",
    "SystemVariable",
    "TransactionCharacteristics",
    "TransactionState",
    "UnknownBlock",
    "build_session_state",
    "gtid_info",
    "gtid_text",
    "ok_tail_gtid_text",
    "parse_session_state",
]

MARIADB_LAST_GTID: Final = "last_gtid"
"""The system variable through which MariaDB reports the session's last GTID (reference §1.7)."""

ANY_GTIDS: Final = 0
"""GTID source for :func:`gtid_text`: MySQL's GTIDS blocks when one carries text, else
MariaDB's ``last_gtid``, for a reader that does not know the server's flavour."""
MYSQL_GTIDS: Final = 1
"""GTID source for :func:`gtid_text`: only MySQL's GTIDS blocks (type 3)."""
MARIADB_GTIDS: Final = 2
"""GTID source for :func:`gtid_text`: only MariaDB's ``last_gtid`` variable (type 0)."""


@dataclass(frozen=True, slots=True)
class SystemVariable:
    """A tracked system variable changed to ``value`` (``session_track_system_variables``)."""

    name: str
    value: str
    type: ClassVar[int] = SessionStateType.SYSTEM_VARIABLES

    def entity(self) -> bytes:
        """The block's entity bytes (without type and entity length)."""
        return pack_lenenc_bytes(self.name) + pack_lenenc_bytes(self.value)


@dataclass(frozen=True, slots=True)
class Schema:
    """The default schema changed to ``name`` (``session_track_schema``)."""

    name: str
    type: ClassVar[int] = SessionStateType.SCHEMA

    def entity(self) -> bytes:
        """The block's entity bytes (without type and entity length)."""
        return pack_lenenc_bytes(self.name)


@dataclass(frozen=True, slots=True)
class StateChange:
    """Some session state changed (``session_track_state_change``); mysqld only sends '1'."""

    changed: bool = True
    type: ClassVar[int] = SessionStateType.STATE_CHANGE

    def entity(self) -> bytes:
        """The block's entity bytes: the raw character '1' (or '0'), not a nested string."""
        return b"1" if self.changed else b"0"


@dataclass(frozen=True, slots=True)
class Gtids:
    """GTIDs reported by ``session_track_gtids`` (OWN_GTID or ALL_GTIDS), as mysqld's text."""

    text: str
    encoding: int = 0
    type: ClassVar[int] = SessionStateType.GTIDS

    def entity(self) -> bytes:
        """The block's entity bytes: encoding specification, then the set as lenenc text."""
        return pack_lenenc_int(self.encoding) + pack_lenenc_bytes(self.text)


@dataclass(frozen=True, slots=True)
class TransactionCharacteristics:
    """SQL that would recreate the transaction's characteristics (may be empty)."""

    text: str
    type: ClassVar[int] = SessionStateType.TRANSACTION_CHARACTERISTICS

    def entity(self) -> bytes:
        """The block's entity bytes (without type and entity length)."""
        return pack_lenenc_bytes(self.text)


@dataclass(frozen=True, slots=True)
class TransactionState:
    """The 8-character transaction state, e.g. ``"T_R_____"``
    (``session_track_transaction_info``)."""

    flags: str
    type: ClassVar[int] = SessionStateType.TRANSACTION_STATE

    def entity(self) -> bytes:
        """The block's entity bytes (without type and entity length)."""
        return pack_lenenc_bytes(self.flags)


@dataclass(frozen=True, slots=True)
class UnknownBlock:
    """A block of a type this codec does not interpret, kept byte for byte."""

    type: int
    data: bytes

    def entity(self) -> bytes:
        """The block's entity bytes, as received."""
        return self.data


SessionStateChange = (
    SystemVariable
    | Schema
    | StateChange
    | Gtids
    | TransactionCharacteristics
    | TransactionState
    | UnknownBlock
)


def _system_variable(entity: Reader) -> SessionStateChange:
    return SystemVariable(entity.lenenc_text(), entity.lenenc_text())


def _schema(entity: Reader) -> SessionStateChange:
    return Schema(entity.lenenc_text())


def _state_change(entity: Reader) -> SessionStateChange:
    data = entity.rest()
    if data == b"1":
        return StateChange(True)
    if data == b"0":
        return StateChange(False)
    # Not what mysqld writes (e.g. a '1' nested in a lenenc string): keep the bytes intact.
    return UnknownBlock(SessionStateType.STATE_CHANGE, data)


def _gtids(entity: Reader) -> SessionStateChange:
    encoding = entity.lenenc_int()
    return Gtids(entity.lenenc_text(), encoding)


def _transaction_characteristics(entity: Reader) -> SessionStateChange:
    return TransactionCharacteristics(entity.lenenc_text())


def _transaction_state(entity: Reader) -> SessionStateChange:
    return TransactionState(entity.lenenc_text())


_DECODERS: Final[dict[int, Callable[[Reader], SessionStateChange]]] = {
    SessionStateType.SYSTEM_VARIABLES: _system_variable,
    SessionStateType.SCHEMA: _schema,
    SessionStateType.STATE_CHANGE: _state_change,
    SessionStateType.GTIDS: _gtids,
    SessionStateType.TRANSACTION_CHARACTERISTICS: _transaction_characteristics,
    SessionStateType.TRANSACTION_STATE: _transaction_state,
}


def parse_session_state(data: bytes | bytearray | memoryview) -> tuple[SessionStateChange, ...]:
    """Parse a session-state blob (the content of the OK packet's ``session_state_info``
    string, without its total-length prefix) into blocks, in wire order."""
    reader = Reader(data)
    blocks: list[SessionStateChange] = []
    while not reader.at_end():
        block_type = reader.lenenc_int()
        entity = reader.lenenc_view()
        decoder = _DECODERS.get(block_type)
        if decoder is None:
            blocks.append(UnknownBlock(block_type, bytes(entity)))
        else:
            # Bytes after the fields we know are ignored, as libmysqlclient ignores them.
            blocks.append(decoder(Reader(entity)))
    return tuple(blocks)


def build_session_state(blocks: Iterable[SessionStateChange]) -> bytes:
    """Encode blocks as a session-state blob, without the total-length prefix that
    :func:`~consistent.protocol.responses.build_ok` adds."""
    return b"".join(
        pack_lenenc_int(block.type) + pack_lenenc_bytes(block.entity()) for block in blocks
    )


def gtid_text(blocks: Iterable[SessionStateChange], source: int = ANY_GTIDS) -> str | None:
    """The GTID text that session-state blocks carry, unparsed; ``None`` when there is none.

    ``source`` is :data:`MYSQL_GTIDS` (the GTIDS blocks), :data:`MARIADB_GTIDS` (the
    ``last_gtid`` variable) or :data:`ANY_GTIDS` (the first kind present).  Repeated blocks
    count together (see the module's docstring): MySQL texts are joined into one set's text,
    MariaDB positions merged.  Text that is not ASCII raises :class:`RemoteProtocolError`.
    """
    mysql: str | None = None
    maria: str | None = None
    for block in blocks:
        if isinstance(block, Gtids):
            if source != MARIADB_GTIDS and (text := _ascii(block.text)):
                mysql = text if mysql is None else f"{mysql},{text}"
        elif (
            isinstance(block, SystemVariable)
            and source != MYSQL_GTIDS
            and block.name.lower() == MARIADB_LAST_GTID
            and (text := _ascii(block.value))
        ):
            maria = text if maria is None else _merge_positions(maria, text)
    return maria if mysql is None else mysql


def gtid_info(ok: OkPacket) -> GtidSet | MariaPosition | None:
    """The GTID information an OK packet carries, whatever the server's flavour.

    MySQL's GTIDS blocks (type 3) give a :class:`~consistent.gtid.GtidSet`; MariaDB's
    ``last_gtid`` system variable (type 0) gives a :class:`~consistent.gtid.MariaPosition`.
    ``None`` when the packet carries neither, or only empty values.  Text that is not a
    GTID set raises :class:`RemoteProtocolError`: the server sent something impossible.
    """
    text = gtid_text(ok.session_state, MYSQL_GTIDS)
    if text is not None:
        try:
            return GtidSet.parse(text)
        except MalformedGtidSet as e:
            raise RemoteProtocolError(f"GTIDS block is not a GTID set: {e.msg}") from e
    text = gtid_text(ok.session_state, MARIADB_GTIDS)
    return None if text is None else _position(text)


def ok_tail_gtid_text(tail: bytes, source: int = ANY_GTIDS) -> str | None:
    """What :func:`gtid_text` answers for the session state in an OK packet's tail (the bytes
    after its warning count: ``info`` as a length-encoded string, then the blob), read from
    the bytes without building blocks.  ``None`` when the tail has no blob or no GTIDs.

    When every length in the tail fits in one byte (the usual shape) it reads them by
    indexing; anything else goes through :func:`parse_session_state`.  It checks the framing
    of every block and the content of the blocks it reads; malformed or truncated bytes raise
    :class:`RemoteProtocolError`.  A property test holds it to :func:`gtid_text`.
    """
    if not tail:
        return None
    try:
        size = len(tail)
        info = tail[0]
        if info >= _LENENC_2:
            return _parsed(tail, source)
        pos = info + 1
        if pos >= size:
            if pos > size:
                raise RemoteProtocolError("the OK packet's info runs past its end")
            return None  # info only: no session state
        blob = tail[pos]
        if blob >= _LENENC_2:
            return _parsed(tail, source)
        pos += 1
        end = pos + blob
        if end > size:
            raise RemoteProtocolError("session-state data runs past the end of the OK packet")
        mysql: str | None = None
        maria: str | None = None
        while pos < end:
            if pos + 2 > end:
                raise RemoteProtocolError("truncated session-state block")
            kind = tail[pos]
            length = tail[pos + 1]
            if kind >= _LENENC_2 or length >= _LENENC_2:
                return _parsed(tail, source)
            entity = pos + 2
            pos = entity + length
            if pos > end:
                raise RemoteProtocolError("session-state block runs past its blob")
            if kind == _GTIDS and source != MARIADB_GTIDS:
                # encoding specification (0), then the set as a length-encoded string
                if length < 2 or tail[entity] >= _LENENC_2 or tail[entity + 1] >= _LENENC_2:
                    return _parsed(tail, source)
                text_end = entity + 2 + tail[entity + 1]
                if text_end > pos:
                    return _parsed(tail, source)
                text = tail[entity + 2 : text_end].decode("ascii").strip()
                if text:
                    mysql = text if mysql is None else f"{mysql},{text}"
            elif kind == _SYSTEM_VARIABLES and source != MYSQL_GTIDS:
                if length == 0 or tail[entity] >= _LENENC_2:
                    return _parsed(tail, source)
                name_end = entity + 1 + tail[entity]
                if name_end >= pos or tail[name_end] >= _LENENC_2:
                    return _parsed(tail, source)
                if tail[entity + 1 : name_end].lower() == _LAST_GTID:
                    value_end = name_end + 1 + tail[name_end]
                    if value_end > pos:
                        return _parsed(tail, source)
                    text = tail[name_end + 1 : value_end].decode("ascii").strip()
                    if text:
                        maria = text if maria is None else _merge_positions(maria, text)
        return maria if mysql is None else mysql
    except UnicodeDecodeError:
        raise RemoteProtocolError(f"GTID text is not ASCII in {tail!r}") from None


def _parsed(tail: bytes, source: int) -> str | None:
    """:func:`gtid_text` of the tail's blocks, parsed in full."""
    reader = Reader(tail)
    reader.skip(reader.lenenc_int())  # the human-readable info
    if reader.at_end():
        return None
    return gtid_text(parse_session_state(reader.lenenc_view()), source)


def _ascii(text: str) -> str:
    """``text`` stripped (empty: nothing); text that is not ASCII is refused."""
    text = text.strip()
    if not text.isascii():
        raise RemoteProtocolError(f"GTID text is not ASCII: {text!r}")
    return text


def _merge_positions(a: str, b: str) -> str:
    """Two ``last_gtid`` values of one packet as one position: per domain, the later GTID."""
    return str(_position(a).merge(_position(b)))


def _position(text: str) -> MariaPosition:
    try:
        return MariaPosition.parse(text.strip())
    except MalformedGtidSet as e:
        raise RemoteProtocolError(f"last_gtid is not a GTID position: {e.msg}") from e


_GTIDS: Final = int(SessionStateType.GTIDS)
_SYSTEM_VARIABLES: Final = int(SessionStateType.SYSTEM_VARIABLES)
_LAST_GTID: Final = MARIADB_LAST_GTID.encode()
# First byte of a length-encoded integer that is not the value itself (0xFB NULL, 0xFC…).
_LENENC_2: Final = 0xFB
