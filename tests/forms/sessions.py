"""One session interface over every form, so that one scenario runs through all of them.

A :class:`Form` is one form of the middleware in front of the topology under test, as an
application would set it up once per process: the DB-API wrapper (``consistent.connect``), its
asyncio twin (``consistent.aio``), a SQLAlchemy engine on ``mysql+consistent://``, or a proxy
(:class:`proxy.testing.ProxyThread`) reached with plain PyMySQL.  Its sessions (:class:`Session`)
are that form's own: a DB-API connection, an asyncio connection driven call by call, a Core
``Connection`` held for the session's life, or a client connection to the proxy.

What a session offers is what every form can do, each by its own means:

* ``rows(sql, args)`` runs one statement and returns its rows (``[]`` when it has none);
* ``begin(read_only)`` / ``commit()`` / ``rollback()``: an explicit transaction;
* ``set_level(name)``, ``token()``, ``require(token)``: the consistency level and token.

Where a statement ran is read from its answer (``@@port`` in the select list), never from the
form's own account of it, so the same assertion holds for every form.  Every form of one test
shares one :class:`~consistent.policy.ReplicaKnowledge` (a process's, or the proxy's), which
a test may inspect (``form.knowledge.healthy(name)``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import quote

import pymysql
import sqlalchemy as sa
from sqlalchemy.dialects import registry

import consistent.dbapi as db
import consistent.sqlalchemy as csa
from consistent import aio
from consistent.policy import AcknowledgedWrites, ReplicaKnowledge
from consistent.testing.replication import REPLICATION_BACKENDS, Replication
from proxy.config import parse
from proxy.testing import ProxyThread

FORMS: Final = ("dbapi", "aio", "sqlalchemy", "proxy")
#: ``backend`` parameters for a scenario the emulator cannot express (with the ``mariadb``
#: marker, so that ``-m "not mariadb"`` deselects it).
MARIADB_ONLY: Final = [p for p in REPLICATION_BACKENDS if p.id == "mariadb"]

registry.register("mysql.consistent", "consistent.sqlalchemy", "ConsistentDialect")

# The proxy always has a monitor: this interval means "one poll at start, none in a test".
_NO_MONITOR_MS: Final = 3_600_000
_PROXY_USER: Final = "app"
_PROXY_PASSWORD: Final = "app-secret"


@dataclass(frozen=True)
class Settings:
    """The knobs every form has, by their meaning."""

    wait_timeout: float = 1.0
    on_timeout: str = "primary"
    #: Not tighter: a loaded machine may take a second to open a connection or answer a read.
    replica_read_timeout: float = 2.0
    connect_timeout: float = 2.0
    #: Seconds between monitor polls; 0: no monitor (the proxy: one poll at start).
    monitor_interval: float = 0.1

    def wrapper_options(self) -> dict[str, Any]:
        """The settings as ``consistent.connect`` keywords."""
        return {
            "wait_timeout": self.wait_timeout,
            "on_timeout": self.on_timeout,
            "replica_read_timeout": self.replica_read_timeout,
            "replica_connect_timeout": self.connect_timeout,
            "monitor_interval": self.monitor_interval,
        }


class Session(Protocol):
    """One logical session of one form."""

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]: ...
    def begin(self, read_only: bool = False) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def set_level(self, level: str) -> None: ...
    def token(self) -> str: ...
    def require(self, token: str) -> None: ...
    def close(self) -> None: ...


def _fetch(cur: Any) -> list[tuple[Any, ...]]:
    if cur.description is None:
        return []
    return [tuple(row) for row in cur.fetchall()]


class WrapperSession:
    """``consistent.connect``: PEP 249 plus ``begin(read_only)``, ``level``, ``token``."""

    def __init__(self, conn: db.Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with contextlib.closing(self.conn.cursor()) as cur:
            cur.execute(sql, args)
            return _fetch(cur)

    def begin(self, read_only: bool = False) -> None:
        self.conn.begin(read_only=read_only)

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def set_level(self, level: str) -> None:
        self.conn.level = level

    def token(self) -> str:
        return self.conn.token

    def require(self, token: str) -> None:
        self.conn.require(token)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class AioSession:
    """``consistent.aio``: every call run to completion on the form's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, conn: aio.Connection) -> None:
        self.loop = loop
        self.conn = conn

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        async def run() -> list[tuple[Any, ...]]:
            async with self.conn.cursor() as cur:
                await cur.execute(sql, args)
                if cur.description is None:
                    return []
                return [tuple(row) for row in await cur.fetchall()]

        return self.loop.run_until_complete(run())

    def begin(self, read_only: bool = False) -> None:
        self.loop.run_until_complete(self.conn.begin(read_only=read_only))

    def commit(self) -> None:
        self.loop.run_until_complete(self.conn.commit())

    def rollback(self) -> None:
        self.loop.run_until_complete(self.conn.rollback())

    def set_level(self, level: str) -> None:
        self.conn.level = level

    def token(self) -> str:
        return self.conn.token

    def require(self, token: str) -> None:
        self.conn.require(token)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.conn.ensure_closed())


class SQLAlchemySession:
    """A Core ``Connection`` of a ``mysql+consistent`` engine, held for the session's life.

    Outside an explicit transaction every statement is committed at once, as an application
    does with one ``engine.begin()`` per unit of work.  ``begin()`` is SQLAlchemy's own
    transaction (``Connection.begin()``); a read-only transaction has no SQLAlchemy API for
    MySQL, so it is what an application writes: ``START TRANSACTION READ ONLY`` on an
    ``AUTOCOMMIT`` connection, where SQLAlchemy sends no ``BEGIN`` / ``COMMIT`` of its own."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self._txn: sa.RootTransaction | None = None
        self._read_only = False

    @property
    def raw(self) -> db.Connection:
        """The DB-API connection underneath (for the level: it is reset at checkin)."""
        raw = self.conn.connection.dbapi_connection
        assert isinstance(raw, db.Connection)
        return raw

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        result = self.conn.exec_driver_sql(sql, args if args is not None else ())
        found = [tuple(row) for row in result.fetchall()] if result.returns_rows else []
        if self._txn is None and not self._read_only:
            self.conn.commit()
        return found

    def begin(self, read_only: bool = False) -> None:
        if read_only:
            self.conn.commit()  # SQLAlchemy changes the isolation level outside a transaction
            self.conn.execution_options(isolation_level="AUTOCOMMIT")
            self.conn.exec_driver_sql("START TRANSACTION READ ONLY")
            self._read_only = True
        else:
            self._txn = self.conn.begin()

    def _end(self, how: str) -> None:
        if self._read_only:
            self.conn.exec_driver_sql(how)
            self._read_only = False
            self.conn.commit()
            self.conn.execution_options(isolation_level="REPEATABLE READ")
            return
        txn, self._txn = self._txn, None
        assert txn is not None
        if how == "COMMIT":
            txn.commit()
        else:
            txn.rollback()

    def commit(self) -> None:
        self._end("COMMIT")

    def rollback(self) -> None:
        self._end("ROLLBACK")

    def set_level(self, level: str) -> None:
        self.raw.level = level

    def token(self) -> str:
        return csa.token(self.conn)

    def require(self, token: str) -> None:
        csa.require(self.conn, token)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class ProxySession:
    """A PyMySQL connection through the proxy; level and token are the proxy's intercepted
    ``@@consistent_level`` / ``@@consistent_token`` variables."""

    def __init__(self, conn: pymysql.connections.Connection[Any]) -> None:
        self.conn = conn

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return _fetch(cur)

    def begin(self, read_only: bool = False) -> None:
        self.rows("START TRANSACTION READ ONLY" if read_only else "START TRANSACTION")

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def set_level(self, level: str) -> None:
        self.rows("SET @@consistent_level = %s", (level,))

    def token(self) -> str:
        return str(self.rows("SELECT @@consistent_token")[0][0])

    def require(self, token: str) -> None:
        self.rows("SET @@consistent_token = %s", (token,))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class Form:
    """One form in front of ``replication``, set up on first use with :attr:`settings`
    (assign them before the first :meth:`session`)."""

    def __init__(self, kind: str, replication: Replication) -> None:
        self.kind = kind
        self.replication = replication
        self.settings = Settings()
        self.knowledge = ReplicaKnowledge()
        self.acknowledged = AcknowledgedWrites()
        self.replicas: list[str] = list(replication.replicas)
        self._sessions: list[Session] = []
        self._closers: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine: sa.Engine | None = None
        self._proxy: ProxyThread | None = None

    @property
    def primary_port(self) -> int:
        return self.replication.primary_port

    @property
    def replica_ports(self) -> set[int]:
        return {port_of(name) for name in self.replicas}

    def session(self, **options: Any) -> Session:
        """A new session of this form (``options``: wrapper keywords such as ``level``, which
        the proxy has as session variables)."""
        opener = {
            "dbapi": self._dbapi,
            "aio": self._aio,
            "sqlalchemy": self._sqlalchemy,
            "proxy": self._proxied,
        }[self.kind]
        level = options.pop("level", None)
        made = opener(options)
        self._sessions.append(made)
        if level is not None:
            made.set_level(level)
        return made

    def _wrapper_params(self, options: dict[str, Any]) -> dict[str, Any]:
        rep = self.replication
        params: dict[str, Any] = {"primary": rep.primary, "replicas": self.replicas}
        params.update(rep.options)
        params.update(self.settings.wrapper_options())
        params.update(knowledge=self.knowledge, acknowledged=self.acknowledged)
        params.update(options)
        return params

    def _dbapi(self, options: dict[str, Any]) -> Session:
        return WrapperSession(db.connect(**self._wrapper_params(options)))

    def _aio(self, options: dict[str, Any]) -> Session:
        if self._loop is None:
            loop = self._loop = asyncio.new_event_loop()
            self._closers.append(loop.close)
        conn = self._loop.run_until_complete(aio.connect(**self._wrapper_params(options)))
        return AioSession(self._loop, conn)

    def _sqlalchemy(self, options: dict[str, Any]) -> Session:
        assert not options, "SQLAlchemy sessions share the engine's options"
        if self._engine is None:
            rep = self.replication
            auth = quote(rep.user, safe="")
            if rep.password:
                auth += ":" + quote(rep.password, safe="")
            url = f"mysql+consistent://{auth}@{rep.host}:{rep.primary_port}/{rep.database}"
            args = self._wrapper_params({})
            for key in ("primary", "user", "password", "database", "host", "port"):
                args.pop(key, None)
            engine = self._engine = sa.create_engine(url, connect_args=args, pool_size=4)
            self._closers.append(engine.dispose)
        return SQLAlchemySession(self._engine.connect())

    def _proxied(self, options: dict[str, Any]) -> Session:
        assert not options, "proxy sessions share the proxy's configuration"
        if self._proxy is None:
            self._proxy = self._start_proxy()
        conn = pymysql.connect(
            host="127.0.0.1",
            port=self._proxy.port,
            user=_PROXY_USER,
            password=_PROXY_PASSWORD,
            database=self.replication.database,
            autocommit=True,
            connect_timeout=10,
            read_timeout=60,
        )
        return ProxySession(conn)

    def _start_proxy(self) -> ProxyThread:
        rep, s = self.replication, self.settings
        interval_ms = s.monitor_interval * 1000 if s.monitor_interval else _NO_MONITOR_MS
        config = parse(
            {
                "listen": "127.0.0.1:0",
                "wait_timeout": s.wait_timeout,
                "on_timeout": s.on_timeout,
                "backends": {
                    "primary": rep.primary,
                    "replicas": self.replicas,
                    "user": rep.user,
                    "password": rep.password,
                    "connect_timeout": s.connect_timeout,
                    "replica_read_timeout": s.replica_read_timeout,
                    "monitor_interval_ms": interval_ms,
                },
                "users": {_PROXY_USER: {"password": _PROXY_PASSWORD}},
            }
        )
        proxy = ProxyThread(config, knowledge=self.knowledge).start()
        self._closers.append(proxy.stop)
        return proxy

    def close(self) -> None:
        for made in reversed(self._sessions):
            made.close()
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def port_of(name: str) -> int:
    """The port of a ``host:port`` name."""
    return int(name.rpartition(":")[2])
