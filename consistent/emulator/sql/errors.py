"""SQLite errors translated to the MySQL errors a client expects.

The catalog checks most conditions before SQLite sees a statement (unknown tables, unknown
databases, duplicate names); what remains are run-time conditions only SQLite detects:
constraint violations, unknown columns inside expressions, type mismatches in STRICT tables.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Final

from consistent.emulator.errors import ER, SqlError, not_supported, sql_error
from consistent.emulator.sql.functions import FunctionHost

__all__ = ["ErrorContext", "map_sqlite_error"]


class ErrorContext:
    """What the statement knew that SQLite's message lacks (key names, values, columns)."""

    def __init__(
        self,
        *,
        duplicate: Callable[[list[str]], tuple[str, str]] | None = None,
        listed_columns: Sequence[str] = (),
        operation: str = "",
    ) -> None:
        self.duplicate = duplicate
        self.listed_columns = listed_columns
        self.operation = operation


def _unique(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    columns = [c.strip().rsplit(".", 1)[-1] for c in match.group(1).split(",")]
    if ctx is not None and ctx.duplicate is not None:
        value, key = ctx.duplicate(columns)
        return sql_error(ER.DUP_ENTRY, value, key)
    return sql_error(ER.DUP_ENTRY, "", ".".join(columns))


def _not_null(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    column = match.group(1).rsplit(".", 1)[-1]
    listed = ctx.listed_columns if ctx is not None and ctx.operation == "insert" else None
    if listed is not None and column.lower() not in [c.lower() for c in listed]:
        return sql_error(ER.NO_DEFAULT_FOR_FIELD, column)
    return sql_error(ER.BAD_NULL_ERROR, column)


def _no_column(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    name = match.group(1)
    if "." in name and not name.startswith('"'):
        name = name.rsplit(".", 1)[-1]
    return sql_error(ER.BAD_FIELD_ERROR, name, "field list")


def _strict_type(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    kind = {"INTEGER": "integer", "REAL": "decimal"}.get(match.group(2), match.group(2).lower())
    column = match.group(3).rsplit(".", 1)[-1]
    return sql_error(ER.TRUNCATED_WRONG_VALUE_FOR_FIELD, kind, match.group(1).lower(), column, 1)


_CHECK_ERRORS: Final = {
    "len": ER.DATA_TOO_LONG,
    "range": ER.WARN_DATA_OUT_OF_RANGE,
    "enum": ER.WARN_DATA_TRUNCATED,
}


def _check(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(_CHECK_ERRORS[match.group(1)], match.group(2), 1)


def _foreign_key(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    if ctx is not None and ctx.operation == "delete":
        return sql_error(ER.ROW_IS_REFERENCED_2, "foreign key constraint")
    return sql_error(ER.NO_REFERENCED_ROW_2, "foreign key constraint")


def _ambiguous(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(ER.NON_UNIQ_ERROR, match.group(1).rsplit(".", 1)[-1], "field list")


def _no_function(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return not_supported(f"function {match.group(1)}")


def _wrong_args(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(ER.WRONG_PARAMCOUNT_TO_NATIVE_FCT, match.group(1))


def _group(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(ER.INVALID_GROUP_FUNC_USE)


def _locked(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(ER.LOCK_WAIT_TIMEOUT)


def _no_table(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    name = match.group(1)
    schema, _, table = name.partition(".")
    return sql_error(ER.NO_SUCH_TABLE, schema, table or schema)


def _syntax(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return not_supported(f"this statement (SQLite: {match.group(0)})")


def _subquery_rows(match: re.Match[str], ctx: ErrorContext | None) -> SqlError:
    return sql_error(ER.OPERAND_COLUMNS, 1)


_PATTERNS: Final[
    tuple[tuple[re.Pattern[str], Callable[[re.Match[str], ErrorContext | None], SqlError]], ...]
] = (
    (re.compile(r"UNIQUE constraint failed: (.*)"), _unique),
    (re.compile(r"NOT NULL constraint failed: (.*)"), _not_null),
    (re.compile(r"no such column: (.*)"), _no_column),
    (re.compile(r"cannot store (\w+) value in (\w+) column (.*)"), _strict_type),
    (re.compile(r"FOREIGN KEY constraint failed"), _foreign_key),
    (re.compile(r"CHECK constraint failed: chk\$(len|range|enum)\$(.*)"), _check),
    (re.compile(r"ambiguous column name: (.*)"), _ambiguous),
    (re.compile(r"no such function: (\w+)"), _no_function),
    (re.compile(r"wrong number of arguments to function (\w+)\(\)"), _wrong_args),
    (re.compile(r"misuse of (?:aggregate|window) function"), _group),
    (re.compile(r"database (?:table )?is locked"), _locked),
    (re.compile(r"no such table: (?:main\.|temp\.)?(.*)"), _no_table),
    (re.compile(r"sub-select returns \d+ columns|row value misused"), _subquery_rows),
    (re.compile(r".*syntax error.*|.*near \".*\".*|unrecognized token.*"), _syntax),
)


def map_sqlite_error(
    exc: sqlite3.Error, host: FunctionHost | None, ctx: ErrorContext | None = None
) -> SqlError:
    """The MySQL error for a SQLite failure (a function's own SqlError wins)."""
    if host is not None and host.error is not None:
        error = host.error
        host.error = None
        return error
    message = str(exc)
    for pattern, build in _PATTERNS:
        match = pattern.search(message)
        if match:
            return build(match, ctx)
    return sql_error(ER.UNKNOWN_ERROR, message)
