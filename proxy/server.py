"""The proxy server: listens for clients, runs their sessions, watches the backends.

:class:`ProxyServer` owns everything that lives as long as the process: the listening socket, the
sessions (one task each, awaited), a :class:`~proxy.backends.BackendServer` and its health monitor
per configured server, the process-wide :class:`~consistent.policy.ReplicaKnowledge` and
:class:`~consistent.policy.AcknowledgedWrites` (what the primary acknowledged to any session,
which ``read_all_writes`` reads require), the user table and the metrics.  :func:`run` runs one
on uvloop when it is installed.

Lifecycle::

    server = ProxyServer(config)
    await server.start()          # detect the flavour, start monitors, listen
    ...
    server.reload(new_config)     # SIGHUP: backends, users, pool limits; sessions keep the rest
    await server.shutdown()       # stop listening, drain sessions until the deadline, close

The flavour (MySQL or MariaDB) comes from the configuration or from the primary's handshake
(a replica's if the primary cannot be reached); clients are greeted with that server's version
string, so that connectors enable the same features as they would talking to it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
from collections.abc import Mapping, Sequence
from typing import Final

from consistent.classify import FunctionRules
from consistent.errnos import ER
from consistent.flavors import Flavor, ServerRole, detect_flavor, flavor_by_name
from consistent.policy import PRIMARY, AcknowledgedWrites, ReplicaKnowledge, format_token
from consistent.policy.roles import (
    OnSplitBrain,
    RoleVerdict,
    ServerObservation,
    SharedRoles,
)
from consistent.protocol import Capability, ErrPacket, build_err
from consistent.telemetry import Telemetry, default_telemetry
from consistent.telemetry.appspans import provider_telemetry
from consistent.telemetry.roles import role_change_record
from proxy.admin import AdminServer
from proxy.admission import LoginGate
from proxy.backends import BackendServer, Credentials, HealthMonitor
from proxy.clientlogin import (
    RELAYED_MARIADB_CAPABILITIES,
    AccessDenied,
    Authenticator,
    login_ok,
    proxy_capabilities,
)
from proxy.config import Address, ConfigError, ProxyConfig
from proxy.handshake import BACKEND_CAPABILITIES
from proxy.metrics import (
    PRIMARY_ROLE,
    REPLICA_ROLE,
    BackendSample,
    PoolSample,
    ProxyMetrics,
    Snapshot,
)
from proxy.pool import ConnectionPool, PoolSettings
from proxy.session import Session
from proxy.stream import ConnectionClosed, PacketEndpoint, frame
from proxy.threads import new_session_id

__all__ = ["ProxyServer"]

logger = logging.getLogger(__name__)

_DEFAULT_VERSIONS: Final = {
    "mysql": "8.0.36-consistent",
    "mariadb": "5.5.5-10.11.0-MariaDB-consistent",
}
_DEFAULT_CHARSET: Final = 45  # utf8mb4_general_ci
_LISTEN_BACKLOG: Final = 2048


class _ClientEndpoint(PacketEndpoint):
    """A client connection: hands itself to the server once connected."""

    def __init__(self, server: ProxyServer) -> None:
        super().__init__(max_payload=server.config.max_allowed_packet)
        self._server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server._accepted(self)


def _server_tls(config: ProxyConfig) -> ssl.SSLContext | None:
    tls = config.tls
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS certificate or key: {e}") from None
    return context


def _backend_tls(config: ProxyConfig) -> ssl.SSLContext | None:
    b = config.backends
    if not b.tls:
        return None
    context = ssl.create_default_context(cafile=str(b.tls_ca) if b.tls_ca else None)
    if not b.tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _pool_settings(config: ProxyConfig) -> PoolSettings:
    """The pools' limits of ``config``'s ``[pool]`` table."""
    p = config.pool
    return PoolSettings(
        max_connections=p.max_connections,
        wait_timeout=p.wait_timeout,
        idle_timeout=p.idle_timeout,
        ping_after=p.ping_after,
        hold_prepared=p.hold_prepared,
    )


class ProxyServer:
    """See the module docstring.  ``knowledge`` and ``acknowledged`` may be injected (tests
    control the clock, or share them between proxies)."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        knowledge: ReplicaKnowledge | None = None,
        acknowledged: AcknowledgedWrites | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._config = config
        # Statement spans go to the process's telemetry (from the environment) unless one is
        # given or the configuration names the process's OpenTelemetry provider.
        if telemetry is None:
            provider = config.tracer_provider
            telemetry = provider_telemetry(provider) if provider else default_telemetry()
        self._telemetry = telemetry
        self._knowledge = knowledge if knowledge is not None else ReplicaKnowledge()
        self._acknowledged = acknowledged if acknowledged is not None else AcknowledgedWrites()
        self._metrics = ProxyMetrics()
        self._metrics.snapshot = self._snapshot
        self._authenticator = Authenticator(config.users)
        self._servers: dict[str, BackendServer] = {}
        #: The shared backend pools, by server object and backend login.
        self._pools: dict[tuple[int, str, str, int, int], ConnectionPool] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._monitor_tasks: set[asyncio.Task[None]] = set()
        self._logins: dict[_ClientEndpoint, asyncio.Task[None]] = {}
        self._sessions: dict[int, Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = LoginGate(
            total=config.max_unauthenticated, per_address=config.max_unauthenticated_per_address
        )
        #: Proxy ids of the sessions and of the logins in progress (never two alike).
        self._ids: set[int] = set()
        self._listener: asyncio.Server | None = None
        self._flavor: Flavor | None = None
        self._functions: FunctionRules | None = None
        self._server_version = ""
        self._charset = _DEFAULT_CHARSET
        self._front_tls = _server_tls(config)
        self._backend_tls = _backend_tls(config)
        self._closing = False
        self._admin: AdminServer | None = None
        self.reloads = 0
        #: The last verdict of role discovery (``None`` before the monitors have spoken).
        self.roles: RoleVerdict | None = None
        self._shared_roles: SharedRoles | None = None
        #: Replicas that joined because the primary listed them (``discover_replicas``).
        self._discovered: tuple[Address, ...] = ()

    # ----------------------------------------------------------------- SessionHost

    @property
    def config(self) -> ProxyConfig:
        return self._config

    @property
    def knowledge(self) -> ReplicaKnowledge:
        return self._knowledge

    def pool_for(self, server: BackendServer, credentials: Credentials) -> ConnectionPool:
        """The shared pool of ``server``'s connections for ``credentials``' login (created
        on first use, with the limits of the configuration at that time)."""
        key = (
            id(server),
            credentials.user,
            credentials.password,
            credentials.capabilities,
            credentials.mariadb_capabilities,
        )
        pool = self._pools.get(key)
        if pool is None:
            settings = _pool_settings(self._config)
            where = server.address.name
            if server.name != where:
                where = f"{server.name} {where}"
            name = f"{where} as {credentials.user}"
            if any(other.name == name for other in self._pools.values()):
                name += f" #{len(self._pools) + 1}"  # other capabilities: a pool apart
            pool = self._pools[key] = ConnectionPool(name, settings)
        return pool

    async def _reap(self) -> None:
        """Close pooled connections idle past ``pool.idle_timeout``."""
        while True:
            await asyncio.sleep(max(0.05, min(self._config.pool.idle_timeout / 4, 5.0)))
            for pool in list(self._pools.values()):
                pool.reap()

    @property
    def acknowledged(self) -> AcknowledgedWrites:
        return self._acknowledged

    @property
    def metrics(self) -> ProxyMetrics:
        return self._metrics

    @property
    def authenticator(self) -> Authenticator:
        return self._authenticator

    @property
    def telemetry(self) -> Telemetry:
        return self._telemetry

    @property
    def flavor(self) -> Flavor:
        if self._flavor is None:
            raise RuntimeError("the proxy has not started")
        return self._flavor

    @property
    def functions(self) -> FunctionRules:
        """Which function calls a replica may run, for sessions starting now: the servers'
        family and the configuration's ``read_only_functions``."""
        flavor = self.flavor.name
        declared = self._config.read_only_functions
        rules = self._functions
        if rules is None or rules.flavor != flavor or rules.read_only != declared:
            rules = self._functions = FunctionRules(flavor, declared)
        return rules

    def servers(self) -> Mapping[str, BackendServer]:
        return self._servers

    def session(self, connection_id: int) -> Session | None:
        return self._sessions.get(connection_id)

    @property
    def login_gate(self) -> LoginGate:
        """The limits on logins in progress (:mod:`proxy.admission`)."""
        return self._gate

    @property
    def sessions(self) -> Mapping[int, Session]:
        return self._sessions

    # ----------------------------------------------------------------- lifecycle

    @property
    def admin_port(self) -> int | None:
        """The admin endpoint's port, when it is configured."""
        return self._admin.port if self._admin is not None else None

    @property
    def port(self) -> int:
        """The TCP port clients connect to."""
        listener: object = self._listener
        sockets: Sequence[socket.socket] = getattr(listener, "sockets", None) or ()
        if not sockets:
            raise RuntimeError("the proxy is not listening")
        return int(sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Start monitors, learn the flavour, listen."""
        self._apply_backends(self._config)
        await self._detect()
        loop = asyncio.get_running_loop()
        listen = self._config.listen
        self._listener = await loop.create_server(
            lambda: _ClientEndpoint(self), listen.host, listen.port, backlog=_LISTEN_BACKLOG
        )
        self._reaper = loop.create_task(self._reap())
        if self._config.admin is not None:
            self._admin = AdminServer(
                self._config.admin, metrics=self._metrics.render, status=self.status
            )
            await self._admin.start()
        logger.info(
            "proxy listening on %s:%d (%s, primary %s, %d replicas)",
            listen.host,
            self.port,
            self.flavor.name,
            self._config.backends.primary,
            len(self._config.backends.replicas),
        )

    def _credentials(self, config: ProxyConfig) -> Credentials:
        b = config.backends
        return Credentials(
            user=b.user,
            password=b.password,
            database=None,
            charset=None,
            capabilities=int(BACKEND_CAPABILITIES),
        )

    def _apply_backends(self, config: ProxyConfig, *, discovered: bool = False) -> None:
        """Create servers and monitors for ``config``'s backends; stop the monitors of
        servers it no longer names (sessions in flight keep their server objects).
        ``discovered``: only replicas the primary listed joined or left."""
        b = config.backends
        wanted = {PRIMARY: b.primary, **{a.name: a for a in b.replicas}}
        addresses = frozenset(a.name for a in wanted.values())
        shared = self._shared_roles
        if not b.discover_roles:
            shared = self._shared_roles = None
        elif shared is not None and discovered:
            shared.servers = addresses  # replicas joined or left: what was learnt stays
        elif shared is None or shared.servers != addresses:
            shared = self._shared_roles = SharedRoles(b.primary.name, addresses, self._knowledge)
        for name, server in list(self._servers.items()):
            if wanted.get(name) != server.address:
                self._stop_monitor(server)
                del self._servers[name]
        for name, address in wanted.items():
            existing = self._servers.get(name)
            if existing is not None:
                existing.deadlines = b.deadlines
                if existing.monitor is not None:
                    existing.monitor.list_replicas = name == PRIMARY and bool(b.discover_replicas)
                    existing.monitor.set_credentials(self._credentials(config))
                    existing.monitor.primary = b.primary.name
                continue
            server = BackendServer(
                name,
                address,
                connect_timeout=b.connect_timeout,
                max_payload=config.max_allowed_packet,
                tls_context=self._backend_tls,
                deadlines=b.deadlines,
                statement_duration=self._metrics.statement_duration(
                    address.name, PRIMARY_ROLE if name == PRIMARY else REPLICA_ROLE
                ),
            )
            server.monitor = HealthMonitor(
                server,
                self._credentials(config),
                self._knowledge,
                lambda: self._flavor,
                interval=b.monitor_interval,
                primary=b.primary.name,
            )
            server.monitor.on_roles = self._on_roles
            server.monitor.roles = shared
            server.monitor.on_history = self._on_history
            server.monitor.on_replica_hosts = self._on_replica_hosts
            if b.discover_roles:
                # Roles at every poll: a promoted primary is found within one interval.
                server.monitor.read_only_interval = 0.0
            self._servers[name] = server
            server.monitor.list_replicas = name == PRIMARY and bool(b.discover_replicas)
            task = asyncio.get_running_loop().create_task(server.monitor.run())
            server.monitor_task = task
            self._monitor_tasks.add(task)
            task.add_done_callback(self._monitor_done)

    # ----------------------------------------------------------------- role discovery

    def _on_roles(self, monitor: HealthMonitor) -> None:
        """A monitor read its server's roles: is the primary still the server writes go to?
        (:mod:`consistent.policy.roles`)."""
        shared = self._shared_roles
        if shared is None or self._closing:
            return
        seen = []
        for server in self._servers.values():
            m = server.monitor
            if m is None:
                continue
            protection = m.write_protection
            seen.append(
                ServerObservation(
                    server.address.name,
                    reachable=m.healthy is not False,
                    read_only=None if protection is None else not protection.writable,
                    sources=m.sources,
                )
            )
        shared.observe(*seen)
        verdict = shared.verdict
        if verdict is None:
            return
        self.roles = verdict
        self._metrics.split_brain = shared.split_brain
        primary = self._servers[PRIMARY]
        refuse = shared.split_brain and (
            self._config.backends.on_split_brain is OnSplitBrain.REFUSE
        )
        primary.refusing = (
            f"split brain: {', '.join(verdict.writable)} all accept writes; nothing goes to "
            "the primary until one of them is read-only again (on_split_brain = refuse)"
            if refuse
            else None
        )
        if shared.primary != primary.address.name:
            self._switch_primary(shared.primary)

    def _on_replica_hosts(self, monitor: HealthMonitor) -> None:
        """The primary listed its replicas: those in ``[backends] discover_replicas`` that the
        configuration does not name join the replicas (for sessions that log in from then
        on); one that joined this way and is no longer listed leaves."""
        listed = monitor.replica_hosts
        if listed is None or self._closing:
            return
        config = self._config
        b = config.backends
        known = {b.primary.name, *(a.name for a in b.replicas)}
        joining = []
        for name in sorted(listed - known):
            try:
                address = Address.parse(name)
            except ConfigError:
                continue
            if address.name not in known and b.discover_replicas.allows(address.host):
                joining.append(address)
        leaving = [a for a in self._discovered if a.name not in listed]
        if not joining and not leaving:
            return
        for address in joining:
            logger.info("replica %s discovered (the primary lists it): it joins", address)
        for address in leaving:
            logger.info(
                "discovered replica %s is no longer listed by the primary: it leaves", address
            )
        self._discovered = tuple(a for a in self._discovered if a not in leaving) + tuple(joining)
        replicas = tuple(a for a in b.replicas if a not in leaving) + tuple(joining)
        config = dataclasses.replace(config, backends=dataclasses.replace(b, replicas=replicas))
        self._apply_backends(config, discovered=True)
        self._config = config

    def _on_history(self, monitor: HealthMonitor) -> None:
        """The new primary's history is known: sessions that required GTIDs it never had
        are told (their spans name them) and counted."""
        shared = self._shared_roles
        flavor = self._flavor
        if shared is None or shared.history is None or flavor is None:
            return
        address, row = shared.history
        for session in list(self._sessions.values()):
            if session.check_lost(flavor, address, row):
                self._metrics.lost_gtid_sessions += 1

    def _switch_primary(self, address: str) -> None:
        """Make the server at ``address`` the primary, and the old primary a replica."""
        config = self._config
        b = config.backends
        servers = [b.primary, *b.replicas]
        promoted = next(a for a in servers if a.name == address)
        backends = dataclasses.replace(
            b, primary=promoted, replicas=tuple(a for a in servers if a is not promoted)
        )
        self._metrics.primary_changes += 1
        verdict = self.roles
        if verdict is not None and self._flavor is not None:
            self._telemetry.emit(role_change_record(b.primary.name, verdict, self._flavor.name))
        logger.warning(
            "sessions write to %s from their next statement; a statement running on %s gets "
            "a lost-connection error, a transaction open there ends its session",
            promoted.name,
            b.primary.name,
        )
        # The GTIDs acknowledged so far stay valid: the servers share their history.
        config = dataclasses.replace(config, backends=backends)
        self._apply_backends(config)
        self._config = config
        server = self._servers[PRIMARY]
        for session in list(self._sessions.values()):
            session.primary_moved(server)

    def _stop_monitor(self, server: BackendServer) -> None:
        if server.monitor is not None:
            server.monitor.stop()
        if server.monitor_task is not None:
            server.monitor_task.cancel()

    def _monitor_done(self, task: asyncio.Task[None]) -> None:
        self._monitor_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a backend monitor failed", exc_info=task.exception())

    async def _detect(self) -> None:
        """Flavour, version string and charset for the greeting."""
        config = self._config
        monitors = [s.monitor for s in self._servers.values() if s.monitor is not None]
        waits = [asyncio.ensure_future(m.first_login.wait()) for m in monitors]
        timeout = config.backends.connect_timeout
        try:
            if waits:
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        primary = self._servers[PRIMARY].monitor
        found = [m for m in [primary, *monitors] if m is not None and m.server_version]
        version = found[0].server_version if found else None
        if config.backends.flavor is not None:
            self._flavor = flavor_by_name(config.backends.flavor)
        elif version is not None:
            self._flavor = detect_flavor(version)
        else:
            raise ConfigError(
                "cannot detect the servers' flavour (no backend answered within "
                f"{timeout:g}s): set backends.flavor"
            )
        self._server_version = (
            config.server_version or version or _DEFAULT_VERSIONS[self._flavor.name]
        )
        if found and found[0].server_charset:
            self._charset = found[0].server_charset or _DEFAULT_CHARSET

    def _offered_mariadb_capabilities(self) -> int:
        """The MariaDB extended capabilities offered to a client: those the proxy relays and
        the primary (where bulk executes go) offers, as its monitor last saw it."""
        server = self._servers.get(PRIMARY)
        monitor = server.monitor if server is not None else None
        if monitor is None:
            return 0
        return monitor.server_mariadb_capabilities & RELAYED_MARIADB_CAPABILITIES

    def reload(self, config: ProxyConfig) -> None:
        """Adopt a new configuration: users, backends and the pools' limits (at once, for
        every pool).  Sessions in flight keep the rest of the configuration they started
        with (multiplexing included); the listening address does not change."""
        self._authenticator.users = config.users
        self._gate.total = config.max_unauthenticated
        self._gate.per_address = config.max_unauthenticated_per_address
        if config.backends.primary != self._config.backends.primary:
            # Another primary: what the old one acknowledged says nothing about it (sessions
            # in flight keep the old primary and its state).
            self._acknowledged = AcknowledgedWrites()
        self._backend_tls = _backend_tls(config)
        self._front_tls = _server_tls(config)
        self._discovered = ()  # the file's replicas; the primary's list adds the rest again
        self._apply_backends(config)
        if self._admin is not None and config.admin is not None:
            self._admin.set_token(config.admin)
        settings = _pool_settings(config)
        for pool in self._pools.values():
            pool.configure(settings)
        self._config = config
        self.reloads += 1
        p = config.pool
        logger.info(
            "configuration reloaded: %d users, primary %s, %d replicas; pools: at most %d "
            "connections each, wait %.1f s, idle %.1f s, ping after %.1f s; multiplexing %s "
            "for sessions that log in from now on (sessions in flight keep theirs); listen "
            "address unchanged (a restart changes it)",
            len(config.users),
            config.backends.primary,
            len(config.backends.replicas),
            p.max_connections,
            p.wait_timeout,
            p.idle_timeout,
            p.ping_after,
            "on" if p.multiplexing else "off",
        )

    async def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting; let sessions finish their command (and transaction) until the
        deadline, then close the rest; stop the monitors."""
        deadline = self._config.shutdown_timeout if timeout is None else timeout
        self._closing = True
        if self._listener is not None:
            self._listener.close()
        for ep, task in list(self._logins.items()):
            ep.abort()  # not a session yet: nothing to drain
            task.cancel()
        for session in list(self._sessions.values()):
            session.drain()
        tasks = set(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=deadline)
            if pending:
                logger.warning("%d sessions still open at the deadline: closing", len(pending))
                for session in list(self._sessions.values()):
                    logger.warning("session %d still open: %s", session.id, session.status())
                    session.abort()
                await asyncio.wait(pending, timeout=5.0)
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        for pool in self._pools.values():
            pool.close()
        for server in self._servers.values():
            self._stop_monitor(server)
        monitors = list(self._monitor_tasks)
        if monitors:
            await asyncio.wait(monitors, timeout=5.0)
        if self._admin is not None:
            await self._admin.close()
        if self._listener is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await self._listener.wait_closed()
        logger.info("proxy stopped")

    # ----------------------------------------------------------------- clients

    def _accepted(self, ep: _ClientEndpoint) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(ep))
        self._tasks.add(task)
        task.add_done_callback(self._client_done)

    def _client_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("client task failed", exc_info=task.exception())

    async def _serve(self, ep: _ClientEndpoint) -> None:
        peer = ep.transport.get_extra_info("peername") if ep.transport else None
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "localhost"
        peer_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) > 1 else 0
        refusal = self._refusal(ep, host)
        if refusal is not None:
            self._metrics.connections_refused += 1
            ep.write(frame(build_err(refusal, Capability.PROTOCOL_41), 0))
            ep.close()
            await ep.wait_closed(5.0)
            return
        connection_id = new_session_id(self._ids)
        self._ids.add(connection_id)
        try:
            await self._login_and_serve(ep, connection_id, host, peer_port)
        finally:
            self._ids.discard(connection_id)
            self._gate.done(host, ep)

    def _refusal(self, ep: _ClientEndpoint, host: str) -> ErrPacket | None:
        """Why a new connection may not start its login (``None``: it may, and it counts as
        a login in progress from now on).  See :mod:`proxy.admission`."""
        if self._closing:
            return ErrPacket(ER.SERVER_SHUTDOWN, "08S01", "Server shutdown in progress")
        if len(self._sessions) + self._gate.pending >= self._config.max_connections:
            return ErrPacket(ER.CON_COUNT_ERROR, "08004", "Too many connections")
        admission = self._gate.admit(host, ep)
        if not admission.admitted:
            logger.debug("connection from %s refused: %s", host, admission.reason)
            return ErrPacket(ER.CON_COUNT_ERROR, "08004", "Too many connections")
        evicted = admission.evicted
        if evicted is not None:
            logger.debug("too many logins in progress: closing an older one to admit %s", host)
            evicted.abort()
        return None

    async def _login_and_serve(
        self, ep: _ClientEndpoint, connection_id: int, host: str, peer_port: int
    ) -> None:
        config = self._config
        task = asyncio.current_task()
        if task is not None:
            self._logins[ep] = task
        try:
            login = await self._authenticator.login(
                ep,
                connection_id=connection_id,
                server_version=self._server_version,
                charset=self._charset,
                capabilities=proxy_capabilities(
                    tls=self._front_tls is not None, local_infile=config.local_infile
                ),
                default_plugin=config.default_auth_plugin,
                host=host,
                tls_context=self._front_tls,
                require_tls=config.tls is not None and config.tls.require,
                timeout=config.connect_timeout,
                mariadb_capabilities=self._offered_mariadb_capabilities(),
            )
        except AccessDenied as denied:
            self._metrics.auth_failures += 1
            logger.info("login refused: %s", denied.msg, extra={"client": host})
            ep.close()
            await ep.wait_closed(5.0)
            return
        except TimeoutError:
            self._metrics.handshake_timeouts += 1
            logger.info("login from %s missed the handshake deadline", host)
            ep.abort()
            return
        except (ConnectionClosed, OSError, ssl.SSLError) as lost:
            logger.debug("client %s went away during login: %r", host, lost)
            ep.abort()
            return
        except Exception as failure:  # malformed handshake and the like: this client only
            self._metrics.client_protocol_errors += 1
            logger.info("bad handshake from %s: %s", host, failure)
            ep.abort()
            return
        finally:
            self._gate.done(host, ep)
            self._logins.pop(ep, None)
        ep.write(frame(login_ok(login.capabilities), login.next_seq))
        logger.debug("login", extra={"client": host, "user": login.user.name})
        session = Session(
            self,
            ep,
            connection_id=connection_id,
            user=login.user.name,
            level=login.user.level,
            capabilities=login.capabilities,
            mariadb_capabilities=login.mariadb_capabilities,
            charset=login.charset,
            database=login.database,
            nonce=login.nonce,
            peer=host,
            peer_port=peer_port,
            tls=login.tls,
        )
        self._sessions[connection_id] = session
        self._metrics.sessions_total += 1
        if login.tls:
            self._metrics.tls_sessions_total += 1
        try:
            session.start()
            if ep.closed:
                session.abort()
            await session.wait_closed()
        finally:
            self._sessions.pop(connection_id, None)

    # ----------------------------------------------------------------- observability

    def _snapshot(self) -> Snapshot:
        """The live state ``/metrics`` shows."""
        backends = []
        for server in self._servers.values():
            monitor = server.monitor
            replica = server.role is ServerRole.REPLICA
            lag = read_only = None
            if replica:
                lag = self._knowledge.view(server.name).lag
                protection = monitor.write_protection if monitor is not None else None
                read_only = protection.read_only if protection is not None else None
            backends.append(
                BackendSample(
                    target=server.name,
                    backend=server.address.name,
                    role=REPLICA_ROLE if replica else PRIMARY_ROLE,
                    up=monitor is not None and monitor.healthy is True,
                    open_connections=server.open_connections,
                    connects=server.connects,
                    connect_failures=server.connect_failures,
                    lag_seconds=lag,
                    read_only=read_only,
                )
            )
        return Snapshot(
            sessions=len(self._sessions),
            logins_in_progress=self._gate.pending,
            backends=tuple(backends),
            pools=tuple(
                PoolSample(p.name, p.borrowed, p.idle, p.waiting, p.exhausted)
                for p in self._pools.values()
            ),
        )

    def _roles_status(self) -> dict[str, object]:
        verdict = self.roles
        return {
            "discovery": self._config.backends.discover_roles,
            "primary": self._servers[PRIMARY].address.name,
            "writable": list(verdict.writable) if verdict is not None else None,
            "split_brain": self._metrics.split_brain,
            "on_split_brain": str(self._config.backends.on_split_brain),
            "refusing_writes": self._servers[PRIMARY].refusing is not None,
            "discovered_replicas": [a.name for a in self._discovered],
            "primary_changes": self._metrics.primary_changes,
        }

    def status(self) -> dict[str, object]:
        """The ``/status`` document."""
        flavor = self._flavor
        return {
            "flavor": flavor.name if flavor is not None else None,
            "server_version": self._server_version,
            "listen": self._config.listen.name,
            "reloads": self.reloads,
            "roles": self._roles_status(),
            "acknowledged": format_token(self._acknowledged.state()),
            "backends": [
                server.status(self._knowledge, flavor) for server in self._servers.values()
            ],
            "multiplexing": self._config.pool.multiplexing,
            "pools": [pool.status() for pool in self._pools.values()],
            "sessions": [session.status() for session in self._sessions.values()],
        }
