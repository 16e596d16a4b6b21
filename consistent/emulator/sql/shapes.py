"""Statement shapes: a statement's text with its plain literal values taken out.

Parsing with sqlglot, translating and generating SQLite text cost far more than running the
statement on SQLite, and clients send the same statements again and again with other values
(``SELECT v FROM t WHERE k = 17``, ``INSERT INTO t VALUES (5, 'x')``; PyMySQL and the proxy
interpolate parameters client-side).  A :class:`Shape` names what such statements share, so
that work is done once per shape (:mod:`consistent.emulator.sql.stmtcache`).

Only literals whose value cannot change how the statement parses, translates or generates are
taken out ("slots"): plain integers other than ``0``, plain decimals and plain single-quoted
strings (no escapes, quotes or control characters) that stand right after a comparison
operator (``=``, ``<>``, ``<=>``…) or as a whole item of an ``IN (…)`` list, a ``VALUES (…)``
row or the arguments of the GTID functions (``WAIT_FOR_EXECUTED_GTID_SET('…', 1)``, which
clients send before every read that waits).  Literals after keywords (``LIMIT 5``,
``INTERVAL '1' DAY``, ``_binary'…'``), arguments of other functions and select-list items stay
part of the shape, as do ``0`` (``INSERT`` reads an ``AUTO_INCREMENT`` 0 as "next value") and
the empty string.

A shape's *template text* holds sentinel literals in its slots; whatever sqlglot and the
translation make of the template, the sentinels are found again in the SQLite text, which
:class:`SqlTemplate` splits so that the values of the next statement of that shape are put
back in their places.  Callers check a template once against the statement it was built from
(:meth:`SqlTemplate.render` must give back the SQLite text of the real statement) before
trusting it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from consistent.emulator.sql.lexer import Tok, Token

__all__ = ["Shape", "SqlTemplate", "render_literal", "shape_of"]

#: Slot kinds: an integer, a decimal, a string.
INT: Final = "i"
DECIMAL: Final = "d"
STRING: Final = "s"

_COMPARISONS: Final = frozenset({"=", "<>", "!=", "<", ">", "<=", ">=", "<=>"})
#: Words whose parenthesis holds a list of plain values (the GTID functions are not known to
#: sqlglot, which parses their arguments as any expressions).
_LIST_OPENERS: Final = frozenset(
    {
        "IN",
        "WAIT_FOR_EXECUTED_GTID_SET",
        "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS",
        "GTID_SUBSET",
        "GTID_SUBTRACT",
    }
)
_VALUES_WORDS: Final = frozenset({"VALUES", "VALUE"})
_INT_RE: Final = re.compile(r"[1-9][0-9]{0,17}")
_DECIMAL_RE: Final = re.compile(r"(?:0|[1-9][0-9]{0,17})\.[0-9]{1,17}")
_STRING_RE: Final = re.compile(r"'[^'\\\x00-\x1f\x7f]+'")
_MAX_SLOTS: Final = 99_999

# Sentinels: values no client sends, recognisable in any text sqlglot generates from them.
_SENTINEL_STEM: Final = "9182736451"
_STRING_STEM: Final = "zqx7s"
_SENTINEL_RE: Final = re.compile(
    rf"{_SENTINEL_STEM}(?P<dot>\.)?(?P<n>[0-9]{{5}})(?![0-9.])|'{_STRING_STEM}(?P<s>[0-9]{{5}})'"
)
_MARK: Final = "\x00"  # never outside a string literal in text the lexer accepted


def _sentinel(kind: str, index: int) -> str:
    if kind == INT:
        return f"{_SENTINEL_STEM}{index:05d}"
    if kind == DECIMAL:
        return f"{_SENTINEL_STEM}.{index:05d}"
    return f"'{_STRING_STEM}{index:05d}'"


def render_literal(kind: str, value: str) -> str:
    """A slot value as SQL text (MySQL and SQLite spell these literals alike)."""
    return f"'{value}'" if kind == STRING else value


@dataclass(frozen=True, slots=True)
class Shape:
    """A statement with its slot literals taken out.

    ``key`` is the text with each slot replaced by a marker of its kind; ``template`` the text
    with sentinel literals in the slots; ``values`` the slot values as sqlglot holds them
    (a string's content without quotes, a number's digits) and ``kinds`` their kinds.
    """

    key: str
    template: str
    values: tuple[str, ...]
    kinds: tuple[str, ...]

    @property
    def sentinels(self) -> tuple[str, ...]:
        """The sentinel values (as sqlglot holds them) in slot order."""
        return tuple(
            _sentinel(kind, i).strip("'") if kind == STRING else _sentinel(kind, i)
            for i, kind in enumerate(self.kinds)
        )


def _slot_kind(token: Token) -> str | None:
    text = token.text
    if token.kind is Tok.NUMBER:
        if _INT_RE.fullmatch(text):
            return INT
        if _DECIMAL_RE.fullmatch(text):
            return DECIMAL
        return None
    if token.kind is Tok.STRING and _STRING_RE.fullmatch(text):
        return STRING
    return None


_OPEN: Final = "("
_CLOSE: Final = ")"
_COMMA: Final = ","
_ITEM_START: Final = frozenset({"(", ","})
_ITEM_END: Final = frozenset({")", ","})
_LITERALS: Final = (Tok.STRING, Tok.NUMBER)


def _in_slot_position(previous: str, list_item: bool, following: Token | None) -> bool:
    """After a comparison operator, or a whole item of an IN list / VALUES row; never glued
    to another literal (``'a' 'b'`` is one string in MySQL)."""
    if following is not None and following.kind in _LITERALS:
        return False
    if previous in _COMPARISONS:
        return True
    return (
        list_item
        and following is not None
        and following.kind is Tok.OP
        and following.text in _ITEM_END
    )


def _slots(tokens: tuple[Token, ...]) -> list[tuple[int, str]]:
    """``(token index, kind)`` of every slot; see the module docstring for which they are."""
    slots: list[tuple[int, str]] = []
    lists: list[bool] = []  # per open parenthesis: whether its items are list items
    values_depth = -1  # depth of an open VALUES row list (-1: none)
    op, word = Tok.OP, Tok.WORD
    previous_kind: Tok | None = None
    previous_text = ""
    count = len(tokens)
    for index, token in enumerate(tokens):
        kind, text = token.kind, token.text
        if kind is op:
            if text == _OPEN:
                depth = len(lists)
                if values_depth == depth and (previous_kind is word or previous_text == _COMMA):
                    lists.append(True)
                else:
                    lists.append(previous_kind is word and previous_text.upper() in _LIST_OPENERS)
            elif text == _CLOSE:
                if lists:
                    lists.pop()
            elif values_depth == len(lists) and text != _COMMA:
                values_depth = -1
        elif kind is word and text.upper() in _VALUES_WORDS:
            following = tokens[index + 1] if index + 1 < count else None
            opens = following is not None and following.kind is op and following.text == _OPEN
            values_depth = len(lists) if opens else -1
        elif values_depth == len(lists):
            values_depth = -1
        if kind in _LITERALS and previous_kind is op:
            slot = _slot_kind(token)
            following = tokens[index + 1] if index + 1 < count else None
            list_item = bool(lists) and lists[-1] and previous_text in _ITEM_START
            if slot is not None and _in_slot_position(previous_text, list_item, following):
                slots.append((index, slot))
        previous_kind, previous_text = kind, text
    return slots


def shape_of(text: str, tokens: tuple[Token, ...]) -> Shape | None:
    """The shape of one statement (``tokens`` are its lexer tokens, offsets into ``text``).

    None when the text could be confused with a template (it holds sentinel-like digits).
    """
    if _SENTINEL_STEM in text or _STRING_STEM in text:
        return None
    slots = _slots(tokens)
    if len(slots) > _MAX_SLOTS:
        return None
    if not slots:
        return Shape(text, text, (), ())
    key: list[str] = []
    template: list[str] = []
    values: list[str] = []
    kinds: list[str] = []
    position = 0
    for number, (index, kind) in enumerate(slots):
        token = tokens[index]
        between = text[position : token.start]
        key += (between, _MARK, kind)
        template += (between, _sentinel(kind, number))
        values.append(token.text[1:-1] if kind == STRING else token.text)
        kinds.append(kind)
        position = token.end
    key.append(text[position:])
    template.append(text[position:])
    return Shape("".join(key), "".join(template), tuple(values), tuple(kinds))


@dataclass(frozen=True, slots=True)
class SqlTemplate:
    """SQL text with holes where slot values go: ``parts[0] v[slots[0]] parts[1] …``.

    ``bound`` says, per hole, whether :meth:`bind` passes its value as a parameter: integers
    and plain strings standing alone outside any quoted text, in SQL without parameters of
    its own.  Their SQLite text is then the same for every statement of the shape, so SQLite
    prepares it once (its statement cache is keyed by text); a bound integer or string
    compares, converts and is stored exactly as the same literal would be.
    """

    parts: tuple[str, ...]
    slots: tuple[int, ...]
    bound: tuple[bool, ...] = ()

    @classmethod
    def build(cls, sql: str, kinds: tuple[str, ...]) -> SqlTemplate | None:
        """Split text generated from a shape's template text at its sentinels; None when a
        sentinel came out changed (another kind, an unknown slot)."""
        parts: list[str] = []
        slots: list[int] = []
        position = 0
        for match in _SENTINEL_RE.finditer(sql):
            if match.group("s") is not None:
                slot, kind = int(match.group("s")), STRING
            else:
                slot, kind = int(match.group("n")), DECIMAL if match.group("dot") else INT
            if slot >= len(kinds) or kinds[slot] != kind:
                return None
            parts.append(sql[position : match.start()])
            slots.append(slot)
            position = match.end()
        parts.append(sql[position:])
        return cls(tuple(parts), tuple(slots), _bindable(parts, slots, kinds))

    def render(self, shape: Shape) -> str:
        """The SQL text for a statement of the shape the template was built for."""
        parts = self.parts
        if not self.slots:
            return parts[0]
        values, kinds = shape.values, shape.kinds
        out = [parts[0]]
        for number, slot in enumerate(self.slots):
            out.append(render_literal(kinds[slot], values[slot]))
            out.append(parts[number + 1])
        return "".join(out)

    def bind(self, shape: Shape) -> tuple[str, tuple[object, ...]]:
        """The SQL text and parameters for a statement of the shape: :meth:`render`, with
        the values of the ``bound`` holes passed as parameters."""
        parts = self.parts
        if not self.slots:
            return parts[0], ()
        values, kinds, bound = shape.values, shape.kinds, self.bound
        out = [parts[0]]
        params: list[object] = []
        for number, slot in enumerate(self.slots):
            kind = kinds[slot]
            if bound and bound[number]:
                out.append("?")
                params.append(int(values[slot]) if kind == INT else values[slot])
            else:
                out.append(render_literal(kind, values[slot]))
            out.append(parts[number + 1])
        return "".join(out), tuple(params)


_GLUED: Final = re.compile(r"[0-9A-Za-z_$.]")


def _bindable(parts: list[str], slots: list[int], kinds: tuple[str, ...]) -> tuple[bool, ...]:
    """Which holes of a template :meth:`SqlTemplate.bind` may pass as parameters."""
    if any("?" in part for part in parts):  # parameters of its own: keep every value inline
        return (False,) * len(slots)
    bound: list[bool] = []
    single = double = 0  # quotes before the hole: an odd count means inside quoted text
    for number, slot in enumerate(slots):
        before, after = parts[number], parts[number + 1]
        single += before.count("'")
        double += before.count('"')
        bound.append(
            kinds[slot] in (INT, STRING)
            and single % 2 == 0
            and double % 2 == 0
            and not (before and _GLUED.fullmatch(before[-1]))
            and not (after and _GLUED.fullmatch(after[0]))
        )
    return tuple(bound)
