"""Wire constants of the MySQL client/server protocol, with the values mysqld uses.

Every group names the page of the MySQL source documentation it comes from, so a reader can
check a value without trusting this file.  Values are literal on purpose: a renumbering here
would silently change the bytes on the wire.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final

__all__ = [
    "MAX_PACKET_PAYLOAD",
    "NATIVE_PASSWORD_NONCE_LENGTH",
    "CachingSha2",
    "Capability",
    "Charset",
    "ColumnFlag",
    "ColumnType",
    "Command",
    "CursorFlag",
    "Header",
    "LenencPrefix",
    "MariaDbCapability",
    "ResultsetMetadata",
    "ServerStatus",
    "SessionStateType",
    "SetOption",
]

# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html
MAX_PACKET_PAYLOAD: Final = 0xFFFFFF
"""Largest payload one physical packet carries; longer payloads continue in the next packet."""

# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_authentication_methods_native_password_authentication.html
NATIVE_PASSWORD_NONCE_LENGTH: Final = 20
"""Length of the server's scramble (``SCRAMBLE_LENGTH``), shared by both password plugins."""


class Capability(IntFlag):
    """``CLIENT_*`` capability flags, without the prefix.

    https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__capabilities__flags.html
    """

    LONG_PASSWORD = 1
    """Also ``CLIENT_MYSQL`` in MariaDB: unset by a MariaDB server that uses extended caps."""
    FOUND_ROWS = 1 << 1
    LONG_FLAG = 1 << 2
    CONNECT_WITH_DB = 1 << 3
    NO_SCHEMA = 1 << 4
    COMPRESS = 1 << 5
    ODBC = 1 << 6
    LOCAL_FILES = 1 << 7
    IGNORE_SPACE = 1 << 8
    PROTOCOL_41 = 1 << 9
    INTERACTIVE = 1 << 10
    SSL = 1 << 11
    IGNORE_SIGPIPE = 1 << 12
    TRANSACTIONS = 1 << 13
    RESERVED = 1 << 14
    SECURE_CONNECTION = 1 << 15
    MULTI_STATEMENTS = 1 << 16
    MULTI_RESULTS = 1 << 17
    PS_MULTI_RESULTS = 1 << 18
    PLUGIN_AUTH = 1 << 19
    CONNECT_ATTRS = 1 << 20
    PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
    CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
    SESSION_TRACK = 1 << 23
    DEPRECATE_EOF = 1 << 24
    OPTIONAL_RESULTSET_METADATA = 1 << 25
    ZSTD_COMPRESSION_ALGORITHM = 1 << 26
    QUERY_ATTRIBUTES = 1 << 27
    MULTI_FACTOR_AUTHENTICATION = 1 << 28
    CAPABILITY_EXTENSION = 1 << 29
    SSL_VERIFY_SERVER_CERT = 1 << 30
    REMEMBER_OPTIONS = 1 << 31


class MariaDbCapability(IntFlag):
    """MariaDB's extended capabilities, sent in the last 4 reserved bytes of the handshake
    when the server clears ``CLIENT_MYSQL`` (bit 0).

    https://mariadb.com/kb/en/connection/#capabilities
    """

    PROGRESS = 1
    COM_MULTI = 1 << 1
    STMT_BULK_OPERATIONS = 1 << 2
    EXTENDED_METADATA = 1 << 3
    CACHE_METADATA = 1 << 4


class ServerStatus(IntFlag):
    """``SERVER_STATUS_*`` flags of OK and EOF packets.

    https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html
    (``enum SERVER_STATUS_flags_enum``); reference §1.4.
    """

    IN_TRANS = 0x0001
    AUTOCOMMIT = 0x0002
    MORE_RESULTS_EXISTS = 0x0008
    NO_GOOD_INDEX_USED = 0x0010
    NO_INDEX_USED = 0x0020
    CURSOR_EXISTS = 0x0040
    LAST_ROW_SENT = 0x0080
    DB_DROPPED = 0x0100
    NO_BACKSLASH_ESCAPES = 0x0200
    METADATA_CHANGED = 0x0400
    QUERY_WAS_SLOW = 0x0800
    PS_OUT_PARAMS = 0x1000
    IN_TRANS_READONLY = 0x2000
    SESSION_STATE_CHANGED = 0x4000
    ANSI_QUOTES = 0x8000
    """MariaDB only (``SERVER_STATUS_ANSI_QUOTES``)."""


class Command(IntEnum):
    """First byte of a command-phase packet (``enum_server_command``).

    https://dev.mysql.com/doc/dev/mysql-server/latest/my__command_8h.html
    """

    SLEEP = 0x00
    QUIT = 0x01
    INIT_DB = 0x02
    QUERY = 0x03
    FIELD_LIST = 0x04
    CREATE_DB = 0x05
    DROP_DB = 0x06
    REFRESH = 0x07
    SHUTDOWN = 0x08
    STATISTICS = 0x09
    PROCESS_INFO = 0x0A
    CONNECT = 0x0B
    PROCESS_KILL = 0x0C
    DEBUG = 0x0D
    PING = 0x0E
    TIME = 0x0F
    DELAYED_INSERT = 0x10
    CHANGE_USER = 0x11
    BINLOG_DUMP = 0x12
    TABLE_DUMP = 0x13
    CONNECT_OUT = 0x14
    REGISTER_SLAVE = 0x15
    STMT_PREPARE = 0x16
    STMT_EXECUTE = 0x17
    STMT_SEND_LONG_DATA = 0x18
    STMT_CLOSE = 0x19
    STMT_RESET = 0x1A
    SET_OPTION = 0x1B
    STMT_FETCH = 0x1C
    DAEMON = 0x1D
    BINLOG_DUMP_GTID = 0x1E
    RESET_CONNECTION = 0x1F
    CLONE = 0x20
    SUBSCRIBE_GROUP_REPLICATION_STREAM = 0x21
    STMT_BULK_EXECUTE = 0xFA
    """MariaDB only (https://mariadb.com/kb/en/com_stmt_bulk_execute/)."""


class SessionStateType(IntEnum):
    """Tracker types in the OK packet's session-state blob (``enum_session_state_type``).

    https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html; reference §1.3.
    """

    SYSTEM_VARIABLES = 0
    SCHEMA = 1
    STATE_CHANGE = 2
    GTIDS = 3
    TRANSACTION_CHARACTERISTICS = 4
    TRANSACTION_STATE = 5


class ColumnType(IntEnum):
    """Column and parameter types (``enum_field_types``).

    https://dev.mysql.com/doc/dev/mysql-server/latest/field__types_8h.html
    """

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


DATETIME_TYPES: Final = frozenset(
    {
        ColumnType.DATE,
        ColumnType.NEWDATE,
        ColumnType.DATETIME,
        ColumnType.DATETIME2,
        ColumnType.TIMESTAMP,
        ColumnType.TIMESTAMP2,
    }
)
"""Types whose binary-protocol value is a date or a date and time (``MYSQL_TIME``, 0, 4, 7 or
11 bytes after a length byte)."""

TIME_TYPES: Final = frozenset({ColumnType.TIME, ColumnType.TIME2})
"""Types whose binary-protocol value is a signed duration (0, 8 or 12 bytes after a length
byte)."""


class ColumnFlag(IntFlag):
    """Column-definition flags as sent in the 2-byte ``flags`` field.

    https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__column__definition__flags.html
    """

    NOT_NULL = 1
    PRI_KEY = 1 << 1
    UNIQUE_KEY = 1 << 2
    MULTIPLE_KEY = 1 << 3
    BLOB = 1 << 4
    UNSIGNED = 1 << 5
    ZEROFILL = 1 << 6
    BINARY = 1 << 7
    ENUM = 1 << 8
    AUTO_INCREMENT = 1 << 9
    TIMESTAMP = 1 << 10
    SET = 1 << 11
    NO_DEFAULT_VALUE = 1 << 12
    ON_UPDATE_NOW = 1 << 13
    PART_KEY = 1 << 14
    NUM = 1 << 15


class Charset(IntEnum):
    """Collation ids used in handshakes and column definitions.

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_character_set.html
    """

    LATIN1_SWEDISH_CI = 8
    UTF8MB3_GENERAL_CI = 33
    UTF8MB4_GENERAL_CI = 45
    UTF8MB4_BIN = 46
    BINARY = 63
    UTF8MB3_BIN = 83
    UTF8MB4_UNICODE_CI = 224
    UTF8MB4_0900_AI_CI = 255


class CursorFlag(IntFlag):
    """The ``flags`` byte of COM_STMT_EXECUTE (``enum_cursor_type``).

    https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html
    """

    NO_CURSOR = 0
    READ_ONLY = 1
    FOR_UPDATE = 1 << 1
    SCROLLABLE = 1 << 2
    PARAMETER_COUNT_AVAILABLE = 1 << 3


class SetOption(IntEnum):
    """Argument of COM_SET_OPTION (``enum_mysql_set_option``).

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_set_option.html
    """

    MULTI_STATEMENTS_ON = 0
    MULTI_STATEMENTS_OFF = 1


class ResultsetMetadata(IntEnum):
    """The ``metadata_follows`` byte under ``CLIENT_OPTIONAL_RESULTSET_METADATA``.

    https://dev.mysql.com/doc/dev/mysql-server/latest/mysql__com_8h.html
    """

    NONE = 0
    FULL = 1


class Header(IntEnum):
    """First payload byte that identifies a generic response or an auth-phase packet.

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_response_packets.html
    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets.html
    """

    OK = 0x00
    AUTH_MORE_DATA = 0x01
    LOCAL_INFILE = 0xFB
    EOF = 0xFE
    AUTH_SWITCH_REQUEST = 0xFE
    ERR = 0xFF


class LenencPrefix(IntEnum):
    """First byte of a length-encoded integer that announces a longer encoding.

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_dt_integers.html
    """

    NULL = 0xFB
    """Only meaningful in text result-set rows, where it marks SQL NULL."""
    UINT16 = 0xFC
    UINT24 = 0xFD
    UINT64 = 0xFE
    INVALID = 0xFF


class CachingSha2(IntEnum):
    """Single-byte messages of ``caching_sha2_password``, sent inside AuthMoreData (0x01) or
    alone by the client.

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
    """

    REQUEST_PUBLIC_KEY = 0x02
    FAST_AUTH_SUCCESS = 0x03
    PERFORM_FULL_AUTHENTICATION = 0x04
