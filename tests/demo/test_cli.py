"""``consistent demo``'s command line: its arguments, and clear refusals before anything
starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.startup import java_available
from consistent.cli import build_parser, main
from consistent.demo.cli import EXIT_UNAVAILABLE


def test_the_demo_subcommand_parses_its_options() -> None:
    argv = ["demo", "--seconds", "8", "--sessions", "8", "--out", "x", "--mariadb"]
    args = build_parser(argv).parse_args(argv)
    assert (args.seconds, args.sessions, args.out, args.mariadb) == (8.0, 8, Path("x"), True)
    assert args.skip_analysis is False
    defaults = build_parser(["demo"]).parse_args(["demo"])
    assert 60 <= defaults.seconds <= 90
    assert defaults.out == Path("out/demo")


def test_java_is_found_through_java_home_or_the_path(tmp_path: Path) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    assert java_available({"JAVA_HOME": str(home), "PATH": ""})
    assert java_available({"PATH": str(home / "bin")})
    assert not java_available({"PATH": str(tmp_path)})
    assert not java_available({"JAVA_HOME": str(tmp_path), "PATH": ""})


def test_without_java_the_demo_says_so_before_starting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    status = main(["demo", "--seconds", "1", "--out", str(tmp_path / "out")])
    assert status == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "Java" in err
    assert "--skip-analysis" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "value"), [("--seconds", "0"), ("--sessions", "0"), ("--wait-timeout", "-1")]
)
def test_nonsense_numbers_are_refused(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["demo", option, value, "--skip-analysis", "--out", str(tmp_path)])
    assert status == EXIT_UNAVAILABLE
    assert option in capsys.readouterr().err
