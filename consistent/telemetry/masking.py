"""``db.query.text`` with its literals masked: what a statement did, never the data it carried.

One regular-expression pass replaces every literal with ``?``: quoted strings (``'…'`` and
``"…"``, with ``''``/``\\'`` escapes and charset introducers such as ``_utf8mb4'…'`` or
``N'…'``), numbers (integers, decimals, exponents), hexadecimal and bit values (``0x1F``,
``X'1F'``, ``0b101``, ``B'101'``).  Comments and back-quoted identifiers are kept as they are,
so digits in ``t1`` or in `` `order 66` `` survive.  A second pass folds lists of masked values,
``IN (?, ?, ?)`` and ``VALUES (?, ?), (?, ?)``, into ``(?)``, so statements that differ only in
list length read the same.

An unterminated string (a statement cut short) is masked to its end: nothing after an opening
quote can leak.  The OpenTelemetry database conventions ask for exactly this sanitization.
No SQL parser is involved: it runs once per traced statement, off the statement's thread.

https://opentelemetry.io/docs/specs/semconv/database/database-spans/#sanitization-of-dbquerytext
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["PLACEHOLDER", "mask_query"]

#: What every literal becomes.
PLACEHOLDER: Final = "?"

_TOKENS: Final = re.compile(
    r"""
    (?P<keep>
        /\*.*?(?:\*/|\Z)                          # block comment (also /*! … */ and hints)
      | (?:--[ \t]|\#)[^\n]*                       # line comments
      | `(?:[^`]|``)*(?:`|\Z)                      # quoted identifier
    )
  | (?P<mask>
        (?:(?<![\w$])(?:_[A-Za-z0-9]+\s*|[nN](?=')))?   # charset introducer, N'…'
        (?:'(?:[^'\\]|\\.|'')*\\?(?:'|\Z)          # 'string'
          |"(?:[^"\\]|\\.|"")*\\?(?:"|\Z))         # "string"
      | [xX]'[0-9A-Fa-f]*'                         # X'1F'
      | [bB]'[01]*'                                # B'101'
      | (?<![\w$.])0x[0-9A-Fa-f]+(?![\w$])         # 0x1F
      | (?<![\w$.])0b[01]+(?![\w$])                # 0b101
      | (?<![\w$.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w$])   # 12, 1.5, .5, 1e-3
    )
    """,
    re.VERBOSE | re.DOTALL,
)

# ( ?, ?, ? ) -> (?)
_LIST: Final = re.compile(r"\(\s*\?(?:\s*,\s*\?)*\s*\)")
# (?), (?), (?) -> (?)
_ROWS: Final = re.compile(r"\(\?\)(?:\s*,\s*\(\?\))+")


def _replace(match: re.Match[str]) -> str:
    return PLACEHOLDER if match.lastgroup == "mask" else match.group()


def mask_query(sql: str, max_chars: int = 2048) -> str:
    """``sql`` with every literal replaced by ``?`` and value lists folded, cut to
    ``max_chars`` characters (an ellipsis marks the cut).

    Only a bounded prefix is scanned, so a multi-megabyte bulk ``INSERT`` costs no more than a
    short one; the cut falls after masking, so it can never expose part of a literal.
    """
    scanned = sql[: max_chars * 4] if len(sql) > max_chars * 4 else sql
    masked = _TOKENS.sub(_replace, scanned)
    if "(" in masked:
        masked = _ROWS.sub("(?)", _LIST.sub("(?)", masked))
    if len(masked) > max_chars or len(scanned) < len(sql):
        masked = masked[: max_chars - 1] + "…"
    return masked
