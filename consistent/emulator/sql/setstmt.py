"""SET: system variables, user variables, NAMES, CHARACTER SET and TRANSACTION.

Forms: ``SET [GLOBAL|SESSION|LOCAL|PERSIST] var = expr``, ``SET @@[global.|session.]var = expr``,
``SET @user = expr`` (``:=`` too), ``SET NAMES cs [COLLATE c]``, ``SET CHARACTER SET cs``,
``SET [GLOBAL|SESSION] TRANSACTION ISOLATION LEVEL … , READ ONLY|READ WRITE``; several
assignments separated by commas.  A bare word on the right of a system variable is a string
(``SET autocommit=ON``, ``SET session_track_gtids=OWN_GTID``); ``DEFAULT`` restores the default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from consistent.emulator.errors import ER, not_supported, sql_error
from consistent.emulator.results import StmtResult
from consistent.emulator.sql.lexer import Statement, Tok, Token, TokenStream
from consistent.emulator.sql.query import evaluate_expressions
from consistent.emulator.sql.translate import parse_mysql
from consistent.emulator.sysvars import CHARSETS, COLLATIONS, default_value
from consistent.emulator.tracker import TxReadFlags

if TYPE_CHECKING:
    from consistent.emulator.session import Session

__all__ = ["run_set"]

_PLAIN_STRING: Final = re.compile(r"'[^'\\\x00-\x1f\x7f]*'")
_PLAIN_INT: Final = re.compile(r"0|[1-9][0-9]{0,17}")
_SCOPES: Final = {
    "GLOBAL": True,
    "PERSIST": True,
    "PERSIST_ONLY": True,
    "SESSION": False,
    "LOCAL": False,
}
_ISOLATION: Final = {
    ("READ", "UNCOMMITTED"): "READ-UNCOMMITTED",
    ("READ", "COMMITTED"): "READ-COMMITTED",
    ("REPEATABLE", "READ"): "REPEATABLE-READ",
    ("SERIALIZABLE",): "SERIALIZABLE",
}
_TRACKER_ISOLATION: Final = {
    "READ-UNCOMMITTED": "READ UNCOMMITTED",
    "READ-COMMITTED": "READ COMMITTED",
    "REPEATABLE-READ": "REPEATABLE READ",
    "SERIALIZABLE": "SERIALIZABLE",
}


@dataclass
class _Assignment:
    kind: str  # "system" | "user"
    name: str
    global_scope: bool
    value: list[Token]


def _split_value(ts: TokenStream) -> list[Token]:
    tokens: list[Token] = []
    depth = 0
    while not ts.at_end():
        token = ts.peek()
        assert token is not None
        if token.kind is Tok.OP and token.text == "(":
            depth += 1
        elif token.kind is Tok.OP and token.text == ")":
            depth -= 1
        elif depth == 0 and token.kind is Tok.OP and token.text == ",":
            break
        tokens.append(ts.next())
    if not tokens:
        raise ts.error()
    return tokens


def _variable_target(token: Token, default_global: bool) -> tuple[str, str, bool]:
    text = token.text
    if text.startswith("@@"):
        body = text[2:]
        scope = default_global
        if "." in body:
            prefix, rest = body.split(".", 1)
            if prefix.upper() in _SCOPES:
                scope = _SCOPES[prefix.upper()]
                body = rest
        return "system", body, scope
    name = text[1:]
    if name[:1] in "`'\"":
        name = name[1:-1]
    return "user", name, False


async def _value(
    session: Session, tokens: list[Token], statement: Statement, system: bool
) -> object:
    if len(tokens) == 1 and tokens[0].kind is Tok.WORD and system:
        word = tokens[0].text
        if word.upper() in ("TRUE", "FALSE"):
            return 1 if word.upper() == "TRUE" else 0
        if word.upper() != "NULL":
            return word
    if len(tokens) == 1:
        # A plain literal is its own value: what ``SELECT literal`` gives without running it
        # (replication appliers set GTID_NEXT = '…' for every transaction).
        token = tokens[0]
        if token.kind is Tok.STRING and _PLAIN_STRING.fullmatch(token.text):
            return token.text[1:-1]
        if token.kind is Tok.NUMBER and _PLAIN_INT.fullmatch(token.text):
            return int(token.text)
    text = statement.text[tokens[0].start : tokens[-1].end]
    tree = parse_mysql("SELECT " + text)
    expressions = list(tree.expressions) if hasattr(tree, "expressions") else []
    if len(expressions) != 1:
        raise sql_error(ER.PARSE_ERROR, text, 1)
    values = await evaluate_expressions(session, expressions)
    return values[0]


def _is_default(tokens: list[Token]) -> bool:
    return len(tokens) == 1 and tokens[0].kind is Tok.WORD and tokens[0].upper == "DEFAULT"


async def _set_transaction(session: Session, ts: TokenStream, global_scope: bool | None) -> None:
    characteristics: list[tuple[str, object]] = []
    while True:
        if ts.accept("ISOLATION", "LEVEL"):
            for words, level in _ISOLATION.items():
                if ts.accept(*words):
                    characteristics.append(("transaction_isolation", level))
                    break
            else:
                raise ts.error()
        elif ts.accept("READ", "ONLY"):
            characteristics.append(("transaction_read_only", True))
        elif ts.accept("READ", "WRITE"):
            characteristics.append(("transaction_read_only", False))
        else:
            raise ts.error()
        if not ts.accept(","):
            break
    ts.expect_end()
    for name, value in characteristics:
        if global_scope is None:
            if session.in_txn:
                raise sql_error(ER.CANT_CHANGE_TX_CHARACTERISTICS)
            tracker = session.trackers.transaction
            if name == "transaction_read_only":
                session.next_read_only = bool(value)
                tracker.set_read_flags(TxReadFlags.READ_ONLY if value else TxReadFlags.READ_WRITE)
            else:
                session.next_isolation = str(value)
                tracker.set_isolation(_TRACKER_ISOLATION[str(value)])
        else:
            await session.set_variable(name, value, global_scope=global_scope)


async def _set_names(session: Session, ts: TokenStream) -> None:
    charset = "utf8mb4" if ts.accept("DEFAULT") else ts.ident().lower()
    collation = None
    if ts.accept("COLLATE"):
        collation = ts.ident().lower()
    if charset not in CHARSETS:
        raise sql_error(ER.UNKNOWN_CHARACTER_SET, charset)
    if collation is not None and collation not in COLLATIONS:
        raise sql_error(ER.UNKNOWN_COLLATION, collation)
    for name in ("character_set_client", "character_set_results", "character_set_connection"):
        await session.set_variable(name, charset, global_scope=False)
    if collation is not None:
        await session.set_variable("collation_connection", collation, global_scope=False)


async def run_set(session: Session, statement: Statement) -> StmtResult:
    """Run a SET statement."""
    ts = TokenStream(statement)
    ts.expect("SET")
    if ts.peek_upper() in _SCOPES and ts.peek_upper(1) == "TRANSACTION":
        scope = _SCOPES[ts.next().upper]
        ts.expect("TRANSACTION")
        await _set_transaction(session, ts, scope)
        return StmtResult()
    if ts.accept("TRANSACTION"):
        await _set_transaction(session, ts, None)
        return StmtResult()
    if ts.accept("NAMES"):
        await _set_names(session, ts)
        ts.expect_end()
        return StmtResult()
    if ts.accept("CHARACTER", "SET") or ts.accept("CHARSET"):
        charset = "utf8mb4" if ts.accept("DEFAULT") else ts.ident().lower()
        ts.expect_end()
        for name in ("character_set_client", "character_set_results"):
            await session.set_variable(name, charset, global_scope=False)
        return StmtResult()
    if ts.peek_upper() in ("PASSWORD", "ROLE", "DEFAULT", "RESOURCE"):
        raise not_supported("SET " + ts.peek_upper())
    assignments: list[_Assignment] = []
    default_global = False
    while True:
        if ts.peek_upper() in _SCOPES:
            default_global = _SCOPES[ts.next().upper]
        token = ts.next()
        if token.kind is Tok.VARIABLE:
            kind, name, global_scope = _variable_target(token, default_global)
        elif token.kind in (Tok.WORD, Tok.IDENT):
            kind, name, global_scope = "system", token.value, default_global
            if ts.peek_upper() == "." and ts.peek(1) is not None:
                raise not_supported("structured system variables")
        else:
            raise ts.error(token)
        if not (ts.accept("=") or ts.accept(":=")):
            raise ts.error()
        assignments.append(_Assignment(kind, name, global_scope, _split_value(ts)))
        if not ts.accept(","):
            break
    ts.expect_end()
    for item in assignments:
        if item.kind == "user":
            value = await _value(session, item.value, statement, system=False)
            session.set_user_variable(item.name, value)
            continue
        if _is_default(item.value):
            value = default_value(session, item.name, global_scope=item.global_scope)
        else:
            value = await _value(session, item.value, statement, system=True)
        await session.set_variable(item.name, value, global_scope=item.global_scope)
    return StmtResult()
