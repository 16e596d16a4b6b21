"""DDL: CREATE/DROP/ALTER/RENAME/TRUNCATE of tables and databases, CREATE/DROP INDEX.

DDL on base tables commits the open transaction, then runs as a transaction of its own that is
always logged (so it always gets a GTID), even ``… IF [NOT] EXISTS`` that changes nothing, as
mysqld logs it.  Temporary tables are per session, never logged and never commit implicitly.

SQLite cannot change a column in place, so ALTER TABLE rebuilds the table: create the new
layout, copy the rows, drop the old table, rename.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from consistent.emulator.errors import ER, not_supported, sql_error
from consistent.emulator.results import StmtResult
from consistent.emulator.sql.catalog import (
    SYSTEM_SCHEMAS,
    Database,
    IndexDef,
    TableDef,
    quote_ident,
    sqlite_name,
)
from consistent.emulator.sql.ddl import (
    AddIndex,
    AlterAction,
    DropIndex,
    RenameTable,
    apply_alter,
    build_table,
    key_parts,
    parse_alter_table,
    parse_create_table,
)
from consistent.emulator.sql.lexer import Statement, TokenStream
from consistent.emulator.sysvars import CHARSETS, COLLATIONS

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["run_alter", "run_create", "run_drop", "run_rename", "run_truncate"]

_NOTE = "Note"


def _ok() -> StmtResult:
    return StmtResult()


def _check_schema_writable(schema: str) -> None:
    if schema.lower() in ("information_schema", "performance_schema", "sys"):
        raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for user to database '{schema}'")


# ----- databases -----------------------------------------------------------------------------


def _database_options(ts: TokenStream) -> tuple[str | None, str | None]:
    charset = collation = None
    while not ts.at_end():
        ts.accept("DEFAULT")
        if ts.accept("CHARACTER", "SET") or ts.accept("CHARSET"):
            ts.accept("=")
            charset = ts.ident().lower()
        elif ts.accept("COLLATE"):
            ts.accept("=")
            collation = ts.ident().lower()
        elif ts.accept("ENCRYPTION") or ts.accept("READ", "ONLY"):
            ts.accept("=")
            ts.next()
        else:
            raise ts.error()
    if charset is not None and charset not in CHARSETS:
        raise sql_error(ER.UNKNOWN_CHARACTER_SET, charset)
    if collation is not None and collation not in COLLATIONS:
        raise sql_error(ER.UNKNOWN_COLLATION, collation)
    return charset, collation


async def _create_database(session: Session, ts: TokenStream, statement: Statement) -> StmtResult:
    if_not_exists = ts.accept("IF", "NOT", "EXISTS")
    name = ts.ident()
    charset, collation = _database_options(ts)
    await session.begin_ddl()
    catalog = session.server.catalog
    if session.server.has_database(name):
        if not if_not_exists:
            raise sql_error(ER.DB_CREATE_EXISTS, name)
        session.warn(
            int(ER.DB_CREATE_EXISTS), f"Can't create database '{name}'; database exists", _NOTE
        )
    else:
        charset = charset or (COLLATIONS[collation][0] if collation else "utf8mb4")
        collation = collation or CHARSETS[charset][0]
        catalog.add_database(Database(name, charset, collation))
    session.record_change(statement.text)
    return _ok()


async def _drop_database(session: Session, ts: TokenStream, statement: Statement) -> StmtResult:
    if_exists = ts.accept("IF", "EXISTS")
    name = ts.ident()
    ts.expect_end()
    if name.lower() in SYSTEM_SCHEMAS:
        raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for user to database '{name}'")
    await session.begin_ddl()
    catalog = session.server.catalog
    database = catalog.database(name)
    if database is None:
        if not if_exists:
            raise sql_error(ER.DB_DROP_EXISTS, name)
        session.warn(
            int(ER.DB_DROP_EXISTS), f"Can't drop database '{name}'; database doesn't exist", _NOTE
        )
    else:
        for table in list(database.tables.values()):
            session.execute_sql(f"DROP TABLE IF EXISTS main.{table.sqlite}")
        catalog.drop_database(name)
        if session.database == name:
            session.database = None
            session.trackers.schema_set()
    session.record_change(statement.text)
    return StmtResult(affected_rows=len(database.tables) if database is not None else 0)


# ----- tables ---------------------------------------------------------------------------------


async def _create_table(session: Session, ts: TokenStream, statement: Statement) -> StmtResult:
    create = parse_create_table(ts, session.database)
    schema = create.schema or session.require_database()
    _check_schema_writable(schema)
    database = session.server.catalog.database(schema)
    if database is None:
        raise sql_error(ER.BAD_DB_ERROR, schema)
    if create.like is not None:
        like_schema, like_name = create.like
        source = session.find_table(like_schema or schema, like_name)
        if source is None:
            raise sql_error(ER.NO_SUCH_TABLE, like_schema or schema, like_name)
        table = replace(
            source,
            schema=schema,
            name=create.name,
            temporary=create.temporary,
            auto_increment=None,
            foreign_keys=(),
        )
    else:
        table = build_table(create, schema, database.charset, database.collation)
    for key in table.foreign_keys:
        parent = session.find_table(key.ref_schema, key.ref_table)
        if parent is None:
            raise sql_error(ER.FK_CANNOT_OPEN_PARENT, key.ref_table)
    if create.temporary:
        return await _create_temporary(session, table, create.if_not_exists)
    await session.begin_ddl()
    existing = session.server.catalog.table(schema, create.name)
    if existing is not None:
        if not create.if_not_exists:
            raise sql_error(ER.TABLE_EXISTS_ERROR, create.name)
        session.warn(int(ER.TABLE_EXISTS_ERROR), f"Table '{create.name}' already exists", _NOTE)
    else:
        for sql in table.sqlite_ddl():
            session.execute_sql(sql)
        session.server.catalog.put_table(table)
    session.record_change(statement.text)
    return _ok()


async def _create_temporary(session: Session, table: TableDef, if_not_exists: bool) -> StmtResult:
    key = (table.schema, table.name)
    if key in session.temp_tables:
        if not if_not_exists:
            raise sql_error(ER.TABLE_EXISTS_ERROR, table.name)
        session.warn(int(ER.TABLE_EXISTS_ERROR), f"Table '{table.name}' already exists", _NOTE)
        return _ok()
    await session.begin_temp_write()
    for sql in table.sqlite_ddl():
        session.execute_sql(sql)
    session.temp_tables[key] = table
    session.trackers.session_state_changed()
    return _ok()


def _table_list(ts: TokenStream) -> list[tuple[str | None, str]]:
    names = [ts.qualified()]
    while ts.accept(","):
        names.append(ts.qualified())
    ts.accept("RESTRICT") or ts.accept("CASCADE")
    ts.expect_end()
    return names


async def _drop_table(
    session: Session, ts: TokenStream, statement: Statement, temporary: bool
) -> StmtResult:
    ts.expect("TABLE") if not ts.accept("TABLES") else None
    if_exists = ts.accept("IF", "EXISTS")
    names = _table_list(ts)
    resolved: list[tuple[str, str]] = [(s or session.require_database(), n) for s, n in names]
    temps = [k for k in resolved if k in session.temp_tables]
    bases = [k for k in resolved if k not in session.temp_tables]
    if temporary and bases:
        missing = bases[0]
        if not if_exists:
            raise sql_error(ER.BAD_TABLE_ERROR, f"{missing[0]}.{missing[1]}")
    if not temporary:
        unknown = [k for k in bases if session.server.catalog.table(*k) is None]
        if unknown and not if_exists:
            raise sql_error(ER.BAD_TABLE_ERROR, ",".join(f"{s}.{n}" for s, n in unknown))
        if bases:
            await session.begin_ddl()
    for key in temps:
        table = session.temp_tables.pop(key)
        session.execute_sql(f"DROP TABLE IF EXISTS temp.{table.sqlite}")
        session.trackers.session_state_changed()
    if temporary:
        return _ok()
    for key in bases:
        base = session.server.catalog.table(*key)
        if base is None:
            session.warn(int(ER.BAD_TABLE_ERROR), f"Unknown table '{key[0]}.{key[1]}'", _NOTE)
            continue
        session.execute_sql(f"DROP TABLE main.{base.sqlite}")
        session.server.catalog.remove_table(*key)
    if bases:
        session.record_change(statement.text)
    return _ok()


async def _rebuild(session: Session, old: TableDef, new: TableDef, renames: dict[str, str]) -> None:
    """Replace ``old`` by ``new`` in SQLite, copying rows (columns mapped by ``renames``)."""
    schema = "temp" if old.temporary else "main"
    scratch = sqlite_name(new.schema, new.name) + "$rebuild"
    session.execute_sql(new.create_sql(scratch))
    kept = [(src, dst) for src, dst in renames.items() if new.column(dst) is not None]
    targets = [quote_ident(dst) for _, dst in kept]
    sources = [quote_ident(src) for src, _ in kept]
    for col in new.columns:
        if col.default_is_now and col.name not in [d for _, d in kept]:
            targets.append(quote_ident(col.name))
            sources.append("MY_NOW(" + str(col.type.scale or 0) + ")")
    if targets:
        session.execute_sql(
            f"INSERT INTO {schema}.{quote_ident(scratch)} ({', '.join(targets)}) "
            f"SELECT {', '.join(sources)} FROM {schema}.{old.sqlite}"
        )
    sequence = session.execute_sql(
        f"SELECT seq FROM {schema}.sqlite_sequence WHERE name = ?",
        (sqlite_name(old.schema, old.name),),
    ).fetchone()
    session.execute_sql(f"DROP TABLE {schema}.{old.sqlite}")
    session.execute_sql(f"ALTER TABLE {schema}.{quote_ident(scratch)} RENAME TO {new.sqlite}")
    for sql in new.index_sqls():
        session.execute_sql(sql)
    if new.rowid_alias():
        start = new.auto_increment - 1 if new.auto_increment else None
        seq = max(int(sequence[0]) if sequence else 0, start or 0)
        session.execute_sql(
            f"DELETE FROM {schema}.sqlite_sequence WHERE name = ?",
            (sqlite_name(new.schema, new.name),),
        )
        session.execute_sql(
            f"INSERT INTO {schema}.sqlite_sequence (name, seq) VALUES (?, ?)",
            (sqlite_name(new.schema, new.name), seq),
        )


async def _alter(
    session: Session,
    schema: str | None,
    name: str,
    actions: list[AlterAction],
    statement: Statement,
) -> StmtResult:
    schema = schema or session.require_database()
    temp = session.temp_tables.get((schema, name))
    table = temp if temp is not None else session.server.catalog.table(schema, name)
    if table is None:
        raise sql_error(ER.NO_SUCH_TABLE, schema, name)
    new, renames = apply_alter(table, actions)
    if new.schema != table.schema or new.name != table.name:
        target_exists = session.find_table(new.schema, new.name) is not None
        if target_exists:
            raise sql_error(ER.TABLE_EXISTS_ERROR, new.name)
        if session.server.catalog.database(new.schema) is None:
            raise sql_error(ER.BAD_DB_ERROR, new.schema)
    if table.temporary:
        await session.begin_temp_write()
    else:
        await session.begin_ddl()
    await _rebuild(session, table, new, renames)
    if table.temporary:
        del session.temp_tables[(table.schema, table.name)]
        session.temp_tables[(new.schema, new.name)] = new
    else:
        session.server.catalog.remove_table(table.schema, table.name)
        session.server.catalog.put_table(new)
        session.record_change(statement.text)
    return _ok()


async def _create_index(session: Session, ts: TokenStream, statement: Statement) -> StmtResult:
    unique = ts.accept("UNIQUE")
    ts.accept("FULLTEXT") or ts.accept("SPATIAL")
    ts.expect("INDEX")
    index_name = ts.ident()
    if ts.accept("USING"):
        ts.next()
    ts.expect("ON")
    schema, table = ts.qualified()
    parts = key_parts(ts)
    while ts.accept("ALGORITHM") or ts.accept("LOCK"):
        ts.accept("=")
        ts.next()
    ts.expect_end()
    return await _alter(
        session, schema, table, [AddIndex(IndexDef(index_name, parts, unique=unique))], statement
    )


async def run_create(session: Session, statement: Statement) -> StmtResult:
    """CREATE TABLE / DATABASE / INDEX."""
    ts = TokenStream(statement)
    ts.expect("CREATE")
    if ts.accept("DATABASE") or ts.accept("SCHEMA"):
        return await _create_database(session, ts, statement)
    if ts.peek_upper() in ("TABLE", "TEMPORARY"):
        return await _create_table(session, ts, statement)
    if ts.peek_upper() in ("INDEX", "UNIQUE", "FULLTEXT", "SPATIAL"):
        return await _create_index(session, ts, statement)
    what = ts.peek_upper() or "CREATE"
    if what == "OR":
        what = "VIEW"
    raise not_supported(f"CREATE {what}")


async def run_drop(session: Session, statement: Statement) -> StmtResult:
    """DROP TABLE / DATABASE / INDEX."""
    ts = TokenStream(statement)
    ts.expect("DROP")
    if ts.accept("DATABASE") or ts.accept("SCHEMA"):
        return await _drop_database(session, ts, statement)
    if ts.accept("TEMPORARY"):
        return await _drop_table(session, ts, statement, temporary=True)
    if ts.peek_upper() in ("TABLE", "TABLES"):
        return await _drop_table(session, ts, statement, temporary=False)
    if ts.accept("INDEX"):
        name = ts.ident()
        ts.expect("ON")
        schema, table = ts.qualified()
        while ts.accept("ALGORITHM") or ts.accept("LOCK"):
            ts.accept("=")
            ts.next()
        ts.expect_end()
        return await _alter(session, schema, table, [DropIndex(name)], statement)
    raise not_supported(f"DROP {ts.peek_upper() or ''}".strip())


async def run_alter(session: Session, statement: Statement) -> StmtResult:
    """ALTER TABLE / ALTER DATABASE."""
    ts = TokenStream(statement)
    ts.expect("ALTER")
    if ts.accept("DATABASE") or ts.accept("SCHEMA"):
        name = (
            session.require_database()
            if ts.peek_upper() in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE")
            else ts.ident()
        )
        charset, collation = _database_options(ts)
        database = session.server.catalog.database(name)
        if database is None:
            raise sql_error(ER.BAD_DB_ERROR, name)
        await session.begin_ddl()
        if charset is not None:
            database.charset = charset
            database.collation = collation or CHARSETS[charset][0]
        elif collation is not None:
            database.collation = collation
        session.record_change(statement.text)
        return _ok()
    if ts.peek_upper() not in ("TABLE",):
        raise not_supported(f"ALTER {ts.peek_upper()}")
    schema, name, actions = parse_alter_table(ts)
    return await _alter(session, schema, name, actions, statement)


async def run_rename(session: Session, statement: Statement) -> StmtResult:
    """RENAME TABLE a TO b [, c TO d]."""
    ts = TokenStream(statement)
    ts.expect("RENAME")
    if not (ts.accept("TABLE") or ts.accept("TABLES")):
        raise not_supported("RENAME USER")
    pairs: list[tuple[tuple[str | None, str], tuple[str | None, str]]] = []
    while True:
        source = ts.qualified()
        ts.expect("TO")
        pairs.append((source, ts.qualified()))
        if not ts.accept(","):
            break
    ts.expect_end()
    for (schema, name), (new_schema, new_name) in pairs:
        await _alter(
            session, schema, name, [RenameTable(new_schema or schema, new_name)], statement
        )
    return _ok()


async def run_truncate(session: Session, statement: Statement) -> StmtResult:
    """TRUNCATE [TABLE] t: empty it and restart AUTO_INCREMENT."""
    ts = TokenStream(statement)
    ts.expect("TRUNCATE")
    ts.accept("TABLE")
    schema, name = ts.qualified()
    ts.expect_end()
    target = schema or session.require_database()
    table = session.find_table(target, name)
    if table is None:
        raise sql_error(ER.NO_SUCH_TABLE, target, name)
    where = "temp" if table.temporary else "main"
    if table.temporary:
        await session.begin_temp_write()
    else:
        await session.begin_ddl()
    session.execute_sql(f"DELETE FROM {where}.{table.sqlite}")
    session.execute_sql(
        f"DELETE FROM {where}.sqlite_sequence WHERE name = ?",
        (sqlite_name(table.schema, table.name),),
    )
    if not table.temporary:
        session.record_change(statement.text)
    return _ok()
