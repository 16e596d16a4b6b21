"""Property test: the classifier agrees with sqlglot's parse wherever sqlglot parses.

Statements are generated from a grammar of fragments (select lists, tables, WHERE clauses,
locking clauses, ``INTO``, user variables, CTEs, unions, DML, transaction and session
statements) with tricky identifiers and string literals that spell keywords, and comments
dropped between tokens.  The oracle walks sqlglot's AST (``read="mysql"``) and never calls our
code; a statement sqlglot cannot parse, or parses into a generic ``Command``, is skipped.

Generated comments are ``/* */``, ``-- `` and ``#`` only: sqlglot drops the content of ``/*!``
executable comments, which MySQL runs, so those are covered by the hand-written corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import sqlglot
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from consistent.classify import classify

# --- the oracle ---------------------------------------------------------------------------
_SESSION_FUNCTIONS = {
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LAST_INSERT_ID",
    "FOUND_ROWS",
    "ROW_COUNT",
    "CONNECTION_ID",
    "NEXTVAL",
    "LASTVAL",
    "SETVAL",
}
_SESSION_SYSTEM_VARIABLES = {"last_insert_id", "identity", "insert_id"}
# Functions the grammar calls that no server has built in: stored functions, which may write.
_USER_FUNCTIONS = {"AUDIT_ROW", "AUDIT"}


@dataclass(frozen=True)
class Expected:
    kind: str
    must_use_primary: bool
    pins: bool | None = None  # None: the oracle has no opinion


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).upper()
    return node.sql_name().upper()


def _query_expectation(tree: exp.Expr) -> Expected:
    """A query is a replica-safe read unless something in its tree ties it to the primary."""
    primary = False
    pins = False
    for node in tree.walk():
        if isinstance(node, exp.Lock):
            primary = True
        elif isinstance(node, exp.Select) and node.args.get("into") is not None:
            primary = True
            target = node.args["into"].this
            pins = pins or isinstance(target, exp.Parameter) or bool(target.find(exp.Parameter))
        elif isinstance(node, exp.Select) and any(
            str(m.name).upper() == "SQL_CALC_FOUND_ROWS"
            for m in node.args.get("operation_modifiers") or []
        ):
            primary = True
        elif isinstance(node, exp.PropertyEQ) and isinstance(node.this, exp.Parameter):
            primary = pins = True  # @v := …
        elif isinstance(node, exp.Parameter):
            primary = True  # reads a user variable
        elif isinstance(node, exp.SessionParameter):
            primary = primary or str(node.name).lower() in _SESSION_SYSTEM_VARIABLES
        elif isinstance(node, exp.Func) and _function_name(node) in _SESSION_FUNCTIONS:
            primary = True
            pins = pins or _function_name(node) == "GET_LOCK"
        elif isinstance(node, exp.Anonymous) and _function_name(node) in _USER_FUNCTIONS:
            primary = True  # a stored function may write
    return Expected("READ", primary, pins)


def _write_pins(tree: exp.Expr) -> bool:
    for node in tree.walk():
        if isinstance(node, exp.PropertyEQ) and isinstance(node.this, exp.Parameter):
            return True
        if isinstance(node, exp.Func) and _function_name(node) == "GET_LOCK":
            return True
    return False


def oracle(sql: str) -> Expected | None:
    """What sqlglot's AST says about ``sql``; ``None`` when sqlglot has no usable answer."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="mysql") if t is not None]
    except (ParseError, TokenError):
        return None
    if len(trees) != 1:
        return None
    tree = trees[0]
    if isinstance(tree, (exp.Insert, exp.Update, exp.Delete)):
        return Expected("WRITE", True, _write_pins(tree))
    if isinstance(tree, exp.Transaction):
        return Expected("TRANSACTION_BEGIN", False)
    if isinstance(tree, exp.Commit):
        return Expected("COMMIT", False)
    if isinstance(tree, exp.Rollback):
        if tree.args.get("savepoint") is not None:
            return Expected("ROLLBACK_TO_SAVEPOINT", False)
        return Expected("ROLLBACK", False)
    if isinstance(tree, (exp.Set, exp.Use)):
        return Expected("SESSION_STATE", True)
    if isinstance(tree, (exp.Create, exp.Drop, exp.Alter)):
        return Expected("DDL", True)
    if isinstance(tree, (exp.Describe, exp.Show)):
        return Expected("READ", False)  # EXPLAIN plans its statement without running it
    if isinstance(tree, (exp.Query, exp.Values)):
        return _query_expectation(tree)
    return None


def test_oracle_sees_what_it_should() -> None:
    """The oracle itself can tell reads, locking reads and writes apart."""
    assert oracle("SELECT a FROM t") == Expected("READ", False, False)
    assert oracle("SELECT a FROM t FOR UPDATE") == Expected("READ", True, False)
    assert oracle("SELECT GET_LOCK('a', 1)") == Expected("READ", True, True)
    assert oracle("SELECT audit_row(1)") == Expected("READ", True, False)
    assert oracle("SELECT shop . audit('x') FROM t") == Expected("READ", True, False)
    assert oracle("UPDATE t SET a = 1") == Expected("WRITE", True, False)
    assert oracle("SELECT a FROM t WHERE") is None


# --- the grammar ----------------------------------------------------------------------------
_names = st.sampled_from(["a", "b", "c", "id", "name", "total", "x1"])
_tricky_names = st.sampled_from(
    [
        "for_update",
        "last_insert_id_col",
        "get_lock_count",
        "into_x",
        "nextval_at",
        "found_rows_n",
        "`select`",
        "`for update`",
        "`update`",
        "`lock in share mode`",
        "`get_lock`",
        "`a;b`",
        "`it's`",
        '`say "hi"`',
        "`x``y`",
    ]
)
_columns = st.one_of(_names, _tricky_names)
_tables = st.sampled_from(["t", "users", "orders", "`order`", "`for`", "db1.t", "`from`"])
_strings = st.sampled_from(
    [
        "'FOR UPDATE'",
        "'LOCK IN SHARE MODE'",
        "'; DELETE FROM t'",
        "'it''s'",
        "'it\\'s FOR UPDATE'",
        "'a\\\\'",
        "'GET_LOCK(1)'",
        "'@v := 1'",
        "'/* x */'",
        "'-- y'",
        "'#z'",
        '"FOR SHARE"',
        '"say ""hi"" INTO @x"',
        "'SELECT 1; UPDATE t SET a = 1'",
        "''",
    ]
)
_numbers = st.integers(min_value=0, max_value=999).map(str)
_literals = st.one_of(_strings, _numbers)
_safe_calls = st.sampled_from(
    [
        ["COUNT", "(", "*", ")"],
        ["UPPER", "(", "'x'", ")"],
        ["NOW", "(", ")"],
        ["ABS", "(", "-1", ")"],
    ]
)
_session_calls = st.sampled_from(
    [
        ["GET_LOCK", "(", "'k'", ",", "1", ")"],
        ["RELEASE_LOCK", "(", "'k'", ")"],
        ["IS_FREE_LOCK", "(", "'k'", ")"],
        ["LAST_INSERT_ID", "(", ")"],
        ["FOUND_ROWS", "(", ")"],
        ["ROW_COUNT", "(", ")"],
        ["CONNECTION_ID", "(", ")"],
        ["@@last_insert_id"],
        ["@@session.sql_mode"],
        ["@@version"],
    ]
)
_user_vars = st.sampled_from(["@v", "@total", "@`odd name`"])
_user_calls = st.sampled_from(
    [
        ["audit_row", "(", "1", ")"],
        ["audit_row", "(", ")"],
        ["shop", ".", "audit", "(", "'x'", ")"],
    ]
)


@st.composite
def _expressions(draw: st.DrawFn) -> list[str]:
    choice = draw(st.integers(min_value=0, max_value=20))
    if choice <= 5:
        return [draw(_columns)]
    if choice <= 10:
        return [draw(_literals)]
    if choice <= 13:
        return list(draw(_safe_calls))
    if choice <= 16:
        return [draw(_columns), draw(st.sampled_from(["+", "=", "<>", "LIKE"])), draw(_literals)]
    if choice == 17:
        return list(draw(_session_calls))
    if choice == 18:
        return [draw(_user_vars)]
    if choice == 19:
        return list(draw(_user_calls))
    return [draw(_user_vars), ":=", draw(_literals)]


@st.composite
def _select(draw: st.DrawFn, *, allow_into: bool = True) -> list[str]:
    tokens = ["SELECT"]
    if draw(st.integers(0, 9)) == 0:
        tokens.append("SQL_CALC_FOUND_ROWS")
    items = draw(st.lists(_expressions(), min_size=1, max_size=3))
    for n, item in enumerate(items):
        if n:
            tokens.append(",")
        tokens.extend(item)
    if allow_into and draw(st.integers(0, 7)) == 0:
        tokens += ["INTO", draw(_user_vars)]
    tokens += ["FROM", draw(_tables)]
    if draw(st.booleans()):
        tokens += ["WHERE", *draw(_expressions())]
        if draw(st.integers(0, 4)) == 0:
            tokens += ["AND", draw(_columns), "IN", "(", *draw(_select(allow_into=False)), ")"]
    if draw(st.integers(0, 3)) == 0:
        tokens += ["ORDER", "BY", draw(_columns)]
    if draw(st.integers(0, 3)) == 0:
        tokens += ["LIMIT", draw(_numbers)]
    lock = draw(
        st.sampled_from(
            [[]] * 12
            + [
                ["FOR", "UPDATE"],
                ["FOR", "SHARE"],
                ["LOCK", "IN", "SHARE", "MODE"],
                ["FOR", "UPDATE", "NOWAIT"],
                ["FOR", "UPDATE", "SKIP", "LOCKED"],
            ]
        )
    )
    return tokens + lock


@st.composite
def _query(draw: st.DrawFn) -> list[str]:
    choice = draw(st.integers(0, 5))
    if choice <= 2:
        return draw(_select())
    if choice == 3:
        left = draw(_select(allow_into=False))
        right = draw(_select(allow_into=False))
        return ["(", *left, ")", "UNION", draw(st.sampled_from(["ALL", "DISTINCT"])),
                "(", *right, ")"]  # fmt: skip
    if choice == 4:
        return ["SELECT", "*", "FROM", "(", *draw(_select(allow_into=False)), ")", "AS", "q"]
    cte = ["WITH", "c", "AS", "(", *draw(_select(allow_into=False)), ")"]
    main = draw(
        st.sampled_from(
            [
                ["SELECT", "*", "FROM", "c"],
                ["UPDATE", "t", "SET", "a", "=", "1", "WHERE", "id", "IN", "(", "SELECT", "*",
                 "FROM", "c", ")"],
                ["DELETE", "FROM", "t", "WHERE", "id", "IN", "(", "SELECT", "*", "FROM", "c", ")"],
            ]
        )
    )  # fmt: skip
    return cte + main


@st.composite
def _write(draw: st.DrawFn) -> list[str]:
    choice = draw(st.integers(0, 3))
    table = draw(_tables)
    if choice == 0:
        return ["INSERT", "INTO", table, "(", "a", ")", "VALUES", "(", *draw(_expressions()), ")"]
    if choice == 1:
        return ["INSERT", "INTO", table, *draw(_select(allow_into=False))]
    if choice == 2:
        where = ["WHERE", *draw(_expressions())] if draw(st.booleans()) else []
        return ["UPDATE", table, "SET", draw(_columns), "=", *draw(_expressions()), *where]
    return ["DELETE", "FROM", table, "WHERE", *draw(_expressions())]


_other = st.sampled_from(
    [
        ["BEGIN"],
        ["START", "TRANSACTION"],
        ["START", "TRANSACTION", "READ", "ONLY"],
        ["COMMIT"],
        ["ROLLBACK"],
        ["ROLLBACK", "TO", "SAVEPOINT", "s1"],
        ["SET", "NAMES", "utf8mb4"],
        ["SET", "sql_mode", "=", "'ANSI'"],
        ["SET", "@v", "=", "1"],
        ["USE", "shop"],
        ["SHOW", "TABLES"],
        ["SHOW", "DATABASES"],
        ["DESCRIBE", "t"],
        ["CREATE", "TABLE", "t2", "(", "a", "INT", ")"],
        ["DROP", "TABLE", "t2"],
    ]
)
_comments = st.sampled_from(
    [
        "/* c */",
        "/* FOR UPDATE */",
        "/* ; DELETE FROM t */",
        "/* it's */",
        "/*+ NO_ICP(t) */",
        "-- FOR UPDATE\n",
        "-- x\n",
        "# GET_LOCK('a', 1)\n",
        "\n",
        "\t",
    ]
)


@st.composite
def statements(draw: st.DrawFn) -> str:
    tokens = draw(st.one_of(_query(), _query(), _query(), _write(), _other))
    out: list[str] = []
    for token in tokens:
        if draw(st.integers(0, 5)) == 0:
            out.append(draw(_comments))
        out.append(token)
    return " ".join(out)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(statements())
def test_agrees_with_sqlglot(sql: str) -> None:
    expected = oracle(sql)
    assume(expected is not None)
    assert expected is not None
    event(f"{expected.kind} primary={expected.must_use_primary} pins={expected.pins}")
    got = classify(sql)
    assert (got.kind.name, got.must_use_primary) == (expected.kind, expected.must_use_primary), sql
    if expected.pins is not None:
        assert (got.pins_session is not None) == expected.pins, sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT `for update` FROM t WHERE note = 'FOR UPDATE' /* FOR UPDATE */",
        "SELECT a FROM t FOR /* c */ UPDATE",
        "SELECT GET_LOCK /* c */ ('a', 1)",
        "WITH c AS (SELECT 1) DELETE FROM t WHERE id IN (SELECT * FROM c)",
        "INSERT INTO t SELECT @a := 1",
        "SELECT a FROM t WHERE b IN (SELECT shop.audit(c) FROM u)",
        "SELECT a, (SELECT 1) FROM t WHERE b = (2)",
        'SELECT \'it\\\'s\', "x""y" FROM t -- FOR UPDATE\n',
    ],
)
def test_agrees_with_sqlglot_on_known_cases(sql: str) -> None:
    expected = oracle(sql)
    assert expected is not None
    got = classify(sql)
    assert (got.kind.name, got.must_use_primary) == (expected.kind, expected.must_use_primary)
