"""COM_STMT_EXECUTE and COM_STMT_BULK_EXECUTE rewriting (``execute_packets``,
``bulk_packets``), against an independent framing.

The oracle frames ``command, backend id, the rest of the client's payload`` itself: whatever
shortcut the rewriting takes (the client's bytes passed as they are when the backend's id is the
client's), the wire bytes must be exactly that.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consistent.classify import classify
from proxy.backends import BackendConnection
from proxy.config import Address
from proxy.statements import (
    LAST_PREPARED,
    PreparedStatement,
    StatementRegistry,
    bulk_packets,
    execute_packets,
)

SQL = "SELECT c FROM t WHERE id = ?"


def framed(payload: bytes, seq: int = 0) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def execute_payload(stmt_id: int, value: int, *, bind_types: bool) -> bytes:
    """One LONGLONG parameter; types sent when ``bind_types``."""
    head = b"\x17" + stmt_id.to_bytes(4, "little") + b"\x00" + (1).to_bytes(4, "little") + b"\x00"
    if bind_types:
        return head + b"\x01" + b"\x08\x00" + value.to_bytes(8, "little")
    return head + b"\x00" + value.to_bytes(8, "little")


def connection(client_id: int, backend_id: int) -> BackendConnection:
    conn = BackendConnection("primary", Address("127.0.0.1", 3306), max_payload=1 << 24)
    conn.statements[client_id] = backend_id
    return conn


def statement(client_id: int) -> PreparedStatement:
    return PreparedStatement(client_id, SQL, classify(SQL), 1, 1)


@given(
    client_id=st.integers(1, 0xFFFFFFFF),
    backend_id=st.integers(1, 0xFFFFFFFF),
    value=st.integers(0, 2**64 - 1),
    same=st.booleans(),
)
def test_an_execute_carries_the_backends_id_and_the_clients_bytes(
    client_id: int, backend_id: int, value: int, same: bool
) -> None:
    if same:
        backend_id = client_id
    payload = execute_payload(client_id, value, bind_types=True)
    raw = framed(payload)
    ps = statement(client_id)
    ps.note_execute(payload)
    wire = execute_packets(payload, raw, ps, connection(client_id, backend_id))
    assert wire == framed(payload[:1] + backend_id.to_bytes(4, "little") + payload[5:])
    if same:
        assert wire is raw  # passed as it is


def test_types_the_backend_never_received_are_inserted_even_with_the_same_id() -> None:
    ps = statement(7)
    first = execute_payload(7, 1, bind_types=True)
    ps.note_execute(first)
    primary = connection(7, 7)
    execute_packets(first, framed(first), ps, primary)
    again = execute_payload(7, 2, bind_types=False)
    ps.note_execute(again)
    # The primary saw the types: the client's bytes pass.
    raw = framed(again)
    assert execute_packets(again, raw, ps, primary) is raw
    # A replica that never saw them gets them re-inserted, with its own id.
    replica = connection(7, 7)
    wire = execute_packets(again, raw, ps, replica)
    assert wire == framed(execute_payload(7, 2, bind_types=True))


def test_the_last_prepared_id_never_reaches_a_server() -> None:
    # MariaDB's 0xFFFFFFFF ("the statement prepared last", sent by Connector/C before the
    # prepare's answer) means the session's last statement, whatever the backend's last was.
    registry = StatementRegistry()
    ps = statement(registry.new_id())
    registry.add(ps)
    assert registry.resolve(LAST_PREPARED) is ps
    payload = execute_payload(LAST_PREPARED, 5, bind_types=True)
    ps.note_execute(payload)
    wire = execute_packets(payload, framed(payload), ps, connection(ps.client_id, ps.client_id))
    assert wire == framed(payload[:1] + ps.client_id.to_bytes(4, "little") + payload[5:])
    registry.clear()
    assert registry.resolve(LAST_PREPARED) is None


def bulk_payload(stmt_id: int, rows: list[int], *, send_types: bool) -> bytes:
    """COM_STMT_BULK_EXECUTE of one LONGLONG parameter per row (indicator 0: a value)."""
    flags = 128 if send_types else 0
    head = b"\xfa" + stmt_id.to_bytes(4, "little") + flags.to_bytes(2, "little")
    types = b"\x08\x00" if send_types else b""
    return head + types + b"".join(b"\x00" + v.to_bytes(8, "little") for v in rows)


def test_a_bulk_execute_carries_the_backends_id_and_the_types_it_lacks() -> None:
    ps = statement(3)
    primary = connection(3, 41)
    sent = bulk_payload(3, [1, 2, 3], send_types=True)
    assert bulk_packets(sent, ps, primary) == framed(bulk_payload(41, [1, 2, 3], send_types=True))
    assert ps.types == b"\x08\x00"
    # Types the primary has: the client's rows pass with only the id changed.
    bare = bulk_payload(3, [4], send_types=False)
    assert bulk_packets(bare, ps, primary) == framed(bulk_payload(41, [4], send_types=False))
    # A connection that never received them (a reopened primary) gets them inserted.
    reopened = connection(3, 9)
    assert bulk_packets(bare, ps, reopened) == framed(bulk_payload(9, [4], send_types=True))
    assert bulk_packets(bare, ps, reopened) == framed(bulk_payload(9, [4], send_types=False))
