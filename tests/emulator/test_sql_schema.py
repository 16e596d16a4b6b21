"""DDL, SHOW, DESCRIBE and information_schema as MySQL 8.0 clients (SQLAlchemy, mariadb CLI)
expect them."""

from __future__ import annotations

import pytest

from consistent.emulator import SqlError
from consistent.emulator.testing import U, one, q, rows, run, scalar, server

USERS = (
    "CREATE TABLE users (id INT NOT NULL AUTO_INCREMENT, name VARCHAR(50) NOT NULL, "
    "email VARCHAR(100) DEFAULT NULL, created DATETIME DEFAULT CURRENT_TIMESTAMP, "
    "PRIMARY KEY (id), UNIQUE KEY uq_email (email), KEY ix_name (name)) COMMENT='people'"
)
ORDERS = (
    "CREATE TABLE orders (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "user_id INT NOT NULL, total DECIMAL(10,2) NOT NULL DEFAULT 0, "
    "CONSTRAINT fk_orders_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE)"
)


async def _app():  # type: ignore[no-untyped-def]
    srv = server()
    s = srv.open_session()
    await q(s, "CREATE DATABASE app")
    await q(s, "USE app")
    await q(s, USERS)
    await q(s, ORDERS)
    return srv, s


def test_show_create_table_matches_mysql_layout() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "INSERT INTO users (name) VALUES ('a'), ('b')")
        result = await rows(s, "SHOW CREATE TABLE `app`.`users`")
        assert result == [
            (
                "users",
                "CREATE TABLE `users` (\n"
                "  `id` int NOT NULL AUTO_INCREMENT,\n"
                "  `name` varchar(50) NOT NULL,\n"
                "  `email` varchar(100) DEFAULT NULL,\n"
                "  `created` datetime DEFAULT CURRENT_TIMESTAMP,\n"
                "  PRIMARY KEY (`id`),\n"
                "  UNIQUE KEY `uq_email` (`email`),\n"
                "  KEY `ix_name` (`name`)\n"
                ") ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4 "
                "COLLATE=utf8mb4_0900_ai_ci COMMENT='people'",
            )
        ]
        text = str((await rows(s, "SHOW CREATE TABLE orders"))[0][1])
        assert "  KEY `fk_orders_user` (`user_id`),\n" in text
        assert (
            "  CONSTRAINT `fk_orders_user` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`)"
            " ON DELETE CASCADE\n"
        ) in text
        assert "`total` decimal(10,2) NOT NULL DEFAULT '0.00'" in text
        await srv.shutdown()

    run(scenario())


def test_sqlalchemy_reflection_parses_our_show_create_table() -> None:
    from sqlalchemy.dialects.mysql.base import MySQLDialect
    from sqlalchemy.dialects.mysql.reflection import MySQLTableDefinitionParser

    async def scenario() -> str:
        srv, s = await _app()
        text = str((await rows(s, "SHOW CREATE TABLE orders"))[0][1])
        await srv.shutdown()
        return text

    text = run(scenario())
    dialect = MySQLDialect()
    parser = MySQLTableDefinitionParser(dialect, dialect.identifier_preparer)
    state = parser.parse(text, "utf8mb4")
    assert [c["name"] for c in state.columns] == ["id", "user_id", "total"]
    assert state.keys[0]["type"] == "PRIMARY"
    assert state.fk_constraints[0]["table"][-1] == "users"
    assert state.fk_constraints[0]["ondelete"] == "CASCADE"


def test_describe_and_show_columns() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        assert await rows(s, "DESCRIBE users") == [
            ("id", "int", "NO", "PRI", None, "auto_increment"),
            ("name", "varchar(50)", "NO", "MUL", None, ""),
            ("email", "varchar(100)", "YES", "UNI", None, ""),
            ("created", "datetime", "YES", "", "CURRENT_TIMESTAMP", "DEFAULT_GENERATED"),
        ]
        assert await rows(s, "SHOW COLUMNS FROM users LIKE 'e%'") == [
            ("email", "varchar(100)", "YES", "UNI", None, "")
        ]
        full = await rows(s, "SHOW FULL COLUMNS FROM orders")
        assert full[2][:4] == ("total", "decimal(10,2)", None, "NO")
        with pytest.raises(SqlError) as info:
            await q(s, "DESCRIBE `app`.`missing`")
        assert info.value.args[0] == 1146  # SQLAlchemy's has_table treats 1146 as False
        await srv.shutdown()

    run(scenario())


def test_show_databases_tables_variables() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        assert ("app",) in await rows(s, "SHOW DATABASES")
        assert await rows(s, "SHOW schemas LIKE 'a%'") == [("app",)]
        assert await rows(s, "SHOW FULL TABLES FROM `app`") == [
            ("orders", "BASE TABLE"),
            ("users", "BASE TABLE"),
        ]
        out = await one(s, "SHOW TABLES")
        assert out.result is not None
        assert out.result.columns[0].name == "Tables_in_app"
        assert await rows(s, "SHOW VARIABLES LIKE 'lower_case_table_names'") == [
            ("lower_case_table_names", "0")
        ]
        assert await rows(s, "SHOW SESSION VARIABLES LIKE 'autocommit'") == [("autocommit", "ON")]
        assert await rows(s, "SHOW GLOBAL VARIABLES LIKE 'gtid_mode'") == [("gtid_mode", "ON")]
        executed = await rows(s, "SHOW VARIABLES LIKE 'gtid_executed'")
        assert executed == [("gtid_executed", f"{U}:1-3")]
        with pytest.raises(SqlError) as info:
            await q(s, "SHOW TABLES FROM nope")
        assert info.value.args[0] == 1049
        await srv.shutdown()

    run(scenario())


def test_show_warnings_after_a_note() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        out = await one(s, "DROP TABLE IF EXISTS nothing_here")
        assert out.warnings == 1
        assert await rows(s, "SHOW WARNINGS") == [
            ("Note", 1051, "Unknown table 'app.nothing_here'")
        ]
        assert await rows(s, "SHOW COUNT(*) WARNINGS") == [(1,)]
        await q(s, "SELECT 1")
        assert await rows(s, "SHOW WARNINGS") == []
        with pytest.raises(SqlError):
            await q(s, "SELECT * FROM nothing_here")
        assert await rows(s, "SHOW WARNINGS") == [
            ("Error", 1146, "Table 'app.nothing_here' doesn't exist")
        ]
        await srv.shutdown()

    run(scenario())


def test_information_schema_queries_of_sqlalchemy() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        assert await rows(
            s,
            "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'app' "
            "ORDER BY TABLE_NAME",
        ) == [("orders",), ("users",)]
        assert (
            await rows(
                s,
                "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_TYPE='SEQUENCE' and "
                "TABLE_NAME='x' AND TABLE_SCHEMA='app'",
            )
            == []
        )
        columns = await rows(
            s,
            "SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, DATA_TYPE, COLUMN_TYPE, "
            "COLUMN_KEY, EXTRA FROM information_schema.columns WHERE table_schema = 'app' AND "
            "table_name = 'orders' ORDER BY ORDINAL_POSITION",
        )
        assert columns == [
            ("id", 1, "NO", "bigint", "bigint unsigned", "PRI", "auto_increment"),
            ("user_id", 2, "NO", "int", "int", "MUL", ""),
            ("total", 3, "NO", "decimal", "decimal(10,2)", "", ""),
        ]
        fks = await rows(
            s,
            "SELECT CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME "
            "FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'app' AND "
            "REFERENCED_TABLE_NAME IS NOT NULL",
        )
        assert fks == [("fk_orders_user", "user_id", "users", "id")]
        assert (
            await scalar(
                s, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'app'"
            )
            == 1
        )
        await srv.shutdown()

    run(scenario())


def test_alter_table_keeps_rows_and_changes_layout() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "INSERT INTO users (name, email) VALUES ('a', 'a@x'), ('b', NULL)")
        await q(
            s,
            "ALTER TABLE users ADD COLUMN age INT UNSIGNED DEFAULT 7 AFTER name, "
            "DROP INDEX ix_name, RENAME COLUMN email TO mail, MODIFY name VARCHAR(80) "
            "NOT NULL",
        )
        assert await rows(s, "SELECT id, name, age, mail FROM users ORDER BY id") == [
            (1, "a", 7, "a@x"),
            (2, "b", 7, None),
        ]
        text = str((await rows(s, "SHOW CREATE TABLE users"))[0][1])
        assert "`name` varchar(80) NOT NULL" in text
        assert "ix_name" not in text
        assert "UNIQUE KEY `uq_email` (`mail`)" in text
        out = await one(s, "INSERT INTO users (name) VALUES ('c')")
        assert out.last_insert_id == 3  # the AUTO_INCREMENT counter survived the rebuild
        await q(s, "CREATE INDEX ix_age ON users (age)")
        await q(s, "DROP INDEX uq_email ON users")
        assert [r[2] for r in await rows(s, "SHOW INDEX FROM users")] == ["PRIMARY", "ix_age"]
        with pytest.raises(SqlError) as info:
            await q(s, "ALTER TABLE users ADD COLUMN age INT")
        assert info.value.args[0] == 1060
        with pytest.raises(SqlError) as info:
            await q(s, "ALTER TABLE users DROP COLUMN nope")
        assert info.value.args[0] == 1091
        await srv.shutdown()

    run(scenario())


def test_alter_adding_auto_increment_counts_on_from_the_largest_id() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        await q(s, "INSERT INTO t VALUES (100, 1)")
        await q(s, "ALTER TABLE t MODIFY id INT AUTO_INCREMENT")
        out = await one(s, "INSERT INTO t (v) VALUES (2)")
        assert out.last_insert_id == 101
        assert await scalar(s, "SELECT LAST_INSERT_ID()") == 101
        out = await one(s, "INSERT INTO t (v) VALUES (3), (4)")
        assert out.last_insert_id == 102
        assert await rows(s, "SELECT id, v FROM t ORDER BY id") == [
            (100, 1),
            (101, 2),
            (102, 3),
            (103, 4),
        ]
        await srv.shutdown()

    run(scenario())


def test_rename_truncate_drop_database() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        await q(s, "INSERT INTO users (name) VALUES ('a')")
        await q(s, "RENAME TABLE users TO people")
        assert await rows(s, "SELECT name FROM people") == [("a",)]
        await q(s, "TRUNCATE TABLE people")
        assert await scalar(s, "SELECT COUNT(*) FROM people") == 0
        out = await one(s, "INSERT INTO people (name) VALUES ('b')")
        assert out.last_insert_id == 1
        out = await one(s, "DROP DATABASE app")
        assert out.affected_rows == 2
        assert await scalar(s, "SELECT DATABASE()") is None
        await srv.shutdown()

    run(scenario())


def test_ddl_if_exists_forms_still_get_a_gtid() -> None:
    async def scenario() -> None:
        srv, s = await _app()
        before = srv.gtid_state.executed.count()
        await q(s, "CREATE TABLE IF NOT EXISTS users (a INT)")
        await q(s, "DROP TABLE IF EXISTS nothing")
        await q(s, "CREATE DATABASE IF NOT EXISTS app")
        assert srv.gtid_state.executed.count() == before + 3
        await srv.shutdown()

    run(scenario())


def test_mariadb_cli_startup_queries() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        out = await one(s, "select @@version_comment limit 1")
        assert out.result is not None
        assert out.result.columns[0].name == "@@version_comment"
        assert "consistent" in str(out.result.rows[0][0])
        assert await scalar(s, "SELECT DATABASE()") is None
        assert await scalar(s, "select USER()") == "root@localhost"
        await srv.shutdown()

    run(scenario())
