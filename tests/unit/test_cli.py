"""The console script's dispatch."""

from __future__ import annotations

import pytest

from consistent import __version__, cli


def test_version_subcommand_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == f"consistent {__version__}\n"


def test_no_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: consistent" in capsys.readouterr().err
