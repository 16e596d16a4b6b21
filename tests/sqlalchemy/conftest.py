"""SQLAlchemy over ``mysql+consistent``: one fixture, two topologies.

The scenarios run against real MariaDB replication and against the emulator's topology through
the same :class:`Backend`.  The dialect is registered here by name, as an installed package
registers it through its ``sqlalchemy.dialects`` entry point.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry

from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication

registry.register("mysql.consistent", "consistent.sqlalchemy", "ConsistentDialect")
registry.register("mariadb.consistent", "consistent.sqlalchemy", "ConsistentMariaDBDialect")


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
        replica knowledge and acknowledged state (shared by the engine's connections, as by a
        process's), so no test learns from another's."""
        url = url or self.url()
        if "+consistent" in url:
            connect_args = kwargs.setdefault("connect_args", {})
            connect_args.setdefault("knowledge", ReplicaKnowledge())
            connect_args.setdefault("acknowledged", AcknowledgedWrites())
        engine = sa.create_engine(url, **kwargs)
        self.engines.append(engine)
        return engine

    def release(self) -> None:
        for engine in self.engines:
            engine.dispose()


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The topology under test, with a clean database."""
    yield from open_replication(request, Backend)
