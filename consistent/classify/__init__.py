"""Statement classification: read, write, transaction control, session state, hints.

``classify(sql)`` runs on every statement the wrapper or the proxy sees, so it never parses
SQL: one regular-expression pass returns the few tokens routing needs (see
:mod:`consistent.classify.lexer`), the first keyword picks a rule from a dispatch table
(:mod:`consistent.classify.statements`), and a plain read or write returns a shared,
precomputed result without looking at its tokens one by one.  The rules follow DESIGN "How a
read gets to a replica", step 1; each module's docstring lists the decisions it makes.

The result describes the SQL only: session state (transactions, pins, autocommit), the level
and the routing hint are for ``consistent.policy`` to weigh.  What the SQL is depends on one
thing outside it: which functions a replica may run, which the server family and the functions
the user declared read-only decide.  Each form builds its
:class:`~consistent.classify.functions.FunctionRules` once, when it knows the family, and passes
them with every statement; without them only the built-ins of both families count as safe.

A statement longer than :data:`MAX_CLASSIFIED_LENGTH` is *oversized*: only its first
``MAX_CLASSIFIED_LENGTH`` bytes (characters, for text) are read (:func:`classify_head`), so that
classifying costs the same whatever the statement's size, and the proxy can route a statement of
many megabytes from its first bytes while the rest is still arriving.  What the unread part holds
(a function call, ``FOR UPDATE``, a second statement) could tie it to the primary, so an
oversized statement always needs the primary (reason ``oversized_statement``), and pins the
session unless its first bytes show one plain read, write or data definition.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from consistent.classify.functions import DEFAULT_RULES, FunctionRules, read_only_function_names
from consistent.classify.hints import parse_hint
from consistent.classify.lexer import hot_tokens
from consistent.classify.model import (
    LEVEL_NAMES,
    Classification,
    PinReason,
    PrimaryReason,
    RouteHint,
    RouteTarget,
    StatementKind,
)
from consistent.classify.multi import combine, split_statements
from consistent.classify.session import PRIMARY_ONLY_VARIABLES, replay_sql
from consistent.classify.statements import classify_text, classify_tokens

__all__ = [
    "DEFAULT_RULES",
    "LEVEL_NAMES",
    "MAX_CLASSIFIED_LENGTH",
    "PRIMARY_ONLY_VARIABLES",
    "Classification",
    "FunctionRules",
    "PinReason",
    "PrimaryReason",
    "RouteHint",
    "RouteTarget",
    "StatementKind",
    "classify",
    "classify_head",
    "read_only_function_names",
    "replay_sql",
    "split_statements",
]

# A hint can only be in a leading comment, and the text must mention it.
_MAY_HAVE_HINT: Final = re.compile(r"\s*(?:/\*(?![Mm]?!)|--|#)")

#: Statements longer than this (bytes, or characters for text) are classified from their first
#: ``MAX_CLASSIFIED_LENGTH`` only, and need the primary (see the module docstring).  At about
#: 90 ns a byte for a value-heavy ``INSERT``, the longest classification stays near 20 ms.
MAX_CLASSIFIED_LENGTH: Final = 256 * 1024

#: Kinds whose first bytes say what a whole single statement does to the session (nothing
#: beyond its own kind): their oversized statements do not pin the session.
_PLAIN_KINDS: Final = frozenset({StatementKind.READ, StatementKind.WRITE, StatementKind.DDL})


def classify(sql: str | bytes, rules: FunctionRules = DEFAULT_RULES) -> Classification:
    """Classify one ``COM_QUERY`` text (which may hold several statements); ``rules`` say which
    of the functions it calls a replica may run.

    ``bytes`` are decoded as UTF-8; undecodable bytes are kept as surrogate escapes, which
    cannot look like keywords.  An oversized statement is classified by :func:`classify_head`.
    """
    if len(sql) > MAX_CLASSIFIED_LENGTH:
        return classify_head(sql[:MAX_CLASSIFIED_LENGTH], rules)
    return _classify(sql, rules)


def classify_head(head: str | bytes, rules: FunctionRules = DEFAULT_RULES) -> Classification:
    """Classify an oversized statement from its first bytes ``head`` (at most
    :data:`MAX_CLASSIFIED_LENGTH` of them are read): it needs the primary, and pins the session
    unless ``head`` shows one plain read, write or data definition.  Session settings are not
    kept (their values may be cut), so a ``SET`` pins too."""
    result = _classify(head[:MAX_CLASSIFIED_LENGTH], rules)
    pin = result.pins_session
    if pin is None and (result.is_multi_statement or result.kind not in _PLAIN_KINDS):
        pin = PinReason.OVERSIZED
    parts = tuple(dataclasses.replace(p, session_variables=()) for p in result.parts)
    return dataclasses.replace(
        result,
        must_use_primary=True,
        primary_reason=PrimaryReason.OVERSIZED,
        pins_session=pin,
        session_variables=(),
        parts=parts,
    )


def _classify(sql: str | bytes, rules: FunctionRules) -> Classification:
    text = sql if isinstance(sql, str) else sql.decode("utf-8", "surrogateescape")
    upper = text.upper()
    tokens = hot_tokens(upper)
    if ";" in tokens:
        end = tokens.index(";")
        if any(tokens[end + 1 :]):
            result = _classify_multi(text, rules)
        else:
            result = classify_tokens(text, upper, tokens[:end])
    else:
        result = classify_tokens(text, upper, tokens)
    if result.functions and not result.parts:
        result = rules.settle(result)
    if "CONSISTENT" in upper and _MAY_HAVE_HINT.match(text):
        hint, error = parse_hint(text)
        if hint is not None or error is not None:
            result = dataclasses.replace(result, hint=hint, hint_error=error)
    return result


def _classify_multi(text: str, rules: FunctionRules) -> Classification:
    parts = [rules.settle(classify_text(part)) for part in split_statements(text)]
    if len(parts) == 1:
        return parts[0]
    return combine(parts)
