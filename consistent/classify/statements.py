"""One statement: its first keyword picks a handler from a dispatch table (DESIGN step 1).

Reads: ``SELECT``, ``WITH … SELECT``, ``TABLE``, ``VALUES``, ``SHOW``, ``DESCRIBE``/``EXPLAIN``,
``HELP``, ``GET DIAGNOSTICS``; any of them may still need the primary through the expression
rules of :mod:`consistent.classify.scan`, or because it calls a function that may write
(:mod:`consistent.classify.calls`; ``Classification.functions`` names the calls).

Decisions worth knowing:

* ``EXPLAIN``/``DESCRIBE`` without ``ANALYZE`` is a read, even of an ``UPDATE``: the statement
  is planned, not run.  ``EXPLAIN ANALYZE stmt`` (and MariaDB's ``ANALYZE stmt``) runs ``stmt``
  and is classified as ``stmt``.  ``EXPLAIN … INTO @v`` writes a user variable;
  ``EXPLAIN FOR CONNECTION n`` asks about one server.
* ``SHOW`` is a read, except what describes one server or one session (``SHOW MASTER
  STATUS``, ``SHOW PROCESSLIST``, ``SHOW STATUS``…: the primary) and ``SHOW WARNINGS``/
  ``ERRORS`` (``follows_previous``).
* ``CALL`` is a write (a procedure may do anything); a user variable passed to it may be an
  ``OUT`` parameter, so it pins.  ``DO`` runs on the primary for its side effects.
* ``GET DIAGNOSTICS`` follows the previous statement; the user variables it fills pin.
* ``CREATE TEMPORARY TABLE`` pins and, like ``DROP TEMPORARY TABLE``, commits nothing.
* A call of a function that is not a side-effect-free built-in of both server families
  (``SELECT f(k)``, ``SELECT shop.audit(1)``, ``SHOW TABLES WHERE f(…)``, also under
  ``EXPLAIN``, which may evaluate a deterministic function while planning) needs the primary:
  ``function_call``, unless :class:`~consistent.classify.functions.FunctionRules` later find
  every call safe.  ``SET`` values are replayed on replicas, so a ``SET`` whose value calls such
  a function pins the session instead (:mod:`consistent.classify.session`).
* Anything unknown runs on the primary (``unknown``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from consistent.classify.calls import unsafe_calls
from consistent.classify.lexer import hot_tokens
from consistent.classify.model import Classification, PinReason, PrimaryReason, StatementKind
from consistent.classify.scan import PIN_TRIGGERS, READ_TRIGGERS, scan
from consistent.classify.session import classify_set, classify_use

__all__ = ["classify_text", "classify_tokens"]

_K = StatementKind
_R = PrimaryReason

#: ``(text, upper_text, hot_tokens, head_index) -> Classification``
Handler = Callable[[str, str, list[str], int], Classification]


def _words(tokens: list[str], i: int, n: int) -> list[str]:
    """Up to ``n`` non-empty tokens after ``tokens[i]``."""
    out: list[str] = []
    for token in tokens[i + 1 :]:
        if token:
            out.append(token)
            if len(out) == n:
                break
    return out


def _primary(
    kind: StatementKind,
    head: str,
    reason: str,
    *,
    pin: str | None = None,
    unpin: str | None = None,
    implicit_commit: bool = False,
) -> Classification:
    return Classification(
        kind=kind,
        first_keyword=head,
        must_use_primary=True,
        primary_reason=reason,
        pins_session=pin,
        unpins_session=unpin,
        implicit_commit=implicit_commit,
    )


# --- reads ----------------------------------------------------------------------------------
_PLAIN_READS: Final = {
    head: Classification(kind=_K.READ, first_keyword=head)
    for head in ("SELECT", "WITH", "TABLE", "VALUES", "SHOW", "DESC", "DESCRIBE", "EXPLAIN")
}


# A read whose tokens avoid these needs neither the expression rules nor a look at its calls.
_READ_OR_CALL: Final = READ_TRIGGERS | {"("}


def _read(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i]
    variables = "@" in upper
    if not variables and _READ_OR_CALL.isdisjoint(tokens):
        return _PLAIN_READS[head]
    if not variables and READ_TRIGGERS.isdisjoint(tokens):  # so "(" is in the tokens
        calls = unsafe_calls(text, upper, tokens)
        return _with_calls(_PLAIN_READS[head], calls) if calls else _PLAIN_READS[head]
    calls = _calls_of(text, upper, tokens)
    found = scan([t for t in tokens if t])
    reason = found.reason
    if reason is None and calls:
        reason = _R.FUNCTION_CALL
    return Classification(
        kind=_K.READ,
        first_keyword=head,
        must_use_primary=reason is not None,
        primary_reason=reason,
        functions=calls,
        pins_session=found.pin,
        follows_previous=found.follows_previous,
    )


def _with_calls(result: Classification, calls: tuple[str, ...]) -> Classification:
    """``result`` (a plain read) with the calls of functions that may write it makes."""
    if not calls:
        return result
    return Classification(
        kind=_K.READ,
        first_keyword=result.first_keyword,
        must_use_primary=True,
        primary_reason=_R.FUNCTION_CALL,
        functions=calls,
    )


def _calls_of(text: str, upper: str, tokens: list[str]) -> tuple[str, ...]:
    """The calls of functions that may write (a statement without ``(`` makes none)."""
    return unsafe_calls(text, upper, tokens) if "(" in tokens else ()


_WITH_MAIN: Final = frozenset(
    {"SELECT", "TABLE", "VALUES", "UPDATE", "DELETE", "INSERT", "REPLACE"}
)


def _with(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    """``WITH`` names its CTEs, each inside parentheses; the main statement follows at depth 0."""
    depth = 0
    for token in tokens[i + 1 :]:
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0 and token in _WITH_MAIN:
            if token not in ("SELECT", "TABLE", "VALUES"):
                return _write(text, upper, tokens, i)
            break
    return _read(text, upper, tokens, i)


_SHOW_SERVER_STATE: Final = frozenset(
    {
        "MASTER", "BINARY", "BINLOG", "SLAVE", "REPLICA", "REPLICAS", "RELAYLOG", "ALL",
        "PROCESSLIST", "ENGINE", "PROFILE", "PROFILES", "STATUS", "OPEN", "EXPLAIN",
    }
)  # fmt: skip


def _show(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    words = _words(tokens, i, 3)
    if words and words[0] in ("WARNINGS", "ERRORS", "COUNT"):
        return Classification(kind=_K.READ, first_keyword="SHOW", follows_previous=True)
    if words and words[0] in ("GLOBAL", "SESSION", "LOCAL", "FULL"):
        words = words[1:]
    if words and words[0] in _SHOW_SERVER_STATE:
        return _primary(_K.READ, "SHOW", _R.SERVER_STATE)
    return _with_calls(_PLAIN_READS["SHOW"], _calls_of(text, upper, tokens))


_ANALYZED: Final = frozenset(
    {"SELECT", "WITH", "TABLE", "VALUES", "INSERT", "REPLACE", "UPDATE", "DELETE"}
)


def _analyzed(text: str, upper: str, tokens: list[str], i: int, head: str) -> Classification:
    """``EXPLAIN ANALYZE stmt`` / MariaDB ``ANALYZE stmt``: ``stmt`` runs, so it decides."""
    for j in range(i + 1, len(tokens)):
        if tokens[j] in _ANALYZED:
            inner = _HANDLERS[tokens[j]](text, upper, tokens, j)
            return dataclasses.replace(inner, first_keyword=head)
    return _primary(_K.OTHER, head, _R.UNKNOWN)


def _explain(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i]
    words = _words(tokens, i, 8)
    if words[:1] == ["ANALYZE"]:
        return _analyzed(text, upper, tokens, i, head)
    if words[:1] == ["FOR"]:
        return _primary(_K.READ, head, _R.SERVER_STATE)
    if "INTO" in words:
        after = words[words.index("INTO") + 1 :]
        if after and after[0].startswith("@") and not after[0].startswith("@@"):
            return _primary(_K.READ, head, _R.SELECT_INTO, pin=PinReason.USER_VARIABLE)
    return _with_calls(_PLAIN_READS[head], _calls_of(text, upper, tokens))


def _analyze(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    words = _words(tokens, i, 1)
    if words and words[0] in ("TABLE", "TABLES", "LOCAL", "NO_WRITE_TO_BINLOG"):
        return _primary(_K.OTHER, "ANALYZE", _R.ADMIN, implicit_commit=True)
    return _analyzed(text, upper, tokens, i, "ANALYZE")


def _diagnostics(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    if "DIAGNOSTICS" in _words(tokens, i, 2):
        # It reads the previous statement's diagnostics into variables: user variables pin.
        assigns = any(t.startswith("@") and not t.startswith("@@") for t in tokens)
        return Classification(
            kind=_K.READ,
            first_keyword="GET",
            pins_session=PinReason.USER_VARIABLE if assigns else None,
            follows_previous=True,
        )
    return _unknown(text, upper, tokens, i)


def _help(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return Classification(kind=_K.READ, first_keyword="HELP")


# --- writes ---------------------------------------------------------------------------------
_PLAIN_WRITES: Final = {
    head: _primary(_K.WRITE, head, _R.WRITE)
    for head in ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH")
}


def _write(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i]
    if PIN_TRIGGERS.isdisjoint(tokens) and "@" not in upper:
        return _PLAIN_WRITES[head]
    pin = scan([t for t in tokens if t]).pin
    return _primary(_K.WRITE, head, _R.WRITE, pin=pin)


def _load(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    if _words(tokens, i, 1) == ["INDEX"]:
        return _primary(_K.OTHER, "LOAD", _R.ADMIN, implicit_commit=True)
    return _write(text, upper, tokens, i)


def _call(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    pin = None
    if "@" in upper or not PIN_TRIGGERS.isdisjoint(tokens):
        found = scan([t for t in tokens if t])
        pin = found.pin
        if pin is None and any(t.startswith("@") and not t.startswith("@@") for t in tokens):
            pin = PinReason.USER_VARIABLE  # may be an OUT parameter
    return _primary(_K.WRITE, "CALL", _R.CALL, pin=pin)


def _do(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return _primary(_K.OTHER, "DO", _R.DO, pin=scan([t for t in tokens if t]).pin)


# --- DDL --------------------------------------------------------------------------------------
def _ddl(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i]
    words = _words(tokens, i, 3)
    if head == "DROP" and words[:1] == ["PREPARE"]:
        return _primary(_K.OTHER, head, _R.PREPARED_STATEMENT)
    if head in ("CREATE", "DROP") and "TEMPORARY" in words:
        # CREATE/DROP TEMPORARY TABLE do not commit the open transaction.
        pin = PinReason.TEMPORARY_TABLE if head == "CREATE" else None
        return _primary(_K.DDL, head, _R.DDL, pin=pin)
    return _primary(_K.DDL, head, _R.DDL, implicit_commit=True)


# --- transactions and locks ----------------------------------------------------------------
def _begin(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    if _words(tokens, i, 2) == ["NOT", "ATOMIC"]:
        return _primary(_K.OTHER, "BEGIN", _R.COMPOUND_STATEMENT)
    return Classification(kind=_K.TRANSACTION_BEGIN, first_keyword="BEGIN", implicit_commit=True)


def _start(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    words = [t for t in tokens[i + 1 :] if t]
    if words[:1] != ["TRANSACTION"]:
        return _primary(_K.OTHER, "START", _R.ADMIN, implicit_commit=True)
    read_only = any(words[j] == "READ" and words[j + 1] == "ONLY" for j in range(1, len(words) - 1))
    return Classification(
        kind=_K.TRANSACTION_BEGIN, first_keyword="START", read_only=read_only, implicit_commit=True
    )


def _chain(words: list[str]) -> bool:
    """``AND CHAIN`` (not ``AND NO CHAIN``) among the words of a ``COMMIT``/``ROLLBACK``."""
    for j, word in enumerate(words):
        if word == "AND":
            return words[j + 1 : j + 2] == ["CHAIN"]
    return False


def _commit(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    chain = _chain(_words(tokens, i, 4))
    return Classification(kind=_K.COMMIT, first_keyword="COMMIT", chain=chain)


def _rollback(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    words = _words(tokens, i, 4)
    if "TO" in words[:2]:
        return Classification(kind=_K.ROLLBACK_TO_SAVEPOINT, first_keyword="ROLLBACK")
    return Classification(kind=_K.ROLLBACK, first_keyword="ROLLBACK", chain=_chain(words))


def _savepoint(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return Classification(kind=_K.SAVEPOINT, first_keyword="SAVEPOINT")


def _release(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    if _words(tokens, i, 1) == ["SAVEPOINT"]:
        return Classification(kind=_K.RELEASE_SAVEPOINT, first_keyword="RELEASE")
    return _unknown(text, upper, tokens, i)


def _xa(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return _primary(_K.OTHER, "XA", _R.XA, pin=PinReason.XA_TRANSACTION)


def _lock(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    what = _words(tokens, i, 1)
    if what == ["INSTANCE"]:
        return _primary(_K.LOCK, "LOCK", _R.LOCK_TABLES, pin=PinReason.LOCK_INSTANCE)
    if what in (["TABLE"], ["TABLES"]):
        return _primary(
            _K.LOCK, "LOCK", _R.LOCK_TABLES, pin=PinReason.LOCK_TABLES, implicit_commit=True
        )
    return _unknown(text, upper, tokens, i)


def _unlock(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    what = _words(tokens, i, 1)
    if what == ["INSTANCE"]:
        return _primary(_K.LOCK, "UNLOCK", _R.LOCK_TABLES, unpin=PinReason.LOCK_INSTANCE)
    if what in (["TABLE"], ["TABLES"]):
        return _primary(_K.LOCK, "UNLOCK", _R.LOCK_TABLES, unpin=PinReason.LOCK_TABLES)
    return _unknown(text, upper, tokens, i)


def _flush(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    words = [t for t in tokens[i + 1 :] if t]
    locks = any(words[j : j + 3] == ["WITH", "READ", "LOCK"] for j in range(len(words))) or any(
        words[j : j + 2] == ["FOR", "EXPORT"] for j in range(len(words))
    )
    if locks:
        return _primary(
            _K.LOCK, "FLUSH", _R.LOCK_TABLES, pin=PinReason.LOCK_TABLES, implicit_commit=True
        )
    return _primary(_K.OTHER, "FLUSH", _R.ADMIN, implicit_commit=True)


# --- session state and other statements ------------------------------------------------------
def _set(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return classify_set(text, classify_text)


def _use(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return classify_use(text)


def _handler(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    pin = PinReason.HANDLER if "OPEN" in _words(tokens, i, 3) else None
    return _primary(_K.OTHER, "HANDLER", _R.HANDLER, pin=pin)


def _prepare(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return _primary(_K.OTHER, "PREPARE", _R.PREPARED_STATEMENT, pin=PinReason.PREPARE)


def _prepared(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    return _primary(_K.OTHER, tokens[i], _R.PREPARED_STATEMENT)


def _admin(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i]
    return _primary(_K.OTHER, head, _R.ADMIN, implicit_commit=head in _ADMIN_COMMITS)


# https://dev.mysql.com/doc/refman/8.4/en/implicit-commit.html (administration, replication)
_ADMIN_COMMITS: Final = frozenset(
    {"CACHE", "CHECK", "OPTIMIZE", "REPAIR", "RESET", "STOP", "CHANGE"}
)


def _unknown(text: str, upper: str, tokens: list[str], i: int) -> Classification:
    head = tokens[i] if i < len(tokens) and tokens[i][0].isalpha() else ""
    return _primary(_K.OTHER, head, _R.UNKNOWN)


_DDL_HEADS: Final = (
    "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "GRANT", "REVOKE", "IMPORT", "INSTALL",
    "UNINSTALL",
)  # fmt: skip
_ADMIN_HEADS: Final = (
    "KILL", "RESET", "PURGE", "CHANGE", "STOP", "SHUTDOWN", "RESTART", "CLONE", "BINLOG", "CACHE",
    "BACKUP", "OPTIMIZE", "REPAIR", "CHECK", "CHECKSUM",
)  # fmt: skip

_HANDLERS: Final[dict[str, Handler]] = {
    "SELECT": _read,
    "TABLE": _read,
    "VALUES": _read,
    "WITH": _with,
    "SHOW": _show,
    "DESC": _explain,
    "DESCRIBE": _explain,
    "EXPLAIN": _explain,
    "ANALYZE": _analyze,
    "HELP": _help,
    "GET": _diagnostics,
    "INSERT": _write,
    "REPLACE": _write,
    "UPDATE": _write,
    "DELETE": _write,
    "LOAD": _load,
    "CALL": _call,
    "DO": _do,
    "HANDLER": _handler,
    **dict.fromkeys(_DDL_HEADS, _ddl),
    "BEGIN": _begin,
    "START": _start,
    "COMMIT": _commit,
    "ROLLBACK": _rollback,
    "SAVEPOINT": _savepoint,
    "RELEASE": _release,
    "XA": _xa,
    "LOCK": _lock,
    "UNLOCK": _unlock,
    "FLUSH": _flush,
    "SET": _set,
    "USE": _use,
    "PREPARE": _prepare,
    "EXECUTE": _prepared,
    "DEALLOCATE": _prepared,
    **dict.fromkeys(_ADMIN_HEADS, _admin),
}


def classify_tokens(text: str, upper: str, tokens: list[str]) -> Classification:
    """Classify one statement from its text, upper-cased text and hot tokens."""
    for i, token in enumerate(tokens):
        if token and token != "(":
            return _HANDLERS.get(token, _unknown)(text, upper, tokens, i)
    return _primary(_K.OTHER, "", _R.UNKNOWN)


def classify_text(text: str) -> Classification:
    """Classify ``text`` as one statement (no hint, no multi-statement split)."""
    upper = text.upper()
    return classify_tokens(text, upper, hot_tokens(upper))
