"""The commands' help is written for their users: a description of what the command does (not
a module docstring), no reStructuredText markup, help on every option, the choices of every
option that has some."""

from __future__ import annotations

import argparse
import re
import sys

import pytest

from consistent import cli
from consistent.policy import Level

#: Markup of docstrings that a terminal shows as noise.
_MARKUP = re.compile(r"`|:(?:func|class|mod|data|meth|attr):")


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser([name])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[name]
    return chosen


def test_the_top_level_help_names_every_command() -> None:
    text = cli.build_parser().format_help()
    assert not _MARKUP.search(text)
    for name in cli._SUMMARIES:
        assert name in text


@pytest.mark.parametrize("name", sorted(cli._SUMMARIES))
def test_help_is_for_users(name: str) -> None:
    parser = _subparser(name)
    text = parser.format_help()
    assert not _MARKUP.search(text), _MARKUP.search(text)
    assert parser.description, f"{name} has no description"
    module = sys.modules[parser.get_default("handler").__module__]
    assert parser.description.strip() not in (module.__doc__ or "")  # not the docstring
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, (name, action.dest)
        assert action.help is not argparse.SUPPRESS, (name, action.dest)


@pytest.mark.parametrize("name", sorted(cli._SUMMARIES))
def test_every_choice_is_listed(name: str) -> None:
    parser = _subparser(name)
    text = parser.format_help()
    for action in parser._actions:
        if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
            for choice in action.choices:
                assert str(choice) in text, (name, action.dest, choice)


def test_the_proxy_level_lists_the_levels() -> None:
    level = next(a for a in _subparser("proxy")._actions if a.dest == "level")
    assert list(level.choices or ()) == [member.value for member in Level]


def test_analyze_help_describes_the_analysis_not_the_code() -> None:
    text = _subparser("analyze").format_help()
    for words in ("report", "Java", "spark extra", "lag", "audit"):
        assert words in text
    for developer_words in ("handler", "configure_parser", "run_analyze", "subparsers"):
        assert developer_words not in text
