"""The data dictionary: databases, tables, columns and keys, as MySQL describes them.

SQLite stores the rows; this catalog remembers what MySQL would (exact column types, keys,
defaults, AUTO_INCREMENT, comments) so that ``SHOW CREATE TABLE``, ``DESCRIBE``,
``information_schema`` and result-set metadata say what mysqld says.  Base tables live in the
server's :class:`Catalog`; temporary tables in the session that created them.

Every MySQL table ``db.t`` is the SQLite table ``"db.t"`` (temporary tables in SQLite's
``temp`` schema under the same name, so they shadow base tables as in MySQL).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from consistent.emulator.results import Column
from consistent.emulator.sql.types import Family, TypeSpec
from consistent.protocol.constants import ColumnFlag

__all__ = [
    "SYSTEM_SCHEMAS",
    "Catalog",
    "ColumnDef",
    "Database",
    "ForeignKeyDef",
    "IndexDef",
    "TableDef",
    "quote_ident",
    "quote_mysql",
    "sqlite_index_name",
    "sqlite_name",
]

#: Schemas every MySQL 8.0 server shows; the first three are virtual here.
SYSTEM_SCHEMAS: Final = ("information_schema", "performance_schema", "sys", "mysql")
DEFAULT_COLLATION: Final = "utf8mb4_0900_ai_ci"


def sqlite_name(schema: str, table: str) -> str:
    """The SQLite table name of ``schema.table``."""
    return f"{schema}.{table}"


def sqlite_index_name(schema: str, table: str, index: str) -> str:
    """The SQLite index name of key ``index`` of ``schema.table``."""
    return f"{schema}.{table}${index}"


def quote_ident(name: str) -> str:
    """An SQLite (ANSI) quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def quote_mysql(name: str) -> str:
    """A MySQL backtick-quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def _quote_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True)
class ColumnDef:
    """One column of a table."""

    name: str
    type: TypeSpec
    nullable: bool = True
    default: str | None = None
    """The default as SQL text (``'x'``, ``0``, ``NULL``, ``CURRENT_TIMESTAMP``), or None."""
    auto_increment: bool = False
    on_update_now: bool = False
    comment: str = ""

    @property
    def default_is_now(self) -> bool:
        """Whether the default is ``CURRENT_TIMESTAMP`` (any precision)."""
        return self.default is not None and self.default.upper().startswith("CURRENT_TIMESTAMP")

    def sql(self, table_charset: str) -> str:
        """The column line of SHOW CREATE TABLE."""
        parts = [quote_mysql(self.name), self.type.sql()]
        spec = self.type
        if spec.family in (Family.TEXT, Family.ENUM, Family.SET):
            if spec.charset and spec.charset != table_charset:
                parts.append(f"CHARACTER SET {spec.charset}")
            if spec.collation and spec.collation != DEFAULT_COLLATION:
                parts.append(f"COLLATE {spec.collation}")
        if not self.nullable:
            parts.append("NOT NULL")
        elif spec.name == "timestamp":
            parts.append("NULL")
        if self.default is not None:
            parts.append(f"DEFAULT {self.default}")
        elif self.nullable and not self.auto_increment and not spec.info.blob:
            parts.append("DEFAULT NULL")
        if self.on_update_now:
            fsp = f"({spec.scale})" if spec.scale else ""
            parts.append(f"ON UPDATE CURRENT_TIMESTAMP{fsp}")
        if self.auto_increment:
            parts.append("AUTO_INCREMENT")
        if self.comment:
            parts.append(f"COMMENT {_quote_string(self.comment)}")
        return " ".join(parts)


@dataclass(frozen=True)
class IndexDef:
    """A key: PRIMARY, UNIQUE or plain."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False
    primary: bool = False

    def sql(self) -> str:
        """The key line of SHOW CREATE TABLE."""
        cols = ",".join(quote_mysql(c) for c in self.columns)
        if self.primary:
            return f"PRIMARY KEY ({cols})"
        kind = "UNIQUE KEY" if self.unique else "KEY"
        return f"{kind} {quote_mysql(self.name)} ({cols})"


@dataclass(frozen=True)
class ForeignKeyDef:
    """A FOREIGN KEY constraint."""

    name: str
    columns: tuple[str, ...]
    ref_schema: str
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = ""
    on_update: str = ""

    def sql(self, own_schema: str) -> str:
        """The constraint line of SHOW CREATE TABLE."""
        cols = ",".join(quote_mysql(c) for c in self.columns)
        refs = ",".join(quote_mysql(c) for c in self.ref_columns)
        target = quote_mysql(self.ref_table)
        if self.ref_schema != own_schema:
            target = quote_mysql(self.ref_schema) + "." + target
        text = (
            f"CONSTRAINT {quote_mysql(self.name)} FOREIGN KEY ({cols}) REFERENCES {target} ({refs})"
        )
        if self.on_delete:
            text += f" ON DELETE {self.on_delete}"
        if self.on_update:
            text += f" ON UPDATE {self.on_update}"
        return text

    def sqlite_clause(self) -> str:
        """The FOREIGN KEY clause of the SQLite table."""
        cols = ", ".join(quote_ident(c) for c in self.columns)
        refs = ", ".join(quote_ident(c) for c in self.ref_columns)
        target = quote_ident(sqlite_name(self.ref_schema, self.ref_table))
        text = f"FOREIGN KEY ({cols}) REFERENCES {target} ({refs})"
        if self.on_delete:
            text += f" ON DELETE {self.on_delete}"
        if self.on_update:
            text += f" ON UPDATE {self.on_update}"
        return text


@dataclass(frozen=True)
class TableDef:
    """A table as the data dictionary records it."""

    schema: str
    name: str
    columns: tuple[ColumnDef, ...]
    indexes: tuple[IndexDef, ...] = ()
    engine: str = "InnoDB"
    charset: str = "utf8mb4"
    collation: str = DEFAULT_COLLATION
    comment: str = ""
    temporary: bool = False
    auto_increment: int | None = None
    """AUTO_INCREMENT= table option given at creation (the first value)."""
    foreign_keys: tuple[ForeignKeyDef, ...] = ()

    @property
    def sqlite(self) -> str:
        """The SQLite table name, quoted."""
        return quote_ident(sqlite_name(self.schema, self.name))

    def column(self, name: str) -> ColumnDef | None:
        """The column named ``name`` (case-insensitive, as MySQL column names are)."""
        lower = name.lower()
        for col in self.columns:
            if col.name.lower() == lower:
                return col
        return None

    @property
    def primary_key(self) -> IndexDef | None:
        """The PRIMARY KEY, if any."""
        for index in self.indexes:
            if index.primary:
                return index
        return None

    @property
    def auto_column(self) -> ColumnDef | None:
        """The AUTO_INCREMENT column, if any."""
        for col in self.columns:
            if col.auto_increment:
                return col
        return None

    def rowid_alias(self) -> bool:
        """Whether the primary key is one integer column SQLite can use as its rowid."""
        pk = self.primary_key
        if pk is None or len(pk.columns) != 1:
            return False
        col = self.column(pk.columns[0])
        return col is not None and col.type.family is Family.INT and col.auto_increment

    def sorted_indexes(self) -> list[IndexDef]:
        """Keys in SHOW CREATE TABLE order: primary, unique, then the others."""
        return sorted(self.indexes, key=lambda i: (not i.primary, not i.unique))

    def show_create(self, next_auto_increment: int | None) -> str:
        """The text of SHOW CREATE TABLE."""
        lines = [col.sql(self.charset) for col in self.columns]
        lines += [index.sql() for index in self.sorted_indexes()]
        lines += [fk.sql(self.schema) for fk in self.foreign_keys]
        head = "CREATE TEMPORARY TABLE" if self.temporary else "CREATE TABLE"
        body = ",\n  ".join(lines)
        options = f"ENGINE={self.engine}"
        if next_auto_increment is not None and next_auto_increment > 1:
            options += f" AUTO_INCREMENT={next_auto_increment}"
        options += f" DEFAULT CHARSET={self.charset}"
        options += f" COLLATE={self.collation}"
        if self.comment:
            options += f" COMMENT={_quote_string(self.comment)}"
        return f"{head} {quote_mysql(self.name)} (\n  {body}\n) {options}"

    def create_sql(self, sqlite_table: str | None = None) -> str:
        """CREATE TABLE for SQLite (named ``sqlite_table`` when given, e.g. for a rebuild)."""
        defs: list[str] = []
        pk = self.primary_key
        alias = self.rowid_alias()
        for col in self.columns:
            parts = [quote_ident(col.name), col.type.sqlite_type]
            if alias and pk is not None and col.name == pk.columns[0]:
                parts.append("PRIMARY KEY AUTOINCREMENT")
            in_pk = pk is not None and col.name in pk.columns
            if not col.nullable or in_pk:
                parts.append("NOT NULL")
            if col.default is not None and not col.default_is_now:
                parts.append(f"DEFAULT {_sqlite_default(col)}")
            if col.type.family in (Family.TEXT, Family.ENUM, Family.SET) and _is_ci(col, self):
                parts.append("COLLATE NOCASE")
            defs.append(" ".join(parts))
        if pk is not None and not alias:
            defs.append("PRIMARY KEY (" + ", ".join(quote_ident(c) for c in pk.columns) + ")")
        defs.extend(fk.sqlite_clause() for fk in self.foreign_keys)
        defs.extend(check for col in self.columns for check in _checks(col))
        name = quote_ident(sqlite_table) if sqlite_table is not None else self.sqlite
        temp = "TEMP " if self.temporary else ""
        return f"CREATE {temp}TABLE {name} (" + ", ".join(defs) + ") STRICT"

    def index_sqls(self) -> list[str]:
        """CREATE INDEX for every secondary key."""
        return [self.index_ddl(index) for index in self.indexes if not index.primary]

    def sqlite_ddl(self) -> list[str]:
        """CREATE TABLE and CREATE INDEX statements for SQLite, plus the AUTO_INCREMENT start."""
        statements = [self.create_sql(), *self.index_sqls()]
        if self.auto_increment is not None and self.auto_increment > 1 and self.rowid_alias():
            schema = "temp." if self.temporary else ""
            statements.append(
                f"INSERT INTO {schema}sqlite_sequence (name, seq) VALUES ("
                + _quote_string(sqlite_name(self.schema, self.name))
                + f", {self.auto_increment - 1})"
            )
        return statements

    def index_ddl(self, index: IndexDef) -> str:
        """CREATE INDEX for one key."""
        name = sqlite_index_name(self.schema, self.name, index.name)
        name = ("temp." if self.temporary else "") + quote_ident(name)
        unique = "UNIQUE " if index.unique else ""
        cols = ", ".join(quote_ident(c) for c in index.columns)
        return f"CREATE {unique}INDEX {name} ON {self.sqlite} ({cols})"

    def column_flags(self, col: ColumnDef) -> ColumnFlag:
        """Protocol flags of ``col`` (type flags plus nullability, keys, auto-increment)."""
        flags = col.type.base_flags()
        if not col.nullable:
            flags |= ColumnFlag.NOT_NULL
        for index in self.indexes:
            if col.name not in index.columns:
                continue
            flags |= ColumnFlag.PART_KEY
            if index.primary:
                flags |= ColumnFlag.PRI_KEY | ColumnFlag.NOT_NULL
            elif index.unique:
                flags |= ColumnFlag.UNIQUE_KEY
            elif index.columns[0] == col.name:
                flags |= ColumnFlag.MULTIPLE_KEY
        if col.auto_increment:
            flags |= ColumnFlag.AUTO_INCREMENT
        if col.on_update_now:
            flags |= ColumnFlag.ON_UPDATE_NOW
        if not col.nullable and col.default is None and not col.auto_increment:
            flags |= ColumnFlag.NO_DEFAULT_VALUE
        return flags

    def result_column(self, col: ColumnDef, label: str, table_alias: str) -> Column:
        """The column definition of ``col`` in a result set."""
        return Column(
            name=label,
            type=col.type.info.column_type,
            length=col.type.display_length(),
            flags=self.column_flags(col),
            decimals=col.type.decimals(),
            charset=col.type.charset_id(),
            table=table_alias,
            org_table=self.name,
            schema=self.schema,
            org_name=col.name,
        )

    def with_columns(self, columns: tuple[ColumnDef, ...]) -> TableDef:
        """A copy with other columns."""
        return replace(self, columns=columns)


_INT_RANGES: Final = {
    "tinyint": 8,
    "smallint": 16,
    "mediumint": 24,
    "int": 32,
    "bigint": 64,
}


def _checks(col: ColumnDef) -> list[str]:
    """CHECK constraints that make SQLite refuse what strict-mode MySQL refuses: too long
    strings (1406), out-of-range integers (1264) and values outside an ENUM (1265).  Their
    names (``chk$kind$column``) let the error mapper name the column."""
    name = quote_ident(col.name)
    spec = col.type
    checks: list[str] = []
    if spec.name in ("char", "varchar", "binary", "varbinary") and spec.length is not None:
        checks.append(
            f"CONSTRAINT {quote_ident('chk$len$' + col.name)} CHECK (length({name}) <= "
            f"{spec.length})"
        )
    bits = _INT_RANGES.get(spec.name)
    if bits is not None and not (bits == 64 and spec.unsigned):
        low, high = (0, 2**bits - 1) if spec.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        checks.append(
            f"CONSTRAINT {quote_ident('chk$range$' + col.name)} CHECK ({name} BETWEEN {low} AND "
            f"{high})"
        )
    elif bits == 64 and spec.unsigned:
        checks.append(f"CONSTRAINT {quote_ident('chk$range$' + col.name)} CHECK ({name} >= 0)")
    if spec.family is Family.ENUM:
        allowed = ", ".join(_quote_string(v) for v in spec.values)
        checks.append(
            f"CONSTRAINT {quote_ident('chk$enum$' + col.name)} CHECK ({name} COLLATE NOCASE IN "
            f"({allowed}))"
        )
    return checks


def _is_ci(col: ColumnDef, table: TableDef) -> bool:
    collation = col.type.collation or table.collation
    return collation.endswith("_ci")


def _sqlite_default(col: ColumnDef) -> str:
    text = col.default or "NULL"
    if text.startswith("(") and text.endswith(")"):
        return text
    if text.upper() in ("TRUE", "FALSE"):
        return "1" if text.upper() == "TRUE" else "0"
    if (
        col.type.family
        in (
            Family.TEXT,
            Family.ENUM,
            Family.SET,
            Family.DATE,
            Family.DATETIME,
            Family.TIME,
            Family.JSON,
        )
        and not text.startswith("'")
        and text != "NULL"
    ):
        return _quote_string(text)
    if text.startswith("'") and col.type.family in (
        Family.INT,
        Family.DECIMAL,
        Family.FLOAT,
        Family.YEAR,
        Family.BIT,
    ):
        inner = text[1:-1]
        return inner if _is_number(inner) else text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class Database:
    """A schema and its base tables."""

    name: str
    charset: str = "utf8mb4"
    collation: str = DEFAULT_COLLATION
    tables: dict[str, TableDef] = field(default_factory=dict)


class Catalog:
    """Every database of one server and their base tables (names are case-sensitive, as
    with ``lower_case_table_names=0``)."""

    def __init__(self) -> None:
        self.databases: dict[str, Database] = {}

    def database(self, name: str) -> Database | None:
        """The database named ``name``."""
        return self.databases.get(name)

    def add_database(self, database: Database) -> None:
        """Register a new database."""
        self.databases[database.name] = database

    def drop_database(self, name: str) -> Database | None:
        """Forget a database; returns it."""
        return self.databases.pop(name, None)

    def table(self, schema: str, name: str) -> TableDef | None:
        """The base table ``schema.name``."""
        database = self.databases.get(schema)
        if database is None:
            return None
        return database.tables.get(name)

    def put_table(self, table: TableDef) -> None:
        """Add or replace a base table definition."""
        self.databases[table.schema].tables[table.name] = table

    def remove_table(self, schema: str, name: str) -> None:
        """Forget a base table."""
        database = self.databases.get(schema)
        if database is not None:
            database.tables.pop(name, None)
