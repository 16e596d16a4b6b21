"""INSERT and REPLACE on SQLite, with MySQL's results and side effects.

``VALUES``, ``SET`` or ``SELECT`` rows, ``INSERT IGNORE``, ``ON DUPLICATE KEY UPDATE``
(SQLite's upsert), ``AUTO_INCREMENT`` (``LAST_INSERT_ID()``, 0 or NULL meaning "next") and
``DEFAULT CURRENT_TIMESTAMP`` columns.  The steps before running are remembered as a plan for
the statement's shape, as for the other writes (:mod:`.writes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqlglot import exp

from consistent.emulator.errors import ER, SqlError, not_supported, sql_error
from consistent.emulator.results import StmtResult
from consistent.emulator.sql.catalog import TableDef, quote_ident
from consistent.emulator.sql.context import StatementContext
from consistent.emulator.sql.errors import ErrorContext
from consistent.emulator.sql.lexer import Statement
from consistent.emulator.sql.query import build_template, evaluate_deferred
from consistent.emulator.sql.recording import (
    NotReplayable,
    Recorder,
    Replayer,
    TableCall,
    replay,
)
from consistent.emulator.sql.shapes import Shape, SqlTemplate
from consistent.emulator.sql.stmtcache import StatementCache
from consistent.emulator.sql.translate import translate
from consistent.emulator.sql.writes import (
    UNKNOWN,
    Rows,
    duplicate_finder,
    now_call,
    plannable,
    prepare_write,
    table_name,
    wanted_template,
)

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["run_insert"]

_VALUES_FUNCTION: Final = "VALUES"


def _target(tree: exp.Expression) -> tuple[exp.Table, list[str] | None]:
    this = tree.this
    if isinstance(this, exp.Schema):
        table = this.this
        columns = [c.name for c in this.expressions]
        assert isinstance(table, exp.Table)
        return table, columns
    assert isinstance(this, exp.Table)
    return this, None


@dataclass(slots=True)
class _InsertParts:
    """What the steps before the writer lock found out about an INSERT."""

    table: TableDef
    columns: list[str]
    values: exp.Expression | None
    literal_rows: Rows | None
    update_sql: str | None


@dataclass(frozen=True, slots=True)
class _InsertSql:
    """The SQLite text of an INSERT and what its result reports."""

    sql: str
    generated: str
    single_row: bool
    upsert: bool
    params: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class _InsertPlan:
    calls: tuple[TableCall, ...]
    table: TableDef
    columns: tuple[str, ...]
    sql: SqlTemplate
    generated: str
    single_row: bool
    upsert: bool


def _insert_parts(ctx: StatementContext, tree: exp.Expression) -> _InsertParts:
    target, listed = _target(tree)
    schema, name = table_name(target)
    ref = ctx.resolve_table(schema, name)
    if ref.virtual:
        raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for table {name}")
    table = ref.table
    columns = listed if listed is not None else [c.name for c in table.columns]
    for column in columns:
        if table.column(column) is None:
            raise sql_error(ER.BAD_FIELD_ERROR, column, "field list")
    values = tree.expression
    literal_rows: Rows | None = None
    if isinstance(values, exp.Values):
        for position, row in enumerate(values.expressions, 1):
            if len(row.expressions) != len(columns):
                raise sql_error(ER.WRONG_VALUE_COUNT_ON_ROW, position)
        _fill_defaults(table, columns, values)
        listed_exprs = [exp.to_identifier(c, quoted=True) for c in columns]
        tree.set("this", exp.Schema(this=target, expressions=listed_exprs))
        literal_rows = _literal_rows(values)
    conflict = tree.args.get("conflict")
    update_sql = None
    if conflict is not None:
        tree.set("conflict", None)
        update_sql = _upsert_clause(ctx, conflict, table)
    return _InsertParts(table, columns, values, literal_rows, update_sql)


def _insert_sql(
    ctx: StatementContext, tree: exp.Expression, parts: _InsertParts, replace: bool
) -> _InsertSql:
    translation = translate(ctx, tree)
    values = parts.values
    generated = _generates_ids(parts.table, parts.columns, values)
    single_row = isinstance(values, exp.Values) and len(values.expressions) <= 1
    sql = translation.sql(copy=False)
    if replace:
        sql = sql.replace("INSERT", "INSERT OR REPLACE", 1)
    if parts.update_sql is not None:
        if isinstance(values, exp.Select | exp.Union):
            sql += " WHERE TRUE"
        sql += parts.update_sql
    return _InsertSql(sql, generated, single_row, parts.update_sql is not None)


async def run_insert(session: Session, statement: Statement) -> StmtResult:
    """INSERT [IGNORE] / REPLACE, with VALUES, SET or SELECT, and ON DUPLICATE KEY UPDATE."""
    replace = statement.first == "REPLACE"
    text = statement.text
    cache = session.server.statement_cache
    if replace:
        first = statement.tokens[0]
        text = text[: first.start] + "INSERT" + text[first.end :]
        shape = cache.shape_of_text(text)
    else:
        shape = cache.shape(statement)
    kind = "replace" if replace else "insert"
    if shape is not None:
        plan = cache.plan(kind, shape)
        if isinstance(plan, _InsertPlan) and replay(session, plan.calls):
            await prepare_write(session, plan.table)

            def rows() -> Rows | None:
                try:
                    tree = cache.parse(text, shape)
                    return _insert_parts(Replayer(list(plan.calls)), tree).literal_rows
                except NotReplayable:
                    return None

            sql, params = plan.sql.bind(shape)
            done = _InsertSql(sql, plan.generated, plan.single_row, plan.upsert, params)
            return _run_insert(
                session, statement, plan.table, columns=list(plan.columns), done=done, rows=rows
            )
    tree = cache.parse(text, shape)
    if not isinstance(tree, exp.Insert):
        raise not_supported("this INSERT form")
    deferred = await evaluate_deferred(session, tree)
    recorder = Recorder(session)
    parts = _insert_parts(recorder, tree)
    await prepare_write(session, parts.table)
    done = _insert_sql(recorder, tree, parts, replace)
    if shape is not None and not deferred and plannable(shape, recorder):
        _remember_insert(
            cache, kind, shape, calls=recorder.calls, parts=parts, done=done, replace=replace
        )
    literal_rows = parts.literal_rows
    return _run_insert(
        session, statement, parts.table, columns=parts.columns, done=done, rows=lambda: literal_rows
    )


def _remember_insert(
    cache: StatementCache,
    kind: str,
    shape: Shape,
    *,
    calls: list[TableCall],
    parts: _InsertParts,
    done: _InsertSql,
    replace: bool,
) -> None:
    tree = wanted_template(cache, kind, shape)
    if tree is None:
        return
    plan: _InsertPlan | bool = False
    replayer = Replayer(calls)
    try:
        template_parts = _insert_parts(replayer, tree)
        template = _insert_sql(replayer, tree, template_parts, replace)
    except (NotReplayable, SqlError):
        template_parts, template = parts, None
    if (
        template is not None
        and replayer.complete
        and template_parts.table is parts.table
        and template_parts.columns == parts.columns
        and (template.generated, template.single_row, template.upsert)
        == (done.generated, done.single_row, done.upsert)
    ):
        sql = build_template(shape, template.sql, done.sql)
        if sql is not None:
            plan = _InsertPlan(
                tuple(calls),
                parts.table,
                tuple(parts.columns),
                sql,
                done.generated,
                done.single_row,
                done.upsert,
            )
    cache.store_plan(kind, shape, plan)


def _run_insert(
    session: Session,
    statement: Statement,
    table: TableDef,
    *,
    columns: list[str],
    done: _InsertSql,
    rows: Callable[[], Rows | None],
) -> StmtResult:
    auto = table.auto_column is not None
    # One new row with a generated id: the id is its rowid.  Otherwise the first generated id
    # comes from the sequence, read before and after (rows may get several ids, or an upsert
    # may update a row instead of inserting one).
    one_new_id = done.generated == "all" and done.single_row and not done.upsert
    counted = auto and done.generated == "all" and not one_new_id
    before = _sequence(session, table) if counted else None
    ctx = ErrorContext(
        duplicate=duplicate_finder(session, table, rows, columns),
        listed_columns=columns,
        operation="insert",
    )
    cursor = session.execute_sql(done.sql, done.params, ctx=ctx)
    count = max(cursor.rowcount, 0)
    last_id = 0
    if auto and count:
        after = _sequence(session, table) if counted else None
        if one_new_id:
            last_id = int(cursor.lastrowid or 0)
            session.set_last_insert_id(last_id)
        elif after is not None and before is not None and after > before:
            last_id = before + 1
            session.set_last_insert_id(last_id)
        elif cursor.lastrowid:
            last_id = int(cursor.lastrowid)
            if done.generated == "some":
                session.set_last_insert_id(last_id)
    if count and not table.temporary:
        session.record_change(statement.text, insert_id=last_id or None)
    info = "" if done.single_row else f"Records: {count}  Duplicates: 0  Warnings: 0"
    return StmtResult(affected_rows=count, last_insert_id=last_id, info=info)


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


def _sequence(session: Session, table: TableDef) -> int:
    """The largest id the table has given out: SQLite's sequence, or a larger id put in place
    by an UPDATE or kept by a rebuild, which SQLite's next id also exceeds."""
    schema = "temp" if table.temporary else "main"
    row = session.store.conn.execute(
        f"SELECT MAX(COALESCE((SELECT seq FROM {schema}.sqlite_sequence WHERE name = ?), 0), "
        f"COALESCE((SELECT MAX(rowid) FROM {table.sqlite}), 0))",
        (f"{table.schema}.{table.name}",),
    ).fetchone()
    return int(row[0])


def _literal_rows(values: exp.Values) -> Rows:
    """The VALUES rows as Python values (expressions that are not literals are unknown)."""
    rows: Rows = []
    for row in values.expressions:
        items: list[object] = []
        for item in row.expressions:
            if isinstance(item, exp.Literal):
                items.append(item.this if item.is_string else _number(str(item.this)))
            elif isinstance(item, exp.Null):
                items.append(None)
            else:
                items.append(UNKNOWN)
        rows.append(items)
    return rows


def _number(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _fill_defaults(table: TableDef, columns: list[str], values: exp.Values) -> None:
    """Columns defaulting to CURRENT_TIMESTAMP get NOW(fsp); auto-increment 0 means 'next'."""
    lowered = [c.lower() for c in columns]
    for col in table.columns:
        if col.default_is_now and col.name.lower() not in lowered:
            columns.append(col.name)
            for row in values.expressions:
                row.append("expressions", now_call(col.type.scale))
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
                row.expressions[position] = now_call(col.type.scale)


def _upsert_clause(ctx: StatementContext, conflict: exp.Expression, table: TableDef) -> str:
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
        translated = translate(ctx, value)
        assignments.append(f"{quote_ident(column.name)} = {translated.sql()}")
    return " ON CONFLICT DO UPDATE SET " + ", ".join(assignments)
