"""The ``mariadb`` command-line client (MariaDB Connector/C) against the emulator: a third-party
client that checks our handshake, both password plugins, result sets and errors.

Connector/C's caching_sha2_password plugin (``plugins/auth/caching_sha2_pw.c``) sends the
password in clear after a cache miss when it believes the connection is secure, which it does
whenever TLS was *requested* (the client's default), even though the server offered none;
mysqld refuses a cleartext password on an insecure connection, and so does the emulator.  With
``--ssl=0`` the client asks for the RSA key and encrypts, and once the server cached the hash
the fast path needs no RSA at all.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from consistent.emulator.config import Account, ServerConfig
from consistent.emulator.wire import EmulatorThread

MARIADB = shutil.which("mariadb")
pytestmark = pytest.mark.skipif(MARIADB is None, reason="the mariadb client is not installed")

ACCOUNTS = (
    Account("root", ""),
    Account("sha2user", "sha2 pass", plugin="caching_sha2_password"),
    Account("nativeuser", "native-pass", plugin="mysql_native_password"),
)


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    with EmulatorThread(ServerConfig(accounts=ACCOUNTS)) as emulator:
        yield emulator


def cli(emu: EmulatorThread, *args: str) -> subprocess.CompletedProcess[str]:
    assert MARIADB is not None
    return subprocess.run(
        [MARIADB, "-h127.0.0.1", f"-P{emu.port}", "--connect-timeout=10", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_batch_output(emu: EmulatorThread) -> None:
    done = cli(emu, "-uroot", "--batch", "-e", "SELECT 1 AS a, 'x y' AS b, NULL AS c")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "a\tb\tc\n1\tx y\tNULL\n"


def test_several_statements_and_skip_column_names(emu: EmulatorThread) -> None:
    script = (
        "CREATE DATABASE IF NOT EXISTS cli;"
        "CREATE TABLE IF NOT EXISTS cli.t (id INT PRIMARY KEY, name VARCHAR(10));"
        "DELETE FROM cli.t;"
        "INSERT INTO cli.t VALUES (1, 'one'), (2, 'two');"
        "SELECT name FROM cli.t ORDER BY id;"
        "SELECT COUNT(*) FROM cli.t"
    )
    done = cli(emu, "-uroot", "--batch", "-N", "-e", script)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "one\ntwo\n2\n"


def test_connect_with_database(emu: EmulatorThread) -> None:
    cli(emu, "-uroot", "-e", "CREATE DATABASE IF NOT EXISTS clidb")
    done = cli(emu, "-uroot", "-Dclidb", "--batch", "-N", "-e", "SELECT DATABASE()")
    assert (done.returncode, done.stdout) == (0, "clidb\n")
    missing = cli(emu, "-uroot", "-Dno_such_db", "-e", "SELECT 1")
    assert missing.returncode == 1
    assert "ERROR 1049 (42000): Unknown database 'no_such_db'" in missing.stderr


def test_sql_error_exit_code(emu: EmulatorThread) -> None:
    done = cli(emu, "-uroot", "-e", "SELECT * FROM nope.t")
    assert done.returncode == 1
    assert "ERROR 1146 (42S02) at line 1: Table 'nope.t' doesn't exist" in done.stderr


def test_native_password(emu: EmulatorThread) -> None:
    done = cli(emu, "-unativeuser", "-pnative-pass", "--batch", "-N", "-e", "SELECT CURRENT_USER()")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("nativeuser@")
    bad = cli(emu, "-unativeuser", "-pwrong", "-e", "SELECT 1")
    assert bad.returncode == 1
    assert (
        "ERROR 1045 (28000): Access denied for user 'nativeuser'@'localhost' (using password: YES)"
        in bad.stderr
    )


def test_caching_sha2_rsa_then_fast_path(emu: EmulatorThread) -> None:
    emu.run(emu.wire.auth.flush_cache)
    # TLS requested but not offered: the client sends the password in clear; refused.
    cleartext = cli(emu, "-usha2user", "-psha2 pass", "-e", "SELECT 1")
    assert cleartext.returncode == 1
    assert "ERROR 1045 (28000)" in cleartext.stderr
    assert not emu.wire.auth.cached("sha2user")
    # Without TLS: full authentication with the server's RSA key.
    full = cli(emu, "-usha2user", "-psha2 pass", "--ssl=0", "--batch", "-N", "-e", "SELECT 1")
    assert (full.returncode, full.stdout, full.stderr) == (0, "1\n", "")
    assert emu.wire.auth.cached("sha2user")
    # Now the scramble alone is enough (AuthMoreData 0x03), whatever the TLS option.
    fast = cli(emu, "-usha2user", "-psha2 pass", "--batch", "-N", "-e", "SELECT 2")
    assert (fast.returncode, fast.stdout, fast.stderr) == (0, "2\n", "")
    wrong = cli(emu, "-usha2user", "-pnope", "--ssl=0", "-e", "SELECT 1")
    assert wrong.returncode == 1
    assert "Access denied for user 'sha2user'@'localhost' (using password: YES)" in wrong.stderr
