"""The documented syntax of the statements the proxy answers itself."""

from __future__ import annotations

import pytest

from consistent.protocol import Capability, ServerStatus, parse_column_definition41, parse_text_row
from proxy.intercept import Intercept, parse_intercept, single_value_result


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT @@consistent_token", Intercept("select", "token", column="@@consistent_token")),
        (
            "  select @@SESSION.consistent_level ; ",
            Intercept("select", "level", column="@@SESSION.consistent_level"),
        ),
        ("SET @@consistent_level = 'read_latest'", Intercept("set", "level", "read_latest")),
        ("set @@session.consistent_level=eventual;", Intercept("set", "level", "eventual")),
        (
            'SET SESSION @@consistent_token := "mariadb:0-1-5"',
            Intercept("set", "token", "mariadb:0-1-5"),
        ),
        ("SET @@consistent_level = DEFAULT", Intercept("set", "level", "DEFAULT")),
    ],
)
def test_recognised_statements(sql: str, expected: Intercept) -> None:
    assert parse_intercept(sql.encode()) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT @@consistent_token, 1",
        "SELECT @@version",
        "SET @@consistent_level = 'a', @@x = 1",
        "SET @consistent_level = 'eventual'",  # a user variable, not ours
        "SELECT '@@consistent_token'",
        "/* SELECT @@consistent_token */ SELECT 1",
    ],
)
def test_everything_else_goes_to_a_server(sql: str) -> None:
    assert parse_intercept(sql.encode()) is None


@pytest.mark.parametrize("deprecate", [False, True])
def test_single_value_result_is_a_valid_result_set(deprecate: bool) -> None:
    caps = int(Capability.PROTOCOL_41 | (Capability.DEPRECATE_EOF if deprecate else 0))
    wire = single_value_result("@@consistent_level", "eventual", caps, ServerStatus.AUTOCOMMIT, 1)
    packets = []
    while wire:
        length = int.from_bytes(wire[:3], "little")
        packets.append((wire[3], wire[4 : 4 + length]))
        wire = wire[4 + length :]
    assert [seq for seq, _ in packets] == list(range(1, len(packets) + 1))
    assert packets[0][1] == b"\x01"
    assert parse_column_definition41(packets[1][1], caps).name == "@@consistent_level"
    rows = [p for _, p in packets[2:] if p[:1] != b"\xfe"]
    assert [parse_text_row(r, 1) for r in rows] == [(b"eventual",)]
    assert len(packets) == (4 if deprecate else 5)
