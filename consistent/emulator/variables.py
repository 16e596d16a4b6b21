"""System variables of the emulated server: names, scopes, types, defaults, validation.

Each :class:`SysVar` says what ``SET`` accepts and how ``SELECT @@x`` / ``SHOW VARIABLES``
print the value, with mysqld's errors: 1193 unknown, 1228/1229 wrong scope, 1238 read-only,
1231 wrong value, 1232 wrong type.  Values are kept as Python objects (``bool``, ``int``,
``float``, ``str``); variables whose value lives elsewhere (``gtid_executed``, ``gtid_next``…)
are read through the session, see :mod:`consistent.emulator.session`.

https://dev.mysql.com/doc/refman/8.0/en/server-system-variables.html
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum, Flag
from types import MappingProxyType
from typing import Final

from consistent.emulator.errors import ER, SqlError, sql_error
from consistent.emulator.tracker import DEFAULT_TRACKED_VARIABLES

__all__ = [
    "SESSION_VARIABLES",
    "SYSTEM_VARIABLES",
    "Kind",
    "Scope",
    "SysVar",
    "lookup",
    "value_text",
]


class Scope(Flag):
    """Where a variable lives."""

    GLOBAL = 1
    SESSION = 2
    BOTH = 3


class Kind(Enum):
    """Value type of a variable."""

    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    ENUM = "enum"
    STR = "str"
    SET = "set"


SQL_MODES: Final = (
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "NOT_USED",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "ANSI",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "TRADITIONAL",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "TIME_TRUNCATE_FRACTIONAL",
)
DEFAULT_SQL_MODE: Final = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)
ISOLATION_LEVELS: Final = ("READ-UNCOMMITTED", "READ-COMMITTED", "REPEATABLE-READ", "SERIALIZABLE")
MAX_COMMIT_TIMESTAMP: Final = 1 << 55


@dataclass(frozen=True)
class SysVar:
    """One system variable's definition."""

    name: str
    scope: Scope
    kind: Kind
    default: object
    read_only: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    nullable: bool = False

    @property
    def has_session(self) -> bool:
        """Whether a session value exists."""
        return bool(self.scope & Scope.SESSION)

    @property
    def has_global(self) -> bool:
        """Whether a global value exists."""
        return bool(self.scope & Scope.GLOBAL)

    def coerce(self, value: object, warnings: list[tuple[int, str]] | None = None) -> object:
        """Validate ``value`` for SET; returns the stored form or raises 1231/1232."""
        if value is None:
            if self.nullable:
                return None
            raise sql_error(ER.WRONG_VALUE_FOR_VAR, self.name, "NULL")
        handler = _COERCERS[self.kind]
        return handler(self, value, warnings)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _coerce_bool(var: SysVar, value: object, _w: list[tuple[int, str]] | None) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value in (0, 1):
            return bool(value)
        raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, str(value))
    if isinstance(value, float | Decimal):
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    word = _text(value).strip().upper()
    if word in ("ON", "TRUE", "1"):
        return True
    if word in ("OFF", "FALSE", "0"):
        return False
    raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, _text(value))


def _coerce_int(var: SysVar, value: object, warnings: list[tuple[int, str]] | None) -> object:
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float | Decimal):
        number = round(value)
    else:
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    clamped = number
    if var.minimum is not None and clamped < var.minimum:
        clamped = var.minimum
    if var.maximum is not None and clamped > var.maximum:
        clamped = var.maximum
    if clamped != number and warnings is not None:
        warnings.append((int(ER.TRUNCATED_WRONG_VALUE), f"{var.name}:{number}"))
    return clamped


def _coerce_float(var: SysVar, value: object, _w: list[tuple[int, str]] | None) -> object:
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return float(value)
    raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)


def _coerce_enum(var: SysVar, value: object, _w: list[tuple[int, str]] | None) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(var.choices):
            return var.choices[value]
        raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, str(value))
    if isinstance(value, float | Decimal):
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    word = _text(value).strip().upper()
    for choice in var.choices:
        if choice.upper() == word:
            return choice
    raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, _text(value))


def _coerce_str(var: SysVar, value: object, _w: list[tuple[int, str]] | None) -> object:
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    return _text(value)


def _coerce_set(var: SysVar, value: object, _w: list[tuple[int, str]] | None) -> object:
    if isinstance(value, float | Decimal):
        raise sql_error(ER.WRONG_TYPE_FOR_VAR, var.name)
    if isinstance(value, int) and not isinstance(value, bool):
        words = [c for i, c in enumerate(var.choices) if value >> i & 1]
        if value >> len(var.choices):
            raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, str(value))
        return ",".join(words)
    items = [w.strip().upper() for w in _text(value).split(",") if w.strip()]
    for item in items:
        if item not in var.choices:
            raise sql_error(ER.WRONG_VALUE_FOR_VAR, var.name, _text(value))
    return ",".join(c for c in var.choices if c in items)


_COERCERS = {
    Kind.BOOL: _coerce_bool,
    Kind.INT: _coerce_int,
    Kind.FLOAT: _coerce_float,
    Kind.ENUM: _coerce_enum,
    Kind.STR: _coerce_str,
    Kind.SET: _coerce_set,
}


def value_text(var: SysVar, value: object) -> str:
    """The value as SHOW VARIABLES and the system-variable tracker print it."""
    if value is None:
        return ""
    if var.kind is Kind.BOOL:
        return "ON" if value else "OFF"
    if var.kind is Kind.FLOAT and isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def select_value(var: SysVar, value: object) -> object:
    """The value as ``SELECT @@x`` returns it (booleans are integers)."""
    if var.kind is Kind.BOOL and value is not None:
        return 1 if value else 0
    return value


B = Scope.BOTH
G = Scope.GLOBAL
S = Scope.SESSION
UINT32 = 2**32 - 1
UINT64 = 2**64 - 1


def _v(
    name: str,
    scope: Scope,
    kind: Kind,
    default: object,
    *,
    ro: bool = False,
    choices: Iterable[str] = (),
    lo: int | None = None,
    hi: int | None = None,
    nullable: bool = False,
) -> SysVar:
    return SysVar(name, scope, kind, default, ro, tuple(choices), lo, hi, nullable)


_DEFINITIONS: Final = (
    _v("auto_increment_increment", B, Kind.INT, 1, lo=1, hi=65535),
    _v("auto_increment_offset", B, Kind.INT, 1, lo=1, hi=65535),
    _v("autocommit", B, Kind.BOOL, True),
    _v("basedir", G, Kind.STR, "/usr/", ro=True),
    _v("big_tables", B, Kind.BOOL, False),
    _v("binlog_checksum", G, Kind.ENUM, "CRC32", choices=("NONE", "CRC32")),
    _v("binlog_format", B, Kind.ENUM, "ROW", choices=("MIXED", "STATEMENT", "ROW")),
    _v("binlog_row_image", B, Kind.ENUM, "FULL", choices=("MINIMAL", "NOBLOB", "FULL")),
    _v("binlog_expire_logs_seconds", G, Kind.INT, 2592000, lo=0, hi=UINT32),
    _v("character_set_client", B, Kind.STR, "utf8mb4"),
    _v("character_set_connection", B, Kind.STR, "utf8mb4"),
    _v("character_set_database", B, Kind.STR, "utf8mb4"),
    _v("character_set_filesystem", B, Kind.STR, "binary"),
    _v("character_set_results", B, Kind.STR, "utf8mb4", nullable=True),
    _v("character_set_server", B, Kind.STR, "utf8mb4"),
    _v("character_set_system", G, Kind.STR, "utf8mb3", ro=True),
    _v("collation_connection", B, Kind.STR, "utf8mb4_0900_ai_ci"),
    _v("collation_database", B, Kind.STR, "utf8mb4_0900_ai_ci"),
    _v("collation_server", B, Kind.STR, "utf8mb4_0900_ai_ci"),
    _v("completion_type", B, Kind.ENUM, "NO_CHAIN", choices=("NO_CHAIN", "CHAIN", "RELEASE")),
    _v("connect_timeout", G, Kind.INT, 10, lo=2, hi=31536000),
    _v("datadir", G, Kind.STR, "/var/lib/mysql/", ro=True),
    _v("default_authentication_plugin", G, Kind.STR, "caching_sha2_password", ro=True),
    _v("default_storage_engine", B, Kind.STR, "InnoDB"),
    _v("default_tmp_storage_engine", B, Kind.STR, "InnoDB"),
    _v("default_week_format", B, Kind.INT, 0, lo=0, hi=7),
    _v("div_precision_increment", B, Kind.INT, 4, lo=0, hi=30),
    _v("enforce_gtid_consistency", G, Kind.ENUM, "ON", choices=("OFF", "ON", "WARN")),
    _v("error_count", S, Kind.INT, 0, ro=True),
    _v("explicit_defaults_for_timestamp", B, Kind.BOOL, True),
    _v("foreign_key_checks", B, Kind.BOOL, True),
    _v("group_concat_max_len", B, Kind.INT, 1024, lo=4, hi=UINT64),
    _v("gtid_executed", G, Kind.STR, "", ro=True),
    _v("gtid_executed_compression_period", G, Kind.INT, 0, lo=0, hi=UINT32),
    _v(
        "gtid_mode",
        G,
        Kind.ENUM,
        "ON",
        choices=("OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE", "ON"),
    ),
    _v("gtid_next", S, Kind.STR, "AUTOMATIC"),
    _v("gtid_owned", B, Kind.STR, "", ro=True),
    _v("gtid_purged", G, Kind.STR, ""),
    _v("have_ssl", G, Kind.STR, "DISABLED", ro=True),
    _v("hostname", G, Kind.STR, "localhost", ro=True),
    _v("identity", S, Kind.INT, 0, lo=0, hi=UINT64),
    _v("immediate_server_version", S, Kind.INT, 999999, lo=0, hi=999999),
    _v("information_schema_stats_expiry", B, Kind.INT, 86400, lo=0, hi=31536000),
    _v("init_connect", G, Kind.STR, ""),
    _v("innodb_lock_wait_timeout", B, Kind.INT, 50, lo=1, hi=1073741824),
    _v("insert_id", S, Kind.INT, 0, lo=0, hi=UINT64),
    _v("interactive_timeout", B, Kind.INT, 28800, lo=1, hi=31536000),
    _v("last_insert_id", S, Kind.INT, 0, lo=0, hi=UINT64),
    _v("license", G, Kind.STR, "GPL", ro=True),
    _v("lock_wait_timeout", B, Kind.INT, 31536000, lo=1, hi=31536000),
    _v("log_bin", G, Kind.BOOL, True, ro=True),
    _v("log_bin_basename", G, Kind.STR, "", ro=True),
    _v("log_replica_updates", G, Kind.BOOL, True, ro=True),
    _v("log_slave_updates", G, Kind.BOOL, True, ro=True),
    _v("lower_case_table_names", G, Kind.INT, 0, ro=True),
    _v("max_allowed_packet", B, Kind.INT, 67108864, lo=1024, hi=1073741824),
    _v("max_binlog_size", G, Kind.INT, 1073741824, lo=4096, hi=1073741824),
    _v("max_connections", G, Kind.INT, 151, lo=1, hi=100000),
    _v("max_execution_time", B, Kind.INT, 0, lo=0, hi=UINT32),
    _v("net_buffer_length", B, Kind.INT, 16384, lo=1024, hi=1048576),
    _v("net_read_timeout", B, Kind.INT, 30, lo=1, hi=31536000),
    _v("net_write_timeout", B, Kind.INT, 60, lo=1, hi=31536000),
    _v(
        "original_commit_timestamp",
        S,
        Kind.INT,
        MAX_COMMIT_TIMESTAMP,
        lo=0,
        hi=MAX_COMMIT_TIMESTAMP,
    ),
    _v("original_server_version", S, Kind.INT, 999999, lo=0, hi=999999),
    _v("performance_schema", G, Kind.BOOL, True, ro=True),
    _v("port", G, Kind.INT, 3306, ro=True),
    _v("protocol_version", G, Kind.INT, 10, ro=True),
    _v("pseudo_thread_id", S, Kind.INT, 0, lo=0, hi=UINT32),
    _v("read_only", G, Kind.BOOL, False),
    _v("require_secure_transport", G, Kind.BOOL, False),
    _v("resultset_metadata", S, Kind.ENUM, "FULL", choices=("NONE", "FULL")),
    _v("server_id", G, Kind.INT, 1, lo=0, hi=UINT32),
    _v("server_uuid", G, Kind.STR, "", ro=True),
    _v("session_track_gtids", B, Kind.ENUM, "OFF", choices=("OFF", "OWN_GTID", "ALL_GTIDS")),
    _v("session_track_schema", B, Kind.BOOL, True),
    _v("session_track_state_change", B, Kind.BOOL, False),
    _v("session_track_system_variables", B, Kind.STR, DEFAULT_TRACKED_VARIABLES, nullable=True),
    _v(
        "session_track_transaction_info",
        B,
        Kind.ENUM,
        "OFF",
        choices=("OFF", "STATE", "CHARACTERISTICS"),
    ),
    _v("skip_name_resolve", G, Kind.BOOL, False, ro=True),
    _v("socket", G, Kind.STR, "/var/run/mysqld/mysqld.sock", ro=True),
    _v("sql_auto_is_null", B, Kind.BOOL, False),
    _v("sql_big_selects", B, Kind.BOOL, True),
    _v("sql_log_bin", S, Kind.BOOL, True),
    _v("sql_mode", B, Kind.SET, DEFAULT_SQL_MODE, choices=SQL_MODES),
    _v("sql_notes", B, Kind.BOOL, True),
    _v("sql_quote_show_create", B, Kind.BOOL, True),
    _v("sql_require_primary_key", B, Kind.BOOL, False),
    _v("sql_safe_updates", B, Kind.BOOL, False),
    _v("sql_select_limit", B, Kind.INT, UINT64, lo=0, hi=UINT64),
    _v("sql_warnings", B, Kind.BOOL, False),
    _v("super_read_only", G, Kind.BOOL, False),
    _v("sync_binlog", G, Kind.INT, 1, lo=0, hi=UINT32),
    _v("system_time_zone", G, Kind.STR, "UTC", ro=True),
    _v("time_zone", B, Kind.STR, "SYSTEM"),
    _v("timestamp", S, Kind.FLOAT, 0.0),
    _v("tmpdir", G, Kind.STR, "/tmp", ro=True),
    _v("transaction_isolation", B, Kind.ENUM, "REPEATABLE-READ", choices=ISOLATION_LEVELS),
    _v("transaction_read_only", B, Kind.BOOL, False),
    _v("unique_checks", B, Kind.BOOL, True),
    _v("version", G, Kind.STR, "", ro=True),
    _v("version_comment", G, Kind.STR, "", ro=True),
    _v("version_compile_machine", G, Kind.STR, "x86_64", ro=True),
    _v("version_compile_os", G, Kind.STR, "Linux", ro=True),
    _v("wait_timeout", B, Kind.INT, 28800, lo=1, hi=31536000),
    _v("warning_count", S, Kind.INT, 0, ro=True),
)

SYSTEM_VARIABLES: Final = MappingProxyType({v.name: v for v in _DEFINITIONS})
#: Names of the variables that have a session value (every new session copies them).
SESSION_VARIABLES: Final = tuple(v.name for v in _DEFINITIONS if v.has_session)


def lookup(name: str) -> SysVar:
    """The variable named ``name`` (case-insensitive), or ER_UNKNOWN_SYSTEM_VARIABLE (1193)."""
    var = SYSTEM_VARIABLES.get(name.lower())
    if var is None:
        raise sql_error(ER.UNKNOWN_SYSTEM_VARIABLE, name)
    return var


def read_only_error(var: SysVar) -> SqlError:
    """ER_INCORRECT_GLOBAL_LOCAL_VAR (1238) for assigning a read-only variable."""
    return sql_error(ER.INCORRECT_GLOBAL_LOCAL_VAR, var.name, "read only")
