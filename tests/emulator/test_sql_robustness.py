"""Unsupported or malformed SQL fails with a MySQL error, never with a crash."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consistent.emulator import EmulatedServer, Session, SqlError
from consistent.emulator.testing import q, server

WORDS = [
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "CREATE",
    "TABLE",
    "DROP",
    "ALTER",
    "ADD",
    "COLUMN",
    "INDEX",
    "t",
    "u",
    "a",
    "b",
    "(",
    ")",
    ",",
    ";",
    "=",
    "*",
    "1",
    "'x'",
    "NULL",
    "AND",
    "OR",
    "JOIN",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "@a",
    "@@autocommit",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "SHOW",
    "TABLES",
    "USE",
    "d",
    "INT",
    "VARCHAR(5)",
    "PRIMARY",
    "KEY",
    "DEFAULT",
    "NOW()",
    "COUNT(*)",
    "AS",
    "IN",
    "NOT",
    "EXISTS",
    "UNION",
    "ALL",
    "DISTINCT",
    "HAVING",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "`",
    '"',
    "'",
    "--",
    "/*",
    "*/",
    "\\",
    "?",
    ":=",
    "WAIT_FOR_EXECUTED_GTID_SET('', 0.001)",
]

ODD_BUT_VALID = [
    "SELECT 1 FROM DUAL",
    "SELECT * FROM (SELECT 1 AS a UNION ALL SELECT 2) AS x ORDER BY a DESC",
    "SELECT CASE WHEN 1 THEN 'y' ELSE 'n' END",
    "SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 0",
    "SELECT /*+ MAX_EXECUTION_TIME(1000) */ a FROM t",
    "/*!40101 SET @saved = @@sql_mode */",
    "SELECT t.* FROM t WHERE a IS NOT NULL AND b LIKE 'x%' ESCAPE '!'",
    "SELECT EXISTS (SELECT 1 FROM t)",
    "SELECT GREATEST(1, 2), LEAST(3, 4), ABS(-1), ROUND(2.5), MOD(7, 3), 7 DIV 2",
    "SELECT CONCAT_WS('-', 'a', NULL, 'b'), LPAD('7', 3, '0'), REPLACE('aa', 'a', 'b')",
    "SELECT DATE(NOW()), YEAR('2024-05-06'), DATE_SUB('2024-01-01', INTERVAL 1 DAY)",
    "SELECT HEX('A'), UNHEX('41'), MD5('x'), SHA2('x', 256)",
    "INSERT INTO t SET a = 5, b = 'z'",
    "SELECT * FROM t WHERE a BETWEEN 1 AND 9 ORDER BY a LIMIT 2 OFFSET 1",
    "SHOW TABLES LIKE 't%'",
    "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SELECT @@session.transaction_isolation",
    "DO SLEEP(0)",
    "FLUSH PRIVILEGES",
    "SELECT JSON_EXTRACT('{\"a\": 1}', '$.a')",
]


async def _setup() -> tuple[EmulatedServer, Session]:
    srv = server()
    s = srv.open_session()
    await q(s, "CREATE DATABASE d")
    await q(s, "USE d")
    await q(s, "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(5))")
    await q(s, "INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    return srv, s


@pytest.mark.parametrize("sql", ODD_BUT_VALID)
def test_odd_but_valid_statements_run(sql: str) -> None:
    async def scenario() -> None:
        srv, s = await _setup()
        await q(s, sql)
        await srv.shutdown()

    asyncio.run(scenario())


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
def test_token_soup_never_crashes(words: list[str]) -> None:
    sql = " ".join(words)

    async def scenario() -> None:
        srv, s = await _setup()
        failure: SqlError | None = None
        try:
            await q(s, sql)
        except SqlError as exc:
            failure = exc
        if failure is not None:
            assert isinstance(failure.args[0], int)
            assert isinstance(failure.args[1], str)
            assert failure.sqlstate is not None
            assert len(failure.sqlstate) == 5
        # the session must still work afterwards
        if not s.closed:
            await q(s, "ROLLBACK")
            assert (await q(s, "SELECT 1"))[0].result is not None
        await srv.shutdown()

    asyncio.run(scenario())
