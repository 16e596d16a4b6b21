"""One ``mariadbd`` process: its binaries, data directory, command line, start, readiness and stop.

The topology in :mod:`consistent.testing.mariadb` is built from these pieces.  Everything here
binds to 127.0.0.1 only and keeps every file under one temporary root directory whose name
carries :data:`ROOT_MARKER`, so that servers left behind by a crashed run can be recognised and
killed by the next one (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from consistent.errors import OperationalError

__all__ = [
    "ROOT_MARKER",
    "MariaDBBinaries",
    "MariaDBNotInstalled",
    "ServerProcess",
    "ServerSettings",
    "TopologyError",
    "free_ports",
    "install_datadir",
    "sweep_stale",
    "write_owner_file",
]

log = logging.getLogger(__name__)

#: Every topology root directory starts with this; the stale sweep looks for it.
ROOT_MARKER = "consistent-mariadb-"
OWNER_FILE = "owner.json"
LOOPBACK = "127.0.0.1"

# Directories younger than this without an owner file may belong to a topology being created.
_OWNERLESS_GRACE_SECONDS = 120.0
_POLL_SECONDS = 0.02

# Settings shared by the install step and every server, so that InnoDB files made once can be
# copied and reused without a resize.  Small pools and logs, no fsync: these servers hold test
# data only and must start in a fraction of a second.
_STORAGE_ARGS: tuple[str, ...] = (
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-log-buffer-size=4M",
    "--innodb-doublewrite=0",
    "--innodb-flush-log-at-trx-commit=2",
    "--skip-name-resolve",
)

_SERVER_ARGS: tuple[str, ...] = (
    "--bind-address=" + LOOPBACK,
    "--skip-networking=0",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
    "--performance-schema=OFF",
    "--gtid-domain-id=0",
    "--sync-binlog=0",
    "--innodb-fast-shutdown=1",
    "--max-connections=300",
    "--open-files-limit=4096",
    "--table-open-cache=400",
)


class TopologyError(OperationalError):
    """A test server could not be started, stopped or driven as asked."""


class MariaDBNotInstalled(TopologyError):
    """``mariadbd`` or ``mariadb-install-db`` is not on this machine."""


@dataclass(frozen=True)
class MariaDBBinaries:
    """Paths of the two programs a topology needs."""

    server: Path
    install_db: Path

    @classmethod
    def find(cls) -> MariaDBBinaries | None:
        """Locate the binaries: ``CONSISTENT_MARIADBD`` / ``CONSISTENT_MARIADB_INSTALL_DB``
        override, then ``PATH``, then Debian's and the tarballs' usual directories."""
        server = _find_program(
            os.environ.get("CONSISTENT_MARIADBD"),
            ("mariadbd", "mysqld"),
            ("/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin"),
        )
        install_db = _find_program(
            os.environ.get("CONSISTENT_MARIADB_INSTALL_DB"),
            ("mariadb-install-db", "mysql_install_db"),
            ("/usr/bin", "/usr/local/bin", "/usr/local/mysql/scripts"),
        )
        if server is None or install_db is None:
            return None
        return cls(server=server, install_db=install_db)

    @classmethod
    def require(cls) -> MariaDBBinaries:
        """Like :meth:`find`, raising :class:`MariaDBNotInstalled` when they are missing."""
        found = cls.find()
        if found is None:
            raise MariaDBNotInstalled(
                "mariadbd / mariadb-install-db not found (install Debian's mariadb-server, "
                "or set CONSISTENT_MARIADBD and CONSISTENT_MARIADB_INSTALL_DB)"
            )
        return found


def _find_program(
    override: str | None, names: tuple[str, ...], directories: tuple[str, ...]
) -> Path | None:
    if override:
        path = Path(override)
        return path if os.access(path, os.X_OK) else None
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
        for directory in directories:
            candidate = Path(directory) / name
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that are free on 127.0.0.1 right now.

    All sockets are held open until every port is chosen, so the ports differ; another process
    may still take one before ``mariadbd`` binds it, which :class:`ServerProcess` reports.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def private_tmpdir(datadir: Path) -> Path:
    """A temporary directory for one server alone, beside its data directory: servers that
    share ``/tmp`` (several topologies, several test runs) can trip over each other's
    temporary files while they bootstrap."""
    path = datadir.with_name(datadir.name + "-tmp")
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def install_datadir(
    binaries: MariaDBBinaries, datadir: Path, bootstrap_sql: str, timeout: float
) -> None:
    """Create a fresh data directory with ``mariadb-install-db``, then run ``bootstrap_sql``
    (users and grants) in the same bootstrap, before any binary log exists."""
    extra = datadir.parent / "bootstrap.sql"
    extra.write_text(bootstrap_sql, encoding="utf-8")
    extra.chmod(0o600)
    command = [
        str(binaries.install_db),
        "--no-defaults",
        f"--datadir={datadir}",
        "--user=root",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        f"--extra-file={extra}",
        f"--tmpdir={private_tmpdir(datadir)}",
        *_STORAGE_ARGS,
    ]
    # Its own process group: the script runs ``mariadbd --bootstrap`` as a child, which must
    # die with it if we are interrupted, or it would go on writing into a removed directory.
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=datadir.parent,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise TopologyError(f"mariadb-install-db did not finish in {timeout:.0f} s") from exc
    finally:
        extra.unlink(missing_ok=True)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if process.returncode != 0:
        text = output.decode("utf-8", "replace")
        raise TopologyError(
            f"mariadb-install-db failed with exit code {process.returncode}:\n{text[-3000:]}"
        )


@dataclass(frozen=True)
class ServerSettings:
    """What one server's command line is made of."""

    name: str
    server_id: int
    port: int
    datadir: Path
    primary: bool
    read_only: bool = False
    extra_args: tuple[str, ...] = ()
    #: A replica that writes a binary log of what it applies (``log_slave_updates``), so
    #: that it can be promoted and the others repointed to it.
    promotable: bool = False

    @property
    def socket_path(self) -> Path:
        return self.datadir / "mysqld.sock"

    @property
    def error_log(self) -> Path:
        return self.datadir / "error.log"

    @property
    def console_log(self) -> Path:
        return self.datadir / "console.log"

    def command(self, binaries: MariaDBBinaries) -> list[str]:
        """The full ``mariadbd`` argument list (``--no-defaults`` first, as it must be)."""
        args = [
            str(binaries.server),
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--user=root",
            f"--port={self.port}",
            f"--socket={self.socket_path}",
            f"--pid-file={self.datadir / 'mysqld.pid'}",
            f"--log-error={self.error_log}",
            f"--server-id={self.server_id}",
            f"--tmpdir={private_tmpdir(self.datadir)}",
            *_STORAGE_ARGS,
            *_SERVER_ARGS,
        ]
        if self.primary:
            args += [f"--log-bin={self.datadir / 'binlog'}", "--binlog-format=ROW"]
        else:
            args += [
                f"--relay-log={self.datadir / 'relay'}",
                *(
                    (
                        f"--log-bin={self.datadir / 'binlog'}",
                        "--binlog-format=ROW",
                        "--log-slave-updates",
                    )
                    if self.promotable
                    else ("--skip-log-bin",)
                ),
                f"--read-only={int(self.read_only)}",
                # Listed by the primary's SHOW SLAVE HOSTS (replica discovery).
                "--report-host=127.0.0.1",
                f"--report-port={self.port}",
            ]
        args += list(self.extra_args)
        return args


class ServerProcess:
    """One ``mariadbd`` child process, started and stopped by pid.

    The child gets a parent-death signal (``setpriv --pdeathsig KILL``, when ``setpriv`` exists
    and the caller is the main thread), so a test run killed with SIGKILL takes its servers
    with it; :func:`sweep_stale` removes what is left in that case.
    """

    def __init__(self, binaries: MariaDBBinaries, settings: ServerSettings) -> None:
        self.binaries = binaries
        self.settings = settings
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Spawn the server; returns at once (see :meth:`wait_ready`)."""
        if self.alive:
            raise TopologyError(f"{self.settings.name} is already running (pid {self.pid})")
        command = self.settings.command(self.binaries)
        setpriv = shutil.which("setpriv")
        if setpriv and threading.current_thread() is threading.main_thread():
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        self.settings.socket_path.unlink(missing_ok=True)
        with self.settings.console_log.open("ab") as console:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.settings.datadir,
                start_new_session=True,
            )
        log.debug("started %s pid %s port %s", self.settings.name, self.pid, self.settings.port)

    def wait_ready(self, deadline: float) -> None:
        """Block until the server answers ``SELECT 1`` on its socket, or raise
        :class:`TopologyError` with the end of its error log."""
        while True:
            if not self.alive:
                raise TopologyError(
                    f"{self.settings.name} exited during startup "
                    f"(code {self._exit_code()}):\n{self.log_tail()}"
                )
            try:
                with contextlib.closing(self.admin_connection(connect_timeout=1)) as conn:
                    conn.ping(reconnect=False)
                return
            except pymysql.err.MySQLError:
                pass
            if time.monotonic() > deadline:
                raise TopologyError(
                    f"{self.settings.name} did not accept connections in time:\n{self.log_tail()}"
                )
            time.sleep(_POLL_SECONDS)

    def admin_connection(self, connect_timeout: float = 5) -> Any:
        """A PyMySQL connection as root over the server's own Unix socket."""
        return pymysql.connect(
            unix_socket=str(self.settings.socket_path),
            user="root",
            password="",
            autocommit=True,
            connect_timeout=connect_timeout,
            cursorclass=pymysql.cursors.DictCursor,
            # PyMySQL >= 1.2 builds a default TLS context (about 50 ms) unless told not to;
            # these servers have no TLS.
            ssl_disabled=True,
        )

    def bind_failed(self) -> bool:
        """Whether the last start failed because the port was taken by someone else."""
        text = self.log_tail()
        return "Address already in use" in text or "another mysqld server running" in text

    def terminate(self, timeout: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL if it is still running after ``timeout``."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        _signal(process, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s ignored SIGTERM for %.0f s, killing it", self.settings.name, timeout)
            self.kill()

    def send_terminate(self) -> None:
        """Send SIGTERM without waiting, so several servers shut down side by side."""
        if self._process is not None and self._process.poll() is None:
            _signal(self._process, signal.SIGTERM)

    def freeze(self) -> None:
        """SIGSTOP: the server answers nothing until :meth:`thaw` (the kernel still accepts
        TCP connections for it, and buffers what is sent to it)."""
        if self._process is not None and self._process.poll() is None:
            _signal(self._process, signal.SIGSTOP)
            # kill() returns before every thread has stopped: on a loaded machine a thread
            # could still answer the next statement.
            _wait_stopped(self._process.pid)

    def thaw(self) -> None:
        """SIGCONT: undo :meth:`freeze` (harmless on a server that is not frozen)."""
        if self._process is not None and self._process.poll() is None:
            _signal(self._process, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL and reap: a crash, from the server's point of view."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        _signal(process, signal.SIGKILL)
        process.wait(10)

    def log_tail(self, limit: int = 4000) -> str:
        parts = []
        for path in (self.settings.console_log, self.settings.error_log):
            with contextlib.suppress(OSError):
                parts.append(path.read_text(encoding="utf-8", errors="replace")[-limit:])
        return "\n".join(part for part in parts if part)

    def _exit_code(self) -> int | None:
        return self._process.poll() if self._process is not None else None


def _signal(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signum)


#: How long :func:`_wait_stopped` waits for every thread of a server to stop.
STOP_TIMEOUT = 5.0


def _wait_stopped(pid: int) -> None:
    """Wait until every thread of ``pid`` is stopped (state ``T`` in
    ``/proc/<pid>/task/*/stat``), at most :data:`STOP_TIMEOUT` seconds."""
    deadline = time.monotonic() + STOP_TIMEOUT
    tasks = Path(f"/proc/{pid}/task")
    while time.monotonic() < deadline:
        try:
            states = [
                (task / "stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1]
                for task in tasks.iterdir()
            ]
        except OSError:
            if not tasks.exists():
                return  # the process is gone
            continue  # a thread ended while we looked: look again
        if all(state.split()[0] in ("T", "t") for state in states):
            return
        time.sleep(0.002)
    raise OperationalError(f"server process {pid} did not stop within {STOP_TIMEOUT} s")


# --- ownership and the stale-process sweep ----------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), which
    tells a live owner from a recycled pid.  ``None`` when the process does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


def write_owner_file(root: Path) -> None:
    """Record which process owns ``root``: the sweep leaves it alone while that process lives."""
    pid = os.getpid()
    owner = {"pid": pid, "start_ticks": _start_ticks(pid)}
    (root / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")


def _owner_alive(root: Path) -> bool:
    try:
        owner = json.loads((root / OWNER_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        try:
            age = time.time() - root.stat().st_mtime
        except OSError:
            return False
        return age < _OWNERLESS_GRACE_SECONDS
    except (OSError, ValueError):
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    ticks = _start_ticks(pid)
    return ticks is not None and ticks == owner.get("start_ticks")


def _marked_servers() -> list[tuple[int, Path]]:
    """(pid, topology root) of every running ``mariadbd`` whose datadir carries the marker."""
    found: list[tuple[int, Path]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith((b"mariadbd", b"mysqld")):
            continue
        for arg in argv:
            if arg.startswith(b"--datadir=") and ROOT_MARKER.encode() in arg:
                datadir = Path(os.fsdecode(arg[len(b"--datadir=") :]))
                found.append((int(entry.name), datadir.parent))
    return found


def sweep_stale(base: Path) -> int:
    """Kill servers and remove root directories left by runs whose owner process is gone.

    Returns how many server processes were killed.  Topologies of live processes (another test
    session running side by side) are never touched.
    """
    killed = 0
    for pid, root in _marked_servers():
        if _owner_alive(root):
            continue
        log.warning("killing stale test server pid %d (%s)", pid, root)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    if base.is_dir():
        for root in base.glob(ROOT_MARKER + "*"):
            if root.is_dir() and not _owner_alive(root):
                log.warning("removing stale test topology directory %s", root)
                shutil.rmtree(root, ignore_errors=True)
    return killed
