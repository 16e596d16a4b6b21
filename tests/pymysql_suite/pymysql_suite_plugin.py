"""pytest plugin for PyMySQL's own test suite, loaded with ``-p`` by ``run.py``.

It does two things, both set up by environment variables that ``run.py`` writes:

* ``CONSISTENT_PYMYSQL_OVERLAY`` names a directory holding ``pymysql/tests`` (and, for an
  old suite, the helper modules it imports that the installed PyMySQL no longer has).  The
  directory is appended to the installed ``pymysql`` package's ``__path__``, so the suite
  imports as ``pymysql.tests`` while every PyMySQL module it uses is the installed one.
* ``CONSISTENT_PYMYSQL_WRAP``, when set, is a JSON object ``{"replicas": [...], "options":
  {...}}``: ``pymysql.connect``, ``pymysql.Connect``, ``pymysql.Connection`` and
  ``pymysql.connections.Connection`` are replaced by :func:`consistent.connect` with the
  caller's arguments unchanged, the caller's host as the primary, plus those replicas and
  options.  Nothing else is touched: what the suite sees is what an application that swaps
  ``pymysql.connect`` for ``consistent.connect`` sees.

The replacement happens at ``pytest_configure``, before collection, because some of the
suite's classes connect in their class body.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pymysql
import pymysql.connections

OVERLAY_ENV = "CONSISTENT_PYMYSQL_OVERLAY"
WRAP_ENV = "CONSISTENT_PYMYSQL_WRAP"


def _add_overlay(directory: str) -> None:
    package = os.path.join(directory, "pymysql")
    if package not in pymysql.__path__:
        pymysql.__path__.append(package)


def _wrapping_connect(replicas: list[str], options: dict[str, Any]) -> Any:
    # Imported before anything is replaced: the wrapper subclasses PyMySQL's Connection.
    import consistent
    import consistent.dbapi

    def connect(*args: Any, **kwargs: Any) -> Any:
        if args:
            # PyMySQL 1.x takes keywords only; an old positional call is the caller's error,
            # raised by PyMySQL's own signature.
            raise TypeError("connect() takes keyword arguments only")
        merged = {**options, **kwargs}
        merged.setdefault("replicas", replicas)
        return consistent.connect(**merged)

    return connect


def pytest_configure(config: Any) -> None:
    overlay = os.environ.get(OVERLAY_ENV)
    if overlay:
        _add_overlay(overlay)
    wrap = os.environ.get(WRAP_ENV)
    if wrap:
        settings = json.loads(wrap)
        connect = _wrapping_connect(list(settings["replicas"]), dict(settings.get("options", {})))
        pymysql.connect = connect
        pymysql.Connect = connect
        pymysql.Connection = connect
        pymysql.connections.Connection = connect
