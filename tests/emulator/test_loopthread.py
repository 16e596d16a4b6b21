"""The life cycle shared by the emulator's threaded runners (:mod:`consistent.emulator.loopthread`):
what runs on the loop, what start() and stop() report, and what misuse raises."""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar

import pytest

from consistent.emulator.loopthread import LoopThread
from consistent.emulator.replication.threaded import TopologyThread
from consistent.emulator.replication.topology import TopologyError, TopologySpec


class Recorder(LoopThread):
    """Notes which thread ran the hooks, and fails to open when told to."""

    _label: ClassVar[str] = "recorder"

    def __init__(self, fail: bool = False) -> None:
        super().__init__(timeout=5.0)
        self.fail = fail
        self.events: list[tuple[str, str]] = []
        self.value: int | None = None

    async def _open(self) -> None:
        self.events.append(("open", threading.current_thread().name))
        if self.fail:
            raise ValueError("cannot open")
        self.value = 41

    async def _close(self) -> None:
        self.events.append(("close", threading.current_thread().name))


def test_hooks_run_on_the_loop_thread_and_calls_reach_it() -> None:
    with Recorder() as runner:
        assert runner.events == [("open", "consistent-recorder")]

        async def on_loop() -> tuple[int, str]:
            await asyncio.sleep(0)
            return (runner.value or 0) + 1, threading.current_thread().name

        assert runner.call(on_loop()) == (42, "consistent-recorder")
        assert runner.run(lambda: threading.current_thread().name) == "consistent-recorder"
    assert runner.events == [("open", "consistent-recorder"), ("close", "consistent-recorder")]


def test_a_startup_error_is_raised_by_start() -> None:
    runner = Recorder(fail=True)
    with pytest.raises(ValueError, match="cannot open"):
        runner.start()
    assert runner.events == [("open", "consistent-recorder")]  # _close runs only after _open
    runner.stop()


def test_misuse_raises_the_runner_error() -> None:
    runner = Recorder()
    with pytest.raises(RuntimeError, match="the recorder is not running"):
        _ = runner.loop
    runner.start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            runner.start()
    finally:
        runner.stop()
    runner.stop()  # stopping twice is harmless


def test_a_stopped_runner_starts_again() -> None:
    runner = Recorder()
    runner.start()
    runner.stop()
    runner.start()
    try:
        assert runner.run(lambda: runner.value) == 41
    finally:
        runner.stop()
    assert [event for event, _ in runner.events] == ["open", "close", "open", "close"]


def test_a_slow_call_times_out() -> None:
    with Recorder() as runner, pytest.raises(TimeoutError):
        runner.call(asyncio.sleep(5), timeout=0.05)


def test_the_topology_runner_raises_topology_errors() -> None:
    thread = TopologyThread(TopologySpec.primary_with_replicas(1))
    with pytest.raises(TopologyError, match="the topology is not running"):
        _ = thread.topology
    with pytest.raises(TopologyError, match="the topology is not running"):
        _ = thread.loop


@pytest.mark.parametrize("fast", [False, True])
def test_the_loop_is_uvloop_only_when_asked(fast: bool) -> None:
    uvloop = pytest.importorskip("uvloop") if fast else None
    runner = Recorder()
    runner.fast_loop = fast
    with runner:
        loop_type = runner.run(lambda: type(asyncio.get_running_loop()))
    if uvloop is not None:
        assert issubclass(loop_type, uvloop.Loop)
    else:
        assert loop_type.__module__.startswith("asyncio")
