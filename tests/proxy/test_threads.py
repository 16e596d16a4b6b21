"""The statements about connection ids the proxy answers itself, parsed (pure) and answered
as valid result sets."""

from __future__ import annotations

import pytest

from consistent.classify import classify
from consistent.protocol import (
    Capability,
    ColumnType,
    ServerStatus,
    parse_column_definition41,
    parse_text_row,
)
from proxy.threads import (
    ID_FLOOR,
    ConnectionIdQuery,
    Kill,
    ProcessList,
    ProcessRow,
    Refusal,
    ThreadStatement,
    connection_id_result,
    kill_in_prepare,
    new_session_id,
    parse_last_insert_id,
    parse_thread_statement,
    processlist_result,
)


def parsed(sql: str) -> ThreadStatement | None:
    return parse_thread_statement(classify(sql), sql)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("KILL 12", Kill(12, query_only=False)),
        ("kill query 7;", Kill(7, query_only=True)),
        ("KILL CONNECTION 3", Kill(3, query_only=False)),
        ("/* why */ KILL HARD QUERY 9", Kill(9, query_only=True)),
        ("/*!KILL 5*/", Kill(5, query_only=False)),
        ("KILL USER bob", Kill(None, query_only=False, user="bob", by_user=True)),
        ("KILL QUERY USER 'bob'@'%'", Kill(None, query_only=True, user="bob", by_user=True)),
        ("KILL USER CURRENT_USER()", Kill(None, query_only=False, user=None, by_user=True)),
        ("SELECT CONNECTION_ID()", ConnectionIdQuery("CONNECTION_ID()")),
        ("select connection_id ( ) ;", ConnectionIdQuery("connection_id ( )")),
        ("SELECT CONNECTION_ID() AS `my id`", ConnectionIdQuery("my id")),
        ("SELECT CONNECTION_ID() me", ConnectionIdQuery("me")),
        ("SHOW PROCESSLIST", ProcessList(full=False)),
        ("show full processlist;", ProcessList(full=True)),
    ],
)
def test_recognised(sql: str, expected: ThreadStatement) -> None:
    assert parsed(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "KILL QUERY ID 3",
        "KILL 3 + 4",
        "KILL (SELECT 1)",
        "KILL 0x10",
        "KILL @v",
        "KILL",
        "SELECT 1; KILL 5",
        "KILL USER a b",
    ],
)
def test_other_kills_are_refused_not_forwarded(sql: str) -> None:
    assert isinstance(parsed(sql), Refusal)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CONNECTION_ID() + 1",
        "SELECT CONNECTION_ID(), 1",
        "SELECT CONNECTION_ID() FROM dual",
        "SELECT * FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()",
        "SHOW PROCESSLIST LIKE 'x'",
        "SHOW MASTER STATUS",
        "FLUSH TABLES",
        "SELECT 1",
        "SELECT 'KILL 5'",
    ],
)
def test_everything_else_goes_to_a_server(sql: str) -> None:
    assert parsed(sql) is None


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("SELECT LAST_INSERT_ID()", "LAST_INSERT_ID()"),
        ("select last_insert_id( ) ;", "last_insert_id( )"),
        ("SELECT LAST_INSERT_ID() id", "id"),
        ("SELECT LAST_INSERT_ID() AS `a``b`", "a`b"),
        ("SELECT LAST_INSERT_ID() FROM DUAL", "LAST_INSERT_ID()"),
        ("SELECT LAST_INSERT_ID() AS x FROM DUAL LIMIT 1", "x"),
        ("SELECT LAST_INSERT_ID(5)", None),
        ("SELECT LAST_INSERT_ID() + 0", None),
        ("SELECT LAST_INSERT_ID() FROM t", None),
        ("SELECT LAST_INSERT_ID(), 1", None),
        ("SELECT LAST_INSERT_ID() LIMIT", None),
        ("INSERT INTO t VALUES (LAST_INSERT_ID())", None),
    ],
)
def test_a_bare_select_of_last_insert_id_and_its_column_name(sql: str, column: str | None) -> None:
    assert parse_last_insert_id(sql) == column


def test_prepared_kill_is_recognised() -> None:
    assert kill_in_prepare(classify("KILL 5"))
    assert kill_in_prepare(classify("SELECT 1; KILL 5"))
    assert not kill_in_prepare(classify("SELECT 'KILL'"))


def test_session_ids_are_random_in_their_range_and_unique() -> None:
    taken = {new_session_id(()) for _ in range(200)}
    assert all(ID_FLOOR <= i < 2 * ID_FLOOR for i in taken)
    assert len(taken) > 190  # random, not a counter or a constant
    fresh = new_session_id(taken)
    assert fresh not in taken


def _packets(wire: bytes) -> list[tuple[int, bytes]]:
    packets = []
    while wire:
        length = int.from_bytes(wire[:3], "little")
        packets.append((wire[3], wire[4 : 4 + length]))
        wire = wire[4 + length :]
    return packets


@pytest.mark.parametrize("deprecate", [False, True])
def test_connection_id_result(deprecate: bool) -> None:
    caps = int(Capability.PROTOCOL_41 | (Capability.DEPRECATE_EOF if deprecate else 0))
    packets = _packets(
        connection_id_result("CONNECTION_ID()", 1234567890, caps, ServerStatus(2), 1)
    )
    assert [seq for seq, _ in packets] == list(range(1, len(packets) + 1))
    column = parse_column_definition41(packets[1][1], caps)
    assert (column.name, column.type) == ("CONNECTION_ID()", ColumnType.LONG)
    rows = [p for _, p in packets[2:] if p[:1] not in (b"\xfe",)]
    assert [parse_text_row(r, 1) for r in rows] == [(b"1234567890",)]


@pytest.mark.parametrize(("mariadb", "width"), [(True, 9), (False, 8)])
def test_processlist_result(mariadb: bool, width: int) -> None:
    caps = int(Capability.PROTOCOL_41 | Capability.DEPRECATE_EOF)
    long_query = "SELECT " + "x" * 200
    row = ProcessRow(ID_FLOOR + 5, "app", "127.0.0.1:5000", None, "Query", 3, "primary", long_query)
    for full in (False, True):
        wire = processlist_result(
            [row], full=full, mariadb=mariadb, capabilities=caps, status=ServerStatus(2), seq=1
        )
        packets = _packets(wire)
        names = [parse_column_definition41(p, caps).name for _, p in packets[1 : 1 + width]]
        assert names[:8] == ["Id", "User", "Host", "db", "Command", "Time", "State", "Info"]
        assert len(names) == width
        values = parse_text_row(packets[1 + width][1], width)
        assert values[0] == str(ID_FLOOR + 5).encode()
        assert values[3] is None
        assert values[7] == (long_query if full else long_query[:100]).encode()
