"""Routing hints in a leading comment: ``/* consistent: primary */`` and friends.

Only ``/* … */`` comments before the first token count, so a hint cannot hide in a string or
after the statement has begun.  Other leading comments (sqlcommenter tags, ``--`` lines) may come
before it.  A comment that starts with ``consistent:`` but does not parse is ignored and
reported, never raised: a typo in a hint must not break the application's query.
"""

from __future__ import annotations

import math
import re
from typing import Final

from consistent.classify.lexer import leading_comments
from consistent.classify.model import LEVEL_NAMES, RouteHint, RouteTarget

__all__ = ["parse_hint"]

_PREFIX_RE: Final = re.compile(r"\s*consistent\s*:", re.IGNORECASE)
_ITEM_SPLIT_RE: Final = re.compile(r"[\s,]+")


def parse_hint(text: str) -> tuple[RouteHint | None, str | None]:
    """The hint of ``text``'s leading comments and, when one was ignored, why.

    The first ``consistent:`` comment is the hint; later ones are ignored.
    """
    for body in leading_comments(text):
        m = _PREFIX_RE.match(body)
        if m is not None:
            return _parse_items(body[m.end() :])
    return None, None


def _parse_items(spec: str) -> tuple[RouteHint | None, str | None]:
    target: RouteTarget | None = None
    level: str | None = None
    max_lag: float | None = None
    items = [item for item in _ITEM_SPLIT_RE.split(spec.strip()) if item]
    if not items:
        return None, "empty consistent: hint"
    for item in items:
        name, sep, value = item.partition("=")
        name = name.lower()
        if not sep and name in ("primary", "replica"):
            if target is not None:
                return None, f"more than one target in hint: {item!r}"
            target = RouteTarget(name)
        elif sep and name == "level":
            if level is not None:
                return None, "level given twice in hint"
            level = value.lower().replace("-", "_")
            if level not in LEVEL_NAMES:
                return None, f"unknown level in hint: {value!r}"
        elif sep and name == "max_lag":
            if max_lag is not None:
                return None, "max_lag given twice in hint"
            try:
                max_lag = float(value)
            except ValueError:
                return None, f"max_lag is not a number: {value!r}"
            if not math.isfinite(max_lag) or max_lag < 0:
                return None, f"max_lag must be a finite number >= 0: {value!r}"
        else:
            return None, f"unknown hint item: {item!r}"
    return RouteHint(target=target, level=level, max_lag=max_lag), None
