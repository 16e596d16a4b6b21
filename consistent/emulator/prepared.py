"""Prepared statements: COM_STMT_PREPARE/EXECUTE and SQL ``PREPARE``/``EXECUTE``.

A prepared statement keeps its text; executing it substitutes each ``?`` with the SQL literal
of its parameter and runs the result like a query, so every statement kind behaves the same
whether it arrives as text or prepared.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from consistent.emulator import statements as dispatch
from consistent.emulator.errors import ER, parse_error, sql_error
from consistent.emulator.results import Column, Outcome, PreparedStatement, StmtResult
from consistent.emulator.sql.lexer import Statement, Tok, TokenStream, split_statements
from consistent.emulator.sql.query import describe_select
from consistent.protocol.constants import ColumnFlag, ColumnType

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["execute", "prepare", "sql_literal"]

_PARAM_COLUMN = Column("?", ColumnType.VAR_STRING, 0, ColumnFlag.BINARY, 0, 63)


@dataclass(frozen=True)
class _Prepared:
    statement: Statement
    param_count: int


def sql_literal(value: object) -> str:
    """A MySQL literal for a parameter value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, dt.datetime):
        return "'" + value.strftime("%Y-%m-%d %H:%M:%S.%f") + "'"
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, dt.timedelta):
        total = value.total_seconds()
        sign = "-" if total < 0 else ""
        total = abs(total)
        hours, rest = divmod(total, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"'{sign}{int(hours):02d}:{int(minutes):02d}:{seconds:09.6f}'"
    if isinstance(value, dt.time):
        return "'" + value.isoformat() + "'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return "'" + text + "'"


def _bind(statement: Statement, params: Sequence[object]) -> Statement:
    parts: list[str] = []
    last = 0
    index = 0
    for token in statement.tokens:
        if token.kind is Tok.PARAM:
            parts.append(statement.text[last : token.start])
            parts.append(sql_literal(params[index]))
            index += 1
            last = token.end
    parts.append(statement.text[last:])
    bound = split_statements("".join(parts))
    if len(bound) != 1:
        raise parse_error(statement.text)
    return bound[0]


def _one_statement(sql: str) -> Statement:
    statements = split_statements(sql)
    if not statements:
        raise sql_error(ER.EMPTY_QUERY)
    if len(statements) > 1:
        raise parse_error(statements[1].text)
    return statements[0]


def prepare(session: Session, sql: str) -> PreparedStatement:
    """COM_STMT_PREPARE: parameters are counted, a SELECT's columns described."""
    statement = _one_statement(sql)
    dispatch.handler_for(statement)
    count = sum(1 for t in statement.tokens if t.kind is Tok.PARAM)
    columns: tuple[Column, ...] = ()
    if statement.first in ("SELECT", "WITH"):
        columns = describe_select(session, _bind(statement, [None] * count))
    stmt_id = session.new_statement_id()
    session.prepared[stmt_id] = _Prepared(statement, count)
    return PreparedStatement(stmt_id, count, tuple(_PARAM_COLUMN for _ in range(count)), columns)


async def execute(session: Session, stmt_id: int, params: Sequence[object]) -> Outcome:
    """COM_STMT_EXECUTE."""
    prepared = session.prepared.get(stmt_id)
    if prepared is None:
        raise sql_error(ER.UNKNOWN_STMT_HANDLER, str(stmt_id), "mysqld_stmt_execute")
    if len(params) != prepared.param_count:
        raise sql_error(ER.WRONG_ARGUMENTS, "mysqld_stmt_execute")
    bound = _bind(prepared.statement, params)
    res = await session.run_statement(bound)
    return session.respond(res)


# ----- SQL-level PREPARE / EXECUTE / DEALLOCATE ---------------------------------------------


async def run_sql_prepare(session: Session, statement: Statement) -> StmtResult:
    """PREPARE name FROM 'text' | @var."""
    ts = TokenStream(statement)
    ts.expect("PREPARE")
    name = ts.ident().lower()
    ts.expect("FROM")
    token = ts.next()
    if token.kind is Tok.VARIABLE:
        value = session.user_variable(token.text.lstrip("@"))
        text = "" if value is None else (value.decode() if isinstance(value, bytes) else str(value))
    elif token.kind is Tok.STRING:
        text = token.value
    else:
        raise ts.error(token)
    ts.expect_end()
    inner = _one_statement(text)
    count = sum(1 for t in inner.tokens if t.kind is Tok.PARAM)
    session.sql_prepared[name] = _Prepared(inner, count)
    session.trackers.session_state_changed()
    return StmtResult()


async def run_sql_execute(session: Session, statement: Statement) -> StmtResult:
    """EXECUTE name [USING @a, @b…]."""
    ts = TokenStream(statement)
    ts.expect("EXECUTE")
    name = ts.ident().lower()
    values: list[object] = []
    if ts.accept("USING"):
        while True:
            token = ts.next()
            if token.kind is not Tok.VARIABLE:
                raise ts.error(token)
            values.append(session.user_variable(token.text.lstrip("@")))
            if not ts.accept(","):
                break
    ts.expect_end()
    prepared = session.sql_prepared.get(name)
    if prepared is None:
        raise sql_error(ER.UNKNOWN_STMT_HANDLER, name, "EXECUTE")
    if len(values) != prepared.param_count:
        raise sql_error(ER.WRONG_ARGUMENTS, "EXECUTE")
    bound = _bind(prepared.statement, values)
    handler, _kind = dispatch.handler_for(bound)
    return await handler(session, bound)


async def run_sql_deallocate(session: Session, statement: Statement) -> StmtResult:
    """DEALLOCATE | DROP PREPARE name."""
    ts = TokenStream(statement)
    ts.next()
    ts.expect("PREPARE")
    name = ts.ident().lower()
    ts.expect_end()
    if session.sql_prepared.pop(name, None) is None:
        raise sql_error(ER.UNKNOWN_STMT_HANDLER, name, "DEALLOCATE PREPARE")
    session.trackers.session_state_changed()
    return StmtResult()
