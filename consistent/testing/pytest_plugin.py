"""pytest fixtures for tests against a real MariaDB replication topology.

Register with ``pytest_plugins = ["consistent.testing.pytest_plugin"]``.

* ``mariadb_topology`` (session): one primary and two replicas for the whole run.  When
  ``mariadbd`` is not installed the tests are skipped with the reason, except under ``CI=true``,
  where a missing server fails them: CI must never pass by skipping the real-server tests.
* ``mariadb_database`` (function): a freshly created database, present on every replica before
  the test starts and dropped after it.
* After every test that used the topology, lag controls (delay, pause, kill) are undone, so no
  test sees another's replica state.
* ``emulator_topology`` (session): the emulator's own primary and two replicas
  (:func:`consistent.emulator.start_topology`), in a background thread, for the whole run.
* ``black_hole`` (function): a loopback listener that accepts connections and never answers
  (:class:`consistent.testing.blackhole.BlackHole`), closed after the test.

Tests that use the topology get the ``mariadb`` marker automatically, so ``-m "not mariadb"``
deselects them even when a test forgot the marker.
"""

from __future__ import annotations

import importlib
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from consistent.testing.blackhole import BlackHole
from consistent.testing.mariadb import (
    ConnectionParams,
    MariaDBBinaries,
    MariaDBServer,
    MariaDBTopology,
    start_topology,
)

if TYPE_CHECKING:
    from consistent.emulator.replication.threaded import TopologyThread

__all__ = [
    "CleanDatabase",
    "black_hole",
    "emulator_topology",
    "mariadb_database",
    "mariadb_topology",
]

_TOPOLOGY_FIXTURES = frozenset({"mariadb_topology", "mariadb_database"})
_SUMMARY_KEY = pytest.StashKey[str]()
_REPLICAS = 2


def _running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class CleanDatabase:
    """A database created for one test; ``connect()`` opens application connections to it."""

    topology: MariaDBTopology
    name: str

    def params(self, server: MariaDBServer | None = None) -> ConnectionParams:
        return self.topology.connection_params(server, self.name)

    def connect(self, server: MariaDBServer | None = None, **kwargs: Any) -> Any:
        """A PyMySQL connection to this database on ``server`` (default: the primary)."""
        return self.topology.connect(server, self.name, **kwargs)


@pytest.fixture(scope="session")
def mariadb_topology(request: pytest.FixtureRequest) -> Iterator[MariaDBTopology]:
    """One MariaDB primary and two replicas on 127.0.0.1, for the whole session."""
    if MariaDBBinaries.find() is None:
        reason = (
            "mariadbd / mariadb-install-db not found: install Debian's mariadb-server "
            "(make system-deps) to run the real-server tests"
        )
        if _running_in_ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    topology = start_topology(replicas=_REPLICAS)
    request.config.stash[_SUMMARY_KEY] = topology.describe()
    try:
        yield topology
    finally:
        topology.close()


def _database_name(node_name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]", "_", node_name).strip("_")[:40]
    return f"t_{stem}_{secrets.token_hex(4)}"


@pytest.fixture
def mariadb_database(
    mariadb_topology: MariaDBTopology, request: pytest.FixtureRequest
) -> Iterator[CleanDatabase]:
    """A database of its own for this test, already replicated to every replica."""
    name = _database_name(request.node.name)
    mariadb_topology.create_database(name)
    try:
        yield CleanDatabase(mariadb_topology, name)
    finally:
        mariadb_topology.reset_lag()
        mariadb_topology.drop_database(name)


@pytest.fixture(scope="session")
def emulator_topology() -> Iterator[TopologyThread]:
    """An emulated primary and two replicas (the emulator's own replication), for the run.

    The emulator is imported only when a test asks for it (it takes about half a second)."""
    threaded = importlib.import_module("consistent.emulator.replication.threaded")
    topology: TopologyThread = threaded.start_topology(replicas=_REPLICAS)
    try:
        yield topology
    finally:
        topology.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    """A server that accepts TCP connections on 127.0.0.1 and never sends a byte."""
    with BlackHole() as hole:
        yield hole


@pytest.fixture(autouse=True)
def _mariadb_reset_lag(request: pytest.FixtureRequest) -> Iterator[None]:
    """Undo lag controls after any test that used the topology (and only those)."""
    yield
    started = _SUMMARY_KEY in request.config.stash
    if started and "mariadb_topology" in request.fixturenames:
        topology: MariaDBTopology = request.getfixturevalue("mariadb_topology")
        topology.reset_lag()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark topology users before ``-m`` selection looks at the markers."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if _TOPOLOGY_FIXTURES.intersection(names) and item.get_closest_marker("mariadb") is None:
            item.add_marker(pytest.mark.mariadb)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summary = config.stash.get(_SUMMARY_KEY, None)
    if summary is not None:
        terminalreporter.write_line(summary)
