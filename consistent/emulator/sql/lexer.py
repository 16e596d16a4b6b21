"""A MySQL lexer: just enough to split multi-statement text and classify statements.

It knows MySQL's quoting (``'…'``, ``"…"``, backticks, backslash escapes, doubled quotes),
comments (``-- ``, ``#``, ``/* */``) and version comments (``/*!80000 … */``, whose content
mysqld executes).  Statement bodies are parsed elsewhere; the lexer only needs positions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final, NamedTuple

from consistent.emulator.errors import SqlError, parse_error

__all__ = ["Statement", "Tok", "Token", "split_statements", "tokenize"]

#: Version comments up to this server version are executed (``/*!80036 … */``).
_SERVER_VERSION_ID: Final = 80036


class Tok(Enum):
    """Token kinds."""

    WORD = "word"
    IDENT = "ident"  # `quoted`
    STRING = "string"
    NUMBER = "number"
    VARIABLE = "variable"  # @user or @@system
    PARAM = "param"  # ?
    OP = "op"
    SEMI = "semi"


class Token(NamedTuple):
    """One token with its span in the cleaned text (a named tuple: every statement makes
    dozens, and a tuple is built in half the time of a frozen dataclass)."""

    kind: Tok
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        """The text upper-cased (keywords compare this way)."""
        return self.text.upper()

    @property
    def value(self) -> str:
        """Identifier or string content without quotes, escapes resolved."""
        if self.kind is Tok.IDENT:
            return self.text[1:-1].replace("``", "`")
        if self.kind is Tok.STRING:
            return unquote_string(self.text)
        return self.text


_ESCAPES: Final = {
    "0": "\0",
    "'": "'",
    '"': '"',
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "\\": "\\",
    "%": "\\%",
    "_": "\\_",
}


def unquote_string(text: str) -> str:
    """Content of a MySQL string literal (``'…'`` or ``"…"``)."""
    quote = text[0]
    body = text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
            continue
        if ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_TOKEN_RE: Final = re.compile(
    r"""
    \s*+  # whitespace before a token is skipped in the same match (never given back)
    (?:
    (?P<word>[A-Za-z_$\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)  # first: the most common
  | (?P<number>0x[0-9A-Fa-f]+|0b[01]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<vcomment>/\*!\d{0,6})
  | (?P<comment>/\*.*?\*/|--(?:[ \t][^\n]*)?(?=\n|$)|\#[^\n]*)
  | (?P<vend>\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<ident>`(?:[^`]|``)*`)
  | (?P<variable>@@(?:(?:global|session|local|persist|persist_only)\.)?[A-Za-z0-9_$.]+
                  |@(?:`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[A-Za-z0-9_$.]+)?)
  | (?P<param>\?)
  | (?P<semi>;)
  | (?P<op><=>|<=|>=|<>|!=|:=|\|\||&&|<<|>>|->>|->|[-+*/%=<>(),.!~^&|{}\[\]:])
    )
    """,
    re.VERBOSE | re.DOTALL | re.IGNORECASE,
)

_SPACE_RE: Final = re.compile(r"\s*")

_KIND_BY_GROUP: Final = {
    "string": Tok.STRING,
    "ident": Tok.IDENT,
    "variable": Tok.VARIABLE,
    "number": Tok.NUMBER,
    "word": Tok.WORD,
    "param": Tok.PARAM,
    "semi": Tok.SEMI,
    "op": Tok.OP,
}
# The same by group number (a match's ``lastindex``, cheaper to ask than its group's name).
_KIND_BY_INDEX: Final = tuple(
    next((_KIND_BY_GROUP.get(n) for n, i in _TOKEN_RE.groupindex.items() if i == index), None)
    for index in range(_TOKEN_RE.groups + 1)
)
_VCOMMENT: Final = _TOKEN_RE.groupindex["vcomment"]
_VEND: Final = _TOKEN_RE.groupindex["vend"]


#: ``Token(kind, text, start, end)`` without the named tuple's Python-level ``__new__``.
_new_token: Final = tuple.__new__


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text``; comments dropped, executable version comments opened up.

    Raises ER_PARSE_ERROR (1064) on an unterminated string or identifier.
    """
    tokens: list[Token] = []
    pos = 0
    open_versions = 0
    length = len(text)
    while pos < length:
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            space = _SPACE_RE.match(text, pos)
            pos = space.end() if space is not None else pos
            if pos >= length:
                break
            raise parse_error(text[pos:], text.count("\n", 0, pos) + 1)
        group = match.lastindex
        if group is None:  # not reached: one alternative always matches
            pos = match.end()
            continue
        pos, end = match.span(group)
        kind = _KIND_BY_INDEX[group]
        if kind is not None:
            tokens.append(_new_token(Token, (kind, text[pos:end], pos, end)))
        elif group == _VCOMMENT:
            digits = text[pos + 3 : end]
            if digits and int(digits) > _SERVER_VERSION_ID:
                close = text.find("*/", end)
                end = length if close < 0 else close + 2
            else:
                open_versions += 1
        elif group == _VEND:
            if open_versions == 0:
                tokens.append(Token(Tok.OP, "*", pos, pos + 1))
                tokens.append(Token(Tok.OP, "/", pos + 1, end))
            else:
                open_versions -= 1
        pos = end
    return tokens


@dataclass(frozen=True)
class Statement:
    """One statement of a (possibly multi-statement) query."""

    text: str
    tokens: tuple[Token, ...]

    @property
    def first(self) -> str:
        """First keyword, upper-cased ('' if none)."""
        for token in self.tokens:
            if token.kind is Tok.WORD:
                return token.upper
            if not (token.kind is Tok.OP and token.text == "("):
                return ""
        return ""

    def words(self, count: int) -> tuple[str, ...]:
        """The first ``count`` tokens upper-cased (shorter if the statement is shorter)."""
        return tuple(t.upper for t in self.tokens[:count])


def split_statements(text: str) -> list[Statement]:
    """Split query text at top-level semicolons; empty statements are dropped."""
    tokens = tokenize(text)
    statements: list[Statement] = []
    current: list[Token] = []

    def flush() -> None:
        if current:
            start, end = current[0].start, current[-1].end
            body = text[start:end]
            if start == 0:
                shifted = tuple(current)
            else:
                shifted = tuple(
                    Token(t.kind, t.text, t.start - start, t.end - start) for t in current
                )
            statements.append(Statement(_clean(body, shifted), shifted))
            current.clear()

    for token in tokens:
        if token.kind is Tok.SEMI:
            flush()
        else:
            current.append(token)
    flush()
    return statements


def _has_comment_mark(body: str) -> bool:
    """Whether ``body`` holds text that may stand outside every token (a comment, the end of
    a version comment)."""
    return "--" in body or "#" in body or "/*" in body or "*/" in body


def _clean(body: str, tokens: tuple[Token, ...]) -> str:
    """The statement with comments removed (version comments opened), keeping token offsets:
    every character outside a token becomes a space."""
    if body.isprintable() and not _has_comment_mark(body):
        return body.strip()  # no comment, no whitespace but spaces: nothing to blank out
    parts: list[str] = []
    position = 0
    spaces_only = True
    for token in tokens:
        gap = token.start - position
        if gap:
            if spaces_only and body.count(" ", position, token.start) != gap:
                spaces_only = False
            parts.append(" " * gap)
        parts.append(token.text)
        position = token.end
    if spaces_only:  # nothing to blank out (the common case)
        return body.strip()
    return "".join(parts).strip()


def check_single(statements: list[Statement], original: str) -> SqlError | None:
    """The 1064 mysqld gives when several statements arrive without CLIENT_MULTI_STATEMENTS."""
    if len(statements) <= 1:
        return None
    second = statements[1]
    offset = original.find(second.text[:20])
    near = original[offset:] if offset >= 0 else second.text
    return parse_error("; " + near if offset < 0 else original[offset - 1 :].lstrip(";"))


class TokenStream:
    """A cursor over a statement's tokens for the hand-written parsers (DDL, SET, SHOW…).

    Errors are ER_PARSE_ERROR quoting the statement from the offending token on, as mysqld's
    messages do.
    """

    def __init__(self, statement: Statement) -> None:
        self.statement = statement
        self.tokens = statement.tokens
        self.pos = 0

    def at_end(self) -> bool:
        """Whether every token was consumed."""
        return self.pos >= len(self.tokens)

    def peek(self, offset: int = 0) -> Token | None:
        """The token ``offset`` ahead, without consuming it."""
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def peek_upper(self, offset: int = 0) -> str:
        """Upper-cased text of the token ``offset`` ahead ('' at the end)."""
        token = self.peek(offset)
        return (
            token.upper
            if token is not None and token.kind is Tok.WORD
            else (token.text if token is not None and token.kind is Tok.OP else "")
        )

    def next(self) -> Token:
        """Consume one token (1064 at the end)."""
        token = self.peek()
        if token is None:
            raise self.error()
        self.pos += 1
        return token

    def accept(self, *words: str) -> bool:
        """Consume the given keywords/operators if they come next, in order."""
        for offset, word in enumerate(words):
            if self.peek_upper(offset) != word:
                return False
        self.pos += len(words)
        return True

    def expect(self, *words: str) -> None:
        """Like :meth:`accept`, but a mismatch is a parse error."""
        if not self.accept(*words):
            raise self.error()

    def ident(self) -> str:
        """An identifier: a bare word, a backticked name or (for names) a string."""
        token = self.peek()
        if token is None or token.kind not in (Tok.WORD, Tok.IDENT, Tok.STRING):
            raise self.error()
        self.pos += 1
        return token.value

    def qualified(self) -> tuple[str | None, str]:
        """``name`` or ``schema.name``."""
        first = self.ident()
        if self.peek_upper() == "." and self.peek(1) is not None:
            self.pos += 1
            return first, self.ident()
        return None, first

    def string(self) -> str:
        """A string literal's content (a bare word is accepted, as mysqld does for options)."""
        token = self.next()
        if token.kind in (Tok.STRING, Tok.WORD, Tok.IDENT, Tok.NUMBER):
            return token.value
        raise self.error(token)

    def number(self) -> int:
        """An integer literal."""
        token = self.next()
        if token.kind is not Tok.NUMBER:
            raise self.error(token)
        try:
            return int(token.text, 0) if token.text.lower().startswith("0x") else int(token.text)
        except ValueError:
            raise self.error(token) from None

    def rest_text(self) -> str:
        """The statement text from the current token on."""
        token = self.peek()
        return "" if token is None else self.statement.text[token.start :]

    def text_between(self, start: int, end: int) -> str:
        """Original text of tokens ``start`` to ``end - 1``."""
        if start >= end:
            return ""
        return self.statement.text[self.tokens[start].start : self.tokens[end - 1].end]

    def error(self, token: Token | None = None) -> SqlError:
        """ER_PARSE_ERROR near ``token`` (default: the current one)."""
        if token is None:
            token = self.peek()
        if token is None:
            return parse_error("", self.statement.text.count("\n") + 1)
        text = self.statement.text
        return parse_error(text[token.start :], text.count("\n", 0, token.start) + 1)

    def expect_end(self) -> None:
        """Parse error unless every token was consumed."""
        if not self.at_end():
            raise self.error()

    def skip_balanced(self) -> int:
        """Consume a parenthesised group (current token is '('); returns the index after it."""
        depth = 0
        while True:
            token = self.next()
            if token.kind is Tok.OP and token.text == "(":
                depth += 1
            elif token.kind is Tok.OP and token.text == ")":
                depth -= 1
                if depth == 0:
                    return self.pos
