"""SQLAlchemy over ``mysql+consistent`` and ``mysql+consistent_async``: one fixture, two
topologies.

The scenarios run against real MariaDB replication and against the emulator's topology through
the same :class:`Backend`.  The dialects are registered here from the ``sqlalchemy.dialects``
entry points ``pyproject.toml`` declares, as an installed package registers them.
"""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.loading import load_module
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
#: The example web applications (Flask and FastAPI) and the module they share.
WEBAPP = ROOT / "examples" / "webapp"


def declared_dialects() -> dict[str, str]:
    """``pyproject.toml``'s ``sqlalchemy.dialects`` entry points: name -> ``module:Class``."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    entries: dict[str, str] = project["entry-points"]["sqlalchemy.dialects"]
    return entries


for _name, _target in declared_dialects().items():
    _module, _, _class = _target.partition(":")
    registry.register(_name, _module, _class)


@dataclass(frozen=True)
class Backend(Replication):
    """The topology under test, plus URLs for it and the engines the test created."""

    engines: list[sa.Engine] = field(default_factory=list)

    def _auth(self) -> str:
        password = f":{quote(self.password, safe='')}" if self.password else ""
        return f"{quote(self.user, safe='')}{password}"

    def url(self, driver: str = "mysql+consistent", **options: Any) -> str:
        """A URL for the primary; ``mysql+consistent`` lists the replicas as query options."""
        query = []
        if "+consistent" in driver:
            query = [f"replica={r}" for r in self.replicas]
        query += [f"{k}={v}" for k, v in options.items()]
        tail = f"?{'&'.join(query)}" if query else ""
        return f"{driver}://{self._auth()}@{self.host}:{self.primary_port}/{self.database}{tail}"

    def replica_url(self, index: int = 0) -> str:
        """A plain ``mysql+pymysql`` URL for one replica (the naive read/write split)."""
        port = self.replica_ports[index]
        return f"mysql+pymysql://{self._auth()}@{self.host}:{port}/{self.database}"

    def engine(self, url: str | None = None, **kwargs: Any) -> sa.Engine:
        """An engine closed after the test (isolated: see :func:`isolated`)."""
        url = url or self.url()
        engine = sa.create_engine(url, **isolated(url, kwargs))
        self.engines.append(engine)
        return engine

    @contextlib.asynccontextmanager
    async def async_engine(
        self, url: str | None = None, **kwargs: Any
    ) -> AsyncIterator[AsyncEngine]:
        """An asyncio engine (``mysql+consistent_async`` by default), isolated as
        :meth:`engine`'s, disposed when the block ends (in the test's event loop)."""
        url = url or self.url("mysql+consistent_async")
        engine = create_async_engine(url, **isolated(url, kwargs))
        try:
            yield engine
        finally:
            await engine.dispose()

    def release(self) -> None:
        for engine in self.engines:
            engine.dispose()


def isolated(url: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` for an engine on ``url``: a ``consistent`` engine gets its own replica
    knowledge and acknowledged state (shared by the engine's connections, as by a
    process's), so no test learns from another's."""
    if "+consistent" in url:
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args.setdefault("knowledge", ReplicaKnowledge())
        connect_args.setdefault("acknowledged", AcknowledgedWrites())
    return kwargs


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The topology under test, with a clean database."""
    yield from open_replication(request, Backend)


def load_example(filename: str) -> ModuleType:
    """An example web application of :data:`WEBAPP`, imported as its script runs."""
    return load_module(
        f"consistent_example_{Path(filename).stem}", WEBAPP / filename, with_siblings=True
    )


def notes_of(body: Any) -> list[str]:
    """The note texts of an example application's ``GET /api/notes`` answer."""
    return [note["text"] for note in body["notes"]]
