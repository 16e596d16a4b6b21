"""``Gtid_log_event`` bytes (WL#7319, reference §5) and a ``mysqlbinlog``-style printer.

Layout after the 19-byte common header (timestamp, type 33 or 34, server_id, event_size,
log_pos, flags): commit flag (1), source UUID (16), GNO (8 LE), logical-clock type 2 (1),
last_committed (8 LE), sequence_number (8 LE), **immediate_commit_timestamp** (7 LE; bit 55
set means an original timestamp follows), original_commit_timestamp (7 LE, only when bit 55
was set; otherwise it equals the immediate one), transaction_length (packed integer),
immediate_server_version (4 LE; bit 31 set means original_server_version follows),
original_server_version (4 LE, likewise), then the CRC32 of everything before it.

A 5.7 event stops after sequence_number (no timestamps) and a 5.6 event after the GNO; the
decoder reads each field only if bytes remain, as ``Gtid_event``'s constructor does, and
leaves the missing ones ``None``.

The printer renders what ``mysqlbinlog`` prints for the event: the header comment line with
``original_committed_timestamp=`` / ``immediate_commit_timestamp=`` / ``transaction_length=``
(F2), the two ``# original_commit_timestamp=… (date time.µs TZ)`` comment lines in the
system time zone (F3), and the ``SET @@session.original_commit_timestamp`` and server-version
statements before ``GTID_NEXT`` (F4).

https://dev.mysql.com/doc/dev/mysql-server/latest/classbinary__log_1_1Gtid__event.html
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
import zlib
from dataclasses import dataclass
from dataclasses import replace as dataclasses_replace
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.lenenc import Reader, lenenc_int_size, pack_lenenc_int

if TYPE_CHECKING:
    from consistent.emulator.binlog import BinaryLog, BinlogTransaction

__all__ = [
    "COMMON_HEADER_SIZE",
    "ENCODED_COMMIT_TIMESTAMP_LENGTH",
    "MAX_COMMIT_TIMESTAMP",
    "GtidEvent",
    "LogEventType",
    "decode_gtid_event",
    "encode_gtid_event",
    "format_binary_log",
    "gtid_event_for",
    "print_gtid_event",
]


class LogEventType(IntEnum):
    """Binary log event type codes used here.

    https://dev.mysql.com/doc/dev/mysql-server/latest/namespacemysql_1_1binlog_1_1event.html
    """

    GTID_LOG_EVENT = 33
    ANONYMOUS_GTID_LOG_EVENT = 34


COMMON_HEADER_SIZE: Final = 19
CHECKSUM_SIZE: Final = 4
ENCODED_COMMIT_TIMESTAMP_LENGTH: Final = 7
#: Bit 55 of the 7-byte immediate timestamp: "an original timestamp follows".
COMMIT_TIMESTAMP_FLAG: Final = 1 << 55
#: Largest encodable timestamp: 2^55 - 1 µs (3111-09-16).
MAX_COMMIT_TIMESTAMP: Final = COMMIT_TIMESTAMP_FLAG - 1
#: Bit 31 of immediate_server_version: "original_server_version follows".
SERVER_VERSION_FLAG: Final = 1 << 31
LOGICAL_CLOCK: Final = 2
#: Commit flag bit 0: the transaction may contain statement-based events.
FLAG_MAY_HAVE_SBR: Final = 0x01

_HEADER: Final = struct.Struct("<IBIIIH")
_FIXED_BODY: Final = 1 + 16 + 8 + 1 + 8 + 8
_NIL_UUID: Final = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class GtidEvent:
    """A decoded ``Gtid_log_event`` / ``Anonymous_gtid_log_event``.

    Timestamps are µs since the epoch, UTC; ``None`` when the event predates them.
    """

    sid: str
    gno: int
    anonymous: bool = False
    timestamp: int = 0
    """Header timestamp: seconds since the epoch."""
    server_id: int = 1
    log_pos: int = 0
    header_flags: int = 0
    commit_flags: int = FLAG_MAY_HAVE_SBR
    lt_type: int | None = LOGICAL_CLOCK
    last_committed: int | None = 0
    sequence_number: int | None = 0
    immediate_commit_timestamp: int | None = None
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    checksum: int | None = None
    """The CRC32 stored in the event (None when it was decoded without one)."""

    @property
    def type_code(self) -> LogEventType:
        """33 for a GTID, 34 for an anonymous transaction."""
        if self.anonymous:
            return LogEventType.ANONYMOUS_GTID_LOG_EVENT
        return LogEventType.GTID_LOG_EVENT

    @property
    def has_commit_timestamps(self) -> bool:
        """Whether the event carries WL#7319 timestamps (8.0.1+)."""
        return self.immediate_commit_timestamp is not None

    @property
    def gtid_text(self) -> str:
        """``uuid:gno``, or ``ANONYMOUS``."""
        return "ANONYMOUS" if self.anonymous else f"{self.sid}:{self.gno}"


# ----- decoding -------------------------------------------------------------------------------


def _read_timestamp(reader: Reader) -> int:
    return int.from_bytes(reader.fixed(ENCODED_COMMIT_TIMESTAMP_LENGTH), "little")


def decode_gtid_event(data: bytes, *, checksum: bool = True) -> GtidEvent:
    """Decode one whole event (common header included).

    With ``checksum`` the last 4 bytes are the CRC32 and must match (RemoteProtocolError
    otherwise, as for any malformed or truncated event).
    """
    if len(data) < COMMON_HEADER_SIZE:
        raise RemoteProtocolError("binlog event shorter than its common header")
    timestamp, type_code, server_id, size, log_pos, header_flags = _HEADER.unpack_from(data)
    if type_code not in (LogEventType.GTID_LOG_EVENT, LogEventType.ANONYMOUS_GTID_LOG_EVENT):
        raise RemoteProtocolError(f"not a GTID event: type {type_code}")
    if size != len(data):
        raise RemoteProtocolError(f"event_size {size} but {len(data)} bytes given")
    stored: int | None = None
    end = len(data)
    if checksum:
        if end < COMMON_HEADER_SIZE + CHECKSUM_SIZE:
            raise RemoteProtocolError("binlog event too short for its checksum")
        end -= CHECKSUM_SIZE
        stored = int.from_bytes(data[end:], "little")
        computed = zlib.crc32(data[:end])
        if stored != computed:
            raise RemoteProtocolError(
                f"binlog event checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )
    reader = Reader(data[COMMON_HEADER_SIZE:end])
    commit_flags = reader.u8()
    sid = str(uuid.UUID(bytes=reader.fixed(16)))
    gno = reader.u64()
    fields: dict[str, int | None] = {
        "lt_type": None,
        "last_committed": None,
        "sequence_number": None,
    }
    if reader.remaining():
        fields["lt_type"] = reader.u8()
        if fields["lt_type"] != LOGICAL_CLOCK:
            raise RemoteProtocolError(f"unknown logical clock type {fields['lt_type']}")
        fields["last_committed"] = reader.u64()
        fields["sequence_number"] = reader.u64()
    immediate: int | None = None
    original: int | None = None
    length: int | None = None
    immediate_version: int | None = None
    original_version: int | None = None
    if reader.remaining() >= ENCODED_COMMIT_TIMESTAMP_LENGTH:
        immediate = _read_timestamp(reader)
        if immediate & COMMIT_TIMESTAMP_FLAG:
            immediate &= ~COMMIT_TIMESTAMP_FLAG
            original = _read_timestamp(reader)
        else:
            original = immediate
        if reader.remaining():
            length = reader.lenenc_int()
        if reader.remaining() >= 4:
            immediate_version = reader.u32()
            if immediate_version & SERVER_VERSION_FLAG:
                immediate_version &= ~SERVER_VERSION_FLAG
                original_version = reader.u32()
            else:
                original_version = immediate_version
    anonymous = type_code == LogEventType.ANONYMOUS_GTID_LOG_EVENT
    return GtidEvent(
        sid=sid,
        gno=gno,
        anonymous=anonymous,
        timestamp=timestamp,
        server_id=server_id,
        log_pos=log_pos,
        header_flags=header_flags,
        commit_flags=commit_flags,
        lt_type=fields["lt_type"],
        last_committed=fields["last_committed"],
        sequence_number=fields["sequence_number"],
        immediate_commit_timestamp=immediate,
        original_commit_timestamp=original,
        transaction_length=length,
        immediate_server_version=immediate_version,
        original_server_version=original_version,
        checksum=stored,
    )


# ----- encoding -------------------------------------------------------------------------------


def _timestamp_bytes(value: int) -> bytes:
    return value.to_bytes(ENCODED_COMMIT_TIMESTAMP_LENGTH, "little")


def _check_timestamp(value: int, what: str) -> None:
    if not 0 <= value <= MAX_COMMIT_TIMESTAMP:
        raise LocalProtocolError(f"{what} {value} does not fit in 55 bits")


def _body(event: GtidEvent) -> bytes:
    parts = [
        bytes((event.commit_flags,)),
        uuid.UUID(event.sid).bytes,
        event.gno.to_bytes(8, "little"),
    ]
    if event.lt_type is None:
        return b"".join(parts)
    parts += [
        bytes((event.lt_type,)),
        (event.last_committed or 0).to_bytes(8, "little"),
        (event.sequence_number or 0).to_bytes(8, "little"),
    ]
    immediate = event.immediate_commit_timestamp
    if immediate is None:
        return b"".join(parts)
    original = event.original_commit_timestamp
    original = immediate if original is None else original
    _check_timestamp(immediate, "immediate_commit_timestamp")
    _check_timestamp(original, "original_commit_timestamp")
    if original != immediate:
        parts += [_timestamp_bytes(immediate | COMMIT_TIMESTAMP_FLAG), _timestamp_bytes(original)]
    else:
        parts.append(_timestamp_bytes(immediate))
    parts.append(pack_lenenc_int(event.transaction_length or 0))
    version = event.immediate_server_version
    if version is not None:
        original_version = event.original_server_version
        original_version = version if original_version is None else original_version
        if original_version != version:
            parts += [
                (version | SERVER_VERSION_FLAG).to_bytes(4, "little"),
                original_version.to_bytes(4, "little"),
            ]
        else:
            parts.append(version.to_bytes(4, "little"))
    return b"".join(parts)


def encode_gtid_event(event: GtidEvent, *, checksum: bool = True) -> bytes:
    """The event's bytes, common header first; bit 55 / bit 31 set exactly when original and
    immediate differ (``Gtid_log_event::write_body_to_memory``)."""
    body = _body(event)
    size = COMMON_HEADER_SIZE + len(body) + (CHECKSUM_SIZE if checksum else 0)
    header = _HEADER.pack(
        event.timestamp,
        int(event.type_code),
        event.server_id,
        size,
        event.log_pos,
        event.header_flags,
    )
    data = header + body
    if checksum:
        data += zlib.crc32(data).to_bytes(4, "little")
    return data


def _event_size(transaction_length: int, versions_differ: bool, stamps_differ: bool) -> int:
    size = COMMON_HEADER_SIZE + _FIXED_BODY + ENCODED_COMMIT_TIMESTAMP_LENGTH + CHECKSUM_SIZE
    size += ENCODED_COMMIT_TIMESTAMP_LENGTH if stamps_differ else 0
    size += lenenc_int_size(transaction_length) + (8 if versions_differ else 4)
    return size


def gtid_event_for(
    transaction: BinlogTransaction, *, log_pos: int = 0, payload_size: int | None = None
) -> GtidEvent:
    """The ``Gtid_log_event`` a server writes for ``transaction``.

    ``transaction_length`` counts the whole transaction, this event included; the other
    events' size is ``payload_size`` (default: the emulator's estimate of the transaction).
    """
    stamps_differ = transaction.original_commit_timestamp != transaction.immediate_commit_timestamp
    versions_differ = transaction.original_server_version != transaction.immediate_server_version
    rest = transaction.size if payload_size is None else payload_size
    length = rest + _event_size(rest, versions_differ, stamps_differ)
    # The length's own encoding may grow the event; settle on a fixed point.
    length = rest + _event_size(length, versions_differ, stamps_differ)
    gtid = transaction.gtid
    return GtidEvent(
        sid=gtid.uuid if gtid is not None else _NIL_UUID,
        gno=gtid.gno if gtid is not None else 0,
        anonymous=gtid is None,
        timestamp=transaction.immediate_commit_timestamp // 1_000_000,
        server_id=transaction.server_id,
        log_pos=log_pos,
        commit_flags=FLAG_MAY_HAVE_SBR,
        last_committed=transaction.last_committed,
        sequence_number=transaction.sequence_number,
        immediate_commit_timestamp=transaction.immediate_commit_timestamp,
        original_commit_timestamp=transaction.original_commit_timestamp,
        transaction_length=length,
        immediate_server_version=transaction.immediate_server_version,
        original_server_version=transaction.original_server_version,
    )


# ----- printing -------------------------------------------------------------------------------


def _local(seconds: float, tz: dt.tzinfo | None) -> dt.datetime:
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.astimezone(tz) if tz is not None else moment.astimezone()


def _when(us: int, tz: dt.tzinfo | None) -> str:
    seconds, micros = divmod(us, 1_000_000)
    moment = _local(seconds, tz)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{micros:06d} {moment.tzname() or ''}".rstrip()


def print_gtid_event(event: GtidEvent, *, tz: dt.tzinfo | None = None) -> str:
    """What ``mysqlbinlog`` prints for ``event`` (``tz``: the system time zone if None).

    The header line uses the event's own timestamp; the ``# …_commit_timestamp`` comments
    show each timestamp in µs and as a date in ``tz`` (WL#7319 F2-F4).
    """
    header = _local(event.timestamp, tz)
    checksum = f" CRC32 {event.checksum:#010x}" if event.checksum is not None else ""
    kind = "Anonymous_GTID" if event.anonymous else "GTID"
    line = (
        f"#{header:%y%m%d} {header.hour:2d}:{header:%M:%S} server id {event.server_id}  "
        f"end_log_pos {event.log_pos}{checksum} \t{kind}"
    )
    if event.last_committed is not None:
        line += f"\tlast_committed={event.last_committed}\tsequence_number={event.sequence_number}"
        line += "\trbr_only=" + ("no" if event.commit_flags & FLAG_MAY_HAVE_SBR else "yes")
    lines = []
    immediate = event.immediate_commit_timestamp
    original = event.original_commit_timestamp
    if immediate is not None and original is not None:
        line += f"\toriginal_committed_timestamp={original}\timmediate_commit_timestamp={immediate}"
        if event.transaction_length:
            line += f"\ttransaction_length={event.transaction_length}"
    lines.append(line)
    if not event.commit_flags & FLAG_MAY_HAVE_SBR:
        lines.append("/*!50718 SET TRANSACTION ISOLATION LEVEL READ COMMITTED*//*!*/;")
    if immediate is not None and original is not None:
        lines.append(f"# original_commit_timestamp={original} ({_when(original, tz)})")
        lines.append(f"# immediate_commit_timestamp={immediate} ({_when(immediate, tz)})")
        lines.append(f"/*!80001 SET @@session.original_commit_timestamp={original}*//*!*/;")
    if event.immediate_server_version is not None:
        lines.append(
            f"/*!80014 SET @@session.original_server_version={event.original_server_version}"
            "*//*!*/;"
        )
        lines.append(
            f"/*!80014 SET @@session.immediate_server_version={event.immediate_server_version}"
            "*//*!*/;"
        )
    lines.append(f"SET @@SESSION.GTID_NEXT= '{event.gtid_text}'/*!*/;")
    return "\n".join(lines) + "\n"


#: Where the first transaction of a file starts: magic, Format_description and
#: Previous_gtids events of an 8.0 server (the emulator's binary log uses the same figure).
FIRST_EVENT_POSITION: Final = 157


def format_binary_log(binlog: BinaryLog, *, tz: dt.tzinfo | None = None) -> str:
    """The GTID events of every file of an emulated server's binary log, as ``mysqlbinlog``
    prints them (``# at POS`` before each; positions follow the emulator's size estimates)."""
    out: list[str] = []
    for file in binlog.files:
        out.append(f"# {file.name}\n")
        position = FIRST_EVENT_POSITION
        for transaction in file.transactions:
            event = gtid_event_for(transaction)
            size = len(encode_gtid_event(event))
            event = decode_gtid_event(
                encode_gtid_event(dataclasses_replace(event, log_pos=position + size))
            )
            out.append(f"# at {position}\n")
            out.append(print_gtid_event(event, tz=tz))
            position += event.transaction_length or size
    return "".join(out)
