"""SQLAlchemy over ``mysql+consistent``: one fixture, two topologies.

The scenarios run against real MariaDB replication and against the emulator's topology through
the same :class:`Backend`.  The dialect is registered here by name, as an installed package
registers it through its ``sqlalchemy.dialects`` entry point.
"""

from __future__ import annotations

import contextlib
import importlib
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pymysql
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry

from consistent.policy import ReplicaKnowledge

registry.register("mysql.consistent", "consistent.sqlalchemy", "ConsistentDialect")
registry.register("mariadb.consistent", "consistent.sqlalchemy", "ConsistentMariaDBDialect")


@dataclass
class Backend:
    """A primary with replicas and one clean database, whatever runs them."""

    name: str
    host: str
    primary_port: int
    replica_ports: list[int]
    user: str
    password: str
    database: str
    pause: Callable[[int], None]
    resume: Callable[[int], None]
    catch_up: Callable[[], None]
    engines: list[sa.Engine] = field(default_factory=list)

    @property
    def replicas(self) -> list[str]:
        return [f"{self.host}:{port}" for port in self.replica_ports]

    def _auth(self) -> str:
        password = f":{quote(self.password, safe='')}" if self.password else ""
        return f"{quote(self.user, safe='')}{password}"

    def url(self, driver: str = "mysql+consistent", **options: Any) -> str:
        """A URL for the primary; ``mysql+consistent`` lists the replicas as query options."""
        query = []
        if driver.endswith("+consistent"):
            query = [f"replica={r}" for r in self.replicas]
        query += [f"{k}={v}" for k, v in options.items()]
        tail = f"?{'&'.join(query)}" if query else ""
        return f"{driver}://{self._auth()}@{self.host}:{self.primary_port}/{self.database}{tail}"

    def replica_url(self, index: int = 0) -> str:
        """A plain ``mysql+pymysql`` URL for one replica (the naive read/write split)."""
        port = self.replica_ports[index]
        return f"mysql+pymysql://{self._auth()}@{self.host}:{port}/{self.database}"

    def engine(self, url: str | None = None, **kwargs: Any) -> sa.Engine:
        """An engine closed after the test.  ``mysql+consistent`` engines get their own
        replica knowledge, so no test learns from another's replicas."""
        url = url or self.url()
        if "+consistent" in url:
            connect_args = kwargs.setdefault("connect_args", {})
            connect_args.setdefault("knowledge", ReplicaKnowledge())
        engine = sa.create_engine(url, **kwargs)
        self.engines.append(engine)
        return engine

    def primary_query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the primary, outside the middleware."""
        with (
            contextlib.closing(
                pymysql.connect(
                    host=self.host,
                    port=self.primary_port,
                    user=self.user,
                    password=self.password,
                    database=self.database,
                    autocommit=True,
                )
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(sql, args)
            return list(cur.fetchall())

    def dispose_all(self) -> None:
        for engine in self.engines:
            engine.dispose()


@contextlib.contextmanager
def injected_lag(backend: Backend, period: float = 0.05) -> Iterator[None]:
    """Keep one replica's applier stopped at any time, switching every ``period`` seconds, so
    that a commit is missing from some replica for tens of milliseconds."""
    stop = threading.Event()

    def run() -> None:
        turn = 0
        while not stop.is_set():
            paused = turn % len(backend.replica_ports)
            backend.pause(paused)
            stop.wait(period)
            backend.resume(paused)
            turn += 1

    thread = threading.Thread(target=run, name="lag-injector", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _mariadb_backend(request: pytest.FixtureRequest) -> Backend:
    database = request.getfixturevalue("mariadb_database")
    topology = database.topology
    params = database.params()
    return Backend(
        name="mariadb",
        host=params.host,
        primary_port=params.port,
        replica_ports=[r.port for r in topology.replicas],
        user=params.user,
        password=params.password,
        database=database.name,
        pause=topology.pause,
        resume=topology.resume,
        catch_up=topology.wait_for_all,
    )


@pytest.fixture(scope="session")
def sqla_emulator_topology() -> Iterator[Any]:
    """An emulated primary and two replicas for the run."""
    emulator = importlib.import_module("consistent.emulator")
    topology = emulator.start_topology(replicas=2)
    try:
        yield topology
    finally:
        topology.close()


def _emulator_backend(request: pytest.FixtureRequest) -> Backend:
    topology = request.getfixturevalue("sqla_emulator_topology")
    name = f"t_{secrets.token_hex(4)}"
    topology.create_database(name)
    request.addfinalizer(lambda: (topology.reset_lag(), topology.drop_database(name)))
    params = topology.connection_params(None, name)
    return Backend(
        name="emulator",
        host=params.host,
        primary_port=params.port,
        replica_ports=[r.port for r in topology.replicas],
        user=params.user,
        password=params.password,
        database=name,
        pause=topology.pause,
        resume=topology.resume,
        catch_up=topology.wait_for_all,
    )


BACKENDS = [
    pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param("emulator", id="emulator"),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The topology under test, with a clean database."""
    factory = _mariadb_backend if request.param == "mariadb" else _emulator_backend
    backend = factory(request)
    try:
        yield backend
    finally:
        backend.dispose_all()
