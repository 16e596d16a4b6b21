"""Unit tests for consistent.classify: hints, SET/USE parsing, multi-statements, the lexer.

The per-rule expectations live in the corpus (test_classify_corpus.py); these tests cover the
structured fields (hints, replayable settings, parts) and the lexer's invariants.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consistent.classify import (
    MAX_CLASSIFIED_LENGTH,
    Classification,
    PinReason,
    PrimaryReason,
    RouteHint,
    RouteTarget,
    StatementKind,
    classify,
    classify_head,
    replay_sql,
    split_statements,
)

PLAIN = ("READ", False, None, None, False)


def _summary(result: Classification) -> tuple[object, ...]:
    return (
        result.kind.name,
        result.must_use_primary,
        result.primary_reason,
        result.pins_session,
        result.is_multi_statement,
    )


# --- hints ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        ("/* consistent: primary */ SELECT 1", RouteHint(target=RouteTarget.PRIMARY)),
        ("/* consistent: replica */ SELECT 1", RouteHint(target=RouteTarget.REPLICA)),
        ("/* consistent: level=eventual */ SELECT 1", RouteHint(level="eventual")),
        ("/*consistent:level=read-latest*/SELECT 1", RouteHint(level="read_latest")),
        (
            "/* Consistent : replica, level=EVENTUAL, max_lag=2.5 */ SELECT 1",
            RouteHint(target=RouteTarget.REPLICA, level="eventual", max_lag=2.5),
        ),
        ("/* consistent: level=read_own_writes max_lag=0 */ SELECT 1",
         RouteHint(level="read_own_writes", max_lag=0.0)),
        (" \n\t/* consistent: primary */\nSELECT 1", RouteHint(target=RouteTarget.PRIMARY)),
        ("/* a */ -- b\n# c\n/* consistent: replica */ SELECT 1",
         RouteHint(target=RouteTarget.REPLICA)),
        ("/* consistent: primary */ /* consistent: replica */ SELECT 1",
         RouteHint(target=RouteTarget.PRIMARY)),
    ],
)  # fmt: skip
def test_hints(sql: str, hint: RouteHint) -> None:
    result = classify(sql)
    assert result.hint == hint
    assert result.hint_error is None
    assert result.kind is StatementKind.READ


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("/* consistent: */ SELECT 1", "empty"),
        ("/* consistent: sideways */ SELECT 1", "'sideways'"),
        ("/* consistent: level=strong */ SELECT 1", "'strong'"),
        ("/* consistent: level */ SELECT 1", "'level'"),
        ("/* consistent: primary replica */ SELECT 1", "more than one target"),
        ("/* consistent: primary primary */ SELECT 1", "more than one target"),
        ("/* consistent: level=eventual level=read_latest */ SELECT 1", "twice"),
        ("/* consistent: max_lag=soon */ SELECT 1", "not a number"),
        ("/* consistent: max_lag=-1 */ SELECT 1", ">= 0"),
        ("/* consistent: max_lag=nan */ SELECT 1", "finite"),
        ("/* consistent: max_lag=1 max_lag=2 */ SELECT 1", "twice"),
    ],
)
def test_malformed_hints_are_reported_not_raised(sql: str, fragment: str) -> None:
    result = classify(sql)
    assert result.hint is None
    assert result.hint_error is not None
    assert fragment in result.hint_error
    assert _summary(result) == PLAIN


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT /* consistent: primary */ 1",
        "SELECT '/* consistent: primary */'",
        "-- consistent: primary\nSELECT 1",
        "# consistent: primary\nSELECT 1",
        "/* not consistent: primary */ SELECT 1",
        "/*+ consistent: primary */ SELECT 1",
        "SELECT 1 /* consistent: primary */",
    ],
)
def test_only_a_leading_block_comment_is_a_hint(sql: str) -> None:
    result = classify(sql)
    assert result.hint is None
    assert result.hint_error is None


def test_hint_does_not_change_what_the_sql_says() -> None:
    hinted = classify("/* consistent: replica */ SELECT * FROM t FOR UPDATE")
    assert hinted.must_use_primary
    assert hinted.primary_reason == PrimaryReason.FOR_UPDATE
    assert dataclasses.replace(hinted, hint=None) == classify("SELECT * FROM t FOR UPDATE")


def test_hint_applies_to_a_multi_statement() -> None:
    result = classify("/* consistent: primary */ SELECT 1; SELECT 2")
    assert result.is_multi_statement
    assert result.hint == RouteHint(target=RouteTarget.PRIMARY)
    assert all(part.hint is None for part in result.parts)


levels = st.sampled_from(["eventual", "read_own_writes", "read_all_writes", "read_latest"])


@given(
    target=st.sampled_from([None, *RouteTarget]),
    level=st.one_of(st.none(), levels),
    max_lag=st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False)),
    separator=st.sampled_from([" ", ",", " , ", "\n"]),
)
def test_hint_round_trip(
    target: RouteTarget | None, level: str | None, max_lag: float | None, separator: str
) -> None:
    items = [str(target)] if target else []
    items += [f"level={level}"] if level else []
    items += [f"max_lag={max_lag!r}"] if max_lag is not None else []
    result = classify(f"/* consistent: {separator.join(items)} */ SELECT 1")
    if not items:
        assert result.hint is None
        assert result.hint_error is not None
    else:
        assert result.hint == RouteHint(target=target, level=level, max_lag=max_lag)


# --- SET and USE ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "variables"),
    [
        ("SET NAMES utf8mb4", (("NAMES", "utf8mb4"),)),
        ("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_bin'",
         (("NAMES", "'utf8mb4' COLLATE 'utf8mb4_bin'"),)),
        ("set names default", (("NAMES", "default"),)),
        ("SET CHARACTER SET latin1", (("CHARACTER SET", "latin1"),)),
        ("SET CHARSET 'utf8'", (("CHARACTER SET", "'utf8'"),)),
        ("SET sql_mode = 'ANSI'", (("sql_mode", "'ANSI'"),)),
        ("SET SQL_MODE='ANSI';", (("sql_mode", "'ANSI'"),)),
        ("SET @@session.time_zone := '+00:00'", (("time_zone", "'+00:00'"),)),
        ("SET @@SESSION.`time_zone` = 'UTC'", (("time_zone", "'UTC'"),)),
        ("SET @@local.wait_timeout = 60", (("wait_timeout", "60"),)),
        ("SET LOCAL wait_timeout = 60", (("wait_timeout", "60"),)),
        ("SET `sql_mode` = ''", (("sql_mode", "''"),)),
        ("SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'), time_zone = 'UTC'",
         (("sql_mode", "CONCAT(@@sql_mode, ',ANSI_QUOTES')"), ("time_zone", "'UTC'"))),
        ("SET time_zone = /* why */ 'UTC' /* done */", (("time_zone", "'UTC'"),)),
        ("/*!40101 SET character_set_client = utf8 */", (("character_set_client", "utf8"),)),
        ("SET GLOBAL a = 1, b = 2, SESSION c = 3", (("c", "3"),)),
        ("SET @@global.a = 1, b = 2", (("b", "2"),)),
        ("SET PERSIST a = 1", ()),
        ("SET NAMES utf8mb4, sql_mode = 'ANSI', @x = 1",
         (("NAMES", "utf8mb4"), ("sql_mode", "'ANSI'"))),
        ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY",
         (("TRANSACTION", "ISOLATION LEVEL READ COMMITTED, READ ONLY"),)),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", ()),
        ("SET GLOBAL TRANSACTION READ ONLY", ()),
        ("SET ROLE r1, r2", (("ROLE", "r1, r2"),)),
        ("SET autocommit = 0, sql_mode = ''", (("sql_mode", "''"),)),
        ("SET sql_log_bin = 0, gtid_next = 'AUTOMATIC', session_track_gtids = OFF", ()),
        ("SET binlog_format = 'ROW', insert_id = 5, timestamp = 1", (("timestamp", "1"),)),
        ("SET sql_mode = @saved", ()),
        ("SET sql_mode = (SELECT 'ANSI')", ()),
    ],
)  # fmt: skip
def test_session_variables(sql: str, variables: tuple[tuple[str, str], ...]) -> None:
    result = classify(sql)
    assert result.kind is StatementKind.SESSION_STATE
    assert result.session_variables == variables
    assert result.must_use_primary


@pytest.mark.parametrize(
    ("sql", "pin"),
    [
        ("SET sql_mode = @saved", PinReason.USER_VARIABLE),
        ("SET sql_mode = (SELECT 'ANSI')", PinReason.SESSION_STATE),
        ("SET @a = 1, autocommit = 0", PinReason.USER_VARIABLE),
        ("SET autocommit = 0, @a = 1", PinReason.AUTOCOMMIT_OFF),
        ("SET NAMES utf8mb4", None),
    ],
)
def test_set_pins(sql: str, pin: str | None) -> None:
    assert classify(sql).pins_session == pin


@pytest.mark.parametrize(
    ("value", "autocommit"),
    [("0", False), ("1", True), ("off", False), ("On", True), ("'ON'", True), ("'0'", False),
     ("FALSE", False), ("true", True), ("DEFAULT", False), ("1 + 0", False), ("@v", False)],
)  # fmt: skip
def test_autocommit_values(value: str, autocommit: bool) -> None:
    result = classify(f"SET autocommit = {value}")
    assert result.sets_autocommit is autocommit
    assert result.pins_session == (None if autocommit else PinReason.AUTOCOMMIT_OFF)
    assert result.unpins_session == (PinReason.AUTOCOMMIT_OFF if autocommit else None)
    assert result.session_variables == ()


def test_global_autocommit_does_not_touch_the_session() -> None:
    result = classify("SET GLOBAL autocommit = 0")
    assert result.sets_autocommit is None
    assert result.pins_session is None


@pytest.mark.parametrize(
    ("name", "value", "sql"),
    [
        ("NAMES", "utf8mb4", "SET NAMES utf8mb4"),
        ("CHARACTER SET", "latin1", "SET CHARACTER SET latin1"),
        ("TRANSACTION", "READ ONLY", "SET SESSION TRANSACTION READ ONLY"),
        ("ROLE", "ALL", "SET ROLE ALL"),
        ("sql_mode", "'ANSI'", "SET SESSION sql_mode = 'ANSI'"),
    ],
)
def test_replay_sql(name: str, value: str, sql: str) -> None:
    assert replay_sql(name, value) == sql


_SET_SAMPLES = [
    "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_bin', sql_mode = CONCAT(@@sql_mode, ',X')",
    "SET CHARACTER SET latin1, @@session.time_zone = '+01:00'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET ROLE r1, r2",
    "SET max_execution_time = 1000, div_precision_increment = 6",
]


@pytest.mark.parametrize("sql", _SET_SAMPLES)
def test_replay_reproduces_each_setting(sql: str) -> None:
    for name, value in classify(sql).session_variables:
        assert classify(replay_sql(name, value)).session_variables == ((name, value),)


@pytest.mark.parametrize(
    ("sql", "schema"),
    [("USE shop", "shop"), ("use `my db`", "my db"), ("USE `a``b`", "a`b"), ("USE Shop;", "Shop"),
     ("/* c */ USE /* d */ app", "app"), ("USE", None)],
)  # fmt: skip
def test_use(sql: str, schema: str | None) -> None:
    result = classify(sql)
    assert result.kind is StatementKind.SESSION_STATE
    assert result.schema == schema


def test_set_statement_classifies_its_statement() -> None:
    inner = classify("SELECT * FROM t WHERE a = @x")
    result = classify("SET STATEMENT max_statement_time = 2 FOR SELECT * FROM t WHERE a = @x")
    assert result == dataclasses.replace(inner, first_keyword="SET")


# --- multi-statements -----------------------------------------------------------------------
def test_split_statements_returns_source_text() -> None:
    assert split_statements("SELECT 1; SELECT 'a;b' ;\nUPDATE t SET a = 1;") == [
        "SELECT 1",
        " SELECT 'a;b' ",
        "\nUPDATE t SET a = 1",
    ]
    assert split_statements("  ;; -- nothing\n") == []
    assert split_statements("SELECT 1 /* ; */") == ["SELECT 1 /* ; */"]


def test_split_statements_keeps_stored_program_bodies_whole() -> None:
    body = (
        "CREATE PROCEDURE p() BEGIN IF 1 THEN SELECT 1; END IF;"
        " CASE WHEN 1 THEN DO 1; END CASE; END"
    )
    assert split_statements(f"{body}; SELECT 2") == [body, " SELECT 2"]
    compound = "BEGIN NOT ATOMIC SELECT CASE WHEN 1 THEN 2 END; SELECT 3; END"
    assert split_statements(compound) == [compound]
    # Outside stored programs BEGIN is a transaction and does not open a block.
    assert split_statements("BEGIN; SELECT 1; COMMIT") == ["BEGIN", " SELECT 1", " COMMIT"]


def test_multi_statement_parts_and_summary() -> None:
    result = classify("SELECT 1; BEGIN; UPDATE t SET a = @x := 1; USE b; COMMIT")
    assert [p.kind for p in result.parts] == [
        StatementKind.READ,
        StatementKind.TRANSACTION_BEGIN,
        StatementKind.WRITE,
        StatementKind.SESSION_STATE,
        StatementKind.COMMIT,
    ]
    assert result.is_multi_statement
    assert result.first_keyword == "SELECT"
    assert result.kind is StatementKind.TRANSACTION_BEGIN
    assert result.must_use_primary
    assert result.primary_reason == PrimaryReason.WRITE
    assert result.pins_session == PinReason.USER_VARIABLE
    assert result.schema == "b"
    assert result.implicit_commit


def test_multi_statement_of_safe_reads_is_replica_safe() -> None:
    result = classify("SELECT 1; SELECT a FROM t;")
    assert result.replica_safe
    assert len(result.parts) == 2
    assert all(part.replica_safe and not part.parts for part in result.parts)


def test_trailing_semicolon_is_not_a_second_statement() -> None:
    assert classify("SELECT 1;") == classify("SELECT 1")
    assert classify("SELECT 1; -- bye\n") == classify("SELECT 1")


# --- model ------------------------------------------------------------------------------------
def test_transaction_control_kinds() -> None:
    control = {kind for kind in StatementKind if kind.is_transaction_control}
    assert control == {
        StatementKind.TRANSACTION_BEGIN,
        StatementKind.COMMIT,
        StatementKind.ROLLBACK,
        StatementKind.SAVEPOINT,
        StatementKind.RELEASE_SAVEPOINT,
        StatementKind.ROLLBACK_TO_SAVEPOINT,
    }


def test_reasons_are_plain_strings() -> None:
    result = classify("SELECT * FROM t FOR UPDATE")
    assert result.primary_reason == "for_update"
    assert isinstance(result.primary_reason, str)
    assert classify("CREATE TEMPORARY TABLE x (a INT)").pins_session == "temporary_table"


def test_classification_is_immutable() -> None:
    result = classify("SELECT 1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.kind = StatementKind.WRITE  # type: ignore[misc]


def test_empty_and_invalid_input_needs_the_primary() -> None:
    for sql in ("", "   ", b"", "/* */", ")", "@x"):
        result = classify(sql)
        assert result.kind is StatementKind.OTHER
        assert result.primary_reason == PrimaryReason.UNKNOWN


def test_undecodable_bytes_do_not_break_the_lexer() -> None:
    assert _summary(classify(b"SELECT '\xff\xfe' FROM t")) == PLAIN
    assert classify(b"SELECT \xff FROM t FOR UPDATE").primary_reason == PrimaryReason.FOR_UPDATE


# --- lexer invariants (metamorphic) -----------------------------------------------------------
def _sq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _dq(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_anything_inside_a_string_literal_is_inert(text: str) -> None:
    for literal in (_sq(text), _dq(text), "_utf8mb4" + _sq(text), "N" + _sq(text)):
        assert _summary(classify(f"SELECT {literal} FROM t WHERE a = 1")) == PLAIN


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1))
def test_anything_inside_backticks_is_an_identifier(text: str) -> None:
    ident = "`" + text.replace("`", "``") + "`"
    assert _summary(classify(f"SELECT {ident} FROM {ident} AS {ident}")) == PLAIN


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda s: "*/" not in s and not s.startswith(("!", "M!", "m!"))))
def test_anything_inside_a_block_comment_is_inert(text: str) -> None:
    assert _summary(classify(f"SELECT 1 /*{text}*/ FROM t")) == PLAIN


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda s: "\n" not in s))
def test_anything_after_a_line_comment_is_inert(text: str) -> None:
    assert _summary(classify(f"SELECT 1 -- {text}\nFROM t")) == PLAIN
    assert _summary(classify(f"SELECT 1 #{text}\nFROM t")) == PLAIN
    assert _summary(classify(f"SELECT 1 FROM t --\t{text}")) == PLAIN


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["FOR UPDATE", "LOCK IN SHARE MODE", "FOR SHARE"]), st.text(max_size=20))
def test_an_executable_comment_is_code(clause: str, version: str) -> None:
    digits = "".join(ch for ch in version if ch.isascii() and ch.isdigit())[:5]
    assert classify(f"SELECT a FROM t /*!{digits} {clause} */").must_use_primary


@pytest.mark.parametrize(
    "sql",
    [
        " " * 200_000 + "-",
        "SELECT " + "1-" * 100_000,
        "SELECT a FROM t WHERE id IN (" + ",".join(map(str, range(50_000))) + ")",
        "'" * 100_001,
        "/*" * 50_000,
        "`" * 100_001,
        "SELECT " + "@" * 100_000,
        "SELECT " + "(" * 100_000,
        "SELECT " + "/" * 100_000 + ".",
        "INSERT INTO t VALUES " + ",".join(f"({i}, 'n{i}', 'x''y')" for i in range(20_000)),
    ],
    ids=["spaces", "minus", "in-list", "quotes", "comments", "backticks", "ats", "parens",
         "slashes", "bulk-insert"],
)  # fmt: skip
def test_large_and_pathological_inputs_stay_linear(sql: str) -> None:
    started = time.perf_counter()
    classify(sql)
    assert time.perf_counter() - started < 2.0


# --- oversized statements: classified from their first bytes ---------------------------------


def test_an_oversized_statement_needs_the_primary_and_says_why() -> None:
    tail = ", ".join(["1"] * MAX_CLASSIFIED_LENGTH)
    read = classify(f"SELECT a FROM t WHERE b IN ({tail}) FOR UPDATE")
    assert read.kind is StatementKind.READ
    assert (read.must_use_primary, read.primary_reason) == (True, PrimaryReason.OVERSIZED)
    assert read.pins_session is None  # one plain read: nothing hidden can outlive it
    write = classify_head(b"INSERT INTO t VALUES ('" + b"x" * 100 + b"')")
    assert (write.kind, write.primary_reason, write.pins_session) == (
        StatementKind.WRITE,
        PrimaryReason.OVERSIZED,
        None,
    )
    # Short statements are not affected.
    assert classify("SELECT a FROM t").replica_safe


def test_an_oversized_statement_that_may_change_the_session_pins_it() -> None:
    setting = classify_head("SET @@session.sql_mode = '" + "x" * 1000)
    assert setting.pins_session == PinReason.OVERSIZED
    assert setting.session_variables == ()  # a cut value is never replayed
    several = classify_head("INSERT INTO t VALUES (1); SET @@sql_mode = 'ANSI'; SELECT '")
    assert several.is_multi_statement
    assert several.pins_session == PinReason.OVERSIZED
    assert all(not part.session_variables for part in several.parts)
    temporary = classify_head("CREATE TEMPORARY TABLE t AS SELECT '" + "x" * 1000)
    assert temporary.pins_session == PinReason.TEMPORARY_TABLE


def test_an_oversized_statement_is_judged_by_its_first_bytes_alone() -> None:
    values = ",".join(["(1,'abc')"] * (MAX_CLASSIFIED_LENGTH // 9))
    head = classify(f"INSERT INTO t VALUES {values}")
    whole = classify(f"INSERT INTO t VALUES {values * 20}")  # 20x longer, same first bytes
    assert head == whole
