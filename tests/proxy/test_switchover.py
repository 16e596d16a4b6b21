"""Role discovery through the proxy, on real MariaDB: a planned switchover under a
write-then-read workload, and split brain.

Each topology here is its own (a switchover changes it for good), with replicas that keep binary
logs so that one can be promoted.  The workload opens a session per write-then-read pair, as a
web application's pool does after the proxy closes a session."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology, start_topology
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import topology_config

pytestmark = pytest.mark.mariadb

#: Errors a client may see while the primary changes, all of them clean: the old primary
#: refusing a write (1290, read-only), a connection lost (2013), a server gone (2006), a
#: server that refuses connections (2003, once it is dead).
CLEAN = frozenset({1290, 2003, 2006, 2013})


@pytest.fixture
def promotable() -> Iterator[MariaDBTopology]:
    with start_topology(replicas=2, promotable=True) as topology:
        topology.create_database("sw")
        topology.primary.query("CREATE TABLE sw.t (id INT NOT NULL, v INT NOT NULL, KEY (id))")
        topology.wait_for_all()
        yield topology


@pytest.fixture
def proxy(promotable: MariaDBTopology) -> Iterator[ProxyThread]:
    started = ProxyThread(parse(topology_config(promotable)))
    started.start()
    try:
        yield started
    finally:
        started.stop()


def connect(proxy: ProxyThread, **kwargs: Any) -> Any:
    return pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user="app",
        password="app-secret",
        database="sw",
        autocommit=True,
        connect_timeout=5,
        read_timeout=10,
        **kwargs,
    )


def roles(proxy: ProxyThread) -> dict[str, Any]:
    status: dict[str, Any] = proxy.run(proxy.server.status)
    return dict(status["roles"])


def wait_for(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Workload:
    """Sessions that each write a fresh id and read it back (read_own_writes)."""

    def __init__(
        self, proxy: ProxyThread, threads: int = 3, *, persistent: bool = False, first_id: int = 1
    ) -> None:
        self.proxy = proxy
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

    def _run(self) -> None:
        conn: Any = None
        while not self.stop.is_set():
            with self.lock:
                self.next_id += 1
                ident = self.next_id
            try:
                if conn is None:
                    conn = connect(self.proxy)
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO t VALUES (%s, %s)", (ident, ident))
                    with self.lock:
                        self.acknowledged.append(ident)
                        self.oks.append(time.monotonic())
                    cur.execute("SELECT v FROM t WHERE id = %s", (ident,))
                    got = cur.fetchall()
                    if got != ((ident,),):
                        with self.lock:
                            self.violations += 1
                            self.seen_wrong.append((ident, got, time.monotonic()))
            except pymysql.MySQLError as e:
                code = e.args[0] if e.args and isinstance(e.args[0], int) else -1
                with self.lock:
                    self.errors.append((code, str(e)))
                if code in (2006, 2013) and conn is not None:
                    conn.close()
                    conn = None
                time.sleep(0.01)
            if not self.persistent and conn is not None:
                conn.close()
                conn = None
        if conn is not None:
            conn.close()


@pytest.mark.parametrize("persistent", [False, True], ids=["session-per-pair", "long-sessions"])
def test_a_planned_switchover_moves_writes_to_the_new_primary_without_losing_any(
    promotable: MariaDBTopology, proxy: ProxyThread, persistent: bool
) -> None:
    old = f"127.0.0.1:{promotable.primary.port}"
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    assert roles(proxy)["primary"] == old
    with Workload(proxy, persistent=persistent) as work:
        wait_for(lambda: len(work.acknowledged) >= 20)
        promoted_at = promotable.switchover(0)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and roles(proxy)["primary"] == new)
        acknowledged_before = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged_before + 20)
    first_write = min(t for t in work.oks if t > promoted_at) - promoted_at
    print(
        f"switchover ({'long sessions' if persistent else 'a session per pair'}): "
        f"first write acknowledged {first_write * 1e3:.0f} ms after the promotion; "
        f"{len(work.acknowledged)} writes, {len(work.errors)} errors "
        f"({sorted({code for code, _ in work.errors})}), {work.violations} violations"
    )
    assert work.violations == 0, work.seen_wrong[:3]
    assert {code for code, _ in work.errors} <= CLEAN, work.errors[:5]
    status = roles(proxy)
    assert (status["primary"], status["primary_changes"], status["split_brain"]) == (new, 1, False)
    # Every acknowledged write is on the new primary, once: none lost, none applied twice.
    promotable.wait_for_all()
    rows = promotable.primary.query("SELECT id, COUNT(*) AS n FROM sw.t GROUP BY id")
    counts = {int(r["id"]): int(r["n"]) for r in rows}
    assert all(counts.get(ident) == 1 for ident in work.acknowledged)
    assert max(counts.values()) == 1
    # The old primary is a replica now: reads may go there, writes do not.
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@port FROM DUAL FOR UPDATE")
        assert cur.fetchall() == ((promotable.primary.port,),)


def test_two_writable_servers_are_reported_as_split_brain_until_one_is_read_only(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    primary = f"127.0.0.1:{promotable.primary.port}"
    rogue = promotable.replicas[1]
    wait_for(lambda: roles(proxy)["writable"] == [primary])
    with contextlib.closing(rogue.admin()) as conn, conn.cursor() as cursor:
        cursor.execute("STOP SLAVE")
        cursor.execute("RESET SLAVE ALL")
        cursor.execute("SET GLOBAL read_only = 0")
    wait_for(lambda: roles(proxy)["split_brain"] is True)
    status = roles(proxy)
    assert status["primary"] == primary  # writes go nowhere new
    assert sorted(status["writable"]) == sorted([primary, f"127.0.0.1:{rogue.port}"])
    metrics = proxy.server.metrics.render().decode()
    assert "consistent_proxy_split_brain 1.0" in metrics
    rogue.query("SET GLOBAL read_only = 1")
    wait_for(lambda: roles(proxy)["split_brain"] is False)
    assert roles(proxy)["primary_changes"] == 0


def test_a_transaction_open_on_the_old_primary_fails_at_its_next_statement(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t VALUES (900, 900)")
        promotable.primary.query("SET GLOBAL read_only = 1")  # as a switchover starts
        promotable.switchover(0)
        wait_for(lambda: roles(proxy)["primary"] == new)
        with pytest.raises(pymysql.OperationalError) as lost:
            cur.execute("INSERT INTO t VALUES (901, 901)")
        assert lost.value.args[0] in (2006, 2013) or "reconnect" in str(lost.value)
    # Neither write of the transaction exists anywhere: nothing was re-sent.
    promotable.wait_for_all()
    for server in promotable.servers:
        rows = server.query("SELECT COUNT(*) AS n FROM sw.t WHERE id IN (900, 901)")
        assert rows[0]["n"] == 0
    # A new session writes to the new primary.
    with contextlib.closing(connect(proxy)) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (902, 902)")
        cur.execute("SELECT @@port FROM DUAL FOR UPDATE")
        assert cur.fetchall() == ((promotable.primary.port,),)


def test_the_primary_killed_and_a_replica_promoted_takes_the_writes(
    promotable: MariaDBTopology, proxy: ProxyThread
) -> None:
    new = f"127.0.0.1:{promotable.replicas[0].port}"
    with Workload(proxy, persistent=True) as work:
        wait_for(lambda: len(work.acknowledged) >= 20)
    promotable.wait_for_all()  # what was acknowledged reached the replicas before the crash
    before = list(work.acknowledged)
    with Workload(proxy, persistent=True, first_id=work.next_id + 1) as work:
        wait_for(lambda: len(work.acknowledged) >= 5)
        promotable.primary.process.kill()
        promoted_at = promotable.switchover(0, planned=False)
        wait_for(lambda: any(t > promoted_at for t in work.oks) and roles(proxy)["primary"] == new)
        acknowledged = len(work.acknowledged)
        wait_for(lambda: len(work.acknowledged) >= acknowledged + 20)
    assert work.violations == 0, work.seen_wrong[:3]
    assert {code for code, _ in work.errors} <= CLEAN, work.errors[:5]
    assert roles(proxy)["primary"] == new
    promotable.wait_for_all()
    rows = promotable.primary.query("SELECT id, COUNT(*) AS n FROM sw.t GROUP BY id")
    counts = {int(r["id"]): int(r["n"]) for r in rows}
    assert max(counts.values()) == 1  # nothing applied twice
    assert all(counts.get(ident) == 1 for ident in before)
    after = [i for i in work.acknowledged if i > max(before)]
    assert after
    assert all(counts.get(ident) == 1 for ident in after[-20:])
