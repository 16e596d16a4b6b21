"""UPDATE and DELETE on SQLite, with MySQL's results and side effects, and the steps every
write shares (INSERT and REPLACE: :mod:`.insert`).

Writes to base tables take the writer lock and are remembered for the binary log; writes to
temporary tables are not logged and get no GTID, as with ``binlog_format=ROW``.

Each handler works in steps around the writer lock, in mysqld's order: resolve the target
and check the statement against it, take the lock, translate and generate the SQLite text,
run it.  The steps before running depend only on the statement's shape and the tables it
names, so their result is remembered as a plan for the shape (as SELECT does, see
:mod:`.query`); a plan is reused while the same names still resolve to the same tables.
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
from consistent.emulator.sql.translate import TableRef, Translation, to_sqlite, translate
from consistent.emulator.sql.types import Family
from consistent.protocol.constants import Capability

if TYPE_CHECKING:
    import sqlite3

    from consistent.emulator.session import Session

__all__ = [
    "UNKNOWN",
    "Rows",
    "duplicate_finder",
    "family_of",
    "no_rows",
    "now_call",
    "plannable",
    "prepare_write",
    "run_delete",
    "run_update",
    "table_name",
    "wanted_template",
]

#: A VALUES item that is not a literal (its value is known only to SQLite).
UNKNOWN: Final = object()

Rows = list[list[object]]


# ----- shared steps --------------------------------------------------------------------------


def table_name(table: exp.Table) -> tuple[str | None, str]:
    """``(schema or None, name)`` of a table reference."""
    db = table.args.get("db")
    return (db.name if db is not None else None), table.name


async def prepare_write(session: Session, table: TableDef) -> None:
    """Take the writer lock for a base table (none for a temporary one)."""
    if table.temporary:
        await session.begin_temp_write()
    else:
        if table.schema in ("information_schema", "performance_schema"):
            raise sql_error(ER.UNKNOWN_ERROR, f"Access denied for table {table.name}")
        await session.begin_write()


def plannable(shape: Shape | None, recorder: Recorder) -> bool:
    """Whether a write's steps can be remembered: nothing asked of the session but table
    names, none of them virtual (their snapshot is taken at a moment that matters)."""
    return (
        shape is not None
        and not recorder.dynamic
        and not any(call.ref.virtual for call in recorder.calls)
    )


def wanted_template(cache: StatementCache, kind: str, shape: Shape) -> exp.Expression | None:
    """The template tree to build a plan from, the second time a shape runs."""
    if cache.plan(kind, shape) is not None or not cache.seen_before(kind, shape.key):
        return None
    tree = cache.template(shape)
    if tree is None:
        cache.store_plan(kind, shape, False)
    return tree


def duplicate_finder(
    session: Session, table: TableDef, rows: Callable[[], Rows | None], columns: list[str]
) -> Callable[[list[str]], tuple[str, str]]:
    """What ER_DUP_ENTRY quotes: the offending key's value (from the literal rows, asked for
    only when a duplicate happens) and the key's name."""

    def find(failed: list[str]) -> tuple[str, str]:
        key = "PRIMARY"
        key_columns = failed
        for index in table.indexes:
            if [c.lower() for c in index.columns] == [c.lower() for c in failed]:
                key = index.name
                key_columns = list(index.columns)
        value = ""
        literal_rows = rows()
        if literal_rows:
            positions = [
                next((i for i, c in enumerate(columns) if c.lower() == k.lower()), -1)
                for k in key_columns
            ]
            for row in literal_rows:
                if -1 in positions:
                    break
                values = [row[p] for p in positions]
                if any(v is UNKNOWN for v in values):
                    continue
                where = " AND ".join(f"{quote_ident(k)} IS ?" for k in key_columns)
                hit = session.store.conn.execute(
                    f"SELECT 1 FROM {table.sqlite} WHERE {where}", values
                ).fetchone()
                if hit is not None:
                    value = "-".join("" if v is None else _text(v) for v in values)
                    break
            else:
                last = [literal_rows[-1][p] for p in positions] if -1 not in positions else []
                value = "-".join("" if v is None or v is UNKNOWN else _text(v) for v in last)
        return value, f"{table.name}.{key}"

    return find


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def no_rows() -> Rows | None:
    """No literal rows (UPDATE)."""
    return None


def now_call(fsp: int | None) -> exp.Expression:
    """``NOW([fsp])``: what a ``DEFAULT/ON UPDATE CURRENT_TIMESTAMP`` column gets."""
    return exp.Anonymous(this="NOW", expressions=[exp.Literal.number(fsp)] if fsp else [])


# ----- UPDATE / DELETE ----------------------------------------------------------------------


def _single_target(ctx: StatementContext, tree: exp.Expression, verb: str) -> TableRef:
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
    schema, name = table_name(target)
    ref = ctx.resolve_table(schema, name)
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


@dataclass(frozen=True, slots=True)
class _UpdateParts:
    ref: TableRef
    changed: list[exp.Expression]


@dataclass(frozen=True, slots=True)
class _UpdatePlan:
    calls: tuple[TableCall, ...]
    table: TableDef
    count: SqlTemplate
    update: SqlTemplate


def _update_parts(ctx: StatementContext, tree: exp.Expression) -> _UpdateParts:
    """Resolve the target, check the assignments, add ON UPDATE CURRENT_TIMESTAMP ones."""
    ref = _single_target(ctx, tree, "UPDATE")
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
    changed: list[exp.Expression] = [
        exp.NullSafeEQ(this=exp.column(item.this.name), expression=item.expression.copy())
        for item in tree.expressions
    ]
    for col in table.columns:
        if col.on_update_now and col.name.lower() not in assigned:
            tree.append(
                "expressions",
                exp.EQ(this=exp.column(col.name), expression=now_call(col.type.scale)),
            )
    return _UpdateParts(ref, changed)


def _count_sql(
    ctx: StatementContext, tree: exp.Expression, parts: _UpdateParts
) -> tuple[Translation, str]:
    """Translate the UPDATE; the SQL counting the rows it matches."""
    table = parts.ref.table
    translation = translate(ctx, tree)
    alias = parts.ref.alias
    _limit_rewrite(translation.tree, table.sqlite.strip('"'), alias)
    where = translation.tree.args.get("where")
    count_sql = f"SELECT COUNT(*) FROM {table.sqlite} AS {quote_ident(alias)}"
    if where is not None:
        count_sql += " WHERE " + to_sqlite(where.this)
    return translation, count_sql


def _update_sql(ctx: StatementContext, translation: Translation, parts: _UpdateParts) -> str:
    """The UPDATE itself, limited to rows it changes (MySQL counts only those)."""
    where = translation.tree.args.get("where")
    unchanged = exp.and_(*[translate(ctx, c).tree for c in parts.changed])
    condition = exp.Not(this=exp.Paren(this=unchanged))
    translation.tree.set(
        "where",
        exp.Where(this=exp.and_(where.this, condition) if where is not None else condition),
    )
    return to_sqlite(translation.tree, copy=False)


async def run_update(session: Session, statement: Statement) -> StmtResult:
    """Single-table UPDATE; affected rows count changed rows unless CLIENT_FOUND_ROWS."""
    cache = session.server.statement_cache
    shape = cache.shape(statement)
    if shape is not None:
        plan = cache.plan("update", shape)
        if isinstance(plan, _UpdatePlan) and replay(session, plan.calls):
            await prepare_write(session, plan.table)
            matched = _count(session, plan.count.render(shape))
            cursor = _update(session, plan.table, plan.update.render(shape))
            return _update_result(session, statement, plan.table, matched, cursor)
    tree = cache.parse(statement.text, shape)
    if not isinstance(tree, exp.Update):
        raise not_supported("this UPDATE form")
    deferred = await evaluate_deferred(session, tree)
    recorder = Recorder(session)
    parts = _update_parts(recorder, tree)
    table = parts.ref.table
    await prepare_write(session, table)
    translation, count_sql = _count_sql(recorder, tree, parts)
    matched = _count(session, count_sql)
    update_sql = _update_sql(recorder, translation, parts)
    if shape is not None and not deferred and plannable(shape, recorder):
        _remember_update(
            cache,
            shape,
            calls=recorder.calls,
            table=table,
            count_sql=count_sql,
            update_sql=update_sql,
        )
    cursor = _update(session, table, update_sql)
    return _update_result(session, statement, table, matched, cursor)


def _remember_update(
    cache: StatementCache,
    shape: Shape,
    *,
    calls: list[TableCall],
    table: TableDef,
    count_sql: str,
    update_sql: str,
) -> None:
    tree = wanted_template(cache, "update", shape)
    if tree is None:
        return
    plan: _UpdatePlan | bool = False
    replayer = Replayer(calls)
    try:
        parts = _update_parts(replayer, tree)
        translation, template_count = _count_sql(replayer, tree, parts)
        template_update = _update_sql(replayer, translation, parts)
    except (NotReplayable, SqlError):
        template_update = None
    if template_update is not None and replayer.complete:
        count = build_template(shape, template_count, count_sql)
        update = build_template(shape, template_update, update_sql)
        if count is not None and update is not None:
            plan = _UpdatePlan(tuple(calls), table, count, update)
    cache.store_plan("update", shape, plan)


def _count(session: Session, count_sql: str) -> int:
    return int(session.execute_sql(count_sql).fetchone()[0])


def _update(session: Session, table: TableDef, update_sql: str) -> sqlite3.Cursor:
    ctx = ErrorContext(duplicate=duplicate_finder(session, table, no_rows, []), operation="update")
    return session.execute_sql(update_sql, ctx=ctx)


def _update_result(
    session: Session, statement: Statement, table: TableDef, matched: int, cursor: sqlite3.Cursor
) -> StmtResult:
    changed_rows = max(cursor.rowcount, 0)
    if changed_rows and not table.temporary:
        session.record_change(statement.text)
    found_rows = bool(session.client_capabilities & Capability.FOUND_ROWS)
    affected = matched if found_rows else changed_rows
    info = f"Rows matched: {matched}  Changed: {changed_rows}  Warnings: {len(session.warnings)}"
    return StmtResult(affected_rows=affected, info=info)


@dataclass(frozen=True, slots=True)
class _DeletePlan:
    calls: tuple[TableCall, ...]
    table: TableDef
    sql: SqlTemplate


def _delete_sql(ctx: StatementContext, tree: exp.Expression, ref: TableRef) -> str:
    translation = translate(ctx, tree)
    _limit_rewrite(translation.tree, ref.table.sqlite.strip('"'), ref.alias)
    return to_sqlite(translation.tree, copy=False)


async def run_delete(session: Session, statement: Statement) -> StmtResult:
    """Single-table DELETE (ORDER BY / LIMIT supported)."""
    cache = session.server.statement_cache
    shape = cache.shape(statement)
    if shape is not None:
        plan = cache.plan("delete", shape)
        if isinstance(plan, _DeletePlan) and replay(session, plan.calls):
            await prepare_write(session, plan.table)
            return _delete(session, statement, plan.table, plan.sql.render(shape))
    tree = cache.parse(statement.text, shape)
    if not isinstance(tree, exp.Delete):
        raise not_supported("this DELETE form")
    deferred = await evaluate_deferred(session, tree)
    recorder = Recorder(session)
    ref = _single_target(recorder, tree, "DELETE")
    await prepare_write(session, ref.table)
    sql = _delete_sql(recorder, tree, ref)
    if shape is not None and not deferred and plannable(shape, recorder):
        _remember_delete(cache, shape, recorder.calls, ref.table, sql)
    return _delete(session, statement, ref.table, sql)


def _remember_delete(
    cache: StatementCache, shape: Shape, calls: list[TableCall], table: TableDef, sql: str
) -> None:
    tree = wanted_template(cache, "delete", shape)
    if tree is None:
        return
    plan: _DeletePlan | bool = False
    replayer = Replayer(calls)
    try:
        template_sql = _delete_sql(replayer, tree, _single_target(replayer, tree, "DELETE"))
    except (NotReplayable, SqlError):
        template_sql = None
    if template_sql is not None and replayer.complete:
        template = build_template(shape, template_sql, sql)
        if template is not None:
            plan = _DeletePlan(tuple(calls), table, template)
    cache.store_plan("delete", shape, plan)


def _delete(session: Session, statement: Statement, table: TableDef, sql: str) -> StmtResult:
    cursor = session.execute_sql(sql, ctx=ErrorContext(operation="delete"))
    count = max(cursor.rowcount, 0)
    if count and not table.temporary:
        session.record_change(statement.text)
    return StmtResult(affected_rows=count)


def family_of(table: TableDef, column: str) -> Family | None:
    """The value family of a column (None if unknown)."""
    col = table.column(column)
    return None if col is None else col.type.family
