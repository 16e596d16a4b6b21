"""``consistent.command``: what escapes a command's handler becomes one line and a status."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable

import pytest

from consistent.command import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    CommandParser,
    loopback_host,
    reason,
    run,
)
from consistent.errors import MalformedGtidSet, OperationalError

NS = argparse.Namespace()


def _raising(exc: BaseException) -> Callable[[argparse.Namespace], int]:
    def handler(_args: argparse.Namespace) -> int:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "status", "line"),
    [
        (CommandError("--seconds must be positive"), EXIT_USAGE, "--seconds must be positive"),
        (CommandError("port in use", EXIT_FAILURE), EXIT_FAILURE, "port in use"),
        (MalformedGtidSet("x"), EXIT_FAILURE, "Malformed GTID set specification 'x'."),
        (OperationalError(2003, "Can't connect"), EXIT_FAILURE, "Can't connect"),
        (
            FileNotFoundError(2, "No such file or directory", "a.toml"),
            EXIT_FAILURE,
            "a.toml: No such file or directory",
        ),
    ],
)
def test_a_failure_is_one_line_with_its_status(
    exc: BaseException, status: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("consistent x", _raising(exc), NS) == status
    assert capsys.readouterr().err == f"consistent x: error: {line}\n"


def test_ctrl_c_is_130_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("consistent x", _raising(KeyboardInterrupt()), NS) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "consistent x: interrupted\n"


def test_a_failure_while_stopping_after_ctrl_c_is_still_an_interrupt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def handler(_args: argparse.Namespace) -> int:
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("the pool did not close")

    assert run("consistent x", handler, NS) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "consistent x: interrupted\n"


def test_an_unexpected_exception_is_one_line_unless_debugging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONSISTENT_DEBUG", raising=False)
    assert run("consistent x", _raising(ValueError("bad\nsecond line")), NS) == EXIT_FAILURE
    assert capsys.readouterr().err == (
        "consistent x: error: ValueError: bad (set CONSISTENT_DEBUG=1 to see where)\n"
    )
    monkeypatch.setenv("CONSISTENT_DEBUG", "1")
    with pytest.raises(ValueError, match="bad"):
        run("consistent x", _raising(ValueError("bad")), NS)


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    parser = CommandParser(prog="consistent x")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--n", "many"])
    assert stopped.value.code == EXIT_USAGE
    assert capsys.readouterr().err == (
        "consistent x: error: argument --n: invalid int value: 'many'\n"
    )


def test_reason_is_never_a_repr() -> None:
    assert reason(OperationalError(2013, "Lost connection")) == "Lost connection"
    assert reason(OSError(98, "Address already in use")) == "Address already in use"
    assert reason(RuntimeError()) == "RuntimeError"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "[::1]"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    assert loopback_host(host) == host.strip("[]")


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "10.1.2.3", "::", "2001:db8::1", "db", "localhost", ""]
)
def test_other_hosts_are_refused(host: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        loopback_host(host)


# A handler whose Ctrl-C arrives while a ``__del__`` runs: Python cannot raise it there.
_DROPPED_CTRL_C = """
import argparse, os, signal, sys
from consistent import command

class Late:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000):
            pass  # the signal's handler runs here, and its KeyboardInterrupt is dropped

def handler(args):
    Late()
    print("went on", flush=True)
    if args.check:
        command.check_interrupted()
        print("after the check", flush=True)
    return 0

sys.exit(command.run("prog", handler, argparse.Namespace(check=sys.argv[1] == "check")))
"""


@pytest.mark.parametrize("check", [True, False], ids=["at-the-next-check", "at-the-end"])
def test_a_ctrl_c_python_could_not_raise_still_stops_the_command_quietly(check: bool) -> None:
    child = subprocess.run(
        [sys.executable, "-c", _DROPPED_CTRL_C, "check" if check else "end"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == EXIT_INTERRUPTED, child.stderr
    assert child.stderr == "prog: interrupted\n"  # no "Exception ignored" traceback
    assert child.stdout == "went on\n"  # and, with a check, nothing after it
