"""The demo's workload: sessions that write, then read what they wrote, and check it.

Every session owns one row of ``demo.kv``.  Each round it writes a new value to its row, then
reads the row back (twice, the second time after a short pause) and compares the value it got
with the value it wrote: that comparison is the *ground truth* of read-your-writes, judged on
the data, independently of the traces and of the routing policy.  Each read also returns
``@@port``, which says which server answered (a replica or the primary).

Sessions run on threads, one connection each, through one of two paths: the DB-API wrapper
(``consistent.dbapi``) or the proxy (plain PyMySQL with ``SET @@consistent_level``).  The
bookkeeping (:class:`SessionTally`, :class:`Totals`, :func:`plan_sessions`,
:func:`is_stale`) is pure, so it is tested without servers.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Protocol

__all__ = [
    "DATABASE",
    "GUARANTEED_LEVELS",
    "LEVELS",
    "PATHS",
    "SessionPlan",
    "SessionTally",
    "Totals",
    "WorkloadSettings",
    "is_stale",
    "plan_sessions",
    "run_session",
    "setup_statements",
    "totals_by",
]

logger = logging.getLogger(__name__)

#: Consistency levels, weakest first.
LEVELS: Final = ("eventual", "read_own_writes", "read_all_writes", "read_latest")
#: Levels that promise a session reads its own writes.
GUARANTEED_LEVELS: Final = frozenset(LEVELS[1:])
#: How a session reaches the database.
PATHS: Final = ("dbapi", "proxy")
#: The schema the demo writes to.
DATABASE: Final = "demo"
_TABLE: Final = f"{DATABASE}.kv"
_WRITE: Final = f"UPDATE {_TABLE} SET v = %s WHERE k = %s"
_READ: Final = f"SELECT v, @@port FROM {_TABLE} WHERE k = %s"


class Cursor(Protocol):
    """The part of a PEP 249 cursor a session uses."""

    def execute(self, query: str, args: Any = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """The part of a PEP 249 connection a session uses."""

    def cursor(self) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """One session: its row key, level and path."""

    key: int
    level: str
    path: str


@dataclass(frozen=True, slots=True)
class WorkloadSettings:
    """How sessions behave: pauses are drawn uniformly up to these many seconds."""

    #: Pause between a session's rounds (think time).
    think: float = 0.25
    #: Pause between the first and the second read of a round.
    reread: float = 0.02
    #: Reads after each write.
    reads_per_write: int = 2


def plan_sessions(
    count: int, levels: Sequence[str] = LEVELS, paths: Sequence[str] = PATHS
) -> list[SessionPlan]:
    """``count`` sessions spread round-robin over every (level, path) pair, keys 1..count."""
    if count < 1:
        raise ValueError("at least one session")
    pairs = [(level, path) for level in levels for path in paths]
    return [
        SessionPlan(key=i + 1, level=pairs[i % len(pairs)][0], path=pairs[i % len(pairs)][1])
        for i in range(count)
    ]


def is_stale(written: int, seen: object) -> bool:
    """Whether a read of the session's row missed its last write: it returned an older value
    (values only grow) or no row at all."""
    if seen is None:
        return True
    return int(str(seen)) < written


class SessionTally:
    """Counters of one session, updated by its own thread only and read by the display (plain
    ints: a reader sees a recent value, which is all a progress display needs)."""

    __slots__ = ("errors", "plan", "reads", "replica_reads", "stale", "stale_on_replica", "writes")

    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        self.writes = 0
        self.reads = 0
        self.replica_reads = 0
        self.stale = 0
        self.stale_on_replica = 0
        self.errors = 0

    def record_read(self, *, on_replica: bool, stale: bool) -> None:
        """One read, where it ran and whether it missed the session's write."""
        self.reads += 1
        self.replica_reads += on_replica
        self.stale += stale
        self.stale_on_replica += stale and on_replica

    def snapshot(self) -> Totals:
        """The counters as a :class:`Totals` of one session."""
        return Totals(
            sessions=1,
            writes=self.writes,
            reads=self.reads,
            replica_reads=self.replica_reads,
            stale=self.stale,
            stale_on_replica=self.stale_on_replica,
            errors=self.errors,
        )


@dataclass(frozen=True, slots=True)
class Totals:
    """Counters summed over sessions."""

    sessions: int = 0
    writes: int = 0
    reads: int = 0
    replica_reads: int = 0
    stale: int = 0
    stale_on_replica: int = 0
    errors: int = 0

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def statements(self) -> int:
        """Statements sent (writes and reads)."""
        return self.writes + self.reads

    @property
    def replica_share(self) -> float | None:
        """Share of reads a replica answered."""
        return self.replica_reads / self.reads if self.reads else None


def totals_by(
    tallies: Iterable[SessionTally], key: Callable[[SessionPlan], str]
) -> dict[str, Totals]:
    """Sum the sessions' counters per ``key(plan)`` (e.g. by level, or by level and path)."""
    summed: dict[str, Totals] = {}
    for tally in tallies:
        name = key(tally.plan)
        summed[name] = summed.get(name, Totals()) + tally.snapshot()
    return summed


def setup_statements(keys: Iterable[int]) -> list[str]:
    """The schema and one row per session, value 0 (run on the primary before the sessions)."""
    rows = ", ".join(f"({int(k)}, 0)" for k in keys)
    return [
        f"CREATE DATABASE IF NOT EXISTS {DATABASE}",
        f"DROP TABLE IF EXISTS {_TABLE}",
        f"CREATE TABLE {_TABLE} (k INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {_TABLE} (k, v) VALUES {rows}",
    ]


def _one(cursor: Cursor, sql: str, args: Any) -> Any:
    cursor.execute(sql, args)
    return cursor.fetchone()


def run_session(
    tally: SessionTally,
    connect: Callable[[SessionPlan], Connection],
    replica_ports: Mapping[int, str],
    stop: threading.Event,
    settings: WorkloadSettings | None = None,
    *,
    rng: random.Random | None = None,
) -> None:
    """Write and read back until ``stop`` is set, counting into ``tally``.  A failed
    statement is counted and the session reconnects; it never raises."""
    settings = settings or WorkloadSettings()
    rng = rng or random.Random(tally.plan.key)
    key = tally.plan.key
    value = 0
    connection: Connection | None = None
    while not stop.is_set():
        try:
            if connection is None:
                connection = connect(tally.plan)
            cursor = connection.cursor()
            try:
                value += 1
                cursor.execute(_WRITE, (value, key))
                tally.writes += 1
                for index in range(settings.reads_per_write):
                    if index:
                        stop.wait(rng.uniform(0, settings.reread))
                    row = _one(cursor, _READ, (key,))
                    seen, port = (row[0], row[1]) if row else (None, None)
                    on_replica = port is not None and int(port) in replica_ports
                    tally.record_read(on_replica=on_replica, stale=is_stale(value, seen))
            finally:
                cursor.close()
        except Exception as exc:  # counted and shown; the session carries on
            tally.errors += 1
            logger.info("session %d (%s, %s): %s", key, tally.plan.level, tally.plan.path, exc)
            if connection is not None:
                _close_quietly(connection)
                connection = None
            stop.wait(0.2)
            continue
        stop.wait(rng.uniform(0, settings.think))
    if connection is not None:
        _close_quietly(connection)


def _close_quietly(connection: Connection) -> None:
    try:
        connection.close()
    except Exception:  # the connection is being abandoned either way
        logger.debug("closing a session connection failed", exc_info=True)


def start_sessions(
    tallies: Sequence[SessionTally],
    connect: Callable[[SessionPlan], Connection],
    replica_ports: Mapping[int, str],
    stop: threading.Event,
    settings: WorkloadSettings | None = None,
) -> list[threading.Thread]:
    """One daemon thread per session, started; join them after setting ``stop``."""
    threads = [
        threading.Thread(
            target=run_session,
            args=(tally, connect, replica_ports, stop, settings),
            name=f"demo-session-{tally.plan.key}",
            daemon=True,
        )
        for tally in tallies
    ]
    for thread in threads:
        thread.start()
    return threads


def wait_until(
    deadline: float, stop: threading.Event, tick: Callable[[], None], every: float
) -> None:
    """Call ``tick`` every ``every`` seconds until ``deadline`` (monotonic) or ``stop``."""
    while not stop.is_set():
        tick()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        stop.wait(min(every, remaining))
