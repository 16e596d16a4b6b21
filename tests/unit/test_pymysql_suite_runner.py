"""The PyMySQL-suite runner's own logic (``make test-pymysql``): reading JUnit reports, the
README's table of listed exceptions, the verdict, and the plugin's ``connect`` replacement.
The comparison itself needs PyPI and MariaDB and runs as ``make test-pymysql``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from consistent.testing.loading import load_module

SUITE = Path(__file__).resolve().parents[1] / "pymysql_suite"
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_module("consistent_pymysql_suite_run", SUITE / "run.py")


@pytest.fixture(scope="module")
def plugin() -> ModuleType:
    return load_module("consistent_pymysql_suite_plugin", SUITE / "pymysql_suite_plugin.py")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="pymysql.tests.test_basic.TestConversion" name="test_string"/>
<testcase classname="pymysql.tests.test_basic.TestConversion" name="test_bit">
  <skipped message="no"/></testcase>
<testcase classname="pymysql.tests.test_connection.TestConnection" name="test_autocommit">
  <failure message="True is not false"/></testcase>
<testcase classname="pymysql.tests.test_issues.TestOldIssues" name="test_issue_3">
  <error message="boom"/></testcase>
</testsuite></testsuites>
"""


def test_outcomes_name_tests_by_module_class_and_method(runner: ModuleType, tmp_path: Path) -> None:
    junit = tmp_path / "direct.xml"
    junit.write_text(JUNIT)
    assert runner.outcomes(junit) == {
        "test_basic.TestConversion::test_string": "passed",
        "test_basic.TestConversion::test_bit": "skipped",
        "test_connection.TestConnection::test_autocommit": "failed",
        "test_issues.TestOldIssues::test_issue_3": "failed",
    }


def test_only_unlisted_regressions_fail_the_run(runner: ModuleType) -> None:
    comparison = runner.Comparison(
        results={
            "direct": {"a::x": "passed", "a::y": "passed", "a::z": "failed", "a::w": "passed"},
            "consistent": {"a::x": "failed", "a::y": "passed", "a::z": "passed", "a::w": "failed"},
        }
    )
    listed = {"a::w": "a reason", "a::gone": "fixed since"}
    unlisted, explained, stale = runner.verdict(comparison, listed)
    assert (unlisted, explained, stale) == (["a::x"], ["a::w"], ["a::gone"])
    table = runner.table(comparison.rows(), listed)
    assert "REGRESSION" in next(line for line in table.splitlines() if line.startswith("a::x"))
    assert "listed" in next(line for line in table.splitlines() if line.startswith("a::w"))


def test_through_the_proxy_any_difference_between_on_and_off_is_flagged(
    runner: ModuleType,
) -> None:
    comparison = runner.Comparison(
        results={
            "direct": {"a::x": "passed", "a::y": "passed", "a::z": "passed"},
            "proxy-multiplexing": {"a::x": "failed", "a::y": "passed", "a::z": "failed"},
            "proxy-no-multiplexing": {"a::x": "passed", "a::y": "passed", "a::z": "failed"},
        }
    )
    assert comparison.differences("proxy-multiplexing", "proxy-no-multiplexing") == ["a::x"]
    listed = {"a::z": "a reason"}
    assert runner.verdict(comparison, listed, "proxy-no-multiplexing") == ([], ["a::z"], [])
    table = runner.proxy_table(comparison, listed, False).splitlines()
    assert "ON/OFF DIFFER" in next(line for line in table if line.startswith("a::x"))
    assert "listed" in next(line for line in table if line.startswith("a::z"))
    assert not any(line.startswith("a::y") for line in table)  # the same everywhere


def test_the_readme_lists_each_proxy_exception_with_a_reason(runner: ModuleType) -> None:
    listed = runner.listed_exceptions(README.read_text(encoding="utf-8"), runner._PROXY_MARKS)
    assert listed
    for test_id, reason in listed.items():
        assert test_id.split("::")[0].startswith(("test_", "thirdparty.")), test_id
        assert len(reason) > 20, test_id


def test_the_listed_exceptions_are_read_between_the_markers(runner: ModuleType) -> None:
    text = (
        "| `outside::x` | ignored |\n"
        f"{runner._MARK_START}\n| test | reason |\n|---|---|\n"
        "| `test_connection.TestConnection::test_autocommit` | on by default |\n"
        f"{runner._MARK_END}\n"
    )
    assert runner.listed_exceptions(text) == {
        "test_connection.TestConnection::test_autocommit": "on by default"
    }


def test_the_readme_lists_each_exception_with_a_reason(runner: ModuleType) -> None:
    listed = runner.listed_exceptions(README.read_text(encoding="utf-8"))
    assert listed  # the table is there and parses
    for test_id, reason in listed.items():
        assert "::" in test_id
        assert test_id.split("::")[0].startswith(("test_", "thirdparty."))
        assert len(reason) > 20, test_id


def test_databases_json_uses_the_suites_own_option_names(runner: ModuleType) -> None:
    class Params:
        host, port, user, password = "127.0.0.1", 3306, "app", "pw"

    class Topology:
        def connection_params(self) -> Params:
            return Params()

    old = runner.suite_databases(Topology(), '{"host":"localhost","passwd":"","db":"test1"}')
    new = runner.suite_databases(Topology(), '{"host": "localhost", "database": "test1"}')
    assert [d.get("db") for d in old] == ["test1", "test2"]
    assert [d.get("database") for d in new] == ["test1", "test2"]
    assert old[0]["local_infile"] is True
    assert {d["password"] for d in old + new} == {"pw"}


def test_the_replacement_connect_keeps_every_argument(
    plugin: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import consistent

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(consistent, "connect", lambda **kwargs: seen.append(kwargs) or kwargs)
    connect = plugin._wrapping_connect(["127.0.0.1:2"], {"level": "read_latest"})
    connect(host="127.0.0.1", port=1, user="u", db="test1", charset="utf8mb4")
    connect(host="127.0.0.1", port=1, level="eventual", replicas=[])
    assert seen == [
        {
            "level": "read_latest",
            "host": "127.0.0.1",
            "port": 1,
            "user": "u",
            "db": "test1",
            "charset": "utf8mb4",
            "replicas": ["127.0.0.1:2"],
        },
        {"level": "eventual", "host": "127.0.0.1", "port": 1, "replicas": []},
    ]
    with pytest.raises(TypeError):
        connect("127.0.0.1")
