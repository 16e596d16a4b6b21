"""One replication topology under test, whatever runs it: real MariaDB or the emulator.

Scenario suites (DB-API, SQLAlchemy) run the same tests against both servers.  This module
gives them one view of either: where the primary and the replicas listen, the PyMySQL options
for the test's own clean database, and the lag controls (pause / resume / kill / restart a
replica, wait until every replica caught up)::

    @pytest.fixture(params=REPLICATION_BACKENDS)
    def backend(request):
        yield from open_replication(request, MyBackend)   # MyBackend subclasses Replication

``"mariadb"`` takes the ``mariadb_database`` fixture of :mod:`consistent.testing.pytest_plugin`;
``"emulator"`` creates a database on the session's ``emulator_topology`` and resets the
topology's lag controls and drops the database after the test.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import pymysql
import pytest

__all__ = [
    "REPLICATION_BACKENDS",
    "Replication",
    "injected_lag",
    "open_replication",
]

REPLICATION_BACKENDS: Final = [
    pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param("emulator", id="emulator"),
]
"""``params`` for a fixture that runs each test against both servers."""

R = TypeVar("R", bound="Replication")


@dataclass(frozen=True)
class Replication:
    """A primary with replicas on one host, and one clean database, whatever runs them."""

    name: str
    host: str
    primary_port: int
    replica_ports: list[int]
    #: PyMySQL options shared by every server, ``host`` and ``port`` aside (user, password,
    #: database…).
    options: dict[str, Any]
    pause: Callable[[int], None]
    resume: Callable[[int], None]
    kill: Callable[[int], None]
    restart: Callable[[int], None]
    catch_up: Callable[[], None]
    #: Delay a replica's applier by whole seconds (``MASTER_DELAY`` / ``SOURCE_DELAY``).
    delay: Callable[[int, int], None] | None = None
    #: Stop a replica's process (SIGSTOP; the primary's for ``None``) and continue it; real
    #: servers only (``None`` on the emulator, which runs in this process).
    freeze: Callable[[int | None], None] | None = None
    thaw: Callable[[int | None], None] | None = None

    @property
    def primary(self) -> str:
        """``host:port`` of the primary."""
        return f"{self.host}:{self.primary_port}"

    @property
    def replicas(self) -> list[str]:
        """``host:port`` of every replica, in order (index ``i`` is what ``pause(i)`` stops)."""
        return [f"{self.host}:{port}" for port in self.replica_ports]

    @property
    def user(self) -> str:
        return str(self.options["user"])

    @property
    def password(self) -> str:
        return str(self.options["password"])

    @property
    def database(self) -> str:
        return str(self.options["database"])

    def primary_query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the primary as the application user, outside the middleware."""
        with (
            contextlib.closing(
                pymysql.connect(
                    host=self.host, port=self.primary_port, autocommit=True, **self.options
                )
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(sql, args)
            return list(cur.fetchall())

    def pause_all(self) -> None:
        """Stop every replica's applier."""
        for index in range(len(self.replica_ports)):
            self.pause(index)

    def resume_all(self) -> None:
        """Start every replica's applier again."""
        for index in range(len(self.replica_ports)):
            self.resume(index)

    def resume_all_later(self, delay: float = 0.3) -> threading.Timer:
        """:meth:`resume_all` in ``delay`` seconds, from a timer thread (started; join it)."""
        timer = threading.Timer(delay, self.resume_all)
        timer.start()
        return timer

    def release(self) -> None:
        """Close what the test opened through this object (subclasses that open connections
        or engines override it); called after the test."""

    def injected_lag(self, period: float = 0.05) -> contextlib.AbstractContextManager[None]:
        """:func:`injected_lag` on this topology's replicas."""
        return injected_lag(self.pause, self.resume, len(self.replica_ports), period)


@contextlib.contextmanager
def injected_lag(
    pause: Callable[[int], None], resume: Callable[[int], None], replicas: int, period: float
) -> Iterator[None]:
    """Keep one of ``replicas`` replicas' appliers stopped at any time, switching every
    ``period`` seconds, so that a commit is missing from some replica for tens of
    milliseconds.  Every replica runs again when the block ends."""
    stop = threading.Event()

    def run() -> None:
        turn = 0
        while not stop.is_set():
            paused = turn % replicas
            pause(paused)
            stop.wait(period)
            resume(paused)
            turn += 1

    thread = threading.Thread(target=run, name="lag-injector", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _without_address(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in ("host", "port")}


def _replication(kind: type[R], name: str, topology: Any, params: Any) -> R:
    """``kind`` over a running topology (either kind: they share the lag-control methods) and
    the connection parameters of the test's database on its primary."""
    return kind(
        name=name,
        host=params.host,
        primary_port=params.port,
        replica_ports=[r.port for r in topology.replicas],
        options={k: v for k, v in params.pymysql_kwargs().items() if k not in ("host", "port")},
        pause=topology.pause,
        resume=topology.resume,
        kill=topology.kill,
        restart=topology.restart,
        catch_up=topology.wait_for_all,
        delay=topology.delay,
        freeze=getattr(topology, "freeze", None),
        thaw=getattr(topology, "thaw", None),
    )


def _mariadb(request: pytest.FixtureRequest, kind: type[R]) -> R:
    database = request.getfixturevalue("mariadb_database")
    return _replication(kind, "mariadb", database.topology, database.params())


def _emulator(request: pytest.FixtureRequest, kind: type[R]) -> R:
    topology = request.getfixturevalue("emulator_topology")
    name = f"t_{secrets.token_hex(4)}"
    topology.create_database(name)
    request.addfinalizer(lambda: (topology.reset_lag(), topology.drop_database(name)))
    return _replication(kind, "emulator", topology, topology.connection_params(None, name))


_OPENERS: Final[dict[str, Callable[[pytest.FixtureRequest, type[Any]], Any]]] = {
    "mariadb": _mariadb,
    "emulator": _emulator,
}


def open_replication(request: pytest.FixtureRequest, kind: type[R]) -> Iterator[R]:
    """For a fixture to ``yield from``: the topology ``request.param`` names (one of
    :data:`REPLICATION_BACKENDS`) as a ``kind``, with a clean database of its own, and
    :meth:`Replication.release` called once the test is done."""
    opener: Callable[[pytest.FixtureRequest, type[R]], R] = _OPENERS[request.param]
    replication = opener(request, kind)
    try:
        yield replication
    finally:
        replication.release()
