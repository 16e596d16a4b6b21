"""The real MariaDB topology: its wiring, its lag controls, and that it leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from consistent.testing._mariadb_process import OWNER_FILE, ROOT_MARKER, sweep_stale
from consistent.testing.mariadb import (
    MariaDBBinaries,
    MariaDBTopology,
    ReplicationTimeout,
    start_topology,
)
from consistent.testing.pytest_plugin import CleanDatabase

pytestmark = pytest.mark.mariadb

needs_mariadbd = pytest.mark.skipif(
    MariaDBBinaries.find() is None and os.environ.get("CI", "").lower() != "true",
    reason="mariadbd not installed",
)


def _rows(conn: pymysql.connections.Connection, sql: str) -> list[tuple[object, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def _make_table(db: CleanDatabase) -> None:
    with contextlib.closing(db.connect()) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    db.topology.wait_for_all()


def _insert(db: CleanDatabase, row_id: int) -> None:
    with contextlib.closing(db.connect()) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (%s, 'x')", (row_id,))


def _ids_on(db: CleanDatabase, replica: int) -> set[int]:
    server = db.topology.replicas[replica]
    with contextlib.closing(db.connect(server)) as conn:
        return {int(str(row[0])) for row in _rows(conn, "SELECT id FROM t")}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_dead(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _pid_alive(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _pid_alive(pid)]


# --- wiring -----------------------------------------------------------------------------------


def test_servers_are_separate_processes_on_loopback_ports(
    mariadb_topology: MariaDBTopology,
) -> None:
    servers = mariadb_topology.servers
    assert len(mariadb_topology.replicas) == 2
    assert len({s.port for s in servers}) == 3
    assert len({s.pid for s in servers}) == 3
    assert len({s.datadir for s in servers}) == 3
    for server in servers:
        row = server.query(
            "SELECT @@bind_address AS b, @@port AS p, @@server_id AS id, @@datadir AS d"
        )[0]
        assert row["b"] == "127.0.0.1"
        assert row["p"] == server.port
        assert row["id"] == server.server_id
        assert Path(row["d"]).resolve() == server.datadir.resolve()
    assert len({s.server_id for s in servers}) == 3


def test_primary_logs_row_events_and_replicas_use_gtid(mariadb_topology: MariaDBTopology) -> None:
    row = mariadb_topology.primary.query(
        "SELECT @@log_bin AS log_bin, @@binlog_format AS fmt, @@gtid_domain_id AS domain"
    )[0]
    assert (row["log_bin"], row["fmt"], row["domain"]) == (1, "ROW", 0)
    for index, replica in enumerate(mariadb_topology.replicas):
        status = mariadb_topology.replica_status(index)
        assert status["Using_Gtid"] == "Slave_Pos"
        assert status["Master_Port"] == mariadb_topology.primary.port
        assert status["Master_Host"] == "127.0.0.1"
        assert status["Slave_IO_Running"] == status["Slave_SQL_Running"] == "Yes"
        assert replica.query("SELECT @@read_only AS r")[0]["r"] == 1


def test_accounts_need_passwords_and_anonymous_users_are_gone(
    mariadb_topology: MariaDBTopology,
) -> None:
    users = mariadb_topology.primary.query("SELECT User, Host FROM mysql.user")
    assert not [u for u in users if u["User"] == ""]
    assert {u["Host"] for u in users if u["User"] == "root"} == {"localhost"}
    assert mariadb_topology.app_password
    params = mariadb_topology.connection_params().pymysql_kwargs()
    with pytest.raises(pymysql.err.OperationalError) as excinfo:
        pymysql.connect(**{**params, "password": mariadb_topology.app_password + "x"})
    assert excinfo.value.args[0] == 1045
    with pytest.raises(pymysql.err.OperationalError) as excinfo:
        pymysql.connect(**{**params, "user": "root", "password": ""})
    assert excinfo.value.args[0] == 1045


def test_application_user_cannot_write_on_a_replica(mariadb_database: CleanDatabase) -> None:
    _make_table(mariadb_database)
    replica = mariadb_database.topology.replicas[0]
    with (
        contextlib.closing(mariadb_database.connect(replica)) as conn,
        conn.cursor() as cursor,
        pytest.raises(pymysql.err.OperationalError) as excinfo,
    ):
        cursor.execute("INSERT INTO t VALUES (1, 'no')")
    assert excinfo.value.args[0] == 1290  # ER_OPTION_PREVENTS_STATEMENT (read_only)


def test_clean_database_exists_everywhere_and_is_empty(mariadb_database: CleanDatabase) -> None:
    topology = mariadb_database.topology
    for server in topology.servers:
        rows = server.query(
            "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = %s",
            (mariadb_database.name,),
        )
        assert rows[0]["n"] == 0
        assert server.query("SHOW DATABASES LIKE %s", (mariadb_database.name,))


def test_a_write_on_the_primary_reaches_every_replica(mariadb_database: CleanDatabase) -> None:
    _make_table(mariadb_database)
    _insert(mariadb_database, 7)
    mariadb_database.topology.wait_for_all(timeout=10)
    assert _ids_on(mariadb_database, 0) == {7}
    assert _ids_on(mariadb_database, 1) == {7}
    topology = mariadb_database.topology
    assert topology.replica_position(0) == topology.primary_position()


# --- lag control ------------------------------------------------------------------------------


def test_delay_holds_a_write_back_for_master_delay(mariadb_database: CleanDatabase) -> None:
    topology = mariadb_database.topology
    _make_table(mariadb_database)
    # MariaDB measures the delay from the event's whole-second timestamp, so a delay of N s
    # holds a write back for more than N - 1 s: 2 s guarantees a visible hold.
    topology.delay(0, 2)
    assert topology.replica_status(0)["SQL_Delay"] == 2
    written = time.monotonic()
    _insert(mariadb_database, 1)
    assert _ids_on(mariadb_database, 0) == set()
    topology.wait_for_catchup(0, timeout=10)
    assert time.monotonic() - written >= 1.0
    assert _ids_on(mariadb_database, 0) == {1}
    # The other replica was not delayed.
    topology.wait_for_catchup(1, timeout=10)
    assert _ids_on(mariadb_database, 1) == {1}


def test_pause_stops_applying_and_resume_catches_up(mariadb_database: CleanDatabase) -> None:
    topology = mariadb_database.topology
    _make_table(mariadb_database)
    topology.pause(1)
    assert topology.replica_status(1)["Slave_SQL_Running"] == "No"
    _insert(mariadb_database, 2)
    with pytest.raises(ReplicationTimeout):
        topology.wait_for_catchup(1, timeout=0.3)
    assert _ids_on(mariadb_database, 1) == set()
    topology.resume(1)
    topology.wait_for_catchup(1, timeout=10)
    assert _ids_on(mariadb_database, 1) == {2}


def test_kill_and_restart_a_replica(mariadb_database: CleanDatabase) -> None:
    topology = mariadb_database.topology
    _make_table(mariadb_database)
    replica = topology.replicas[1]
    old_pid = replica.pid
    assert old_pid is not None
    topology.kill(1)
    assert not _pid_alive(old_pid)
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(**topology.connection_params(replica).pymysql_kwargs(), connect_timeout=2)
    _insert(mariadb_database, 3)
    topology.restart(1)
    assert replica.pid != old_pid
    assert replica.pid is not None
    assert _pid_alive(replica.pid)
    topology.wait_for_catchup(1, timeout=10)
    assert _ids_on(mariadb_database, 1) == {3}


def test_reset_lag_undoes_every_control(mariadb_topology: MariaDBTopology) -> None:
    mariadb_topology.delay(0, 2)
    mariadb_topology.kill(1)
    mariadb_topology.reset_lag()
    assert mariadb_topology.replicas[1].alive
    for index in range(2):
        status = mariadb_topology.replica_status(index)
        assert status["SQL_Delay"] == 0
        assert status["Slave_IO_Running"] == status["Slave_SQL_Running"] == "Yes"
    mariadb_topology.pause(0)
    mariadb_topology.reset_lag()
    assert mariadb_topology.replica_status(0)["Slave_SQL_Running"] == "Yes"


def test_lag_controls_reject_what_is_not_a_replica(mariadb_topology: MariaDBTopology) -> None:
    from consistent.testing.mariadb import TopologyError

    with pytest.raises(TopologyError):
        mariadb_topology.pause(mariadb_topology.primary)
    with pytest.raises(TopologyError):
        mariadb_topology.delay(5, 1)
    with pytest.raises(TopologyError):
        mariadb_topology.delay(0, -1)


# --- lifecycle: nothing is left behind ---------------------------------------------------------


@pytest.fixture
def short_base() -> Iterator[Path]:
    """A base directory short enough for Unix socket paths (pytest's tmp_path may not be)."""
    base = Path(tempfile.mkdtemp(prefix="cmt-"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_mariadbd
@pytest.mark.slow
def test_close_stops_every_process_and_removes_the_directories(short_base: Path) -> None:
    topology = start_topology(replicas=1, base_dir=short_base)
    pids = [s.pid for s in topology.servers if s.pid is not None]
    root = topology.root
    assert len(pids) == 2
    assert root.is_dir()
    assert root.name.startswith(ROOT_MARKER)
    topology.close()
    assert _wait_dead(pids, 1) == []
    assert not root.exists()
    topology.close()  # idempotent


@needs_mariadbd
@pytest.mark.slow
def test_sweep_kills_servers_whose_owner_died(short_base: Path) -> None:
    topology = start_topology(replicas=0, base_dir=short_base)
    try:
        pid = topology.primary.pid
        assert pid is not None
        assert sweep_stale(short_base) == 0  # our own topology: owner alive, left alone
        assert _pid_alive(pid)
        finished = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        dead_pid = int(finished.stdout)
        (topology.root / OWNER_FILE).write_text(json.dumps({"pid": dead_pid, "start_ticks": 1}))
        assert sweep_stale(short_base) == 1
        assert _wait_dead([pid], 5) == []
        assert not topology.root.exists()
    finally:
        topology.close()


_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from consistent.testing.mariadb import start_topology
    topology = start_topology(replicas=0, base_dir=Path(sys.argv[1]))
    print(json.dumps({"root": str(topology.root),
                      "pids": [s.pid for s in topology.servers]}), flush=True)
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    signal.pause()
    """
)


def _run_child(base: Path, signame: str) -> tuple[int, dict[str, object]]:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(base), signame],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.stdout, child.stderr
    return child.returncode, json.loads(child.stdout.splitlines()[0])


@needs_mariadbd
@pytest.mark.slow
def test_a_terminated_run_cleans_up_after_itself(short_base: Path) -> None:
    code, info = _run_child(short_base, "SIGTERM")
    # SIGTERM became an interrupt: the child unwound, ran atexit, and ended as interrupted.
    assert code == -signal.SIGINT
    pids = [int(str(p)) for p in info["pids"]]  # type: ignore[attr-defined]
    assert _wait_dead(pids, 1) == []
    assert not Path(str(info["root"])).exists()


@needs_mariadbd
@pytest.mark.slow
def test_a_killed_run_takes_its_servers_along_and_the_next_sweep_removes_the_rest(
    short_base: Path,
) -> None:
    code, info = _run_child(short_base, "SIGKILL")
    assert code == -signal.SIGKILL
    pids = [int(str(p)) for p in info["pids"]]  # type: ignore[attr-defined]
    assert _wait_dead(pids, 10) == []
    root = Path(str(info["root"]))
    assert root.exists()  # nobody could clean up after SIGKILL ...
    sweep_stale(short_base)
    assert not root.exists()  # ... until the next run's sweep
