"""The console script's dispatch."""

from __future__ import annotations

import argparse

import pytest

from consistent import __version__, cli


def test_version_subcommand_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == f"consistent {__version__}\n"


def test_no_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: consistent" in capsys.readouterr().err


def test_help_lists_every_subcommand_without_importing_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for name in ("version", "emulate", "proxy", "lag-sample", "analyze", "demo"):
        assert name in out


def test_a_registered_subcommand_gets_its_full_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["emulate", "--help"])
    assert "--replicas" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(cli._SUBCOMMANDS))
def test_every_registered_subcommand_imports_and_sets_a_handler(name: str) -> None:
    parser = cli.build_parser([name])
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    assert subparsers.choices[name].get_default("handler") is not None, f"{name} sets no handler"
