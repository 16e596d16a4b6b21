"""Virtual tables: ``information_schema``, ``performance_schema`` and friends.

A query that names a virtual table gets a fresh snapshot of it, materialised as a SQLite
temporary table of the session, so any SQL (joins, filters, aggregates) works on it.  The
server keeps the registry (:attr:`EmulatedServer.virtual_tables`) so that other parts of the
emulator, such as replication, can add their own ``performance_schema`` tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from consistent.emulator.gtid_table import COMPRESSOR_THREAD_NAME
from consistent.emulator.sql.catalog import ColumnDef, TableDef, quote_ident, sqlite_name
from consistent.emulator.sql.types import Family, TypeSpec
from consistent.emulator.sysvars import CHARSETS, COLLATIONS
from consistent.emulator.variables import SYSTEM_VARIABLES, value_text

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = [
    "VirtualTable",
    "column_default",
    "column_extra",
    "column_key",
    "default_virtual_tables",
    "materialize",
    "processlist_rows",
    "status_rows",
    "virtual_columns",
]

Row = tuple[object, ...]
Rows = Callable[["Session"], Sequence[Row]]


@dataclass(frozen=True)
class VirtualTable:
    """A table computed on demand: its definition and a function producing its rows."""

    table: TableDef
    rows: Rows


_TYPES: Final = {
    "s": TypeSpec("varchar", 64, charset="utf8mb3"),
    "l": TypeSpec("longtext", charset="utf8mb3"),
    "i": TypeSpec("bigint", unsigned=True),
    "n": TypeSpec("bigint"),
    "d": TypeSpec("datetime"),
    "t": TypeSpec("timestamp", scale=6),
}


def virtual_columns(spec: str) -> tuple[ColumnDef, ...]:
    """Columns from ``"NAME:type, …"`` where type is s (varchar), l (longtext), i (bigint
    unsigned), n (bigint), d (datetime) or t (timestamp(6))."""
    columns = []
    for item in spec.split(","):
        name, _, kind = item.strip().partition(":")
        columns.append(ColumnDef(name, _TYPES[kind or "s"]))
    return tuple(columns)


def _vt(schema: str, name: str, spec: str, rows: Rows) -> VirtualTable:
    return VirtualTable(
        TableDef(
            schema,
            name,
            virtual_columns(spec),
            temporary=True,
            engine="MEMORY",
            charset="utf8mb3",
            collation="utf8mb3_general_ci",
        ),
        rows,
    )


def _base_tables(session: Session) -> list[TableDef]:
    tables: list[TableDef] = []
    for database in session.server.catalog.databases.values():
        tables.extend(database.tables.values())
    return tables


def _schemata(session: Session) -> list[Row]:
    rows: list[Row] = [
        ("def", "information_schema", "utf8mb3", "utf8mb3_general_ci", None, "NO"),
        ("def", "performance_schema", "utf8mb4", "utf8mb4_0900_ai_ci", None, "NO"),
    ]
    for db in session.server.catalog.databases.values():
        rows.append(("def", db.name, db.charset, db.collation, None, "NO"))
    return rows


def _tables(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        rows.append(
            (
                "def",
                table.schema,
                table.name,
                "BASE TABLE",
                table.engine,
                10,
                "Dynamic",
                0,
                0,
                16384,
                0,
                0,
                0,
                None,
                None,
                None,
                None,
                table.collation,
                None,
                "",
                table.comment,
            )
        )
    for (schema, name), vt in session.server.virtual_tables.items():
        rows.append(
            (
                "def",
                vt.table.schema,
                vt.table.name,
                "SYSTEM VIEW",
                None,
                10,
                None,
                0,
                0,
                0,
                0,
                0,
                0,
                None,
                None,
                None,
                None,
                None,
                None,
                "",
                "",
            )
        )
        del schema, name
    return rows


def column_default(col: ColumnDef) -> object:
    """The Default column of SHOW COLUMNS / information_schema.COLUMNS: the literal unquoted,
    ``NULL`` as None."""
    default = col.default
    if default is None or default == "NULL":
        return None
    if default.startswith("'") and default.endswith("'"):
        return default[1:-1].replace("''", "'")
    return default


def column_key(table: TableDef, name: str) -> str:
    """The Key column of SHOW COLUMNS / information_schema.COLUMNS: ``PRI``, ``UNI`` or
    ``MUL`` after the first index that starts with the column, else empty."""
    for index in table.sorted_indexes():
        if index.columns[0] != name:
            continue
        if index.primary:
            return "PRI"
        if index.unique and len(index.columns) == 1:
            return "UNI"
        return "MUL"
    return ""


def column_extra(col: ColumnDef) -> str:
    """The Extra column of SHOW COLUMNS / information_schema.COLUMNS."""
    parts = []
    if col.auto_increment:
        parts.append("auto_increment")
    if col.default_is_now:
        parts.append("DEFAULT_GENERATED")
    if col.on_update_now:
        fsp = f"({col.type.scale})" if col.type.scale else ""
        parts.append(f"on update CURRENT_TIMESTAMP{fsp}")
    return " ".join(parts)


def _numeric_precision(spec: TypeSpec) -> tuple[object, object]:
    family = spec.family
    if family is Family.INT:
        digits = {"tinyint": 3, "smallint": 5, "mediumint": 7, "int": 10, "bigint": 19}[spec.name]
        if spec.name == "bigint" and spec.unsigned:
            digits = 20
        return digits, 0
    if family is Family.DECIMAL:
        return spec.length, spec.scale
    if family is Family.FLOAT:
        return (12 if spec.name == "float" else 22), None
    return None, None


def _columns(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        for position, col in enumerate(table.columns, 1):
            spec = col.type
            text = spec.family in (Family.TEXT, Family.ENUM, Family.SET)
            chars: object = None
            octets: object = None
            if text or spec.family is Family.BINARY:
                chars = (spec.length if not spec.info.blob else spec.info.length) or 1
                if spec.family in (Family.ENUM, Family.SET):
                    chars = spec.display_length() // 4
                octets = chars * (4 if text else 1) if isinstance(chars, int) else None
            precision, scale = _numeric_precision(spec)
            dt_precision = (
                spec.scale or 0 if spec.family in (Family.DATETIME, Family.TIME) else None
            )
            rows.append(
                (
                    "def",
                    table.schema,
                    table.name,
                    col.name,
                    position,
                    column_default(col),
                    "YES" if col.nullable else "NO",
                    spec.name,
                    chars,
                    octets,
                    precision,
                    scale,
                    dt_precision,
                    (spec.charset or table.charset) if text else None,
                    (spec.collation or table.collation) if text else None,
                    spec.sql(),
                    column_key(table, col.name),
                    column_extra(col),
                    "select,insert,update,references",
                    col.comment,
                    "",
                    None,
                )
            )
    return rows


def _statistics(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        for index in table.sorted_indexes():
            for seq, name in enumerate(index.columns, 1):
                col = table.column(name)
                nullable = "YES" if col is not None and col.nullable else ""
                rows.append(
                    (
                        "def",
                        table.schema,
                        table.name,
                        0 if index.unique else 1,
                        table.schema,
                        index.name,
                        seq,
                        name,
                        "A",
                        0,
                        None,
                        None,
                        nullable,
                        "BTREE",
                        "",
                        "",
                        "YES",
                        None,
                    )
                )
    return rows


def _key_column_usage(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        for index in table.indexes:
            if not index.unique:
                continue
            for seq, name in enumerate(index.columns, 1):
                rows.append(
                    (
                        "def",
                        table.schema,
                        index.name,
                        "def",
                        table.schema,
                        table.name,
                        name,
                        seq,
                        None,
                        None,
                        None,
                        None,
                    )
                )
        for key in table.foreign_keys:
            for seq, (name, ref) in enumerate(zip(key.columns, key.ref_columns, strict=False), 1):
                rows.append(
                    (
                        "def",
                        table.schema,
                        key.name,
                        "def",
                        table.schema,
                        table.name,
                        name,
                        seq,
                        seq,
                        key.ref_schema,
                        key.ref_table,
                        ref,
                    )
                )
    return rows


def _table_constraints(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        for index in table.indexes:
            if index.unique:
                kind = "PRIMARY KEY" if index.primary else "UNIQUE"
                rows.append(
                    ("def", table.schema, index.name, table.schema, table.name, kind, "YES")
                )
        for key in table.foreign_keys:
            rows.append(
                ("def", table.schema, key.name, table.schema, table.name, "FOREIGN KEY", "YES")
            )
    return rows


def _referential(session: Session) -> list[Row]:
    rows: list[Row] = []
    for table in _base_tables(session):
        for key in table.foreign_keys:
            rows.append(
                (
                    "def",
                    table.schema,
                    key.name,
                    "def",
                    key.ref_schema,
                    "PRIMARY",
                    "NONE",
                    key.on_update or "NO ACTION",
                    key.on_delete or "NO ACTION",
                    table.name,
                    key.ref_table,
                )
            )
    return rows


def processlist_rows(session: Session) -> list[Row]:
    """One row a session (Id, User, Host, db, Command, Time, State, Info): the rows of SHOW
    PROCESSLIST and information_schema.PROCESSLIST."""
    now = session.server.clock()
    return [
        (
            s.connection_id,
            s.user,
            s.host,
            s.database,
            s.command,
            int(now - s.connected_at),
            "executing" if s.running else "",
            s.running,
        )
        for s in session.server.sessions.values()
    ]


def _threads(session: Session) -> list[Row]:
    server = session.server
    rows: list[Row] = []
    compressor = server.compressor
    if compressor.running:
        rows.append(
            (
                compressor.thread_id,
                COMPRESSOR_THREAD_NAME,
                "BACKGROUND",
                None,
                None,
                None,
                None,
                "Daemon",
                None,
                compressor.stage,
                None,
                None,
                None,
                "YES",
                "YES",
                None,
                None,
                "SYS_default",
            )
        )
    now = server.clock()
    for s in server.sessions.values():
        rows.append(
            (
                s.connection_id + 1000,
                "thread/sql/one_connection",
                "FOREGROUND",
                s.connection_id,
                s.user,
                s.host,
                s.database,
                s.command,
                int(now - s.connected_at),
                "executing" if s.running else None,
                s.running,
                1,
                None,
                "YES",
                "YES",
                "TCP/IP",
                None,
                "USR_default",
            )
        )
    return rows


def _variables(global_scope: bool) -> Rows:
    def rows(session: Session) -> list[Row]:
        out: list[Row] = []
        for name, var in sorted(SYSTEM_VARIABLES.items()):
            if global_scope and not var.has_global:
                continue
            value = session.get_variable(name, global_scope=global_scope or not var.has_session)
            out.append((name, value_text(var, value)))
        return out

    return rows


def status_rows(session: Session) -> list[tuple[str, str]]:
    """Status variables (a small, honest subset)."""
    server = session.server
    return [
        ("Aborted_clients", "0"),
        ("Com_commit", "0"),
        ("Queries", str(server.queries)),
        ("Questions", str(server.queries)),
        ("Threads_connected", str(len(server.sessions))),
        ("Threads_running", str(sum(1 for s in server.sessions.values() if s.running))),
        ("Uptime", str(int(server.uptime))),
    ]


def _status(session: Session) -> list[Row]:
    return [(name, value) for name, value in status_rows(session)]


def _connect_attrs(session: Session) -> list[Row]:
    return [
        (s.connection_id, key, value, position)
        for s in session.server.sessions.values()
        for position, (key, value) in enumerate(s.connect_attrs.items())
    ]


def _empty(session: Session) -> list[Row]:
    return []


IS: Final = "information_schema"
PS: Final = "performance_schema"


def default_virtual_tables() -> dict[tuple[str, str], VirtualTable]:
    """The virtual tables every emulated server starts with."""
    tables = [
        _vt(
            IS,
            "SCHEMATA",
            "CATALOG_NAME,SCHEMA_NAME,DEFAULT_CHARACTER_SET_NAME,"
            "DEFAULT_COLLATION_NAME,SQL_PATH,DEFAULT_ENCRYPTION",
            _schemata,
        ),
        _vt(
            IS,
            "TABLES",
            "TABLE_CATALOG,TABLE_SCHEMA,TABLE_NAME,TABLE_TYPE,ENGINE,VERSION:i,"
            "ROW_FORMAT,TABLE_ROWS:i,AVG_ROW_LENGTH:i,DATA_LENGTH:i,MAX_DATA_LENGTH:i,"
            "INDEX_LENGTH:i,DATA_FREE:i,AUTO_INCREMENT:i,CREATE_TIME:d,UPDATE_TIME:d,"
            "CHECK_TIME:d,TABLE_COLLATION,CHECKSUM:n,CREATE_OPTIONS,TABLE_COMMENT:l",
            _tables,
        ),
        _vt(
            IS,
            "COLUMNS",
            "TABLE_CATALOG,TABLE_SCHEMA,TABLE_NAME,COLUMN_NAME,ORDINAL_POSITION:i,"
            "COLUMN_DEFAULT:l,IS_NULLABLE,DATA_TYPE:l,CHARACTER_MAXIMUM_LENGTH:n,"
            "CHARACTER_OCTET_LENGTH:n,NUMERIC_PRECISION:i,NUMERIC_SCALE:i,DATETIME_PRECISION:i,"
            "CHARACTER_SET_NAME,COLLATION_NAME,COLUMN_TYPE:l,COLUMN_KEY,EXTRA,PRIVILEGES,"
            "COLUMN_COMMENT:l,GENERATION_EXPRESSION:l,SRS_ID:i",
            _columns,
        ),
        _vt(
            IS,
            "STATISTICS",
            "TABLE_CATALOG,TABLE_SCHEMA,TABLE_NAME,NON_UNIQUE:n,INDEX_SCHEMA,"
            "INDEX_NAME,SEQ_IN_INDEX:i,COLUMN_NAME,COLLATION,CARDINALITY:n,SUB_PART:n,PACKED,"
            "NULLABLE,INDEX_TYPE,COMMENT,INDEX_COMMENT,IS_VISIBLE,EXPRESSION:l",
            _statistics,
        ),
        _vt(
            IS,
            "KEY_COLUMN_USAGE",
            "CONSTRAINT_CATALOG,CONSTRAINT_SCHEMA,CONSTRAINT_NAME,"
            "TABLE_CATALOG,TABLE_SCHEMA,TABLE_NAME,COLUMN_NAME,ORDINAL_POSITION:i,"
            "POSITION_IN_UNIQUE_CONSTRAINT:i,REFERENCED_TABLE_SCHEMA,REFERENCED_TABLE_NAME,"
            "REFERENCED_COLUMN_NAME",
            _key_column_usage,
        ),
        _vt(
            IS,
            "TABLE_CONSTRAINTS",
            "CONSTRAINT_CATALOG,CONSTRAINT_SCHEMA,CONSTRAINT_NAME,"
            "TABLE_SCHEMA,TABLE_NAME,CONSTRAINT_TYPE,ENFORCED",
            _table_constraints,
        ),
        _vt(
            IS,
            "REFERENTIAL_CONSTRAINTS",
            "CONSTRAINT_CATALOG,CONSTRAINT_SCHEMA,CONSTRAINT_NAME,"
            "UNIQUE_CONSTRAINT_CATALOG,UNIQUE_CONSTRAINT_SCHEMA,UNIQUE_CONSTRAINT_NAME,"
            "MATCH_OPTION,UPDATE_RULE,DELETE_RULE,TABLE_NAME,REFERENCED_TABLE_NAME",
            _referential,
        ),
        _vt(
            IS,
            "CHECK_CONSTRAINTS",
            "CONSTRAINT_CATALOG,CONSTRAINT_SCHEMA,CONSTRAINT_NAME,CHECK_CLAUSE:l",
            _empty,
        ),
        _vt(
            IS,
            "VIEWS",
            "TABLE_CATALOG,TABLE_SCHEMA,TABLE_NAME,VIEW_DEFINITION:l,CHECK_OPTION,"
            "IS_UPDATABLE,DEFINER,SECURITY_TYPE,CHARACTER_SET_CLIENT,COLLATION_CONNECTION",
            _empty,
        ),
        _vt(
            IS,
            "ROUTINES",
            "SPECIFIC_NAME,ROUTINE_CATALOG,ROUTINE_SCHEMA,ROUTINE_NAME,"
            "ROUTINE_TYPE,DATA_TYPE,ROUTINE_DEFINITION:l",
            _empty,
        ),
        _vt(
            IS,
            "TRIGGERS",
            "TRIGGER_CATALOG,TRIGGER_SCHEMA,TRIGGER_NAME,EVENT_MANIPULATION,"
            "EVENT_OBJECT_SCHEMA,EVENT_OBJECT_TABLE,ACTION_STATEMENT:l",
            _empty,
        ),
        _vt(
            IS,
            "CHARACTER_SETS",
            "CHARACTER_SET_NAME,DEFAULT_COLLATE_NAME,DESCRIPTION,MAXLEN:i",
            lambda s: [(n, c, d, m) for n, (c, d, m) in CHARSETS.items() if n != "utf8"],
        ),
        _vt(
            IS,
            "COLLATIONS",
            "COLLATION_NAME,CHARACTER_SET_NAME,ID:i,IS_DEFAULT,IS_COMPILED,SORTLEN:i,PAD_ATTRIBUTE",
            lambda s: [
                (n, c, i, "Yes" if d else "", "Yes", 0, "NO PAD")
                for n, (c, i, d) in COLLATIONS.items()
            ],
        ),
        _vt(
            IS,
            "ENGINES",
            "ENGINE,SUPPORT,COMMENT,TRANSACTIONS,XA,SAVEPOINTS",
            lambda s: [
                (
                    "InnoDB",
                    "DEFAULT",
                    "Supports transactions, row-level locking, and foreign keys",
                    "YES",
                    "YES",
                    "YES",
                )
            ],
        ),
        _vt(IS, "PROCESSLIST", "ID:i,USER,HOST,DB,COMMAND,TIME:n,STATE,INFO:l", processlist_rows),
        _vt(
            PS,
            "threads",
            "THREAD_ID:i,NAME,TYPE,PROCESSLIST_ID:i,PROCESSLIST_USER,"
            "PROCESSLIST_HOST,PROCESSLIST_DB,PROCESSLIST_COMMAND,PROCESSLIST_TIME:n,"
            "PROCESSLIST_STATE,PROCESSLIST_INFO:l,PARENT_THREAD_ID:i,ROLE,INSTRUMENTED,HISTORY,"
            "CONNECTION_TYPE,THREAD_OS_ID:i,RESOURCE_GROUP",
            _threads,
        ),
        _vt(PS, "global_variables", "VARIABLE_NAME,VARIABLE_VALUE:l", _variables(True)),
        _vt(PS, "session_variables", "VARIABLE_NAME,VARIABLE_VALUE:l", _variables(False)),
        _vt(PS, "global_status", "VARIABLE_NAME,VARIABLE_VALUE:l", _status),
        _vt(PS, "session_status", "VARIABLE_NAME,VARIABLE_VALUE:l", _status),
        _vt(
            PS,
            "session_connect_attrs",
            "PROCESSLIST_ID:i,ATTR_NAME,ATTR_VALUE:l,ORDINAL_POSITION:i",
            _connect_attrs,
        ),
    ]
    return {(t.table.schema.lower(), t.table.name.lower()): t for t in tables}


def materialize(session: Session, schema: str, name: str) -> TableDef | None:
    """Snapshot a virtual table into the session's SQLite temp schema; None if unknown."""
    virtual = session.server.virtual_tables.get((schema.lower(), name.lower()))
    if virtual is None:
        return None
    table = virtual.table
    rows = list(virtual.rows(session))
    conn = session.store.conn
    qualified = "temp." + quote_ident(sqlite_name(table.schema, table.name))
    conn.execute(f"DROP TABLE IF EXISTS {qualified}")
    conn.execute(table.create_sql())
    if rows:
        marks = ", ".join("?" for _ in table.columns)
        conn.executemany(
            f"INSERT INTO {qualified} VALUES ({marks})",
            [tuple(_storable(v) for v in row) for row in rows],
        )
    return table


def _storable(value: object) -> object:
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    if isinstance(value, bool):
        return int(value)
    return str(value)
