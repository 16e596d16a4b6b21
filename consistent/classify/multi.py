"""Multi-statements: where one statement ends, and what several add up to.

``;`` ends a statement outside strings, comments and parentheses, except inside the body of a
stored program: ``CREATE PROCEDURE p() BEGIN …; …; END`` is one statement (the ``mysql``
client's ``DELIMITER`` exists for that).  For statements that start with ``CREATE`` or
``ALTER`` (routines, triggers, events) and for MariaDB's ``BEGIN NOT ATOMIC``, ``BEGIN`` and
``CASE`` open a block that ``END`` closes (``END CASE`` included; ``END IF``, ``END LOOP``,
``END WHILE`` and ``END REPEAT`` close blocks that are not counted).  A body whose ``IF`` or
loop holds ``;`` without an enclosing ``BEGIN`` is split too early; the parts are still
classified, and a ``CREATE`` part needs the primary anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TypeVar

from consistent.classify.lexer import Token, TokenType, full_tokens
from consistent.classify.model import Classification, PrimaryReason, StatementKind

__all__ = ["combine", "split_statements"]

_T = TypeVar("_T")

_BLOCK_HEADS: Final = frozenset({"CREATE", "ALTER"})
_BLOCK_OPENERS: Final = frozenset({"BEGIN", "CASE"})
_UNCOUNTED_ENDS: Final = frozenset({"IF", "LOOP", "WHILE", "REPEAT"})


def _opens_blocks(tokens: Sequence[Token], first: int) -> bool:
    head = tokens[first].upper
    if head in _BLOCK_HEADS:
        return True
    following = [t.upper for t in tokens[first + 1 : first + 3]]
    return head == "BEGIN" and following == ["NOT", "ATOMIC"]


def split_statements(text: str) -> list[str]:
    """The statements of ``text``, each as its source text; empty statements are dropped."""
    tokens = full_tokens(text)
    parts: list[str] = []
    start = 0  # character offset where the current statement began
    first: int | None = None  # index of the current statement's first token
    blocks = False
    depth = 0
    nesting = 0
    skip_next_word = False
    for idx, tok in enumerate(tokens):
        if tok.type == TokenType.PUNCT:
            if tok.text == "(":
                depth += 1
            elif tok.text == ")":
                depth = max(depth - 1, 0)
            elif tok.text == ";" and depth == 0 and nesting == 0:
                if first is not None:
                    parts.append(text[start : tok.start])
                start, first, blocks = tok.end, None, False
            continue
        if first is None:
            first = idx
            blocks = tok.type == TokenType.WORD and _opens_blocks(tokens, idx)
        if not blocks or tok.type != TokenType.WORD:
            continue
        word = tok.upper
        if skip_next_word:
            skip_next_word = False
            if word in _UNCOUNTED_ENDS or word == "CASE":
                continue
        if word in _BLOCK_OPENERS:
            nesting += 1
        elif word == "END":
            after = tokens[idx + 1].upper if idx + 1 < len(tokens) else ""
            if after not in _UNCOUNTED_ENDS:
                nesting = max(nesting - 1, 0)
            skip_next_word = True
    if first is not None:
        parts.append(text[start:])
    return parts


def combine(parts: Sequence[Classification]) -> Classification:
    """The summary of a multi-statement's parts (see :class:`Classification`)."""
    main = next((p for p in parts if p.kind is not StatementKind.READ), parts[0])
    safe = all(p.replica_safe for p in parts)
    reason = None
    if not safe:
        reason = next(
            (p.primary_reason for p in parts if p.primary_reason),
            PrimaryReason.MULTI_STATEMENT,
        )
    return Classification(
        kind=main.kind,
        first_keyword=parts[0].first_keyword,
        must_use_primary=not safe,
        primary_reason=reason,
        functions=tuple(name for p in parts for name in p.functions),
        pins_session=next((p.pins_session for p in parts if p.pins_session), None),
        unpins_session=_last(p.unpins_session for p in parts),
        read_only=main.read_only,
        chain=main.chain,
        implicit_commit=any(p.implicit_commit for p in parts),
        sets_autocommit=_last(p.sets_autocommit for p in parts),
        session_variables=tuple(v for p in parts for v in p.session_variables),
        schema=_last(p.schema for p in parts),
        follows_previous=parts[0].follows_previous,
        is_multi_statement=True,
        parts=tuple(parts),
    )


def _last(values: Iterable[_T | None]) -> _T | None:
    """The last value that is not ``None``."""
    found: _T | None = None
    for value in values:
        if value is not None:
            found = value
    return found
