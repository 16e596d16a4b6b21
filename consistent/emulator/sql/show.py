"""SHOW and DESCRIBE, with the column names and layouts mysqld uses.

Covered: SHOW DATABASES|SCHEMAS, [FULL] TABLES, [FULL] COLUMNS|FIELDS, INDEX|KEYS,
CREATE TABLE, CREATE DATABASE, [GLOBAL|SESSION] VARIABLES, [GLOBAL|SESSION] STATUS, WARNINGS,
ERRORS, COUNT(*) WARNINGS|ERRORS, COLLATION, CHARACTER SET, ENGINES, [FULL] PROCESSLIST,
MASTER STATUS / BINARY LOG STATUS, BINARY LOGS, GRANTS, REPLICA|SLAVE STATUS (empty, no
channel); each with ``LIKE 'pattern'`` where mysqld accepts it.  ``WHERE`` filters are not
supported (1235).  Other parts of the emulator can register more forms in
:attr:`EmulatedServer.show_handlers` (keyed by the words after SHOW, e.g. ``"REPLICA STATUS"``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from consistent.emulator.errors import ER, not_supported, sql_error
from consistent.emulator.results import Column, ResultSet, StmtResult, bigint_column, text_column
from consistent.emulator.sql.catalog import SYSTEM_SCHEMAS, TableDef
from consistent.emulator.sql.infoschema import (
    column_default,
    column_extra,
    column_key,
    processlist_rows,
    status_rows,
)
from consistent.emulator.sql.lexer import Statement, TokenStream
from consistent.emulator.sysvars import CHARSETS, COLLATIONS
from consistent.emulator.variables import SYSTEM_VARIABLES, value_text

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["like_match", "run_describe", "run_show"]

Row = tuple[object, ...]


def like_match(pattern: str, text: str) -> bool:
    """SQL LIKE (``%``, ``_``, backslash escape), case-insensitive as utf8mb4_0900_ai_ci."""
    regex = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(regex), text, re.IGNORECASE | re.DOTALL) is not None


def _result(columns: list[Column], rows: list[Row]) -> StmtResult:
    return StmtResult(result=ResultSet(tuple(columns), tuple(rows)))


def _texts(*names: str) -> list[Column]:
    return [text_column(n) for n in names]


def _like(ts: TokenStream) -> str | None:
    if ts.accept("LIKE"):
        pattern = ts.string()
        ts.expect_end()
        return pattern
    if ts.peek_upper() == "WHERE":
        raise not_supported("SHOW … WHERE")
    ts.expect_end()
    return None


def _scope(ts: TokenStream) -> bool:
    if ts.accept("GLOBAL"):
        return True
    ts.accept("SESSION") or ts.accept("LOCAL")
    return False


async def _databases(session: Session, ts: TokenStream) -> StmtResult:
    pattern = _like(ts)
    names = sorted({*session.server.catalog.databases, "information_schema", "performance_schema"})
    rows: list[Row] = [(n,) for n in names if pattern is None or like_match(pattern, n)]
    label = "Database" if pattern is None else f"Database ({pattern})"
    return _result(_texts(label), rows)


def _from_schema(session: Session, ts: TokenStream) -> str:
    if ts.accept("FROM") or ts.accept("IN"):
        name = ts.ident()
        if not session.server.has_database(name):
            raise sql_error(ER.BAD_DB_ERROR, name)
        return name
    return session.require_database()


async def _tables(session: Session, ts: TokenStream, full: bool) -> StmtResult:
    schema = _from_schema(session, ts)
    pattern = _like(ts)
    rows: list[Row] = []
    database = session.server.catalog.database(schema)
    names: list[tuple[str, str]] = []
    if database is not None:
        names = [(n, "BASE TABLE") for n in database.tables]
    names += [
        (vt.table.name, "SYSTEM VIEW")
        for (s, _), vt in session.server.virtual_tables.items()
        if s == schema.lower()
    ]
    for name, kind in sorted(names):
        if pattern is None or like_match(pattern, name):
            rows.append((name, kind) if full else (name,))
    label = f"Tables_in_{schema}" + (f" ({pattern})" if pattern is not None else "")
    columns = _texts(label, "Table_type") if full else _texts(label)
    return _result(columns, rows)


def _table_for(session: Session, ts: TokenStream) -> TableDef:
    schema, name = ts.qualified()
    if ts.accept("FROM") or ts.accept("IN"):
        schema = ts.ident()
    return session.resolve_table(schema, name).table


def _column_rows(table: TableDef, full: bool, pattern: str | None) -> list[Row]:
    rows: list[Row] = []
    for col in table.columns:
        if pattern is not None and not like_match(pattern, col.name):
            continue
        null = "YES" if col.nullable else "NO"
        key = column_key(table, col.name)
        extra = column_extra(col)
        if full:
            collation = (col.type.collation or table.collation) if col.type.charset else None
            rows.append(
                (
                    col.name,
                    col.type.sql(),
                    collation,
                    null,
                    key,
                    column_default(col),
                    extra,
                    "select,insert,update,references",
                    col.comment,
                )
            )
        else:
            rows.append((col.name, col.type.sql(), null, key, column_default(col), extra))
    return rows


def _column_columns(full: bool) -> list[Column]:
    if full:
        return _texts(
            "Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"
        )
    return _texts("Field", "Type", "Null", "Key", "Default", "Extra")


async def _columns(session: Session, ts: TokenStream, full: bool) -> StmtResult:
    table = _table_for(session, ts)
    pattern = _like(ts)
    return _result(_column_columns(full), _column_rows(table, full, pattern))


async def _index(session: Session, ts: TokenStream) -> StmtResult:
    table = _table_for(session, ts)
    ts.expect_end()
    columns = [
        text_column("Table"),
        bigint_column("Non_unique"),
        text_column("Key_name"),
        bigint_column("Seq_in_index"),
        text_column("Column_name"),
        text_column("Collation"),
        bigint_column("Cardinality"),
        bigint_column("Sub_part"),
        text_column("Packed"),
        text_column("Null"),
        text_column("Index_type"),
        text_column("Comment"),
        text_column("Index_comment"),
        text_column("Visible"),
        text_column("Expression"),
    ]
    rows: list[Row] = []
    for index in table.sorted_indexes():
        for seq, name in enumerate(index.columns, 1):
            col = table.column(name)
            rows.append(
                (
                    table.name,
                    0 if index.unique else 1,
                    index.name,
                    seq,
                    name,
                    "A",
                    0,
                    None,
                    None,
                    "YES" if col is not None and col.nullable else "",
                    "BTREE",
                    "",
                    "",
                    "YES",
                    None,
                )
            )
    return _result(columns, rows)


def next_auto_increment(session: Session, table: TableDef) -> int | None:
    """The AUTO_INCREMENT value SHOW CREATE TABLE prints (None without such a column)."""
    if table.auto_column is None:
        return None
    where = "temp" if table.temporary else "main"
    try:
        row = session.store.conn.execute(
            f"SELECT seq FROM {where}.sqlite_sequence WHERE name = ?",
            (f"{table.schema}.{table.name}",),
        ).fetchone()
    except Exception:  # no sqlite_sequence yet in that schema
        row = None
    if row is None:
        return table.auto_increment
    return int(row[0]) + 1


async def _create(session: Session, ts: TokenStream) -> StmtResult:
    if ts.accept("DATABASE") or ts.accept("SCHEMA"):
        ts.accept("IF", "NOT", "EXISTS")
        name = ts.ident()
        ts.expect_end()
        database = session.server.catalog.database(name)
        if database is None:
            raise sql_error(ER.BAD_DB_ERROR, name)
        text = (
            f"CREATE DATABASE `{name}` /*!40100 DEFAULT CHARACTER SET {database.charset} "
            f"COLLATE {database.collation} */ /*!80016 DEFAULT ENCRYPTION='N' */"
        )
        return _result(_texts("Database", "Create Database"), [(name, text)])
    ts.expect("TABLE")
    table = _table_for(session, ts)
    ts.expect_end()
    text = table.show_create(next_auto_increment(session, table))
    return _result([text_column("Table"), text_column("Create Table", 1024)], [(table.name, text)])


async def _variables(session: Session, ts: TokenStream, global_scope: bool) -> StmtResult:
    pattern = _like(ts)
    rows: list[Row] = []
    for name, var in sorted(SYSTEM_VARIABLES.items()):
        if pattern is not None and not like_match(pattern, name):
            continue
        value = session.get_variable(name, global_scope=global_scope or not var.has_session)
        rows.append((name, value_text(var, value)))
    return _result(_texts("Variable_name", "Value"), rows)


async def _status(session: Session, ts: TokenStream) -> StmtResult:
    pattern = _like(ts)
    rows: list[Row] = [
        r for r in status_rows(session) if pattern is None or like_match(pattern, r[0])
    ]
    return _result(_texts("Variable_name", "Value"), rows)


async def _warnings(session: Session, ts: TokenStream, errors_only: bool) -> StmtResult:
    limit = None
    if ts.accept("LIMIT"):
        limit = ts.number()
    ts.expect_end()
    rows: list[Row] = [
        (w.level, w.code, w.message)
        for w in session.warnings
        if not errors_only or w.level == "Error"
    ]
    if limit is not None:
        rows = rows[:limit]
    return _result(
        [
            text_column("Level", 7),
            bigint_column("Code", unsigned=True),
            text_column("Message", 512),
        ],
        rows,
    )


async def _count(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect("(", "*", ")")
    which = "warning" if ts.accept("WARNINGS") else ("error" if ts.accept("ERRORS") else None)
    if which is None:
        raise ts.error()
    ts.expect_end()
    count = (
        len(session.warnings)
        if which == "warning"
        else sum(1 for w in session.warnings if w.level == "Error")
    )
    return _result([bigint_column(f"@@session.{which}_count")], [(count,)])


async def _collation(session: Session, ts: TokenStream) -> StmtResult:
    pattern = _like(ts)
    rows: list[Row] = [
        (name, charset, ident, "Yes" if default else "", "Yes", 0, "NO PAD")
        for name, (charset, ident, default) in sorted(COLLATIONS.items())
        if pattern is None or like_match(pattern, name)
    ]
    columns = [
        text_column("Collation"),
        text_column("Charset"),
        bigint_column("Id"),
        text_column("Default"),
        text_column("Compiled"),
        bigint_column("Sortlen"),
        text_column("Pad_attribute"),
    ]
    return _result(columns, rows)


async def _charset(session: Session, ts: TokenStream) -> StmtResult:
    pattern = _like(ts)
    rows: list[Row] = [
        (name, description, collation, maxlen)
        for name, (collation, description, maxlen) in sorted(CHARSETS.items())
        if name != "utf8" and (pattern is None or like_match(pattern, name))
    ]
    columns = [
        text_column("Charset"),
        text_column("Description"),
        text_column("Default collation"),
        bigint_column("Maxlen"),
    ]
    return _result(columns, rows)


async def _engines(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect_end()
    return _result(
        _texts("Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"),
        [
            (
                "InnoDB",
                "DEFAULT",
                "Supports transactions, row-level locking, and foreign keys",
                "YES",
                "YES",
                "YES",
            )
        ],
    )


async def _processlist(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect_end()
    rows = processlist_rows(session)
    columns = [
        bigint_column("Id"),
        text_column("User"),
        text_column("Host"),
        text_column("db"),
        text_column("Command"),
        bigint_column("Time"),
        text_column("State"),
        text_column("Info", 100),
    ]
    return _result(columns, rows)


async def _master_status(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect_end()
    binlog = session.server.binlog
    columns = [
        text_column("File"),
        bigint_column("Position", unsigned=True),
        text_column("Binlog_Do_DB"),
        text_column("Binlog_Ignore_DB"),
        text_column("Executed_Gtid_Set", 1024),
    ]
    if binlog is None:
        return _result(columns, [])
    current = binlog.current
    return _result(
        columns, [(current.name, current.size, "", "", str(session.server.gtid_state.executed))]
    )


async def _binary_logs(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect_end()
    binlog = session.server.binlog
    if binlog is None:
        raise sql_error(ER.NO_BINARY_LOGGING)
    columns = [
        text_column("Log_name"),
        bigint_column("File_size", unsigned=True),
        text_column("Encrypted"),
    ]
    return _result(columns, [(f.name, f.size, "No") for f in binlog.files])


async def _grants(session: Session, ts: TokenStream) -> StmtResult:
    user = session.user
    label = f"Grants for {user}@%"
    return _result(
        _texts(label), [(f"GRANT ALL PRIVILEGES ON *.* TO `{user}`@`%` WITH GRANT OPTION",)]
    )


async def _replica_status(session: Session, ts: TokenStream) -> StmtResult:
    ts.expect_end()
    return _result(
        _texts(
            "Replica_IO_State",
            "Source_Host",
            "Source_User",
            "Source_Port",
            "Replica_IO_Running",
            "Replica_SQL_Running",
            "Retrieved_Gtid_Set",
            "Executed_Gtid_Set",
        ),
        [],
    )


async def _columns_from(session: Session, ts: TokenStream, full: bool) -> StmtResult:
    if not (ts.accept("FROM") or ts.accept("IN")):
        raise ts.error()
    return await _columns(session, ts, full)


async def _index_from(session: Session, ts: TokenStream) -> StmtResult:
    if not (ts.accept("FROM") or ts.accept("IN")):
        raise ts.error()
    return await _index(session, ts)


_Show = Callable[["Session", TokenStream], Awaitable["StmtResult"]]

_SIMPLE: Final[dict[tuple[str, ...], _Show]] = {
    ("DATABASES",): _databases,
    ("SCHEMAS",): _databases,
    ("TABLES",): lambda s, t: _tables(s, t, False),
    ("FULL", "TABLES"): lambda s, t: _tables(s, t, True),
    ("COLUMNS",): lambda s, t: _columns_from(s, t, False),
    ("FIELDS",): lambda s, t: _columns_from(s, t, False),
    ("FULL", "COLUMNS"): lambda s, t: _columns_from(s, t, True),
    ("FULL", "FIELDS"): lambda s, t: _columns_from(s, t, True),
    ("INDEX",): _index_from,
    ("INDEXES",): _index_from,
    ("KEYS",): _index_from,
    ("CREATE",): _create,
    ("WARNINGS",): lambda s, t: _warnings(s, t, False),
    ("ERRORS",): lambda s, t: _warnings(s, t, True),
    ("COUNT",): _count,
    ("COLLATION",): _collation,
    ("CHARACTER", "SET"): _charset,
    ("CHARSET",): _charset,
    ("ENGINES",): _engines,
    ("STORAGE", "ENGINES"): _engines,
    ("PROCESSLIST",): _processlist,
    ("FULL", "PROCESSLIST"): _processlist,
    ("MASTER", "STATUS"): _master_status,
    ("BINARY", "LOG", "STATUS"): _master_status,
    ("BINARY", "LOGS"): _binary_logs,
    ("MASTER", "LOGS"): _binary_logs,
    ("GRANTS",): _grants,
    ("REPLICA", "STATUS"): _replica_status,
    ("SLAVE", "STATUS"): _replica_status,
}


async def run_show(session: Session, statement: Statement) -> StmtResult:
    """Dispatch a SHOW statement."""
    ts = TokenStream(statement)
    ts.expect("SHOW")
    extension = session.server.show_handlers
    for length in (3, 2, 1):
        words = tuple(ts.peek_upper(i) for i in range(length))
        key = " ".join(words)
        if key in extension:
            for _ in words:
                ts.next()
            result: StmtResult = await extension[key](session, ts)
            return result
    if ts.peek_upper() in ("GLOBAL", "SESSION", "LOCAL"):
        global_scope = _scope(ts)
        if ts.accept("VARIABLES"):
            return await _variables(session, ts, global_scope)
        if ts.accept("STATUS"):
            return await _status(session, ts)
        raise ts.error()
    if ts.accept("VARIABLES"):
        return await _variables(session, ts, False)
    if ts.accept("STATUS"):
        return await _status(session, ts)
    for length in (3, 2, 1):
        words = tuple(ts.peek_upper(i) for i in range(length))
        handler = _SIMPLE.get(words)
        if handler is not None:
            for _ in words:
                ts.next()
            return await handler(session, ts)
    if ts.at_end():
        raise ts.error()
    raise not_supported("SHOW " + " ".join(t.upper for t in statement.tokens[1:3]))


async def run_describe(session: Session, statement: Statement) -> StmtResult:
    """DESCRIBE / DESC / EXPLAIN table [column]; EXPLAIN of a query is not supported."""
    ts = TokenStream(statement)
    ts.next()
    if ts.peek_upper() in (
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "WITH",
        "FORMAT",
        "ANALYZE",
        "TABLE",
        "FOR",
        "(",
    ):
        raise not_supported("EXPLAIN")
    table = _table_for(session, ts)
    pattern = None
    if not ts.at_end():
        pattern = ts.string()
    ts.expect_end()
    return _result(_column_columns(False), _column_rows(table, False, pattern))


def is_system_schema(name: str) -> bool:
    """Whether ``name`` is one of mysqld's own schemas."""
    return name.lower() in SYSTEM_SCHEMAS
