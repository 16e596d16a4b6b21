"""What the classifier says about a statement: kinds, reasons, hints, the result type.

The classifier describes the SQL; it decides nothing.  ``consistent.policy`` reads a
:class:`Classification` together with the session's state (transaction, pins, level) and the
routing hint, and chooses a server.  Every reason is a short stable string because it ends up
in a span attribute (see DESIGN "How a read gets to a replica", step 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

__all__ = [
    "LEVEL_NAMES",
    "Classification",
    "PinReason",
    "PrimaryReason",
    "RouteHint",
    "RouteTarget",
    "StatementKind",
]


class StatementKind(IntEnum):
    """What a statement is, as far as routing cares.

    Statement families as the manual groups them:
    https://dev.mysql.com/doc/refman/8.4/en/sql-statements.html and
    https://mariadb.com/kb/en/sql-statements/.
    """

    #: Reads data and may run on a replica unless ``must_use_primary`` says otherwise.
    READ = 1
    #: Changes data (DML, ``CALL``).
    WRITE = 2
    #: ``BEGIN``, ``START TRANSACTION`` (see ``Classification.read_only``).
    TRANSACTION_BEGIN = 3
    #: ``COMMIT`` (see ``Classification.chain``).
    COMMIT = 4
    #: ``ROLLBACK`` of the whole transaction.
    ROLLBACK = 5
    #: ``SAVEPOINT name``.
    SAVEPOINT = 6
    #: ``RELEASE SAVEPOINT name``.
    RELEASE_SAVEPOINT = 7
    #: ``ROLLBACK TO [SAVEPOINT] name``: the transaction goes on.
    ROLLBACK_TO_SAVEPOINT = 8
    #: ``SET`` of variables, ``SET NAMES``/``CHARACTER SET``, ``USE``.
    SESSION_STATE = 9
    #: Data definition and account management (``CREATE``, ``ALTER``, ``GRANT``…).
    DDL = 10
    #: ``LOCK``/``UNLOCK TABLES``, ``LOCK INSTANCE``, ``FLUSH TABLES WITH READ LOCK``.
    LOCK = 11
    #: Everything else (administration, prepared statements, ``DO``, ``HANDLER``, ``XA``…).
    OTHER = 12

    @property
    def is_transaction_control(self) -> bool:
        """True for the kinds that begin, end or structure a transaction."""
        return StatementKind.TRANSACTION_BEGIN <= self <= StatementKind.ROLLBACK_TO_SAVEPOINT


class PrimaryReason(StrEnum):
    """Why a statement must run on the primary (``Classification.primary_reason``)."""

    #: ``SELECT … FOR UPDATE`` (with ``NOWAIT``/``SKIP LOCKED``/``OF``): takes row locks.
    FOR_UPDATE = "for_update"
    #: ``SELECT … FOR SHARE``: takes shared row locks.
    FOR_SHARE = "for_share"
    #: ``SELECT … LOCK IN SHARE MODE``: takes shared row locks.
    LOCK_IN_SHARE_MODE = "lock_in_share_mode"
    #: A named-lock function: ``GET_LOCK``, ``RELEASE_LOCK``, ``RELEASE_ALL_LOCKS``,
    #: ``IS_FREE_LOCK``, ``IS_USED_LOCK``; locks live in one server.
    GET_LOCK = "get_lock"
    #: ``LAST_INSERT_ID()`` or ``@@last_insert_id``/``@@identity``: the primary session's value.
    LAST_INSERT_ID = "last_insert_id"
    #: ``FOUND_ROWS()``: counts the previous ``SQL_CALC_FOUND_ROWS`` query's rows.
    FOUND_ROWS = "found_rows"
    #: ``ROW_COUNT()``: rows changed by the previous statement, a write on the primary.
    ROW_COUNT = "row_count"
    #: ``CONNECTION_ID()``: callers use it to ``KILL`` or to find their primary session.
    CONNECTION_ID = "connection_id"
    #: ``SELECT SQL_CALC_FOUND_ROWS``: a later ``FOUND_ROWS()`` must find it on the primary.
    SQL_CALC_FOUND_ROWS = "sql_calc_found_rows"
    #: ``SELECT … INTO OUTFILE|DUMPFILE|@var`` (and ``EXPLAIN … INTO @var``).
    SELECT_INTO = "select_into"
    #: ``@v := …`` or ``SET @v = …``: a user variable is written.
    USER_VARIABLE_ASSIGNMENT = "user_variable_assignment"
    #: ``@v`` is read: user variables exist only in the primary session.
    USER_VARIABLE = "user_variable"
    #: ``NEXTVAL``/``LASTVAL``/``SETVAL``, ``NEXT|PREVIOUS VALUE FOR``, ``seq.nextval``.
    SEQUENCE = "sequence"
    #: A call of a function that is not a side-effect-free built-in (a stored or loadable
    #: function, an unknown name): it may write.  ``Classification.functions`` names them.
    #: Reported only when nothing else needs the primary.
    FUNCTION_CALL = "function_call"
    #: DML: ``INSERT``, ``REPLACE``, ``UPDATE``, ``DELETE``, ``LOAD DATA``, ``WITH … UPDATE``.
    WRITE = "write"
    #: ``CALL``: a procedure may write, lock or set variables.
    CALL = "call"
    #: Data definition and account management.
    DDL = "ddl"
    #: ``DO expr``: evaluated for its side effects.
    DO = "do"
    #: ``HANDLER``: a cursor opened in one server's session.
    HANDLER = "handler"
    #: ``LOCK``/``UNLOCK`` statements.
    LOCK_TABLES = "lock_tables"
    #: ``SET``/``USE``: run on the primary; replicas get a replay when they are used.
    SESSION_STATE = "session_state"
    #: SQL-level ``PREPARE``/``EXECUTE``/``DEALLOCATE PREPARE``.
    PREPARED_STATEMENT = "prepared_statement"
    #: ``XA`` transactions.
    XA = "xa"
    #: Server administration (``KILL``, ``FLUSH``, ``RESET``, ``ANALYZE TABLE``, replication…).
    ADMIN = "admin"
    #: Asks about one server (``SHOW MASTER STATUS``, ``SHOW PROCESSLIST``, ``EXPLAIN FOR
    #: CONNECTION``…): the logical connection's server is the primary.
    SERVER_STATE = "server_state"
    #: MariaDB ``BEGIN NOT ATOMIC … END``: a compound statement that may do anything.
    COMPOUND_STATEMENT = "compound_statement"
    #: A multi-statement whose parts are not all replica-safe reads.
    MULTI_STATEMENT = "multi_statement"
    #: Longer than ``MAX_CLASSIFIED_LENGTH``: only its first bytes were read, and what follows
    #: them (a function call, ``FOR UPDATE``, another statement) could tie it to the primary.
    OVERSIZED = "oversized_statement"
    #: Empty or not recognised: the safe answer is the primary.
    UNKNOWN = "unknown"


class PinReason(StrEnum):
    """Why the whole session must stay on the primary (``Classification.pins_session``).

    A pin describes state that a replica connection cannot reproduce; the policy decides how
    long it lasts (``unpins_session`` names the statements that clearly end one).
    """

    #: ``CREATE TEMPORARY TABLE``: the table exists only in the primary session.
    TEMPORARY_TABLE = "temporary_table"
    #: A user variable was written (``SET @v``, ``@v :=``, ``INTO @v``, ``CALL p(@v)``) or a
    #: session value depends on one.
    USER_VARIABLE = "user_variable"
    #: ``LOCK TABLES`` or ``FLUSH TABLES … WITH READ LOCK``/``FOR EXPORT``: held until
    #: ``UNLOCK TABLES``.
    LOCK_TABLES = "lock_tables"
    #: ``LOCK INSTANCE FOR BACKUP``: held until ``UNLOCK INSTANCE``.
    LOCK_INSTANCE = "lock_instance"
    #: ``GET_LOCK()``: the named lock belongs to the primary session.
    GET_LOCK = "get_lock"
    #: SQL-level ``PREPARE``: the statement handle exists only in the primary session.
    PREPARE = "prepare"
    #: ``SET autocommit = 0``: every statement is in a transaction until autocommit is back.
    AUTOCOMMIT_OFF = "autocommit_off"
    #: ``HANDLER … OPEN``: the handler belongs to the primary session.
    HANDLER = "handler"
    #: ``XA``: a distributed transaction bound to the primary session.
    XA_TRANSACTION = "xa_transaction"
    #: A session setting whose value cannot be replayed elsewhere (e.g. set from a subquery).
    SESSION_STATE = "session_state"
    #: An oversized statement whose first bytes do not show one plain read, write or data
    #: definition: what its unread part did to the session is unknown.
    OVERSIZED = "oversized_statement"


class RouteTarget(StrEnum):
    """Where a routing hint asks the statement to go."""

    PRIMARY = "primary"
    REPLICA = "replica"


#: The level names a hint may carry (the values of ``consistent.policy.Level``).
LEVEL_NAMES: Final = frozenset({"eventual", "read_own_writes", "read_all_writes", "read_latest"})


@dataclass(frozen=True, slots=True)
class RouteHint:
    """A routing hint from a leading ``/* consistent: … */`` comment.

    ``/* consistent: primary */``, ``/* consistent: replica */``,
    ``/* consistent: level=eventual */``, ``/* consistent: level=eventual max_lag=2.5 */``;
    items are separated by spaces or commas.  ``level`` is one of :data:`LEVEL_NAMES`;
    ``max_lag`` is in seconds.
    """

    target: RouteTarget | None = None
    level: str | None = None
    max_lag: float | None = None


@dataclass(frozen=True, slots=True)
class Classification:
    """Everything routing needs to know about one statement (or one multi-statement).

    For a multi-statement, ``parts`` holds one classification per statement in order and the
    top-level fields summarise them: ``first_keyword`` is the first part's, ``kind`` (with
    ``read_only`` and ``chain``) comes from the first part that is not a read (the first part
    when all are reads), ``must_use_primary`` is true unless
    every part is a replica-safe read, ``functions`` are concatenated, ``pins_session`` is the
    first pin, ``unpins_session``,
    ``sets_autocommit`` and ``schema`` are the last ones set, ``session_variables`` are
    concatenated.  A policy that tracks transactions walks ``parts``.
    """

    kind: StatementKind
    #: The first keyword, upper-case (``SELECT``, ``WITH``, ``SET``…), for ``db.operation.name``;
    #: empty when the text has no token.
    first_keyword: str
    #: The statement itself needs the primary, whatever the session state and level.
    must_use_primary: bool = False
    #: Why, as a :class:`PrimaryReason` value (the first rule that fired, in text order;
    #: ``function_call`` only when no other rule fired).
    primary_reason: str | None = None
    #: The functions called that a replica may not run: stored, loadable or unknown ones, and
    #: built-ins of one server family only, in text order.  Built-ins are upper-case; other
    #: names are as written (``shop.audit``, backticks kept on an unqualified quoted name).
    #: :class:`~consistent.classify.functions.FunctionRules` takes off those a replica may run.
    functions: tuple[str, ...] = ()
    #: The statement creates state only the primary session has (a :class:`PinReason` value).
    pins_session: str | None = None
    #: The statement clearly ends a pin (``UNLOCK TABLES`` → ``lock_tables``, ``SET autocommit
    #: = 1`` → ``autocommit_off``, ``UNLOCK INSTANCE`` → ``lock_instance``).
    unpins_session: str | None = None
    #: ``START TRANSACTION READ ONLY``.
    read_only: bool = False
    #: ``COMMIT AND CHAIN``/``ROLLBACK AND CHAIN``: a new transaction starts at once.
    chain: bool = False
    #: The statement commits an open transaction first (DDL, ``BEGIN``, ``LOCK TABLES``…).
    implicit_commit: bool = False
    #: ``SET autocommit``: the new session value (``None``: not set by this statement).
    sets_autocommit: bool | None = None
    #: Session settings to replay on replica connections, as ``(name, value_sql)``; see
    #: :func:`consistent.classify.replay_sql`.
    session_variables: tuple[tuple[str, str], ...] = ()
    #: ``USE``: the new default schema.
    schema: str | None = None
    #: Diagnostics about the previous statement (``SHOW WARNINGS``, ``GET DIAGNOSTICS``,
    #: ``@@warning_count``): run it where the previous statement ran.
    follows_previous: bool = False
    #: The routing hint of the leading comment; the fields above ignore it.
    hint: RouteHint | None = None
    #: Why a ``/* consistent: … */`` comment was ignored (``hint`` is then ``None``).
    hint_error: str | None = None
    #: More than one statement outside strings and comments.
    is_multi_statement: bool = False
    #: The statements of a multi-statement, in order (empty for a single statement).
    parts: tuple[Classification, ...] = ()

    @property
    def replica_safe(self) -> bool:
        """A read that nothing in its text ties to the primary."""
        return self.kind is StatementKind.READ and not self.must_use_primary
