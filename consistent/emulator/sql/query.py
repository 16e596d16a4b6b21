"""SELECT on SQLite, with MySQL's results and side effects (writes: :mod:`.writes`).

Each statement is parsed (sqlglot, MySQL dialect), functions that wait
(``WAIT_FOR_EXECUTED_GTID_SET``, ``SLEEP``) are evaluated first and replaced by their result,
the tree is translated (:mod:`consistent.emulator.sql.translate`) and run on the session's
connection.

A SELECT whose translation depended on nothing but the tables it names is remembered as a
plan for its shape (:mod:`consistent.emulator.sql.stmtcache`): the next SELECT of that shape
resolves the same table names, checks they are still the same tables, and runs the plan's
SQLite text with its own values, skipping sqlglot altogether.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqlglot import exp

from consistent.emulator import gtid_waits
from consistent.emulator.errors import ER, SqlError, not_supported, sql_error
from consistent.emulator.results import Column, ResultSet, StmtResult
from consistent.emulator.sql.catalog import TableDef
from consistent.emulator.sql.functions import ROW_WAIT_FUNCTION
from consistent.emulator.sql.lexer import Statement, split_statements
from consistent.emulator.sql.metadata import (
    Slot,
    convert_rows,
    projection_names,
    result_columns,
    select_projections,
    static_slots,
)
from consistent.emulator.sql.recording import (
    NotReplayable,
    Recorder,
    Replayer,
    TableCall,
    VariableCall,
    replay,
)
from consistent.emulator.sql.shapes import Shape, SqlTemplate
from consistent.emulator.sql.stmtcache import StatementCache
from consistent.emulator.sql.translate import (
    DEFERRED_FUNCTIONS,
    TableRef,
    literal,
    translate,
)
from consistent.emulator.tracker import TxState

if TYPE_CHECKING:
    import sqlite3

    from consistent.emulator.session import Session

__all__ = [
    "base_tables",
    "build_template",
    "describe_select",
    "evaluate_deferred",
    "evaluate_expressions",
    "run_select",
    "run_select_text",
]

_PLAN = "select"
_WAIT: Final = "WAIT_FOR_EXECUTED_GTID_SET"
# Literals SQLite returns unchanged: strings without quotes, backslashes or control
# characters (which the SQL text would escape), integers that fit in 64 bits.
_PLAIN_STRING: Final = re.compile(r"[^'\\\x00-\x1f\x7f]*")
_PLAIN_INT: Final = re.compile(r"0|[1-9][0-9]{0,17}")


# ----- helpers -------------------------------------------------------------------------------


async def evaluate_deferred(session: Session, tree: exp.Expression) -> bool:
    """Replace WAIT_FOR_EXECUTED_GTID_SET(…) / SLEEP(…) calls by their awaited results, wherever
    an expression stands (select list, WHERE, VALUES, SET…); True when there was any.  The
    statement is not planned then: the next one must wait again."""
    calls = [
        node
        for node in tree.find_all(exp.Anonymous)
        if str(node.this).upper() in DEFERRED_FUNCTIONS
    ]
    for call in calls:
        name = str(call.this).upper()
        if any(isinstance(n, exp.Column) for arg in call.expressions for n in arg.walk()):
            if name != _WAIT:
                raise not_supported(f"{name}() with column arguments")
            # Evaluated per row inside SQLite; a row that must wait reruns the statement.
            call.replace(exp.Anonymous(this=ROW_WAIT_FUNCTION, expressions=call.expressions))
            continue
        args = await evaluate_expressions(session, [a.copy() for a in call.expressions])
        result = await gtid_waits.call(session, name, args)
        call.replace(literal(result))
    return bool(calls)


async def evaluate_expressions(session: Session, nodes: list[exp.Expression]) -> list[object]:
    """Values of constant expressions (``SELECT expr, …`` without tables)."""
    if not nodes:
        return []
    plain = _plain_values(nodes)
    if plain is not None:
        return plain
    select = exp.Select(expressions=nodes)
    await evaluate_deferred(session, select)
    translation = translate(session, select)
    row = session.execute_sql(translation.sql(copy=False)).fetchone()
    return list(row) if row is not None else [None] * len(nodes)


def _plain_values(nodes: list[exp.Expression]) -> list[object] | None:
    """The values of plain literals as SQLite gives them back (the arguments of
    ``WAIT_FOR_EXECUTED_GTID_SET('…', 1)``, ``SET x = 5``), without a round trip; None when
    any node is something else."""
    values: list[object] = []
    for node in nodes:
        if not isinstance(node, exp.Literal) or not isinstance(node.this, str):
            return None
        text = node.this
        if node.is_string and _PLAIN_STRING.fullmatch(text):
            values.append(text)
        elif not node.is_string and _PLAIN_INT.fullmatch(text):
            values.append(int(text))
        else:
            return None
    return values


def base_tables(refs: list[TableRef]) -> list[TableDef]:
    """The base tables among ``refs`` (not virtual, not temporary)."""
    return [r.table for r in refs if not r.virtual and not r.table.temporary]


def build_template(shape: Shape, template_sql: str, actual_sql: str) -> SqlTemplate | None:
    """Split SQLite text generated from a shape's template; None unless it gives back
    ``actual_sql`` (the text generated from the statement itself) with the shape's values."""
    template = SqlTemplate.build(template_sql, shape.kinds)
    if template is None or template.render(shape) != actual_sql:
        return None
    return template


def _has_sentinel(nodes: list[exp.Expression], shape: Shape) -> bool:
    sentinels = set(shape.sentinels)
    return any(
        isinstance(literal_node.this, str) and literal_node.this in sentinels
        for node in nodes
        for literal_node in node.find_all(exp.Literal)
    )


# ----- SELECT -------------------------------------------------------------------------------


@dataclass(slots=True)
class _SelectPlan:
    """What a SELECT of one shape runs: see the module docstring.

    ``described``/``slots`` remember the result's columns once they are known not to depend
    on the rows (see :func:`static_slots`); ``dynamic`` that they do.
    """

    calls: tuple[TableCall, ...]
    variables: tuple[VariableCall, ...]
    sql: SqlTemplate
    tables: tuple[TableRef, ...]
    locking: bool
    projections: tuple[exp.Expression, ...] | None
    described: list[str] | None = None
    slots: list[Slot] | None = None
    dynamic: bool = False


async def _open_read(session: Session, tables: list[TableRef], locking: bool) -> None:
    if tables:
        session.note_read()
        if locking and session.in_txn and base_tables(tables):
            await session.begin_write()


def _result(
    session: Session,
    cursor: sqlite3.Cursor,
    projections: list[exp.Expression] | None,
    names: list[str] | None,
    tables: list[TableRef],
) -> StmtResult:
    rows = cursor.fetchall()
    description = [d[0] for d in cursor.description or ()]
    columns, converted = result_columns(projections, names, tables, description, rows)
    return _result_set(session, columns, converted)


def _plan_result(
    session: Session, plan: _SelectPlan, cursor: sqlite3.Cursor, statement: Statement
) -> StmtResult:
    rows = cursor.fetchall()
    description = [d[0] for d in cursor.description or ()]
    projections = list(plan.projections) if plan.projections is not None else None
    if plan.slots is None or description != plan.described:
        names = projection_names(statement)
        tables = list(plan.tables)
        slots = None if plan.dynamic else static_slots(projections, names, tables, description)
        if slots is None:
            plan.dynamic = True
            columns, converted = result_columns(projections, names, tables, description, rows)
            return _result_set(session, columns, converted)
        plan.described, plan.slots = description, slots
    slots = plan.slots
    return _result_set(session, [s.column for s in slots], convert_rows(slots, rows))


def _result_set(
    session: Session, columns: list[Column], rows: list[tuple[object, ...]]
) -> StmtResult:
    session.set_found_rows(len(rows))
    session.trackers.transaction.add_state(TxState.RESULT_SET, autocommit=session.autocommit)
    return StmtResult(result=ResultSet(tuple(columns), tuple(rows)))


async def run_select(session: Session, statement: Statement) -> StmtResult:
    """A SELECT (or WITH … SELECT, TABLE t, UNION…): a result set."""
    cache = session.server.statement_cache
    shape = cache.shape(statement)
    if shape is not None:
        plan = cache.plan(_PLAN, shape)
        if isinstance(plan, _SelectPlan) and replay(session, plan.calls, plan.variables):
            await _open_read(session, list(plan.tables), plan.locking)
            sql, params = plan.sql.bind(shape)
            cursor = session.execute_sql(sql, params)
            return _plan_result(session, plan, cursor, statement)
    tree = cache.parse(statement.text, shape)
    if tree.args.get("into") is not None:
        raise not_supported("SELECT … INTO")
    names = projection_names(statement)
    deferred = await evaluate_deferred(session, tree)
    original = tree.copy()
    recorder = Recorder(session, record_variables=True)
    translation = translate(recorder, tree)
    await _open_read(session, translation.tables, translation.locking)
    sql = translation.sql(copy=False)
    projections = select_projections(original)
    if shape is not None and not deferred and not recorder.dynamic:
        _remember(
            cache,
            shape,
            calls=recorder.calls,
            variables=recorder.variables,
            tables=translation.tables,
            locking=translation.locking,
            sql=sql,
        )
    cursor = session.execute_sql(sql)
    return _result(session, cursor, projections, names, translation.tables)


def _remember(
    cache: StatementCache,
    shape: Shape,
    *,
    calls: list[TableCall],
    variables: list[VariableCall],
    tables: list[TableRef],
    locking: bool,
    sql: str,
) -> None:
    """Store a plan for ``shape`` the second time it runs (if its template checks out)."""
    if cache.plan(_PLAN, shape) is not None or not cache.seen_before(_PLAN, shape.key):
        return
    plan: _SelectPlan | bool = False
    tree = cache.template(shape)
    if tree is not None:
        projections = select_projections(tree.copy())
        replayer = Replayer(calls, variables)
        try:
            template_sql = translate(replayer, tree).sql(copy=False)
        except (NotReplayable, SqlError):
            template_sql = None
        if template_sql is not None and replayer.complete:
            template = build_template(shape, template_sql, sql)
            if template is not None and not _has_sentinel(projections or [], shape):
                plan = _SelectPlan(
                    tuple(calls),
                    tuple(variables),
                    template,
                    tuple(tables),
                    locking,
                    tuple(projections) if projections is not None else None,
                )
    cache.store_plan(_PLAN, shape, plan)


def describe_select(session: Session, statement: Statement) -> tuple[Column, ...]:
    """Result columns of a SELECT without running it (for COM_STMT_PREPARE).

    Types that only values would reveal stay NULL; the execute response carries the final
    metadata.  Unknown tables fail as in mysqld (1146 at prepare time).
    """
    cache = session.server.statement_cache
    tree = cache.parse(statement.text, cache.shape(statement))
    if any(str(n.this).upper() in DEFERRED_FUNCTIONS for n in tree.find_all(exp.Anonymous)):
        return ()
    names = projection_names(statement)
    original = tree.copy()
    translation = translate(session, tree)
    cursor = session.execute_sql(f"SELECT * FROM ({translation.sql(copy=False)}) LIMIT 0")
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
