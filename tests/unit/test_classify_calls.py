"""Which functions a statement calls: calls found wherever they hide, and parentheses that call
nothing never taken for calls.  Hand-written cases first, then generated statements whose calls
are known by construction."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consistent.classify import FunctionRules, PrimaryReason, classify, read_only_function_names
from consistent.classify.calls import calls_in, unsafe_calls
from consistent.classify.lexer import hot_tokens, names_before_parenthesis


@pytest.mark.parametrize(
    ("sql", "calls"),
    [
        ("SELECT f(k) FROM t", ("F",)),
        ("SELECT id, audit_row(id) FROM t", ("AUDIT_ROW",)),
        ("SELECT shop.audit(1)", ("SHOP.AUDIT",)),
        ("SELECT `shop`.`audit`(1)", ("SHOP.AUDIT",)),
        ("SELECT shop . audit (1)", ("SHOP.AUDIT",)),
        ("SELECT db.abs(1)", ("DB.ABS",)),  # a schema's function, whatever its name
        ("SELECT db./* c */count(1)", ("DB.COUNT",)),
        ("SELECT `f`(1)", ("`F`",)),
        ("SELECT `now`()", ("`NOW`",)),  # a quoted name is looked up as a stored function
        ("SELECT f /* c */ (1)", ("F",)),
        ("SELECT f\n(1)", ("F",)),
        ("SELECT /*!50000 f(1) */", ("F",)),
        ("SELECT CONCAT('a', f(1), g(2)), f(3)", ("F", "G")),
        ("SELECT a FROM t WHERE b IN (SELECT f(c) FROM u)", ("F",)),
        ("SELECT a FROM t ORDER BY f(a)", ("F",)),
        ("SELECT udf_echo('x')", ("UDF_ECHO",)),
        ("SELECT NVL(a, b), UUID_TO_BIN(c) FROM t", ("NVL", "UUID_TO_BIN")),
        ("SELECT LATERAL(1)", ("LATERAL",)),
        ("SELECT columns(1)", ("COLUMNS",)),
        ("SELECT against(1)", ("AGAINST",)),
        ("WITH c (a) AS (SELECT 1) SELECT f(a) FROM c", ("F",)),
        ("SELECT * FROM (SELECT f(1) AS x) AS dt (y)", ("F",)),
        ("EXPLAIN INSERT INTO t (a) VALUES (f(1))", ("F",)),
        ("SHOW TABLES WHERE f(Tables_in_db)", ("F",)),
    ],
)
def test_calls_are_found(sql: str, calls: tuple[str, ...]) -> None:
    stmt = classify(sql)
    assert stmt.functions == calls
    assert (stmt.must_use_primary, stmt.primary_reason) == (True, PrimaryReason.FUNCTION_CALL)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM t WHERE b IN (1, 2) AND EXISTS (SELECT 1 FROM u) AND NOT (c = 1)",
        "SELECT a FROM t WHERE (a, b) IN ((1, 2), (3, 4)) AND c NOT IN (5)",
        "SELECT a FROM t WHERE b = ANY (SELECT b FROM u) OR c > ALL (SELECT c FROM u)",
        "VALUES ROW(1, 2), ROW(3, 4)",
        "SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY b), SUM(c) OVER w FROM t "
        "WINDOW w AS (ORDER BY a)",
        "SELECT a FROM t1 JOIN t2 USING (id) JOIN (t3, t4) ON (t3.a = t4.a)",
        "SELECT a FROM t1, LATERAL (SELECT 1) AS l",  # decided for MySQL by the rules
        "SELECT CAST(a AS DECIMAL(10, 2)), CAST(b AS CHAR(10)), CONVERT(c, CHAR(10)) FROM t",
        "SELECT CONVERT(a USING utf8mb4), CAST(b AS DATETIME(6)), CAST(c AS BINARY(4)) FROM t",
        "SELECT CAST(a AS UNSIGNED), CAST(b AS SIGNED INTEGER), CAST(j AS CHAR(3) ARRAY) FROM t",
        "SELECT JSON_VALUE(j, '$.a' RETURNING DECIMAL(10, 2)) FROM t",
        "WITH cte (a, b) AS (SELECT 1, 2) SELECT a FROM cte",
        "WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 5) "
        "SELECT n FROM seq",
        "WITH `x` (a) AS (SELECT 1), y (b) AS (SELECT 2), z (c) AS (SELECT 3) SELECT * FROM y",
        "SELECT * FROM (SELECT 1, 2) AS dt (a, b)",
        "SELECT * FROM (SELECT 1, 2) dt (a, b)",
        "SELECT * FROM (SELECT 1, 2) AS `dt` (a, b) JOIN (SELECT 3) AS e (c) ON a = c",
        "SELECT MATCH (title, body) AGAINST ('x' IN BOOLEAN MODE) FROM docs",
        "SELECT * FROM JSON_TABLE(j, '$[*]' COLUMNS (id FOR ORDINALITY, v VARCHAR(10) "
        "PATH '$.v', NESTED PATH '$.w' COLUMNS (w INT PATH '$'))) AS jt",
        "SELECT a FROM t PARTITION (p0, p1) USE INDEX (i1) WHERE b = 1",
        "SELECT a FROM t FORCE KEY FOR GROUP BY (i1) IGNORE INDEX FOR JOIN (i2) GROUP BY a",
        "SELECT a + (b * (c - 1)), (SELECT 1), d, (e) FROM t WHERE f = (1)",
        "SELECT t.f FROM t WHERE t.g = (1) AND t . h = (2)",
        "SELECT a, COUNT(*) FROM t GROUP BY a WITH ROLLUP",
        "SELECT CURRENT_TIMESTAMP(6), NOW(3), UTC_TIMESTAMP(), CURDATE(), DATE(a) FROM t",
        "SELECT IF(a, LEFT(b, 2), RIGHT(b, 2)), INSERT(c, 1, 2, 'x'), REPLACE(d, 'a', 'b') FROM t",
        "SELECT GROUP_CONCAT(DISTINCT (a) ORDER BY a SEPARATOR ',') FROM t",
        "SELECT 'f(1)', \"g(2)\" /* h(3) */ -- i(4)\n",
        "SELECT `f(1)` FROM t",
        "SELECT a FROM t WHERE s = 'id(3)' AND b = (2)",
        "WITH c (x, y) AS (SELECT 1, 2) SELECT t.c, 1 + (1), c, (2) FROM c",
        "SELECT ST_AsText(POINT(1, 2)), JSON_OBJECT('a', 1), REGEXP_REPLACE(a, 'x', 'y') FROM t",
        "SELECT SLEEP(0), BENCHMARK(1, 1), UUID(), RAND(1)",
        "EXPLAIN INSERT INTO t (a) VALUES (1)",
        "SELECT a FROM t FOR SYSTEM_TIME AS OF TIMESTAMP ('2024-01-01')",
    ],
)
def test_parentheses_that_call_nothing(sql: str) -> None:
    stmt = classify(sql, FunctionRules("mysql"))
    assert stmt.functions == ()
    assert not stmt.must_use_primary, stmt


def test_the_server_family_decides_one_family_builtins() -> None:
    sql = "SELECT NVL(a, b) FROM t"
    assert classify(sql, FunctionRules("mariadb")).replica_safe
    assert classify(sql, FunctionRules("mysql")).functions == ("NVL",)
    lateral = "SELECT a FROM t1, LATERAL (SELECT 1) AS l"
    assert classify(lateral, FunctionRules("mysql")).replica_safe
    assert classify(lateral, FunctionRules("mariadb")).functions == ("LATERAL",)


def test_a_set_value_that_calls_a_function_pins_instead_of_being_replayed() -> None:
    replayed = classify("SET time_zone = CONCAT('+0', '0:00')")
    assert replayed.session_variables
    assert replayed.pins_session is None
    pinned = classify("SET time_zone = shop.tz(1)")
    assert pinned.session_variables == ()
    assert pinned.pins_session == "session_state"
    assert calls_in("shop.tz(1) + f (2)") == ("SHOP.TZ", "F")


def test_names_before_parenthesis_skips_names_split_from_theirs() -> None:
    upper = "SELECT A + (B), F (1), G /* C */ (2), `H`(3), I.J(4), F(5) FROM T"
    assert sorted(names_before_parenthesis(upper)) == ["F", "F", "J", "`H`"]


def test_calls_are_decided_in_linear_time() -> None:
    """Long statements stay cheap (a regression would be quadratic: minutes, not a bound)."""
    sql = "SELECT " + ", ".join(f"c{i} + (c{i} * {i})" for i in range(20_000)) + " FROM t"
    upper = sql.upper()
    assert unsafe_calls(sql, upper, hot_tokens(upper)) == ()
    spaces = "SELECT f(1)" + " " * 200_000
    assert names_before_parenthesis(spaces.upper()) == ["F"]


# --- generated statements --------------------------------------------------------------------

_USER = {"audit_row": "AUDIT_ROW", "shop.audit": "SHOP.AUDIT", "`my fn`": "`MY FN`", "f": "F"}
_BUILTIN = ["UPPER", "ABS", "CONCAT", "COALESCE", "IFNULL", "GREATEST", "JSON_EXTRACT", "COUNT"]
_COLUMNS = ["a", "b", "id", "`order`", "t.c", "`t`.`d`", "f_col", "audit_rows"]
_LITERALS = ["1", "2.5", "'x'", "'f(1)'", '"y"', "NULL", "'it''s'"]
_GAPS = [" ", "  ", "\n", " /* f(9) */ ", " -- g(9)\n", " # h(9)\n"]


@st.composite
def _expression(draw: st.DrawFn, depth: int = 0) -> tuple[str, frozenset[str]]:
    """An expression and the user functions it calls."""
    choice = draw(st.integers(0, 9 if depth < 3 else 2))
    if choice == 0:
        return draw(st.sampled_from(_COLUMNS)), frozenset()
    if choice <= 2:
        return draw(st.sampled_from(_LITERALS)), frozenset()
    args = draw(st.lists(_expression(depth + 1), min_size=1, max_size=3))
    inner = ", ".join(text for text, _ in args)
    calls = frozenset().union(*(c for _, c in args))
    gap = draw(st.sampled_from(["", "", " ", " /* c */ "]))
    if choice <= 4:
        name = draw(st.sampled_from(_BUILTIN))
        return f"{name}({inner})", calls
    if choice <= 6:
        name = draw(st.sampled_from(sorted(_USER)))
        return f"{name}{gap}({inner})", calls | {_USER[name]}
    left, _left_calls = args[0]
    if choice == 7:
        return f"{left} + ({inner})", calls
    if choice == 8:
        return f"(SELECT {inner} FROM u)", calls
    return f"CAST({left} AS DECIMAL(10, 2)) IN ({inner})", calls


@st.composite
def _statement(draw: st.DrawFn) -> tuple[str, frozenset[str]]:
    items = draw(st.lists(_expression(), min_size=1, max_size=3))
    where, where_calls = draw(_expression())
    select = ", ".join(text for text, _ in items)
    calls = frozenset().union(where_calls, *(c for _, c in items))
    shape = draw(st.integers(0, 2))
    if shape == 0:
        sql = f"SELECT {select} FROM t WHERE {where}"
    elif shape == 1:
        sql = f"WITH c (x, y) AS (SELECT 1, 2) SELECT {select} FROM c WHERE {where}"
    else:
        sql = f"SELECT {select} FROM (SELECT 1, 2) AS dt (x, y) WHERE {where}"
    gap = draw(st.sampled_from(_GAPS))
    return sql.replace(" FROM ", f"{gap}FROM "), calls


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_statement())
def test_generated_statements_report_exactly_their_calls(case: tuple[str, frozenset[str]]) -> None:
    sql, calls = case
    stmt = classify(sql, FunctionRules("mysql"))
    assert set(stmt.functions) == calls, sql
    assert stmt.must_use_primary is bool(calls), sql
    declared = FunctionRules("mysql", read_only_function_names(["audit_row", "shop.audit", "f"]))
    offloaded = classify(sql, declared)
    assert offloaded.replica_safe is (calls <= {"AUDIT_ROW", "SHOP.AUDIT", "F"}), sql
