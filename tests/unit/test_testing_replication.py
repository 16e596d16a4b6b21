"""The shared view of a replication topology under test (:mod:`consistent.testing.replication`),
with recorded lag controls instead of servers."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from consistent.testing.loading import load_module
from consistent.testing.replication import Replication, injected_lag


class Controls:
    """Records pause/resume calls, and which replicas are paused at the moment."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.paused: set[int] = set()
        self.most_paused = 0
        self._lock = threading.Lock()

    def pause(self, index: int) -> None:
        with self._lock:
            self.calls.append(("pause", index))
            self.paused.add(index)
            self.most_paused = max(self.most_paused, len(self.paused))

    def resume(self, index: int) -> None:
        with self._lock:
            self.calls.append(("resume", index))
            self.paused.discard(index)


def replication(controls: Controls) -> Replication:
    return Replication(
        name="fake",
        host="127.0.0.1",
        primary_port=3306,
        replica_ports=[3307, 3308, 3309],
        options={"user": "app", "password": "pw", "database": "d"},
        pause=controls.pause,
        resume=controls.resume,
        kill=controls.pause,
        restart=controls.resume,
        catch_up=lambda: None,
    )


def test_addresses_and_credentials() -> None:
    r = replication(Controls())
    assert r.primary == "127.0.0.1:3306"
    assert r.replicas == ["127.0.0.1:3307", "127.0.0.1:3308", "127.0.0.1:3309"]
    assert (r.user, r.password, r.database) == ("app", "pw", "d")


def test_pause_and_resume_every_replica() -> None:
    controls = Controls()
    r = replication(controls)
    r.pause_all()
    assert controls.paused == {0, 1, 2}
    timer = r.resume_all_later(0.01)
    timer.join(5)
    assert controls.paused == set()
    assert controls.calls[3:] == [("resume", 0), ("resume", 1), ("resume", 2)]


def test_injected_lag_pauses_one_replica_at_a_time_and_resumes_all() -> None:
    controls = Controls()
    with injected_lag(controls.pause, controls.resume, 3, 0.005):
        deadline = time.monotonic() + 5
        while len(controls.calls) < 8 and time.monotonic() < deadline:
            time.sleep(0.005)
    assert controls.paused == set()
    assert controls.most_paused == 1
    pauses = [index for call, index in controls.calls if call == "pause"]
    assert pauses[:4] == [0, 1, 2, 0]  # round robin over the replicas
    assert [call for call, _ in controls.calls[:4]] == ["pause", "resume", "pause", "resume"]


def test_load_module_runs_a_file_as_a_module(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("def twice(x):\n    return 2 * x\n")
    module = load_module("consistent_test_loaded_script", script)
    assert module.twice(21) == 42
    assert module.__name__ == "consistent_test_loaded_script"


def test_load_module_with_siblings_imports_the_modules_beside_it(tmp_path: Path) -> None:
    (tmp_path / "consistent_test_sibling.py").write_text("VALUE = 7\n")
    script = tmp_path / "script_with_sibling.py"
    script.write_text("from consistent_test_sibling import VALUE\n")
    with pytest.raises(ImportError):
        load_module("consistent_test_without_siblings", script)
    module = load_module("consistent_test_with_siblings", script, with_siblings=True)
    assert module.VALUE == 7
    assert str(tmp_path) not in sys.path  # only while it ran
