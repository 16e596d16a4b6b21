"""A replication topology in a background thread, for synchronous code (pytest, benches, demo).

::

    with start_topology(replicas=2, lag="20ms..800ms") as topo:
        conn = topo.connect()                      # PyMySQL to the primary
        conn.cursor().execute("CREATE DATABASE d")
        topo.wait_for_all()
        replica = topo.connect(topo.replicas[0])

Every server listens on its own port on 127.0.0.1 (:attr:`TopologyThread.endpoints`).  The
servers, their front-ends and the channels all run on one event loop in a daemon thread; code
outside touches the engines only through :meth:`TopologyThread.call` / :meth:`~TopologyThread.run`.
Time is real: the thread's loop cannot run virtual time while clients in other threads talk to
it (virtual-time tests use :class:`~.topology.Topology` directly on a
:class:`~.clock.VirtualTimeLoop`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import pymysql

from consistent.emulator.loopthread import DEFAULT_TIMEOUT, LoopThread
from consistent.emulator.replication.channel import Channel
from consistent.emulator.replication.clock import TopologyClock
from consistent.emulator.replication.lagmodel import LagModel
from consistent.emulator.replication.topology import (
    LOOPBACK,
    Endpoint,
    LagLike,
    Topology,
    TopologyError,
    TopologySpec,
    as_lag_model,
)

__all__ = ["ServerRef", "TopologyThread", "start_topology", "start_topology_async"]

ServerRef = int | str | Endpoint
"""A server: its name, its :class:`Endpoint`, or a 0-based replica index."""


def _spec(
    spec: TopologySpec | None,
    replicas: int,
    lag: LagLike,
    *,
    delay: int,
    workers: int | None,
    seed: int | None,
) -> TopologySpec:
    if spec is not None:
        return spec
    return TopologySpec.primary_with_replicas(
        replicas, lag=lag, delay=delay, workers=workers, seed=seed
    )


class TopologyThread(LoopThread):
    """A running topology in a daemon thread; see the module docstring."""

    _label: ClassVar[str] = "topology"
    _error_type: ClassVar[type[Exception]] = TopologyError
    _timeout_error_type: ClassVar[type[Exception]] = TopologyError

    def __init__(
        self,
        spec: TopologySpec,
        *,
        host: str = LOOPBACK,
        timeout: float = DEFAULT_TIMEOUT,
        fast_loop: bool = False,
    ) -> None:
        super().__init__(timeout=timeout, fast_loop=fast_loop)
        self.spec = spec
        self.host = host
        self._topology: Topology | None = None

    # ----- access ---------------------------------------------------------------------------------

    @property
    def topology(self) -> Topology:
        """The running :class:`Topology` (touch it only through :meth:`call` / :meth:`run`)."""
        return self._running(self._topology)

    @property
    def endpoints(self) -> dict[str, Endpoint]:
        """Server name → where it listens."""
        return dict(self.topology.endpoints)

    @property
    def servers(self) -> tuple[Endpoint, ...]:
        """Every server, in spec order."""
        return tuple(self.topology.endpoints[s.name] for s in self.spec.servers)

    @property
    def primary(self) -> Endpoint:
        """The first server that replicates from nobody."""
        return self.topology.endpoints[self.spec.roots[0]]

    @property
    def replicas(self) -> tuple[Endpoint, ...]:
        """Servers with a channel, in spec order."""
        return tuple(self.topology.endpoints[n] for n in self.spec.replicas)

    @property
    def ports(self) -> dict[str, int]:
        """Server name → TCP port on 127.0.0.1."""
        return {name: e.port for name, e in self.topology.endpoints.items()}

    def endpoint(self, ref: ServerRef | None = None) -> Endpoint:
        """A server by name, endpoint or replica index (default: the primary)."""
        if ref is None:
            return self.primary
        if isinstance(ref, Endpoint):
            return self.topology.endpoints[ref.name]
        if isinstance(ref, int):
            replicas = self.replicas
            if not 0 <= ref < len(replicas):
                raise TopologyError(f"no replica #{ref}: there are {len(replicas)}")
            return replicas[ref]
        try:
            return self.topology.endpoints[ref]
        except KeyError:
            raise TopologyError(f"no server named {ref!r}") from None

    def describe(self) -> str:
        """Every server with its address and the lag model of its channels."""
        return self.topology.describe()

    # ----- connections and queries ----------------------------------------------------------------

    def connection_params(
        self, ref: ServerRef | None = None, database: str | None = None
    ) -> Endpoint:
        """Where and as whom to connect to a server (default: the primary)."""
        endpoint = self.endpoint(ref)
        if database is None:
            return endpoint
        return replace(endpoint, database=database)

    def connect(
        self, ref: ServerRef | None = None, database: str | None = None, **kwargs: Any
    ) -> Any:
        """A PyMySQL connection over TCP (autocommit on unless ``kwargs`` says otherwise)."""
        params = self.connection_params(ref, database).pymysql_kwargs()
        params.setdefault("autocommit", True)
        params.update(kwargs)
        return pymysql.connect(**params)

    def query(self, ref: ServerRef | None, sql: str) -> list[dict[str, Any]]:
        """Run ``sql`` on a server's engine directly (no socket); rows of the last result as
        dicts."""
        name = self.endpoint(ref).name

        async def run() -> list[dict[str, Any]]:
            session = self.topology.server(name).open_session()
            try:
                outcomes = await session.query_all(sql)
            finally:
                await session.close()
            result = outcomes[-1].result if outcomes else None
            if result is None:
                return []
            names = [c.name for c in result.columns]
            return [dict(zip(names, row, strict=True)) for row in result.rows]

        return self.call(run())

    def executed(self, ref: ServerRef | None = None) -> str:
        """A server's ``@@GLOBAL.gtid_executed`` (one line)."""
        name = self.endpoint(ref).name

        def text() -> str:
            return self.topology.server(name).gtid_state.executed.to_text()

        return self.run(text)

    def primary_position(self) -> str:
        """The primary's ``@@GLOBAL.gtid_executed``."""
        return self.executed(None)

    def replica_position(self, ref: ServerRef) -> str:
        """A replica's ``@@GLOBAL.gtid_executed``."""
        return self.executed(ref)

    def replica_status(self, ref: ServerRef, channel: str | None = None) -> dict[str, Any]:
        """A replica's ``SHOW REPLICA STATUS`` row (of ``channel`` when given)."""
        suffix = "" if channel is None else f" FOR CHANNEL '{channel}'"
        rows = self.query(ref, "SHOW REPLICA STATUS" + suffix)
        if not rows:
            raise TopologyError(f"{self.endpoint(ref).name} has no replication configured")
        return rows[0]

    # ----- waiting and lag control ----------------------------------------------------------------

    def wait_for_catchup(self, ref: ServerRef, timeout: float = 10.0) -> None:
        """Block until the replica executed everything its sources had executed when called."""
        name = self.endpoint(ref).name
        self.call(self.topology.wait_for_catchup(name, timeout), timeout + self.timeout)

    def wait_for_all(self, timeout: float = 10.0) -> None:
        """:meth:`wait_for_catchup` for every replica."""
        self.call(self.topology.wait_for_all(timeout), timeout * 4 + self.timeout)

    def channel(self, ref: ServerRef, channel: str = "") -> Channel:
        """A replica's channel object (read it through :meth:`run`)."""
        return self.topology.channel(self.endpoint(ref).name, channel)

    def set_lag(self, ref: ServerRef, lag: LagLike, channel: str = "") -> None:
        """Replace a channel's lag model (``"50ms"``, ``"20ms..800ms"``, a :class:`LagModel`)."""
        model = as_lag_model(lag)
        name = self.endpoint(ref).name
        self.run(self.topology.set_lag, name, model, channel)

    def lag(self, ref: ServerRef, channel: str = "") -> LagModel:
        """A channel's current lag model."""
        return self.channel(ref, channel).lag

    def pause(self, ref: ServerRef, channel: str = "") -> None:
        """Stop the replica's applier (STOP REPLICA SQL_THREAD); the relay log keeps growing."""
        self.call(self.topology.pause(self.endpoint(ref).name, channel))

    def resume(self, ref: ServerRef, channel: str = "") -> None:
        """Start the replica's applier again."""
        self.call(self.topology.resume(self.endpoint(ref).name, channel))

    def delay(self, ref: ServerRef, seconds: int, channel: str = "") -> None:
        """``SOURCE_DELAY = seconds`` on a replica's channel (0 removes the delay)."""
        self.call(self.topology.set_delay(self.endpoint(ref).name, seconds, channel))

    def kill(self, ref: ServerRef) -> None:
        """The server stops answering (its port refuses connections, its replication stops);
        see :meth:`Topology.kill`."""
        self.call(self.topology.kill(self.endpoint(ref).name))

    def restart(self, ref: ServerRef) -> None:
        """Bring a killed server back on the same port, replicating again."""
        self.call(self.topology.restart(self.endpoint(ref).name))

    def reset_lag(self) -> None:
        """Back to the spec: killed servers restarted, the spec's lag models and delays,
        every replication thread running."""

        async def reset() -> None:
            for server in self.spec.servers:
                await self.topology.restart(server.name)
            for c in self.spec.channels:
                channel = self.topology.channel(c.replica, c.name)
                channel.set_lag(c.lag)
                if channel.config.delay != c.delay:
                    await self.topology.set_delay(c.replica, c.delay, c.name)
                await channel.start()

        self.call(reset())

    def create_database(self, name: str, timeout: float = 10.0) -> None:
        """CREATE DATABASE on the primary, then wait until every replica has it."""
        if not name.replace("_", "").isalnum():
            raise TopologyError(f"not a plain identifier: {name!r}")
        self.query(None, f"CREATE DATABASE `{name}`")
        self.wait_for_all(timeout)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE IF EXISTS on the primary (replication drops it elsewhere)."""
        if not name.replace("_", "").isalnum():
            raise TopologyError(f"not a plain identifier: {name!r}")
        self.query(None, f"DROP DATABASE IF EXISTS `{name}`")

    # ----- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the channels and servers and join the thread (the same as :meth:`stop`)."""
        self.stop()

    async def _open(self) -> None:
        self._topology = await Topology.start(self.spec, host=self.host)

    async def _close(self) -> None:
        await self.topology.close()


def start_topology(
    spec: TopologySpec | None = None,
    *,
    replicas: int = 2,
    lag: LagLike = None,
    delay: int = 0,
    workers: int | None = None,
    seed: int | None = None,
    host: str = LOOPBACK,
    timeout: float = DEFAULT_TIMEOUT,
) -> TopologyThread:
    """Start a topology in a background thread, in real time, each server on its own port.

    Without ``spec``: a primary and ``replicas`` replicas whose channels have network delay
    ``lag`` (a :class:`LagModel`, a distribution, ``"20ms..800ms"`` or seconds), ``SOURCE_DELAY``
    ``delay`` and ``workers`` applier workers.  Use the result as a context manager or call
    :meth:`TopologyThread.close`.
    """
    thread = TopologyThread(
        _spec(spec, replicas, lag, delay=delay, workers=workers, seed=seed),
        host=host,
        timeout=timeout,
    )
    return thread.start()


async def start_topology_async(
    spec: TopologySpec | None = None,
    *,
    replicas: int = 2,
    lag: LagLike = None,
    delay: int = 0,
    workers: int | None = None,
    seed: int | None = None,
    clock: TopologyClock | None = None,
    serve: bool = True,
    host: str = LOOPBACK,
) -> Topology:
    """:func:`start_topology` on the running loop: returns the :class:`Topology` (close it, or
    use ``async with``).  Pass a :class:`~.clock.VirtualClock` and ``serve=False`` for virtual
    time."""
    return await Topology.start(
        _spec(spec, replicas, lag, delay=delay, workers=workers, seed=seed),
        clock=clock,
        serve=serve,
        host=host,
    )
