"""Data statements on the SQLite engine: results, metadata, side effects and errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from consistent.emulator import SqlError
from consistent.emulator.testing import FakeClock, one, q, rows, run, scalar, server
from consistent.protocol.constants import Capability, ColumnFlag, ColumnType

SCHEMA = """
CREATE TABLE users (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  name VARCHAR(50) NOT NULL,
  email VARCHAR(100),
  balance DECIMAL(12,2) DEFAULT '0.00',
  born DATE,
  seen DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6),
  avatar BLOB,
  score DOUBLE,
  active TINYINT(1) NOT NULL DEFAULT 1,
  PRIMARY KEY (id),
  UNIQUE KEY uq_email (email)
)"""


async def _db(clock: FakeClock | None = None, caps: int | None = None):  # type: ignore[no-untyped-def]
    srv = server(clock)
    s = srv.open_session() if caps is None else srv.open_session(client_capabilities=caps)
    await q(s, "CREATE DATABASE app")
    await q(s, "USE app")
    await q(s, SCHEMA)
    return srv, s


def test_insert_select_round_trip_with_python_types() -> None:
    async def scenario() -> None:
        clock = FakeClock(1_700_000_000.5)
        srv, s = await _db(clock)
        out = await one(
            s,
            "INSERT INTO users (name, email, balance, born, avatar, score) VALUES "
            "('ann', 'a@x', 12.5, '1990-02-03', X'0001ff', 1.25)",
        )
        assert (out.affected_rows, out.last_insert_id) == (1, 1)
        result = await rows(s, "SELECT * FROM users")
        assert result == [
            (
                1,
                "ann",
                "a@x",
                Decimal("12.50"),
                dt.date(1990, 2, 3),
                dt.datetime(2023, 11, 14, 22, 13, 20, 500000),
                b"\x00\x01\xff",
                1.25,
                1,
            )
        ]
        await srv.shutdown()

    run(scenario())


def test_column_metadata_for_table_columns() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        out = await one(s, "SELECT u.id, name AS n, balance, seen, avatar, active FROM users u")
        assert out.result is not None
        cols = {c.name: c for c in out.result.columns}
        assert cols["id"].type is ColumnType.LONG
        assert cols["id"].flags & ColumnFlag.PRI_KEY
        assert cols["id"].flags & ColumnFlag.AUTO_INCREMENT
        assert cols["id"].flags & ColumnFlag.UNSIGNED
        assert (cols["id"].table, cols["id"].org_table, cols["id"].schema) == ("u", "users", "app")
        assert cols["n"].org_name == "name"
        assert cols["n"].type is ColumnType.VAR_STRING
        assert cols["n"].length == 200
        assert cols["n"].charset == 255
        assert cols["n"].flags & ColumnFlag.NOT_NULL
        assert cols["balance"].type is ColumnType.NEWDECIMAL
        assert (cols["balance"].length, cols["balance"].decimals) == (14, 2)
        assert cols["seen"].type is ColumnType.DATETIME
        assert cols["seen"].decimals == 6
        assert cols["avatar"].type is ColumnType.BLOB
        assert cols["avatar"].charset == 63
        assert cols["active"].type is ColumnType.TINY
        assert cols["active"].length == 1
        await srv.shutdown()

    run(scenario())


def test_expression_names_and_types() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        out = await one(
            s, "SELECT 1+1, COUNT(*), 'x', 1/4, NOW(), @@version_comment, NULL, 2.50 AS d"
        )
        assert out.result is not None
        names = [c.name for c in out.result.columns]
        assert names == ["1+1", "COUNT(*)", "x", "1/4", "NOW()", "@@version_comment", "NULL", "d"]
        types = [c.type for c in out.result.columns]
        assert types == [
            ColumnType.LONGLONG,
            ColumnType.LONGLONG,
            ColumnType.VAR_STRING,
            ColumnType.NEWDECIMAL,
            ColumnType.DATETIME,
            ColumnType.VAR_STRING,
            ColumnType.NULL,
            ColumnType.NEWDECIMAL,
        ]
        row = out.result.rows[0]
        assert (row[0], row[3], row[7]) == (2, Decimal("0.2500"), Decimal("2.50"))
        assert isinstance(row[4], dt.datetime)
        await srv.shutdown()

    run(scenario())


def test_now_follows_clock_time_zone_and_timestamp() -> None:
    async def scenario() -> None:
        clock = FakeClock(1_700_000_000.0)  # 2023-11-14 22:13:20 UTC
        srv, s = await _db(clock)
        assert await scalar(s, "SELECT NOW()") == dt.datetime(2023, 11, 14, 22, 13, 20)
        await q(s, "SET time_zone = '+02:00'")
        assert await scalar(s, "SELECT NOW()") == dt.datetime(2023, 11, 15, 0, 13, 20)
        assert await scalar(s, "SELECT UTC_TIMESTAMP()") == dt.datetime(2023, 11, 14, 22, 13, 20)
        await q(s, "SET TIMESTAMP = 1000000000")
        assert await scalar(s, "SELECT UNIX_TIMESTAMP()") == 1000000000
        await q(s, "SET TIMESTAMP = DEFAULT")
        clock.advance(60)
        assert await scalar(s, "SELECT UNIX_TIMESTAMP()") == 1_700_000_060
        with pytest.raises(SqlError) as info:
            await q(s, "SET time_zone = 'Mars/Olympus'")
        assert info.value.args[0] == 1298
        await srv.shutdown()

    run(scenario())


def test_joins_grouping_subqueries() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(
            s,
            "CREATE TABLE orders (id INT PRIMARY KEY AUTO_INCREMENT, user_id INT, "
            "total DECIMAL(8,2))",
        )
        await q(s, "INSERT INTO users (name) VALUES ('a'), ('b'), ('c')")
        await q(s, "INSERT INTO orders (user_id, total) VALUES (1, 1.50), (1, 2.25), (2, 10)")
        result = await rows(
            s,
            "SELECT u.name, COUNT(o.id) AS n, SUM(o.total) AS s FROM users u "
            "LEFT JOIN orders o ON o.user_id = u.id GROUP BY u.name ORDER BY u.name",
        )
        assert result == [("a", 2, Decimal("3.75")), ("b", 1, Decimal("10.00")), ("c", 0, None)]
        assert await rows(
            s,
            "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders) "
            "ORDER BY name DESC LIMIT 1",
        ) == [("b",)]
        assert await rows(
            s,
            "SELECT users.name, orders.total FROM users JOIN orders "
            "ON users.id = orders.user_id WHERE orders.total > 2 "
            "ORDER BY 2",
        ) == [("a", Decimal("2.25")), ("b", Decimal("10.00"))]
        assert await rows(s, "SELECT * FROM (SELECT name FROM users WHERE id = 3) AS d") == [("c",)]
        assert await rows(s, "WITH t AS (SELECT 2 AS x) SELECT x * 3 FROM t") == [(6,)]
        await srv.shutdown()

    run(scenario())


def test_multi_row_insert_and_last_insert_id() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        out = await one(s, "INSERT INTO users (name) VALUES ('a'), ('b'), ('c')")
        assert (out.affected_rows, out.last_insert_id) == (3, 1)
        assert out.info == "Records: 3  Duplicates: 0  Warnings: 0"
        out = await one(s, "INSERT INTO users (name) VALUES ('d'), ('e')")
        assert out.last_insert_id == 4
        assert await scalar(s, "SELECT LAST_INSERT_ID()") == 4
        out = await one(s, "INSERT INTO users (id, name) VALUES (0, 'zero')")
        assert out.last_insert_id == 6
        out = await one(s, "INSERT INTO users (id, name) VALUES (100, 'explicit')")
        assert await scalar(s, "SELECT LAST_INSERT_ID()") == 6
        out = await one(s, "INSERT INTO users (name) VALUES ('next')")
        assert out.last_insert_id == 101
        await srv.shutdown()

    run(scenario())


def test_generated_ids_name_the_rows_inserted() -> None:
    # A single new row reports its rowid; several rows (or an upsert) the first id taken from
    # the sequence.  Both must name the rows really inserted, also once an UPDATE moved the
    # ids up past the sequence (SQLite's next id then follows the largest id, as InnoDB's).
    async def scenario() -> None:
        srv, s = await _db()

        async def inserted(sql: str, affected: int, last_id: int) -> None:
            out = await one(s, sql)
            assert (out.affected_rows, out.last_insert_id) == (affected, last_id), sql
            assert await scalar(s, "SELECT LAST_INSERT_ID()") == last_id, sql

        await inserted("INSERT INTO users (name) VALUES ('a')", 1, 1)
        await inserted("INSERT INTO users (id, name, email) VALUES (NULL, 'b', 'b@x')", 1, 2)
        out = await one(s, "INSERT IGNORE INTO users (name, email) VALUES ('c', 'b@x')")
        assert (out.affected_rows, out.last_insert_id) == (0, 0)
        assert await scalar(s, "SELECT LAST_INSERT_ID()") == 2
        await inserted("INSERT IGNORE INTO users (name, email) VALUES ('d', 'd@x')", 1, 4)
        out = await one(s, "REPLACE INTO users (name, email) VALUES ('e', 'd@x')")
        assert out.last_insert_id == 5
        assert await scalar(s, "SELECT LAST_INSERT_ID()") == 5
        await q(s, "UPDATE users SET id = 100 WHERE id = 5")
        await inserted("INSERT INTO users (name) VALUES ('f')", 1, 101)
        await q(s, "UPDATE users SET id = 200 WHERE id = 101")
        await inserted("INSERT INTO users (name) VALUES ('g'), ('h')", 2, 201)
        await inserted("INSERT INTO users (name) VALUES ('i')", 1, 203)
        assert await rows(s, "SELECT id, name FROM users ORDER BY id") == [
            (1, "a"),
            (2, "b"),
            (100, "e"),
            (200, "f"),
            (201, "g"),
            (202, "h"),
            (203, "i"),
        ]
        await q(s, "CREATE TEMPORARY TABLE tmp (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        await inserted("INSERT INTO tmp (v) VALUES (1)", 1, 1)
        await q(s, "UPDATE tmp SET id = 10")
        await inserted("INSERT INTO tmp (v) VALUES (2)", 1, 11)
        await srv.shutdown()

    run(scenario())


def test_update_counts_changed_rows_unless_found_rows() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "INSERT INTO users (name, balance) VALUES ('a', 1), ('b', 2), ('c', 2)")
        out = await one(s, "UPDATE users SET balance = 2 WHERE balance >= 1")
        assert out.affected_rows == 1
        assert out.info == "Rows matched: 3  Changed: 1  Warnings: 0"
        await srv.shutdown()
        caps = int(Capability.PROTOCOL_41 | Capability.FOUND_ROWS | Capability.SESSION_TRACK)
        srv, s = await _db(caps=caps)
        await q(s, "INSERT INTO users (name, balance) VALUES ('a', 1), ('b', 2)")
        out = await one(s, "UPDATE users SET balance = 2")
        assert out.affected_rows == 2
        await srv.shutdown()

    run(scenario())


def test_update_and_delete_with_order_and_limit() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "INSERT INTO users (name, score) VALUES ('a', 3), ('b', 1), ('c', 2)")
        out = await one(s, "UPDATE users SET name = 'low' ORDER BY score LIMIT 1")
        assert out.affected_rows == 1
        assert await scalar(s, "SELECT score FROM users WHERE name = 'low'") == 1.0
        out = await one(s, "DELETE FROM users ORDER BY score DESC LIMIT 2")
        assert out.affected_rows == 2
        assert await rows(s, "SELECT name FROM users") == [("low",)]
        await srv.shutdown()

    run(scenario())


def test_on_duplicate_key_update_replace_and_ignore() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "INSERT INTO users (name, email) VALUES ('a', 'a@x')")
        await q(
            s,
            "INSERT INTO users (name, email) VALUES ('a2', 'a@x') "
            "ON DUPLICATE KEY UPDATE name = VALUES(name)",
        )
        assert await rows(s, "SELECT id, name FROM users") == [(1, "a2")]
        out = await one(s, "INSERT IGNORE INTO users (name, email) VALUES ('x', 'a@x')")
        assert out.affected_rows == 0
        await q(s, "REPLACE INTO users (id, name, email) VALUES (1, 'r', 'a@x')")
        assert await rows(s, "SELECT id, name FROM users") == [(1, "r")]
        await srv.shutdown()

    run(scenario())


def test_case_insensitive_collation_like_mysql() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "INSERT INTO users (name, email) VALUES ('Alice', 'A@X')")
        assert await scalar(s, "SELECT COUNT(*) FROM users WHERE name = 'alice'") == 1
        with pytest.raises(SqlError) as info:
            await q(s, "INSERT INTO users (name, email) VALUES ('b', 'a@x')")
        assert info.value.args == (1062, "Duplicate entry 'a@x' for key 'users.uq_email'")
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize(
    ("sql", "errno", "sqlstate"),
    [
        ("SELECT * FROM nope", 1146, "42S02"),
        ("SELECT nope FROM users", 1054, "42S22"),
        ("INSERT INTO users (nope) VALUES (1)", 1054, "42S22"),
        ("INSERT INTO users (name) VALUES (NULL)", 1048, "23000"),
        ("INSERT INTO users (email) VALUES ('x')", 1364, "HY000"),
        ("INSERT INTO users (name, email) VALUES ('a')", 1136, "21S01"),
        ("CREATE TABLE users (a INT)", 1050, "42S01"),
        ("CREATE DATABASE app", 1007, "HY000"),
        ("DROP DATABASE nope", 1008, "HY000"),
        ("USE nope", 1049, "42000"),
        ("DROP TABLE nope", 1051, "42S02"),
        ("SELEKT 1", 1064, "42000"),
        ("SELECT 1 FROM", 1064, "42000"),
        ("LOCK TABLES users WRITE", 1235, "42000"),
        ("CREATE VIEW v AS SELECT 1", 1235, "42000"),
        ("SELECT NO_SUCH_FUNCTION(1)", 1235, "42000"),
        ("INSERT INTO users (name, score) VALUES ('a', 'not a number')", 1366, "HY000"),
    ],
)
def test_errors_have_mysql_errnos(sql: str, errno: int, sqlstate: str) -> None:
    async def scenario() -> None:
        srv, s = await _db()
        with pytest.raises(SqlError) as info:
            await q(s, sql)
        assert info.value.args[0] == errno, info.value.args
        assert info.value.sqlstate == sqlstate
        await srv.shutdown()

    run(scenario())


def test_parse_error_message_quotes_from_the_bad_token() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        with pytest.raises(SqlError) as info:
            await q(s, "SELEKT 1")
        assert info.value.args[1] == (
            "You have an error in your SQL syntax; check the manual that corresponds to your "
            "MySQL server version for the right syntax to use near 'SELEKT 1' at line 1"
        )
        await srv.shutdown()

    run(scenario())


def test_no_database_selected_is_1046() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        with pytest.raises(SqlError) as info:
            await q(s, "SELECT * FROM t")
        assert info.value.args == (1046, "No database selected")
        assert info.value.sqlstate == "3D000"
        await srv.shutdown()

    run(scenario())


def test_user_and_system_variables() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "SET @a = 5, @b := 'x', @c = 1.5 * 2")
        assert await rows(s, "SELECT @a, @b, @c, @nope") == [(5, "x", Decimal("3.0"), None)]
        await q(s, "SET @@session.sql_mode = 'ANSI_QUOTES', autocommit = OFF")
        assert await rows(s, "SELECT @@sql_mode, @@session.autocommit, @@GLOBAL.autocommit") == [
            ("ANSI_QUOTES", 0, 1)
        ]
        await q(s, "SET sql_mode = DEFAULT")
        assert "STRICT_TRANS_TABLES" in str(await scalar(s, "SELECT @@sql_mode"))
        await q(s, "SET GLOBAL max_connections = 10")
        assert await scalar(s, "SELECT @@max_connections") == 10
        other = srv.open_session()
        assert await scalar(other, "SELECT @@autocommit") == 1
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        (
            "INSERT INTO users (name) VALUES (REPEAT('x', 51))",
            (1406, "Data too long for column 'name' at row 1"),
        ),
        (
            "INSERT INTO users (id, name) VALUES (-1, 'neg')",
            (1264, "Out of range value for column 'id' at row 1"),
        ),
        (
            "INSERT INTO users (name, active) VALUES ('a', 300)",
            (1264, "Out of range value for column 'active' at row 1"),
        ),
        ("UPDATE users SET name = 'b', email = name", None),
    ],
)
def test_strict_mode_refusals(sql: str, args: tuple[int, str] | None) -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "INSERT INTO users (name) VALUES ('a')")
        with pytest.raises(SqlError) as info:
            await q(s, sql)
        if args is None:
            assert info.value.args[0] == 1235
        else:
            assert info.value.args == args
        await srv.shutdown()

    run(scenario())


def test_enum_values_are_checked() -> None:
    async def scenario() -> None:
        srv, s = await _db()
        await q(s, "CREATE TABLE e (c ENUM('small', 'large'))")
        await q(s, "INSERT INTO e VALUES ('small'), ('LARGE'), (NULL)")
        with pytest.raises(SqlError) as info:
            await q(s, "INSERT INTO e VALUES ('medium')")
        assert info.value.args == (1265, "Data truncated for column 'c' at row 1")
        await srv.shutdown()

    run(scenario())
