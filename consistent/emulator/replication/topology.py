"""Replication topologies of emulated servers: specs, and the running :class:`Topology`.

A :class:`TopologySpec` names servers (:class:`ServerSpec`) and the channels between them
(:class:`ChannelSpec`, each with its :class:`~.lagmodel.LagModel` and ``SOURCE_DELAY``)::

    TopologySpec.primary_with_replicas(2, lag=LagModel(network=Uniform(0.02, 0.8)))
    TopologySpec.chain(3)                       # a → b → c (b logs replica updates)
    TopologySpec.multi_source(2)                # s1 → r ← s2, channels 's1' and 's2'

:meth:`Topology.start` builds it on the running event loop: every server is an
:class:`~consistent.emulator.server.EmulatedServer` with its own wire front-end on 127.0.0.1
(unless ``serve=False``), its replication statements and performance_schema tables, and the
channels already started.  All servers share one loop, so channels are in-process hand-offs
between engines whose timing comes from the lag model and the injected clock (real time by
default, :class:`~.clock.VirtualClock` in tests).  :mod:`.threaded` runs the same thing in a
background thread for synchronous code.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from consistent.emulator.config import DEFAULT_VERSION, Account, ServerConfig
from consistent.emulator.replication.channel import Channel, SourceConfig
from consistent.emulator.replication.clock import (
    RealClock,
    SkewedClock,
    TopologyClock,
    VirtualClock,
)
from consistent.emulator.replication.delay import check_delay
from consistent.emulator.replication.lagmodel import (
    Distribution,
    Fixed,
    LagModel,
    parse_distribution,
)
from consistent.emulator.replication.service import ReplicationService
from consistent.emulator.server import EmulatedServer
from consistent.emulator.wire.config import WireConfig
from consistent.emulator.wire.server import serve as serve_wire
from consistent.errors import InterfaceError, OperationalError
from consistent.gtid import GtidSet

__all__ = [
    "LOOPBACK",
    "ChannelSpec",
    "Endpoint",
    "LagLike",
    "ReplicationTimeout",
    "ServerSpec",
    "Topology",
    "TopologyError",
    "TopologySpec",
    "as_lag_model",
]

logger = logging.getLogger(__name__)

LOOPBACK: Final = "127.0.0.1"
_UUID_NAMESPACE: Final = uuid.UUID("6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f")
_MAX_PORT: Final = 65535


class TopologyError(InterfaceError):
    """A topology spec is inconsistent, or a server/channel it names does not exist."""


class ReplicationTimeout(OperationalError):
    """A replica did not apply what its sources executed within the time allowed."""


LagLike = LagModel | Distribution | str | float | int | None
"""What the shorthand arguments accept: a model, a network-delay distribution, its text
(``"20ms..800ms"``) or a fixed number of seconds."""


def as_lag_model(lag: LagLike, *, workers: int | None = None, seed: int | None = None) -> LagModel:
    """A :class:`LagModel` from the shorthand forms (the network delay is what they set)."""
    if isinstance(lag, LagModel):
        model = lag
    elif lag is None:
        model = LagModel()
    elif isinstance(lag, str):
        model = LagModel(network=parse_distribution(lag))
    elif isinstance(lag, int | float):
        model = LagModel(network=Fixed(float(lag)))
    else:
        model = LagModel(network=lag)
    changes: dict[str, Any] = {}
    if workers is not None:
        changes["workers"] = workers
    if seed is not None and model.seed is None:
        changes["seed"] = seed
    if changes:
        model = replace(model, **changes)
    return model


@dataclass(frozen=True)
class ServerSpec:
    """One server.  ``server_uuid`` defaults to a UUID derived from the name; ``server_id``
    to its position (1-based).  ``clock_skew`` shifts its wall clock (seconds).  ``port`` is
    the TCP port it listens on (``None``: a free one)."""

    name: str
    server_uuid: str | None = None
    server_id: int | None = None
    log_bin: bool = True
    log_replica_updates: bool = True
    gtid_executed_compression_period: int = 0
    clock_skew: float = 0.0
    version: str = DEFAULT_VERSION
    """``SELECT VERSION()``: 8.0 by default; :data:`~consistent.emulator.config.VERSION_84`
    for 8.4; a 5.7 version makes a source whose transactions carry no commit timestamps."""
    accounts: tuple[Account, ...] = (Account("root", ""),)
    system_variables: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    port: int | None = None

    def uuid_for(self) -> str:
        """The server UUID."""
        return (self.server_uuid or str(uuid.uuid5(_UUID_NAMESPACE, self.name))).lower()


@dataclass(frozen=True)
class ChannelSpec:
    """``replica`` replicates ``source`` over channel ``name`` (``''``: the default)."""

    source: str
    replica: str
    name: str = ""
    lag: LagModel = field(default_factory=LagModel)
    delay: int = 0
    start: bool = True


@dataclass(frozen=True)
class TopologySpec:
    """Servers and channels; see the module docstring for the shapes it has helpers for."""

    servers: tuple[ServerSpec, ...]
    channels: tuple[ChannelSpec, ...] = ()

    def __post_init__(self) -> None:
        names = [s.name for s in self.servers]
        if not names:
            raise TopologyError("a topology needs at least one server")
        if len(set(names)) != len(names):
            raise TopologyError(f"duplicate server names in {names}")
        uuids = [s.uuid_for() for s in self.servers]
        if len(set(uuids)) != len(uuids):
            raise TopologyError("two servers have the same server_uuid")
        ports = [s.port for s in self.servers if s.port is not None]
        for port in ports:
            if not 1 <= port <= _MAX_PORT:
                raise TopologyError(f"port {port} is out of range (1-{_MAX_PORT})")
        if len(set(ports)) != len(ports):
            raise TopologyError(f"two servers have the same port in {ports}")
        seen: set[tuple[str, str]] = set()
        by_name = {s.name: s for s in self.servers}
        for c in self.channels:
            if c.source not in by_name or c.replica not in by_name:
                raise TopologyError(f"channel {c.source} → {c.replica} names an unknown server")
            if c.source == c.replica:
                raise TopologyError(f"{c.source} cannot replicate from itself")
            if not by_name[c.source].log_bin:
                raise TopologyError(f"{c.source} is a source but has the binary log off")
            key = (c.replica, c.name.lower())
            if key in seen:
                raise TopologyError(f"{c.replica} has two channels named {c.name!r}")
            seen.add(key)

    def with_ports(self, base: int) -> TopologySpec:
        """The same topology listening on ``base``, ``base + 1``, … in server order (the
        primary first), so that clients and proxy configurations can name fixed ports."""
        if not 1 <= base <= _MAX_PORT - len(self.servers) + 1:
            raise TopologyError(
                f"base port {base} leaves no room for {len(self.servers)} servers "
                f"(1-{_MAX_PORT - len(self.servers) + 1})"
            )
        servers = tuple(replace(s, port=base + i) for i, s in enumerate(self.servers))
        return replace(self, servers=servers)

    def server(self, name: str) -> ServerSpec:
        """The server called ``name``."""
        for spec in self.servers:
            if spec.name == name:
                return spec
        raise TopologyError(f"no server named {name!r}")

    @property
    def roots(self) -> tuple[str, ...]:
        """Servers that replicate from nobody (where writes go)."""
        replicas = {c.replica for c in self.channels}
        return tuple(s.name for s in self.servers if s.name not in replicas)

    @property
    def replicas(self) -> tuple[str, ...]:
        """Servers with at least one channel, in spec order."""
        replicas = {c.replica for c in self.channels}
        return tuple(s.name for s in self.servers if s.name in replicas)

    def upstream(self, name: str) -> tuple[str, ...]:
        """Every server whose transactions reach ``name`` through channels."""
        found: list[str] = []
        todo = [name]
        while todo:
            current = todo.pop()
            for c in self.channels:
                if c.replica == current and c.source not in found and c.source != name:
                    found.append(c.source)
                    todo.append(c.source)
        return tuple(found)

    # ----- shapes ---------------------------------------------------------------------------------

    @classmethod
    def primary_with_replicas(
        cls,
        replicas: int = 2,
        *,
        lag: LagLike | Iterable[LagLike] = None,
        delay: int | Iterable[int] = 0,
        workers: int | None = None,
        seed: int | None = None,
        replica_log_bin: bool = True,
        compression_period: int = 0,
    ) -> TopologySpec:
        """``primary`` and ``replica1`` … ``replicaN``.  ``lag`` and ``delay`` may be one
        value for all replicas or one per replica."""
        if replicas < 0:
            raise TopologyError("the number of replicas must be >= 0")
        lags = _per_replica(lag, replicas)
        delays = _per_replica(delay, replicas)
        servers = [ServerSpec("primary", server_id=1)]
        channels = []
        for i in range(replicas):
            name = f"replica{i + 1}"
            servers.append(
                ServerSpec(
                    name,
                    server_id=i + 2,
                    log_bin=replica_log_bin,
                    gtid_executed_compression_period=compression_period,
                )
            )
            model = as_lag_model(lags[i], workers=workers, seed=None if seed is None else seed + i)
            channels.append(ChannelSpec("primary", name, lag=model, delay=int(delays[i] or 0)))
        return cls(tuple(servers), tuple(channels))

    @classmethod
    def chain(
        cls,
        length: int = 3,
        *,
        lag: LagLike | Iterable[LagLike] = None,
        names: Iterable[str] | None = None,
        workers: int | None = None,
        seed: int | None = None,
    ) -> TopologySpec:
        """``a → b → c …``: every intermediate server logs what it replicates."""
        chosen = list(names) if names is not None else [chr(ord("a") + i) for i in range(length)]
        if len(chosen) < 2:
            raise TopologyError("a chain needs at least two servers")
        lags = _per_replica(lag, len(chosen) - 1)
        servers = tuple(ServerSpec(n, server_id=i + 1) for i, n in enumerate(chosen))
        channels = tuple(
            ChannelSpec(
                chosen[i],
                chosen[i + 1],
                lag=as_lag_model(lags[i], workers=workers, seed=None if seed is None else seed + i),
            )
            for i in range(len(chosen) - 1)
        )
        return cls(servers, channels)

    @classmethod
    def multi_source(
        cls,
        sources: int = 2,
        *,
        lag: LagLike | Iterable[LagLike] = None,
        workers: int | None = None,
        seed: int | None = None,
    ) -> TopologySpec:
        """``s1 … sN`` all replicated by ``replica``, over channels named after the sources."""
        if sources < 1:
            raise TopologyError("multi-source needs at least one source")
        lags = _per_replica(lag, sources)
        names = [f"s{i + 1}" for i in range(sources)]
        servers = (
            *(ServerSpec(n, server_id=i + 1) for i, n in enumerate(names)),
            ServerSpec("replica", server_id=sources + 1),
        )
        channels = tuple(
            ChannelSpec(
                n,
                "replica",
                name=n,
                lag=as_lag_model(lags[i], workers=workers, seed=None if seed is None else seed + i),
            )
            for i, n in enumerate(names)
        )
        return cls(servers, channels)


async def _listen(
    server: EmulatedServer, spec: ServerSpec, host: str, config: WireConfig | None
) -> Any:
    """``server``'s wire front-end on ``host`` and its spec's port (a free one if none),
    or a :class:`TopologyError` that names the address when it cannot listen there."""
    try:
        return await serve_wire(server, host, spec.port or 0, config=config)
    except OSError as exc:
        where = f"{host}:{spec.port}" if spec.port else host
        raise TopologyError(f"{spec.name} cannot listen on {where}: {exc.strerror or exc}") from exc


def _shared_key_config() -> WireConfig:
    """One RSA key for every front-end of the topology (caching_sha2_password's full
    authentication): generating a 2048-bit key per server would dominate start-up."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return WireConfig(rsa_private_key_pem=pem)


def _per_replica(value: Any, count: int) -> list[Any]:
    if isinstance(value, list | tuple):
        if len(value) != count:
            raise TopologyError(f"expected {count} values, got {len(value)}")
        return list(value)
    return [value] * count


@dataclass(frozen=True)
class Endpoint:
    """Where a server of the topology listens, and as whom to connect."""

    name: str
    host: str
    port: int
    user: str
    password: str
    server_uuid: str
    server_id: int
    role: str
    database: str | None = None

    def pymysql_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`pymysql.connect`."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
        }
        if self.database is not None:
            kwargs["database"] = self.database
        return kwargs

    def url(self, driver: str = "mysql+pymysql") -> str:
        """A SQLAlchemy URL."""
        auth = f"{self.user}:{self.password}" if self.password else self.user
        return f"{driver}://{auth}@{self.host}:{self.port}/{self.database or ''}"

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"


class Topology:
    """Running servers and channels on the current event loop; see the module docstring."""

    def __init__(self, spec: TopologySpec, *, clock: TopologyClock) -> None:
        self.spec = spec
        self.clock = clock
        self.servers: dict[str, EmulatedServer] = {}
        self.services: dict[str, ReplicationService] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self._wires: dict[str, Any] = {}
        self._wire_config: WireConfig | None = None
        self._serving = False
        self._down: set[str] = set()
        self._closed = False

    # ----- lifecycle ------------------------------------------------------------------------------

    @classmethod
    async def start(
        cls,
        spec: TopologySpec,
        *,
        clock: TopologyClock | None = None,
        serve: bool = True,
        host: str = LOOPBACK,
        wire_config: WireConfig | None = None,
    ) -> Topology:
        """Build and start ``spec`` on the running loop; see the module docstring."""
        if serve and isinstance(clock, VirtualClock):
            raise TopologyError(
                "a virtual-time topology cannot serve sockets: clients would see time race "
                "ahead (use serve=False)"
            )
        topology = cls(spec, clock=clock or RealClock())
        try:
            await topology._start(serve=serve, host=host, wire_config=wire_config)
        except BaseException:
            await topology.close()
            raise
        return topology

    async def _start(self, *, serve: bool, host: str, wire_config: WireConfig | None) -> None:
        origin = asyncio.get_running_loop().time()
        if serve and wire_config is None:
            wire_config = _shared_key_config()
        self._serving, self._wire_config = serve, wire_config
        for index, spec in enumerate(self.spec.servers):
            clock = SkewedClock(self.clock, spec.clock_skew) if spec.clock_skew else self.clock
            config = ServerConfig(
                server_uuid=spec.uuid_for(),
                server_id=spec.server_id or index + 1,
                log_bin=spec.log_bin,
                log_replica_updates=spec.log_replica_updates,
                hostname=spec.name,
                accounts=spec.accounts,
                gtid_executed_compression_period=spec.gtid_executed_compression_period,
                system_variables=spec.system_variables,
                version=spec.version,
            )
            server = EmulatedServer(config, clock=clock)
            self.servers[spec.name] = server
            await server.start()
            port = 3306
            endpoint_host = spec.name
            if serve:
                wire = await _listen(server, spec, host, wire_config)
                self._wires[spec.name] = wire
                port, endpoint_host = wire.port, host
                server.global_vars["port"] = port
            account = spec.accounts[0] if spec.accounts else Account("root", "")
            self.endpoints[spec.name] = Endpoint(
                spec.name,
                endpoint_host,
                port,
                account.user,
                account.password,
                config.server_uuid,
                config.server_id,
                "replica" if spec.name in self.spec.replicas else "source",
            )
            service = ReplicationService(
                server, name=spec.name, resolver=self._resolve, origin=origin
            )
            service.install()
            self.services[spec.name] = service
        for channel_spec in self.spec.channels:
            source = self.endpoints[channel_spec.source]
            source_config = SourceConfig(
                host=source.host,
                port=source.port,
                user=source.user,
                password=source.password,
                delay=channel_spec.delay,
            )
            channel = self.services[channel_spec.replica].add_channel(
                channel_spec.name, config=source_config, lag=channel_spec.lag
            )
            if channel_spec.start:
                await channel.start()
        logger.info("started topology: %s", self.describe())

    async def close(self) -> None:
        """Stop every channel, close the front-ends, shut the servers down."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(s.close() for s in self.services.values()))
        for wire in self._wires.values():
            wire.close()
        for wire in self._wires.values():
            await wire.wait_closed()
        for server in self.servers.values():
            try:
                await server.shutdown()
            finally:
                server.close()

    async def __aenter__(self) -> Topology:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----- lookup ---------------------------------------------------------------------------------

    def _resolve(self, config: SourceConfig) -> EmulatedServer | None:
        for name, endpoint in self.endpoints.items():
            if config.host == name or (
                config.port == endpoint.port
                and config.host in (endpoint.host, "localhost", "127.0.0.1", "::1")
            ):
                server = self.servers.get(name)
                if server is not None and server.running:
                    return server
        return None

    def server(self, name: str) -> EmulatedServer:
        """The engine called ``name``."""
        try:
            return self.servers[name]
        except KeyError:
            raise TopologyError(f"no server named {name!r}") from None

    def channel(self, replica: str, name: str = "") -> Channel:
        """The channel ``name`` of ``replica`` (default: its only or default channel)."""
        service = self.services.get(replica)
        if service is None:
            raise TopologyError(f"no server named {replica!r}")
        channel = service.channel(name)
        if channel is None and not name and len(service.channels) == 1:
            channel = next(iter(service.channels.values()))
        if channel is None:
            raise TopologyError(f"{replica} has no channel {name!r}")
        return channel

    def channels_of(self, replica: str) -> list[Channel]:
        """Every channel of ``replica``."""
        service = self.services.get(replica)
        if service is None:
            raise TopologyError(f"no server named {replica!r}")
        return list(service.channels.values())

    @property
    def primary(self) -> str:
        """The first server that replicates from nobody."""
        return self.spec.roots[0]

    def describe(self) -> str:
        """One line per server: name, role, address, and its channels' lag models."""
        lines = []
        for spec in self.spec.servers:
            endpoint = self.endpoints.get(spec.name)
            where = endpoint.address if endpoint is not None else "?"
            line = f"{spec.name:<10} {where:<21} uuid {spec.uuid_for()}"
            for c in self.spec.channels:
                if c.replica == spec.name:
                    label = f" channel {c.name!r}" if c.name else ""
                    delay = f", SOURCE_DELAY={c.delay}" if c.delay else ""
                    line += f"\n    ← {c.source}{label}: {c.lag.describe()}{delay}"
            lines.append(line)
        return "\n".join(lines)

    # ----- waiting --------------------------------------------------------------------------------

    def upstream_executed(self, replica: str) -> GtidSet:
        """What ``replica`` must execute to have caught up with its sources right now."""
        required = GtidSet()
        for name in self.spec.upstream(replica):
            required = required | self.server(name).gtid_state.executed
        return required

    async def wait_for_catchup(self, replica: str, timeout: float = 10.0) -> None:
        """Wait until ``replica`` executed everything its sources (transitively) executed when
        called; :class:`ReplicationTimeout` after ``timeout`` seconds (of the loop's time)."""
        state = self.server(replica).gtid_state
        required = self.upstream_executed(replica)
        if required.issubset(state.executed):
            return
        future = state.waiters.wait(required, state.executed)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            missing = required - state.executed
            raise ReplicationTimeout(
                f"{replica} did not apply {missing.to_text()} within {timeout} s"
            ) from None
        finally:
            state.waiters.discard(future)
            if not future.done():
                future.cancel()

    async def wait_for_all(self, timeout: float = 10.0) -> None:
        """:meth:`wait_for_catchup` for every replica, in spec order (so chains settle)."""
        for name in self.spec.replicas:
            await self.wait_for_catchup(name, timeout)

    # ----- failures ------------------------------------------------------------------------------

    async def kill(self, name: str) -> None:
        """``name`` stops answering: its front-end closes (client connections drop, new ones
        are refused) and its replication threads stop.  The engine keeps its data, so
        :meth:`restart` brings it back as after a clean restart; replicas of it simply
        receive nothing new meanwhile."""
        self.server(name)
        wire = self._wires.pop(name, None)
        if wire is not None:
            wire.close()
            await wire.wait_closed()
        await self.services[name].close()
        self._down.add(name)

    async def restart(self, name: str, host: str = LOOPBACK) -> None:
        """Undo :meth:`kill`: listen again on the same port, restart the channels."""
        if name not in self._down:
            return
        endpoint = self.endpoints[name]
        if self._serving:
            wire = await serve_wire(
                self.server(name), endpoint.host, endpoint.port, config=self._wire_config
            )
            self._wires[name] = wire
        self._down.discard(name)
        await self.services[name].start_all()

    def is_up(self, name: str) -> bool:
        """Whether ``name`` answers (not :meth:`kill`-ed)."""
        return name not in self._down

    # ----- lag control ----------------------------------------------------------------------------

    def set_lag(self, replica: str, lag: LagLike, channel: str = "") -> None:
        """Replace the lag model of a channel (next transactions)."""
        self.channel(replica, channel).set_lag(as_lag_model(lag))

    async def pause(self, replica: str, channel: str = "") -> None:
        """STOP REPLICA SQL_THREAD: transactions keep arriving in the relay log."""
        await self.channel(replica, channel).stop(io=False, sql=True)

    async def resume(self, replica: str, channel: str = "") -> None:
        """START REPLICA SQL_THREAD."""
        await self.channel(replica, channel).start(io=False, sql=True)

    async def set_delay(self, replica: str, seconds: int, channel: str = "") -> None:
        """``SOURCE_DELAY = seconds`` (the SQL thread is restarted if it ran)."""
        target = self.channel(replica, channel)
        value = check_delay(str(seconds))
        running = target.sql_running
        if running:
            await target.stop(io=False, sql=True)
        target.config = replace(target.config, delay=value)
        if running:
            await target.start(io=False, sql=True)
