"""The wrapper's background monitors: one thread per server, shared by the whole process.

A read must not be what finds out that a replica is back, or caught up: the monitor does
(DESIGN "How a read gets to a replica", step 5).  Every ``monitor_interval`` seconds it reads
one server's executed GTID state on a connection of its own and tells the replica knowledge
(:class:`~consistent.policy.ReplicaKnowledge`): the primary's state grows its history, a
replica's state, health and lag follow from a poll (``record_poll``); a replica that cannot be
reached, or does not answer within the poll's deadline, is marked failed, and the monitor tries
again every interval, so a recovered replica serves reads one interval after it answers.

Why one per process, like the topology monitors of other drivers: what a poll learns is a fact
about the server, kept in knowledge shared by the process's connections, so a pool of twenty
connections to the same servers needs one poll per server per interval, not twenty.  A monitor
is keyed by (knowledge, server, user), takes its interval and connection options from the
connection that started it, and runs while one open connection uses it: a connection
registers when it opens and unregisters when it closes; it is held by a weak reference, so one
dropped without ``close()`` releases its monitors too.  The thread ends within one interval
after its last user is gone.  Threads do not survive ``fork()``: the child starts with no
monitor, and its first connections start their own.

Roles (``discover_roles``, on by default): each poll also reads the server's ``read_only`` state
and which servers it replicates from, and hands them to the topology's
:class:`~consistent.policy.roles.SharedRoles`, which names the primary
(:mod:`consistent.policy.roles`).  A monitor polls its server as the primary or as a replica
by what the roles say at that poll, so the old primary becomes a replica in the knowledge and
the new one its primary.

Cost: one connection and one ``SELECT`` per server per interval (0.2 s by default) for each
process, two statements more with role discovery; ``monitor_interval=0`` turns monitoring off
(replicas that failed are then tried again by reads once their cool-down ends, and roles are
not discovered).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Final

from consistent.dbapi import _pymysql
from consistent.dbapi._pymysql import TrackingConnection
from consistent.errors import Error
from consistent.flavors import Flavor, ServerRole
from consistent.hostport import split_host_port
from consistent.policy import ReplicaKnowledge
from consistent.policy.deadlines import monitor_poll_timeout
from consistent.policy.roles import AllowList, ServerObservation, SharedRoles

__all__ = ["MonitorRegistry", "ServerMonitor", "process_monitors"]

logger = logging.getLogger(__name__)

# Options a monitor connection does not take from the application's: it needs no schema (one
# may be dropped while the monitor runs) and sets its own deadline.
_NOT_FOR_MONITOR: Final = frozenset({"database", "db", "read_timeout", "init_command"})


class ServerMonitor:
    """Polls one server, named by its address, on a thread of its own (see the module
    docstring).  ``primary`` is the address of the topology's primary (the server itself when
    it is the primary); ``options`` are the PyMySQL keywords that reach the server."""

    def __init__(
        self,
        address: str,
        primary: str,
        options: dict[str, Any],
        knowledge: ReplicaKnowledge,
        flavor: Flavor,
        *,
        interval: float,
        registry: MonitorRegistry,
    ) -> None:
        self.address = address
        self.primary = primary
        self.interval = interval
        self._options = {k: v for k, v in options.items() if k not in _NOT_FOR_MONITOR}
        self._options["read_timeout"] = monitor_poll_timeout(interval)
        self._options["autocommit"] = True
        self._knowledge = knowledge
        self._flavor = flavor
        self._registry = registry
        #: The topologies whose roles this server's observations feed.
        self.roles: list[SharedRoles] = []
        #: The roles last read: ``@@read_only`` (``None``: not known) and the sources.
        self.read_only: bool | None = None
        self.sources: frozenset[str] | None = None
        #: Started for a replica the primary listed (replica discovery).
        self.discovered = False
        self._replicas_refused = False
        self._conn: TrackingConnection | None = None
        self._stop = threading.Event()
        #: The connections this monitor serves (held weakly).
        self.users: weakref.WeakSet[object] = weakref.WeakSet()
        #: Polls that succeeded, and whether the last one did (``None`` before the first).
        self.polls = 0
        self.healthy: bool | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"consistent-monitor-{address}", daemon=True
        )

    @property
    def is_primary(self) -> bool:
        """Whether this poll reads the server as the primary: what the roles say, or the
        configured primary without role discovery."""
        roles = self.roles
        return self.address == (roles[0].primary if roles else self.primary)

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Make the thread look at its users now (the last one may be gone)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._registry.retire_if_unused(self):
                try:
                    self.poll()
                except Exception:  # a bug of ours must not end the monitoring
                    logger.exception("monitor: polling %s failed", self.address)
                if self._stop.wait(self.interval):
                    self._stop.clear()
        finally:
            self._close()

    def poll(self) -> None:
        """One poll: read the server's executed state and tell the knowledge."""
        knowledge = self._knowledge
        started = knowledge.now()
        roles = list(self.roles)
        primary = roles[0].primary if roles else self.primary
        is_primary = self.address == primary
        flavor = self._flavor
        try:
            conn = self._conn
            if conn is None or not conn.open:
                conn = self._conn = TrackingConnection(observer=None, **self._options)
            if roles:
                # The roles ride on the executed-state poll: one round trip, as without them.
                role = ServerRole.PRIMARY if is_primary else ServerRole.REPLICA
                sql = flavor.executed_and_read_only_statement(role)
                _, rows = _pymysql.query_table(conn, sql)
                row = rows[0] if rows else (None,)
                state = flavor.parse_executed(row[0])
                self._read_roles(conn, row[1:])
                if is_primary:
                    self._read_history(conn, roles)
                    self._list_replicas(conn, roles)
            else:
                role = ServerRole.PRIMARY if is_primary else ServerRole.REPLICA
                statement = flavor.executed_state_statement(role)
                state = flavor.parse_executed(_pymysql.query_value(conn, statement))
        except Exception as exc:
            self._close()
            if self.healthy is not False:
                logger.warning("monitor: %s is unreachable: %s", self.address, exc)
            self.healthy = False
            if not is_primary:
                knowledge.record_failure(self.address)
            self._tell(roles)
            return
        if self.healthy is False:
            logger.info("monitor: %s answers again", self.address)
        self.healthy = True
        self.polls += 1
        if is_primary:
            knowledge.record_primary_state(self.address, state)
        elif all(shared.trusts(self.address, state, flavor) for shared in roles):
            knowledge.record_poll(self.address, state, started=started, primary=primary)
        else:
            knowledge.record_failure(self.address)  # not to be read from (see trusts)
        self._tell(roles)

    def _read_roles(self, conn: TrackingConnection, read_only: Sequence[object]) -> None:
        """Take the server's ``read_only`` state (the poll's other columns), and read its
        replication sources while it accepts writes; what the server will not say (an
        error: no privilege to read replication) stays unknown."""
        flavor = self._flavor
        try:
            self.read_only = not flavor.parse_read_only(read_only).writable
            if not self.read_only:
                # Only a writable server's sources decide its role (SHOW SLAVE STATUS
                # contends with a replica's own replication threads).
                table = self._read(conn, flavor.replication_sources_statement())
                if table is not None:
                    self.sources = flavor.parse_replication_sources(*table)
        except Error as exc:  # an answer that does not parse: it stays unknown
            logger.debug("monitor: %s: roles unknown: %s", self.address, exc)

    def _read(
        self, conn: TrackingConnection, sql: str
    ) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]] | None:
        """``sql``'s columns and rows, or ``None`` when the server refused it (logged)."""
        try:
            return _pymysql.query_table(conn, sql)
        except Exception as exc:
            if not _pymysql.is_server_error(exc):
                raise
            logger.debug("monitor: %s: %s refused: %s", self.address, sql, exc)
            return None

    def _list_replicas(self, conn: TrackingConnection, roles: list[SharedRoles]) -> None:
        """Replica discovery: the replicas connected to this primary that a topology's
        allow-list admits join it, with monitors of their own; those no longer listed
        leave."""
        wanting = [shared for shared in roles if shared.allow]
        if not wanting:
            return
        flavor = self._flavor
        table = self._read(conn, flavor.replica_hosts_statement())
        if table is None:
            if not self._replicas_refused:
                self._replicas_refused = True
                logger.warning(
                    "monitor: %s will not list its replicas (the user needs REPLICATION "
                    "MASTER ADMIN on MariaDB, REPLICATION SLAVE on MySQL)",
                    self.address,
                )
            return
        try:
            listed = flavor.parse_replica_hosts(*table)
        except Error as exc:
            logger.debug("monitor: %s: replicas unknown: %s", self.address, exc)
            return
        for shared in wanting:
            joined, left = shared.listed(listed)
            if joined or left:
                self._registry.follow_discovered(self, shared, joined, left)

    def _read_history(self, conn: TrackingConnection, roles: list[SharedRoles]) -> None:
        """Once this server became the primary: what it has of the history, for the
        sessions to tell whether the change lost GTIDs they required."""
        wanting = [shared for shared in roles if shared.wants_history(self.address)]
        if not wanting:
            return
        _, rows = _pymysql.query_table(conn, self._flavor.history_statement())
        row = rows[0] if rows else ()
        for shared in wanting:
            shared.history = (self.address, row)

    def _tell(self, roles: list[SharedRoles]) -> None:
        """Hand what the poll learnt of the server's roles to the topologies it belongs to."""
        if not roles:
            return
        observation = ServerObservation(
            self.address,
            reachable=bool(self.healthy),
            read_only=self.read_only,
            sources=self.sources,
        )
        for shared in roles:
            shared.observe(observation)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                _pymysql.force_close(conn)


class MonitorRegistry:
    """The monitors of a process, by (knowledge, server, user)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._monitors: dict[tuple[int, str, str], ServerMonitor] = {}
        self._roles: dict[tuple[int, frozenset[str]], SharedRoles] = {}

    def roles(
        self,
        knowledge: ReplicaKnowledge,
        primary: str,
        servers: Sequence[str],
        allow: AllowList | None = None,
    ) -> SharedRoles:
        """The roles of the topology of ``servers`` (all of them, the primary included):
        those its monitors already learnt, whichever server a connection names as the
        primary, or new ones that start from ``primary``.  ``allow``: replicas the primary
        lists there may join (the first connection that gives one turns discovery on)."""
        key = (id(knowledge), frozenset(servers))
        with self._lock:
            shared = self._roles.get(key)
            if shared is None:
                shared = self._roles[key] = SharedRoles(primary, servers, knowledge)
            if allow and not shared.allow:
                shared.allow = allow
            return shared

    def attach(
        self,
        user: object,
        knowledge: ReplicaKnowledge,
        flavor: Flavor,
        primary: tuple[str, dict[str, Any]],
        replicas: Sequence[tuple[str, dict[str, Any]]],
        *,
        interval: float,
        roles: SharedRoles | None = None,
    ) -> None:
        """Have the primary and the replicas (each an address and the PyMySQL options that
        reach it) monitored while ``user`` lives or until :meth:`detach`; a monitor already
        running for a server is shared.  With ``roles``, the monitors read each server's
        roles for them."""
        started: list[ServerMonitor] = []
        primary_address = primary[0]
        with self._lock:
            for address, options in (primary, *replicas):
                key = (id(knowledge), address, str(options.get("user", "")))
                monitor = self._monitors.get(key)
                if monitor is None:
                    monitor = ServerMonitor(
                        address,
                        primary_address,
                        options,
                        knowledge,
                        flavor,
                        interval=interval,
                        registry=self,
                    )
                    self._monitors[key] = monitor
                    started.append(monitor)
                monitor.users.add(user)
                if roles is not None and roles not in monitor.roles:
                    monitor.roles = [*monitor.roles, roles]
        for monitor in started:
            monitor.start()

    def follow_discovered(
        self,
        primary: ServerMonitor,
        roles: SharedRoles,
        joined: frozenset[str],
        left: frozenset[str],
    ) -> None:
        """Monitor the replicas that joined ``roles`` (connecting as ``primary``'s monitor
        does, for as long as it has users), and stop those started for replicas that left."""
        user = str(primary._options.get("user", ""))
        started: list[ServerMonitor] = []
        with self._lock:
            for name in joined:
                key = (id(primary._knowledge), name, user)
                monitor = self._monitors.get(key)
                if monitor is None:
                    host, port = split_host_port(name)
                    monitor = ServerMonitor(
                        name,
                        primary.primary,
                        {**primary._options, "host": host, "port": port},
                        primary._knowledge,
                        primary._flavor,
                        interval=primary.interval,
                        registry=self,
                    )
                    monitor.discovered = True
                    monitor.users = primary.users  # the same connections, the same lifetime
                    self._monitors[key] = monitor
                    started.append(monitor)
                if roles not in monitor.roles:
                    monitor.roles = [*monitor.roles, roles]
            for name in left:
                monitor = self._monitors.get((id(primary._knowledge), name, user))
                if monitor is None or not monitor.discovered:
                    continue
                monitor.roles = [shared for shared in monitor.roles if shared is not roles]
                if not monitor.roles:
                    monitor.users = weakref.WeakSet()
                    monitor.wake()
        for monitor in started:
            monitor.start()

    def detach(self, user: object) -> None:
        """``user`` no longer needs its monitors; those left without users stop."""
        with self._lock:
            monitors = list(self._monitors.values())
        for monitor in monitors:
            if user in monitor.users:
                monitor.users.discard(user)
                if not monitor.users:
                    monitor.wake()

    def retire_if_unused(self, monitor: ServerMonitor) -> bool:
        """Called by a monitor's thread before each poll: True (and the monitor is forgotten)
        when no connection uses it any more."""
        with self._lock:
            if monitor.users:
                return False
            for key, known in list(self._monitors.items()):
                if known is monitor:
                    del self._monitors[key]
            return True

    def monitors(self) -> list[ServerMonitor]:
        """The running monitors (for tests and diagnostics)."""
        with self._lock:
            return list(self._monitors.values())

    def reset(self) -> None:
        """Forget every monitor (in a child after ``fork()``, where their threads are gone)."""
        self._lock = threading.Lock()
        self._monitors = {}
        self._roles = {}


@functools.cache
def process_monitors() -> MonitorRegistry:
    """The process's monitors (see the module docstring)."""
    registry = MonitorRegistry()
    os.register_at_fork(after_in_child=registry.reset)
    return registry
