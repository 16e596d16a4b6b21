"""Running the ``consistent`` command as a user does: in a process of its own, from this
checkout, reading what it prints and sending it Ctrl-C once it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
#: The status of a command stopped by Ctrl-C (128 + SIGINT).
INTERRUPTED = 130
#: Imported before the command runs, to take PySpark away (``None`` in ``sys.modules`` is how
#: Python marks a module that cannot be imported).
WITHOUT_PYSPARK = "import sys; sys.modules['pyspark'] = None"


@dataclass(frozen=True)
class Finished:
    """How a command ended."""

    status: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the checkout first on the path, no debug switch."""
    env = {k: v for k, v in os.environ.items() if k != "CONSISTENT_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def command(argv: Sequence[str], prelude: str | None = None) -> list[str]:
    """The command line of ``consistent ARGV`` (after ``prelude``, Python run first)."""
    if prelude is None:
        return [sys.executable, "-m", "consistent.cli", *argv]
    code = f"{prelude}\nfrom consistent.cli import main\nraise SystemExit(main())"
    return [sys.executable, "-c", code, *argv]


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    prelude: str | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> Finished:
    """Run ``consistent ARGV`` to its end."""
    done = subprocess.run(
        command(argv, prelude),
        capture_output=True,
        text=True,
        env=environment(env),
        cwd=cwd or ROOT,
        timeout=timeout,
        check=False,
    )
    return Finished(done.returncode, done.stdout, done.stderr)


class _Drain:
    """Reads a pipe to its end on a thread (so that no pipe fills up and blocks the command),
    and tells when a text has appeared in it."""

    def __init__(self, pipe: IO[str] | None) -> None:
        assert pipe is not None
        self._pipe = pipe
        self._text: list[str] = []
        self._grew = threading.Condition()
        self._ended = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._pipe:
            with self._grew:
                self._text.append(line)
                self._grew.notify_all()
        with self._grew:
            self._ended = True
            self._grew.notify_all()

    def wait_for(self, marker: str, timeout: float) -> bool:
        with self._grew:
            return self._grew.wait_for(
                lambda: self._ended or marker in "".join(self._text), timeout
            ) and marker in "".join(self._text)

    def text(self) -> str:
        self._thread.join(30)
        return "".join(self._text)


def interrupt(
    argv: Sequence[str],
    *,
    once: str,
    on: str = "stdout",
    env: Mapping[str, str] | None = None,
    start_timeout: float = 120,
    stop_timeout: float = 120,
) -> Finished:
    """Start ``consistent ARGV``, send it SIGINT once ``once`` appears on ``on`` (``stdout``
    or ``stderr``), and wait for it to end."""
    process = subprocess.Popen(
        command(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(env),
        cwd=ROOT,
    )
    try:
        streams = {"stdout": _Drain(process.stdout), "stderr": _Drain(process.stderr)}
        started = streams[on].wait_for(once, start_timeout)
        assert started, f"{once!r} never appeared on {on}: {streams[on].text()[-2000:]}"
        process.send_signal(signal.SIGINT)
        status = process.wait(stop_timeout)
        return Finished(status, streams["stdout"].text(), streams["stderr"].text())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def assert_one_error_line(result: Finished, status: int, prog: str, *fragments: str) -> str:
    """The command failed as a command should: ``status``, one line on stderr in the common
    format naming ``fragments``, no traceback; returns the line."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.status == status, (result.status, result.stderr)
    assert len(result.stderr_lines) == 1, result.stderr
    (line,) = result.stderr_lines
    assert line.startswith(f"{prog}: error: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line
