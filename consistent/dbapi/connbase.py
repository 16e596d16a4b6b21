"""What the blocking and the asyncio connections share above the session core: reading the
primary's driver connection without I/O (its ids, version, protocol, encoding, counters),
the checks of some arguments, and attaching the background monitor.

:class:`ConnectionBase` is :class:`~consistent.dbapi.core.SessionCore` plus these; each form's
``Connection`` (:mod:`consistent.dbapi.connection`, :mod:`consistent.aio.connection`) inherits
it and adds the methods that talk to the servers, blocking or awaited.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from consistent import errors
from consistent.dbapi import _pymysql
from consistent.dbapi.config import ServerSpec
from consistent.dbapi.core import NOT_CONNECTED, PRIMARY_LOST, Link, SessionCore
from consistent.dbapi.monitor import process_monitors
from consistent.policy import PRIMARY, process_knowledge
from consistent.policy.roles import SharedRoles
from consistent.telemetry import default_telemetry
from consistent.telemetry.roles import role_change_record

__all__ = ["ConnectionBase"]

logger = logging.getLogger(__name__)


class _ServerLink(Link, Protocol):
    @property
    def options(self) -> dict[str, Any]:
        """The PyMySQL keywords that reach the server (the monitor connects with them)."""


class ConnectionBase(SessionCore):
    """The session core plus what both connection forms read from the primary's connection."""

    _primary: _ServerLink
    _replicas: dict[str, Any]
    _escaper: Any
    #: The form's server link class (blocking or asyncio).
    _link_class: Callable[..., _ServerLink]
    _observer: Callable[[str, int, bytes], None]

    def _new_link(self, spec: ServerSpec, *, replica: bool) -> Any:
        """A link to ``spec``: a replica (autocommit on) or the primary (the session's
        autocommit mode)."""
        options = self._config.server_options(spec, replica=replica)
        if replica:
            options["autocommit"] = True
        else:
            policy = self._policy_or_none
            options["autocommit"] = self._config.autocommit if policy is None else policy.autocommit
        return self._link_class(
            spec.name if replica else PRIMARY,
            spec,
            options,
            replica=replica,
            observer=self._observer,
        )

    # ------------------------------------------------------------------ properties

    @property
    def open(self) -> bool:
        """True until closed (or until the primary connection was lost)."""
        return not self._closed and self._lost is None and self._primary.connected

    @property
    def _needs_reopen(self) -> bool:
        """Closed, lost, or without an open primary connection: what ``ping(reconnect=True)``
        opens again."""
        return self._closed or self._lost is not None or not self._primary.connected

    @property
    def server_version(self) -> str:
        """The primary's version string."""
        return self.get_server_info()

    @property
    def encoding(self) -> str:
        """The Python codec of the connection character set (the driver's attribute)."""
        raw = self._primary.raw
        if raw is None:
            raise errors.InterfaceError(0, NOT_CONNECTED)
        return str(raw.encoding)

    # ------------------------------------------------------------------ the primary's connection

    def _open_primary(self) -> Any:
        """The primary's driver connection, the logical connection being open (for escaping:
        until a primary the session moved to opens, the old one's connection escapes as the
        session does)."""
        self._check_open()
        raw = self._primary.raw
        if raw is None:
            raw = self._escaper.connection
        return raw

    def insert_id(self) -> int:
        """``LAST_INSERT_ID`` of the last statement on the primary."""
        raw = self._primary.raw
        return int(raw.insert_id() or 0) if raw is not None else 0

    def thread_id(self) -> int:
        """The primary connection's server thread id."""
        raw = self._primary.raw
        return int(raw.thread_id()) if raw is not None else 0

    def get_server_info(self) -> str:
        """The primary's version string."""
        raw = self._primary.raw
        return str(raw.get_server_info()) if raw is not None else ""

    def get_host_info(self) -> str:
        """How the primary connection is made (``"socket host:port"``), as the driver says."""
        raw = self._primary.raw
        return str(raw.get_host_info()) if raw is not None else "Not connected"

    def get_proto_info(self) -> int:
        """The primary's protocol version, as the driver says."""
        raw = self._primary.raw
        return int(raw.get_proto_info()) if raw is not None else 0

    def affected_rows(self) -> int:
        """Rows the last cursor statement affected (or returned), on the server that ran it,
        as the driver's method reports them."""
        raw = self._link(self._query_target).raw
        return int(raw.affected_rows() or 0) if raw is not None else 0

    def _mogrify(self, query: str, args: Any) -> str:
        return str(self._escaper.mogrify(query, args))

    # ------------------------------------------------------------------ checks and monitoring

    @staticmethod
    def _kill_statement(thread_id: int) -> str:
        """``KILL thread_id``, once ``thread_id`` is known to be an integer."""
        if not isinstance(thread_id, int):
            raise TypeError("thread_id must be an integer")
        return f"KILL {thread_id:d}"

    @staticmethod
    def _check_charset(charset: str) -> None:
        if not _pymysql.charset_known(charset):
            raise errors.ProgrammingError(f"unknown character set {charset!r}")

    def _attach_monitor(self) -> None:
        """Have the process's monitor follow the replicas, when there are replicas and a
        ``monitor_interval`` (and learn the servers' roles, with ``discover_roles``)."""
        config = self._config
        interval = config.monitor_interval
        if config.replicas and interval is not None:
            registry = process_monitors()
            knowledge = self._policy.knowledge
            roles = self._roles
            if roles is not None:
                telemetry = self._telemetry_arg or default_telemetry()
                if telemetry.active and id(telemetry) not in roles.listeners:
                    system = self._flavor.name
                    roles.listeners[id(telemetry)] = lambda previous, verdict: telemetry.emit(
                        role_change_record(previous, verdict, system)
                    )
            registry.attach(
                self,
                knowledge,
                self._flavor,
                (config.primary.name, self._primary.options),
                [(name, link.options) for name, link in self._replicas.items()],
                interval=interval,
                roles=self._roles,
            )

    # ------------------------------------------------------------------ role discovery

    def _adopt_roles(self) -> None:
        """Before opening: take the topology's roles, and its primary when the monitors
        already found that another server than the configured one is the primary."""
        config = self._config
        if not (config.discover_roles and config.replicas and config.monitor_interval):
            return
        knowledge = self._knowledge_arg
        roles = process_monitors().roles(
            knowledge if knowledge is not None else process_knowledge(),
            config.primary.name,
            [s.name for s in config.servers],
            config.discover_replicas,
        )
        self._roles = roles
        if roles.primary != config.primary.name:
            config = self._config = config.with_primary(roles.primary)
            self._primary = self._new_link(config.primary, replica=False)
            if self._replicas:
                self._replicas = {
                    spec.name: self._new_link(spec, replica=True) for spec in config.replicas
                }

    def _follow_roles(self) -> None:
        """Before a statement: when the monitors found another primary, move the session
        there (see :meth:`_move_primary`)."""
        roles = self._roles
        if roles is None:
            return
        if roles.discovered_version != self._discovered_version:
            self._follow_discovered(roles)
        if roles.primary != self._config.primary.name:
            self._move_primary(roles.primary)
        history = roles.history
        if history is not self._history and history is not None:
            self._history = history
            if history[0] == self._config.primary.name:
                self._check_lost(history[0], history[1])
        if self._lost_gtids is not None:
            self._span.lost(self._lost_gtids)

    def _follow_discovered(self, roles: SharedRoles) -> None:
        """Replicas the primary lists joined or left the topology: the session reads from
        the ones that joined from now on (a connection of their own each, opened when
        first used), and no more from the ones that left."""
        self._discovered_version = roles.discovered_version
        config = self._config
        now = roles.discovered - {config.primary.name}
        gone = self._discovered - now
        kept = [spec for spec in config.replicas if spec.name not in gone]
        names = {spec.name for spec in kept} | {config.primary.name}
        joining = [ServerSpec.parse(name) for name in sorted(now - names)]
        self._discovered = frozenset(now)
        if not gone and not joining:
            return
        for name in gone:
            link = self._replicas.pop(name, None)
            if link is not None:
                link.drop()
        tracer = self._tracer
        for spec in joining:
            self._replicas[spec.name] = self._new_link(spec, replica=True)
            tracer.set_address(spec.name, (spec.host, spec.port))
        self._config = dataclasses.replace(config, replicas=(*kept, *joining))
        self._policy.replicas = [spec.name for spec in self._config.replicas]

    def _check_lost(self, primary: str, row: Sequence[object]) -> None:
        """Compare what the session requires with what its new primary ever had: GTIDs it
        never had were lost by the failover.  Reads are not refused (no server will ever have
        them: the session would fail for good); every statement's span says which GTIDs are
        missing, and the statements are counted, until :meth:`reset_token`."""
        self._drain()
        missing = self._flavor.missing_gtids(self._policy.required, row)
        if missing is None:
            return
        self._lost_gtids = missing
        logger.error(
            "the session required %s, which the new primary %s never had: a failover lost "
            "these writes; its reads no longer see them anywhere (spans say so in "
            "consistent.gtid.lost until reset_token())",
            missing,
            primary,
        )

    def _move_primary(self, address: str) -> None:
        """Make the server at ``address`` the session's primary and the old primary one of
        its replicas.  The old primary's connection is closed; the new one opens at the next
        statement with the session's replayable state (schema, character set, variables)
        and its token, which stays valid (the servers share one history).  A session that
        held what cannot follow (an open transaction on the old primary or on the promoted
        replica, temporary tables, locks, prepared statements: its pins) is lost instead:
        this and every later call raise 2013 until ``ping(reconnect=True)``/``connect()``
        opens a fresh session on the new primary."""
        policy = self._policy
        old = self._config.primary.name
        config = self._config.with_primary(address)
        txn = policy.transaction
        held = [
            *(["a transaction"] if txn is not None and txn.server in (PRIMARY, address) else []),
            *policy.pins,
        ]
        self._config = config
        self._direct = None
        self._primary.drop()
        promoted = self._replicas.pop(address, None)
        if promoted is not None:
            promoted.drop()
        kept = self._replicas
        self._replicas = {
            spec.name: kept.get(spec.name) or self._new_link(spec, replica=True)
            for spec in config.replicas
        }
        self._primary = self._new_link(config.primary, replica=False)
        self._primary.replay = True
        policy.replicas = [spec.name for spec in config.replicas]
        tracer = self._tracer
        tracer.set_address(PRIMARY, (config.primary.host, config.primary.port))
        for spec in config.replicas:
            tracer.set_address(spec.name, (spec.host, spec.port))
        if held:
            self._lost = (
                f"the primary moved from {old} to {address}: what the session held on "
                f"{old} ({', '.join(held)}) is lost; open a new connection (or call "
                "ping(reconnect=True))"
            )
            raise errors.OperationalError(PRIMARY_LOST, self._lost)
