"""The demo's parts in child processes: started, stopped on any exit, never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consistent.demo.processes import ChildFailed, Children

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _importable_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawned child imports its target by module name (``tests.demo.test_processes``):
    the checkout must be on the path it inherits, as it is not when only the package is
    installed."""
    monkeypatch.syspath_prepend(str(ROOT))


def _ready_then_wait(channel: Any, stop: Any) -> None:
    channel.send(("ready", os.getpid()))
    stop.wait()
    channel.send(("done", "stopped"))


def _ignores_stop(channel: Any, stop: Any) -> None:
    channel.send(("ready", os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)


def _fails(channel: Any, stop: Any) -> None:
    raise RuntimeError("no such server")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _eventually(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for child in map(int, children):
            found |= {child} | _descendants(child)
    return found


def test_a_child_answers_and_stops_when_asked() -> None:
    with Children() as children:
        child = children.start("part", _ready_then_wait)
        pid = child.receive(60)
        assert pid == child.pid != os.getpid()
        assert _alive(pid)
        assert child.finish(30) == "stopped"
    assert not _alive(pid)


def test_an_error_in_the_with_block_stops_every_child() -> None:
    pids: list[int] = []

    def run() -> None:
        with Children() as children:
            for name in ("topology", "proxy"):
                pids.append(children.start(name, _ready_then_wait).receive(60))
            raise KeyError("the parent failed")

    with pytest.raises(KeyError):
        run()
    assert len(pids) == 2
    assert not any(_alive(pid) for pid in pids)


def test_a_child_that_ignores_the_request_and_sigterm_is_killed() -> None:
    with Children() as children:
        pid = children.start("stubborn", _ignores_stop).receive(60)
    assert not _alive(pid)


def test_a_failing_child_is_reported_with_its_error() -> None:
    with Children() as children:
        child = children.start("topology", _fails)
        with pytest.raises(ChildFailed, match="topology failed: RuntimeError: no such server"):
            child.receive(60)
        assert _eventually(lambda: not child.process.is_alive())
        with pytest.raises(ChildFailed, match="topology exited"):
            children.check()


def test_children_die_with_a_parent_killed_outright(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from consistent.demo.processes import Children
        from test_processes import _ready_then_wait
        if __name__ == "__main__":
            children = Children()
            pid = children.start("part", _ready_then_wait).receive(60)
            print(pid, flush=True)
            time.sleep(600)
        """
    )
    path = tmp_path / "parent.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
    finally:
        parent.kill()
        parent.wait(30)
    assert _eventually(lambda: not _alive(child))


@pytest.mark.timeout(240)
def test_ctrl_c_in_the_demo_stops_every_part_and_exits_130(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "consistent.cli", "demo", "--skip-analysis"]
    options = ["--no-progress", "--seconds", "120", "--sessions", "8", "--out", str(tmp_path)]
    demo = subprocess.Popen(
        [*command, *options],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        # the topology, the proxy and one client process per path
        assert _eventually(lambda: len(_descendants(demo.pid)) >= 4, 120), _descendants(demo.pid)
        parts = _descendants(demo.pid)
        time.sleep(1)
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    assert demo.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    # multiprocessing's resource tracker, a child too, ends when it sees the others gone
    assert _eventually(lambda: not [pid for pid in parts if _alive(pid)], 10), [
        pid for pid in parts if _alive(pid)
    ]
