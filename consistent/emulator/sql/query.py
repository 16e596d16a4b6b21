"""SELECT, INSERT, UPDATE and DELETE on SQLite, with MySQL's results and side effects.

Each statement is parsed (sqlglot, MySQL dialect), functions that wait
(``WAIT_FOR_EXECUTED_GTID_SET``, ``SLEEP``) are evaluated first and replaced by their result,
the tree is translated (:mod:`consistent.emulator.sql.translate`) and run on the session's
connection.  Writes to base tables take the writer lock and are remembered for the binary log;
writes to temporary tables are not logged and get no GTID, as with ``binlog_format=ROW``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from sqlglot import exp

from consistent.emulator import gtid_waits
from consistent.emulator.errors import ER, not_supported, sql_error
from consistent.emulator.results import Column, ResultSet, StmtResult
from consistent.emulator.sql.catalog import TableDef, quote_ident
from consistent.emulator.sql.errors import ErrorContext
from consistent.emulator.sql.lexer import Statement, split_statements
from consistent.emulator.sql.metadata import projection_names, result_columns, select_projections
from consistent.emulator.sql.translate import (
    DEFERRED_FUNCTIONS,
    TableRef,
    literal,
    parse_mysql,
    to_sqlite,
    translate,
)
from consistent.emulator.sql.types import Family
from consistent.emulator.tracker import TxState
from consistent.protocol.constants import Capability

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = [
    "describe_select",
    "evaluate_expressions",
    "run_delete",
    "run_insert",
    "run_select",
    "run_select_text",
    "run_update",
]

_VALUES_FUNCTION: Final = "VALUES"


# ----- helpers -------------------------------------------------------------------------------


async def _evaluate_deferred(session: Session, tree: exp.Expression) -> None:
    """Replace WAIT_FOR_EXECUTED_GTID_SET(…) / SLEEP(…) calls by their awaited results."""
    calls = [
        node
        for node in tree.find_all(exp.Anonymous)
        if str(node.this).upper() in DEFERRED_FUNCTIONS
    ]
    for call in calls:
        name = str(call.this).upper()
        if any(isinstance(n, exp.Column) for arg in call.expressions for n in arg.walk()):
            raise not_supported(f"{name}() with column arguments")
        args = await evaluate_expressions(session, [a.copy() for a in call.expressions])
        result = await gtid_waits.call(session, name, args)
        call.replace(literal(result))


async def evaluate_expressions(session: Session, nodes: list[exp.Expression]) -> list[object]:
    """Values of constant expressions (``SELECT expr, …`` without tables)."""
    if not nodes:
        return []
    select = exp.Select(expressions=nodes)
    await _evaluate_deferred(session, select)
    translation = translate(session, select)
    row = session.execute_sql(translation.sql()).fetchone()
    return list(row) if row is not None else [None] * len(nodes)


def _base_tables(refs: list[TableRef]) -> list[TableDef]:
    return [r.table for r in refs if not r.virtual and not r.table.temporary]


# ----- SELECT -------------------------------------------------------------------------------


async def run_select(session: Session, statement: Statement) -> StmtResult:
    """A SELECT (or WITH … SELECT, TABLE t, UNION…): a result set."""
    tree = parse_mysql(statement.text)
    if tree.args.get("into") is not None:
        raise not_supported("SELECT … INTO")
    names = projection_names(statement)
    await _evaluate_deferred(session, tree)
    original = tree.copy()
    translation = translate(session, tree)
    if translation.tables:
        session.note_read()
        if translation.locking and session.in_txn and _base_tables(translation.tables):
            await session.begin_write()
    cursor = session.execute_sql(translation.sql())
    rows = cursor.fetchall()
    description = [d[0] for d in cursor.description or ()]
    columns, converted = result_columns(
        select_projections(original), names, translation.tables, description, rows
    )
    session.set_found_rows(len(rows))
    session.trackers.transaction.add_state(TxState.RESULT_SET, autocommit=session.autocommit)
    return StmtResult(result=ResultSet(tuple(columns), tuple(converted)))


def describe_select(session: Session, statement: Statement) -> tuple[Column, ...]:
    """Result columns of a SELECT without running it (for COM_STMT_PREPARE).

    Types that only values would reveal stay NULL; the execute response carries the final
    metadata.  Unknown tables fail as in mysqld (1146 at prepare time).
    """
    tree = parse_mysql(statement.text)
    if any(str(n.this).upper() in DEFERRED_FUNCTIONS for n in tree.find_all(exp.Anonymous)):
        return ()
    names = projection_names(statement)
    original = tree.copy()
    translation = translate(session, tree)
    cursor = session.execute_sql(f"SELECT * FROM ({translation.sql()}) LIMIT 0")
    description = [d[0] for d in cursor.description or ()]
    columns, _ = result_columns(
        select_projections(original), names, translation.tables, description, []
    )
    return tuple(columns)


async def run_select_text(session: Session, text: str) -> StmtResult:
    """Run SELECT text built by the emulator itself (DO, prepared statements)."""
    statements = split_statements(text)
    if len(statements) != 1:
        raise sql_error(ER.EMPTY_QUERY)
    return await run_select(session, statements[0])


# ----- INSERT / REPLACE ---------------------------------------------------------------------


def _target(tree: exp.Expression) -> tuple[exp.Table, list[str] | None]:
    this = tree.this
    if isinstance(this, exp.Schema):
        table = this.this
        columns = [c.name for c in this.expressions]
        assert isinstance(table, exp.Table)
        return table, columns
    assert isinstance(this, exp.Table)
    return this, None


def _table_name(table: exp.Table) -> tuple[str | None, str]:
    db = table.args.get("db")
    return (db.name if db is not None else None), table.name


async def _prepare_write(session: Session, table: TableDef) -> None:
    if table.temporary:
        await session.begin_temp_write()
    else:
        if table.schema in ("information_schema", "performance_schema"):
            raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for table {table.name}")
        await session.begin_write()


def _duplicate_finder(
    session: Session, table: TableDef, rows: list[list[object]] | None, columns: list[str]
) -> Callable[[list[str]], tuple[str, str]]:
    def find(failed: list[str]) -> tuple[str, str]:
        key = "PRIMARY"
        key_columns = failed
        for index in table.indexes:
            if [c.lower() for c in index.columns] == [c.lower() for c in failed]:
                key = index.name
                key_columns = list(index.columns)
        value = ""
        if rows:
            positions = [
                next((i for i, c in enumerate(columns) if c.lower() == k.lower()), -1)
                for k in key_columns
            ]
            for row in rows:
                if -1 in positions:
                    break
                values = [row[p] for p in positions]
                if any(v is _UNKNOWN for v in values):
                    continue
                where = " AND ".join(f"{quote_ident(k)} IS ?" for k in key_columns)
                hit = session.store.conn.execute(
                    f"SELECT 1 FROM {table.sqlite} WHERE {where}", values
                ).fetchone()
                if hit is not None:
                    value = "-".join("" if v is None else _text(v) for v in values)
                    break
            else:
                last = [rows[-1][p] for p in positions] if -1 not in positions else []
                value = "-".join("" if v is None or v is _UNKNOWN else _text(v) for v in last)
        return value, f"{table.name}.{key}"

    return find


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


async def run_insert(session: Session, statement: Statement) -> StmtResult:
    """INSERT [IGNORE] / REPLACE, with VALUES, SET or SELECT, and ON DUPLICATE KEY UPDATE."""
    replace = statement.first == "REPLACE"
    text = statement.text
    if replace:
        first = statement.tokens[0]
        text = text[: first.start] + "INSERT" + text[first.end :]
    tree = parse_mysql(text)
    if not isinstance(tree, exp.Insert):
        raise not_supported("this INSERT form")
    target, listed = _target(tree)
    schema, name = _table_name(target)
    ref = session.resolve_table(schema, name)
    if ref.virtual:
        raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for table {name}")
    table = ref.table
    columns = listed if listed is not None else [c.name for c in table.columns]
    for column in columns:
        if table.column(column) is None:
            raise sql_error(ER.BAD_FIELD_ERROR, column, "field list")
    values = tree.expression
    literal_rows: list[list[object]] | None = None
    if isinstance(values, exp.Values):
        for position, row in enumerate(values.expressions, 1):
            if len(row.expressions) != len(columns):
                raise sql_error(ER.WRONG_VALUE_COUNT_ON_ROW, position)
        _fill_defaults(table, columns, values, listed is not None)
        if listed is None:
            listed_exprs = [exp.to_identifier(c, quoted=True) for c in columns]
        else:
            listed_exprs = [exp.to_identifier(c, quoted=True) for c in columns]
        tree.set("this", exp.Schema(this=target, expressions=listed_exprs))
        literal_rows = _literal_rows(values)
    conflict = tree.args.get("conflict")
    update_sql = None
    if conflict is not None:
        tree.set("conflict", None)
        update_sql = _upsert_clause(session, conflict, table)
    await _prepare_write(session, table)
    translation = translate(session, tree)
    sql = translation.sql()
    if replace:
        sql = sql.replace("INSERT", "INSERT OR REPLACE", 1)
    if update_sql is not None:
        if isinstance(values, exp.Select | exp.Union):
            sql += " WHERE TRUE"
        sql += update_sql
    generated = _generates_ids(table, columns, values)
    before = _sequence(session, table)
    ctx = ErrorContext(
        duplicate=_duplicate_finder(session, table, literal_rows, columns),
        listed_columns=frozenset(c.lower() for c in columns),
        operation="insert",
    )
    cursor = session.execute_sql(sql, ctx=ctx)
    count = max(cursor.rowcount, 0)
    last_id = 0
    auto = table.auto_column
    if auto is not None and count:
        after = _sequence(session, table)
        if generated == "all" and after is not None and before is not None and after > before:
            last_id = before + 1
            session.set_last_insert_id(last_id)
        elif cursor.lastrowid:
            last_id = int(cursor.lastrowid)
            if generated == "some":
                session.set_last_insert_id(last_id)
    if count and not table.temporary:
        session.record_change(statement.text, insert_id=last_id or None)
    return StmtResult(affected_rows=count, last_insert_id=last_id, info=_insert_info(count, values))


def _generates_ids(table: TableDef, columns: list[str], values: exp.Expression | None) -> str:
    """Whether rows get AUTO_INCREMENT values: "all", "some" or "none"."""
    auto = table.auto_column
    if auto is None:
        return "none"
    lowered = [c.lower() for c in columns]
    if auto.name.lower() not in lowered:
        return "all"
    if not isinstance(values, exp.Values):
        return "some"
    position = lowered.index(auto.name.lower())
    nulls = [isinstance(row.expressions[position], exp.Null) for row in values.expressions]
    if all(nulls):
        return "all"
    return "some" if any(nulls) else "none"


def _insert_info(count: int, values: exp.Expression | None) -> str:
    if isinstance(values, exp.Values) and len(values.expressions) <= 1:
        return ""
    return f"Records: {count}  Duplicates: 0  Warnings: 0"


def _sequence(session: Session, table: TableDef) -> int | None:
    if table.auto_column is None:
        return None
    schema = "temp" if table.temporary else "main"
    row = session.store.conn.execute(
        f"SELECT seq FROM {schema}.sqlite_sequence WHERE name = ?",
        (f"{table.schema}.{table.name}",),
    ).fetchone()
    if row is not None:
        return int(row[0])
    row = session.store.conn.execute(f"SELECT MAX(rowid) FROM {table.sqlite}").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


_UNKNOWN: Final = object()


def _literal_rows(values: exp.Values) -> list[list[object]]:
    """The VALUES rows as Python values (expressions that are not literals are unknown)."""
    rows: list[list[object]] = []
    for row in values.expressions:
        items: list[object] = []
        for item in row.expressions:
            if isinstance(item, exp.Literal):
                items.append(item.this if item.is_string else _number(str(item.this)))
            elif isinstance(item, exp.Null):
                items.append(None)
            else:
                items.append(_UNKNOWN)
        rows.append(items)
    return rows


def _number(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _fill_defaults(table: TableDef, columns: list[str], values: exp.Values, listed: bool) -> None:
    """Columns defaulting to CURRENT_TIMESTAMP get NOW(fsp); auto-increment 0 means 'next'."""
    lowered = [c.lower() for c in columns]
    for col in table.columns:
        if col.default_is_now and col.name.lower() not in lowered:
            columns.append(col.name)
            for row in values.expressions:
                row.append("expressions", _now_call(col.type.scale))
    auto = table.auto_column
    if auto is not None and auto.name.lower() in lowered:
        position = lowered.index(auto.name.lower())
        for row in values.expressions:
            item = row.expressions[position]
            if isinstance(item, exp.Literal) and not item.is_string and str(item.this) == "0":
                row.expressions[position] = exp.Null()
    for col in table.columns:
        if not col.default_is_now or col.name.lower() not in lowered:
            continue
        position = lowered.index(col.name.lower())
        for row in values.expressions:
            item = row.expressions[position]
            if isinstance(item, exp.Var) and str(item.this).upper() == "DEFAULT":
                row.expressions[position] = _now_call(col.type.scale)
    del listed


def _now_call(fsp: int | None) -> exp.Expression:
    return exp.Anonymous(this="NOW", expressions=[exp.Literal.number(fsp)] if fsp else [])


def _upsert_clause(session: Session, conflict: exp.Expression, table: TableDef) -> str:
    if not conflict.args.get("duplicate"):
        raise not_supported("this ON CONFLICT form")
    assignments: list[str] = []
    for item in conflict.expressions:
        if not isinstance(item, exp.EQ):
            raise not_supported("ON DUPLICATE KEY UPDATE form")
        column = item.this
        value = item.expression
        for call in list(value.find_all(exp.Anonymous)):
            if str(call.this).upper() == _VALUES_FUNCTION and len(call.expressions) == 1:
                call.replace(exp.column(call.expressions[0].name, table="excluded"))
        value = item.expression
        translated = translate(session, value)
        assignments.append(f"{quote_ident(column.name)} = {translated.sql()}")
    return " ON CONFLICT DO UPDATE SET " + ", ".join(assignments)


# ----- UPDATE / DELETE ----------------------------------------------------------------------


def _single_target(session: Session, tree: exp.Expression, verb: str) -> TableRef:
    target = tree.this
    if (
        not isinstance(target, exp.Table)
        or target.args.get("joins")
        or tree.args.get("from_")
        or tree.args.get("from")
        or tree.args.get("using")
        or tree.args.get("tables")
    ):
        raise not_supported(f"multiple-table {verb}")
    schema, name = _table_name(target)
    ref = session.resolve_table(schema, name)
    if ref.virtual:
        raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for table {name}")
    return ref


def _limit_rewrite(tree: exp.Expression, sqlite_table: str, alias: str) -> None:
    order = tree.args.get("order")
    limit = tree.args.get("limit")
    if order is None and limit is None:
        return
    where = tree.args.get("where")
    inner = exp.Select(expressions=[exp.column("rowid", table=alias)]).from_(
        exp.Table(
            this=exp.Identifier(this=sqlite_table, quoted=True),
            alias=exp.TableAlias(this=exp.Identifier(this=alias, quoted=True)),
        )
    )
    if where is not None:
        inner.set("where", where.copy())
    if order is not None:
        inner.set("order", order.copy())
    if limit is not None:
        inner.set("limit", limit.copy())
    condition = exp.In(this=exp.column("rowid"), query=exp.Subquery(this=inner))
    tree.set("where", exp.Where(this=condition))
    tree.set("order", None)
    tree.set("limit", None)


async def run_update(session: Session, statement: Statement) -> StmtResult:
    """Single-table UPDATE; affected rows count changed rows unless CLIENT_FOUND_ROWS."""
    tree = parse_mysql(statement.text)
    if not isinstance(tree, exp.Update):
        raise not_supported("this UPDATE form")
    ref = _single_target(session, tree, "UPDATE")
    table = ref.table
    assigned: list[str] = []
    for item in tree.expressions:
        if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
            raise not_supported("this UPDATE assignment")
        name = item.this.name
        if table.column(name) is None:
            raise sql_error(ER.BAD_FIELD_ERROR, name, "field list")
        if any(c.name.lower() in assigned for c in item.expression.find_all(exp.Column)):
            # MySQL evaluates single-table assignments left to right on the new values.
            raise not_supported("UPDATE assignments that read a column assigned before them")
        item.this.set("table", None)
        assigned.append(name.lower())
    changed = [
        exp.NullSafeEQ(this=exp.column(item.this.name), expression=item.expression.copy())
        for item in tree.expressions
    ]
    for col in table.columns:
        if col.on_update_now and col.name.lower() not in assigned:
            tree.append(
                "expressions",
                exp.EQ(this=exp.column(col.name), expression=_now_call(col.type.scale)),
            )
    await _prepare_write(session, table)
    translation = translate(session, tree)
    alias = ref.alias
    _limit_rewrite(translation.tree, table.sqlite.strip('"'), alias)
    where = translation.tree.args.get("where")
    count_sql = f"SELECT COUNT(*) FROM {table.sqlite} AS {quote_ident(alias)}"
    if where is not None:
        count_sql += " WHERE " + to_sqlite(where.this)
    matched = int(session.execute_sql(count_sql).fetchone()[0])
    unchanged = exp.and_(*[translate(session, c).tree for c in changed])
    condition = exp.Not(this=exp.Paren(this=unchanged))
    translation.tree.set(
        "where",
        exp.Where(this=exp.and_(where.this, condition) if where is not None else condition),
    )
    ctx = ErrorContext(duplicate=_duplicate_finder(session, table, None, []), operation="update")
    cursor = session.execute_sql(to_sqlite(translation.tree), ctx=ctx)
    changed_rows = max(cursor.rowcount, 0)
    if changed_rows and not table.temporary:
        session.record_change(statement.text)
    found_rows = bool(session.client_capabilities & Capability.FOUND_ROWS)
    affected = matched if found_rows else changed_rows
    info = f"Rows matched: {matched}  Changed: {changed_rows}  Warnings: {len(session.warnings)}"
    return StmtResult(affected_rows=affected, info=info)


async def run_delete(session: Session, statement: Statement) -> StmtResult:
    """Single-table DELETE (ORDER BY / LIMIT supported)."""
    tree = parse_mysql(statement.text)
    if not isinstance(tree, exp.Delete):
        raise not_supported("this DELETE form")
    ref = _single_target(session, tree, "DELETE")
    table = ref.table
    await _prepare_write(session, table)
    translation = translate(session, tree)
    _limit_rewrite(translation.tree, table.sqlite.strip('"'), ref.alias)
    cursor = session.execute_sql(to_sqlite(translation.tree), ctx=ErrorContext(operation="delete"))
    count = max(cursor.rowcount, 0)
    if count and not table.temporary:
        session.record_change(statement.text)
    return StmtResult(affected_rows=count)


def family_of(table: TableDef, column: str) -> Family | None:
    """The value family of a column (None if unknown)."""
    col = table.column(column)
    return None if col is None else col.type.family
