"""The ORM guarantee at the data level, under injected replica lag, across pool checkouts.

One ORM ``Session`` writes, commits and reads back, again and again; every transaction checks
a DB-API connection out of a pool of several, so the token must travel with the session.
The control is the usual read/write split of an ORM application on ``mysql+pymysql``: writes
through an engine on the primary, reads through an engine on a replica.  The same workload
there reads stale data, so a zero here means something."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import orm

import consistent.dbapi
from consistent.policy import PRIMARY

if TYPE_CHECKING:
    from .conftest import Backend

#: Write-then-read iterations per backend (an emulator round trip costs about ten times a
#: MariaDB one: its servers run in the test process).
ITERATIONS = {"mariadb": 300, "emulator": 100}


class Base(orm.DeclarativeBase):
    pass


class Counter(Base):
    __tablename__ = "counters"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    value: orm.Mapped[int] = orm.mapped_column()


def read_back(reader: orm.Session) -> int | None:
    return reader.scalar(sa.select(Counter.value).where(Counter.id == 1))


def test_an_orm_session_reads_its_writes_under_lag(backend: Backend) -> None:
    iterations = ITERATIONS[backend.name]
    engine = backend.engine(backend.url(wait_timeout="2"), pool_size=4)
    Base.metadata.create_all(engine)
    backend.catch_up()
    violations = on_replicas = 0
    connections: set[int] = set()
    blockers: list[sa.Connection] = []
    with backend.injected_lag(), orm.Session(engine, expire_on_commit=True) as session:
        counter = Counter(id=1, value=0)
        session.add(counter)
        session.commit()
        for i in range(1, iterations + 1):
            counter.value = i
            session.commit()
            # another user takes a connection now and then, so checkouts rotate
            if i % 3 == 0:
                blockers.append(engine.connect())
            if len(blockers) > 2:
                blockers.pop(0).close()
            if read_back(session) != i:
                violations += 1
            raw = session.connection().connection.dbapi_connection
            assert isinstance(raw, consistent.dbapi.Connection)
            connections.add(id(raw))
            decision = raw.last_decision
            assert decision is not None
            if decision.target != PRIMARY:
                on_replicas += 1
            session.commit()
    for blocker in blockers:
        blocker.close()
    assert violations == 0
    assert on_replicas > iterations // 2  # the guarantee did not come from avoiding replicas
    assert len(connections) > 1  # and the token crossed pooled connections


def test_a_read_write_split_on_mysql_pymysql_reads_stale_data(backend: Backend) -> None:
    iterations = ITERATIONS[backend.name]
    writer_engine = backend.engine(backend.url("mysql+pymysql"), pool_size=2)
    Base.metadata.create_all(writer_engine)
    backend.catch_up()
    reader_engines = [backend.engine(backend.replica_url(i)) for i in (0, 1)]
    stale = 0
    with (
        backend.injected_lag(),
        orm.Session(writer_engine) as writer,
    ):
        counter = Counter(id=1, value=0)
        writer.add(counter)
        writer.commit()
        for i in range(1, iterations + 1):
            counter.value = i
            writer.commit()
            with orm.Session(reader_engines[i % 2]) as reader:
                if read_back(reader) != i:
                    stale += 1
    assert stale > 0
