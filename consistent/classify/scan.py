"""The expression rules: what inside a statement ties it, or the session, to the primary.

They run over the tokens of :func:`consistent.classify.lexer.hot_tokens` and look for locking
clauses, ``SELECT … INTO``, user variables, sequences and the built-ins that must run on the
primary (:data:`~consistent.classify.functions.PRIMARY_FUNCTIONS`).  A function only counts
when ``(`` follows its name (comments may come between), and never after a ``.``
(``db.get_lock(…)`` is a stored function of that schema, which
:mod:`consistent.classify.calls` reports as such; ``t.for_update`` is a column).  The same name
in backticks followed by ``(`` still calls the built-in, as in the server's grammar, so it
counts too.  Calls of functions that may write are :mod:`consistent.classify.calls`' business.

:data:`READ_TRIGGERS` is the set of tokens that can make any rule fire; a statement whose
tokens avoid it entirely (and whose text has no ``@``) needs no scan at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from consistent.classify.functions import PRIMARY_FUNCTIONS
from consistent.classify.model import PinReason, PrimaryReason

__all__ = ["PIN_TRIGGERS", "READ_TRIGGERS", "Findings", "scan"]

_FUNCTIONS: Final = PRIMARY_FUNCTIONS
_FUNCTION_PINS: Final[dict[str, str]] = {"GET_LOCK": PinReason.GET_LOCK}
# ``seq.nextval`` / ``seq.currval`` (MariaDB, Oracle-compatible syntax).
_QUALIFIED_SEQUENCE: Final = frozenset({"NEXTVAL", "CURRVAL"})
_SYSTEM_VARIABLES: Final[dict[str, str]] = {
    "LAST_INSERT_ID": PrimaryReason.LAST_INSERT_ID,
    "IDENTITY": PrimaryReason.LAST_INSERT_ID,
    "INSERT_ID": PrimaryReason.LAST_INSERT_ID,
}
_DIAGNOSTIC_VARIABLES: Final = frozenset({"WARNING_COUNT", "ERROR_COUNT"})


@dataclass(slots=True)
class Findings:
    """What the rules found: the first reason and the first pin, in text order."""

    reason: str | None = None
    pin: str | None = None
    follows_previous: bool = False

    def hit(self, reason: str, pin: str | None = None) -> None:
        if self.reason is None:
            self.reason = reason
        if pin is not None and self.pin is None:
            self.pin = pin


def _following(tokens: list[str], i: int, n: int) -> tuple[str, ...]:
    """The ``n`` tokens after ``tokens[i]``, padded with empty strings."""
    window = tuple(tokens[i + 1 : i + 1 + n])
    return window + ("",) * (n - len(window))


def _function(tokens: list[str], i: int, found: Findings) -> None:
    if _following(tokens, i, 1)[0] == "(":
        name = tokens[i].strip("`")
        found.hit(_FUNCTIONS[name], _FUNCTION_PINS.get(name))


def _for(tokens: list[str], i: int, found: Findings) -> None:
    nxt = _following(tokens, i, 1)[0]
    if nxt == "UPDATE":
        found.hit(PrimaryReason.FOR_UPDATE)
    elif nxt == "SHARE":
        found.hit(PrimaryReason.FOR_SHARE)


def _lock(tokens: list[str], i: int, found: Findings) -> None:
    if _following(tokens, i, 3) == ("IN", "SHARE", "MODE"):
        found.hit(PrimaryReason.LOCK_IN_SHARE_MODE)


def _into(tokens: list[str], i: int, found: Findings) -> None:
    nxt = _following(tokens, i, 1)[0]
    pin = PinReason.USER_VARIABLE if nxt.startswith("@") and not nxt.startswith("@@") else None
    found.hit(PrimaryReason.SELECT_INTO, pin)


def _calc_found_rows(tokens: list[str], i: int, found: Findings) -> None:
    found.hit(PrimaryReason.SQL_CALC_FOUND_ROWS)


def _value_for(tokens: list[str], i: int, found: Findings) -> None:
    if _following(tokens, i, 2) == ("VALUE", "FOR"):
        found.hit(PrimaryReason.SEQUENCE)


def _ignore(tokens: list[str], i: int, found: Findings) -> None:
    """A name that matters only after a ``.`` (see ``_QUALIFIED_SEQUENCE``)."""


_Rule = Callable[[list[str], int, Findings], None]
_RULES: Final[dict[str, _Rule]] = {
    "FOR": _for,
    "LOCK": _lock,
    "INTO": _into,
    "SQL_CALC_FOUND_ROWS": _calc_found_rows,
    "NEXT": _value_for,
    "PREVIOUS": _value_for,
    "CURRVAL": _ignore,
    **dict.fromkeys(_FUNCTIONS, _function),
    **{f"`{name}`": _function for name in _FUNCTIONS},
}

#: Tokens that may make a rule fire, plus ``;`` (a possible second statement).
READ_TRIGGERS: Final = frozenset({";", ":=", *_RULES})
#: Tokens that may pin the session from inside a write (the ``@`` forms are checked apart).
PIN_TRIGGERS: Final = frozenset({";", *(f for f in _RULES if f.strip("`") in _FUNCTION_PINS)})


def _variable(tokens: list[str], i: int, found: Findings) -> None:
    token = tokens[i]
    if token.startswith("@@"):
        name = token[2:].rsplit(".", 1)[-1].strip("`")
        if name in _SYSTEM_VARIABLES:
            found.hit(_SYSTEM_VARIABLES[name])
        elif name in _DIAGNOSTIC_VARIABLES:
            found.follows_previous = True
    elif _following(tokens, i, 1)[0] == ":=":
        found.hit(PrimaryReason.USER_VARIABLE_ASSIGNMENT, PinReason.USER_VARIABLE)
    else:
        found.hit(PrimaryReason.USER_VARIABLE)


def scan(tokens: list[str]) -> Findings:
    """Run every rule over ``tokens`` (non-empty hot tokens of one statement)."""
    found = Findings()
    for i, token in enumerate(tokens):
        if token[0] == "@":
            _variable(tokens, i, found)
            continue
        rule = _RULES.get(token)
        if rule is None:
            continue
        if i and tokens[i - 1] == ".":
            # A qualified name is an identifier, whatever it spells.
            if token in _QUALIFIED_SEQUENCE:
                found.hit(PrimaryReason.SEQUENCE)
            continue
        rule(tokens, i, found)
    return found
