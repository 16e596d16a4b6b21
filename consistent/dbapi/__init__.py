"""The PEP 249 (DB-API 2.0) module: one logical connection over a primary and its replicas.

::

    import consistent.dbapi as db

    conn = db.connect(primary="db1:3306", replicas=["db2:3306", "db3:3306"],
                      user="app", password="…", database="shop")
    with conn.cursor() as cur:
        cur.execute("INSERT INTO orders (item) VALUES (%s)", ("book",))
        cur.execute("SELECT * FROM orders")      # on a replica that has the insert
    token = conn.token                            # hand it to another session: conn2.require(token)

Code written against PyMySQL runs unchanged (errors are PyMySQL's classes too, the cursor
classes and PyMySQL's own subclasses of them are accepted, ``defer_connect``, ``ping(reconnect=
True)``, ``affected_rows()``, ``encoders``, ``set_character_set()``, ``kill()``,
``cursor._executed`` and ``warning_count`` behave as PyMySQL's).  Differences, on purpose, each
with its switch:

* ``autocommit`` defaults to **on**.  With autocommit off every statement belongs to a
  transaction that may write, so every statement goes to the primary; pass ``autocommit=False``
  to get PyMySQL's (and PEP 249's) default, or ``autocommit=None`` for the server's, and use
  ``begin(read_only=True)`` for reads that may use a replica.
* A read whose replica connection dies after the read was sent is sent again elsewhere;
  ``retry_reads=False`` raises the ``OperationalError`` instead, as PyMySQL does.
* ``with connect(...) as conn:`` commits when the block succeeds, rolls back when it raises, and
  closes the connection.
* A lost primary is not reconnected behind the caller's back: the connection raises
  ``OperationalError`` until ``ping(reconnect=True)`` or ``connect()`` opens a fresh session.
"""

from __future__ import annotations

from typing import Any

from consistent.dbapi.config import ConnectConfig, ServerSpec
from consistent.dbapi.connection import Connection
from consistent.dbapi.cursor import Cursor, DictCursor, SSCursor, SSDictCursor, cursor_class
from consistent.dbapi.pep249 import (
    apilevel,
    connect_params,
    paramstyle,
    session_config,
    threadsafety,
)
from consistent.dbapi.types import (
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
)
from consistent.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)
from consistent.policy import AcknowledgedWrites, Level, OnTimeout, ReplicaKnowledge
from consistent.telemetry import Telemetry

__all__ = [
    "BINARY",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "ConnectConfig",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Date",
    "DateFromTicks",
    "DictCursor",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "Level",
    "NotSupportedError",
    "OnTimeout",
    "OperationalError",
    "ProgrammingError",
    "SSCursor",
    "SSDictCursor",
    "ServerSpec",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "Warning",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
]


def connect(
    dsn: str | None = None,
    *,
    knowledge: ReplicaKnowledge | None = None,
    acknowledged: AcknowledgedWrites | None = None,
    cursorclass: type[Any] | None = None,
    telemetry: Telemetry | None = None,
    defer_connect: bool = False,
    **kwargs: Any,
) -> Connection:
    """Open a logical connection.

    ``connect(primary=..., replicas=[...], level="read_own_writes", wait_timeout=1.0,
    on_timeout="primary", max_lag=None, flavor=None, autocommit=True, read_only_functions=None,
    retry_reads=True, **pymysql_kwargs)``, or
    ``connect("mysql://user:pw@host:3306/db?replica=h2:3306&level=read_latest", **overrides)``
    (see :mod:`consistent.dbapi.config`).  ``knowledge`` isolates this connection's view of the
    replicas from the process-wide one, ``acknowledged`` what ``read_all_writes`` requires from
    the process-wide record of what the primary acknowledged (connections that share one see
    each other's writes at that level); ``cursorclass`` is the default cursor class (ours,
    PyMySQL's, or a subclass of either); ``defer_connect=True`` opens nothing until
    :meth:`~consistent.dbapi.connection.Connection.connect`.

    ``telemetry`` receives one span per routed statement; ``None`` uses the process's
    :func:`~consistent.telemetry.default_telemetry`, configured by the ``OTEL_*`` /
    ``CONSISTENT_TRACE_*`` environment variables (off unless one asks for an exporter).  A URL
    has no telemetry option: a pipeline is an object shared by connections, not a setting of
    one, so pass ``telemetry=`` next to the URL.  ``tracer_provider="global"`` (also a URL
    option) or ``tracer_provider=<a TracerProvider>`` sends the statement spans to the
    application's OpenTelemetry provider instead, as children of the application's current
    span (:mod:`consistent.telemetry.appspans`).
    """
    params = connect_params(dsn, kwargs)
    defer = bool(params.pop("defer_connect", defer_connect))
    config, telemetry = session_config(params, telemetry)
    cls = cursor_class(cursorclass) if cursorclass is not None else None
    return Connection(
        config,
        knowledge=knowledge,
        acknowledged=acknowledged,
        cursorclass=cls,
        telemetry=telemetry,
        defer_connect=defer,
    )
