"""Function calls: which names a statement calls that a replica may not be able to run.

:func:`unsafe_calls` returns the called names that are not built-ins of both server families
(:mod:`consistent.classify.functions`).  It runs on every read that holds a ``(``, so it works
on the hot tokens (:func:`consistent.classify.lexer.hot_tokens`) where it can, and on the full
tokens only when they cannot tell:

1. The token before each ``(``: a real call always shows there as its name (a comment between
   the name and ``(`` leaves an empty token).  A keyword of
   :data:`~consistent.classify.functions.NOT_CALLS` or a built-in of both families calls
   nothing that may write: the usual ``COUNT(*)``, ``IN (…)``, ``NOW()`` cost one look each.
   ``schema.name (`` is a stored function whatever ``name`` spells.  A name after ``AS``,
   ``INTO``, ``INSERT``, ``REPLACE``, ``WITH`` or ``RECURSIVE`` is no call: a type
   (``CAST(x AS DECIMAL(10, 2))``), an alias or a table with a column list (``AS dt (a, b)``,
   ``EXPLAIN INSERT INTO t (a) …``), a CTE's column list (``WITH cte (a, b) AS (…)``).
2. The hot tokens drop commas and operators, so ``a, (SELECT …)`` shows as ``A (``.  The
   other names are checked against the text: a name that ``(`` never directly follows there is
   no call; one that it follows as often as the hot tokens show it before a ``(`` is called.
3. The full tokens decide everything else: a ``.`` next to a space or a comment (``db . f(``
   calls ``db.f``), a comment or a string between a name and its ``(``, a name that is called
   only some of the times it appears, and a name after ``)`` or a string, which may be a
   derived table's alias with a column list (``(SELECT …) dt (a, b)``), ``MATCH (…) AGAINST
   (…)``, ``JSON_TABLE``'s ``'$[*]' COLUMNS (…)`` or a call after ``f(1),``.  The same rules
   apply there, with commas, operators and the names of a ``WITH`` list in view.

The names of :data:`~consistent.classify.functions.PRIMARY_FUNCTIONS` are left to the
expression rules of :mod:`consistent.classify.scan`, which give them their own reasons.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from consistent.classify.functions import NOT_CALLS, PRIMARY_FUNCTIONS, SKIPPED
from consistent.classify.lexer import (
    Token,
    TokenType,
    full_tokens,
    names_before_parenthesis,
    unquote_identifier,
)

__all__ = ["calls_in", "unsafe_calls"]

# Tokens before a "(" that are no names: punctuation, and a user or system variable.
_NO_NAME: Final = frozenset({"(", ")", ";", ":=", "."})
# A "." that a space or a comment separates from a name: the hot tokens then lose the link
# between a schema and its function (``db . f(``), so the full tokens must decide.
_LOOSE_DOT: Final = re.compile(r"\.(?:(?=[\s/#-])|(?<=[\s/]\.))")
# Before a name and its "(", these make it no call: a type or an alias with a column list
# after AS, a table's column list after INTO, INSERT or REPLACE (EXPLAIN INSERT …), a CTE's
# column list after WITH or RECURSIVE.
_NO_CALL_AFTER: Final = frozenset({"AS", "INTO", "INSERT", "REPLACE", "WITH", "RECURSIVE"})
# Before a name and its "(", these leave it open (the hot tokens drop commas): an alias after
# ")" or a call after ``f(1),``; ``COLUMNS`` after JSON_TABLE's path or a call after a string.
_UNDECIDED_AFTER: Final = frozenset({")", ""})
# Before a built-in's name, tokens that cannot end a qualifier (``db . abs(`` hides its "."
# from the hot tokens; after a keyword or a parenthesis no schema name can stand).
_KEYWORD_BEFORE: Final = NOT_CALLS | {"(", ")", ";"}
# Words reserved in both families that often follow a column (``x IN (``, ``t2 USING (``):
# only right after a "." can they be a function's name, so no "." apart from them by a space or
# a comment can qualify them (the lexers read ``db . in`` as a keyword).
_RESERVED: Final = frozenset(
    {
        "AND", "AS", "BETWEEN", "BY", "DIV", "ELSE", "EXISTS", "FROM", "IN", "INTO", "JOIN",
        "LIKE", "NOT", "ON", "OR", "OVER", "PARTITION", "REGEXP", "RLIKE", "SELECT", "THEN",
        "UNION", "USING", "WHEN", "WHERE", "XOR",
    }
)  # fmt: skip
_WORD: Final = TokenType.WORD
_BACKTICK: Final = TokenType.BACKTICK
_NAMES: Final = (_WORD, _BACKTICK)


def unsafe_calls(text: str, upper: str, tokens: list[str]) -> tuple[str, ...]:
    """The names that one statement (``text``, upper-cased ``upper``, hot ``tokens``) calls
    and that are not built-ins of both families, in text order, each once (empty when none).
    Names are upper-case, ``SCHEMA.NAME`` when qualified; a quoted unqualified name keeps its
    backticks."""
    loose: bool | None = None
    # Every name the hot tokens show before a "(", and the candidates among them: (name,
    # what it is recorded as).
    before_parens: list[str] = []
    candidates: list[tuple[str, str]] = []
    start = 0
    for _ in range(tokens.count("(")):
        j = tokens.index("(", start)
        start = j + 1
        k = j - 1
        while k >= 0 and not tokens[k]:
            k -= 1
        if k < 0:
            continue
        name = tokens[k]
        if name in _NO_NAME or name[0] == "@":
            continue
        before_parens.append(name)
        before = tokens[k - 1] if k else "("
        tight = k == j - 1
        if (
            tight
            and before != "."
            and (name in _RESERVED or (name in SKIPPED and before in _KEYWORD_BEFORE))
        ):
            continue  # the usual ``x IN (``, ``SELECT COUNT(``, ``AND NOW(``
        if loose is None:
            loose = "." in upper and _LOOSE_DOT.search(upper) is not None
        if loose or not (tight or name in SKIPPED):
            # ``db . f(``, or a comment or a string between a name and "(": the full tokens
            # decide.
            return _precise(text)
        if (name in SKIPPED and before != ".") or before in _NO_CALL_AFTER:
            continue
        if before == ".":
            schema = tokens[k - 2] if k >= 2 else ""
            if not schema or schema[0] in "(@":
                return _precise(text)
            candidates.append((name, _qualified(schema, name)))
        elif name[0] == "`" and unquote_identifier(name) in PRIMARY_FUNCTIONS:
            continue  # the expression rules give it its reason
        elif before in _UNDECIDED_AFTER:
            candidates.append((name, ""))
        else:
            candidates.append((name, name))
    if not candidates:
        return ()
    # The hot tokens dropped commas and operators: ``a, (SELECT …)`` shows as ``A (``.  The
    # text says which names "(" really follows; a name that it follows as often as the hot
    # tokens show it before one is called wherever it is, a name it never follows nowhere.
    adjacent = names_before_parenthesis(upper)
    found: list[str] = []
    for name, called in candidates:
        times = adjacent.count(name)
        if not times:
            continue  # an operator or a comma stands between, every time
        if times != before_parens.count(name) or not called:
            # Only some are calls, or the context (after ")" or a string) may make it an
            # alias or JSON_TABLE's COLUMNS: the full tokens decide.
            return _precise(text)
        if called not in found:
            found.append(called)
    return tuple(found)


def _qualified(schema: str, name: str) -> str:
    """``SCHEMA.NAME`` from two upper-cased tokens, backticks removed."""
    return f"{unquote_identifier(schema)}.{unquote_identifier(name)}"


def calls_in(text: str) -> tuple[str, ...]:
    """:func:`unsafe_calls` for any fragment of SQL (an expression, a ``SET`` value), decided
    on its full tokens."""
    return _precise(text)


def _precise(text: str) -> tuple[str, ...]:
    """:func:`unsafe_calls` decided on the full tokens (see the module docstring)."""
    tokens = full_tokens(text)
    column_lists = _cte_column_lists(tokens)
    found: list[str] = []
    for j in range(1, len(tokens)):
        tok = tokens[j]
        if tok.text != "(" or tok.type != TokenType.PUNCT:
            continue
        name = tokens[j - 1]
        if name.type not in _NAMES or j in column_lists:
            continue
        upper = name.text.upper()
        if j >= 3 and _is_punct(tokens[j - 2], ".") and tokens[j - 3].type in _NAMES:
            called = _qualified(tokens[j - 3].text.upper(), upper)
        elif name.type == _WORD and upper in SKIPPED:
            continue
        elif name.type == _BACKTICK and unquote_identifier(upper) in PRIMARY_FUNCTIONS:
            continue  # the expression rules give it its reason
        elif j >= 2 and _not_a_call_after(tokens[j - 2]):
            continue
        else:
            called = upper
        if called not in found:
            found.append(called)
    return tuple(found)


def _is_punct(tok: Token, text: str) -> bool:
    return tok.type == TokenType.PUNCT and tok.text == text


def _not_a_call_after(prev: Token) -> bool:
    """A name after ``prev`` and before ``(`` is not called: see :data:`_NO_CALL_AFTER`, an
    alias after ``)``, ``COLUMNS`` after ``JSON_TABLE``'s path string."""
    if prev.type == TokenType.WORD:
        return prev.upper in _NO_CALL_AFTER
    return _is_punct(prev, ")") or prev.type == TokenType.STRING


def _cte_column_lists(tokens: Sequence[Token]) -> frozenset[int]:
    """Positions of the ``(`` that open a ``WITH`` list's column lists."""
    found: set[int] = set()
    for i, tok in enumerate(tokens):
        if tok.is_word("WITH"):
            _walk_with_list(tokens, i + 1, found)
    return frozenset(found)


def _walk_with_list(tokens: Sequence[Token], i: int, found: set[int]) -> None:
    """``[RECURSIVE] name [(cols)] AS (…) [, …]`` from ``tokens[i]``; anything else ends it
    (``WITH ROLLUP``, ``WITH CONSISTENT SNAPSHOT``…)."""
    n = len(tokens)
    if i < n and tokens[i].is_word("RECURSIVE"):
        i += 1
    while i + 1 < n and tokens[i].type in _NAMES:
        i += 1
        if _is_punct(tokens[i], "("):
            found.add(i)
            i = _after_group(tokens, i)
        if not (i + 1 < n and tokens[i].is_word("AS") and _is_punct(tokens[i + 1], "(")):
            return
        i = _after_group(tokens, i + 1)
        if not (i < n and _is_punct(tokens[i], ",")):
            return
        i += 1


def _after_group(tokens: Sequence[Token], i: int) -> int:
    """The position after the ``)`` that closes the ``(`` at ``tokens[i]``."""
    depth = 0
    for j in range(i, len(tokens)):
        tok = tokens[j]
        if tok.type != TokenType.PUNCT:
            continue
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)
