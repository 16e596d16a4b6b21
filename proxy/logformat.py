"""The proxy's log formats: one line per record, whatever the record holds.

Log fields carry what clients send (a user name, a statement, an error text), so a newline
or another control character in one must never start a line that looks like a record of its
own.  Both formats escape them:

* ``text``: ``time level logger: message``; control characters (C0, DEL, C1, and the Unicode
  line and paragraph separators) and the backslash are written as ``\\n``, ``\\r``, ``\\t``,
  ``\\\\`` or ``\\xNN`` / ``\\uNNNN``, in every field, a traceback's lines included;
* ``json``: one object per line; JSON escapes C0 controls itself, and DEL, C1 and the Unicode
  separators are written as ``\\uNNNN`` too (``str.splitlines`` and some readers break lines
  at them).
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, Final

__all__ = ["LOG_FIELDS", "JsonFormatter", "TextFormatter", "escape_controls"]

#: Log record attributes (``extra=``) that are fields of their own in the logs, not text
#: inside the message: the client's address and the user it logged in as.
LOG_FIELDS: Final = ("client", "user")

_CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\\\\]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_JSON_UNSAFE: Final = re.compile("[\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` on one line: control characters and backslashes escaped (module docstring)."""
    return _CONTROLS.sub(_escape, text)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in LOG_FIELDS if hasattr(record, name)}


class TextFormatter(logging.Formatter):
    """``time level logger: message``, then the :data:`LOG_FIELDS` as ``(name=value …)``, on
    one line, every field escaped."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        text = super().formatMessage(record)
        fields = _fields(record)
        if not fields:
            return text
        return text + " (" + " ".join(f"{k}={v}" for k, v in fields.items()) + ")"

    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per log record: time, level, logger, message, the :data:`LOG_FIELDS`
    the record carries (and the exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        text = json.dumps(entry, ensure_ascii=False)
        return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
