"""The lists of functions a replica may run, against MySQL 8.4's own list, and the rules that
apply them (the MariaDB lists are checked against a live server in
``tests/unit/test_classify_functions_mariadb.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from consistent.classify import (
    Classification,
    FunctionRules,
    PrimaryReason,
    StatementKind,
    classify,
    read_only_function_names,
)
from consistent.classify.functions import (
    MYSQL_NOT_CALLS,
    NOT_CALLS,
    PRIMARY_FUNCTIONS,
    SAFE_FUNCTIONS,
)
from consistent.errors import InterfaceError

GOLDEN = Path(__file__).with_name("mysql84_builtin_functions.txt")


def mysql_builtins() -> list[str]:
    """The names of the manual's Table 14.1, as the golden file lists them."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_golden_file_names_its_source_and_is_not_empty() -> None:
    text = GOLDEN.read_text(encoding="utf-8")
    assert "https://dev.mysql.com/doc/refman/8.4/en/built-in-function-reference.html" in text
    names = mysql_builtins()
    assert len(names) > 400
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", mysql_builtins())
def test_every_mysql_builtin_is_decided(name: str) -> None:
    """A MySQL 8.4 built-in (or the word of an operator that "(" may follow) is safe on a
    replica, needs the primary for a stated reason, or calls nothing: none is left to chance."""
    word = name.rsplit(maxsplit=1)[-1]  # "NOT IN" -> IN, "MEMBER OF" -> OF: the word before "("
    decided = (
        word in SAFE_FUNCTIONS["mysql"]
        or word in PRIMARY_FUNCTIONS
        or word in NOT_CALLS
        or word in MYSQL_NOT_CALLS
    )
    assert decided, name


def test_mysql_safe_names_are_all_mysql_builtins() -> None:
    """Nothing is called safe on MySQL that MySQL 8.4 does not have: there the name would call
    a stored function."""
    words = {name.split()[0] for name in mysql_builtins()}
    assert SAFE_FUNCTIONS["mysql"] - words == set()


def test_the_lists_do_not_overlap() -> None:
    for flavor, safe in SAFE_FUNCTIONS.items():
        assert safe & set(PRIMARY_FUNCTIONS) == set(), flavor
        assert safe & NOT_CALLS == set(), flavor
    assert NOT_CALLS & set(PRIMARY_FUNCTIONS) == set()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("MASTER_POS_WAIT", "server_state"),
        ("SOURCE_POS_WAIT", "server_state"),
        ("MASTER_GTID_WAIT", "server_state"),
        ("WAIT_FOR_EXECUTED_GTID_SET", "server_state"),
        ("WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS", "server_state"),
        ("LOAD_FILE", "server_state"),
        ("GET_LOCK", "get_lock"),
        ("LAST_INSERT_ID", "last_insert_id"),
        ("FOUND_ROWS", "found_rows"),
        ("ROW_COUNT", "row_count"),
        ("CONNECTION_ID", "connection_id"),
        ("NEXTVAL", "sequence"),
    ],
)
def test_server_bound_builtins_need_the_primary(name: str, reason: str) -> None:
    assert PRIMARY_FUNCTIONS[name] == reason
    for flavor in ("mysql", "mariadb", None):
        stmt = classify(f"SELECT {name}('x', 1)", FunctionRules(flavor, frozenset({name})))
        assert (stmt.must_use_primary, stmt.primary_reason) == (True, reason)


# --- the rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavor", "name", "safe"),
    [
        ("mysql", "UUID_TO_BIN", True),
        ("mariadb", "UUID_TO_BIN", False),
        (None, "UUID_TO_BIN", False),
        ("mariadb", "NVL", True),
        ("mysql", "NVL", False),
        (None, "NVL", False),
        ("mysql", "LATERAL", True),
        ("mariadb", "LATERAL", False),
        ("mysql", "COUNT", True),
        ("mariadb", "COUNT", True),
        (None, "COUNT", True),
        ("mysql", "`COUNT`", False),
        ("mysql", "SHOP.COUNT", False),
        ("mariadb", "AUDIT", False),
    ],
)
def test_builtins_by_family(flavor: str | None, name: str, safe: bool) -> None:
    assert FunctionRules(flavor).runs_on_replica(name) is safe


def test_unknown_family_is_refused() -> None:
    with pytest.raises(InterfaceError):
        FunctionRules("postgres")


@pytest.mark.parametrize(
    ("declared", "called", "safe"),
    [
        ("price", "PRICE", True),
        ("price", "SHOP.PRICE", True),  # a bare name covers every schema
        ("price", "`PRICE`", True),
        ("shop.price", "SHOP.PRICE", True),
        ("shop.price", "PRICE", False),  # the default schema is not known
        ("shop.price", "OTHER.PRICE", False),
        ("`Shop`.`Price`", "SHOP.PRICE", True),
        ("price", "PRICES", False),
        ("", "PRICE", False),
    ],
)
def test_declared_read_only_functions(declared: str, called: str, safe: bool) -> None:
    rules = FunctionRules("mysql", read_only_function_names(declared))
    assert rules.runs_on_replica(called) is safe


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (None, frozenset()),
        ("", frozenset()),
        ("a", frozenset({"A"})),
        ("a, Shop.b ,c", frozenset({"A", "SHOP.B", "C"})),
        (["a", "shop.b"], frozenset({"A", "SHOP.B"})),
        ("`my fn`, `my db`.`f``x`", frozenset({"MY FN", "MY DB.F`X"})),
        ("a,,b", frozenset({"A", "B"})),
    ],
)
def test_read_only_function_names(value: str | list[str] | None, names: frozenset[str]) -> None:
    assert read_only_function_names(value) == names


@pytest.mark.parametrize(
    "value", ["a.b.c", "a b", "f()", ".f", "f.", ["ok", ""], ["ok", 3], "`unterminated"]
)
def test_malformed_function_names_are_refused(value: object) -> None:
    with pytest.raises(InterfaceError, match="read_only_functions"):
        read_only_function_names(value)  # type: ignore[arg-type]


def test_settle_offloads_a_read_whose_calls_are_all_allowed() -> None:
    sql = "SELECT price(id), shop.fmt(name) FROM items"
    assert classify(sql).functions == ("PRICE", "SHOP.FMT")
    rules = FunctionRules("mariadb", read_only_function_names("price, shop.fmt"))
    stmt = classify(sql, rules)
    assert stmt == Classification(kind=StatementKind.READ, first_keyword="SELECT")
    assert stmt.replica_safe


def test_settle_keeps_the_calls_left_and_other_reasons() -> None:
    rules = FunctionRules("mysql", read_only_function_names("price"))
    partly = classify("SELECT price(id), audit(id) FROM items", rules)
    assert (partly.primary_reason, partly.functions) == (PrimaryReason.FUNCTION_CALL, ("AUDIT",))
    locked = classify("SELECT price(id) FROM items FOR UPDATE", rules)
    assert (locked.must_use_primary, locked.primary_reason) == (True, PrimaryReason.FOR_UPDATE)
    assert locked.functions == ()


def test_settle_applies_to_each_part_of_a_multi_statement() -> None:
    rules = FunctionRules("mysql", read_only_function_names("price"))
    both = classify("SELECT price(1); SELECT price(2)", rules)
    assert both.is_multi_statement
    assert both.replica_safe
    one = classify("SELECT price(1); SELECT audit(2)", rules)
    assert one.must_use_primary
    assert one.functions == ("AUDIT",)
    assert [p.replica_safe for p in one.parts] == [True, False]
