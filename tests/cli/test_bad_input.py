"""Every command answers bad input with one line on stderr, in one format
(``consistent <command>: error: …``), and a status that says what failed: 2 for what was asked
(options, files, missing pieces such as Java or the spark extra), 1 for what went wrong while
trying (a port in use, a server that does not answer).  Never a traceback, never a repr.

Each case runs the command in a process of its own, as a user would.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.startup import missing_modules

from .commands import WITHOUT_PYSPARK, Finished, assert_one_error_line, run

USAGE, FAILURE = 2, 1
#: The checks after the spark extra's: without it, that is what the command says first.
with_spark_extra = pytest.mark.skipif(
    bool(missing_modules()), reason=f"not installed: {', '.join(missing_modules())}"
)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def no_java(tmp_path: Path) -> dict[str, str]:
    """An environment where Spark finds no Java (and python is still found by path)."""
    return {"PATH": str(tmp_path / "empty-bin"), "JAVA_HOME": ""}


def test_an_unknown_command(tmp_path: Path) -> None:
    result = run(["nosuch"])
    assert_one_error_line(result, USAGE, "consistent", "invalid choice: 'nosuch'")


# ----------------------------------------------------------------- emulate


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--host", "10.1.2.3"], ["--host", "10.1.2.3 is not a loopback address"]),
        (["--host", "0.0.0.0"], ["--host", "0.0.0.0 is not a loopback address"]),
        (["--host", "db.example"], ["--host", "not an IP address"]),
        (["--lag", "soon"], ["--lag", "not a duration"]),
        (["--replicas", "two"], ["--replicas", "invalid int value"]),
        (["--replicas", "-1"], ["number of replicas"]),
        (["--port", "70000"], ["base port 70000"]),
        (["--chain", "3", "--replicas", "2"], ["not allowed with argument"]),
    ],
)
def test_emulate_refuses_bad_options(argv: list[str], fragments: list[str]) -> None:
    assert_one_error_line(run(["emulate", *argv]), USAGE, "consistent emulate", *fragments)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("replicas = 2\nlagg = '1s'\n", "unknown keys ['lagg']"),
        ("[[server]]\nport = 3306\n", "missing key 'name'"),
        ("[[server]\n", "topology.toml"),
        ("replicas = 1\nlag = 'lognormal(30ms)'\n", "lognormal"),
        ("replicas = 1\nport = 'x'\n", "port: expected an integer"),
    ],
)
def test_emulate_explains_a_bad_spec_without_a_repr(
    text: str, fragment: str, tmp_path: Path
) -> None:
    spec = tmp_path / "topology.toml"
    spec.write_text(text)
    line = assert_one_error_line(
        run(["emulate", "--spec", str(spec)]), USAGE, "consistent emulate", fragment
    )
    assert "Error(" not in line


def test_emulate_with_a_missing_spec(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    result = run(["emulate", "--spec", str(missing)])
    assert_one_error_line(result, USAGE, "consistent emulate", f"cannot read {missing}")


def test_emulate_on_a_port_in_use(busy_port: int) -> None:
    result = run(["emulate", "--replicas", "1", "--port", str(busy_port), "--duration", "0"])
    assert_one_error_line(
        result, FAILURE, "consistent emulate", f"primary cannot listen on 127.0.0.1:{busy_port}"
    )


# ----------------------------------------------------------------- lag-sample


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--replica", "nonsense:abc"], ["--replica", "bad port in 'nonsense:abc'"]),
        (["--replica", "db:70000"], ["--replica", "port out of range in 'db:70000'"]),
        (["--replica", "h:1", "--primary", "[::1"], ["--primary"]),
        (["--replica", "h:1", "--interval-ms", "0"], ["--interval-ms must be at least 1"]),
        (["--replica", "h:1", "--flavor", "oracle"], ["--flavor", "invalid choice"]),
        ([], ["the following arguments are required: --replica"]),
    ],
)
def test_lag_sample_refuses_bad_options(argv: list[str], fragments: list[str]) -> None:
    result = run(["lag-sample", *argv])
    assert_one_error_line(result, USAGE, "consistent lag-sample", *fragments)


def test_lag_sample_cannot_reach_its_replica(closed_port: int) -> None:
    result = run(["lag-sample", "--replica", f"127.0.0.1:{closed_port}", "--count", "1"])
    assert_one_error_line(
        result, FAILURE, "consistent lag-sample", f"cannot reach 127.0.0.1:{closed_port}"
    )


# ----------------------------------------------------------------- analyze


@with_spark_extra
def test_analyze_on_a_file_that_is_not_a_trace(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    result = run(["analyze", str(notes), "--out", str(tmp_path / "out")])
    assert_one_error_line(result, USAGE, "consistent analyze", f"{notes} is not a trace file")
    assert not (tmp_path / "out").exists()


@with_spark_extra
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["{tmp}/missing"], "no trace files in"),
        ([], "give trace files, or --skip-ingest"),
        (["--skip-ingest"], "no tables of an earlier run"),
    ],
)
def test_analyze_without_traces(argv: list[str], fragment: str, tmp_path: Path) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    result = run(["analyze", *argv, "--out", str(tmp_path / "out")])
    assert_one_error_line(result, USAGE, "consistent analyze", fragment)


@with_spark_extra
def test_analyze_without_java(tmp_path: Path, no_java: dict[str, str]) -> None:
    result = run(["analyze", str(tmp_path), "--out", str(tmp_path / "out")], env=no_java)
    assert_one_error_line(result, USAGE, "consistent analyze", "Spark needs Java", "JAVA_HOME")


def test_analyze_without_the_spark_extra(tmp_path: Path) -> None:
    result = run(["analyze", str(tmp_path), "--out", str(tmp_path)], prelude=WITHOUT_PYSPARK)
    assert_one_error_line(
        result, USAGE, "consistent analyze", "spark extra", "pyspark", "consistent[spark]"
    )


# ----------------------------------------------------------------- demo


def _refused_before_starting(result: Finished, out: Path, *fragments: str) -> None:
    assert_one_error_line(result, USAGE, "consistent demo", *fragments)
    assert not out.exists()
    assert result.stdout == ""


def test_demo_without_the_spark_extra_says_so_before_running(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(["demo", "--out", str(out)], prelude=WITHOUT_PYSPARK)
    _refused_before_starting(result, out, "pyspark", "consistent[spark]", "--skip-analysis")


@with_spark_extra
def test_demo_without_java_says_so_before_running(tmp_path: Path, no_java: dict[str, str]) -> None:
    out = tmp_path / "out"
    result = run(["demo", "--out", str(out)], env=no_java)
    _refused_before_starting(result, out, "Java", "--skip-analysis")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--seconds", "0"], "--seconds must be positive"),
        (["--sessions", "0"], "--sessions must be at least 1"),
        (["--seconds", "soon"], "invalid float value"),
    ],
)
def test_demo_refuses_nonsense_numbers(argv: list[str], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(["demo", *argv, "--skip-analysis", "--out", str(out)])
    _refused_before_starting(result, out, fragment)


# ----------------------------------------------------------------- proxy


def _proxy_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[backends]\n", "[backends] needs a primary"),
        (
            '[backends]\nprimary = "h:1"\n[users.a]\npassword = "x"\n[admin]\ntoken = "short"\n',
            "admin.token must be at least 8 characters",
        ),
        ("listen = \n", "is not valid TOML"),
    ],
)
def test_proxy_refuses_a_bad_configuration(text: str, fragment: str, tmp_path: Path) -> None:
    config = _proxy_config(tmp_path, text)
    result = run(["proxy", "--config", str(config)])
    assert_one_error_line(result, USAGE, "consistent proxy", fragment)


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--config", "{tmp}/missing.toml"], ["cannot read", "missing.toml"]),
        (["--config", "x", "--level", "bogus"], ["--level", "read_own_writes"]),
        (["--config", "x", "--log-format", "xml"], ["--log-format", "invalid choice"]),
        ([], ["the following arguments are required: --config"]),
    ],
)
def test_proxy_refuses_bad_options(argv: list[str], fragments: list[str], tmp_path: Path) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert_one_error_line(run(["proxy", *argv]), USAGE, "consistent proxy", *fragments)


def test_proxy_on_a_port_in_use(busy_port: int, closed_port: int, tmp_path: Path) -> None:
    config = _proxy_config(
        tmp_path,
        f'listen = "127.0.0.1:{busy_port}"\n[backends]\nprimary = "127.0.0.1:{closed_port}"\n'
        'flavor = "mysql"\n[users.app]\npassword = "app-secret"\n',
    )
    result = run(["proxy", "--config", str(config), "--log-level", "error"])
    assert_one_error_line(result, FAILURE, "consistent proxy", "cannot start", str(busy_port))
