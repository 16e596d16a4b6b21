"""Which function calls a replica may run: the one list of side-effect-free built-ins.

A replica must never run a statement that may write (DESIGN "How a read gets to a replica",
step 1).  A ``SELECT`` can write through the functions it calls: a stored function may insert
rows, a loadable function may change the server's configuration.  The classifier cannot see
into either, so a call counts as a possible write unless its name is on this module's list:

* :data:`SAFE_FUNCTIONS`: per server family, the built-in functions that read nothing but their
  arguments and the session's state, and write nothing: a replica answers them as the primary
  would.  Names are kept apart by family because a built-in of one family is an ordinary name
  in the other, where ``NVL(x, y)`` calls a stored function of the default schema.  MySQL's are
  those of MySQL 8.4 (``tests/unit/mysql84_builtin_functions.txt``, from the manual's Table 14.1),
  MariaDB's those of MariaDB 10.11 (``information_schema.SQL_FUNCTIONS``, plus the functions its
  grammar knows by keyword and the spatial ones, which that table leaves out).  Built-ins added
  by later versions (MariaDB 11's ``VEC_*``, ``KDF``, ``JSON_SCHEMA_VALID``…) are left out on
  purpose: on an older server the same name calls a stored function.  They go to the primary
  unless declared read-only.
* :data:`PRIMARY_FUNCTIONS`: the built-ins that must run on the primary, each with its
  :class:`~consistent.classify.PrimaryReason`: named locks, the previous statement's results
  (``LAST_INSERT_ID()``, ``FOUND_ROWS()``, ``ROW_COUNT()``), the connection's identity,
  sequences, and what asks about one server (``MASTER_POS_WAIT()``, ``LOAD_FILE()``…).
* :data:`NOT_CALLS`: words that may stand before ``(`` without calling anything (``IN (``,
  ``OVER (``, ``CAST(x AS DECIMAL(10, 2))``…).  Neither family reads one of them followed by
  ``(`` as a stored function's name: MariaDB rejects them there (a test asks the server), and
  MySQL's grammar calls an unqualified stored function by a plain identifier, never by a
  keyword.  Words that MariaDB does take for function names (``COLUMNS``, ``AGAINST``,
  ``LATERAL``…) are recognised by context in :mod:`consistent.classify.calls`, or kept for
  MySQL only (:data:`MYSQL_NOT_CALLS`).

Everything else that is called counts as a possible write: stored functions (qualified or not),
loadable functions, unknown names, and any name in backticks (the servers look `` `now`() `` up
among stored functions; the classifier treats every quoted name so).  Users who know that some
of their functions only read declare them (:class:`FunctionRules`, the ``read_only_functions``
option of every form).

https://dev.mysql.com/doc/refman/8.4/en/function-resolution.html
https://mariadb.com/kb/en/function-differences-between-mariadb-and-mysql/
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from consistent.classify.model import Classification, PrimaryReason, StatementKind
from consistent.errors import InterfaceError

__all__ = [
    "DEFAULT_RULES",
    "MYSQL_NOT_CALLS",
    "NOT_CALLS",
    "PRIMARY_FUNCTIONS",
    "SAFE_FUNCTIONS",
    "SKIPPED",
    "FunctionRules",
    "read_only_function_names",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Built-ins of both families that write nothing and ask about no particular server.
_BOTH: Final = _names(
    """
    ABS ACOS ADDDATE ADDTIME AES_DECRYPT AES_ENCRYPT ASCII ASIN ATAN ATAN2 AVG BENCHMARK BIN
    BIT_AND BIT_COUNT BIT_LENGTH BIT_OR BIT_XOR CAST CEIL CEILING CHAR CHARACTER_LENGTH
    CHARSET CHAR_LENGTH COALESCE COERCIBILITY COLLATION COMPRESS CONCAT CONCAT_WS CONV
    CONVERT CONVERT_TZ COS COT COUNT CRC32 CUME_DIST CURDATE CURRENT_DATE CURRENT_ROLE
    CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER CURTIME DATABASE DATE DATEDIFF DATE_ADD
    DATE_FORMAT DATE_SUB DAY DAYNAME DAYOFMONTH DAYOFWEEK DAYOFYEAR DEFAULT DEGREES
    DENSE_RANK ELT EXP EXPORT_SET EXTRACT EXTRACTVALUE FIELD FIND_IN_SET FIRST_VALUE FLOOR
    FORMAT FROM_BASE64 FROM_DAYS FROM_UNIXTIME GEOMETRYCOLLECTION GET_FORMAT GREATEST
    GROUP_CONCAT HEX HOUR IF IFNULL INET6_ATON INET6_NTOA INET_ATON INET_NTOA INSERT INSTR
    INTERVAL ISNULL IS_IPV4 IS_IPV4_COMPAT IS_IPV4_MAPPED IS_IPV6 JSON_ARRAY JSON_ARRAYAGG
    JSON_ARRAY_APPEND JSON_ARRAY_INSERT JSON_CONTAINS JSON_CONTAINS_PATH JSON_DEPTH
    JSON_EXTRACT JSON_INSERT JSON_KEYS JSON_LENGTH JSON_MERGE JSON_MERGE_PATCH
    JSON_MERGE_PRESERVE JSON_OBJECT JSON_OBJECTAGG JSON_OVERLAPS JSON_PRETTY JSON_QUOTE
    JSON_REMOVE JSON_REPLACE JSON_SEARCH JSON_SET JSON_TABLE JSON_TYPE JSON_UNQUOTE
    JSON_VALID JSON_VALUE LAG LAST_DAY LAST_VALUE LCASE LEAD LEAST LEFT LENGTH LINESTRING LN
    LOCALTIME LOCALTIMESTAMP LOCATE LOG LOG10 LOG2 LOWER LPAD LTRIM MAKEDATE MAKETIME
    MAKE_SET MAX MBRCONTAINS MBRDISJOINT MBREQUALS MBRINTERSECTS MBROVERLAPS MBRTOUCHES
    MBRWITHIN MD5 MICROSECOND MID MIN MINUTE MOD MONTH MONTHNAME MULTILINESTRING MULTIPOINT
    MULTIPOLYGON NAME_CONST NOW NTH_VALUE NTILE NULLIF OCT OCTET_LENGTH ORD PERCENT_RANK
    PERIOD_ADD PERIOD_DIFF PI POINT POLYGON POSITION POW POWER QUARTER QUOTE RADIANS RAND
    RANDOM_BYTES RANK REGEXP_INSTR REGEXP_REPLACE REGEXP_SUBSTR REPEAT REPLACE REVERSE RIGHT
    ROUND ROW_NUMBER RPAD RTRIM SCHEMA SECOND SEC_TO_TIME SESSION_USER SHA SHA1 SHA2 SIGN
    SIN SLEEP SOUNDEX SPACE SQRT STD STDDEV STDDEV_POP STDDEV_SAMP STRCMP STR_TO_DATE
    ST_AREA ST_ASBINARY ST_ASGEOJSON ST_ASTEXT ST_ASWKB ST_ASWKT ST_BUFFER ST_CENTROID
    ST_CONTAINS ST_CONVEXHULL ST_CROSSES ST_DIFFERENCE ST_DIMENSION ST_DISJOINT ST_DISTANCE
    ST_DISTANCE_SPHERE ST_ENDPOINT ST_ENVELOPE ST_EQUALS ST_EXTERIORRING ST_GEOMCOLLFROMTEXT
    ST_GEOMCOLLFROMWKB ST_GEOMETRYCOLLECTIONFROMTEXT ST_GEOMETRYCOLLECTIONFROMWKB
    ST_GEOMETRYFROMTEXT ST_GEOMETRYFROMWKB ST_GEOMETRYN ST_GEOMETRYTYPE ST_GEOMFROMGEOJSON
    ST_GEOMFROMTEXT ST_GEOMFROMWKB ST_INTERIORRINGN ST_INTERSECTION ST_INTERSECTS
    ST_ISCLOSED ST_ISEMPTY ST_ISSIMPLE ST_LENGTH ST_LINEFROMTEXT ST_LINEFROMWKB
    ST_LINESTRINGFROMTEXT ST_LINESTRINGFROMWKB ST_MLINEFROMTEXT ST_MLINEFROMWKB
    ST_MPOINTFROMTEXT ST_MPOINTFROMWKB ST_MPOLYFROMTEXT ST_MPOLYFROMWKB
    ST_MULTILINESTRINGFROMTEXT ST_MULTILINESTRINGFROMWKB ST_MULTIPOINTFROMTEXT
    ST_MULTIPOINTFROMWKB ST_MULTIPOLYGONFROMTEXT ST_MULTIPOLYGONFROMWKB ST_NUMGEOMETRIES
    ST_NUMINTERIORRINGS ST_NUMPOINTS ST_OVERLAPS ST_POINTFROMTEXT ST_POINTFROMWKB ST_POINTN
    ST_POLYFROMTEXT ST_POLYFROMWKB ST_POLYGONFROMTEXT ST_POLYGONFROMWKB ST_SRID
    ST_STARTPOINT ST_SYMDIFFERENCE ST_TOUCHES ST_UNION ST_WITHIN ST_X ST_Y SUBDATE SUBSTR
    SUBSTRING SUBSTRING_INDEX SUBTIME SUM SYSDATE SYSTEM_USER TAN TIME TIMEDIFF TIMESTAMP
    TIMESTAMPADD TIMESTAMPDIFF TIME_FORMAT TIME_TO_SEC TO_BASE64 TO_DAYS TO_SECONDS TRIM
    TRUNCATE UCASE UNCOMPRESS UNCOMPRESSED_LENGTH UNHEX UNIX_TIMESTAMP UPDATEXML UPPER USER
    UTC_DATE UTC_TIME UTC_TIMESTAMP UUID UUID_SHORT VALUES VARIANCE VAR_POP VAR_SAMP VERSION
    WEEK WEEKDAY WEEKOFYEAR WEIGHT_STRING YEAR YEARWEEK
    """
)
# MySQL 8.4 only (on MariaDB these names call stored functions).
_MYSQL_ONLY: Final = _names(
    """
    ANY_VALUE BIN_TO_UUID CAN_ACCESS_COLUMN CAN_ACCESS_DATABASE CAN_ACCESS_TABLE
    CAN_ACCESS_USER CAN_ACCESS_VIEW FORMAT_BYTES FORMAT_PICO_TIME GEOMCOLLECTION
    GET_DD_COLUMN_PRIVILEGES GET_DD_CREATE_OPTIONS GET_DD_INDEX_SUB_PART_LENGTH GROUPING
    GTID_SUBSET GTID_SUBTRACT ICU_VERSION INTERNAL_AUTO_INCREMENT INTERNAL_AVG_ROW_LENGTH
    INTERNAL_CHECKSUM INTERNAL_CHECK_TIME INTERNAL_DATA_FREE INTERNAL_DATA_LENGTH
    INTERNAL_DD_CHAR_LENGTH INTERNAL_GET_COMMENT_OR_ERROR INTERNAL_GET_ENABLED_ROLE_JSON
    INTERNAL_GET_HOSTNAME INTERNAL_GET_USERNAME INTERNAL_GET_VIEW_WARNING_OR_ERROR
    INTERNAL_INDEX_COLUMN_CARDINALITY INTERNAL_INDEX_LENGTH INTERNAL_IS_ENABLED_ROLE
    INTERNAL_IS_MANDATORY_ROLE INTERNAL_KEYS_DISABLED INTERNAL_MAX_DATA_LENGTH
    INTERNAL_TABLE_ROWS INTERNAL_UPDATE_TIME IS_UUID JSON_SCHEMA_VALID
    JSON_SCHEMA_VALIDATION_REPORT JSON_STORAGE_FREE JSON_STORAGE_SIZE MBRCOVEREDBY MBRCOVERS
    REGEXP_LIKE ROLES_GRAPHML STATEMENT_DIGEST STATEMENT_DIGEST_TEXT ST_BUFFER_STRATEGY
    ST_COLLECT ST_FRECHETDISTANCE ST_GEOHASH ST_GEOMCOLLFROMTXT ST_HAUSDORFFDISTANCE
    ST_ISVALID ST_LATFROMGEOHASH ST_LATITUDE ST_LINEINTERPOLATEPOINT
    ST_LINEINTERPOLATEPOINTS ST_LONGFROMGEOHASH ST_LONGITUDE ST_MAKEENVELOPE
    ST_NUMINTERIORRING ST_POINTATDISTANCE ST_POINTFROMGEOHASH ST_SIMPLIFY ST_SWAPXY
    ST_TRANSFORM ST_VALIDATE UUID_TO_BIN VALIDATE_PASSWORD_STRENGTH
    """
)
# MariaDB 10.11 only (on MySQL these names call stored functions).
_MARIADB_ONLY: Final = _names(
    """
    ADD_MONTHS AREA ASBINARY ASTEXT ASWKB ASWKT BOUNDARY BUFFER CENTROID CHR COLUMN_ADD
    COLUMN_CHECK COLUMN_CREATE COLUMN_DELETE COLUMN_EXISTS COLUMN_GET COLUMN_JSON
    COLUMN_LIST CONCAT_OPERATOR_ORACLE CONTAINS CONVEXHULL CRC32C CROSSES DECODE
    DECODE_HISTOGRAM DECODE_ORACLE DES_DECRYPT DES_ENCRYPT DIMENSION DISJOINT ENCODE ENCRYPT
    ENDPOINT ENVELOPE EQUALS EXTERIORRING GEOMCOLLFROMTEXT GEOMCOLLFROMWKB
    GEOMETRYCOLLECTIONFROMTEXT GEOMETRYCOLLECTIONFROMWKB GEOMETRYFROMTEXT GEOMETRYFROMWKB
    GEOMETRYN GEOMETRYTYPE GEOMFROMTEXT GEOMFROMWKB GLENGTH INTERIORRINGN INTERSECTS
    ISCLOSED ISEMPTY ISRING ISSIMPLE JSON_COMPACT JSON_DETAILED JSON_EQUALS JSON_EXISTS
    JSON_LOOSE JSON_NORMALIZE JSON_QUERY LENGTHB LINEFROMTEXT LINEFROMWKB LINESTRINGFROMTEXT
    LINESTRINGFROMWKB LPAD_ORACLE LTRIM_ORACLE MBREQUAL MEDIAN MLINEFROMTEXT MLINEFROMWKB
    MPOINTFROMTEXT MPOINTFROMWKB MPOLYFROMTEXT MPOLYFROMWKB MULTILINESTRINGFROMTEXT
    MULTILINESTRINGFROMWKB MULTIPOINTFROMTEXT MULTIPOINTFROMWKB MULTIPOLYGONFROMTEXT
    MULTIPOLYGONFROMWKB NATURAL_SORT_KEY NUMGEOMETRIES NUMINTERIORRINGS NUMPOINTS NVL NVL2
    OLD_PASSWORD OVERLAPS PASSWORD PERCENTILE_CONT PERCENTILE_DISC POINTFROMTEXT
    POINTFROMWKB POINTN POINTONSURFACE POLYFROMTEXT POLYFROMWKB POLYGONFROMTEXT
    POLYGONFROMWKB REPLACE_ORACLE RPAD_ORACLE RTRIM_ORACLE SCHEMAS SFORMAT SRID STARTPOINT
    ST_BOUNDARY ST_ISRING ST_POINTONSURFACE ST_RELATE SUBSTR_ORACLE SYS_GUID TOUCHES TO_CHAR
    TRIM_ORACLE VALUE WITHIN X Y
    """
)

#: Per server family (``"mysql"``, ``"mariadb"``), the built-ins a replica may run.
SAFE_FUNCTIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {"mysql": _BOTH | _MYSQL_ONLY, "mariadb": _BOTH | _MARIADB_ONLY}
)

_R = PrimaryReason

#: Built-ins that must run on the primary, with the reason (either family).
PRIMARY_FUNCTIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # Named locks live in one server.
        "GET_LOCK": _R.GET_LOCK,
        "RELEASE_LOCK": _R.GET_LOCK,
        "RELEASE_ALL_LOCKS": _R.GET_LOCK,
        "IS_FREE_LOCK": _R.GET_LOCK,
        "IS_USED_LOCK": _R.GET_LOCK,
        # The previous statement's results, in the primary session.
        "LAST_INSERT_ID": _R.LAST_INSERT_ID,
        "FOUND_ROWS": _R.FOUND_ROWS,
        "ROW_COUNT": _R.ROW_COUNT,
        # The connection's identity on the primary (callers KILL with it).
        "CONNECTION_ID": _R.CONNECTION_ID,
        "PS_CURRENT_THREAD_ID": _R.CONNECTION_ID,
        # MariaDB sequences: NEXTVAL and SETVAL write.
        "NEXTVAL": _R.SEQUENCE,
        "LASTVAL": _R.SEQUENCE,
        "SETVAL": _R.SEQUENCE,
        # One server's replication state, threads or files.
        "MASTER_POS_WAIT": _R.SERVER_STATE,
        "SOURCE_POS_WAIT": _R.SERVER_STATE,
        "MASTER_GTID_WAIT": _R.SERVER_STATE,
        "WAIT_FOR_EXECUTED_GTID_SET": _R.SERVER_STATE,
        "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS": _R.SERVER_STATE,
        "BINLOG_GTID_POS": _R.SERVER_STATE,
        "WSREP_LAST_SEEN_GTID": _R.SERVER_STATE,
        "WSREP_LAST_WRITTEN_GTID": _R.SERVER_STATE,
        "WSREP_SYNC_WAIT_UPTO_GTID": _R.SERVER_STATE,
        "PS_THREAD_ID": _R.SERVER_STATE,
        "LOAD_FILE": _R.SERVER_STATE,
    }
)

#: Keywords that may stand before ``(`` without calling a function, and that neither family
#: takes there for a stored function's name: operators and clauses (``IN (``, ``EXISTS (``,
#: ``OVER (``, ``USING (``, ``AS (``…) and the type names of ``CAST``, ``CONVERT``,
#: ``JSON_VALUE … RETURNING`` and ``JSON_TABLE`` columns.
NOT_CALLS: Final = _names(
    """
    ALL AND ANY AS ASC BETWEEN BY CASE CHECK CONSTRAINT CROSS DESC DISTINCT DISTINCTROW DIV
    DUAL ELSE EXCEPT EXISTS FOLLOWING FOR FROM GROUP HAVING IN INDEX INTERSECT INTO IS JOIN
    KEY LIKE LIMIT MATCH NATURAL NOT NULL OFFSET ON OR ORDER OVER PARTITION PRECEDING PRIMARY
    RANGE RECURSIVE REFERENCES REGEXP RETURNING RLIKE ROW ROWS SELECT SEPARATOR SOME SOUNDS
    STRAIGHT_JOIN TABLE THEN TO UNBOUNDED UNION UNIQUE USING WHEN WHERE WINDOW WITH XOR
    BIGINT BINARY BIT BLOB BOOL BOOLEAN CHARACTER DATETIME DEC DECIMAL DOUBLE ENUM FIXED
    FLOAT FLOAT4 FLOAT8 INT INT1 INT2 INT3 INT4 INT8 INTEGER JSON LONG MEDIUMINT MIDDLEINT
    NATIONAL NCHAR NUMBER NUMERIC NVARCHAR PRECISION REAL SET SIGNED SMALLINT TEXT TINYINT
    UNSIGNED VARBINARY VARCHAR VARCHARACTER VARYING ZEROFILL
    """
)
#: Keywords of MySQL only before ``(`` (``x MEMBER OF (…)``, ``LATERAL (…)``); MariaDB takes
#: them for function names.
MYSQL_NOT_CALLS: Final = _names("LATERAL OF")
#: The words of :data:`NOT_CALLS` and :data:`PRIMARY_FUNCTIONS`, and the built-ins of both
#: families: before ``(`` (and not after a ``.``) they never call a function that may write.
SKIPPED: Final = NOT_CALLS | _BOTH | frozenset(PRIMARY_FUNCTIONS)
_ALLOWED: Final[Mapping[str | None, frozenset[str]]] = MappingProxyType(
    {
        None: _BOTH,
        "mysql": SAFE_FUNCTIONS["mysql"] | MYSQL_NOT_CALLS,
        "mariadb": SAFE_FUNCTIONS["mariadb"],
    }
)

_NAME_PART: Final = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_$\x80-\U0010FFFF]+)")


def read_only_function_names(value: str | Iterable[str] | None) -> frozenset[str]:
    """The names of the ``read_only_functions`` option, normalised: ``NAME`` or
    ``SCHEMA.NAME``, upper-case, without backticks.

    ``value`` is a comma-separated string or an iterable of names; a part may be quoted with
    backticks.  :class:`~consistent.errors.InterfaceError` names a malformed entry.
    """
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else list(value)
    names: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise InterfaceError(f"read_only_functions: {item!r} is not a function name")
        text = item.strip()
        if not text and isinstance(value, str):
            continue
        names.add(_normalise(text))
    return frozenset(names)


def _normalise(text: str) -> str:
    parts: list[str] = []
    pos = 0
    while (m := _NAME_PART.match(text, pos)) is not None:
        quoted, plain = m.groups()
        parts.append(quoted.replace("``", "`") if quoted is not None else plain)
        pos = m.end()
        if not text.startswith(".", pos) or pos + 1 == len(text):
            break
        pos += 1
    if pos != len(text) or not 1 <= len(parts) <= 2:
        raise InterfaceError(
            f"read_only_functions: {text!r} is not NAME or SCHEMA.NAME (backticks allowed)"
        )
    return ".".join(parts).upper()


@dataclass(frozen=True, slots=True)
class FunctionRules:
    """Which of the calls a statement makes a replica may run: the built-ins of one server
    family (``flavor`` ``"mysql"``/``"mariadb"``; ``None`` when unknown: only those of both)
    and the user functions declared read-only (names as :func:`read_only_function_names`
    returns them).

    A declared ``NAME`` covers the function of that name in any schema; ``SCHEMA.NAME`` covers
    calls written with that schema only (the classifier does not know the default schema).
    """

    flavor: str | None = None
    read_only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.flavor not in _ALLOWED:
            raise InterfaceError(f"unknown server family {self.flavor!r}: mysql or mariadb")

    def runs_on_replica(self, name: str) -> bool:
        """True when calling ``name`` (as :attr:`Classification.functions` records it) is
        safe on a replica."""
        key = name.upper()
        if key in _ALLOWED[self.flavor]:
            return True
        declared = self.read_only
        if not declared:
            return False
        key = key.replace("`", "")
        if key in declared:
            return True
        _schema, dot, function = key.rpartition(".")
        return bool(dot) and function in declared

    def settle(self, stmt: Classification) -> Classification:
        """``stmt`` with the calls these rules allow taken off ``functions``; a statement that
        needed the primary only for them no longer does."""
        names = stmt.functions
        if not names:
            return stmt
        left = tuple(name for name in names if not self.runs_on_replica(name))
        if len(left) == len(names):
            return stmt
        if left or stmt.primary_reason != PrimaryReason.FUNCTION_CALL:
            return dataclasses.replace(stmt, functions=left)
        if stmt.kind is StatementKind.READ and _OTHER_FIELDS(stmt) == _OTHER_DEFAULTS:
            # The usual shape (a read that needed the primary only for its calls): the plain
            # read, built once.
            return _PLAIN_READS.get(stmt.first_keyword) or _plain_read(stmt.first_keyword)
        return dataclasses.replace(stmt, must_use_primary=False, primary_reason=None, functions=())


def _plain_read(head: str) -> Classification:
    return Classification(kind=StatementKind.READ, first_keyword=head)


# The fields a read that needs the primary only for its calls leaves at their defaults.
_SET_BY_CALLS: Final = ("kind", "first_keyword", "must_use_primary", "primary_reason", "functions")
_OTHER = tuple(f for f in dataclasses.fields(Classification) if f.name not in _SET_BY_CALLS)
_OTHER_FIELDS: Final = operator.attrgetter(*(field.name for field in _OTHER))
_OTHER_DEFAULTS: Final = tuple(field.default for field in _OTHER)
_PLAIN_READS: Final = {
    head: _plain_read(head)
    for head in ("SELECT", "WITH", "TABLE", "VALUES", "SHOW", "DESC", "DESCRIBE", "EXPLAIN")
}

#: The rules of :func:`consistent.classify.classify` when none are given: the built-ins of
#: both families, nothing declared.
DEFAULT_RULES: Final = FunctionRules()
