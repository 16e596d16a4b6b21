"""SQLAlchemy's MySQL dialect (``mysql+pymysql``) against the emulator: the dialect's connect-time
queries, Core and ORM round trips, and reflection of a table it did not create."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from consistent.emulator.config import Account, ServerConfig
from consistent.emulator.wire import EmulatorThread


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    config = ServerConfig(accounts=(Account("root", ""), Account("orm", "p@ss w0rd")))
    with EmulatorThread(config) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def engine(emu: EmulatorThread) -> Iterator[sa.Engine]:
    bootstrap = sa.create_engine(f"mysql+pymysql://root@127.0.0.1:{emu.port}/")
    with bootstrap.begin() as conn:
        conn.exec_driver_sql("CREATE DATABASE IF NOT EXISTS shop")
    bootstrap.dispose()
    url = sa.URL.create(
        "mysql+pymysql",
        username="orm",
        password="p@ss w0rd",
        host="127.0.0.1",
        port=emu.port,
        database="shop",
    )
    eng = sa.create_engine(url, pool_size=3)
    yield eng
    eng.dispose()


class Base(orm.DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(50), unique=True)
    balance: orm.Mapped[decimal.Decimal] = orm.mapped_column(sa.Numeric(10, 2), default=0)
    joined: orm.Mapped[dt.datetime | None] = orm.mapped_column(sa.DateTime)
    orders: orm.Mapped[list[Order]] = orm.relationship(back_populates="customer")


class Order(Base):
    __tablename__ = "orders"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=True)
    customer_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("customers.id"))
    item: orm.Mapped[str] = orm.mapped_column(sa.String(30))
    customer: orm.Mapped[Customer] = orm.relationship(back_populates="orders")


def test_dialect_sees_mysql_8(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        assert conn.dialect.server_version_info is not None
        assert conn.dialect.server_version_info[:2] == (8, 0)
        assert conn.dialect.name == "mysql"
        assert "MariaDB" not in conn.exec_driver_sql("SELECT VERSION()").scalar_one()
        assert conn.scalar(sa.text("SELECT 40 + 2")) == 42


def test_orm_round_trip(engine: sa.Engine) -> None:
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    joined = dt.datetime(2024, 5, 6, 7, 8, 9)
    with orm.Session(engine) as session:
        ada = Customer(name="ada", balance=decimal.Decimal("10.50"), joined=joined)
        ada.orders = [Order(item="tea"), Order(item="cake")]
        session.add_all([ada, Customer(name="bob")])
        session.commit()
        ada_id = ada.id
    with orm.Session(engine) as session:
        found = session.scalars(sa.select(Customer).where(Customer.name == "ada")).one()
        assert found.id == ada_id
        assert found.balance == decimal.Decimal("10.50")
        assert found.joined == joined
        assert sorted(o.item for o in found.orders) == ["cake", "tea"]
        found.balance += decimal.Decimal("1.25")
        session.commit()
    with orm.Session(engine) as session:
        assert session.get(Customer, ada_id).balance == decimal.Decimal("11.75")  # type: ignore[union-attr]
        count = session.scalar(
            sa.select(sa.func.count())
            .select_from(Order)
            .join(Customer)
            .where(Customer.id == ada_id)
        )
        assert count == 2


def test_core_round_trip_and_rollback(engine: sa.Engine) -> None:
    meta = sa.MetaData()
    events = sa.Table(
        "events",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("weight", sa.Float),
    )
    meta.drop_all(engine)
    meta.create_all(engine)
    with engine.begin() as conn:
        result = conn.execute(
            events.insert(), [{"kind": "a", "weight": 1.5}, {"kind": "b", "weight": None}]
        )
        assert result.rowcount == 2
    with engine.connect() as conn:
        trans = conn.begin()
        conn.execute(events.update().where(events.c.kind == "a").values(weight=9.0))
        trans.rollback()
        rows = conn.execute(sa.select(events.c.kind, events.c.weight).order_by(events.c.id)).all()
    assert [tuple(r) for r in rows] == [("a", 1.5), ("b", None)]
    with engine.begin() as conn:
        conn.execute(events.delete().where(events.c.kind == "b"))
    with engine.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(events)) == 1


def test_reflect_a_table(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS legacy")
        conn.exec_driver_sql(
            "CREATE TABLE legacy (code CHAR(3) NOT NULL PRIMARY KEY, label VARCHAR(40),"
            " qty INT NOT NULL DEFAULT 0, KEY ix_label (label))"
        )
    inspector = sa.inspect(engine)
    assert "legacy" in inspector.get_table_names()
    reflected = sa.Table("legacy", sa.MetaData(), autoload_with=engine)
    assert [c.name for c in reflected.columns] == ["code", "label", "qty"]
    assert [c.name for c in reflected.primary_key.columns] == ["code"]
    assert reflected.c.qty.nullable is False
    assert isinstance(reflected.c.label.type, sa.String)
    assert reflected.c.label.type.length == 40
    assert any(ix["name"] == "ix_label" for ix in inspector.get_indexes("legacy"))
    with engine.begin() as conn:
        conn.execute(reflected.insert().values(code="abc", label="first"))
        assert conn.execute(sa.select(reflected.c.qty)).scalar_one() == 0
