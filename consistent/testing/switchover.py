"""Switchover tests, whatever form the sessions take: a topology whose replicas can be promoted,
with a table ready, and a write-then-read workload.

Each thread writes a fresh id and reads it back at ``read_own_writes``; it counts every read
that does not see its own write (a violation), every error by errno, and when each write was
acknowledged, so that a test can measure the time from a promotion to the first write the new
primary acknowledged.  ``connect`` opens a session (PyMySQL through the proxy, or the
DB-API wrapper); the table ``t (id INT, v INT)`` must exist in the session's schema.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql

from consistent.testing.mariadb import MariaDBTopology, start_topology

__all__ = ["CLEAN", "Workload", "check_failover", "promotable_topology", "wait_for"]

#: Errors a client may see while the primary changes, all of them clean: the old primary
#: refusing a write (1290, read-only), a connection lost (2013), a server gone (2006), a
#: server that refuses connections (2003, once it is dead).
CLEAN = frozenset({1290, 2003, 2006, 2013})


@contextlib.contextmanager
def promotable_topology(replicas: int = 2) -> Iterator[MariaDBTopology]:
    """A MariaDB topology whose replicas keep binary logs (one can be promoted), with the
    tables ``sw.t`` and ``sw.control`` (``id INT, v INT``) on every server; stopped on exit."""
    with start_topology(replicas=replicas, promotable=True) as topology:
        topology.create_database("sw")
        for table in ("t", "control"):
            topology.primary.query(
                f"CREATE TABLE sw.{table} (id INT NOT NULL, v INT NOT NULL, KEY (id))"
            )
        topology.wait_for_all()
        yield topology


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``check`` until it is true; ``AssertionError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Workload:
    """Sessions that each write a fresh id and read it back (see the module docstring)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        threads: int = 3,
        *,
        persistent: bool = False,
        first_id: int = 1,
        table: str = "t",
    ) -> None:
        self.connect = connect
        #: The table written and read (a control workload uses its own).
        self.table = table
        #: Each thread keeps its session (reconnecting only when the session is gone), rather
        #: than opening one per write-then-read pair.
        self.persistent = persistent
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.next_id = first_id - 1
        self.acknowledged: list[int] = []  # ids whose INSERT returned success
        self.violations = 0
        self.seen_wrong: list[tuple[int, object, float]] = []
        self.errors: list[tuple[int, str]] = []
        self.oks: list[float] = []  # when each write was acknowledged (monotonic)
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Workload:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def first_write_after(self, moment: float) -> float:
        """Seconds from ``moment`` to the first write acknowledged after it."""
        return min(t for t in self.oks if t > moment) - moment

    def codes(self) -> set[int]:
        """The errnos the sessions saw."""
        return {code for code, _ in self.errors}

    def _run(self) -> None:
        conn: Any = None
        while not self.stop.is_set():
            with self.lock:
                self.next_id += 1
                ident = self.next_id
            try:
                if conn is None:
                    conn = self.connect()
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {self.table} VALUES (%s, %s)", (ident, ident))
                    with self.lock:
                        self.acknowledged.append(ident)
                        self.oks.append(time.monotonic())
                    cur.execute(f"SELECT v FROM {self.table} WHERE id = %s", (ident,))
                    got = tuple(tuple(row) for row in cur.fetchall())
                    if got != ((ident,),):
                        with self.lock:
                            self.violations += 1
                            self.seen_wrong.append((ident, got, time.monotonic()))
            except pymysql.MySQLError as e:
                code = e.args[0] if e.args and isinstance(e.args[0], int) else -1
                with self.lock:
                    self.errors.append((code, str(e)))
                if code in (2003, 2006, 2013) and conn is not None:
                    with contextlib.suppress(pymysql.MySQLError):
                        conn.close()  # closing a lost session may say so again
                    conn = None
                time.sleep(0.01)
            if not self.persistent and conn is not None:
                conn.close()
                conn = None
        if conn is not None:
            conn.close()


def check_failover(topology: MariaDBTopology, work: Workload, before: list[int]) -> set[int]:
    """Once replicas caught up with the new primary: nothing was applied twice, every write of
    ``before`` (acknowledged before the failover and replicated) is there, and the last writes
    after it too.  Writes the old primary acknowledged and the promoted replica never applied
    are lost; a read may have missed those only.  Returns the lost ids."""
    topology.wait_for_all()
    rows = topology.primary.query("SELECT id, COUNT(*) AS n FROM sw.t GROUP BY id")
    counts = {int(r["id"]): int(r["n"]) for r in rows}
    lost = {ident for ident in work.acknowledged if ident not in counts}
    print(f"  {len(lost)} writes lost by the failover, {work.violations} reads missed one")
    assert {ident for ident, _, _ in work.seen_wrong} <= lost, work.seen_wrong[:3]
    assert max(counts.values()) == 1  # nothing applied twice
    assert all(counts.get(ident) == 1 for ident in before)
    after = [i for i in work.acknowledged if i > max(before)]
    assert after
    assert all(counts.get(ident) == 1 for ident in after[-20:])
    return lost
