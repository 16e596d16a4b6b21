"""Fixtures of the cross-form suite: every test runs through each form (:data:`FORMS`) on each
server (real MariaDB replication and the emulator's topology, as the other scenario suites)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication

from .sessions import FORMS, Form


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Replication]:
    """The topology under test, with a clean database."""
    yield from open_replication(request, Replication)


@pytest.fixture(params=FORMS)
def form(request: pytest.FixtureRequest, backend: Replication) -> Iterator[Form]:
    """One form in front of the topology, closed (sessions, engine, proxy) after the test."""
    made = Form(request.param, backend)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def table(backend: Replication) -> str:
    """A fresh ``(k INT PRIMARY KEY, v INT)`` table, present on every replica."""
    name = f"kv_{secrets.token_hex(3)}"
    backend.primary_query(f"CREATE TABLE {name} (k INT PRIMARY KEY, v INT NOT NULL)")
    backend.catch_up()
    return name
