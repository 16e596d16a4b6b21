"""Parsing MySQL DDL into data-dictionary changes.

``CREATE TABLE`` and ``ALTER TABLE`` are parsed by hand from the lexer's tokens: the catalog
needs exact MySQL types, keys, defaults and options, which generic SQL parsers normalise
away.  The result is a :class:`CreateTable` or a list of :data:`AlterAction` values that
:func:`apply_alter` folds into a new :class:`~consistent.emulator.sql.catalog.TableDef`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Final

from consistent.emulator.errors import ER, SqlError, not_supported, sql_error
from consistent.emulator.sql.catalog import ColumnDef, ForeignKeyDef, IndexDef, TableDef
from consistent.emulator.sql.lexer import Tok, TokenStream
from consistent.emulator.sql.types import ALIASES, TYPES, Family, TypeSpec

__all__ = [
    "AddColumn",
    "AddForeignKey",
    "AddIndex",
    "AlterAction",
    "AlterDefault",
    "ChangeColumn",
    "CreateTable",
    "DropColumn",
    "DropForeignKey",
    "DropIndex",
    "RenameColumn",
    "RenameIndex",
    "RenameTable",
    "TableOptions",
    "apply_alter",
    "build_table",
    "key_parts",
    "parse_alter_table",
    "parse_column_definition",
    "parse_create_table",
]

_FK_ACTIONS: Final = ("RESTRICT", "CASCADE", "SET NULL", "NO ACTION", "SET DEFAULT")
_TABLE_OPTION_WORDS: Final = frozenset(
    {
        "ENGINE",
        "AUTO_INCREMENT",
        "DEFAULT",
        "CHARACTER",
        "CHARSET",
        "COLLATE",
        "COMMENT",
        "ROW_FORMAT",
        "KEY_BLOCK_SIZE",
        "STATS_PERSISTENT",
        "STATS_AUTO_RECALC",
        "STATS_SAMPLE_PAGES",
        "AVG_ROW_LENGTH",
        "CHECKSUM",
        "COMPRESSION",
        "ENCRYPTION",
        "MAX_ROWS",
        "MIN_ROWS",
        "PACK_KEYS",
        "DELAY_KEY_WRITE",
        "INSERT_METHOD",
        "TABLESPACE",
    }
)


@dataclass
class CreateTable:
    """A parsed CREATE TABLE."""

    schema: str | None
    name: str
    temporary: bool = False
    if_not_exists: bool = False
    columns: list[ColumnDef] = field(default_factory=list)
    indexes: list[IndexDef] = field(default_factory=list)
    foreign_keys: list[ForeignKeyDef] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    like: tuple[str | None, str] | None = None


@dataclass(frozen=True)
class AddColumn:
    """ADD [COLUMN] … [FIRST | AFTER c]."""

    column: ColumnDef
    position: str | None = None  # None = last, "" = FIRST, else AFTER that column
    inline_keys: tuple[IndexDef, ...] = ()


@dataclass(frozen=True)
class DropColumn:
    """DROP [COLUMN] c."""

    name: str


@dataclass(frozen=True)
class ChangeColumn:
    """MODIFY / CHANGE [COLUMN]."""

    old_name: str
    column: ColumnDef
    position: str | None = None
    inline_keys: tuple[IndexDef, ...] = ()


@dataclass(frozen=True)
class RenameColumn:
    """RENAME COLUMN a TO b."""

    old_name: str
    new_name: str


@dataclass(frozen=True)
class AlterDefault:
    """ALTER [COLUMN] c SET DEFAULT … | DROP DEFAULT."""

    name: str
    default: str | None


@dataclass(frozen=True)
class AddIndex:
    """ADD PRIMARY KEY / UNIQUE / INDEX."""

    index: IndexDef


@dataclass(frozen=True)
class DropIndex:
    """DROP INDEX name | DROP PRIMARY KEY (name ``PRIMARY``)."""

    name: str


@dataclass(frozen=True)
class RenameIndex:
    """RENAME {INDEX|KEY} a TO b."""

    old_name: str
    new_name: str


@dataclass(frozen=True)
class AddForeignKey:
    """ADD [CONSTRAINT] FOREIGN KEY."""

    key: ForeignKeyDef


@dataclass(frozen=True)
class DropForeignKey:
    """DROP FOREIGN KEY name."""

    name: str


@dataclass(frozen=True)
class RenameTable:
    """RENAME [TO|AS] [schema.]name."""

    schema: str | None
    name: str


@dataclass(frozen=True)
class TableOptions:
    """ENGINE=…, COMMENT=…, AUTO_INCREMENT=… and friends."""

    options: tuple[tuple[str, str], ...]


AlterAction = (
    AddColumn
    | DropColumn
    | ChangeColumn
    | RenameColumn
    | AlterDefault
    | AddIndex
    | DropIndex
    | RenameIndex
    | AddForeignKey
    | DropForeignKey
    | RenameTable
    | TableOptions
)


# ----- data types and columns --------------------------------------------------------------


def _length_args(ts: TokenStream) -> list[int]:
    args: list[int] = []
    if not ts.accept("("):
        return args
    while True:
        args.append(ts.number())
        if ts.accept(")"):
            return args
        ts.expect(",")


def parse_data_type(ts: TokenStream) -> TypeSpec:
    """A MySQL data type with its attributes (UNSIGNED, ZEROFILL, CHARACTER SET, COLLATE)."""
    token = ts.next()
    if token.kind is not Tok.WORD:
        raise ts.error(token)
    word = token.text.lower()
    if word in ("double",) and ts.peek_upper() == "PRECISION":
        ts.next()
    if word in ("national",):
        word = ts.next().text.lower()
    if word == "char" and ts.peek_upper() == "VARYING":
        ts.next()
        word = "varchar"
    if word in ("long",) and ts.peek_upper() in ("VARCHAR", "VARBINARY"):
        ts.next()
        word = "mediumtext"
    if word in ("bool", "boolean"):
        return TypeSpec("tinyint", 1)
    if word == "serial":
        return TypeSpec("bigint", unsigned=True)
    name = ALIASES.get(word, word)
    if name not in TYPES:
        if name in ("geometry", "point", "linestring", "polygon", "multipoint", "vector"):
            raise not_supported(f"{name} columns")
        raise ts.error(token)
    info = TYPES[name]
    values: tuple[str, ...] = ()
    length: int | None = None
    scale: int | None = None
    if info.family in (Family.ENUM, Family.SET):
        ts.expect("(")
        items: list[str] = []
        while True:
            item = ts.next()
            if item.kind is not Tok.STRING:
                raise ts.error(item)
            items.append(item.value)
            if ts.accept(")"):
                break
            ts.expect(",")
        values = tuple(items)
    else:
        args = _length_args(ts)
        if args:
            length = args[0]
            scale = args[1] if len(args) > 1 else None
        if info.family in (Family.DATETIME, Family.TIME):
            scale, length = length, None
        if info.family is Family.DECIMAL:
            length = length if length is not None else 10
            scale = scale if scale is not None else 0
        if name == "float" and length is not None and scale is None:
            if length > 24:
                name = "double"
            length = None
        if name in ("char", "binary") and length is None:
            length = 1
        if name in ("varchar", "varbinary") and length is None:
            raise ts.error()
        if info.family is Family.INT and not (name == "tinyint" and length == 1):
            length = None
    unsigned = zerofill = False
    charset = collation = None
    while True:
        upper = ts.peek_upper()
        if upper == "UNSIGNED":
            unsigned = True
        elif upper == "SIGNED":
            pass
        elif upper == "ZEROFILL":
            zerofill = unsigned = True
        elif upper == "BINARY" and info.family is Family.TEXT:
            collation = "utf8mb4_bin"
        elif upper in ("CHARACTER", "CHARSET"):
            ts.next()
            if upper == "CHARACTER":
                ts.expect("SET")
            charset = ts.ident().lower()
            continue
        elif upper == "COLLATE":
            ts.next()
            collation = ts.ident().lower()
            continue
        else:
            break
        ts.next()
    if info.family in (Family.TEXT, Family.ENUM, Family.SET):
        charset = charset or "utf8mb4"
        if charset == "binary":
            name = {"char": "binary", "varchar": "varbinary", "text": "blob"}.get(name, name)
            charset = None
    else:
        charset = collation = None
    return TypeSpec(name, length, scale, unsigned, zerofill, values, charset, collation)


def _default_text(ts: TokenStream) -> str:
    """The DEFAULT value as SQL text."""
    token = ts.peek()
    if token is None:
        raise ts.error()
    if token.kind is Tok.OP and token.text == "(":
        start = ts.pos
        end = ts.skip_balanced()
        text = ts.text_between(start, end)
        inner = text[1:-1].strip()
        now = re.fullmatch(
            r"(?i)(current_timestamp|now|localtime|localtimestamp)\s*(\(\s*(\d*)\s*\))?", inner
        )
        if now:
            return "CURRENT_TIMESTAMP" + (f"({now.group(3)})" if now.group(3) else "")
        if re.fullmatch(r"[-+]?\d+(\.\d+)?|'(?:[^']|'')*'", inner):
            return inner
        raise not_supported("expression defaults other than CURRENT_TIMESTAMP")
    if token.kind is Tok.OP and token.text in ("-", "+"):
        ts.next()
        number = ts.next()
        return (token.text if token.text == "-" else "") + number.text
    ts.next()
    upper = token.upper
    if token.kind is Tok.WORD and upper in (
        "CURRENT_TIMESTAMP",
        "NOW",
        "LOCALTIME",
        "LOCALTIMESTAMP",
    ):
        fsp = ""
        if ts.accept("("):
            if ts.peek_upper() != ")":
                fsp = f"({ts.number()})"
            ts.expect(")")
        return "CURRENT_TIMESTAMP" + fsp
    if token.kind is Tok.STRING:
        return "'" + token.value.replace("'", "''") + "'"
    if token.kind is Tok.WORD and upper in ("NULL", "TRUE", "FALSE"):
        return upper
    if token.kind is Tok.NUMBER:
        return token.text
    if token.kind is Tok.WORD and token.text.lower().startswith(("_utf8", "_binary", "_latin1")):
        return _default_text(ts)
    raise ts.error(token)


def _normalise_default(spec: TypeSpec, text: str) -> str:
    """Defaults as SHOW CREATE TABLE prints them (numbers quoted, booleans as '1'/'0')."""
    if text == "NULL" or text.startswith(("(", "CURRENT_TIMESTAMP")):
        return text
    if text in ("TRUE", "FALSE"):
        text = "1" if text == "TRUE" else "0"
    if not text.startswith("'"):
        text = "'" + text + "'"
    if spec.family is Family.DECIMAL and spec.scale is not None:
        try:
            value = Decimal(text[1:-1]).quantize(Decimal(1).scaleb(-spec.scale))
            text = f"'{value}'"
        except ArithmeticError:
            pass
    return text


def parse_column_definition(ts: TokenStream, name: str) -> tuple[ColumnDef, list[IndexDef]]:
    """``data_type [NOT NULL|NULL] [DEFAULT …] [AUTO_INCREMENT] [UNIQUE|PRIMARY KEY] …``."""
    spec = parse_data_type(ts)
    nullable = True
    explicit_null = False
    default: str | None = None
    auto = False
    on_update = False
    comment = ""
    keys: list[IndexDef] = []
    serial = spec.name == "bigint" and spec.unsigned and ts.statement.text  # marker below
    del serial
    while not ts.at_end():
        upper = ts.peek_upper()
        if upper in (",", ")"):
            break
        if ts.accept("NOT", "NULL"):
            nullable = False
        elif ts.accept("NULL"):
            explicit_null = True
        elif ts.accept("DEFAULT"):
            default = _default_text(ts)
        elif ts.accept("AUTO_INCREMENT"):
            auto = True
        elif ts.accept("ON", "UPDATE"):
            value = _default_text(ts)
            if not value.startswith("CURRENT_TIMESTAMP"):
                raise ts.error()
            on_update = True
        elif ts.accept("PRIMARY", "KEY") or ts.accept("KEY"):
            keys.append(IndexDef("PRIMARY", (name,), unique=True, primary=True))
        elif ts.accept("UNIQUE"):
            ts.accept("KEY") or ts.accept("INDEX")
            keys.append(IndexDef(name, (name,), unique=True))
        elif ts.accept("COMMENT"):
            comment = ts.string()
        elif ts.accept("COLLATE"):
            collation = ts.ident().lower()
            spec = replace(spec, collation=collation)
        elif ts.accept("VISIBLE") or ts.accept("INVISIBLE"):
            pass
        elif ts.accept("COLUMN_FORMAT") or ts.accept("STORAGE"):
            ts.next()
        elif upper in ("GENERATED", "AS"):
            raise not_supported("generated columns")
        elif upper in ("CHECK", "CONSTRAINT"):
            raise not_supported("CHECK constraints")
        elif upper == "REFERENCES":
            raise not_supported("column-level REFERENCES")
        elif upper == "SRID":
            raise not_supported("SRID")
        else:
            raise ts.error()
    del explicit_null
    if default is not None:
        if default == "NULL" and not nullable:
            raise sql_error(ER.INVALID_DEFAULT, name)
        default = _normalise_default(spec, default)
    if any(k.primary for k in keys):
        nullable = False
    return ColumnDef(name, spec, nullable, default, auto, on_update, comment), keys


# ----- keys ---------------------------------------------------------------------------------


def key_parts(ts: TokenStream) -> tuple[str, ...]:
    """``(col [(len)] [ASC|DESC], …)`` of a key definition."""
    ts.expect("(")
    parts: list[str] = []
    while True:
        if ts.peek_upper() == "(":
            raise not_supported("functional key parts")
        parts.append(ts.ident())
        if ts.accept("("):
            ts.number()
            ts.expect(")")
        ts.accept("ASC") or ts.accept("DESC")
        if ts.accept(")"):
            break
        ts.expect(",")
    _skip_index_options(ts)
    return tuple(parts)


def _skip_index_options(ts: TokenStream) -> None:
    while True:
        if ts.accept("USING"):
            ts.next()
        elif ts.accept("COMMENT"):
            ts.string()
        elif ts.accept("KEY_BLOCK_SIZE"):
            ts.accept("=")
            ts.next()
        elif ts.accept("VISIBLE") or ts.accept("INVISIBLE"):
            pass
        else:
            return


def _references(ts: TokenStream, default_schema: str) -> tuple[str, str, tuple[str, ...], str, str]:
    ts.expect("REFERENCES")
    schema, table = ts.qualified()
    cols = key_parts(ts)
    on_delete = on_update = ""
    while ts.accept("ON"):
        which = ts.next().upper
        action = ts.next().upper
        if action in ("SET", "NO"):
            action += " " + ts.next().upper
        if action not in _FK_ACTIONS:
            raise ts.error()
        action = "" if action in ("RESTRICT", "NO ACTION") else action
        if which == "DELETE":
            on_delete = action
        elif which == "UPDATE":
            on_update = action
        else:
            raise ts.error()
    if ts.accept("MATCH"):
        ts.next()
    return schema or default_schema, table, cols, on_delete, on_update


def _table_element(ts: TokenStream, create: CreateTable, schema: str) -> None:
    constraint: str | None = None
    if ts.accept("CONSTRAINT") and ts.peek_upper() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
        constraint = ts.ident()
    upper = ts.peek_upper()
    if ts.accept("PRIMARY", "KEY"):
        if ts.accept("USING"):
            ts.next()
        create.indexes.append(IndexDef("PRIMARY", key_parts(ts), unique=True, primary=True))
    elif upper in ("UNIQUE",):
        ts.next()
        ts.accept("KEY") or ts.accept("INDEX")
        name = None if ts.peek_upper() in ("(", "USING") else ts.ident()
        if ts.accept("USING"):
            ts.next()
        parts = key_parts(ts)
        create.indexes.append(IndexDef(name or constraint or parts[0], parts, unique=True))
    elif upper in ("KEY", "INDEX", "FULLTEXT", "SPATIAL"):
        ts.next()
        if upper in ("FULLTEXT", "SPATIAL"):
            ts.accept("KEY") or ts.accept("INDEX")
        name = None if ts.peek_upper() in ("(", "USING") else ts.ident()
        if ts.accept("USING"):
            ts.next()
        parts = key_parts(ts)
        create.indexes.append(IndexDef(name or parts[0], parts))
    elif ts.accept("FOREIGN", "KEY"):
        index_name = None if ts.peek_upper() == "(" else ts.ident()
        cols = key_parts(ts)
        ref_schema, ref_table, ref_cols, on_delete, on_update = _references(ts, schema)
        name = constraint or index_name or f"{create.name}_ibfk_{len(create.foreign_keys) + 1}"
        create.foreign_keys.append(
            ForeignKeyDef(name, cols, ref_schema, ref_table, ref_cols, on_delete, on_update)
        )
    elif upper == "CHECK":
        raise not_supported("CHECK constraints")
    else:
        name = ts.ident()
        column, keys = parse_column_definition(ts, name)
        create.columns.append(column)
        create.indexes.extend(keys)


def _table_options(ts: TokenStream) -> dict[str, str]:
    options: dict[str, str] = {}
    while not ts.at_end():
        ts.accept(",")
        upper = ts.peek_upper()
        if upper not in _TABLE_OPTION_WORDS:
            break
        ts.next()
        if upper == "DEFAULT":
            upper = ts.next().upper
        if upper == "CHARACTER":
            ts.expect("SET")
            upper = "CHARSET"
        ts.accept("=")
        options[upper] = ts.string()
    return options


def parse_create_table(ts: TokenStream, default_schema: str | None) -> CreateTable:
    """``CREATE [TEMPORARY] TABLE [IF NOT EXISTS] name (…) options`` or ``… LIKE other``.

    The stream is positioned after ``CREATE``.
    """
    temporary = ts.accept("TEMPORARY")
    ts.expect("TABLE")
    if_not_exists = ts.accept("IF", "NOT", "EXISTS")
    schema, name = ts.qualified()
    create = CreateTable(schema, name, temporary, if_not_exists)
    if ts.accept("LIKE") or (
        ts.peek_upper() == "(" and ts.peek_upper(1) == "LIKE" and ts.accept("(", "LIKE")
    ):
        create.like = ts.qualified()
        ts.accept(")")
        ts.expect_end()
        return create
    if not ts.accept("("):
        raise (
            not_supported("CREATE TABLE … SELECT")
            if ts.peek_upper() in ("AS", "SELECT")
            else ts.error()
        )
    while True:
        _table_element(ts, create, schema or default_schema or "")
        if ts.accept(")"):
            break
        ts.expect(",")
    create.options = _table_options(ts)
    if ts.accept("PARTITION"):
        raise not_supported("partitioning")
    if not ts.at_end():
        if ts.peek_upper() in ("AS", "SELECT", "IGNORE", "REPLACE"):
            raise not_supported("CREATE TABLE … SELECT")
        raise ts.error()
    return create


def build_table(create: CreateTable, schema: str, db_charset: str, db_collation: str) -> TableDef:
    """Validate a CREATE TABLE and turn it into a table definition."""
    if not create.columns:
        raise sql_error(ER.TABLE_MUST_HAVE_COLUMNS)
    seen: set[str] = set()
    for col in create.columns:
        if col.name.lower() in seen:
            raise sql_error(ER.DUP_FIELDNAME, col.name)
        seen.add(col.name.lower())
    table = TableDef(schema, create.name, tuple(create.columns), temporary=create.temporary)
    options = create.options
    charset = options.get("CHARSET", db_charset).lower()
    collation = options.get("COLLATE", db_collation if charset == db_charset else "").lower()
    if not collation:
        collation = "utf8mb4_0900_ai_ci" if charset == "utf8mb4" else f"{charset}_general_ci"
    auto = options.get("AUTO_INCREMENT")
    table = replace(
        table,
        engine=_engine(options.get("ENGINE", "InnoDB")),
        charset=charset,
        collation=collation,
        comment=options.get("COMMENT", ""),
        auto_increment=int(auto) if auto and auto.isdigit() else None,
    )
    for index in create.indexes:
        table = _add_index(table, index)
    for key in create.foreign_keys:
        table = _add_foreign_key(table, key)
    _check_auto_increment(table)
    return table


def _engine(name: str) -> str:
    return {"innodb": "InnoDB", "memory": "MEMORY", "myisam": "MyISAM"}.get(name.lower(), name)


def _check_auto_increment(table: TableDef) -> None:
    autos = [c for c in table.columns if c.auto_increment]
    if not autos:
        return
    if len(autos) > 1:
        raise sql_error(ER.WRONG_AUTO_KEY)
    col = autos[0]
    if not any(index.columns[0] == col.name for index in table.indexes):
        raise sql_error(ER.WRONG_AUTO_KEY)
    if col.type.family not in (Family.INT, Family.FLOAT, Family.DECIMAL):
        raise sql_error(ER.WRONG_FIELD_SPEC, col.name)
    if not table.rowid_alias():
        raise not_supported("AUTO_INCREMENT on a column that is not the whole PRIMARY KEY")


def _add_index(table: TableDef, index: IndexDef) -> TableDef:
    for part in index.columns:
        if table.column(part) is None:
            raise sql_error(ER.KEY_COLUMN_DOES_NOT_EXITS, part)
    parts = tuple(table.column(p).name for p in index.columns)  # type: ignore[union-attr]
    index = replace(index, columns=parts)
    if index.primary:
        if table.primary_key is not None:
            raise sql_error(ER.MULTIPLE_PRI_KEY)
        columns = tuple(replace(c, nullable=False) if c.name in parts else c for c in table.columns)
        table = replace(table, columns=columns)
    else:
        names = {i.name.lower() for i in table.indexes}
        if index.name.lower() in names:
            if index.name == parts[0]:
                suffix = 2
                while f"{index.name}_{suffix}".lower() in names:
                    suffix += 1
                index = replace(index, name=f"{index.name}_{suffix}")
            else:
                raise sql_error(ER.DUP_KEYNAME, index.name)
    return replace(table, indexes=(*table.indexes, index))


def _add_foreign_key(table: TableDef, key: ForeignKeyDef) -> TableDef:
    for part in key.columns:
        if table.column(part) is None:
            raise sql_error(ER.KEY_COLUMN_DOES_NOT_EXITS, part)
    if not any(i.columns[: len(key.columns)] == key.columns for i in table.indexes):
        table = _add_index(table, IndexDef(key.name, key.columns))
    return replace(table, foreign_keys=(*table.foreign_keys, key))


# ----- ALTER TABLE ------------------------------------------------------------------------


def _position(ts: TokenStream) -> str | None:
    if ts.accept("FIRST"):
        return ""
    if ts.accept("AFTER"):
        return ts.ident()
    return None


def _alter_add(ts: TokenStream, schema: str, table_name: str) -> list[AlterAction]:
    upper = ts.peek_upper()
    if upper in (
        "PRIMARY",
        "UNIQUE",
        "KEY",
        "INDEX",
        "FULLTEXT",
        "SPATIAL",
        "CONSTRAINT",
        "FOREIGN",
    ):
        create = CreateTable(schema, table_name)
        _table_element(ts, create, schema)
        actions: list[AlterAction] = [AddIndex(i) for i in create.indexes]
        actions += [AddForeignKey(k) for k in create.foreign_keys]
        return actions
    if upper == "CHECK":
        raise not_supported("CHECK constraints")
    ts.accept("COLUMN")
    if ts.accept("("):
        added: list[AlterAction] = []
        while True:
            name = ts.ident()
            column, keys = parse_column_definition(ts, name)
            added.append(AddColumn(column, None, tuple(keys)))
            if ts.accept(")"):
                return added
            ts.expect(",")
    name = ts.ident()
    column, keys = parse_column_definition_until_position(ts, name)
    return [AddColumn(column, _position(ts), tuple(keys))]


def parse_column_definition_until_position(
    ts: TokenStream, name: str
) -> tuple[ColumnDef, list[IndexDef]]:
    """A column definition that may be followed by FIRST / AFTER."""
    end = ts.pos
    depth = 0
    while end < len(ts.tokens):
        token = ts.tokens[end]
        if token.kind is Tok.OP and token.text == "(":
            depth += 1
        elif token.kind is Tok.OP and token.text == ")":
            depth -= 1
        elif depth == 0 and (
            (token.kind is Tok.OP and token.text == ",")
            or (token.kind is Tok.WORD and token.upper in ("FIRST", "AFTER"))
        ):
            break
        end += 1
    saved = ts.tokens
    ts.tokens = saved[:end]
    try:
        result = parse_column_definition(ts, name)
    finally:
        ts.tokens = saved
    return result


def _alter_action(ts: TokenStream, schema: str, table_name: str) -> list[AlterAction]:
    if ts.accept("ADD"):
        return _alter_add(ts, schema, table_name)
    if ts.accept("DROP"):
        if ts.accept("PRIMARY", "KEY"):
            return [DropIndex("PRIMARY")]
        if ts.accept("INDEX") or ts.accept("KEY"):
            return [DropIndex(ts.ident())]
        if ts.accept("FOREIGN", "KEY"):
            return [DropForeignKey(ts.ident())]
        if ts.peek_upper() in ("CHECK", "CONSTRAINT"):
            raise not_supported("DROP CONSTRAINT")
        ts.accept("COLUMN")
        return [DropColumn(ts.ident())]
    if ts.accept("MODIFY"):
        ts.accept("COLUMN")
        name = ts.ident()
        column, keys = parse_column_definition_until_position(ts, name)
        return [ChangeColumn(name, column, _position(ts), tuple(keys))]
    if ts.accept("CHANGE"):
        ts.accept("COLUMN")
        old = ts.ident()
        new = ts.ident()
        column, keys = parse_column_definition_until_position(ts, new)
        return [ChangeColumn(old, column, _position(ts), tuple(keys))]
    if ts.accept("RENAME"):
        if ts.accept("COLUMN"):
            old = ts.ident()
            ts.expect("TO")
            return [RenameColumn(old, ts.ident())]
        if ts.accept("INDEX") or ts.accept("KEY"):
            old = ts.ident()
            ts.expect("TO")
            return [RenameIndex(old, ts.ident())]
        ts.accept("TO") or ts.accept("AS")
        new_schema, new_name = ts.qualified()
        return [RenameTable(new_schema, new_name)]
    if ts.accept("ALTER"):
        ts.accept("COLUMN")
        name = ts.ident()
        if ts.accept("SET", "DEFAULT"):
            return [AlterDefault(name, _default_text(ts))]
        if ts.accept("DROP", "DEFAULT"):
            return [AlterDefault(name, None)]
        raise not_supported("ALTER COLUMN … " + ts.rest_text()[:40])
    if ts.accept("CONVERT", "TO"):
        ts.accept("CHARACTER", "SET") or ts.accept("CHARSET")
        charset = ts.ident()
        options = [("CHARSET", charset)]
        if ts.accept("COLLATE"):
            options.append(("COLLATE", ts.ident()))
        return [TableOptions(tuple(options))]
    if ts.accept("ALGORITHM") or ts.accept("LOCK"):
        ts.accept("=")
        ts.next()
        return []
    if ts.peek_upper() in ("FORCE",):
        ts.next()
        return []
    if ts.peek_upper() in _TABLE_OPTION_WORDS:
        return [TableOptions(tuple(_table_options(ts).items()))]
    if ts.peek_upper() in ("ENABLE", "DISABLE", "DISCARD", "IMPORT", "ORDER", "PARTITION"):
        raise not_supported("ALTER TABLE " + ts.rest_text()[:40])
    raise ts.error()


def parse_alter_table(ts: TokenStream) -> tuple[str | None, str, list[AlterAction]]:
    """``ALTER TABLE name action [, action]…``; positioned after ``ALTER``."""
    ts.expect("TABLE")
    schema, name = ts.qualified()
    actions: list[AlterAction] = []
    while not ts.at_end():
        actions.extend(_alter_action(ts, schema or "", name))
        if not ts.accept(","):
            break
    ts.expect_end()
    return schema, name, actions


def _place(columns: list[ColumnDef], column: ColumnDef, position: str | None) -> list[ColumnDef]:
    if position is None:
        return [*columns, column]
    if position == "":
        return [column, *columns]
    for index, existing in enumerate(columns):
        if existing.name.lower() == position.lower():
            return [*columns[: index + 1], column, *columns[index + 1 :]]
    raise sql_error(ER.BAD_FIELD_ERROR, position, "")


def _index_of(table: TableDef, name: str) -> int:
    for i, col in enumerate(table.columns):
        if col.name.lower() == name.lower():
            return i
    raise sql_error(ER.BAD_FIELD_ERROR, name, "")


def apply_alter(table: TableDef, actions: list[AlterAction]) -> tuple[TableDef, dict[str, str]]:
    """Fold ALTER actions into a new definition; returns it and the column renames
    (old name → new name) needed to copy the rows."""
    renames: dict[str, str] = {c.name: c.name for c in table.columns}
    for action in actions:
        if isinstance(action, AddColumn):
            if table.column(action.column.name) is not None:
                raise sql_error(ER.DUP_FIELDNAME, action.column.name)
            columns = _place(list(table.columns), action.column, action.position)
            table = replace(table, columns=tuple(columns))
            for key in action.inline_keys:
                table = _add_index(table, key)
        elif isinstance(action, DropColumn):
            col = table.column(action.name)
            if col is None:
                raise sql_error(ER.CANT_DROP_FIELD_OR_KEY, action.name)
            table = _drop_column(table, col.name)
            renames = {k: v for k, v in renames.items() if v != col.name}
        elif isinstance(action, ChangeColumn):
            index = _index_of(table, action.old_name)
            old = table.columns[index]
            new = action.column
            if new.name.lower() != old.name.lower() and table.column(new.name) is not None:
                raise sql_error(ER.DUP_FIELDNAME, new.name)
            pk = table.primary_key
            if pk is not None and old.name in pk.columns:
                new = replace(new, nullable=False)
            columns = list(table.columns)
            if action.position is None:
                columns[index] = new
            else:
                del columns[index]
                columns = _place(columns, new, action.position)
            table = _rename_in_keys(replace(table, columns=tuple(columns)), old.name, new.name)
            renames = {k: (new.name if v == old.name else v) for k, v in renames.items()}
            for key in action.inline_keys:
                table = _add_index(table, key)
        elif isinstance(action, RenameColumn):
            index = _index_of(table, action.old_name)
            old = table.columns[index]
            if table.column(action.new_name) is not None:
                raise sql_error(ER.DUP_FIELDNAME, action.new_name)
            columns = list(table.columns)
            columns[index] = replace(old, name=action.new_name)
            table = _rename_in_keys(
                replace(table, columns=tuple(columns)), old.name, action.new_name
            )
            renames = {k: (action.new_name if v == old.name else v) for k, v in renames.items()}
        elif isinstance(action, AlterDefault):
            index = _index_of(table, action.name)
            columns = list(table.columns)
            col = columns[index]
            default = (
                None if action.default is None else _normalise_default(col.type, action.default)
            )
            columns[index] = replace(col, default=default)
            table = replace(table, columns=tuple(columns))
        elif isinstance(action, AddIndex):
            table = _add_index(table, action.index)
        elif isinstance(action, DropIndex):
            kept = tuple(i for i in table.indexes if i.name.lower() != action.name.lower())
            if len(kept) == len(table.indexes):
                raise sql_error(ER.CANT_DROP_FIELD_OR_KEY, action.name)
            table = replace(table, indexes=kept)
        elif isinstance(action, RenameIndex):
            found = False
            indexes = []
            for existing in table.indexes:
                if existing.name.lower() == action.old_name.lower():
                    existing = replace(existing, name=action.new_name)  # noqa: PLW2901
                    found = True
                indexes.append(existing)
            if not found:
                raise sql_error(ER.KEY_DOES_NOT_EXITS, action.old_name, table.name)
            table = replace(table, indexes=tuple(indexes))
        elif isinstance(action, AddForeignKey):
            table = _add_foreign_key(table, action.key)
        elif isinstance(action, DropForeignKey):
            kept_fks = tuple(k for k in table.foreign_keys if k.name != action.name)
            if len(kept_fks) == len(table.foreign_keys):
                raise sql_error(ER.CANT_DROP_FIELD_OR_KEY, action.name)
            table = replace(table, foreign_keys=kept_fks)
        elif isinstance(action, RenameTable):
            table = replace(table, schema=action.schema or table.schema, name=action.name)
        elif isinstance(action, TableOptions):
            table = _apply_options(table, dict(action.options))
    if not table.columns:
        raise sql_error(ER.CANT_REMOVE_ALL_FIELDS)
    _check_auto_increment(table)
    return table, renames


def _apply_options(table: TableDef, options: dict[str, str]) -> TableDef:
    if "ENGINE" in options:
        table = replace(table, engine=_engine(options["ENGINE"]))
    if "COMMENT" in options:
        table = replace(table, comment=options["COMMENT"])
    if "CHARSET" in options:
        charset = options["CHARSET"].lower()
        table = replace(
            table,
            charset=charset,
            collation=options.get(
                "COLLATE", "utf8mb4_0900_ai_ci" if charset == "utf8mb4" else f"{charset}_general_ci"
            ).lower(),
        )
    elif "COLLATE" in options:
        table = replace(table, collation=options["COLLATE"].lower())
    if "AUTO_INCREMENT" in options and options["AUTO_INCREMENT"].isdigit():
        table = replace(table, auto_increment=int(options["AUTO_INCREMENT"]))
    return table


def _drop_column(table: TableDef, name: str) -> TableDef:
    columns = tuple(c for c in table.columns if c.name != name)
    indexes: list[IndexDef] = []
    for index in table.indexes:
        parts = tuple(p for p in index.columns if p != name)
        if parts:
            indexes.append(replace(index, columns=parts))
    fks = tuple(k for k in table.foreign_keys if name not in k.columns)
    return replace(table, columns=columns, indexes=tuple(indexes), foreign_keys=fks)


def _rename_in_keys(table: TableDef, old: str, new: str) -> TableDef:
    if old == new:
        return table
    indexes = tuple(
        replace(i, columns=tuple(new if c == old else c for c in i.columns)) for i in table.indexes
    )
    fks = tuple(
        replace(k, columns=tuple(new if c == old else c for c in k.columns))
        for k in table.foreign_keys
    )
    return replace(table, indexes=indexes, foreign_keys=fks)


def check_error(error: SqlError) -> SqlError:
    """Identity; keeps the import of :class:`SqlError` meaningful for type checkers."""
    return error
