"""The statement lexer: only the tokens routing needs, literals and comments skipped.

Two scanners share one set of regular-expression fragments that follow the MySQL lexer
(``sql/sql_lex.cc``, ``lex_one_token``) and the manual's "Comments" and "String Literals"
pages (https://dev.mysql.com/doc/refman/8.4/en/comments.html,
https://dev.mysql.com/doc/refman/8.4/en/string-literals.html):

* :func:`hot_tokens` runs on every statement.  One ``findall`` over the upper-cased text returns
  keywords and identifiers, backticked identifiers, user and system variables and the few
  punctuation marks that matter (``;`` ``(`` ``)`` ``:=`` and a ``.`` that qualifies a name).
  String literals, comments and numbers produce empty strings or nothing at all, so a long
  ``IN (1, 2, …)`` list or a bulk ``VALUES`` costs one pass of the regular-expression engine and
  almost no Python work.
* :func:`full_tokens` keeps positions and every punctuation mark; the rarer paths (``SET``,
  ``USE``, splitting a multi-statement) use it on the original text.

What counts as code and what does not:

* ``/* … */`` is a comment, including optimizer hints ``/*+ … */``;
* ``/*! … */``, ``/*!80000 … */`` and MariaDB's ``/*M!100500 … */`` are *code*: the marker is
  dropped and the content lexed.  The version is not compared with any server's: if either
  server could run it, it is treated as run (the safe reading for routing);
* ``--`` starts a comment only when followed by a space or a control character (or the end),
  as in ``lex_one_token``: ``1--1`` is arithmetic;
* ``#`` starts a comment to the end of the line;
* ``'…'`` and ``"…"`` are strings with ``\\`` escapes and doubled quotes (the default
  ``sql_mode``: neither ``NO_BACKSLASH_ESCAPES`` nor ``ANSI_QUOTES`` is modelled); a character-set
  introducer (``_utf8mb4'…'``), ``N'…'``, ``X'…'`` and ``B'…'`` leave a harmless word before the
  string;
* a backticked identifier (a backtick inside is doubled) is returned with its backticks, so
  that a column named ``for update`` in backticks can never read as the keywords;
* an identifier may start with a digit in MySQL (``1abc``); numbers are skipped, so such an
  identifier loses its leading digits, which can only make a keyword appear, never disappear.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = [
    "Token",
    "TokenType",
    "full_tokens",
    "hot_tokens",
    "leading_comments",
    "names_before_parenthesis",
    "unquote_identifier",
]

# --- fragments ------------------------------------------------------------------------------
_SQ_STRING: Final = r"'[^'\\]*(?:(?:\\[\s\S]|'')[^'\\]*)*'?"
_DQ_STRING: Final = r'"[^"\\]*(?:(?:\\[\s\S]|"")[^"\\]*)*"?'
_BACKTICK: Final = r"`[^`]*(?:``[^`]*)*`?"
# A plain block comment (optimizer hints included); an unterminated one runs to the end.
_BLOCK_COMMENT: Final = r"/\*(?![Mm]?!)[\s\S]*?(?:\*/|\Z)"
# The opening of an executable comment, with its optional version (sql_lex.cc: five digits,
# or six digits followed by a space).  Its content is lexed as code; its "*/" is skipped.
_EXEC_OPEN: Final = r"/\*[Mm]?!(?:\d{6}(?=\s)|\d{5})?"
_EXEC_CLOSE: Final = r"\*/"
_DASH_COMMENT: Final = r"--(?=[\x00-\x20]|\Z)[^\n]*"
_HASH_COMMENT: Final = r"\#[^\n]*"
_WORD: Final = r"[A-Za-z_$\x80-\U0010FFFF][\w$]*"
_SYSTEM_VAR: Final = r"@@[\w$.`]*"
_USER_VAR: Final = rf"@(?:{_SQ_STRING}|{_DQ_STRING}|{_BACKTICK}|[\w$.]*)"
# A period that qualifies a name: the next word is an identifier even if it is reserved.
_QUALIFIER_DOT: Final = r"\.(?=[A-Za-z_$`\x80-\U0010FFFF])"

_SKIPPED: Final = "|".join(
    (_SQ_STRING, _DQ_STRING, _BLOCK_COMMENT, _EXEC_OPEN, _DASH_COMMENT, _HASH_COMMENT)
)
_HOT_CAPTURED: Final = "|".join(
    (_WORD, _BACKTICK, _SYSTEM_VAR, _USER_VAR, ":=", "[;()]", _QUALIFIER_DOT)
)
# Characters that can start no token, consumed possessively before each token so that the
# engine does not try every alternative at every space or digit.  A ``/``, ``-``, ``:`` or ``.``
# that starts nothing is consumed here too, so that after this prefix a token always matches or
# the text has ended (the ``\Z`` alternative): no start position is ever scanned twice, and
# the scan stays linear even for megabytes of spaces.
_BORING: Final = (
    r"(?:[^A-Za-z_$\x80-\U0010FFFF'\"`/\-#@:;().]++"
    r"|/(?!\*)|-(?!-(?:[\x00-\x20]|\Z))|:(?!=)|\.(?![A-Za-z_$`\x80-\U0010FFFF]))*+"
)
_HOT_RE: Final = re.compile(f"{_BORING}(?:(?:{_SKIPPED})|({_HOT_CAPTURED})|\\Z)")

_FULL_RE: Final = re.compile(
    "|".join(
        (
            f"(?P<comment>{_BLOCK_COMMENT}|{_DASH_COMMENT}|{_HASH_COMMENT})",
            f"(?P<exec_open>{_EXEC_OPEN})",
            f"(?P<exec_close>{_EXEC_CLOSE})",
            f"(?P<string>{_SQ_STRING}|{_DQ_STRING})",
            f"(?P<backtick>{_BACKTICK})",
            f"(?P<sysvar>{_SYSTEM_VAR})",
            f"(?P<uservar>{_USER_VAR})",
            f"(?P<word>{_WORD})",
            r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[\w$]*)",
            r"(?P<punct>:=|<=>|[<>!]=|<>|\S)",
        )
    )
)

# A name directly followed by "(" (spaces between are allowed), read backwards: the scan looks
# for "(" first, which the regular-expression engine finds at memchr speed.
_PAREN_NAME_REVERSED_RE: Final = re.compile(r"\([ \t\r\n\f\v]*+([\w$]++|`(?:[^`]|``)*+`)")

_LEADING_RE: Final = re.compile(
    rf"\s*(?:/\*(?![Mm]?!)([\s\S]*?)\*/|{_DASH_COMMENT}|{_HASH_COMMENT})",
)


def hot_tokens(upper_text: str) -> list[str]:
    """The routing-relevant tokens of ``upper_text`` (already upper-cased), in order.

    Skipped literals and comments leave empty strings in the list; callers either ignore them
    (set operations) or filter them out.
    """
    return _HOT_RE.findall(upper_text)


def names_before_parenthesis(upper_text: str) -> list[str]:
    """The names (words, quoted names with their backticks) that ``(`` follows with nothing but
    spaces between, once per occurrence: what may be a function call.  Strings and comments
    are not told apart, so a name there counts too; a name split from its ``(`` by a comment
    (``f /* c */ (``) does not."""
    return [name[::-1] for name in _PAREN_NAME_REVERSED_RE.findall(upper_text[::-1])]


class TokenType:
    """Names of :class:`Token` types (the named groups of the full scanner)."""

    STRING: Final = "string"
    BACKTICK: Final = "backtick"
    SYSVAR: Final = "sysvar"
    USERVAR: Final = "uservar"
    WORD: Final = "word"
    NUMBER: Final = "number"
    PUNCT: Final = "punct"


class Token(NamedTuple):
    """One token of :func:`full_tokens`: its type, its text as written, and its span.

    A named tuple rather than a dataclass: the rare paths create one per token, and tuples are
    several times cheaper to build.
    """

    type: str
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        """The text upper-cased, for keyword comparisons."""
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        """True when this is an unquoted word equal (case-insensitively) to one of ``words``."""
        return self.type == TokenType.WORD and self.text.upper() in words


def full_tokens(text: str, start: int = 0, end: int | None = None) -> list[Token]:
    """Every token of ``text[start:end]`` with its position, comments left out.

    The ``*/`` that closes an executable comment is dropped; anywhere else, as in the server's
    lexer, it is a ``*`` followed by whatever ``/`` starts, so the scan restarts after the ``*``.
    """
    stop = len(text) if end is None else end
    tokens: list[Token] = []
    in_exec = False
    pos: int | None = start
    while pos is not None:
        matches, pos = _FULL_RE.finditer(text, pos, stop), None
        for m in matches:
            kind = m.lastgroup or ""
            if kind == "comment":
                continue
            if kind == "exec_open":
                in_exec = True
            elif kind != "exec_close":
                tokens.append(Token(kind, m.group(), m.start(), m.end()))
            elif in_exec:
                in_exec = False
            else:
                tokens.append(Token(TokenType.PUNCT, "*", m.start(), m.start() + 1))
                pos = m.start() + 1
                break
    return tokens


def leading_comments(text: str) -> list[str]:
    """The bodies of the ``/* … */`` comments before the first token of ``text``.

    ``--`` and ``#`` comments among them are skipped (they carry no hints); executable
    comments end the leading part since their content is code.
    """
    bodies: list[str] = []
    pos = 0
    while (m := _LEADING_RE.match(text, pos)) is not None:
        if m.group(1) is not None:
            bodies.append(m.group(1))
        pos = m.end()
    return bodies


def unquote_identifier(text: str) -> str:
    """An identifier as the server sees it: backticks removed and ```` ``  ```` unescaped."""
    if len(text) >= 2 and text[0] == "`" and text[-1] == "`":
        return text[1:-1].replace("``", "`")
    return text
