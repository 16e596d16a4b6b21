"""The documented syntax of the statements the proxy answers itself, its bounds, and the result
set a ``SELECT`` of the variables gets."""

from __future__ import annotations

import time

import pytest
from pymysql.converters import escape_item, escape_string

from consistent.policy import MAX_TOKEN_LENGTH
from consistent.protocol import Capability, ServerStatus, parse_column_definition41, parse_text_row
from consistent.protocol.constants import ColumnType
from proxy.intercept import (
    MAX_INTERCEPT_LENGTH,
    Intercept,
    mentions_variable,
    parse_intercept,
    result_set,
)


def select(*columns: tuple[str, str]) -> Intercept:
    return Intercept("select", columns=columns)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT @@consistent_token", select(("token", "@@consistent_token"))),
        (
            "  select @@SESSION.consistent_level ; ",
            select(("level", "@@SESSION.consistent_level")),
        ),
        (
            "SELECT @@consistent_level, @@consistent_token",
            select(("level", "@@consistent_level"), ("token", "@@consistent_token")),
        ),
        (
            "SELECT @@consistent_token AS t,@@local.consistent_level `the level`",
            select(("token", "t"), ("level", "the level")),
        ),
        ("SET @@consistent_level = 'read_latest'", Intercept("set", "level", "read_latest")),
        ("set @@session.consistent_level=eventual;", Intercept("set", "level", "eventual")),
        ("SET consistent_level = eventual", Intercept("set", "level", "eventual")),
        ("SET SESSION consistent_level := 'eventual'", Intercept("set", "level", "eventual")),
        ("set local CONSISTENT_TOKEN = ''", Intercept("set", "token", "")),
        (
            'SET SESSION @@consistent_token := "mariadb:0-1-5"',
            Intercept("set", "token", "mariadb:0-1-5"),
        ),
        ("SET @@consistent_level = DEFAULT", Intercept("set", "level", "DEFAULT")),
        # The server's escapes: backslashes and doubled quotes.
        (r"SET @@consistent_token = 'a\'b''c\\d\%'", Intercept("set", "token", "a'b'c\\d\\%")),
        ('SET @@consistent_token = "x""y\\"z"', Intercept("set", "token", 'x"y"z')),
    ],
)
def test_recognised_statements(sql: str, expected: Intercept) -> None:
    assert mentions_variable(sql.encode())
    assert parse_intercept(sql.encode()) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT @@consistent_token, 1",
        "SELECT @@version",
        "SELECT @@consistent_levels",
        "SET @@consistent_level = 'a', @@x = 1",
        "SET @consistent_level = 'eventual'",  # a user variable, not ours
        "SET consistent_level_x = 1",
        "SELECT '@@consistent_token'",
        "SELECT @@consistent_level FROM t",
        "SET @@consistent_token = 'not closed",
        "SET @@consistent_token = 'closed' 'twice'",
        "/* SELECT @@consistent_token */ SELECT 1",
    ],
)
def test_everything_else_goes_to_a_server(sql: str) -> None:
    assert parse_intercept(sql.encode()) is None


def test_tokens_escaped_by_a_client_library_read_back_as_they_were() -> None:
    # PyMySQL's own escaping (what its parameter binding does with a string).
    for token in ["it's", 'a "quoted" one', "back\\slash", "new\nline", "nul\x00"]:
        sql = f"SET @@consistent_token = '{escape_string(token)}'"
        assert parse_intercept(sql.encode()) == Intercept("set", "token", token)
        bound = escape_item(token, "utf8mb4")  # what cursor.execute(sql, args) binds
        assert parse_intercept(f"SET consistent_token = {bound}".encode()) == Intercept(
            "set", "token", token
        )


def test_without_backslash_escapes_a_backslash_is_a_character() -> None:
    sql = rb"SET @@consistent_token = 'a\b'"
    assert parse_intercept(sql, backslash_escapes=False) == Intercept("set", "token", "a\\b")
    assert parse_intercept(sql) == Intercept("set", "token", "a\x08")


def test_an_oversized_set_is_recognised_from_its_first_bytes() -> None:
    token = "mariadb:" + ",".join(f"{d}-1-{d}" for d in range(MAX_TOKEN_LENGTH))
    sql = f"SET @@consistent_token = '{token}'".encode()
    assert len(sql) > MAX_INTERCEPT_LENGTH
    found = parse_intercept(sql)
    assert found is not None
    assert found.oversized
    assert found.variable == "token"
    assert found.value == token[:200]
    # Only the first bytes of a statement still arriving.
    head = parse_intercept(b"SET consistent_level = 'x", length=10_000_000)
    assert head == Intercept("set", "level", "x", oversized=True)
    assert parse_intercept(b"SELECT @@consistent_level", length=10_000_000) is None


def test_parsing_is_linear() -> None:
    # Worst cases for a scanner that backtracks: many escapes, many quotes, no end.
    small = [
        b"SET @@consistent_token = '" + b"\\'" * 2_000 + b"'",
        b"SET @@consistent_token = '" + b"''" * 2_000 + b"'",
        b"SET @@consistent_token = '" + b"\\'" * 2_000,
        b"SELECT " + b"@@consistent_level, " * 1_000 + b"x",
    ]
    large = [
        b"SET @@consistent_token = '" + b"\\'" * 30_000 + b"'",
        b"SET @@consistent_token = '" + b"''" * 30_000 + b"'",
        b"SET @@consistent_token = '" + b"\\'" * 30_000,
        b"SELECT " + b"@@consistent_level, " * 3_000 + b"x",
    ]
    for short, long in zip(small, large, strict=True):
        assert len(long) <= MAX_INTERCEPT_LENGTH
        t0 = time.perf_counter()
        for _ in range(15):
            parse_intercept(short)
        t1 = time.perf_counter()
        parse_intercept(long)
        t2 = time.perf_counter()
        # 15 short parses against one ~15x longer: quadratic would be ~15x slower.
        assert t2 - t1 < 5 * (t1 - t0) + 0.05


@pytest.mark.parametrize("deprecate", [False, True])
def test_result_set_is_a_valid_result_set(deprecate: bool) -> None:
    caps = int(Capability.PROTOCOL_41 | (Capability.DEPRECATE_EOF if deprecate else 0))
    wire = result_set(
        [("@@consistent_level", "eventual"), ("tok", "mariadb:0-1-5")],
        caps,
        ServerStatus.AUTOCOMMIT,
        1,
        charset=33,
    )
    packets = []
    while wire:
        length = int.from_bytes(wire[:3], "little")
        packets.append((wire[3], wire[4 : 4 + length]))
        wire = wire[4 + length :]
    assert [seq for seq, _ in packets] == list(range(1, len(packets) + 1))
    assert packets[0][1] == b"\x02"
    definitions = [parse_column_definition41(packets[i][1], caps) for i in (1, 2)]
    assert [d.name for d in definitions] == ["@@consistent_level", "tok"]
    assert {d.type for d in definitions} == {ColumnType.VAR_STRING}
    assert {d.charset for d in definitions} == {33}
    assert [d.column_length for d in definitions] == [8 * 4, 13 * 4]
    rows = [p for _, p in packets[3:] if p[:1] != b"\xfe"]
    assert [parse_text_row(r, 2) for r in rows] == [(b"eventual", b"mariadb:0-1-5")]
    assert len(packets) == (5 if deprecate else 6)
