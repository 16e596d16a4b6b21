"""Shared test configuration: the real-MariaDB fixtures come from the project's own plugin.

``ast.parse`` is serialised across threads.  On CPython before 3.13 the AST constructor's
recursion counter is shared by the interpreter (python/cpython#106905): when pytest renders a
failure (it parses the test's source) while a server or workload thread formats a traceback
(Python 3.11 parses each line for its carets), ``ast.parse`` can raise ``SystemError: AST
constructor recursion depth mismatch``, and pytest stops with an INTERNALERROR that hides the
failure it was rendering.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

pytest_plugins = ["consistent.testing.pytest_plugin"]

if sys.version_info < (3, 13):
    _parse = ast.parse
    _parse_lock = threading.RLock()

    @functools.wraps(_parse)
    def _serialised_parse(*args: Any, **kwargs: Any) -> Any:
        with _parse_lock:
            return _parse(*args, **kwargs)

    ast.parse = _serialised_parse
