"""The servers the demo runs against: an emulated MySQL topology, or real MariaDB.

Both shapes are the same: a primary, two replicas of it (one with realistic lag, one with
bursts of lag) and a delayed replica in a chain (a replica of the first replica, applying
each transaction a fixed delay after its commit).  :func:`emulated` and :func:`mariadb` are
context managers that yield a :class:`Backends`: where the servers listen, as whom to connect,
and how to wait until the replicas have caught up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from consistent.demo.lagcheck import model_medians
from consistent.demo.processes import Children
from consistent.emulator.replication import (
    ChannelSpec,
    LagModel,
    ServerSpec,
    TopologySpec,
)
from consistent.emulator.replication.lagmodel import Burst, LogNormal, Uniform
from consistent.emulator.replication.threaded import TopologyThread

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = [
    "DELAY_SECONDS",
    "Backends",
    "emulated",
    "emulated_spec",
    "mariadb",
    "serve_topology",
]

logger = logging.getLogger(__name__)

#: SOURCE_DELAY / MASTER_DELAY of the delayed replica, seconds.
DELAY_SECONDS: Final = 2
_LOOPBACK: Final = "127.0.0.1"
#: Bursts on the bursty replica (emulator and MariaDB alike): from 3 s, every 10 s, 2.5 s long.
_BURST_START: Final = 3.0
_BURST_EVERY: Final = 10.0
_BURST_LENGTH: Final = 2.0


@dataclass(frozen=True, slots=True)
class Server:
    """One server: its name in the demo and where it listens."""

    name: str
    host: str
    port: int
    role: str

    @property
    def address(self) -> str:
        """``host:port``, the name routing and traces use."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Backends:
    """A running topology as the demo sees it."""

    flavor: str
    primary: Server
    replicas: tuple[Server, ...]
    user: str
    password: str
    #: Extra PyMySQL options for every connection to the servers.
    options: tuple[tuple[str, Any], ...]
    #: Human lines: the servers and their lag.
    description: tuple[str, ...]
    #: What differs from the intended shape (shown in the output).
    notes: tuple[str, ...]
    #: Block until every replica has applied what the primary had executed.
    catch_up: Callable[[float], None]
    #: Lag injected while the workload runs (MariaDB: the bursts), as a context manager.
    disturb: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext
    #: Replica name → the median lag its configured model gives, seconds (empty when the
    #: lag is not modelled, as on MariaDB).
    lag_models: Mapping[str, float] = field(default_factory=dict)

    def connect_kwargs(self, server: Server) -> dict[str, Any]:
        """PyMySQL keyword arguments for ``server``."""
        return {
            "host": server.host,
            "port": server.port,
            "user": self.user,
            "password": self.password,
            "autocommit": True,
            **dict(self.options),
        }

    @property
    def replica_ports(self) -> dict[int, str]:
        """Replica port → name (a read that answers ``@@port`` tells where it ran)."""
        return {r.port: r.name for r in self.replicas}


def emulated_spec(seed: int = 7) -> TopologySpec:
    """``primary`` → ``replica1`` (log-normal lag), ``primary`` → ``replica2`` (short lag with
    bursts of 0.3-1.2 s), ``replica1`` → ``delayed`` (``SOURCE_DELAY``)."""
    realistic = LagModel(
        network=LogNormal(0.03, 0.6),
        apply=Uniform(0.001, 0.01),
        seed=seed,
    )
    bursty = LagModel(
        network=LogNormal(0.01, 0.4),
        apply=Uniform(0.001, 0.005),
        bursts=(
            Burst(
                start=_BURST_START,
                duration=_BURST_LENGTH,
                every=_BURST_EVERY,
                extra=Uniform(0.3, 1.2),
            ),
        ),
        seed=seed + 1,
    )
    chained = LagModel(network=LogNormal(0.01, 0.5), seed=seed + 2)
    servers = (
        ServerSpec("primary", server_id=1),
        ServerSpec("replica1", server_id=2),
        ServerSpec("replica2", server_id=3),
        ServerSpec("delayed", server_id=4),
    )
    channels = (
        ChannelSpec("primary", "replica1", lag=realistic),
        ChannelSpec("primary", "replica2", lag=bursty),
        ChannelSpec("replica1", "delayed", lag=chained, delay=DELAY_SECONDS),
    )
    return TopologySpec(servers, channels)


def _describe_emulated(spec: TopologySpec, thread: TopologyThread) -> tuple[str, ...]:
    lines = []
    for server in spec.servers:
        endpoint = thread.endpoint(server.name)
        channels = [c for c in spec.channels if c.replica == server.name]
        how = "; ".join(
            f"replica of {c.source}: {c.lag.describe()}"
            + (f", SOURCE_DELAY={c.delay}" if c.delay else "")
            for c in channels
        )
        lines.append(f"{server.name:<9} {endpoint.address:<16} {how or 'primary'}")
    return tuple(lines)


#: Seconds the topology process has to start its servers.
_START_SECONDS: Final = 60.0


def serve_topology(channel: Connection, stop: threading.Event, seed: int) -> None:
    """The topology process (see :mod:`consistent.demo.processes`): start the topology of
    :func:`emulated_spec` (built here: a spec does not pickle), send
    ``("ready", (endpoints, description))``, then answer ``("catch_up", timeout)`` requests
    with ``("caught_up", None)`` until ``stop`` is set."""
    spec = emulated_spec(seed)
    with TopologyThread(spec, host=_LOOPBACK, fast_loop=True) as thread:
        channel.send(("ready", (thread.endpoints, _describe_emulated(spec, thread))))
        while not stop.is_set():
            if not channel.poll(0.2):
                continue
            request, timeout = channel.recv()
            if request != "catch_up":
                raise ValueError(f"unknown request {request!r}")
            thread.wait_for_all(timeout)
            channel.send(("caught_up", None))


@contextlib.contextmanager
def emulated(seed: int = 7, children: Children | None = None) -> Iterator[Backends]:
    """The emulated topology of :func:`emulated_spec`, in a process of its own (started in
    ``children``, or in a :class:`Children` of its own)."""
    spec = emulated_spec(seed)
    with contextlib.ExitStack() as stack:
        owner = children if children is not None else stack.enter_context(Children())
        child = owner.start("topology", serve_topology, seed)
        endpoints, description = child.receive(_START_SECONDS)
        primary = endpoints["primary"]

        def server(name: str) -> Server:
            endpoint = endpoints[name]
            role = "primary" if name == "primary" else "replica"
            return Server(name, endpoint.host, endpoint.port, role)

        def catch_up(timeout: float) -> None:
            child.channel.send(("catch_up", timeout))
            child.receive(timeout + _START_SECONDS)

        yield Backends(
            flavor="mysql",
            primary=server("primary"),
            replicas=tuple(server(name) for name in spec.replicas),
            user=primary.user,
            password=primary.password,
            options=(),
            description=description,
            notes=(),
            catch_up=catch_up,
            lag_models=model_medians(spec),
        )


class _Bursts:
    """Stops a MariaDB replica's SQL thread during the burst windows, so that its lag comes in
    bursts as on the emulator (a real server on this machine otherwise lags by milliseconds)."""

    def __init__(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        self._pause = pause
        self._resume = resume
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-bursts", daemon=True)

    def _run(self) -> None:
        if self._stop.wait(_BURST_START):
            return
        while True:
            self._pause()
            stopped = self._stop.wait(_BURST_LENGTH)
            self._resume()
            if stopped or self._stop.wait(_BURST_EVERY - _BURST_LENGTH):
                return

    def __enter__(self) -> _Bursts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(_BURST_EVERY)


def _chain(topology: Any, source: Any, replica: Any, delay: int) -> None:
    """Point ``replica`` at ``source`` (which logs what it replicates), with ``MASTER_DELAY``."""
    with contextlib.closing(replica.admin()) as conn, conn.cursor() as cursor:
        cursor.execute("STOP SLAVE")
        cursor.execute(
            "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, MASTER_DELAY = %s",
            (_LOOPBACK, source.port, topology.repl_user, topology.repl_password, int(delay)),
        )
        cursor.execute("START SLAVE")
    topology.wait_replicating(replica)


@contextlib.contextmanager
def mariadb() -> Iterator[Backends]:
    """Real MariaDB: a primary and three replicas, the third re-pointed at the first with
    ``MASTER_DELAY`` (replicas log what they replicate, so the chain carries the GTIDs)."""
    from consistent.testing.mariadb import start_topology  # noqa: PLC0415 (needs mariadbd)

    args = ("--log-bin=binlog", "--log-slave-updates=1", "--binlog-format=ROW")
    with start_topology(replicas=3, extra_server_args=args) as topology:
        first, bursty, delayed = topology.replicas
        _chain(topology, first, delayed, DELAY_SECONDS)
        names = ("replica1", "replica2", "delayed")
        replicas = tuple(
            Server(name, _LOOPBACK, r.port, "replica")
            for name, r in zip(names, topology.replicas, strict=True)
        )
        description = (
            f"primary   {_LOOPBACK}:{topology.primary.port:<6} MariaDB",
            f"replica1  {replicas[0].address:<16} replica of primary (real lag)",
            f"replica2  {replicas[1].address:<16} replica of primary, SQL thread stopped "
            f"{_BURST_LENGTH:g} s every {_BURST_EVERY:g} s (bursts)",
            f"delayed   {replicas[2].address:<16} replica of replica1, "
            f"MASTER_DELAY={DELAY_SECONDS}",
        )

        def catch_up(timeout: float) -> None:
            topology.wait_for_all(timeout)

        yield Backends(
            flavor="mariadb",
            primary=Server("primary", _LOOPBACK, topology.primary.port, "primary"),
            replicas=replicas,
            user=topology.app_user,
            password=topology.app_password,
            options=(("ssl_disabled", True),),
            description=description,
            notes=(),
            catch_up=catch_up,
            disturb=lambda: _Bursts(
                lambda: topology.pause(bursty), lambda: topology.resume(bursty)
            ),
        )
