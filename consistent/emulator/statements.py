"""Statement dispatch: which handler runs a statement, and what kind of statement it is.

The kind decides transaction and tracker behaviour around the handler: DDL commits the open
transaction first, ROLLBACK and SAVEPOINT never make the GTID tracker collect, diagnostics
(SHOW WARNINGS) keep the previous statement's warnings.  Before a statement runs,
``gtid_pre_statement_checks`` (``sql/rpl_gtid_execution.cc``) applies, in mysqld's order:

* a statement that commits implicitly (DDL, BEGIN…) inside a transaction while ``GTID_NEXT``
  is ``'uuid:n'`` fails with 1778 (nothing is committed);
* statements other than SET, SELECT, DO, SHOW, USE, COMMIT, ROLLBACK and BEGIN fail with 1837
  while ``GTID_NEXT`` is undefined (after the transaction that used an assigned GTID ended);
* with ``GTID_NEXT = 'ANONYMOUS'`` such a statement takes anonymous ownership again;
* inside an XA transaction, transaction control and implicit commits fail with 1399
  (:mod:`consistent.emulator.xa`).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Final

from consistent.emulator.errors import ER, not_supported, parse_error, sql_error
from consistent.emulator.gtid_state import GtidNextType
from consistent.emulator.results import StmtResult
from consistent.emulator.sql import query
from consistent.emulator.sql.lexer import Statement, Tok, TokenStream
from consistent.emulator.tracker import TxReadFlags
from consistent.emulator.xa import XaState
from consistent.emulator.xa import rmfail as xa_rmfail

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = [
    "NO_COLLECT",
    "Handler",
    "Kind",
    "causes_implicit_commit",
    "handler_for",
    "pre_statement_checks",
]

Handler = Callable[["Session", Statement], Awaitable[StmtResult]]


class Kind(Enum):
    """Statement classes that matter for transactions and trackers."""

    QUERY = "query"
    DML = "dml"
    DDL = "ddl"
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    SET = "set"
    SHOW = "show"
    DIAGNOSTIC = "diagnostic"
    USE = "use"
    ADMIN = "admin"
    XA = "xa"


#: Kinds after which the GTID collector does not run (``shall_collect`` excludes ROLLBACK
#: and ROLLBACK TO SAVEPOINT; BEGIN and SAVEPOINT end inside a transaction anyway).
NO_COLLECT: Final = frozenset({Kind.BEGIN, Kind.ROLLBACK, Kind.SAVEPOINT})
_UNDEFINED_GTID_OK: Final = frozenset(
    {
        Kind.QUERY,
        Kind.SET,
        Kind.COMMIT,
        Kind.ROLLBACK,
        Kind.BEGIN,
        Kind.SHOW,
        Kind.DIAGNOSTIC,
        Kind.USE,
    }
)
_SKIPPABLE: Final = frozenset({Kind.DML, Kind.DDL, Kind.XA})
#: Statements that cannot change data (``is_stmt_innocent``): no ANONYMOUS ownership.
_INNOCENT: Final = frozenset({Kind.QUERY, Kind.SET, Kind.SHOW, Kind.DIAGNOSTIC, Kind.USE})
#: ADMIN statements that commit the open transaction first (``CF_IMPLICIT_COMMIT_BEGIN``).
_COMMITTING_ADMIN: Final = frozenset({"FLUSH", "RESET", "PURGE"})


def causes_implicit_commit(statement: Statement, kind: Kind) -> bool:
    """Whether the statement commits an open transaction before it runs (BEGIN counts, as
    in ``gtid_pre_statement_checks``); temporary-table DDL does not."""
    if kind is Kind.BEGIN:
        return True
    if kind is Kind.DDL:
        return statement.words(2)[1:] != ("TEMPORARY",)
    return kind is Kind.ADMIN and statement.first in _COMMITTING_ADMIN


def pre_statement_checks(session: Session, kind: Kind, statement: Statement) -> None:
    """``gtid_pre_statement_checks`` (1778, 1837, ANONYMOUS ownership) and the XA state's
    checks (1399); see the module docstring."""
    gtid_next = session.gtid_next.type
    implicit_commit = causes_implicit_commit(statement, kind)
    if implicit_commit and session.in_txn and gtid_next is GtidNextType.ASSIGNED:
        raise sql_error(ER.CANT_DO_IMPLICIT_COMMIT_IN_TRX_WHEN_GTID_NEXT_IS_SET)
    if gtid_next is GtidNextType.UNDEFINED and kind not in _UNDEFINED_GTID_OK:
        raise sql_error(ER.GTID_NEXT_TYPE_UNDEFINED_GTID, str(session.gtid_next))
    if gtid_next is GtidNextType.ANONYMOUS and kind not in _INNOCENT:
        session.owns_anonymous = True
    if session.xa_state is not XaState.NOTR:
        _xa_checks(session, kind, statement, implicit_commit)


def _xa_checks(session: Session, kind: Kind, statement: Statement, implicit_commit: bool) -> None:
    """Inside an XA transaction: no COMMIT, ROLLBACK (but to a savepoint) or implicit commit;
    in IDLE no data change either (reads are refused where they touch a table)."""
    control = kind in (Kind.COMMIT, Kind.ROLLBACK) and statement.words(2)[1:] != ("TO",)
    if control or implicit_commit or (session.xa_state is XaState.IDLE and kind is Kind.DML):
        raise xa_rmfail(session)


async def _skipped(session: Session, statement: Statement) -> StmtResult:
    if not session.in_txn:
        session.rollback_transaction()
    return StmtResult()


async def _skipped_xa(session: Session, statement: Statement) -> StmtResult:
    """An XA transaction whose GTID was executed: XA START opens the skipped transaction (so
    the statements in it are skipped as in BEGIN … COMMIT), XA PREPARE / COMMIT / ROLLBACK
    end it; nothing is run or logged."""
    verb = statement.words(2)[1:]
    if verb in (("START",), ("BEGIN",)):
        if not session.in_txn:
            session.begin_explicit(read_only=None, snapshot=False)
    elif verb in (("PREPARE",), ("COMMIT",), ("ROLLBACK",)):
        session.rollback_transaction()
    return StmtResult()


# ----- transaction control -------------------------------------------------------------------


async def _begin(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    read_only: bool | None = None
    snapshot = False
    if ts.accept("BEGIN"):
        ts.accept("WORK")
    else:
        ts.expect("START", "TRANSACTION")
        while not ts.at_end():
            if ts.accept("READ", "ONLY"):
                read_only = True
            elif ts.accept("READ", "WRITE"):
                read_only = False
            elif ts.accept("WITH", "CONSISTENT", "SNAPSHOT"):
                snapshot = True
            else:
                raise ts.error()
            if not ts.accept(","):
                break
    ts.expect_end()
    await session.implicit_commit()
    session.begin_explicit(read_only=read_only, snapshot=snapshot)
    if read_only is not None:
        session.trackers.transaction.set_read_flags(
            TxReadFlags.READ_ONLY if read_only else TxReadFlags.READ_WRITE
        )
    return StmtResult()


def _chain_release(ts: TokenStream) -> tuple[bool, bool]:
    chain = release = False
    if ts.accept("AND", "NO", "CHAIN"):
        pass
    elif ts.accept("AND", "CHAIN"):
        chain = True
    if ts.accept("NO", "RELEASE"):
        pass
    elif ts.accept("RELEASE"):
        release = True
    ts.expect_end()
    return chain, release


async def _commit(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("COMMIT")
    ts.accept("WORK")
    chain, release = _chain_release(ts)
    read_only = session.txn_read_only
    if session.in_txn or session.owns_gtid or session.skip_transaction:
        await session.commit_transaction()
    if chain:
        session.begin_explicit(read_only=read_only, snapshot=False)
    if release:
        session.killed = True
    return StmtResult()


async def _rollback(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("ROLLBACK")
    ts.accept("WORK")
    if ts.accept("TO"):
        ts.accept("SAVEPOINT")
        name = ts.ident()
        ts.expect_end()
        _rollback_to(session, name)
        return StmtResult()
    chain, release = _chain_release(ts)
    read_only = session.txn_read_only
    if session.in_txn or session.owns_gtid or session.skip_transaction:
        session.rollback_transaction()
    if chain:
        session.begin_explicit(read_only=read_only, snapshot=False)
    if release:
        session.killed = True
    return StmtResult()


def _find_savepoint(session: Session, name: str) -> int:
    for index, (existing, _) in enumerate(session.txn_savepoints):
        if existing.lower() == name.lower():
            return index
    raise sql_error(ER.SP_DOES_NOT_EXIST, "SAVEPOINT", name)


def _rollback_to(session: Session, name: str) -> None:
    index = _find_savepoint(session, name)
    stored, changes = session.txn_savepoints[index]
    session.store.rollback_to(stored)
    del session.txn_savepoints[index + 1 :]
    del session.txn_changes[changes:]


async def _savepoint(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    if ts.accept("RELEASE"):
        ts.expect("SAVEPOINT")
        name = ts.ident()
        ts.expect_end()
        index = _find_savepoint(session, name)
        session.store.release_savepoint(session.txn_savepoints[index][0])
        del session.txn_savepoints[index:]
        return StmtResult()
    ts.expect("SAVEPOINT")
    name = ts.ident()
    ts.expect_end()
    if not session.in_txn and session.autocommit:
        return StmtResult()
    session.in_txn = True
    session.txn_savepoints = [
        (n, c) for n, c in session.txn_savepoints if n.lower() != name.lower()
    ]
    session.store.savepoint(name)
    session.txn_savepoints.append((name, len(session.txn_changes)))
    return StmtResult()


# ----- session and server administration -----------------------------------------------------


async def _use(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("USE")
    name = ts.ident()
    ts.expect_end()
    session.change_database(name)
    return StmtResult()


async def _kill(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("KILL")
    query_only = ts.accept("QUERY")
    if not query_only:
        ts.accept("CONNECTION")
    target = ts.number()
    ts.expect_end()
    if target == session.connection_id:
        if not query_only:
            session.killed = True
        raise sql_error(ER.QUERY_INTERRUPTED)
    await session.server.kill(target, query_only=query_only)
    return StmtResult()


async def _flush(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("FLUSH")
    ts.accept("NO_WRITE_TO_BINLOG") or ts.accept("LOCAL")
    await session.implicit_commit()
    words = [t.upper for t in ts.tokens[ts.pos :] if t.kind is Tok.WORD]
    if words[:2] == ["BINARY", "LOGS"] or words[:1] == ["LOGS"]:
        await session.server.flush_binary_logs()
    elif not words or words[0] not in (
        "PRIVILEGES",
        "TABLES",
        "TABLE",
        "STATUS",
        "HOSTS",
        "OPTIMIZER_COSTS",
        "USER_RESOURCES",
        "ENGINE",
        "ERROR",
        "GENERAL",
        "SLOW",
        "RELAY",
    ):
        raise ts.error()
    return StmtResult()


async def _reset(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("RESET")
    if ts.peek_upper() == "MASTER" and not session.server.config.reset_master:
        raise ts.error()  # 8.4 has only RESET BINARY LOGS AND GTIDS
    if ts.accept("MASTER") or ts.accept("BINARY", "LOGS", "AND", "GTIDS"):
        if ts.accept("TO"):
            raise not_supported("RESET MASTER TO")
        ts.expect_end()
        await session.implicit_commit()
        await session.server.reset_binary_logs_and_gtids()
        return StmtResult()
    if ts.peek_upper() in ("REPLICA", "SLAVE"):
        raise not_supported("RESET REPLICA on a server without replication channels")
    if ts.accept("QUERY", "CACHE") or ts.accept("PERSIST"):
        return StmtResult()
    raise ts.error()


async def _purge(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("PURGE")
    if not (ts.accept("BINARY") or ts.accept("MASTER")):
        raise ts.error()
    ts.expect("LOGS")
    if ts.accept("BEFORE"):
        raise not_supported("PURGE BINARY LOGS BEFORE")
    ts.expect("TO")
    name = ts.string()
    ts.expect_end()
    if not session.server.purge_binary_logs_to(name):
        raise sql_error(ER.UNKNOWN_ERROR, "Target log not found in binlog index")
    return StmtResult()


async def _do(session: Session, statement: Statement) -> StmtResult:
    text = (
        "SELECT " + statement.text[statement.tokens[1].start :] if len(statement.tokens) > 1 else ""
    )
    if not text:
        raise parse_error("")
    await query.run_select_text(session, text)
    return StmtResult()


async def _unlock(session: Session, statement: Statement) -> StmtResult:
    ts = TokenStream(statement)
    ts.expect("UNLOCK")
    if not (ts.accept("TABLES") or ts.accept("TABLE") or ts.accept("INSTANCE")):
        raise ts.error()
    ts.expect_end()
    return StmtResult()


def _unsupported(what: str) -> Handler:
    async def handler(session: Session, statement: Statement) -> StmtResult:
        raise not_supported(what)

    return handler


# ----- dispatch ----------------------------------------------------------------------------


def _lazy(module: str, name: str) -> Handler:
    """A handler that lives in the SQL package (imported on first use, then remembered: the
    import machinery's look-up costs more than some statements)."""
    resolved: list[Handler] = []

    async def handler(session: Session, statement: Statement) -> StmtResult:
        if not resolved:
            resolved.append(getattr(importlib.import_module(module), name))
        return await resolved[0](session, statement)

    return handler


_QUERY = "consistent.emulator.sql.query"
_WRITES = "consistent.emulator.sql.writes"
_INSERT = "consistent.emulator.sql.insert"
_DDL = "consistent.emulator.sql.schema_ops"
_SHOW = "consistent.emulator.sql.show"
_SET = "consistent.emulator.sql.setstmt"
_PS = "consistent.emulator.prepared"

_FIRST_WORD: Final[dict[str, tuple[Handler, Kind]]] = {
    "SELECT": (_lazy(_QUERY, "run_select"), Kind.QUERY),
    "WITH": (_lazy(_QUERY, "run_select"), Kind.QUERY),
    "TABLE": (_lazy(_QUERY, "run_select"), Kind.QUERY),
    "VALUES": (_unsupported("VALUES statement"), Kind.QUERY),
    "INSERT": (_lazy(_INSERT, "run_insert"), Kind.DML),
    "REPLACE": (_lazy(_INSERT, "run_insert"), Kind.DML),
    "UPDATE": (_lazy(_WRITES, "run_update"), Kind.DML),
    "DELETE": (_lazy(_WRITES, "run_delete"), Kind.DML),
    "CREATE": (_lazy(_DDL, "run_create"), Kind.DDL),
    "DROP": (_lazy(_DDL, "run_drop"), Kind.DDL),
    "ALTER": (_lazy(_DDL, "run_alter"), Kind.DDL),
    "RENAME": (_lazy(_DDL, "run_rename"), Kind.DDL),
    "TRUNCATE": (_lazy(_DDL, "run_truncate"), Kind.DDL),
    "BEGIN": (_begin, Kind.BEGIN),
    "COMMIT": (_commit, Kind.COMMIT),
    "ROLLBACK": (_rollback, Kind.ROLLBACK),
    "SAVEPOINT": (_savepoint, Kind.SAVEPOINT),
    "RELEASE": (_savepoint, Kind.SAVEPOINT),
    "SET": (_lazy(_SET, "run_set"), Kind.SET),
    "USE": (_use, Kind.USE),
    "SHOW": (_lazy(_SHOW, "run_show"), Kind.SHOW),
    "DESCRIBE": (_lazy(_SHOW, "run_describe"), Kind.SHOW),
    "DESC": (_lazy(_SHOW, "run_describe"), Kind.SHOW),
    "EXPLAIN": (_lazy(_SHOW, "run_describe"), Kind.SHOW),
    "KILL": (_kill, Kind.ADMIN),
    "FLUSH": (_flush, Kind.ADMIN),
    "RESET": (_reset, Kind.ADMIN),
    "PURGE": (_purge, Kind.ADMIN),
    "DO": (_do, Kind.QUERY),
    "UNLOCK": (_unlock, Kind.ADMIN),
    "PREPARE": (_lazy(_PS, "run_sql_prepare"), Kind.SET),
    "EXECUTE": (_lazy(_PS, "run_sql_execute"), Kind.DML),
    "DEALLOCATE": (_lazy(_PS, "run_sql_deallocate"), Kind.SET),
    "LOCK": (_unsupported("LOCK TABLES"), Kind.ADMIN),
    "XA": (_lazy("consistent.emulator.xa", "run_xa"), Kind.XA),
    "GRANT": (_unsupported("GRANT"), Kind.DDL),
    "REVOKE": (_unsupported("REVOKE"), Kind.DDL),
    "CALL": (_unsupported("CALL"), Kind.DML),
    "LOAD": (_unsupported("LOAD DATA"), Kind.DML),
    "HANDLER": (_unsupported("HANDLER"), Kind.QUERY),
    "ANALYZE": (_unsupported("ANALYZE TABLE"), Kind.ADMIN),
    "OPTIMIZE": (_unsupported("OPTIMIZE TABLE"), Kind.ADMIN),
    "CHECK": (_unsupported("CHECK TABLE"), Kind.ADMIN),
    "CHANGE": (_unsupported("CHANGE REPLICATION SOURCE on this server"), Kind.ADMIN),
    "STOP": (_unsupported("STOP REPLICA on this server"), Kind.ADMIN),
    "INSTALL": (_unsupported("INSTALL"), Kind.ADMIN),
    "UNINSTALL": (_unsupported("UNINSTALL"), Kind.ADMIN),
    "SHUTDOWN": (_unsupported("SHUTDOWN"), Kind.ADMIN),
}


def handler_for(
    statement: Statement, extensions: Mapping[str, tuple[Handler, Kind]] | None = None
) -> tuple[Handler, Kind]:
    """The handler and kind of a statement; unknown statements are 1064.

    ``extensions`` (the server's ``statement_handlers``) is consulted first, keyed by the first
    two words (``"START REPLICA"``) or the first word (``"CHANGE"``), upper case.
    """
    if extensions:
        words = statement.words(2)
        for key in (" ".join(words), words[0] if words else ""):
            if key in extensions:
                return extensions[key]
    first = statement.first
    if first == "START":
        if statement.words(2)[1:] == ("TRANSACTION",):
            return _begin, Kind.BEGIN
        return _unsupported("START REPLICA on this server"), Kind.ADMIN
    if first == "SHOW":
        second = statement.words(3)[1:]
        if second[:1] in (("WARNINGS",), ("ERRORS",)) or second[:2] == ("COUNT", "("):
            return _lazy(_SHOW, "run_show"), Kind.DIAGNOSTIC
    entry = _FIRST_WORD.get(first)
    if entry is None:

        async def invalid(session: Session, statement: Statement) -> StmtResult:
            raise parse_error(statement.text)

        return invalid, Kind.ADMIN
    return entry


def maybe_skip(session: Session, handler: Handler, kind: Kind, statement: Statement) -> Handler:
    """A transaction whose assigned GTID is already executed is skipped silently."""
    if session.skip_transaction and kind in _SKIPPABLE:
        if kind is Kind.XA:
            return handler if statement.words(2)[1:] == ("RECOVER",) else _skipped_xa
        return _skipped
    return handler
