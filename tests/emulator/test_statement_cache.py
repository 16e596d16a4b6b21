"""Statement shapes and the caches built on them answer exactly as the uncached engine does.

The reference is the engine itself with its caches sized to nothing
(``StatementCache(trees=0, plans=0)``): every statement is then parsed, translated and
generated from scratch, as before the caches existed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot.serde import dump

from consistent.emulator import SqlError
from consistent.emulator.binlog import BinlogFile, BinlogStatement, BinlogTransaction
from consistent.emulator.server import EmulatedServer
from consistent.emulator.sql.lexer import split_statements
from consistent.emulator.sql.shapes import SqlTemplate, shape_of
from consistent.emulator.sql.stmtcache import StatementCache
from consistent.emulator.sql.storage import WriterLock
from consistent.emulator.sql.translate import parse_mysql
from consistent.emulator.testing import FakeClock, one, q, rows, run, server
from consistent.gtid import GtidSet


def shape(text: str) -> Any:
    statement = split_statements(text)[0]
    return shape_of(statement.text, statement.tokens)


# --- which literals are slots --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("SELECT v FROM t WHERE k = 17", ("17",)),
        ("SELECT v FROM t WHERE k <> 1.50 AND s <= 'abc'", ("1.50", "abc")),
        ("SELECT v FROM t WHERE k IN (3, 4, 'x')", ("3", "4", "x")),
        ("INSERT INTO t (a, b) VALUES (5, 'x'), (6, 'y')", ("5", "x", "6", "y")),
        ("UPDATE t SET v = 9 WHERE k = 2 LIMIT 3", ("9", "2")),
        ("SELECT WAIT_FOR_EXECUTED_GTID_SET('u:1-5', 2)", ("u:1-5", "2")),
    ],
)
def test_slots_are_the_plain_values(text: str, values: tuple[str, ...]) -> None:
    assert shape(text).values == values


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1, 'a'",  # select-list items name and type the columns
        "SELECT v FROM t LIMIT 5",
        "SELECT v FROM t WHERE k = 0",  # INSERT reads an AUTO_INCREMENT 0 as "next"
        "SELECT v FROM t WHERE k = ''",
        "SELECT v FROM t WHERE k = -5",
        "SELECT v FROM t WHERE s = 'it''s' OR s = 'a\\nb'",
        "SELECT v FROM t WHERE s = 'a' 'b'",  # one string in MySQL
        "SELECT v FROM t WHERE d = DATE '2020-01-01' AND b = _binary 'x'",
        "SELECT v FROM t WHERE d > NOW() - INTERVAL '1' DAY",
        "SELECT v FROM t WHERE f(1, 'a') = x",
        "SELECT v FROM t WHERE k = 0x1F OR k = 1e3 OR k = 12345678901234567890",
    ],
)
def test_literals_that_may_change_the_statement_stay_in_the_shape(text: str) -> None:
    assert shape(text).values == ()
    assert shape(text).key == split_statements(text)[0].text


def test_statements_differing_only_in_slot_values_share_a_shape() -> None:
    a, b = shape("SELECT v FROM t WHERE k = 17"), shape("SELECT v FROM t WHERE k = 99999")
    assert a.key == b.key
    assert a.key != shape("SELECT v FROM t WHERE k = 'x'").key  # another kind
    assert a.key != shape("SELECT v FROM t WHERE k = 1.5").key


def test_text_that_looks_like_a_template_is_not_shaped() -> None:
    assert shape("SELECT v FROM t WHERE k = 9182736451000001") is None


def test_a_template_puts_values_back_and_refuses_changed_sentinels() -> None:
    s = shape("UPDATE t SET v = 'new' WHERE k = 7")
    generated = parse_mysql(s.template).sql(dialect="sqlite")
    template = SqlTemplate.build(generated, s.kinds)
    assert template is not None
    assert template.render(s) == "UPDATE t SET v = 'new' WHERE k = 7"
    assert SqlTemplate.build(generated, ("i", "i")) is None  # the string came out as a number


def test_a_template_binds_integers_and_strings_and_keeps_the_rest_inline() -> None:
    s = shape("SELECT v FROM t WHERE k = 7 AND s = 'ab' AND d < 1.50")
    generated = parse_mysql(s.template).sql(dialect="sqlite")
    template = SqlTemplate.build(generated, s.kinds)
    assert template is not None
    assert template.bind(s) == ("SELECT v FROM t WHERE k = ? AND s = ? AND d < 1.50", (7, "ab"))
    other = shape("SELECT v FROM t WHERE k = 8 AND s = 'cd' AND d < 1.50")
    assert template.bind(other) == (template.bind(s)[0], (8, "cd"))  # one text to prepare


@pytest.mark.parametrize(
    ("sql", "text", "params"),
    [
        (
            "SELECT 'x 918273645100000' FROM t WHERE k = 918273645100001",
            "SELECT 'x 5' FROM t WHERE k = ?",
            (6,),
        ),
        (
            "SELECT v FROM t WHERE s = 'what?' AND k = 918273645100001",
            "SELECT v FROM t WHERE s = 'what?' AND k = 6",
            (),
        ),
        ("SELECT v FROM t WHERE k = a918273645100001", "SELECT v FROM t WHERE k = a6", ()),
    ],
)
def test_values_inside_quotes_glued_or_beside_parameters_stay_inline(
    sql: str, text: str, params: tuple[object, ...]
) -> None:
    s = shape("SELECT v FROM t WHERE k = 5 AND j = 6")
    template = SqlTemplate.build(sql, s.kinds)
    assert template is not None
    assert template.bind(s) == (text, params)
    assert template.render(s) == text.replace("?", "6") if params else text


# --- the tree cache gives the tree sqlglot parses ------------------------------------------------


def _structure(text: str, cache: StatementCache) -> list[dict[str, object]]:
    statement = split_statements(text)[0]
    tree = cache.parse(statement.text, cache.shape(statement))
    return [{k: v for k, v in item.items() if k != "m"} for item in dump(tree)]


def _reference(text: str) -> list[dict[str, object]]:
    return [{k: v for k, v in item.items() if k != "m"} for item in dump(parse_mysql(text))]


_ints = st.integers(min_value=1, max_value=10**18 - 1)
_words = st.text(
    alphabet=st.characters(blacklist_characters="'\\", blacklist_categories=("Cc", "Cs")),
    min_size=1,
    max_size=12,
)
_TEMPLATES = [
    "SELECT a, b FROM t WHERE k = {i} AND s = '{s}'",
    "SELECT * FROM t WHERE k IN ({i}, {j}) OR s >= '{s}' ORDER BY a LIMIT 2",
    "INSERT INTO t (a, b, c) VALUES ({i}, '{s}', NOW()), ({j}, 'z', NULL)",
    "UPDATE t SET b = '{s}', c = c + 1 WHERE k = {i}",
    "DELETE FROM t WHERE k < {j}.25",
    "SELECT WAIT_FOR_EXECUTED_GTID_SET('{s}', {i})",
]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_TEMPLATES), _ints, _ints, _words, _words)
def test_trees_from_the_cache_are_the_parsed_trees(
    template: str, i: int, j: int, s: str, s2: str
) -> None:
    cache = StatementCache()
    first = template.format(i=i, j=j, s=s)
    second = template.format(i=j, j=i, s=s2)
    for text in (first, first, second, first):  # made on the second sight, then reused
        assert _structure(text, cache) == _reference(text)


def test_a_query_text_is_kept_from_its_second_sight() -> None:
    # A text that comes once (an INSERT with its own values) leaves no tokens or shape behind.
    cache = StatementCache()
    text = "INSERT INTO t (v) VALUES (17)"
    once = cache.split(text)[0]
    twice = cache.split(text)[0]
    assert once == twice
    assert once is not twice
    assert cache.split(text)[0] is twice
    first, second = cache.shape(once), cache.shape(once)
    assert first == second
    assert first is not second
    assert cache.shape(once) is second


# --- plans: the same answers as the engine without caches ----------------------------------------

_SETUP = [
    "CREATE DATABASE d",
    "CREATE DATABASE e",
    "USE d",
    "CREATE TABLE t (k INT PRIMARY KEY, s VARCHAR(20), n INT NOT NULL DEFAULT 0)",
    "CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v INT, at DATETIME DEFAULT NOW())",
    "CREATE TABLE e.t (k INT PRIMARY KEY, s VARCHAR(20), n INT NOT NULL DEFAULT 0)",
]
_STATEMENTS = [
    "INSERT INTO t (k, s) VALUES ({i}, '{s}')",
    "INSERT INTO t (k, s, n) VALUES ({i}, '{s}', {j}) ON DUPLICATE KEY UPDATE n = n + {j}",
    "REPLACE INTO t (k, s) VALUES ({i}, '{s}')",
    "INSERT INTO w (v) VALUES ({j})",
    "INSERT INTO w (id, v) VALUES (0, {j})",
    "UPDATE t SET n = {j} WHERE k = {i}",
    "UPDATE t SET s = '{s}' WHERE k > {i} ORDER BY k LIMIT 2",
    "DELETE FROM t WHERE k = {i}",
    "SELECT k, s, n FROM t WHERE k = {i}",
    "SELECT n, @@autocommit, @@port FROM t WHERE k = {i}",
    "SELECT * FROM t WHERE s = '{s}' OR k IN ({i}, {j}) ORDER BY k",
    "SELECT COUNT(*), MAX(n) FROM t WHERE k >= {i}",
    "SELECT t.k, w.v FROM t JOIN w ON w.v = t.k WHERE t.k < {j} ORDER BY t.k, w.id",
    "SELECT k FROM t WHERE k = {i} FOR UPDATE",
    "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    "SELECT id, v FROM w WHERE id = {i}",
    "USE e",
    "USE d",
    "CREATE TEMPORARY TABLE t (k INT PRIMARY KEY, s VARCHAR(20), n INT NOT NULL DEFAULT 0)",
    "DROP TEMPORARY TABLE IF EXISTS t",
    "ALTER TABLE t ADD COLUMN extra INT DEFAULT 7",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SET autocommit = {b}",
]


def _outcome(result: Any) -> Any:
    if isinstance(result, SqlError):
        return ("error", result.args)
    return [
        (o.result, o.affected_rows, o.last_insert_id, o.status, o.warnings, o.info) for o in result
    ]


async def _play(srv: EmulatedServer, script: list[str]) -> list[Any]:
    session = srv.open_session()
    for text in _SETUP:
        await q(session, text)
    answers = []
    for text in script:
        try:
            answers.append(_outcome(await q(session, text)))
        except SqlError as exc:
            answers.append(_outcome(exc))
    answers.append(sorted(await rows(session, "SELECT k, s, n FROM d.t")))
    await session.close()
    return answers


_step = st.tuples(
    st.sampled_from(_STATEMENTS),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=1, max_value=6),
    st.sampled_from(["a", "b", "héllo"]),
    st.sampled_from([0, 1]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_step, min_size=5, max_size=40))
def test_plans_answer_as_the_engine_without_caches(steps: list[Any]) -> None:
    # Each statement three times in a row: the third runs from a plan when it can have one.
    script = [
        template.format(i=i, j=j, s=s, b=b) for template, i, j, s, b in steps for _ in range(3)
    ]

    async def both() -> tuple[list[Any], list[Any]]:
        cached = server(FakeClock())
        uncached = server(FakeClock())
        uncached.statement_cache = StatementCache(trees=0, plans=0)
        try:
            return await _play(cached, script), await _play(uncached, script)
        finally:
            cached.close()
            uncached.close()

    with_caches, without = run(both())
    assert with_caches == without


def test_the_differential_scripts_do_run_plans() -> None:
    async def scenario() -> int:
        srv = server()
        await _play(srv, [t.format(i=2, j=3, s="a", b=1) for t in _STATEMENTS for _ in range(3)])
        made = srv.statement_cache.plans()
        srv.close()
        return made

    assert run(scenario()) >= 8  # the DML and SELECT forms above, not the rest


def test_a_plan_follows_the_tables_its_names_resolve_to() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        for text in _SETUP:
            await q(s, text)
        await q(s, "INSERT INTO d.t (k, s) VALUES (1, 'base')")
        await q(s, "INSERT INTO e.t (k, s) VALUES (1, 'other')")
        select = "SELECT s FROM t WHERE k = 1"
        for _ in range(3):
            assert await rows(s, select) == [("base",)]
        assert srv.statement_cache.plans() == 1  # what follows runs a plan when it can
        await q(s, "CREATE TEMPORARY TABLE t (k INT PRIMARY KEY, s VARCHAR(20))")
        await q(s, "INSERT INTO t VALUES (1, 'temporary')")
        assert await rows(s, select) == [("temporary",)]
        await q(s, "DROP TEMPORARY TABLE t")
        assert await rows(s, select) == [("base",)]
        await q(s, "USE e")
        assert await rows(s, select) == [("other",)]
        await q(s, "USE d")
        await q(s, "ALTER TABLE t ADD COLUMN extra INT DEFAULT 7")
        for _ in range(3):
            out = await one(s, "SELECT * FROM t WHERE k = 1")
            assert out.result is not None
            assert [c.name for c in out.result.columns] == ["k", "s", "n", "extra"]
            assert out.result.rows == ((1, "base", 0, 7),)
        srv.close()

    run(scenario())


def test_a_select_of_system_variables_is_planned_while_their_values_hold() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        for text in _SETUP:
            await q(s, text)
        await q(s, "INSERT INTO d.t (k, s) VALUES (1, 'base'), (2, 'two')")
        for k in (1, 2, 1):
            assert await rows(s, f"SELECT s, @@autocommit FROM t WHERE k = {k}") == [
                ("base" if k == 1 else "two", 1)
            ]
        assert srv.statement_cache.plans() == 1
        await q(s, "SET autocommit = 0")
        assert await rows(s, "SELECT s, @@autocommit FROM t WHERE k = 2") == [("two", 0)]
        await q(s, "SET autocommit = 1")
        assert await rows(s, "SELECT s, @@autocommit FROM t WHERE k = 1") == [("base", 1)]
        srv.close()

    run(scenario())


def test_a_duplicate_key_from_a_plan_names_the_values() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        for text in _SETUP:
            await q(s, text)
        for k in range(1, 4):
            await q(s, f"INSERT INTO t (k, s) VALUES ({k}, 'x')")
        with pytest.raises(SqlError) as raised:
            await q(s, "INSERT INTO t (k, s) VALUES (2, 'again')")
        assert raised.value.args == (1062, "Duplicate entry '2' for key 't.PRIMARY'")
        srv.close()

    run(scenario())


def test_set_takes_a_plain_literal_as_its_value() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        await q(s, "SET @a = 'plain text', @b = 42, @c = CONCAT('plain', ' text'), @d = 40 + 2")
        assert await rows(s, "SELECT @a = @c, @b = @d, @a, @b") == [(1, 1, "plain text", 42)]
        srv.close()

    run(scenario())


# --- the lexer's cleaned text ------------------------------------------------------------------

_SQLISH = st.text(
    alphabet=st.sampled_from(list(" \t\n;'\"`\\/*!-#@.,()=<>+019aSé\u00a0")),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_SQLISH)
def test_a_statement_text_is_its_tokens_with_everything_else_blanked(text: str) -> None:
    try:
        statements = split_statements(text)
    except SqlError:
        return
    for statement in statements:
        if not statement.tokens:
            continue
        width = statement.tokens[-1].end
        chars = [" "] * width
        for token in statement.tokens:
            chars[token.start : token.end] = token.text
        assert statement.text == "".join(chars).strip()


# --- the writer lock ----------------------------------------------------------------------------


def test_the_writer_lock_is_first_come_first_served_and_survives_cancellation() -> None:
    async def scenario() -> list[str]:
        lock = WriterLock()
        order: list[str] = []
        assert lock.try_acquire()
        assert not lock.try_acquire()

        async def take(name: str) -> None:
            await lock.acquire()
            order.append(name)
            lock.release()

        first = asyncio.ensure_future(take("first"))
        cancelled = asyncio.ensure_future(take("cancelled"))
        last = asyncio.ensure_future(take("last"))
        await asyncio.sleep(0)
        assert not lock.try_acquire()  # free of holders is not enough: others wait
        cancelled.cancel()
        lock.release()
        await asyncio.gather(first, last, return_exceptions=True)
        assert not lock.locked()
        assert lock.try_acquire()
        return order

    assert run(scenario()) == ["first", "last"]


# --- the binary log's running size ---------------------------------------------------------------


def test_a_binlog_file_size_follows_its_transactions() -> None:
    def transaction(sql: str) -> BinlogTransaction:
        return BinlogTransaction(None, (BinlogStatement(sql),), 0, 0, 80036, 80036, 1)

    file = BinlogFile("binlog.000001", GtidSet())
    empty = file.size
    file.transactions.append(transaction("INSERT INTO t VALUES (1)"))
    one_size = file.size
    file.transactions.append(transaction("INSERT INTO t VALUES (1), (2), (3)"))
    both = file.size
    assert empty < one_size < both
    assert both - one_size > one_size - empty  # the longer statement counts for more
    file.transactions.pop()
    assert file.size == one_size
