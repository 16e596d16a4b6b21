"""SQLAlchemy's MySQL dialect (Core, ORM, reflection) against the engine, without sockets.

A minimal PEP 249 shim stands in for PyMySQL: it formats parameters client-side exactly as
PyMySQL does (``query % escaped_args``) and runs the result on an emulated session whose event
loop lives in a background thread.  Every SQL text SQLAlchemy generates therefore reaches the
engine as it would from PyMySQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import types
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.mysql.base import MySQLDialect

from consistent import errors
from consistent.emulator import EmulatedServer, ServerConfig, SqlError
from consistent.emulator.prepared import sql_literal
from consistent.emulator.testing import FakeClock
from consistent.protocol.constants import Capability


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def _translate(exc: SqlError) -> errors.Error:
    state = exc.sqlstate or "HY000"
    cls: type[errors.Error] = errors.OperationalError
    if state.startswith("23"):
        cls = errors.IntegrityError
    elif state.startswith("42") or state == "3D000":
        cls = errors.ProgrammingError
    return cls(*exc.args, sqlstate=state)


class _Cursor:
    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.description: list[tuple[Any, ...]] | None = None
        self.rowcount = -1
        self.lastrowid = 0
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> int:
        if params is not None:
            if isinstance(params, Mapping):
                sql = sql % {k: sql_literal(v) for k, v in params.items()}
            else:
                sql = sql % tuple(sql_literal(v) for v in params)
        try:
            outcomes = self.conn.loop.run(self.conn.session.query_all(sql))
        except SqlError as exc:
            raise _translate(exc) from exc
        last = outcomes[-1]
        self.lastrowid = last.last_insert_id
        if last.result is not None:
            self.description = [
                (c.name, int(c.type), None, c.length, None, c.decimals, True)
                for c in last.result.columns
            ]
            self._rows = list(last.result.rows)
            self.rowcount = len(self._rows)
        else:
            self.description = None
            self._rows = []
            self.rowcount = last.affected_rows
        return self.rowcount

    def executemany(self, sql: str, seq: Sequence[Any]) -> None:
        total = 0
        for params in seq:
            total += self.execute(sql, params)
        self.rowcount = total

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        out, self._rows = self._rows[:size], self._rows[size:]
        return out

    def fetchall(self) -> list[tuple[Any, ...]]:
        out, self._rows = self._rows, []
        return out

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while self._rows:
            yield self._rows.pop(0)

    def close(self) -> None:
        self._rows = []


class _Connection:
    def __init__(self, server: EmulatedServer, loop: _LoopThread, database: str | None) -> None:
        self.loop = loop
        caps = int(
            Capability.PROTOCOL_41
            | Capability.TRANSACTIONS
            | Capability.FOUND_ROWS
            | Capability.MULTI_RESULTS
        )
        self.session = server.open_session("root", database, client_capabilities=caps)
        self._autocommit = False
        self.cursor().execute("SET AUTOCOMMIT = 0")

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def commit(self) -> None:
        self.cursor().execute("COMMIT")

    def rollback(self) -> None:
        self.cursor().execute("ROLLBACK")

    def close(self) -> None:
        self.loop.run(self.session.close())

    def ping(self, reconnect: bool = False) -> bool:
        return True

    def character_set_name(self) -> str:
        return "utf8mb4"


def _shim_module(server: EmulatedServer, loop: _LoopThread) -> types.ModuleType:
    module = types.ModuleType("emulated_dbapi")
    module.paramstyle = "pyformat"  # type: ignore[attr-defined]
    module.apilevel = "2.0"  # type: ignore[attr-defined]
    module.threadsafety = 1  # type: ignore[attr-defined]
    module.Binary = bytes  # type: ignore[attr-defined]
    for name in (
        "Warning",
        "Error",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "OperationalError",
        "IntegrityError",
        "InternalError",
        "ProgrammingError",
        "NotSupportedError",
    ):
        setattr(module, name, getattr(errors, name))
    module.connect = lambda database=None, **kw: _Connection(server, loop, database)  # type: ignore[attr-defined]
    return module


class EmulatedDialect(MySQLDialect):
    """MySQL dialect over the shim (class attribute ``shim`` is set by the fixture)."""

    driver = "emulated"
    supports_statement_cache = True
    shim: types.ModuleType | None = None

    @classmethod
    def import_dbapi(cls) -> Any:
        return cls.shim

    def create_connect_args(self, url: Any) -> Any:
        return [], {"database": url.database}

    def _detect_charset(self, connection: Any) -> str:
        return "utf8mb4"

    def _extract_error_code(self, exception: BaseException) -> Any:
        return exception.args[0] if exception.args else None

    def do_ping(self, dbapi_connection: Any) -> bool:
        return True


registry.register("mysql.emulated", __name__, "EmulatedDialect")


@pytest.fixture
def engine() -> Iterator[sa.Engine]:
    loop = _LoopThread()
    server = EmulatedServer(ServerConfig(), clock=FakeClock(1_700_000_000.0))
    setup = server.open_session()
    loop.run(setup.query_all("CREATE DATABASE app"))
    loop.run(setup.close())
    EmulatedDialect.shim = _shim_module(server, loop)
    eng = sa.create_engine("mysql+emulated:///app")
    try:
        yield eng
    finally:
        eng.dispose()
        loop.run(server.shutdown())
        loop.stop()


class Base(orm.DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(50), unique=True)
    balance: orm.Mapped[Decimal] = orm.mapped_column(sa.Numeric(10, 2), default=Decimal("0"))
    joined: orm.Mapped[dt.datetime] = orm.mapped_column(sa.DateTime, server_default=sa.func.now())
    avatar: orm.Mapped[bytes | None] = orm.mapped_column(sa.LargeBinary)
    orders: orm.Mapped[list[Order]] = orm.relationship(back_populates="user")


class Order(Base):
    __tablename__ = "orders"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    user_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("users.id"))
    total: orm.Mapped[Decimal] = orm.mapped_column(sa.Numeric(8, 2))
    user: orm.Mapped[User] = orm.relationship(back_populates="orders")


def test_connect_initialize_and_isolation(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        assert conn.dialect.server_version_info[:2] == (8, 0)
        assert conn.dialect._casing == 0
        assert conn.get_isolation_level() == "REPEATABLE READ"
        assert conn.execute(sa.text("SELECT DATABASE()")).scalar() == "app"


def test_core_ddl_insert_select(engine: sa.Engine) -> None:
    Base.metadata.create_all(engine)
    users = User.__table__
    with engine.begin() as conn:
        result = conn.execute(
            sa.insert(users).values(name="ann", balance=Decimal("1.50"), avatar=b"\x00\x01")
        )
        assert result.inserted_primary_key == (1,)
        conn.execute(sa.insert(users), [{"name": "bob"}, {"name": "cy"}])
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(users.c.name, users.c.balance, users.c.avatar).order_by(users.c.id)
        ).all()
        assert rows == [
            ("ann", Decimal("1.50"), b"\x00\x01"),
            ("bob", Decimal("0.00"), None),
            ("cy", Decimal("0.00"), None),
        ]
        joined = conn.execute(sa.select(users.c.joined).limit(1)).scalar()
        assert joined == dt.datetime(2023, 11, 14, 22, 13, 20)
        with pytest.raises(sa.exc.IntegrityError):
            conn.execute(sa.insert(users).values(name="ann"))


def test_orm_round_trip(engine: sa.Engine) -> None:
    Base.metadata.create_all(engine)
    with orm.Session(engine) as session:
        ann = User(name="ann", balance=Decimal("5"))
        ann.orders = [Order(total=Decimal("1.25")), Order(total=Decimal("2.50"))]
        session.add(ann)
        session.commit()
        user_id = ann.id
    with orm.Session(engine) as session:
        loaded = session.get(User, user_id)
        assert loaded is not None
        assert sorted(o.total for o in loaded.orders) == [Decimal("1.25"), Decimal("2.50")]
        loaded.balance = Decimal("7.75")
        session.commit()
        total = session.scalar(sa.select(sa.func.sum(Order.total)))
        assert total == Decimal("3.75")
        assert session.scalar(sa.select(User.balance)) == Decimal("7.75")
        session.delete(loaded.orders[0])
        session.commit()
        assert session.scalar(sa.select(sa.func.count()).select_from(Order)) == 1


def test_reflection(engine: sa.Engine) -> None:
    Base.metadata.create_all(engine)
    inspector = sa.inspect(engine)
    assert inspector.has_table("users")
    assert not inspector.has_table("nope")
    assert sorted(inspector.get_table_names()) == ["orders", "users"]
    columns = {c["name"]: c for c in inspector.get_columns("users")}
    assert isinstance(columns["name"]["type"], sa.VARCHAR)
    assert columns["name"]["type"].length == 50
    assert isinstance(columns["balance"]["type"], sa.DECIMAL)
    assert (columns["balance"]["type"].precision, columns["balance"]["type"].scale) == (10, 2)
    assert inspector.get_pk_constraint("users")["constrained_columns"] == ["id"]
    fks = inspector.get_foreign_keys("orders")
    assert fks[0]["referred_table"] == "users"
    assert fks[0]["constrained_columns"] == ["user_id"]
    uniques = inspector.get_unique_constraints("users")
    assert [u["column_names"] for u in uniques] == [["name"]]
    reflected = sa.Table("users", sa.MetaData(), autoload_with=engine)
    assert [c.name for c in reflected.columns] == ["id", "name", "balance", "joined", "avatar"]
    Base.metadata.drop_all(engine)
    assert sa.inspect(engine).get_table_names() == []
