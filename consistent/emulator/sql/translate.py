"""Turning a parsed MySQL statement into SQL SQLite runs.

The statement is parsed by sqlglot's MySQL dialect; this module rewrites the tree before
sqlglot generates SQLite text:

* table names resolve through the session (temporary tables first, then base tables, then
  virtual ``information_schema``/``performance_schema`` tables) to ``"db.table"`` and keep
  their MySQL name as alias, so qualified column references still work; an unknown table is
  ER_NO_SUCH_TABLE (1146);
* ``@@variables`` and ``@user_variables`` become literals;
* MySQL functions whose SQLite counterpart is missing or different (``NOW()``,
  ``DATE_FORMAT``, ``DATE_ADD``, ``DATABASE()``, ``LAST_INSERT_ID()``…) become calls to the
  session's user functions (:mod:`consistent.emulator.sql.functions`) or literals;
* ``_binary'…'`` introducers become blobs and ``COLLATE x_bin/x_ci`` SQLite collations.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, cast

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError

from consistent.emulator.errors import SqlError, not_supported, parse_error
from consistent.emulator.sql.catalog import TableDef, quote_ident, sqlite_name

if TYPE_CHECKING:
    from consistent.emulator.sql.context import StatementContext

__all__ = [
    "DEFERRED_FUNCTIONS",
    "TableRef",
    "Translation",
    "literal",
    "parse_mysql",
    "to_sqlite",
    "translate",
]

#: Functions that wait (asynchronously); the engine evaluates them before running the query.
DEFERRED_FUNCTIONS: Final = frozenset(
    {"WAIT_FOR_EXECUTED_GTID_SET", "SLEEP", "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS"}
)
_NOW_NAMES: Final = frozenset(
    {"NOW", "SYSDATE", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_TIMESTAMP"}
)
_USER_NAMES: Final = frozenset({"USER", "SESSION_USER", "SYSTEM_USER"})
_VIRTUAL_SCHEMAS: Final = frozenset({"information_schema", "performance_schema", "sys"})
#: The dialect object ``tree.sql(dialect="sqlite")`` would look up on every call.
_SQLITE: Final = Dialect.get_or_raise("sqlite")


@dataclass(frozen=True)
class TableRef:
    """A table the statement reads or writes, with the alias it is known by."""

    alias: str
    table: TableDef
    virtual: bool = False


@dataclass
class Translation:
    """The rewritten tree and what the rewrite learnt about it."""

    tree: exp.Expression
    tables: list[TableRef] = field(default_factory=list)
    locking: bool = False

    def sql(self, *, copy: bool = True) -> str:
        """SQLite text of the rewritten tree (``copy=False``: the caller is done with the
        tree, which generation may rewrite)."""
        return to_sqlite(self.tree, copy=copy)


def parse_mysql(text: str) -> exp.Expression:
    """Parse one statement with sqlglot's MySQL dialect; parse failures are 1064."""
    try:
        tree = sqlglot.parse_one(text, read="mysql", error_level=ErrorLevel.RAISE)
    except ParseError as exc:
        raise _parse_failure(text, exc) from None
    except TokenError as exc:
        raise parse_error(text) from exc
    if isinstance(tree, exp.Command):
        raise parse_error(text)
    return cast(exp.Expression, tree)


def _parse_failure(text: str, exc: ParseError) -> SqlError:
    errors = exc.errors or [{}]
    info = errors[0]
    line = int(info.get("line") or 1)
    col = int(info.get("col") or 1)
    highlight = str(info.get("highlight") or "")
    lines = text.split("\n")
    offset = sum(len(row) + 1 for row in lines[: line - 1]) + max(col - len(highlight), 0)
    return parse_error(text[offset:] if offset < len(text) else "", line)


def to_sqlite(tree: exp.Expression, *, copy: bool = True) -> str:
    """Generate SQLite text; constructs SQLite lacks raise ER_NOT_SUPPORTED_YET (1235).

    sqlglot's generator may rewrite the tree it generates from, so by default it works on a
    copy; ``copy=False`` saves that copy when the caller drops the tree afterwards.
    """
    try:
        return str(_SQLITE.generate(tree, copy=copy, unsupported_level=ErrorLevel.IGNORE))
    except Exception as exc:  # sqlglot raises plain errors for shapes it cannot generate
        raise not_supported(tree.sql(dialect="mysql")[:80]) from exc


def literal(value: object) -> exp.Expression:
    """A SQL literal for a Python value."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, int | float | decimal.Decimal):
        return exp.Literal.number(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return exp.HexString(this=bytes(value).hex())
    return exp.Literal.string(str(value))


def _ident_name(node: exp.Expression | str | None) -> str:
    if node is None:
        return ""
    if isinstance(node, str):
        return node
    if isinstance(node, exp.Identifier | exp.Var):
        return str(node.this)
    return node.name


class _Rewriter:
    """One pass over a statement tree for one session."""

    def __init__(self, ctx: StatementContext) -> None:
        self.ctx = ctx
        self.tables: list[TableRef] = []
        self.locking = False

    def run(self, tree: exp.Expression) -> exp.Expression:
        cte_names = {cte.alias.lower() for cte in tree.find_all(exp.CTE) if cte.alias}
        for lock in tree.find_all(exp.Lock):
            self.locking = True
            lock.pop()
        for table in list(tree.find_all(exp.Table)):
            self._table(table, cte_names)
        for column in list(tree.find_all(exp.Column)):
            if column.args.get("db") is not None or column.args.get("catalog") is not None:
                column.set("db", None)
                column.set("catalog", None)
        result: exp.Expression = tree.transform(self._node, copy=False)
        return result

    def _table(self, table: exp.Table, cte_names: set[str]) -> None:
        name = table.name
        db = _ident_name(table.args.get("db")) or None
        if isinstance(table.this, exp.Anonymous | exp.Func):
            raise not_supported("table functions")
        if db is None and name.lower() in cte_names:
            return
        if db is None and name.lower() == "dual":
            parent = table.parent
            if isinstance(parent, exp.From):
                parent.pop()
                return
        alias = table.alias
        ref = self.ctx.resolve_table(db, name)
        ref = TableRef(alias or name, ref.table, ref.virtual)
        self.tables.append(ref)
        table.set("db", None)
        table.set("catalog", None)
        table.set(
            "this", exp.Identifier(this=sqlite_name(ref.table.schema, ref.table.name), quoted=True)
        )
        if not alias:
            table.set("alias", exp.TableAlias(this=exp.Identifier(this=name, quoted=True)))
        if isinstance(table.args.get("hints"), list):
            table.set("hints", None)

    def _node(self, node: exp.Expression) -> exp.Expression:
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        return node


def _session_param(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    name = _ident_name(node.this)
    kind = str(node.args.get("kind") or "").lower() or None
    return literal(rw.ctx.system_variable_value(name, kind))


def _parameter(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    inner = node.this
    name = _ident_name(inner) if inner is not None else ""
    if name.startswith("@"):
        return literal(rw.ctx.system_variable_value(name.lstrip("@"), None))
    return literal(rw.ctx.user_variable(name))


def _anonymous(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    assert isinstance(node, exp.Anonymous)
    name = str(node.this).upper()
    args = node.expressions
    if name in _NOW_NAMES:
        return exp.Anonymous(this="MY_NOW", expressions=args)
    if name == "UTC_DATE":
        return exp.Anonymous(this="MY_UTC_DATE", expressions=[])
    if name == "CURTIME":
        return exp.Anonymous(this="MY_CURTIME", expressions=args)
    if name in _USER_NAMES:
        return literal(rw.ctx.user_host)
    if name == "CONNECTION_ID":
        return literal(rw.ctx.connection_id)
    if name == "LAST_INSERT_ID":
        if args:
            raise not_supported("LAST_INSERT_ID(expr)")
        return literal(rw.ctx.last_insert_id)
    if name == "ROW_COUNT":
        return literal(rw.ctx.row_count)
    if name == "FOUND_ROWS":
        return literal(rw.ctx.found_rows)
    if name == "UNIX_TIMESTAMP":
        return exp.Anonymous(this="MY_UNIX_TIMESTAMP", expressions=args)
    if name in ("SCHEMA", "DATABASE"):
        return literal(rw.ctx.database)
    if name in DEFERRED_FUNCTIONS:
        raise not_supported(f"{name}() in this position")
    return node


def _now(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    fsp = node.this if isinstance(node.this, exp.Expression) else None
    return exp.Anonymous(this="MY_NOW", expressions=[fsp] if fsp is not None else [])


def _utc_timestamp(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    fsp = node.this if isinstance(node.this, exp.Expression) else None
    return exp.Anonymous(this="MY_UTC_TIMESTAMP", expressions=[fsp] if fsp is not None else [])


def _curdate(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="MY_CURDATE", expressions=[])


def _curtime(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    fsp = node.this if isinstance(node.this, exp.Expression) else None
    return exp.Anonymous(this="MY_CURTIME", expressions=[fsp] if fsp is not None else [])


def _schema(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return literal(rw.ctx.database)


def _version(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return literal(rw.ctx.server_version)


def _current_user(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return literal(rw.ctx.user_host)


def _uuid(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="MY_UUID", expressions=[])


def _date_format(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    value = node.this
    if isinstance(value, exp.TsOrDsToTimestamp | exp.TsOrDsToDate):
        value = value.this
    return exp.Anonymous(this="MY_DATE_FORMAT", expressions=[value, node.args["format"]])


def _assignment(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    raise not_supported("assigning user variables inside expressions (@var := expr)")


def _rand(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="MY_RAND", expressions=[node.this] if node.this else [])


def _interval_parts(interval: exp.Expression) -> tuple[exp.Expression, str]:
    assert isinstance(interval, exp.Interval)
    unit = _ident_name(interval.args.get("unit")) or "DAY"
    return interval.this, unit.upper()


def _date_add(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    sign = -1 if isinstance(node, exp.DateSub) else 1
    amount = node.expression
    unit = _ident_name(node.args.get("unit")) or "DAY"
    if isinstance(amount, exp.Interval):
        amount, unit = _interval_parts(amount)
    return exp.Anonymous(
        this="MY_DATE_ADD",
        expressions=[node.this, amount, exp.Literal.number(sign), exp.Literal.string(unit.upper())],
    )


def _add_sub(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    left, right = node.this, node.expression
    sign = -1 if isinstance(node, exp.Sub) else 1
    if isinstance(right, exp.Interval):
        amount, unit = _interval_parts(right)
        return exp.Anonymous(
            this="MY_DATE_ADD",
            expressions=[left, amount, exp.Literal.number(sign), exp.Literal.string(unit)],
        )
    if isinstance(left, exp.Interval) and sign == 1:
        amount, unit = _interval_parts(left)
        return exp.Anonymous(
            this="MY_DATE_ADD",
            expressions=[right, amount, exp.Literal.number(1), exp.Literal.string(unit)],
        )
    return node


def _from_unixtime(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="MY_FROM_UNIXTIME", expressions=[node.this])


def _introducer(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    charset = _ident_name(node.this).lower().lstrip("_")
    value = cast(exp.Expression, node.expression)
    if charset == "binary" and isinstance(value, exp.Literal) and value.is_string:
        return exp.HexString(this=str(value.this).encode("utf-8", "surrogateescape").hex())
    return value


def _collate(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    name = _ident_name(node.expression).lower()
    target = "NOCASE" if name.endswith("_ci") else "BINARY"
    return exp.Collate(this=node.this, expression=exp.Var(this=target))


def _timestampdiff(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    unit = _ident_name(node.args.get("unit")) or "SECOND"
    return exp.Anonymous(
        this="MY_TIMESTAMPDIFF",
        expressions=[exp.Literal.string(unit.upper()), node.expression, node.this],
    )


def _trunc(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    decimals = node.args.get("decimals") or exp.Literal.number(0)
    return exp.Anonymous(this="MY_TRUNCATE", expressions=[node.this, decimals])


def _number_to_str(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="MY_FORMAT", expressions=[node.this, node.args["format"]])


def _strposition(rw: _Rewriter, node: exp.Expression) -> exp.Expression:
    start = node.args.get("position")
    if start is not None:
        return exp.Anonymous(this="MY_LOCATE", expressions=[node.args["substr"], node.this, start])
    return node


_Handler = Callable[[_Rewriter, exp.Expression], exp.Expression]

_HANDLERS: Final[dict[type[exp.Expression], _Handler]] = {
    exp.SessionParameter: _session_param,
    exp.Parameter: _parameter,
    exp.Anonymous: _anonymous,
    exp.CurrentTimestamp: _now,
    exp.Localtime: _now,
    exp.UtcTimestamp: _utc_timestamp,
    exp.CurrentDate: _curdate,
    exp.CurrentTime: _curtime,
    exp.CurrentSchema: _schema,
    exp.CurrentVersion: _version,
    exp.CurrentUser: _current_user,
    exp.Uuid: _uuid,
    exp.TimeToStr: _date_format,
    exp.DateAdd: _date_add,
    exp.DateSub: _date_add,
    exp.Add: _add_sub,
    exp.Sub: _add_sub,
    exp.UnixToTime: _from_unixtime,
    exp.Introducer: _introducer,
    exp.Collate: _collate,
    exp.TimestampDiff: _timestampdiff,
    exp.Trunc: _trunc,
    exp.NumberToStr: _number_to_str,
    exp.StrPosition: _strposition,
    exp.Rand: _rand,
    exp.PropertyEQ: _assignment,
}


def translate(ctx: StatementContext, tree: exp.Expression) -> Translation:
    """Rewrite ``tree`` (in place) for SQLite; see the module docstring."""
    rewriter = _Rewriter(ctx)
    new_tree = rewriter.run(tree)
    return Translation(new_tree, rewriter.tables, rewriter.locking)


def qualified_sqlite(table: TableDef) -> str:
    """``"db.table"`` for direct SQL."""
    return quote_ident(sqlite_name(table.schema, table.name))
