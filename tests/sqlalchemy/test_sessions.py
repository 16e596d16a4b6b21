"""The token belongs to the logical session: an ORM ``Session`` keeps it across checkouts, a Core
``Connection`` holds it while it is open, and the pool wipes it between users."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

import consistent.dbapi
import consistent.sqlalchemy as csa
from consistent.errors import InterfaceError, MalformedGtidSet
from consistent.policy import PRIMARY, Level, Reason

if TYPE_CHECKING:
    from .conftest import Backend


class Base(orm.DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(40))


def setup_engine(backend: Backend, **kwargs: object) -> sa.Engine:
    url = kwargs.pop("url", None)
    engine = backend.engine(url if isinstance(url, str) else None, **kwargs)  # type: ignore[arg-type]
    Base.metadata.create_all(engine)
    backend.catch_up()
    return engine


def raw_of(session: orm.Session) -> consistent.dbapi.Connection:
    raw = session.connection().connection.dbapi_connection
    assert isinstance(raw, consistent.dbapi.Connection)
    return raw


def test_a_session_keeps_its_token_across_checkouts(backend: Backend) -> None:
    engine = setup_engine(backend, pool_size=3)
    seen: set[int] = set()
    with orm.Session(engine) as session:
        assert csa.token(session) == ""
        for i in range(6):
            session.add(Item(id=i, name=f"item {i}"))
            session.flush()
            seen.add(id(raw_of(session)))
            session.commit()
            token = csa.token(session)
            assert token
            assert session.info[csa.TOKEN_KEY] == token
            # the next transaction checks out a connection, which is told the session's token;
            # another user holding the connection just checked in makes it a different one
            with engine.connect() as other:
                other.exec_driver_sql("SELECT 1")
                raw = raw_of(session)
                seen.add(id(raw))
                assert raw.token == token
                assert session.scalar(sa.select(sa.func.count()).select_from(Item)) == i + 1
                session.commit()
    assert len(seen) > 1  # the token did travel between DB-API connections
    assert csa.token(engine.connect()) == ""  # and never stayed on one


def test_the_pool_wipes_the_token_between_users(backend: Backend) -> None:
    engine = setup_engine(backend, pool_size=1, max_overflow=0)
    with orm.Session(engine) as writer:
        writer.add(Item(id=1, name="a"))
        writer.commit()
        raw = raw_of(writer)
        assert raw.token == csa.token(writer) != ""
    assert raw.token == ""  # wiped at checkin
    with orm.Session(engine) as other:
        assert raw_of(other) is raw  # the same DB-API connection, a new session
        assert raw.token == ""
        assert csa.token(other) == ""
    with engine.connect() as conn:
        assert conn.connection.dbapi_connection is raw
        assert csa.token(conn) == ""


def test_a_level_change_does_not_outlive_the_checkout(backend: Backend) -> None:
    engine = setup_engine(backend, pool_size=1, max_overflow=0)
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, consistent.dbapi.Connection)
        raw.level = Level.EVENTUAL
    assert raw.level is Level.READ_OWN_WRITES
    with engine.connect() as conn:
        assert conn.connection.dbapi_connection is raw
        assert raw.level is Level.READ_OWN_WRITES


def test_a_token_carries_causality_to_another_session(backend: Backend) -> None:
    engine = setup_engine(backend, url=backend.url(wait_timeout="3"), pool_size=2)
    backend.pause(0)
    backend.pause(1)
    with orm.Session(engine) as writer:
        writer.add(Item(id=7, name="seven"))
        writer.commit()
        token = csa.token(writer)
    with orm.Session(engine) as stranger:
        # no token: a replica may serve it, and both replicas lack the write
        assert stranger.get(Item, 7) is None
        decision = raw_of(stranger).last_decision
        assert decision is not None
        assert decision.target != PRIMARY
    timer = backend.resume_all_later()
    try:
        with orm.Session(engine) as reader:
            csa.require(reader, token)
            item = reader.get(Item, 7)
            assert item is not None
            assert item.name == "seven"
            decision = raw_of(reader).last_decision
            assert decision is not None
            assert decision.target != PRIMARY
            assert decision.reason is Reason.WAITED
            assert csa.token(reader) == token
    finally:
        timer.join()


def test_core_connections_work_the_same_way(backend: Backend) -> None:
    engine = setup_engine(backend, url=backend.url(wait_timeout="3"), pool_size=2)
    items = Item.__table__
    with engine.connect() as writer:
        assert csa.token(writer) == ""
        backend.pause(0)
        backend.pause(1)
        writer.execute(items.insert().values(id=3, name="three"))
        writer.commit()
        token = csa.token(writer)
        assert token
        timer = backend.resume_all_later()
        try:
            # its own write, read on a replica after waiting for it
            assert writer.execute(sa.select(items.c.name)).scalar_one() == "three"
            decision = writer.connection.dbapi_connection.last_decision  # type: ignore[union-attr]
            assert decision.target != PRIMARY
        finally:
            timer.join()
    with engine.connect() as reader:
        csa.require(reader, token)
        assert csa.token(reader) == token
        assert reader.execute(sa.select(items.c.name)).scalar_one() == "three"


def test_a_session_bound_to_a_connection_shares_its_token(backend: Backend) -> None:
    engine = setup_engine(backend)
    with engine.connect() as conn:
        with orm.Session(bind=conn, join_transaction_mode="create_savepoint") as session:
            session.add(Item(id=1, name="x"))
            session.commit()
        conn.commit()
        assert csa.token(conn)
        with orm.Session(bind=conn) as session:
            assert csa.token(session) == ""  # its own, until it uses the connection
            assert session.scalar(sa.select(sa.func.count()).select_from(Item)) == 1
            assert csa.token(session) == csa.token(conn)


def test_scoped_sessions_are_accepted(backend: Backend) -> None:
    engine = setup_engine(backend)
    scoped = orm.scoped_session(orm.sessionmaker(engine))
    try:
        scoped.add(Item(id=2, name="b"))
        scoped.commit()
        token = csa.token(scoped)
        assert token == csa.token(scoped())
        scoped.remove()
        csa.require(scoped, token)
        assert csa.token(scoped) == token
    finally:
        scoped.remove()


def test_require_merges_and_validates(backend: Backend) -> None:
    engine = setup_engine(backend)
    with orm.Session(engine) as session:
        csa.require(session, None)
        csa.require(session, "")
        assert csa.token(session) == ""
        with pytest.raises(MalformedGtidSet):
            csa.require(session, "not a token")
        session.add(Item(id=1, name="x"))
        session.commit()
        own = csa.token(session)
    with orm.Session(engine) as other:
        other.add(Item(id=2, name="y"))
        other.commit()
        csa.require(other, own)
        merged = csa.token(other)
    assert merged != own
    assert csa.tracking.merge_tokens(merged, own) == merged  # it covers both


def test_a_token_of_the_other_flavour_is_dropped(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    engine = setup_engine(backend)
    foreign = (
        "mariadb:0-1-5"
        if backend.name == "emulator"
        else "mysql:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    )
    with orm.Session(engine) as session:
        csa.require(session, foreign)  # a well-formed token, for the other kind of server
        assert csa.token(session) == foreign
        assert session.scalar(sa.select(sa.func.count()).select_from(Item)) == 0
        assert csa.token(session) == ""
    assert "dropping" in caplog.text


def test_token_refuses_other_dialects() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn, pytest.raises(InterfaceError, match="not mysql\\+consistent"):
        csa.token(conn)


def test_threads_each_read_their_own_writes(backend: Backend) -> None:
    engine = setup_engine(backend, pool_size=4)
    failures: list[str] = []

    def work(k: int) -> None:
        with orm.Session(engine) as session:
            item = Item(id=k, name="0")
            session.add(item)
            session.commit()
            for i in range(1, 11):
                item.name = str(i)
                session.commit()
                session.expire_all()
                got = session.scalar(sa.select(Item.name).where(Item.id == k))
                if got != str(i):
                    failures.append(f"thread {k}: wrote {i}, read {got}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
