"""A real MariaDB replication topology for tests, benchmarks and the demo.

:func:`start_topology` starts one primary and N replicas, each a separate ``mariadbd`` with its
own temporary data directory, listening on a free port on 127.0.0.1, and wires GTID replication
between them (``MASTER_USE_GTID=slave_pos``).  The data directory is installed once and copied
for every server, and all servers start side by side, which keeps startup near one second.

Lag is controlled per replica with one call each: :meth:`MariaDBTopology.delay` (a real
``MASTER_DELAY``), :meth:`~MariaDBTopology.pause` / :meth:`~MariaDBTopology.resume` (the SQL
thread), :meth:`~MariaDBTopology.kill` / :meth:`~MariaDBTopology.restart`; any server, the
primary included, can be frozen (SIGSTOP) and thawed with :meth:`~MariaDBTopology.freeze` /
:meth:`~MariaDBTopology.thaw`.  :meth:`~MariaDBTopology.reset_lag` and
:meth:`~MariaDBTopology.close` thaw every frozen server first.

Nothing outlives the topology: :meth:`MariaDBTopology.close` stops every process it started by
pid and removes the directories; it is also registered with :mod:`atexit`, SIGTERM/SIGHUP are
turned into an interrupt while a topology runs, the servers die with their parent, and the
next start sweeps away whatever a killed run left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import re
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import pymysql

from consistent.gtid import MariaPosition
from consistent.testing._mariadb_process import (
    LOOPBACK,
    ROOT_MARKER,
    MariaDBBinaries,
    MariaDBNotInstalled,
    ServerProcess,
    ServerSettings,
    TopologyError,
    free_ports,
    install_datadir,
    sweep_stale,
    write_owner_file,
)

__all__ = [
    "ConnectionParams",
    "MariaDBBinaries",
    "MariaDBNotInstalled",
    "MariaDBServer",
    "MariaDBTopology",
    "ReplicationTimeout",
    "TopologyError",
    "TopologyOptions",
    "launch",
    "start_topology",
]

log = logging.getLogger(__name__)

_PORT_ATTEMPTS = 3
_MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
_POLL_SECONDS = 0.02
_IDENTIFIER = re.compile(r"[A-Za-z0-9_]{1,64}")
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class ReplicationTimeout(TopologyError):
    """A replica did not reach the primary's position, or start replicating, in time."""


@dataclass(frozen=True)
class TopologyOptions:
    """How to start a topology.  ``base_dir`` defaults to the system temporary directory."""

    replicas: int = 2
    base_dir: Path | None = None
    binaries: MariaDBBinaries | None = None
    startup_timeout: float = 60.0
    read_only_replicas: bool = True
    app_user: str = "app"
    repl_user: str = "repl"
    extra_server_args: tuple[str, ...] = ()
    #: Replicas keep binary logs of what they apply, so that :meth:`MariaDBTopology.switchover`
    #: can promote one.
    promotable: bool = False


@dataclass(frozen=True)
class ConnectionParams:
    """Where and as whom to connect: TCP on 127.0.0.1 with the application user."""

    host: str
    port: int
    user: str
    password: str
    database: str | None = None

    def pymysql_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`pymysql.connect`.  TLS is off: the test servers have
        none, and PyMySQL >= 1.2 otherwise spends about 50 ms per connect building a context."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "ssl_disabled": True,
        }
        if self.database is not None:
            kwargs["database"] = self.database
        return kwargs

    def url(self, driver: str = "mysql+pymysql") -> str:
        """A SQLAlchemy URL; the password is hex, so it needs no escaping."""
        database = self.database or ""
        return f"{driver}://{self.user}:{self.password}@{self.host}:{self.port}/{database}"


class MariaDBServer:
    """One server of the topology: its role, identity, port and process."""

    def __init__(self, process: ServerProcess) -> None:
        self._process = process

    @property
    def name(self) -> str:
        return self._process.settings.name

    @property
    def server_id(self) -> int:
        return self._process.settings.server_id

    @property
    def port(self) -> int:
        return self._process.settings.port

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def is_primary(self) -> bool:
        return self._process.settings.primary

    @property
    def datadir(self) -> Path:
        return self._process.settings.datadir

    @property
    def socket_path(self) -> Path:
        return self._process.settings.socket_path

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.alive

    @property
    def process(self) -> ServerProcess:
        return self._process

    def admin(self) -> Any:
        """A root connection over the Unix socket (autocommit, dict rows); close it after use."""
        return self._process.admin_connection()

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[dict[str, Any]]:
        """Run one statement as root and return its rows."""
        with contextlib.closing(self.admin()) as conn, conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def __repr__(self) -> str:
        return f"<MariaDBServer {self.name} port={self.port} pid={self.pid}>"


ReplicaRef = int | MariaDBServer


@dataclass
class _SignalGuard:
    """Turns SIGTERM/SIGHUP into ``KeyboardInterrupt`` while a topology runs, so ``atexit``
    and ``finally`` blocks stop the servers; handlers installed by someone else are left
    alone."""

    installed: dict[signal.Signals, Any] = field(default_factory=dict)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in _EXIT_SIGNALS:
            if signal.getsignal(signum) is signal.SIG_DFL:
                self.installed[signum] = signal.SIG_DFL
                signal.signal(signum, _exit_on_signal)

    def restore(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self.installed.items():
            if signal.getsignal(signum) is _exit_on_signal:
                signal.signal(signum, previous)
        self.installed.clear()


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    # KeyboardInterrupt rather than SystemExit: pytest reports a SystemExit raised inside a
    # test as that test's failure and carries on, while an interrupt ends the session and
    # runs every fixture's teardown (and plain programs unwind and run atexit either way).
    raise KeyboardInterrupt(f"terminated by signal {signal.Signals(signum).name}")


class MariaDBTopology:
    """A running primary and its replicas.  Use :func:`start_topology` to make one; close it
    (or use it as a context manager) to stop the servers and delete their files."""

    def __init__(
        self,
        *,
        root: Path,
        primary: MariaDBServer,
        replicas: tuple[MariaDBServer, ...],
        options: TopologyOptions,
        app_password: str,
        repl_password: str,
        signal_guard: _SignalGuard | None = None,
    ) -> None:
        self.root = root
        self.primary = primary
        self.replicas = replicas
        self.options = options
        self.app_user = options.app_user
        self.app_password = app_password
        self.repl_user = options.repl_user
        self.repl_password = repl_password
        #: Wall-clock seconds :func:`start_topology` took, replication running included.
        self.startup_seconds = 0.0
        self._closed = False
        self._signals = signal_guard or _SignalGuard()
        # Names of the servers stopped by freeze() and not thawed since.
        self._frozen: set[str] = set()
        # Servers a failover left out of the topology (stopped by close() all the same).
        self._retired: list[MariaDBServer] = []

    # --- description and connections ------------------------------------------------------

    @property
    def servers(self) -> tuple[MariaDBServer, ...]:
        return (self.primary, *self.replicas)

    @property
    def ports(self) -> dict[str, int]:
        """Server name -> TCP port on 127.0.0.1."""
        return {server.name: server.port for server in self.servers}

    def describe(self) -> str:
        ports = ", ".join(f"{name}={port}" for name, port in self.ports.items())
        return (
            f"MariaDB primary + {len(self.replicas)} replicas on {LOOPBACK} ({ports}), "
            f"started in {self.startup_seconds:.2f} s"
        )

    def replica(self, ref: ReplicaRef) -> MariaDBServer:
        """A replica by 0-based index, or the server itself after checking it is one."""
        if isinstance(ref, MariaDBServer):
            if ref not in self.replicas:
                raise TopologyError(f"{ref.name} is not a replica of this topology")
            return ref
        if not 0 <= ref < len(self.replicas):
            raise TopologyError(f"no replica #{ref}: there are {len(self.replicas)}")
        return self.replicas[ref]

    def connection_params(
        self, server: MariaDBServer | None = None, database: str | None = None
    ) -> ConnectionParams:
        """Where the application user connects to ``server`` (default: the primary)."""
        target = server or self.primary
        return ConnectionParams(
            host=LOOPBACK,
            port=target.port,
            user=self.app_user,
            password=self.app_password,
            database=database,
        )

    def connect(
        self, server: MariaDBServer | None = None, database: str | None = None, **kwargs: Any
    ) -> Any:
        """A PyMySQL connection as the application user, over TCP (autocommit on unless
        ``kwargs`` says otherwise)."""
        params = self.connection_params(server, database).pymysql_kwargs()
        params.setdefault("autocommit", True)
        params.update(kwargs)
        return pymysql.connect(**params)

    # --- positions and waiting --------------------------------------------------------------

    def primary_position(self) -> str:
        """The primary's ``@@GLOBAL.gtid_binlog_pos`` (every transaction it has logged)."""
        return str(self.primary.query("SELECT @@GLOBAL.gtid_binlog_pos AS pos")[0]["pos"])

    def replica_position(self, ref: ReplicaRef) -> str:
        """A replica's ``@@GLOBAL.gtid_slave_pos`` (what it has applied)."""
        replica = self.replica(ref)
        return str(replica.query("SELECT @@GLOBAL.gtid_slave_pos AS pos")[0]["pos"])

    def replica_status(self, ref: ReplicaRef) -> dict[str, Any]:
        """The replica's ``SHOW SLAVE STATUS`` row."""
        rows = self.replica(ref).query("SHOW SLAVE STATUS")
        if not rows:
            raise TopologyError(f"{self.replica(ref).name} has no replication configured")
        return rows[0]

    def wait_for_catchup(self, ref: ReplicaRef, timeout: float = 10.0) -> None:
        """Block until the replica has applied everything the primary has logged so far;
        raise :class:`ReplicationTimeout` after ``timeout`` seconds."""
        replica = self.replica(ref)
        position = self.primary_position()
        rows = replica.query("SELECT MASTER_GTID_WAIT(%s, %s) AS r", (position, timeout))
        if rows[0]["r"] != 0:
            raise ReplicationTimeout(
                f"{replica.name} did not reach {position!r} in {timeout} s "
                f"(it is at {self.replica_position(replica)!r})"
            )

    def wait_for_all(self, timeout: float = 10.0) -> None:
        """:meth:`wait_for_catchup` for every running replica."""
        for replica in self.replicas:
            if replica.alive:
                self.wait_for_catchup(replica, timeout)

    def wait_replicating(self, ref: ReplicaRef, timeout: float = 10.0) -> None:
        """Block until both replication threads of the replica run."""
        replica = self.replica(ref)
        deadline = time.monotonic() + timeout
        while True:
            status = self.replica_status(replica)
            if status["Slave_IO_Running"] == "Yes" and status["Slave_SQL_Running"] == "Yes":
                return
            errors = [
                f"{status[k]}: {status[k.replace('Errno', 'Error')]}"
                for k in ("Last_IO_Errno", "Last_SQL_Errno")
                if status.get(k)
            ]
            if time.monotonic() > deadline:
                raise ReplicationTimeout(
                    f"{replica.name} is not replicating after {timeout} s "
                    f"(IO={status['Slave_IO_Running']}, SQL={status['Slave_SQL_Running']}"
                    f"{'; ' + '; '.join(errors) if errors else ''})"
                )
            time.sleep(_POLL_SECONDS)

    # --- lag control --------------------------------------------------------------------------

    def delay(self, ref: ReplicaRef, seconds: int) -> None:
        """Delay the replica's applier by ``seconds`` (``MASTER_DELAY``); 0 removes the delay."""
        if not 0 <= seconds <= 2**31 - 1:
            raise TopologyError(f"MASTER_DELAY must be 0..2147483647 seconds, not {seconds}")
        replica = self.replica(ref)
        with contextlib.closing(replica.admin()) as conn, conn.cursor() as cursor:
            cursor.execute("STOP SLAVE")
            cursor.execute("CHANGE MASTER TO MASTER_DELAY = %s", (int(seconds),))
            cursor.execute("START SLAVE")
        self.wait_replicating(replica)

    def pause(self, ref: ReplicaRef) -> None:
        """Stop the replica's SQL (applier) thread; events keep arriving in its relay log."""
        self.replica(ref).query("STOP SLAVE SQL_THREAD")

    def resume(self, ref: ReplicaRef) -> None:
        """Start the replica's SQL thread again."""
        replica = self.replica(ref)
        replica.query("START SLAVE SQL_THREAD")
        self.wait_replicating(replica)

    def kill(self, ref: ReplicaRef) -> None:
        """SIGKILL the replica's server: it crashes and stops answering."""
        self.replica(ref).process.kill()

    def freeze(self, ref: ReplicaRef | None = None) -> None:
        """SIGSTOP a replica (by index or server), or the primary when ``ref`` is ``None``:
        it accepts TCP connections (the kernel does) and answers nothing until :meth:`thaw`."""
        server = self.primary if ref is None else self.replica(ref)
        self._frozen.add(server.name)
        server.process.freeze()

    def thaw(self, ref: ReplicaRef | None = None) -> None:
        """SIGCONT a server stopped by :meth:`freeze` (the primary when ``ref`` is ``None``)."""
        server = self.primary if ref is None else self.replica(ref)
        server.process.thaw()
        self._frozen.discard(server.name)

    def thaw_all(self) -> None:
        """:meth:`thaw` every frozen server."""
        for server in self.servers:
            if server.name in self._frozen:
                server.process.thaw()
        self._frozen.clear()

    def restart(self, ref: ReplicaRef) -> None:
        """Start the replica again (after a clean stop if it still runs) on the same port,
        and wait until it replicates; its position and delay survive the restart."""
        replica = self.replica(ref)
        replica.process.terminate()
        replica.process.start()
        replica.process.wait_ready(time.monotonic() + self.options.startup_timeout)
        self.wait_replicating(replica)

    def switchover(self, ref: ReplicaRef, *, planned: bool = True, recover: bool = True) -> float:
        """Make replica ``ref`` the primary, as an operator does (the topology must be
        :attr:`TopologyOptions.promotable`): the old primary becomes read-only (``planned``:
        first, and the replicas catch up with it; otherwise it is dead or ignored), the
        replica stops replicating and becomes writable, and the other replicas (and the old
        primary, when planned) replicate from it with ``MASTER_USE_GTID = slave_pos``.
        Unplanned and with ``recover``, the replica first takes what another replica received
        beyond it (:meth:`_catch_up_from_survivors`); without, what it lacks is lost.
        Returns the ``time.monotonic()`` at which the new primary became writable."""
        promoted = self.replica(ref)
        old = self.primary
        if planned:
            old.query("SET GLOBAL read_only = 1")
            self.wait_for_all()
        elif recover:
            self._catch_up_from_survivors(promoted)
        with contextlib.closing(promoted.admin()) as conn, conn.cursor() as cursor:
            cursor.execute("STOP SLAVE")
            cursor.execute("RESET SLAVE ALL")
            cursor.execute("SET GLOBAL read_only = 0")
            promoted_at = time.monotonic()
        others = [r for r in self.replicas if r is not promoted]
        if planned:
            others.append(old)
        for server in others:
            with contextlib.closing(server.admin()) as conn, conn.cursor() as cursor:
                cursor.execute("STOP SLAVE")
                if server is old:
                    cursor.execute("SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos")
                cursor.execute(
                    "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, "
                    "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
                    (LOOPBACK, promoted.port, self.repl_user, self.repl_password),
                )
                cursor.execute("START SLAVE")
        if not planned:
            self._retired.append(old)  # still stopped with the others by close()
        self.primary = promoted
        self.replicas = tuple(others)
        return promoted_at

    def _catch_up_from_survivors(self, promoted: MariaDBServer, timeout: float = 10.0) -> None:
        """The primary is gone: every running replica applies what it had received, and
        ``promoted`` takes from the one that got furthest what it lacks, as failover tools do.
        A replica left ahead of the new primary could not replicate from it (1236: its
        position is not in the new primary's binary log)."""
        survivors = [r for r in self.replicas if r.alive]
        applied: dict[str, MariaPosition] = {}
        for server in survivors:
            server.query("STOP SLAVE IO_THREAD")
            received = str(server.query("SHOW SLAVE STATUS")[0].get("Gtid_IO_Pos") or "")
            if received:
                server.query("SELECT MASTER_GTID_WAIT(%s, %s)", (received, timeout))
            position = server.query("SELECT @@GLOBAL.gtid_slave_pos AS pos")[0]["pos"]
            applied[server.name] = MariaPosition.parse(str(position or ""))
        ahead = [s for s in survivors if not applied[promoted.name].covers(applied[s.name])]
        if not ahead:
            return
        furthest = max(ahead, key=lambda s: sum(g.seq_no for g in applied[s.name].gtids()))
        promoted.query("STOP SLAVE")
        promoted.query(
            "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
            (LOOPBACK, furthest.port, self.repl_user, self.repl_password),
        )
        promoted.query("START SLAVE")
        target = str(applied[furthest.name])
        rows = promoted.query("SELECT MASTER_GTID_WAIT(%s, %s) AS r", (target, timeout))
        if rows[0]["r"] != 0:
            raise ReplicationTimeout(
                f"{promoted.name} did not catch up with {furthest.name} ({target!r}) in {timeout} s"
            )

    def reset_lag(self) -> None:
        """Undo every lag control on every replica: thaw frozen servers, restart killed ones,
        remove delays, start stopped threads.  Cheap when nothing was changed (one status
        query per replica)."""
        self.thaw_all()
        for replica in self.replicas:
            if not replica.alive:
                self.restart(replica)
                status = self.replica_status(replica)
            else:
                status = self.replica_status(replica)
            if status.get("SQL_Delay"):
                self.delay(replica, 0)
            elif status["Slave_IO_Running"] != "Yes" or status["Slave_SQL_Running"] != "Yes":
                replica.query("START SLAVE")
                self.wait_replicating(replica)

    # --- databases ----------------------------------------------------------------------------

    def create_database(self, name: str, timeout: float = 10.0) -> None:
        """Create ``name`` on the primary and wait until every running replica has it."""
        self.primary.query(f"CREATE DATABASE {_identifier(name)}")
        self.wait_for_all(timeout)

    def drop_database(self, name: str) -> None:
        """Drop ``name`` on the primary (replication drops it on the replicas)."""
        self.primary.query(f"DROP DATABASE IF EXISTS {_identifier(name)}")

    # --- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every server (SIGTERM, SIGKILL after a deadline) and delete the directories."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        everyone = (*self.servers, *self._retired)
        try:
            for server in everyone:
                server.process.thaw()  # a stopped process would not act on SIGTERM
            for server in everyone:
                server.process.send_terminate()
            for server in everyone:
                server.process.terminate()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self._signals.restore()
        log.info("stopped MariaDB topology in %s", self.root)

    def __enter__(self) -> MariaDBTopology:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _identifier(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise TopologyError(f"not a plain identifier: {name!r}")
    return f"`{name}`"


def _bootstrap_sql(options: TopologyOptions, app_password: str, repl_password: str) -> str:
    """Accounts made at install time, before the binary log exists, so they are identical on
    every server and never replicate.  Root keeps only its Unix-socket account."""
    app = _identifier(options.app_user)
    repl = _identifier(options.repl_user)
    lines = [
        "DELETE FROM mysql.global_priv WHERE User = '';",
        "DELETE FROM mysql.global_priv WHERE User = 'root' AND Host <> 'localhost';",
        "FLUSH PRIVILEGES;",
    ]
    for host in (LOOPBACK, "localhost"):
        lines += [
            f"CREATE USER {repl}@'{host}' IDENTIFIED BY '{repl_password}';",
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {repl}@'{host}';",
            f"CREATE USER {app}@'{host}' IDENTIFIED BY '{app_password}';",
            # Everything an application and the lag sampler need, but not READ_ONLY ADMIN
            # or SUPER: a write routed to a read-only replica must fail as in production.
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, REFERENCES, "
            "CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, "
            "CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER, PROCESS, SHOW DATABASES, "
            # REPLICATION MASTER ADMIN: SHOW SLAVE HOSTS, for replica discovery.
            "BINLOG MONITOR, SLAVE MONITOR, REPLICATION MASTER ADMIN "
            f"ON *.* TO {app}@'{host}';",
        ]
    return "\n".join(lines) + "\n"


def start_topology(replicas: int = 2, **overrides: Any) -> MariaDBTopology:
    """Start a primary and ``replicas`` replicas; other :class:`TopologyOptions` fields may be
    given by keyword.  Returns once replication runs on every replica."""
    return launch(TopologyOptions(replicas=replicas, **overrides))


def launch(options: TopologyOptions) -> MariaDBTopology:
    """:func:`start_topology` with an explicit :class:`TopologyOptions`."""
    started = time.monotonic()
    if options.replicas < 0:
        raise TopologyError(f"replicas must be >= 0, not {options.replicas}")
    binaries = options.binaries or MariaDBBinaries.require()
    base = options.base_dir or Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    sweep_stale(base)
    root = Path(tempfile.mkdtemp(prefix=ROOT_MARKER, dir=base))
    longest_socket = root / f"replica{options.replicas}" / "mysqld.sock"
    if len(bytes(longest_socket)) > _MAX_SOCKET_PATH:
        shutil.rmtree(root, ignore_errors=True)
        raise TopologyError(f"base_dir too long for a Unix socket path: {longest_socket}")
    write_owner_file(root)
    app_password = secrets.token_hex(12)
    repl_password = secrets.token_hex(12)
    processes: list[ServerProcess] = []
    guard = _SignalGuard()
    guard.install()
    try:
        template = root / "template"
        template.mkdir()
        install_datadir(
            binaries,
            template,
            _bootstrap_sql(options, app_password, repl_password),
            options.startup_timeout,
        )
        names = ["primary", *(f"replica{i + 1}" for i in range(options.replicas))]
        for name in names:
            shutil.copytree(template, root / name, symlinks=True)
        shutil.rmtree(template)
        processes = _start_servers(binaries, options, root, names)
        topology = MariaDBTopology(
            root=root,
            primary=MariaDBServer(processes[0]),
            replicas=tuple(MariaDBServer(p) for p in processes[1:]),
            options=options,
            app_password=app_password,
            repl_password=repl_password,
            signal_guard=guard,
        )
        atexit.register(topology.close)
        for replica in topology.replicas:
            _configure_replica(topology, replica)
        for replica in topology.replicas:
            topology.wait_replicating(replica, options.startup_timeout)
        topology.wait_for_all(options.startup_timeout)
    except BaseException:
        for process in processes:
            process.kill()
        shutil.rmtree(root, ignore_errors=True)
        guard.restore()
        raise
    topology.startup_seconds = time.monotonic() - started
    log.info("%s", topology.describe())
    return topology


def _start_servers(
    binaries: MariaDBBinaries, options: TopologyOptions, root: Path, names: list[str]
) -> list[ServerProcess]:
    """Start every server side by side, choosing fresh ports for any that lost a port race."""
    processes: list[ServerProcess] = []
    ports = free_ports(len(names))
    for index, (name, port) in enumerate(zip(names, ports, strict=True)):
        settings = ServerSettings(
            name=name,
            server_id=index + 1,
            port=port,
            datadir=root / name,
            primary=index == 0,
            read_only=options.read_only_replicas,
            extra_args=options.extra_server_args,
            promotable=options.promotable,
        )
        processes.append(ServerProcess(binaries, settings))
    try:
        for process in processes:
            process.start()
        deadline = time.monotonic() + options.startup_timeout
        for position, process in enumerate(processes):
            processes[position] = _ready_or_retry(process, deadline)
    except BaseException:
        for process in processes:
            process.kill()
        raise
    return processes


def _ready_or_retry(process: ServerProcess, deadline: float) -> ServerProcess:
    for attempt in range(_PORT_ATTEMPTS):
        try:
            process.wait_ready(deadline)
            return process
        except TopologyError:
            if attempt + 1 == _PORT_ATTEMPTS or process.alive or not process.bind_failed():
                raise
        (port,) = free_ports(1)
        log.info(
            "port %d was taken, retrying %s on %d",
            process.settings.port,
            process.settings.name,
            port,
        )
        settings = dataclasses.replace(process.settings, port=port)
        process.settings.error_log.unlink(missing_ok=True)
        process.settings.console_log.unlink(missing_ok=True)
        process = ServerProcess(process.binaries, settings)
        process.start()
    return process


def _configure_replica(topology: MariaDBTopology, replica: MariaDBServer) -> None:
    with contextlib.closing(replica.admin()) as conn, conn.cursor() as cursor:
        cursor.execute(
            "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, "
            "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
            (LOOPBACK, topology.primary.port, topology.repl_user, topology.repl_password),
        )
        cursor.execute("START SLAVE")
