"""One client session: its login, its lifecycle, and the parts that serve it.

A session is composed of four parts, each with its own state, that reach one another through
the session (plain references, no base class):

* :class:`~proxy.clientreader.ClientReader` frames the client's byte stream into commands;
* :class:`~proxy.commands.CommandHandler` serves each command: answers it, or hands a
  statement to the router;
* :class:`~proxy.routing.Router` routes statements with the policy, sends them (fast path,
  pipelined waits, or its :class:`~proxy.slowpath.SlowPath`) and completes them from their
  responses;
* :class:`~proxy.backendset.BackendSet` holds the backend connections: opened or borrowed,
  brought to the session's state, given back.

The session holds what they share: the client's login (user, capabilities, schema), the
:class:`~consistent.policy.SessionPolicy`, the tasks it runs, and its lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Protocol

from consistent.classify import FunctionRules
from consistent.flavors import Flavor
from consistent.policy import (
    AcknowledgedWrites,
    Level,
    PolicyConfig,
    ReplicaKnowledge,
    SessionPolicy,
)
from consistent.protocol.constants import Capability
from consistent.telemetry import Telemetry
from proxy.backends import BackendServer, Credentials
from proxy.backendset import BackendSet
from proxy.clientlogin import Authenticator
from proxy.clientreader import ClientReader
from proxy.commands import CommandHandler
from proxy.config import ProxyConfig
from proxy.metrics import ProxyMetrics
from proxy.pool import ConnectionPool
from proxy.routing import Router
from proxy.stream import PacketEndpoint
from proxy.threads import ProcessRow

__all__ = ["Session", "SessionHost"]

logger = logging.getLogger(__name__)


class SessionHost(Protocol):
    """What a session needs from the proxy that runs it."""

    @property
    def config(self) -> ProxyConfig: ...

    @property
    def knowledge(self) -> ReplicaKnowledge: ...

    @property
    def acknowledged(self) -> AcknowledgedWrites: ...

    @property
    def metrics(self) -> ProxyMetrics: ...

    @property
    def authenticator(self) -> Authenticator: ...

    @property
    def flavor(self) -> Flavor: ...

    @property
    def functions(self) -> FunctionRules: ...

    @property
    def telemetry(self) -> Telemetry: ...

    def servers(self) -> Mapping[str, BackendServer]: ...

    @property
    def sessions(self) -> Mapping[int, Session]: ...

    def pool_for(self, server: BackendServer, credentials: Credentials) -> ConnectionPool:
        """The pool of ``server``'s connections for ``credentials``' login (shared)."""
        ...


class Session:
    """One authenticated client (see the module docstring)."""

    def __init__(
        self,
        host: SessionHost,
        client: PacketEndpoint,
        *,
        connection_id: int,
        user: str,
        level: Level | None,
        capabilities: int,
        charset: int,
        database: str | None,
        nonce: bytes,
        peer: str,
        tls: bool,
        peer_port: int = 0,
        mariadb_capabilities: int = 0,
    ) -> None:
        config = host.config
        self.host = host
        self.config = config
        self.flavor = host.flavor
        self.metrics = host.metrics
        self.id = connection_id
        self.client = client
        self.user = user
        self.peer = peer
        self.peer_port = peer_port
        self.tls = tls
        self.caps = capabilities
        #: MariaDB extended capabilities the client negotiated (bulk execution).
        self.mariadb_caps = mariadb_capabilities
        self.charset = charset
        #: The login's schema (what a reset returns to); :attr:`schema` is the current one.
        self.database = database
        self.schema = database
        self.nonce = nonce
        self.started_at = time.time()
        self.policy = SessionPolicy(
            replicas=config.backends.replica_names,
            knowledge=host.knowledge,
            acknowledged=host.acknowledged,
            flavor="mariadb" if self.flavor.name == "mariadb" else "mysql",
            config=PolicyConfig(
                level=level or config.level,
                wait_timeout=config.wait_timeout,
                on_timeout=config.on_timeout,
            ),
        )
        #: The level the user's account sets (``DEFAULT`` and resets return to it).
        self.user_level = level
        self.local_infile = config.local_infile and bool(capabilities & Capability.LOCAL_FILES)
        #: The last non-zero ``last_insert_id`` of the OK packets the session's statements got
        #: (what it answers to ``SELECT LAST_INSERT_ID()`` when multiplexing).
        self.last_insert_id = 0
        # Lifecycle.
        self.closing = False
        self._draining = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.backends = BackendSet(self)
        self.reader = ClientReader(self)
        self.handler = CommandHandler(self)
        self.router = Router(self)

    def start(self) -> None:
        """Enter the command phase."""
        self.client.on_lost = self._on_client_lost
        self.client.on_write_paused = self.router.client_write_paused
        self.client.stream(self.reader.on_data)

    @property
    def busy(self) -> bool:
        return self.handler.busy

    def backend_thread(self, server: str) -> int | None:
        """The server's thread id of this session's connection to ``server``, if open."""
        return self.backends.backend_thread(server)

    def owns_thread(self, server: str, thread_id: int) -> bool:
        """Whether server thread ``thread_id`` of ``server`` is this session's: the
        connection it holds, or (multiplexing) an idle pooled one still in its state."""
        return self.backends.owns_thread(server, thread_id)

    def running_threads(self) -> list[tuple[str, int]]:
        """``(server, thread id)`` of the backend connections running something for this
        session now: what ``KILL QUERY`` of this session interrupts."""
        return self.backends.running_threads()

    def pin_reasons(self) -> dict[str, list[str]]:
        """Why the session holds each of its connections now (server -> reasons)."""
        return self.backends.pin_reasons()

    def process_row(self) -> ProcessRow:
        """This session as ``SHOW PROCESSLIST`` lists it."""
        handler = self.handler
        busy = handler.busy
        info: str | None = None
        payload = handler.payload
        if busy and payload[:1] == b"\x03":
            info = payload[1:].decode("utf-8", "replace")
        router = self.router
        return ProcessRow(
            id=self.id,
            user=self.user,
            host=f"{self.peer}:{self.peer_port}" if self.peer_port else self.peer,
            db=self.schema,
            command="Query" if busy else "Sleep",
            time=int(time.monotonic() - handler.command_at),
            state=router.target if busy and router.relay is not None else "",
            info=info,
        )

    def primary_moved(self, server: BackendServer) -> None:
        """Role discovery made ``server`` the primary: the session's statements go there from
        now on.  Its connection to the old primary is closed at once: a statement running
        there gets a lost-connection error (and is never sent again elsewhere), and a session
        that held a transaction or other state there is broken at its next statement, as when
        the primary is lost."""
        if self.backends.primary_moved(server):
            self.router.primary_moved(server)

    def check_lost(self, flavor: Flavor, primary: str, row: Sequence[object]) -> bool:
        """The new primary ``primary`` answered ``row`` to the flavour's history statement:
        True (and the session's spans name them from now on) when it never had GTIDs this
        session required, which a failover lost.  Reads are not refused: no server will
        ever have them."""
        missing = flavor.missing_gtids(self.policy.required, row)
        if missing is None:
            return False
        self.router.lost_gtids = missing
        logger.error(
            "session %d required %s, which the new primary %s never had: a failover lost "
            "these writes (its spans say so in consistent.gtid.lost)",
            self.id,
            missing,
            primary,
        )
        return True

    # ----------------------------------------------------------------- lifecycle

    def close(self, reason: str = "") -> None:
        """Close the client connection (after what was written is sent); the session's
        backend connections close with it."""
        if reason:
            logger.info("closing session %d: %s", self.id, reason)
        self.closing = True
        self.reader.flush_held()
        self.client.close()

    def drain(self) -> None:
        """Graceful shutdown: close now if idle outside a transaction, else once the
        current command (or transaction) ends."""
        self._draining = True
        if not self.handler.busy and not self.policy.in_transaction:
            self.close("shutdown")

    def drained(self) -> bool:
        """Close if a graceful shutdown waits for this moment (a command ended outside a
        transaction); True when it did."""
        if self._draining and not self.policy.in_transaction:
            self.close("shutdown")
            return True
        return False

    def abort(self) -> None:
        """Close everything now."""
        self.closing = True
        self.client.abort()

    async def wait_closed(self) -> None:
        """Wait until the session ended and its resources are released."""
        await asyncio.shield(self._closed)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task the session owns (cancelled when the client goes)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("session %d task failed", self.id, exc_info=task.exception())
            self.abort()

    def _on_client_lost(self, _exc: BaseException | None) -> None:
        self.closing = True
        for task in self._tasks:
            task.cancel()
        task = asyncio.get_running_loop().create_task(self._release())
        task.add_done_callback(self._released)

    async def _release(self) -> None:
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        await self.backends.release()

    def _released(self, task: asyncio.Task[None]) -> None:
        self.metrics.retire(self.router.tally)
        if not task.cancelled() and task.exception() is not None:
            logger.error("releasing session %d failed", self.id, exc_info=task.exception())
        if not self._closed.done():
            self._closed.set_result(None)

    # ----------------------------------------------------------------- /status

    def status(self) -> dict[str, object]:
        """What ``/status`` shows about this session."""
        policy = self.policy
        txn = policy.transaction
        backends = self.backends
        router = self.router
        return {
            "id": self.id,
            "user": self.user,
            "peer": self.peer,
            "tls": self.tls,
            "level": policy.level.value,
            "token": policy.token,
            "autocommit": policy.autocommit,
            "transaction": None
            if txn is None
            else {"read_only": txn.read_only, "server": txn.server},
            "pins": list(policy.pins),
            "pin_reasons": backends.pin_reasons(),
            "busy": self.handler.busy,
            "streaming": self.reader.streaming,
            "reading_paused": self.reader.reading_paused,
            "backends": sorted(backends.conns),
            "follow_up": backends.following(),
            "prepared_statements": len(self.handler.prepared),
            "statements": router.statements,
            "last_target": router.last_target,
            "last_reason": router.last_reason,
            "age_seconds": round(time.time() - self.started_at, 3),
        }
