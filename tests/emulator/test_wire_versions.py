"""What changes with the emulated MySQL version, over the wire with PyMySQL.

* GTID syntax: tagged GTIDs (``uuid:tag:gno``) only from 8.3.  An 8.0 server answers 1772 for
  ``GTID_SUBTRACT('uuid:a', '')``, ``GTID_SUBSET`` and ``WAIT_FOR_EXECUTED_GTID_SET`` of such
  text and 1774 for ``SET GTID_NEXT = 'uuid:tag:1'``; 8.4 reads them.
* ``mysql.gtid_executed``: from 8.0.17 every commit writes its GTID also with the binary log on
  (the compression thread then compresses the rows at rotation); before, rows are written at
  rotation and shutdown.  At start, GTIDs of the binary log that the table lacks are written.
  8.4's table has the ``gtid_tag`` column.
* ``RESET MASTER`` is a syntax error in 8.4.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from consistent.emulator.config import VERSION_80, VERSION_84, ServerConfig
from consistent.emulator.wire import EmulatorThread

U = "00000000-1111-0000-1111-000000000000"
TAGGED = f"{U}:a:1-3"


def connect(emu: EmulatorThread) -> pymysql.connections.Connection:
    return pymysql.connect(
        host="127.0.0.1", port=emu.port, user="root", autocommit=True, connect_timeout=10
    )


def run(conn: pymysql.connections.Connection, sql: str) -> tuple[tuple[Any, ...], ...]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return tuple(cur.fetchall())


def error(conn: pymysql.connections.Connection, sql: str) -> tuple[Any, ...]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        run(conn, sql)
    return tuple(info.value.args)


@pytest.fixture(params=[VERSION_80, VERSION_84], ids=["8.0", "8.4"])
def emu(request: pytest.FixtureRequest) -> Iterator[EmulatorThread]:
    with EmulatorThread(ServerConfig(server_uuid=U, version=request.param)) as emulator:
        yield emulator


def test_version_is_reported(emu: EmulatorThread) -> None:
    conn = connect(emu)
    version = emu.server.config.version
    assert conn.get_server_info() == version
    assert run(conn, "SELECT VERSION()") == ((version,),)
    conn.close()


def test_tagged_gtids_only_from_8_3(emu: EmulatorThread) -> None:
    conn = connect(emu)
    malformed = (1772, f"Malformed GTID set specification '{U}:a'.")
    if emu.server.config.version == VERSION_80:
        assert error(conn, f"SELECT GTID_SUBTRACT('{U}:a', '')") == malformed
        assert error(conn, f"SELECT GTID_SUBSET('{U}:a', '')") == malformed
        assert error(conn, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:a', 1)") == malformed
        assert error(conn, f"SELECT GTID_SUBTRACT('{TAGGED}', '')") == (
            1772,
            f"Malformed GTID set specification '{TAGGED}'.",
        )
        assert error(conn, f"SET GTID_NEXT = '{U}:a:1'") == (
            1774,
            f"Malformed GTID specification '{U}:a:1'.",
        )
        # Untagged text reads the same in both.
        assert run(conn, f"SELECT GTID_SUBTRACT('{U}:1-5', '{U}:2')") == ((f"{U}:1:3-5",),)
    else:
        assert run(conn, f"SELECT GTID_SUBTRACT('{U}:a', '')") == (("",),)
        assert run(conn, f"SELECT GTID_SUBTRACT('{TAGGED}', '{U}:a:2')") == ((f"{U}:a:1:3",),)
        assert run(conn, f"SELECT GTID_SUBSET('{U}:a:2', '{TAGGED}')") == ((1,),)
        run(conn, f"SET GTID_NEXT = '{U}:a:1'")
        run(conn, "CREATE DATABASE d")
        run(conn, "SET GTID_NEXT = 'AUTOMATIC'")
        assert run(conn, "SELECT @@GLOBAL.gtid_executed") == ((f"{U}:a:1",),)
    conn.close()


def test_gtid_executed_written_at_commit_from_8_0_17(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "CREATE DATABASE e")
    tagged = emu.server.config.version == VERSION_84
    columns = [row[0] for row in run(conn, "SHOW COLUMNS FROM mysql.gtid_executed")]
    expected = ["source_uuid", "interval_start", "interval_end"] + (["gtid_tag"] if tagged else [])
    assert columns == expected
    rows = run(conn, "SELECT source_uuid, interval_start, interval_end FROM mysql.gtid_executed")
    assert rows == ((U, 1, 1), (U, 2, 2))
    run(conn, "FLUSH BINARY LOGS")  # rotation: the compression thread merges the rows
    emu.call(emu.server.compressor.wait_idle())
    rows = run(conn, "SELECT source_uuid, interval_start, interval_end FROM mysql.gtid_executed")
    assert rows == ((U, 1, 2),)
    conn.close()


def test_reset_master_is_gone_in_8_4() -> None:
    with EmulatorThread(ServerConfig(server_uuid=U, version=VERSION_84)) as emu:
        conn = connect(emu)
        assert error(conn, "RESET MASTER") == (
            1064,
            "You have an error in your SQL syntax; check the manual that corresponds to your "
            "MySQL server version for the right syntax to use near 'MASTER' at line 1",
        )
        run(conn, "RESET BINARY LOGS AND GTIDS")
        conn.close()
