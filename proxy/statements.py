"""Prepared statements across several backends.

The client sees one statement id per ``COM_STMT_PREPARE``, chosen by the proxy.  Each backend
connection that has prepared the statement has its own id for it
(:attr:`~proxy.backends.BackendConnection.statements`): the statement is prepared on the
primary when the client prepares it, and on a replica the first time an execute of the (read)
statement is routed there.  Every COM_STMT_EXECUTE / CLOSE / RESET / FETCH / SEND_LONG_DATA is
rewritten with the id of the connection it goes to.

MariaDB's ``COM_STMT_BULK_EXECUTE`` (one command for many rows of parameters, when the client
negotiated ``MARIADB_CLIENT_STMT_BULK_OPERATIONS``) is rewritten the same way.  MariaDB's
statement id ``0xFFFFFFFF`` ("the statement prepared last", which Connector/C sends right after a
prepare, before its answer) names the client's last successful prepare.

Two details make moving an execute between servers correct:

* an execute may say "same parameter types as last time" (``new_params_bound = 0``); a server
  that never received those types would misread the values, so the types are kept here and
  re-inserted for a connection that has not seen them;
* ``COM_STMT_SEND_LONG_DATA`` has no response and its data belongs to the next execute, whose
  server is not known yet: the chunks are kept here (bounded) and sent just before the execute.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_stmt_execute.html
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from consistent.classify import Classification
from consistent.errors import RemoteProtocolError
from proxy.backends import BackendConnection
from proxy.stream import frame, frame_command, header

__all__ = [
    "LAST_PREPARED",
    "PreparedStatement",
    "StatementRegistry",
    "bulk_packets",
    "execute_packets",
]

# COM_STMT_EXECUTE: command(1) statement_id(4) flags(1) iteration_count(4) = 10 bytes, then
# the NULL bitmap, new_params_bound_flag(1), types (2 per parameter), values.
_EXECUTE_HEAD: Final = 10
_STMT_SEND_LONG_DATA: Final = 0x18
# COM_STMT_BULK_EXECUTE: command(1) statement_id(4) flags(2), then the types (2 per parameter)
# when flags has SEND_TYPES_TO_SERVER, then the rows.
# https://mariadb.com/kb/en/com_stmt_bulk_execute/
_BULK_HEAD: Final = 7
_BULK_SEND_TYPES: Final = 128
#: The statement id that names the statement prepared last (MariaDB).
LAST_PREPARED: Final = 0xFFFFFFFF


@dataclass(slots=True, eq=False)
class PreparedStatement:
    """One statement the client prepared."""

    client_id: int
    sql: str
    classification: Classification
    num_params: int
    num_columns: int
    #: Parameter types of the last execute that bound them.
    types: bytes | None = None
    #: SEND_LONG_DATA payloads for the next execute.
    long_data: list[bytes] = field(default_factory=list)
    long_data_size: int = 0
    long_data_overflow: bool = False
    #: The connection the last execute went to (COM_STMT_FETCH and RESET follow it).
    last_conn: BackendConnection | None = None
    #: How its bulk executes are routed (``classification``, needing the primary).
    bulk: Classification | None = None

    def note_execute(self, payload: bytes) -> None:
        """Remember the types an execute binds (before it is routed anywhere)."""
        n = self.num_params
        if not n:
            return
        flag_at = _EXECUTE_HEAD + (n + 7) // 8
        if len(payload) <= flag_at:
            raise RemoteProtocolError("COM_STMT_EXECUTE is too short for its parameters")
        if payload[flag_at] == 1:
            end = flag_at + 1 + 2 * n
            if len(payload) < end:
                raise RemoteProtocolError("COM_STMT_EXECUTE is too short for its types")
            self.note_types(payload[flag_at + 1 : end])

    def note_types(self, types: bytes) -> None:
        """The client bound these parameter types (kept by identity while unchanged)."""
        if types != self.types:
            self.types = types

    def add_long_data(self, payload: bytes, limit: int) -> None:
        """Keep a SEND_LONG_DATA chunk; beyond ``limit`` bytes the next execute fails."""
        self.long_data_size += len(payload)
        if self.long_data_size > limit:
            self.long_data_overflow = True
            self.long_data.clear()
            return
        self.long_data.append(payload)

    def reset_long_data(self) -> None:
        self.long_data.clear()
        self.long_data_size = 0
        self.long_data_overflow = False


def execute_packets(
    payload: bytes, raw: bytes, ps: PreparedStatement, conn: BackendConnection
) -> bytes:
    """The wire bytes that run the client's execute (``payload``, framed as ``raw``) on
    ``conn``: its long data, then the execute with ``conn``'s statement id and, when ``conn``
    lacks them, the parameter types."""
    client_id = ps.client_id
    backend_id = conn.statements[client_id]
    id_bytes = backend_id.to_bytes(4, "little")
    n = ps.num_params
    if n:
        types = ps.types
        flag_at = _EXECUTE_HEAD + (n + 7) // 8
        if types is not None and conn.statement_types.get(client_id) is not types:
            if payload[flag_at] == 1:
                conn.statement_types[client_id] = types
            else:
                # The client reuses types this server never received: send them.
                conn.statement_types[client_id] = types
                body = (
                    payload[:1]
                    + id_bytes
                    + payload[5:flag_at]
                    + b"\x01"
                    + types
                    + payload[flag_at + 1 :]
                )
                return _long_data(ps, id_bytes) + frame_command(body)
    if ps.long_data:
        prefix = _long_data(ps, id_bytes)
    elif len(raw) == len(payload) + 4:
        # One packet: only the id changes, and often not even that (a backend connection
        # numbers its statements from 1 as the proxy does for its client).
        # (The client's id may also be LAST_PREPARED, which must not reach the server.)
        return raw if raw[5:9] == id_bytes else raw[:5] + id_bytes + raw[9:]
    else:
        prefix = b""
    return prefix + frame_command(payload[:1] + id_bytes + payload[5:])


def bulk_packets(payload: bytes, ps: PreparedStatement, conn: BackendConnection) -> bytes:
    """The wire bytes that run the client's bulk execute ``payload`` on ``conn``: its
    statement id, and the parameter types when the client sends none and ``conn`` has not
    received the last ones bound (they may have gone to another server with an execute)."""
    if len(payload) < _BULK_HEAD:
        raise RemoteProtocolError("COM_STMT_BULK_EXECUTE is too short")
    client_id = ps.client_id
    id_bytes = conn.statements[client_id].to_bytes(4, "little")
    flags = payload[5] | payload[6] << 8
    n = ps.num_params
    if flags & _BULK_SEND_TYPES:
        end = _BULK_HEAD + 2 * n
        if len(payload) < end:
            raise RemoteProtocolError("COM_STMT_BULK_EXECUTE is too short for its types")
        ps.note_types(payload[_BULK_HEAD:end])
        if ps.types is not None:
            conn.statement_types[client_id] = ps.types
        body = payload[:1] + id_bytes + payload[5:]
    elif ps.types is not None and conn.statement_types.get(client_id) is not ps.types:
        conn.statement_types[client_id] = ps.types
        flags |= _BULK_SEND_TYPES
        body = (
            payload[:1] + id_bytes + flags.to_bytes(2, "little") + ps.types + payload[_BULK_HEAD:]
        )
    else:
        body = payload[:1] + id_bytes + payload[5:]
    return frame(body, 0)


def _long_data(ps: PreparedStatement, id_bytes: bytes) -> bytes:
    """The statement's SEND_LONG_DATA chunks, rewritten for one server."""
    parts = []
    for chunk in ps.long_data:
        data = bytes((_STMT_SEND_LONG_DATA,)) + id_bytes + chunk[5:]
        parts.append(header(len(data), 0) + data)
    return b"".join(parts)


class StatementRegistry:
    """The client's prepared statements, by the ids the proxy gave them."""

    __slots__ = ("_by_id", "_next", "get", "last")

    def __init__(self) -> None:
        self._by_id: dict[int, PreparedStatement] = {}
        self._next = 1
        #: The id of the last statement prepared successfully (``None``: the last prepare
        #: failed, or none was made): what :data:`LAST_PREPARED` stands for.
        self.last: int | None = None
        #: The statement the client calls ``client_id``, or ``None``: the dictionary's own
        #: lookup, bound once (every execute looks its statement up).
        self.get: Callable[[int], PreparedStatement | None] = self._by_id.get

    def new_id(self) -> int:
        """An id never given out on this session (ids start at 1, as mysqld's)."""
        value = self._next
        self._next = value + 1 if value < 0xFFFFFFFF else 1
        return value

    def add(self, ps: PreparedStatement) -> None:
        self._by_id[ps.client_id] = ps
        self.last = ps.client_id

    def resolve(self, client_id: int) -> PreparedStatement | None:
        """The statement ``client_id`` names, :data:`LAST_PREPARED` included."""
        if client_id == LAST_PREPARED:
            last = self.last
            return None if last is None else self._by_id.get(last)
        return self._by_id.get(client_id)

    def remove(self, client_id: int) -> PreparedStatement | None:
        return self._by_id.pop(client_id, None)

    def clear(self) -> None:
        self._by_id.clear()
        self.last = None

    def __len__(self) -> int:
        return len(self._by_id)
