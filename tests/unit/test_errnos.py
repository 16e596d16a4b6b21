"""Error numbers live in one module, ``consistent.errnos``."""

from __future__ import annotations

import re
from pathlib import Path

import pymysql.constants.CR as PYMYSQL_CR
import pymysql.constants.ER as PYMYSQL_ER

from consistent.dbapi._pymysql import DISCONNECT_ERRNOS
from consistent.emulator.errors import SPECS
from consistent.errnos import CONSISTENCY_TIMEOUT, CR, ER

ROOT = Path(__file__).resolve().parents[2]
# A module-level constant whose name says it is an error number, set to a literal.
_DEFINITION = re.compile(r"^_?(ER|CR)_[A-Z0-9_]+(: Final)? = \d+", re.M)


def test_no_number_is_two_symbols() -> None:
    # IntEnum turns a repeated value into a silent alias: every symbol must be its own member.
    assert len(ER.__members__) == len(list(ER))
    assert len(CR.__members__) == len(list(CR))


def test_symbols_agree_with_pymysql_where_it_has_them() -> None:
    for member in ER:
        known = getattr(PYMYSQL_ER, member.name, None)
        assert known in (None, member.value), member
    for member in CR:
        known = getattr(PYMYSQL_CR, f"CR_{member.name}", None)
        assert known in (None, member.value), member


def test_our_own_number_is_outside_the_servers_and_clients() -> None:
    assert CONSISTENCY_TIMEOUT not in {*ER, *CR}


def test_every_emulated_error_has_a_symbol() -> None:
    assert set(SPECS) <= set(ER)


def test_disconnects_are_named() -> None:
    assert {2002, 2003, 2006, 2013, 2014, 2055, 1040, 1053, 1927, 4031} == DISCONNECT_ERRNOS


def test_no_other_module_defines_an_error_number() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("consistent", "proxy", "analytics")
        for path in (ROOT / package).rglob("*.py")
        if path.name != "errnos.py" and _DEFINITION.search(path.read_text())
    ]
    assert offenders == []
