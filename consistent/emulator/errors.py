"""Server errors of the emulator, with mysqld's errnos, SQLSTATEs and message formats.

An emulated statement fails the way mysqld fails: the front-end sends an ERR packet with
``errno``, ``sqlstate`` and the formatted message, and clients such as SQLAlchemy decide what to
do from ``args[0]``.  The table below is the one place where those three values live.

Sources: https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html, the
reference notes (§3.5) for the GTID errors, and mysqld's ``share/messages_to_clients.txt`` with
``binlog_gtid_errors.result`` for 1778 and the XA errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from consistent.errnos import ER
from consistent.errors import DatabaseError

__all__ = ["ER", "SPECS", "ErrorSpec", "SqlError", "not_supported", "parse_error", "sql_error"]


@dataclass(frozen=True)
class ErrorSpec:
    """SQLSTATE and ``%``-style message format of one errno, as in mysqld's message file."""

    sqlstate: str
    template: str


_PARSE_ERROR_PREFIX: Final = (
    "You have an error in your SQL syntax; check the manual that corresponds to your MySQL "
    "server version for the right syntax to use"
)
_OWNS: Final = "The client owns %s. Ownership is released on COMMIT or ROLLBACK."

SPECS: Final = MappingProxyType(
    {
        ER.DB_CREATE_EXISTS: ErrorSpec("HY000", "Can't create database '%s'; database exists"),
        ER.DB_DROP_EXISTS: ErrorSpec("HY000", "Can't drop database '%s'; database doesn't exist"),
        ER.ACCESS_DENIED_ERROR: ErrorSpec(
            "28000", "Access denied for user '%s'@'%s' (using password: %s)"
        ),
        ER.NO_DB_ERROR: ErrorSpec("3D000", "No database selected"),
        ER.BAD_NULL_ERROR: ErrorSpec("23000", "Column '%s' cannot be null"),
        ER.BAD_DB_ERROR: ErrorSpec("42000", "Unknown database '%s'"),
        ER.TABLE_EXISTS_ERROR: ErrorSpec("42S01", "Table '%s' already exists"),
        ER.BAD_TABLE_ERROR: ErrorSpec("42S02", "Unknown table '%s'"),
        ER.NON_UNIQ_ERROR: ErrorSpec("23000", "Column '%s' in %s is ambiguous"),
        ER.BAD_FIELD_ERROR: ErrorSpec("42S22", "Unknown column '%s' in '%s'"),
        ER.DUP_FIELDNAME: ErrorSpec("42S21", "Duplicate column name '%s'"),
        ER.DUP_KEYNAME: ErrorSpec("42000", "Duplicate key name '%s'"),
        ER.DUP_ENTRY: ErrorSpec("23000", "Duplicate entry '%s' for key '%s'"),
        ER.PARSE_ERROR: ErrorSpec("42000", _PARSE_ERROR_PREFIX + " near '%s' at line %d"),
        ER.EMPTY_QUERY: ErrorSpec("42000", "Query was empty"),
        ER.MULTIPLE_PRI_KEY: ErrorSpec("42000", "Multiple primary key defined"),
        ER.WRONG_AUTO_KEY: ErrorSpec(
            "42000",
            "Incorrect table definition; there can be only one auto column and it must be "
            "defined as a key",
        ),
        ER.INVALID_DEFAULT: ErrorSpec("42000", "Invalid default value for '%s'"),
        ER.WRONG_FIELD_SPEC: ErrorSpec("42000", "Incorrect column specifier for column '%s'"),
        ER.CANT_REMOVE_ALL_FIELDS: ErrorSpec(
            "42000", "You can't delete all columns with ALTER TABLE; use DROP TABLE instead"
        ),
        ER.KEY_DOES_NOT_EXITS: ErrorSpec("42000", "Key '%s' doesn't exist in table '%s'"),
        ER.KEY_COLUMN_DOES_NOT_EXITS: ErrorSpec("42000", "Key column '%s' doesn't exist in table"),
        ER.CANT_DROP_FIELD_OR_KEY: ErrorSpec(
            "42000", "Can't DROP '%s'; check that column/key exists"
        ),
        ER.NO_SUCH_THREAD: ErrorSpec("HY000", "Unknown thread id: %d"),
        ER.UNKNOWN_ERROR: ErrorSpec("HY000", "%s"),
        ER.INVALID_GROUP_FUNC_USE: ErrorSpec("HY000", "Invalid use of group function"),
        ER.TABLE_MUST_HAVE_COLUMNS: ErrorSpec("42000", "A table must have at least 1 column"),
        ER.UNKNOWN_CHARACTER_SET: ErrorSpec("42000", "Unknown character set: '%s'"),
        ER.WRONG_VALUE_COUNT_ON_ROW: ErrorSpec(
            "21S01", "Column count doesn't match value count at row %d"
        ),
        ER.NO_SUCH_TABLE: ErrorSpec("42S02", "Table '%s.%s' doesn't exist"),
        ER.FK_CANNOT_OPEN_PARENT: ErrorSpec("HY000", "Failed to open the referenced table '%s'"),
        ER.ROW_IS_REFERENCED_2: ErrorSpec(
            "23000", "Cannot delete or update a parent row: a foreign key constraint fails (%s)"
        ),
        ER.NO_REFERENCED_ROW_2: ErrorSpec(
            "23000", "Cannot add or update a child row: a foreign key constraint fails (%s)"
        ),
        ER.UNKNOWN_SYSTEM_VARIABLE: ErrorSpec("HY000", "Unknown system variable '%s'"),
        ER.LOCK_WAIT_TIMEOUT: ErrorSpec(
            "HY000", "Lock wait timeout exceeded; try restarting transaction"
        ),
        ER.WRONG_ARGUMENTS: ErrorSpec("HY000", "Incorrect arguments to %s"),
        ER.LOCK_DEADLOCK: ErrorSpec(
            "40001", "Deadlock found when trying to get lock; try restarting transaction"
        ),
        ER.LOCAL_VARIABLE: ErrorSpec(
            "HY000", "Variable '%s' is a SESSION variable and can't be used with SET GLOBAL"
        ),
        ER.GLOBAL_VARIABLE: ErrorSpec(
            "HY000", "Variable '%s' is a GLOBAL variable and should be set with SET GLOBAL"
        ),
        ER.WRONG_VALUE_FOR_VAR: ErrorSpec(
            "42000", "Variable '%s' can't be set to the value of '%s'"
        ),
        ER.WRONG_TYPE_FOR_VAR: ErrorSpec("42000", "Incorrect argument type to variable '%s'"),
        ER.NOT_SUPPORTED_YET: ErrorSpec("42000", "This version of MySQL doesn't yet support '%s'"),
        ER.INCORRECT_GLOBAL_LOCAL_VAR: ErrorSpec("HY000", "Variable '%s' is a %s variable"),
        ER.OPERAND_COLUMNS: ErrorSpec("21000", "Operand should contain %d column(s)"),
        ER.SUBQUERY_NO_1_ROW: ErrorSpec("21000", "Subquery returns more than 1 row"),
        ER.UNKNOWN_STMT_HANDLER: ErrorSpec(
            "HY000", "Unknown prepared statement handler (%s) given to %s"
        ),
        ER.UNKNOWN_COLLATION: ErrorSpec("HY000", "Unknown collation: '%s'"),
        ER.TRUNCATED_WRONG_VALUE: ErrorSpec("22007", "Truncated incorrect %s value: '%s'"),
        ER.UNKNOWN_TIME_ZONE: ErrorSpec("HY000", "Unknown or incorrect time zone: '%s'"),
        ER.SP_DOES_NOT_EXIST: ErrorSpec("42000", "%s %s does not exist"),
        ER.QUERY_INTERRUPTED: ErrorSpec("70100", "Query execution was interrupted"),
        # The XA errors (share/messages_to_clients.txt; XAE07's text has two spaces before
        # the state name, as mysqld prints it).
        ER.XAER_NOTA: ErrorSpec("XAE04", "XAER_NOTA: Unknown XID"),
        ER.XAER_INVAL: ErrorSpec("XAE05", "XAER_INVAL: Invalid arguments (or unsupported command)"),
        ER.XAER_RMFAIL: ErrorSpec(
            "XAE07",
            "XAER_RMFAIL: The command cannot be executed when global transaction is in the  %s "
            "state",
        ),
        ER.XAER_OUTSIDE: ErrorSpec(
            "XAE09", "XAER_OUTSIDE: Some work is done outside global transaction"
        ),
        ER.XAER_DUPID: ErrorSpec("XAE08", "XAER_DUPID: The XID already exists"),
        ER.NO_DEFAULT_FOR_FIELD: ErrorSpec("HY000", "Field '%s' doesn't have a default value"),
        ER.TRUNCATED_WRONG_VALUE_FOR_FIELD: ErrorSpec(
            "HY000", "Incorrect %s value: '%s' for column '%s' at row %d"
        ),
        ER.WARN_DATA_OUT_OF_RANGE: ErrorSpec(
            "22003", "Out of range value for column '%s' at row %d"
        ),
        ER.WARN_DATA_TRUNCATED: ErrorSpec("01000", "Data truncated for column '%s' at row %d"),
        ER.NO_BINARY_LOGGING: ErrorSpec("HY000", "You are not using binary logging"),
        ER.DATA_TOO_LONG: ErrorSpec("22001", "Data too long for column '%s' at row %d"),
        ER.WRONG_PARAMCOUNT_TO_NATIVE_FCT: ErrorSpec(
            "42000", "Incorrect parameter count in the call to native function '%s'"
        ),
        ER.CANT_CHANGE_TX_CHARACTERISTICS: ErrorSpec(
            "25001",
            "Transaction characteristics can't be changed while a transaction is in progress",
        ),
        ER.VARIABLE_NOT_SETTABLE_IN_TRANSACTION: ErrorSpec(
            "HY000", "The system variable %s cannot be set when there is an ongoing transaction."
        ),
        ER.MALFORMED_GTID_SET_SPECIFICATION: ErrorSpec(
            "HY000", "Malformed GTID set specification '%s'."
        ),
        ER.MALFORMED_GTID_SPECIFICATION: ErrorSpec("HY000", "Malformed GTID specification '%s'."),
        ER.CANT_DO_IMPLICIT_COMMIT_IN_TRX_WHEN_GTID_NEXT_IS_SET: ErrorSpec(
            "HY000",
            "Cannot execute statements with implicit commit inside a transaction when "
            "@@SESSION.GTID_NEXT == 'UUID:NUMBER'.",
        ),
        ER.CANT_SET_GTID_NEXT_TO_ANONYMOUS_WHEN_GTID_MODE_IS_ON: ErrorSpec(
            "HY000", "@@SESSION.GTID_NEXT cannot be set to ANONYMOUS when @@GLOBAL.GTID_MODE = ON."
        ),
        ER.CANT_SET_GTID_NEXT_TO_GTID_WHEN_GTID_MODE_IS_OFF: ErrorSpec(
            "HY000",
            "@@SESSION.GTID_NEXT cannot be set to UUID:NUMBER when @@GLOBAL.GTID_MODE = OFF.",
        ),
        ER.GTID_MODE_CAN_ONLY_CHANGE_ONE_STEP_AT_A_TIME: ErrorSpec(
            "HY000",
            "The value of @@GLOBAL.GTID_MODE can only be changed one step at a time: OFF <-> "
            "OFF_PERMISSIVE <-> ON_PERMISSIVE <-> ON. Also note that this value must be stepped "
            "up or down simultaneously on all servers. See the Manual for instructions.",
        ),
        ER.CANT_SET_GTID_NEXT_WHEN_OWNING_GTID: ErrorSpec(
            "HY000", "@@SESSION.GTID_NEXT cannot be changed by a client that owns a GTID. " + _OWNS
        ),
        ER.CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: ErrorSpec(
            "25006", "Cannot execute statement in a READ ONLY transaction."
        ),
        ER.GTID_NEXT_TYPE_UNDEFINED_GTID: ErrorSpec(
            "HY000",
            "When @@SESSION.GTID_NEXT is set to a GTID, you must explicitly set it to a "
            "different value after a COMMIT or ROLLBACK. Please check GTID_NEXT variable manual "
            "page for detailed explanation. Current @@SESSION.GTID_NEXT is '%s'.",
        ),
        ER.CONNECTION_KILLED: ErrorSpec("70100", "Connection was killed"),
        ER.GTID_MODE_OFF: ErrorSpec("HY000", "Cannot %s when GTID_MODE = OFF."),
        ER.GTID_MODE_ON_REQUIRES_ENFORCE_GTID_CONSISTENCY_ON: ErrorSpec(
            "HY000", "GTID_MODE = ON requires ENFORCE_GTID_CONSISTENCY = ON."
        ),
        ER.CANT_SET_VARIABLE_WHEN_OWNING_GTID: ErrorSpec(
            "HY000", "Variable %s cannot be changed by a client that owns a GTID. " + _OWNS
        ),
        ER.CANT_WAIT_FOR_EXECUTED_GTID_SET_WHILE_OWNING_A_GTID: ErrorSpec(
            "HY000",
            "The client holds ownership of the GTID %s. Therefore, WAIT_FOR_EXECUTED_GTID_SET "
            "cannot wait for this GTID.",
        ),
        ER.CANT_SET_GTID_PURGED_DUE_SETS_CONSTRAINTS: ErrorSpec(
            "HY000", "@@GLOBAL.GTID_PURGED cannot be changed: %s"
        ),
    }
)


class SqlError(DatabaseError):
    """A statement failed as it would on mysqld: ``args == (errno, message)``, ``sqlstate``."""

    def __init__(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(errno, message, sqlstate=sqlstate)

    @property
    def code(self) -> int:
        """The errno (always an int for this class)."""
        return int(self.args[0])


def sql_error(code: ER, *args: object) -> SqlError:
    """Build the :class:`SqlError` for ``code`` with its message formatted from ``args``."""
    spec = SPECS[code]
    message = spec.template % args if args else spec.template
    return SqlError(int(code), message, spec.sqlstate)


def parse_error(near: str, line: int = 1) -> SqlError:
    """ER_PARSE_ERROR (1064) quoting the text from the offending token on, as mysqld does."""
    return sql_error(ER.PARSE_ERROR, near[:80], line)


def not_supported(what: str) -> SqlError:
    """ER_NOT_SUPPORTED_YET (1235) naming the unsupported construct."""
    return sql_error(ER.NOT_SUPPORTED_YET, what[:120])
