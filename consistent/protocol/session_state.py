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
    "parse_session_state",
]

MARIADB_LAST_GTID: Final = "last_gtid"
"""The system variable through which MariaDB reports the session's last GTID (reference §1.7)."""


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


def gtid_info(ok: OkPacket) -> GtidSet | MariaPosition | None:
    """The GTID information an OK packet carries, whatever the server's flavour.

    MySQL's GTIDS block (type 3) gives a :class:`~consistent.gtid.GtidSet`; MariaDB's
    ``last_gtid`` system variable (type 0) gives a :class:`~consistent.gtid.MariaPosition`.
    ``None`` when the packet carries neither, or only an empty value.  Text that is not a
    GTID set raises :class:`RemoteProtocolError`: the server sent something impossible.
    """
    for block in ok.session_state:
        if isinstance(block, Gtids):
            if not block.text.strip():
                return None
            try:
                return GtidSet.parse(block.text)
            except MalformedGtidSet as e:
                raise RemoteProtocolError(f"GTIDS block is not a GTID set: {e.msg}") from e
    for block in ok.session_state:
        if isinstance(block, SystemVariable) and block.name.lower() == MARIADB_LAST_GTID:
            if not block.value.strip():
                return None
            try:
                return MariaPosition.parse(block.value)
            except MalformedGtidSet as e:
                raise RemoteProtocolError(f"last_gtid is not a GTID position: {e.msg}") from e
    return None
