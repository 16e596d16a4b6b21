"""The classifier's function lists against a live MariaDB's own: ``information_schema``'s
``SQL_FUNCTIONS`` and ``KEYWORDS``, and what the server answers when a name is called.

A name is a MariaDB built-in when the server lists it, or when calling it fails with anything
but "FUNCTION db.name does not exist" (1305, or 1630 with a hint about function names) for some
number of arguments: that error means the server took the name for a stored function.  The
test database has no stored functions, so nothing else can answer 1305 or 1630.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent.classify.functions import (
    MYSQL_NOT_CALLS,
    NOT_CALLS,
    PRIMARY_FUNCTIONS,
    SAFE_FUNCTIONS,
)
from consistent.testing.pytest_plugin import CleanDatabase

pytestmark = pytest.mark.mariadb

# ER_SP_DOES_NOT_EXIST, and its variant that points at "Function Name Parsing and Resolution".
_NO_SUCH_FUNCTION = frozenset({1305, 1630})


@pytest.fixture
def server(mariadb_database: CleanDatabase) -> Iterator[Any]:
    with contextlib.closing(mariadb_database.connect()) as conn:
        yield conn.cursor()


def _column(cur: Any, sql: str) -> set[str]:
    cur.execute(sql)
    return {str(row[0]).upper() for row in cur.fetchall()}


def _answers(cur: Any, name: str) -> list[int]:
    """The error number (0: none) of calling ``name`` with 0 to 3 NULL arguments."""
    codes = []
    for count in range(4):
        try:
            cur.execute(f"SELECT {name}({', '.join(['NULL'] * count)})")
            cur.fetchall()
            codes.append(0)
        except pymysql.MySQLError as e:
            codes.append(int(e.args[0]))
    return codes


def _taken_for_a_stored_function(cur: Any, name: str) -> bool:
    """True when every call of ``name`` fails as a call of a stored function that does not
    exist: the name is no built-in."""
    return all(code in _NO_SUCH_FUNCTION for code in _answers(cur, name))


def test_every_mariadb_builtin_is_decided(server: Any) -> None:
    """Every function the server lists is safe on a replica or needs the primary for a stated
    reason: none is left to chance."""
    listed = _column(server, "SELECT FUNCTION FROM information_schema.SQL_FUNCTIONS")
    assert len(listed) > 200
    undecided = listed - SAFE_FUNCTIONS["mariadb"] - set(PRIMARY_FUNCTIONS)
    assert undecided == set()


def test_every_name_called_safe_on_mariadb_is_a_mariadb_builtin(server: Any) -> None:
    listed = _column(server, "SELECT FUNCTION FROM information_schema.SQL_FUNCTIONS")
    keywords = _column(server, "SELECT WORD FROM information_schema.KEYWORDS")
    unlisted = sorted(SAFE_FUNCTIONS["mariadb"] - listed - keywords)
    assert unlisted, "spatial and window functions are not in SQL_FUNCTIONS: checked by calling"
    stored = [name for name in unlisted if _taken_for_a_stored_function(server, name)]
    assert stored == []


def test_mysql_only_names_are_not_mariadb_builtins(server: Any) -> None:
    """A name called safe on MySQL only must really be absent from MariaDB (or it belongs to
    both), and the MySQL-only keywords are function names there."""
    mysql_only = sorted((SAFE_FUNCTIONS["mysql"] - SAFE_FUNCTIONS["mariadb"]) | MYSQL_NOT_CALLS)
    builtins = [name for name in mysql_only if not _taken_for_a_stored_function(server, name)]
    assert builtins == []


def test_words_that_call_nothing_cannot_name_a_function(server: Any) -> None:
    """No word of :data:`NOT_CALLS` followed by "(" is ever taken for a stored function's
    name, whatever the number of arguments."""
    keywords = _column(server, "SELECT WORD FROM information_schema.KEYWORDS")
    assert NOT_CALLS - keywords == set()
    taken = {
        word: codes
        for word in sorted(NOT_CALLS)
        if _NO_SUCH_FUNCTION.intersection(codes := _answers(server, word))
    }
    assert taken == {}


def test_the_probe_tells_a_stored_function_from_a_builtin(server: Any) -> None:
    """The probe itself can fail: a made-up name is taken for a stored function, a built-in
    with the wrong argument count is not."""
    assert _taken_for_a_stored_function(server, "surely_not_a_builtin")
    assert not _taken_for_a_stored_function(server, "ABS")
    assert not _taken_for_a_stored_function(server, "POINT")
