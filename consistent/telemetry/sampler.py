"""The lag sampler: polls each replica every N ms and emits lag records into the trace stream.

One :class:`LagSampler` knows the replicas (and, for MariaDB, the primary), opens one
connection to each through an injected ``connect`` function (so tests hand it fakes), and each
round reads what :mod:`consistent.telemetry.lag` turns into attributes (whether the replica
accepts writes included): one :data:`~consistent.trace.LAG_SAMPLE_SPAN` record per replica and
channel, whose start and end
are the moments the replica was asked and answered.  A replica that cannot be reached yields a
record with ``consistent.lag.reachable = false`` and the error's type, and is reconnected on the
next round.

Library use: ``sampler.sample()`` for one round, ``sampler.run(stop_event)`` or
``sampler.start()`` / ``sampler.stop()`` for a background thread.  ``consistent lag-sample``
(:mod:`consistent.telemetry.cli`) wraps it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from consistent.errors import InterfaceError
from consistent.flavors import flavor_by_name
from consistent.hostport import DEFAULT_PORT, join_host_port, split_host_port
from consistent.telemetry.lag import (
    MYSQL_TABLES,
    Row,
    mariadb_lag,
    mysql_lag,
    write_protection_attributes,
)
from consistent.telemetry.records import SpanRecord, StatusCode, new_span_id, new_trace_id
from consistent.trace import (
    DB_SYSTEM_NAME,
    ERROR_TYPE,
    LAG_CHANNEL,
    LAG_REACHABLE,
    LAG_REPLICA,
    LAG_REPLICA_NAME,
    LAG_SAMPLE_SPAN,
    RECORD_KIND,
    SERVER_ADDRESS,
    SERVER_PORT,
    AttributeValue,
    RecordKind,
    SpanKind,
)

__all__ = ["Endpoint", "LagSampler", "SamplerConnection"]

logger = logging.getLogger(__name__)

Flavor = Literal["mysql", "mariadb"]

_MARIADB_STATUS: Final = ("SHOW ALL SLAVES STATUS", "SHOW SLAVE STATUS")
_MARIADB_SLAVE_POS: Final = "SELECT @@GLOBAL.gtid_slave_pos"
_MARIADB_BINLOG_POS: Final = "SELECT @@GLOBAL.gtid_binlog_pos"


class SamplerConnection(Protocol):
    """The part of a PEP 249 connection the sampler uses."""

    def cursor(self) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A server to sample: its name in the traces (``host:port``), where it listens, and the
    name the user gave it (``label``, recorded beside ``host:port`` when given)."""

    host: str
    port: int = DEFAULT_PORT
    label: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """``host:port`` (``[v6]:port``), the name statements use as their route target."""
        return join_host_port(self.host, self.port)

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """``host``, ``host:port`` or ``[v6]:port`` (read by
        :func:`~consistent.hostport.split_host_port`), each optionally after ``NAME=``."""
        text = text.strip()
        label, equals, address = text.partition("=")
        if not equals:
            label, address = "", text
        label = label.strip()
        if equals and not label:
            raise InterfaceError(f"an empty name before '=' in {text!r}")
        host, port = split_host_port(address)
        return cls(host, port, label or None)


def _rows(connection: SamplerConnection, sql: str) -> list[Row]:
    """``sql``'s rows as dicts keyed by column name, whatever the cursor class returns."""
    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        rows = cursor.fetchall() or ()
        names = [column[0] for column in cursor.description or ()]
    finally:
        with contextlib.suppress(Exception):
            cursor.close()
    return [
        row if isinstance(row, Mapping) else dict(zip(names, row, strict=False)) for row in rows
    ]


def _scalar(connection: SamplerConnection, sql: str) -> str | None:
    rows = _rows(connection, sql)
    if not rows:
        return None
    value = next(iter(rows[0].values()), None)
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class LagSampler:
    """Polls replicas for replication lag and emits one record per replica and channel."""

    def __init__(
        self,
        *,
        flavor: Flavor,
        replicas: Sequence[Endpoint],
        connect: Callable[[Endpoint], SamplerConnection],
        emit: Callable[[SpanRecord], None],
        primary: Endpoint | None = None,
        interval: float = 1.0,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if flavor not in ("mysql", "mariadb"):
            raise InterfaceError(f"unknown flavour {flavor!r}: mysql or mariadb")
        if interval <= 0:
            raise InterfaceError("the sampling interval must be positive")
        self.flavor: Flavor = flavor
        self.replicas = tuple(replicas)
        self.primary = primary
        self.interval = interval
        self._connect = connect
        self._emit = emit
        self._clock_ns = clock_ns
        self._connections: dict[Endpoint, SamplerConnection] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Rounds completed.
        self.rounds = 0

    # ------------------------------------------------------------------ connections

    def _connection(self, endpoint: Endpoint) -> SamplerConnection:
        connection = self._connections.get(endpoint)
        if connection is None:
            connection = self._connect(endpoint)
            self._connections[endpoint] = connection
        return connection

    def _forget(self, endpoint: Endpoint) -> None:
        connection = self._connections.pop(endpoint, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close every connection (the sampler reconnects if used again)."""
        with self._lock:
            for endpoint in list(self._connections):
                self._forget(endpoint)

    # ------------------------------------------------------------------ one round

    def _read_mysql(self, endpoint: Endpoint) -> dict[str, dict[str, AttributeValue]]:
        connection = self._connection(endpoint)
        tables = {role: _rows(connection, f"SELECT * FROM {t}") for role, t in MYSQL_TABLES.items()}
        return mysql_lag(tables)

    def _read_mariadb(
        self, endpoint: Endpoint, primary_pos: str | None
    ) -> dict[str, dict[str, AttributeValue]]:
        connection = self._connection(endpoint)
        status: list[Row] | None = None
        failure: Exception | None = None
        for statement in _MARIADB_STATUS:
            try:
                status = _rows(connection, statement)
                break
            except Exception as exc:  # older servers have no SHOW ALL SLAVES STATUS
                failure = exc
        if status is None:
            assert failure is not None
            raise failure
        return mariadb_lag(status, _scalar(connection, _MARIADB_SLAVE_POS), primary_pos)

    def _write_protection(self, endpoint: Endpoint) -> dict[str, AttributeValue]:
        """Whether the replica accepts writes; nothing when it will not say (a failure here
        does not make the replica unreachable)."""
        flavor = flavor_by_name(self.flavor)
        try:
            rows = _rows(self._connection(endpoint), flavor.read_only_statement())
            if not rows:
                return {}
            return write_protection_attributes(flavor.parse_read_only(list(rows[0].values())))
        except Exception as exc:
            logger.info("lag sampler: %s read-only state unknown: %s", endpoint.name, exc)
            return {}

    def _primary_position(self) -> str | None:
        primary = self.primary
        if self.flavor != "mariadb" or primary is None:
            return None
        try:
            return _scalar(self._connection(primary), _MARIADB_BINLOG_POS)
        except Exception:
            logger.info("lag sampler: cannot read the primary's position", exc_info=True)
            self._forget(primary)
            return None

    def _record(
        self, endpoint: Endpoint, start: int, attributes: dict[str, AttributeValue]
    ) -> SpanRecord:
        base: dict[str, AttributeValue] = {
            RECORD_KIND: RecordKind.LAG_SAMPLE.value,
            DB_SYSTEM_NAME: self.flavor,
            SERVER_ADDRESS: endpoint.host,
            SERVER_PORT: endpoint.port,
            LAG_REPLICA: endpoint.name,
            LAG_REACHABLE: True,
        }
        if endpoint.label:
            base[LAG_REPLICA_NAME] = endpoint.label
        base.update(attributes)
        failed = base.get(LAG_REACHABLE) is False
        return SpanRecord(
            name=LAG_SAMPLE_SPAN,
            kind=SpanKind.INTERNAL,
            trace_id=new_trace_id(),
            span_id=new_span_id(),
            start_ns=start,
            end_ns=max(start, self._clock_ns()),
            attributes=base,
            status=StatusCode.ERROR if failed else StatusCode.UNSET,
        )

    def sample(self) -> list[SpanRecord]:
        """Poll every replica once; emit and return the records."""
        records: list[SpanRecord] = []
        with self._lock:
            primary_pos = self._primary_position()
            for endpoint in self.replicas:
                start = self._clock_ns()
                try:
                    if self.flavor == "mysql":
                        channels = self._read_mysql(endpoint)
                    else:
                        channels = self._read_mariadb(endpoint, primary_pos)
                except Exception as exc:
                    logger.info("lag sampler: %s failed: %s", endpoint.name, exc)
                    self._forget(endpoint)
                    cls = type(exc)
                    failure: dict[str, AttributeValue] = {
                        LAG_REACHABLE: False,
                        ERROR_TYPE: f"{cls.__module__}.{cls.__qualname__}",
                    }
                    records.append(self._record(endpoint, start, failure))
                    continue
                if not channels:  # reachable, but not replicating
                    channels = {"": {LAG_CHANNEL: ""}}
                protection = self._write_protection(endpoint)
                records.extend(
                    self._record(endpoint, start, {**attributes, **protection})
                    for attributes in channels.values()
                )
            self.rounds += 1
        for record in records:
            self._emit(record)
        return records

    # ------------------------------------------------------------------ loop

    def run(self, stop: threading.Event | None = None, rounds: int | None = None) -> int:
        """Sample every ``interval`` seconds until ``stop`` is set or ``rounds`` rounds are
        done; returns the rounds done."""
        stop = stop if stop is not None else self._stop
        done = 0
        next_at = time.monotonic()
        while not stop.is_set() and (rounds is None or done < rounds):
            self.sample()
            done += 1
            if rounds is not None and done >= rounds:
                break
            next_at += self.interval
            stop.wait(max(0.0, next_at - time.monotonic()))
        return done

    def start(self) -> None:
        """Sample on a background thread until :meth:`stop`."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="consistent-lag-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background thread and close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.close()
