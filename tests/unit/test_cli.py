"""The console script's dispatch."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

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


@pytest.mark.parametrize("name", sorted(cli._SUMMARIES))
def test_every_registered_subcommand_imports_and_sets_a_handler(name: str) -> None:
    parser = cli.build_parser([name])
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    assert subparsers.choices[name].get_default("handler") is not None, f"{name} sets no handler"


ROOT = Path(__file__).resolve().parents[2]


def _declared() -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        table: dict[str, str] = tomllib.load(f)["project"]["entry-points"][cli.GROUP]
    return table


def test_every_declared_subcommand_has_a_summary_and_the_reverse() -> None:
    assert sorted(_declared()) == sorted(cli._SUMMARIES)


def test_the_installed_entry_points_are_those_of_pyproject() -> None:
    installed = {name: entry.value for name, entry in cli.registered().items()}
    assert installed == _declared(), (
        "the installed metadata differs from pyproject.toml: reinstall with `make venv`"
    )


def test_a_subcommand_without_its_entry_point_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = cli.registered()
    del entries["proxy"]
    monkeypatch.setattr(cli, "registered", lambda: entries)
    assert cli.main(["proxy", "--help"]) == 1
    err = capsys.readouterr().err
    assert "'proxy' has no entry point in the group 'consistent.commands'" in err
    assert "make venv" in err


def test_only_the_chosen_subcommand_is_imported() -> None:
    code = (
        "import sys; from consistent import cli; cli.build_parser(['emulate', '--help']); "
        "print(sorted(m for m in ('proxy.cli', 'analytics.cli', 'consistent.demo.cli', "
        "'consistent.telemetry.cli', 'consistent.emulator.cli') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "['consistent.emulator.cli']"
