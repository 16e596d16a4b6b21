"""``SET`` and ``USE``: what they change in the session, and whether a replica can follow.

Grammar: https://dev.mysql.com/doc/refman/8.4/en/set-variable.html,
https://dev.mysql.com/doc/refman/8.4/en/set-names.html,
https://dev.mysql.com/doc/refman/8.4/en/set-transaction.html,
https://mariadb.com/kb/en/set-statement/ (MariaDB's ``SET STATEMENT … FOR``).

A replayable setting is returned as ``(name, value_sql)`` in ``session_variables``; the value is
the statement's own text for it, so the replay evaluates it the same way.  Names of system
variables are lower-case without scope or ``@@``; four upper-case pseudo-names stand for the
statements that are not ``name = value``: ``NAMES``, ``CHARACTER SET``, ``TRANSACTION`` (session
transaction characteristics) and ``ROLE``.  :func:`replay_sql` turns an entry back into SQL.

What cannot be replayed pins the session instead: a user variable (``SET @v``, or a value that
reads one), a value computed by a subquery, and a value that calls a function a replica may not
run (:func:`consistent.classify.calls.calls_in`: the replay would call it on the replica).
``autocommit`` is reported in ``sets_autocommit``, not replayed: with autocommit off every
statement goes to the primary.  Only ``1``, ``ON`` and ``TRUE`` (quoted or not) turn it on;
anything else, ``DEFAULT`` included, counts as off, the safe side.  ``SET TRANSACTION`` without a
scope shapes the next transaction only: nothing is recorded (a following ``START TRANSACTION``
is not known to be read-only).  Variables that only shape what the primary writes to its binary
log or how it numbers GTIDs (:data:`PRIMARY_ONLY_VARIABLES`, and the ``binlog_``, ``gtid_`` and
``session_track_`` families, the last one belonging to the connector) are neither replayed nor
pinned: they matter only to writes, which run on the primary anyway.  ``GLOBAL`` and ``PERSIST``
settings change the server, not the session: nothing to replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

from consistent.classify.calls import calls_in
from consistent.classify.lexer import Token, TokenType, full_tokens, unquote_identifier
from consistent.classify.model import Classification, PinReason, PrimaryReason, StatementKind

__all__ = ["PRIMARY_ONLY_VARIABLES", "classify_set", "classify_use", "replay_sql"]

#: Session variables that are never replayed on a replica (see the module docstring).
PRIMARY_ONLY_VARIABLES: Final = frozenset(
    {
        "sql_log_bin",
        "insert_id",
        "last_insert_id",
        "identity",
        "pseudo_thread_id",
        "pseudo_replica_mode",
        "pseudo_slave_mode",
        "rand_seed1",
        "rand_seed2",
        "server_id",
        "skip_replication",
        "original_commit_timestamp",
        "original_server_version",
        "immediate_server_version",
        "explicit_defaults_for_timestamp_replica",
    }
)
_PRIMARY_ONLY_PREFIXES: Final = ("binlog_", "gtid_", "session_track_")

_SCOPES: Final = {
    "SESSION": "session",
    "LOCAL": "session",
    "GLOBAL": "global",
    "PERSIST": "global",
    "PERSIST_ONLY": "global",
}
_AUTOCOMMIT_VALUES: Final = {
    "0": False,
    "OFF": False,
    "FALSE": False,
    "1": True,
    "ON": True,
    "TRUE": True,
}


def replay_sql(name: str, value: str) -> str:
    """The statement that re-applies one ``session_variables`` entry on another connection."""
    prefix = _PSEUDO_PREFIX.get(name)
    if prefix is not None:
        return f"{prefix} {value}"
    return f"SET SESSION {name} = {value}"


_PSEUDO_PREFIX: Final = {
    "NAMES": "SET NAMES",
    "CHARACTER SET": "SET CHARACTER SET",
    "TRANSACTION": "SET SESSION TRANSACTION",
    "ROLE": "SET ROLE",
}


def classify_use(text: str) -> Classification:
    """``USE db``: the new default schema, replayed on replica connections."""
    tokens = full_tokens(text)
    schema = None
    if len(tokens) >= 2 and tokens[1].type in (TokenType.WORD, TokenType.BACKTICK):
        schema = unquote_identifier(tokens[1].text)
    return Classification(
        kind=StatementKind.SESSION_STATE,
        first_keyword="USE",
        must_use_primary=True,
        primary_reason=PrimaryReason.SESSION_STATE,
        schema=schema,
    )


@dataclasses.dataclass
class _SetState:
    """What the items of one ``SET`` add up to (mutable while the items are read)."""

    reason: str = PrimaryReason.SESSION_STATE
    pin: str | None = None
    unpin: str | None = None
    autocommit: bool | None = None
    entries: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def pin_once(self, reason: str) -> None:
        if self.pin is None:
            self.pin = reason


def classify_set(text: str, inner: Callable[[str], Classification]) -> Classification:
    """Classify one ``SET`` statement; ``inner`` classifies the statement of ``SET STATEMENT``."""
    tokens = full_tokens(text)[1:]  # drop SET itself
    head = tokens[0].upper if tokens and tokens[0].type == TokenType.WORD else ""
    second = tokens[1].upper if len(tokens) > 1 else ""
    if head == "STATEMENT":
        return _set_statement(text, tokens, inner)
    if head == "PASSWORD" or (head == "DEFAULT" and second == "ROLE"):
        return _simple(StatementKind.DDL, PrimaryReason.DDL, implicit_commit=True)
    if head == "RESOURCE":
        return _simple(StatementKind.OTHER, PrimaryReason.ADMIN)
    state = _SetState()
    if head == "ROLE":
        state.entries.append(("ROLE", _span(text, tokens[1:])))
        return _result(state)
    if head == "TRANSACTION" or second == "TRANSACTION":
        # No scope: the next transaction only, nothing lasting.  GLOBAL: the server's default.
        if head in _SCOPES and _SCOPES[head] == "session":
            state.entries.append(("TRANSACTION", _span(text, tokens[2:])))
        return _result(state)
    scope = "session"
    for item in _split_items(tokens):
        scope = _set_item(text, item, scope, state)
    return _result(state)


def _set_item(text: str, item: Sequence[Token], scope: str, state: _SetState) -> str:
    """Record one ``name = value`` item; returns the scope that later items inherit."""
    if not item:
        return scope
    first = item[0]
    if first.type == TokenType.WORD and first.upper in _SCOPES:
        scope = _SCOPES[first.upper]
        item = item[1:]
        if not item:
            return scope
        first = item[0]
    if first.is_word("NAMES"):
        state.entries.append(("NAMES", _span(text, item[1:])))
        return scope
    if first.is_word("CHARSET"):
        state.entries.append(("CHARACTER SET", _span(text, item[1:])))
        return scope
    if first.is_word("CHARACTER") and len(item) > 1 and item[1].is_word("SET"):
        state.entries.append(("CHARACTER SET", _span(text, item[2:])))
        return scope
    assign = next((i for i, tok in enumerate(item) if tok.text in ("=", ":=")), None)
    if assign is None or assign == 0:
        return scope
    value_tokens = item[assign + 1 :]
    if first.type == TokenType.USERVAR:
        state.reason = PrimaryReason.USER_VARIABLE_ASSIGNMENT
        state.pin_once(PinReason.USER_VARIABLE)
        return scope
    item_scope, name = _variable_name(item[:assign], scope)
    if item_scope != "session" or not name:
        return scope
    if name == "autocommit":
        state.autocommit = _autocommit_value(value_tokens)
        if state.autocommit:
            state.unpin = PinReason.AUTOCOMMIT_OFF
        else:
            state.pin_once(PinReason.AUTOCOMMIT_OFF)
        return scope
    if name in PRIMARY_ONLY_VARIABLES or name.startswith(_PRIMARY_ONLY_PREFIXES):
        return scope
    if any(tok.type == TokenType.USERVAR for tok in value_tokens):
        state.pin_once(PinReason.USER_VARIABLE)
    elif _computed(text, value_tokens):
        state.pin_once(PinReason.SESSION_STATE)
    else:
        state.entries.append((name, _span(text, value_tokens)))
    return scope


def _computed(text: str, tokens: Sequence[Token]) -> bool:
    """The value cannot be replayed: a subquery computes it, or it calls a function that a
    replica may not run (built-ins of one family count too: the server family is not known
    here, and pinning is the safe side)."""
    if any(tok.is_word("SELECT") for tok in tokens):
        return True
    has_call = any(tok.text == "(" and tok.type == TokenType.PUNCT for tok in tokens)
    return has_call and bool(calls_in(_span(text, tokens)))


def _variable_name(tokens: Sequence[Token], scope: str) -> tuple[str, str]:
    """The scope and lower-case name of a system variable written as ``tokens``."""
    parts: list[str] = []
    for tok in tokens:
        if tok.type == TokenType.SYSVAR:
            pieces = tok.text[2:].split(".")
            if len(pieces) > 1 and pieces[0].upper() in _SCOPES:
                scope = _SCOPES[pieces[0].upper()]
                pieces = pieces[1:]
            parts.extend(unquote_identifier(piece) for piece in pieces if piece)
        elif tok.type in (TokenType.WORD, TokenType.BACKTICK):
            parts.append(unquote_identifier(tok.text))
    return scope, ".".join(parts).lower()


def _autocommit_value(tokens: Sequence[Token]) -> bool:
    """The value given to ``autocommit``; anything not plainly on counts as off (the safe side)."""
    if len(tokens) != 1:
        return False
    raw = tokens[0].text
    if tokens[0].type == TokenType.STRING:
        raw = raw[1:-1]
    key = raw.upper()
    return _AUTOCOMMIT_VALUES.get(key, False)


def _split_items(tokens: Sequence[Token]) -> list[list[Token]]:
    """The comma-separated items of a ``SET``, commas inside parentheses excluded."""
    items: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.type == TokenType.PUNCT:
            if tok.text == "(":
                depth += 1
            elif tok.text == ")":
                depth -= 1
            elif tok.text == "," and depth == 0:
                items.append([])
                continue
            elif tok.text == ";" and depth == 0:
                break
        items[-1].append(tok)
    return items


def _span(text: str, tokens: Sequence[Token]) -> str:
    """The source text from the first to the last of ``tokens`` (a trailing ``;`` excluded)."""
    if tokens and tokens[-1].text == ";":
        tokens = tokens[:-1]
    if not tokens:
        return ""
    return text[tokens[0].start : tokens[-1].end]


def _set_statement(
    text: str, tokens: Sequence[Token], inner: Callable[[str], Classification]
) -> Classification:
    """MariaDB ``SET STATEMENT v = x [, …] FOR stmt``: the settings last for ``stmt`` only."""
    depth = 0
    for tok in tokens:
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
        elif depth == 0 and tok.is_word("FOR"):
            return dataclasses.replace(inner(text[tok.end :]), first_keyword="SET")
    return _simple(StatementKind.OTHER, PrimaryReason.UNKNOWN)


def _simple(kind: StatementKind, reason: str, *, implicit_commit: bool = False) -> Classification:
    return Classification(
        kind=kind,
        first_keyword="SET",
        must_use_primary=True,
        primary_reason=reason,
        implicit_commit=implicit_commit,
    )


def _result(state: _SetState) -> Classification:
    return Classification(
        kind=StatementKind.SESSION_STATE,
        first_keyword="SET",
        must_use_primary=True,
        primary_reason=state.reason,
        pins_session=state.pin,
        unpins_session=state.unpin,
        sets_autocommit=state.autocommit,
        session_variables=tuple(state.entries),
    )
