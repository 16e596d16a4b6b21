"""Result-set metadata: column names as mysqld names them and types that decode right.

Names: an alias if given; a column reference is named by its identifier as written; any other
expression by its exact text in the query (``COUNT(*)``, ``@@version_comment``), found from the
lexer's token spans.  Types: table columns carry their catalog definition (type, length, flags,
``org_table``…); expressions get the type MySQL gives them where the rules are simple
(comparisons are BIGINT, ``NOW()`` DATETIME, ``SUM`` of integers DECIMAL, ``/`` DECIMAL with
four more digits…), otherwise the type follows the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from sqlglot import exp

from consistent.emulator.results import Column, bigint_column, null_column, text_column
from consistent.emulator.sql.lexer import Statement, Tok
from consistent.emulator.sql.translate import TableRef
from consistent.emulator.sql.types import (
    BINARY_CHARSET,
    DEFAULT_CHARSET,
    Family,
    TypeSpec,
    convert_value,
)
from consistent.protocol.constants import ColumnFlag, ColumnType

__all__ = [
    "Slot",
    "convert_rows",
    "projection_names",
    "result_columns",
    "select_projections",
    "static_slots",
]

_SELECT_MODIFIERS: Final = frozenset(
    {
        "ALL",
        "DISTINCT",
        "DISTINCTROW",
        "HIGH_PRIORITY",
        "STRAIGHT_JOIN",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "SQL_NO_CACHE",
        "SQL_CACHE",
        "SQL_CALC_FOUND_ROWS",
    }
)
_SELECT_END: Final = frozenset(
    {
        "FROM",
        "INTO",
        "WHERE",
        "GROUP",
        "HAVING",
        "ORDER",
        "LIMIT",
        "UNION",
        "FOR",
        "WINDOW",
        "LOCK",
        "EXCEPT",
        "INTERSECT",
    }
)
_DATETIME_FUNCS: Final = frozenset(
    {"NOW", "SYSDATE", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_TIMESTAMP", "UTC_TIMESTAMP"}
)
_INT_FUNCS: Final = frozenset(
    {
        "CONNECTION_ID",
        "LAST_INSERT_ID",
        "ROW_COUNT",
        "FOUND_ROWS",
        "WAIT_FOR_EXECUTED_GTID_SET",
        "GTID_SUBSET",
        "SLEEP",
        "YEAR",
        "MONTH",
        "DAY",
        "HOUR",
        "MINUTE",
        "SECOND",
        "FIELD",
        "FIND_IN_SET",
        "LOCATE",
        "INSTR",
    }
)
_TEXT_CLASSES: Final = (
    exp.Concat,
    exp.ConcatWs,
    exp.Upper,
    exp.Lower,
    exp.Substring,
    exp.Trim,
    exp.GroupConcat,
    exp.CurrentSchema,
    exp.CurrentVersion,
    exp.CurrentUser,
    exp.Uuid,
    exp.TimeToStr,
    exp.Hex,
)
_BOOL_CLASSES: Final = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Like,
    exp.ILike,
    exp.Between,
    exp.And,
    exp.Or,
    exp.Not,
    exp.NullSafeEQ,
    exp.Exists,
    exp.RegexpLike,
)


def select_projections(tree: exp.Expression) -> list[exp.Expression] | None:
    """The select list that names a query's columns (the first SELECT of a UNION)."""
    node = tree
    while True:
        if isinstance(node, exp.Select):
            return list(node.expressions)
        if isinstance(node, exp.SetOperation | exp.Subquery):
            node = node.this
            continue
        return None


def projection_names(statement: Statement) -> list[str] | None:
    """Exact texts of the top-level select list items, split at depth-0 commas."""
    tokens = statement.tokens
    depth = 0
    start = None
    for index, token in enumerate(tokens):
        if token.kind is Tok.OP and token.text == "(":
            depth += 1
        elif token.kind is Tok.OP and token.text == ")":
            depth -= 1
        elif depth == 0 and token.kind is Tok.WORD and token.upper == "SELECT":
            start = index + 1
            break
    if start is None:
        return None
    while (
        start < len(tokens)
        and tokens[start].kind is Tok.WORD
        and (tokens[start].upper in _SELECT_MODIFIERS)
    ):
        start += 1
    items: list[str] = []
    depth = 0
    item_start = start
    end = len(tokens)
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token.kind is Tok.OP and token.text == "(":
            depth += 1
        elif token.kind is Tok.OP and token.text == ")":
            depth -= 1
            if depth < 0:
                end = index
                break
        elif depth == 0 and token.kind is Tok.OP and token.text == ",":
            items.append(_span(statement, item_start, index))
            item_start = index + 1
        elif depth == 0 and token.kind is Tok.WORD and token.upper in _SELECT_END:
            end = index
            break
    items.append(_span(statement, item_start, end))
    return items


def _span(statement: Statement, start: int, end: int) -> str:
    if start >= end:
        return ""
    tokens = statement.tokens
    return statement.text[tokens[start].start : tokens[end - 1].end]


@dataclass(frozen=True)
class Slot:
    """One output column: its definition and how to convert its values."""

    column: Column
    spec: TypeSpec | None


def _literal_type(node: exp.Literal) -> TypeSpec:
    text = str(node.this)
    if node.is_string:
        return TypeSpec("varchar", max(len(text), 1))
    if "e" in text.lower():
        return TypeSpec("double")
    if "." in text:
        whole, frac = text.lstrip("-").split(".", 1)
        return TypeSpec("decimal", len(whole) + len(frac), len(frac))
    return TypeSpec("bigint")


def _cast_type(node: exp.Cast) -> TypeSpec | None:
    target = node.to
    kind = target.this
    params = [
        int(p.this.this)
        for p in target.expressions
        if isinstance(p, exp.DataTypeParam) and isinstance(p.this, exp.Literal)
    ]
    dtype = exp.DataType.Type
    if kind in (dtype.INT, dtype.BIGINT, dtype.SMALLINT, dtype.TINYINT):
        return TypeSpec("bigint")
    if kind in (dtype.UINT, dtype.UBIGINT, dtype.USMALLINT, dtype.UTINYINT):
        return TypeSpec("bigint", unsigned=True)
    if kind in (dtype.DECIMAL,):
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        return TypeSpec("decimal", precision, scale)
    if kind in (dtype.DOUBLE, dtype.FLOAT):
        return TypeSpec("double")
    if kind in (dtype.DATE,):
        return TypeSpec("date")
    if kind in (dtype.DATETIME, dtype.TIMESTAMP):
        return TypeSpec("datetime", scale=params[0] if params else None)
    if kind in (dtype.TIME,):
        return TypeSpec("time", scale=params[0] if params else None)
    if kind in (dtype.CHAR, dtype.VARCHAR, dtype.TEXT, dtype.NCHAR, dtype.NVARCHAR):
        return TypeSpec("varchar", params[0] if params else 255)
    if kind in (dtype.BINARY, dtype.VARBINARY):
        return TypeSpec("varbinary", params[0] if params else 255)
    if kind is dtype.JSON:
        return TypeSpec("json")
    return None


class _Inferer:
    def __init__(self, refs: list[TableRef]) -> None:
        self.refs = refs
        self.by_alias = {r.alias.lower(): r for r in refs}

    def column(self, node: exp.Column) -> tuple[TableRef, int] | None:
        qualifier = node.table
        name = node.name.lower()
        candidates = (
            [self.by_alias[qualifier.lower()]]
            if qualifier and (qualifier.lower() in self.by_alias)
            else ([] if qualifier else self.refs)
        )
        for ref in candidates:
            for index, col in enumerate(ref.table.columns):
                if col.name.lower() == name:
                    return ref, index
        return None

    def type_of(self, node: exp.Expression) -> TypeSpec | None:
        if isinstance(node, exp.Alias | exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Literal):
            return _literal_type(node)
        if isinstance(node, (exp.Boolean, *_BOOL_CLASSES)):
            return TypeSpec("bigint")
        if isinstance(node, exp.Column):
            found = self.column(node)
            return None if found is None else found[0].table.columns[found[1]].type
        if isinstance(node, exp.Count):
            return TypeSpec("bigint")
        if isinstance(node, exp.Sum | exp.Avg):
            inner = self.type_of(node.this)
            extra = 4 if isinstance(node, exp.Avg) else 0
            if inner is None:
                return None
            if inner.family is Family.INT:
                return TypeSpec("decimal", 32 + extra, extra)
            if inner.family is Family.DECIMAL:
                return TypeSpec("decimal", (inner.length or 10) + 22, (inner.scale or 0) + extra)
            return TypeSpec("double")
        if isinstance(node, exp.Max | exp.Min):
            return self.type_of(node.this)
        if isinstance(node, exp.Cast):
            return _cast_type(node)
        if isinstance(node, exp.CurrentTimestamp | exp.Localtime | exp.UtcTimestamp):
            fsp = node.this
            return TypeSpec(
                "datetime", scale=int(fsp.this) if isinstance(fsp, exp.Literal) else None
            )
        if isinstance(node, exp.CurrentDate):
            return TypeSpec("date")
        if isinstance(node, exp.CurrentTime):
            return TypeSpec("time")
        if isinstance(node, exp.Anonymous):
            name = str(node.this).upper()
            if name in _DATETIME_FUNCS:
                args = node.expressions
                fsp = int(args[0].this) if args and isinstance(args[0], exp.Literal) else None
                return TypeSpec("datetime", scale=fsp)
            if name in ("CURDATE", "UTC_DATE"):
                return TypeSpec("date")
            if name == "CURTIME":
                return TypeSpec("time")
            if name in _INT_FUNCS or (name == "UNIX_TIMESTAMP" and not node.expressions):
                return TypeSpec("bigint")
            if name in ("GTID_SUBTRACT", "DATABASE", "SCHEMA", "USER", "VERSION"):
                return TypeSpec("varchar", 255)
            return None
        if isinstance(node, _TEXT_CLASSES):
            return TypeSpec("varchar", 255)
        if isinstance(node, exp.Div):
            left, right = self.type_of(node.this), self.type_of(node.expression)
            if (
                left is not None
                and right is not None
                and Family.FLOAT not in (left.family, right.family)
            ):
                return TypeSpec("decimal", 20, (left.scale or 0) + 4)
            return None
        if isinstance(node, exp.IntDiv | exp.Mod):
            return TypeSpec("bigint")
        if isinstance(node, exp.Add | exp.Sub | exp.Mul):
            left, right = self.type_of(node.this), self.type_of(node.expression)
            if left is None or right is None:
                return None
            families = {left.family, right.family}
            if families <= {Family.INT, Family.YEAR}:
                return TypeSpec("bigint")
            if families <= {Family.INT, Family.DECIMAL}:
                scale = (
                    (left.scale or 0) + (right.scale or 0)
                    if isinstance(node, exp.Mul)
                    else max(left.scale or 0, right.scale or 0)
                )
                return TypeSpec("decimal", 20, scale)
            if Family.FLOAT in families:
                return TypeSpec("double")
            return None
        if isinstance(node, exp.Neg):
            return self.type_of(node.this)
        return None


def _typed_column(name: str, spec: TypeSpec, nullable: bool) -> Column:
    flags = spec.base_flags()
    if not nullable:
        flags |= ColumnFlag.NOT_NULL
    length = spec.display_length()
    if spec.family is Family.TEXT and spec.name == "varchar":
        return Column(name, ColumnType.VAR_STRING, length, flags, 31, DEFAULT_CHARSET)
    return Column(name, spec.info.column_type, length, flags, spec.decimals(), spec.charset_id())


def _value_column(name: str, values: list[object]) -> tuple[Column, TypeSpec | None]:
    present = [v for v in values if v is not None]
    nullable = len(present) != len(values)
    if not present:
        return null_column(name), None
    if all(isinstance(v, bool | int) for v in present):
        return bigint_column(name, nullable=nullable), TypeSpec("bigint")
    if all(isinstance(v, int | float) for v in present):
        flags = ColumnFlag.BINARY | (ColumnFlag(0) if nullable else ColumnFlag.NOT_NULL)
        return Column(name, ColumnType.DOUBLE, 23, flags, 31, BINARY_CHARSET), TypeSpec("double")
    if all(isinstance(v, Decimal) for v in present):
        spec = TypeSpec("decimal", 65, 30)
        return _typed_column(name, spec, nullable), None
    if all(isinstance(v, bytes) for v in present):
        longest = max(len(v) for v in present if isinstance(v, bytes))
        flags = ColumnFlag.BINARY | (ColumnFlag(0) if nullable else ColumnFlag.NOT_NULL)
        return Column(name, ColumnType.VAR_STRING, longest, flags, 0, BINARY_CHARSET), None
    longest = max(len(str(v)) for v in present)
    column = text_column(name, max(longest, 1), nullable=nullable)
    return column, TypeSpec("varchar", max(longest, 1))


def result_columns(
    projections: list[exp.Expression] | None,
    names: list[str] | None,
    refs: list[TableRef],
    description: list[str],
    rows: list[tuple[object, ...]],
) -> tuple[list[Column], list[tuple[object, ...]]]:
    """Column definitions for a result and its rows converted to client-side values."""
    slots = _slots(projections, names, refs, description, rows)
    if slots is None:
        slots = []
        for index, name in enumerate(description):
            column, spec = _value_column(name, [row[index] for row in rows])
            slots.append(Slot(column, spec))
    return [s.column for s in slots], convert_rows(slots, rows)


def static_slots(
    projections: list[exp.Expression] | None,
    names: list[str] | None,
    refs: list[TableRef],
    description: list[str],
) -> list[Slot] | None:
    """The slots :func:`result_columns` gives whatever the rows are, or None when some
    column's type, length or nullability follows the values (literals, untyped expressions).
    A statement that runs again with the same projections can reuse them."""
    return _slots(projections, names, refs, description, None)


def convert_rows(slots: list[Slot], rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Rows converted to the client-side values of their columns."""
    return [
        tuple(
            convert_value(slot.spec, value) if slot.spec is not None else value
            for slot, value in zip(slots, row, strict=True)
        )
        for row in rows
    ]


def _slots(
    projections: list[exp.Expression] | None,
    names: list[str] | None,
    refs: list[TableRef],
    description: list[str],
    rows: list[tuple[object, ...]] | None,
) -> list[Slot] | None:
    """The slots of a result; with ``rows`` None, only if none depends on the values."""
    if projections is None:
        return None
    inferer = _Inferer(refs)
    slots: list[Slot] = []
    use_names = names is not None and len(names) == len(projections)
    for position, node in enumerate(projections):
        if isinstance(node, exp.Star):
            for ref in refs:
                slots.extend(_table_slots(ref))
            continue
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            star_ref = inferer.by_alias.get(node.table.lower())
            if star_ref is None:
                return None
            slots.extend(_table_slots(star_ref))
            continue
        index = len(slots)
        if index >= len(description):
            return None
        label = _label(node, names[position] if use_names and names else None, description[index])
        target = node.this if isinstance(node, exp.Alias) else node
        if isinstance(target, exp.Column):
            found = inferer.column(target)
            if found is not None:
                ref, col_index = found
                col = ref.table.columns[col_index]
                column = ref.table.result_column(col, label, ref.alias)
                slots.append(Slot(column, col.type))
                continue
        spec = inferer.type_of(target)
        if rows is None and spec is None:
            return None  # the values decide
        values = [row[index] for row in rows] if rows is not None else []
        if spec is None:
            column, value_spec = _value_column(label, values)
            slots.append(Slot(column, value_spec))
            continue
        # A literal's value is never NULL (NULL is not an exp.Literal): only the values of
        # other expressions can be.
        nullable = any(v is None for v in values) or not isinstance(target, exp.Literal)
        slots.append(Slot(_typed_column(label, spec, nullable), spec))
    if len(slots) != len(description):
        return None
    return slots


def _table_slots(ref: TableRef) -> list[Slot]:
    return [
        Slot(ref.table.result_column(col, col.name, ref.alias), col.type)
        for col in ref.table.columns
    ]


def _label(node: exp.Expression, text: str | None, fallback: str) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if text:
        return text
    return fallback
