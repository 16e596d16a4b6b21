"""What every ``consistent`` subcommand shares: one-line errors, exit statuses, Ctrl-C.

A command that cannot do what it was asked says why in one line on standard error, in one
format, ``consistent <command>: error: <reason>``, and exits with a status that says what kind
of failure it was; it never shows a Python traceback.  The pieces:

- :class:`CommandParser`: an ``ArgumentParser`` whose usage errors are that one line (status 2);
  subcommand parsers inherit it from the ``consistent`` parser.
- :class:`CommandError`: what a handler raises to stop with a message and a status.
- :func:`run`: calls a handler and turns whatever escapes it into the line and the status:
  Ctrl-C (``KeyboardInterrupt``) is status 130, as shells report a command stopped by SIGINT.
  A Ctrl-C whose ``KeyboardInterrupt`` Python could not raise (it came while a weakref
  callback or a ``__del__`` ran, and Python would only print it as "Exception ignored", with
  its traceback) still stops the command, quietly: at the handler's next
  :func:`check_interrupted`, or when it returns.
- :func:`loopback_host`: the ``--host`` type of the commands that listen (loopback only).

``CONSISTENT_DEBUG=1`` in the environment lets an unexpected exception show its traceback.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Callable
from typing import Final, NoReturn

from consistent.errors import Error

__all__ = [
    "DEBUG_ENV",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CommandError",
    "CommandParser",
    "check_interrupted",
    "error_line",
    "loopback_host",
    "reason",
    "run",
]

#: The command failed (a server went away, the analysis failed, …).
EXIT_FAILURE: Final = 1
#: The command was asked something it cannot do (bad option, missing input or dependency).
EXIT_USAGE: Final = 2
#: Stopped by SIGINT (Ctrl-C): 128 + the signal's number, as shells report it.
EXIT_INTERRUPTED: Final = 130
#: Set to 1 to see the traceback of an unexpected exception.
DEBUG_ENV: Final = "CONSISTENT_DEBUG"


class CommandError(Error):
    """A command stops: ``message`` is the line the user sees, ``status`` the exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``prog: error: message``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, error_line(self.prog, message))


def error_line(prog: str, message: str) -> str:
    """The one line a failed command prints."""
    return f"{prog}: error: {' '.join(message.split())}\n"


def reason(exc: BaseException) -> str:
    """What went wrong, for a person: a server error's message without its number, an OS
    error's text and file name, never a ``repr``."""
    if isinstance(exc, Error):
        text = exc.msg
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror if exc.filename is None else f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text or type(exc).__name__


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is, or happened while handling, a Ctrl-C."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


#: Ctrl-Cs that Python could not raise while :func:`run` ran a handler.
_dropped_interrupts: list[BaseException] = []


def _unraisable(previous: Callable[[sys.UnraisableHookArgs], object]) -> Callable[..., None]:
    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _dropped_interrupts.append(unraisable.exc_value)
        else:
            previous(unraisable)

    return hook


def check_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C came that Python could not raise (see the
    module docstring); for long commands to call between their steps."""
    if _dropped_interrupts:
        _dropped_interrupts.clear()
        raise KeyboardInterrupt


def run(prog: str, handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``handler(args)``, with every failure turned into one line on standard error and an
    exit status (:class:`CommandError`'s own; 130 after Ctrl-C; 1 otherwise)."""
    previous_hook = sys.unraisablehook
    _dropped_interrupts.clear()
    sys.unraisablehook = _unraisable(previous_hook)
    try:
        status = handler(args)
        check_interrupted()
        return status
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        status, message = _outcome(exc)
        if status == EXIT_FAILURE and not isinstance(exc, Error | OSError):
            if os.environ.get(DEBUG_ENV) == "1":
                raise
            message += f" (set {DEBUG_ENV}=1 to see where)"
        sys.stderr.write(
            f"{prog}: interrupted\n" if status == EXIT_INTERRUPTED else error_line(prog, message)
        )
        return status
    finally:
        sys.unraisablehook = previous_hook
        _dropped_interrupts.clear()


def _outcome(exc: BaseException) -> tuple[int, str]:
    if _interrupted(exc):
        return EXIT_INTERRUPTED, ""
    if isinstance(exc, CommandError):
        return exc.status, reason(exc)
    return EXIT_FAILURE, reason(exc)


def loopback_host(text: str) -> str:
    """An ``argparse`` type: a loopback address, 127.0.0.0/8 or ``::1`` (an address, not a
    name: ``localhost`` may resolve to both families, each of which would get its own port)."""
    host = text.strip().removeprefix("[").removesuffix("]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IP address (loopback only: 127.0.0.0/8 or ::1)"
        ) from None
    if not loopback:
        raise argparse.ArgumentTypeError(f"{text} is not a loopback address (127.0.0.0/8 or ::1)")
    return host
