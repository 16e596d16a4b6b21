"""The workload's bookkeeping, and one session against a scripted connection."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.demo.workload import (
    LEVELS,
    PATHS,
    SessionPlan,
    SessionTally,
    Totals,
    WorkloadSettings,
    is_stale,
    plan_sessions,
    run_session,
    setup_statements,
    totals_by,
)


@given(st.integers(min_value=1, max_value=200))
def test_sessions_are_spread_evenly_over_every_level_and_path(count: int) -> None:
    plans = plan_sessions(count)
    assert [p.key for p in plans] == list(range(1, count + 1))
    per_pair = Counter((p.level, p.path) for p in plans)
    assert set(per_pair) <= {(level, path) for level in LEVELS for path in PATHS}
    assert max(per_pair.values()) - min(per_pair.values()) <= 1
    if count >= len(LEVELS) * len(PATHS):
        assert len(per_pair) == len(LEVELS) * len(PATHS)


def test_no_sessions_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        plan_sessions(0)


@pytest.mark.parametrize(
    ("written", "seen", "stale"),
    [(3, 3, False), (3, 2, True), (3, 4, False), (1, None, True), (5, "5", False), (5, "4", True)],
)
def test_a_read_is_stale_when_it_misses_the_last_write(
    written: int, seen: object, stale: bool
) -> None:
    assert is_stale(written, seen) is stale


def test_tallies_add_up_per_key() -> None:
    first = SessionTally(SessionPlan(1, "eventual", "dbapi"))
    second = SessionTally(SessionPlan(2, "eventual", "proxy"))
    third = SessionTally(SessionPlan(3, "read_latest", "proxy"))
    first.writes = 2
    first.record_read(on_replica=True, stale=True)
    first.record_read(on_replica=False, stale=False)
    second.writes = 1
    second.record_read(on_replica=True, stale=False)
    third.errors = 1
    by_level = totals_by([first, second, third], lambda plan: plan.level)
    assert by_level["eventual"] == Totals(
        sessions=2, writes=3, reads=3, replica_reads=2, stale=1, stale_on_replica=1, errors=0
    )
    assert by_level["eventual"].statements == 6
    assert by_level["eventual"].replica_share == pytest.approx(2 / 3)
    assert by_level["read_latest"] == Totals(sessions=1, errors=1)
    assert by_level["read_latest"].replica_share is None
    assert set(totals_by([first, second, third], lambda plan: plan.path)) == {"dbapi", "proxy"}


def test_setup_creates_one_row_per_session() -> None:
    statements = setup_statements([1, 2, 3])
    assert statements[-1].endswith("VALUES (1, 0), (2, 0), (3, 0)")
    assert any("CREATE TABLE" in s for s in statements)


class ScriptedCursor:
    """Answers reads from ``answers`` (value, port) in turn; records every statement."""

    def __init__(self, owner: ScriptedConnection) -> None:
        self.owner = owner
        self.row: tuple[Any, ...] | None = None

    def execute(self, query: str, args: Any = None) -> int:
        self.owner.log.append((query, args))
        if query.startswith("UPDATE"):
            self.owner.written = args[0]
        else:
            answer = self.owner.answers.pop(0)
            self.row = answer(self.owner.written) if answer else None
            if not self.owner.answers:
                self.owner.stop.set()
        return 1

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row

    def close(self) -> None:
        pass


class ScriptedConnection:
    def __init__(self, answers: list[Any], stop: threading.Event) -> None:
        self.answers = answers
        self.stop = stop
        self.log: list[tuple[str, Any]] = []
        self.written = 0
        self.closed = False

    def cursor(self) -> ScriptedCursor:
        return ScriptedCursor(self)

    def close(self) -> None:
        self.closed = True


def test_a_session_counts_reads_where_they_ran_and_whether_they_were_stale() -> None:
    stop = threading.Event()
    replica, primary = 3307, 3306
    answers = [
        lambda w: (w, replica),  # fresh, on a replica
        lambda w: (w - 1, replica),  # stale, on a replica
        lambda w: (w, primary),  # fresh, on the primary
        None,  # no row at all: stale
    ]
    connection = ScriptedConnection(answers, stop)
    tally = SessionTally(SessionPlan(7, "eventual", "dbapi"))
    run_session(
        tally,
        lambda plan: connection,
        {replica: "replica1"},
        stop,
        WorkloadSettings(think=0, reread=0, reads_per_write=2),
    )
    assert tally.snapshot() == Totals(
        sessions=1, writes=2, reads=4, replica_reads=2, stale=2, stale_on_replica=1, errors=0
    )
    writes = [args for sql, args in connection.log if sql.startswith("UPDATE")]
    assert writes == [(1, 7), (2, 7)]
    assert connection.closed


def test_a_failing_session_counts_the_error_and_reconnects() -> None:
    stop = threading.Event()
    attempts: list[int] = []

    def connect(plan: SessionPlan) -> ScriptedConnection:
        attempts.append(plan.key)
        if len(attempts) == 1:
            raise OSError("refused")
        return ScriptedConnection([lambda w: (w, 1)], stop)

    tally = SessionTally(SessionPlan(1, "read_latest", "proxy"))
    run_session(tally, connect, {}, stop, WorkloadSettings(think=0, reread=0, reads_per_write=1))
    assert tally.errors == 1
    assert len(attempts) == 2
    assert tally.snapshot().reads == 1
    assert tally.stale == 0
