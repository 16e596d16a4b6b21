"""The client libraries of the login matrix, each reduced to one call: log in, ask
``SELECT 40 + 2``, and say what happened.

Every client is the real library (or the ``mariadb`` command-line client), configured the way
its documentation says for TLS with a CA file, or for no TLS.  MySQL Connector/Python's C
extension bundles an OpenSSL newer than the system's: it loads only in a process that has not
imported :mod:`ssl` yet, so that client runs in a subprocess (``client_process.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

QUERY = "SELECT 40 + 2"
TIMEOUT = 20

#: Every client of the matrix, in the order the README lists them.
CLIENTS = (
    "pymysql",
    "mysqlclient",
    "connector-pure",
    "connector-c",
    "mariadb-connector",
    "aiomysql",
    "asyncmy",
    "mariadb-cli",
)


@dataclass(frozen=True)
class Outcome:
    """What one login attempt gave: the query's answer, or the error's number and text."""

    value: int | None
    errno: int | None
    message: str

    @property
    def ok(self) -> bool:
        return self.value == 42


def _errno(error: BaseException) -> int | None:
    number = getattr(error, "errno", None)
    if isinstance(number, int) and number > 0:
        return number
    args = getattr(error, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    found = re.search(r"\b(1\d{3}|2\d{3}|3\d{3})\b", str(error))
    return int(found.group(1)) if found else None


def _context(ca: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca)


def _pymysql(port: int, user: str, password: str, ca: str | None) -> int:
    import pymysql

    # PyMySQL prefers TLS when the server offers it: plain must be asked for.
    tls: dict[str, Any] = {"ssl_ca": ca} if ca else {"ssl_disabled": True}
    conn = pymysql.connect(
        host="127.0.0.1", port=port, user=user, password=password, connect_timeout=TIMEOUT, **tls
    )
    try:
        with conn.cursor() as cur:
            cur.execute(QUERY)
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _mysqlclient(port: int, user: str, password: str, ca: str | None) -> int:
    import MySQLdb

    tls: dict[str, Any] = {"ssl": {"ca": ca}} if ca else {"ssl_mode": "DISABLED"}
    conn = MySQLdb.connect(
        host="127.0.0.1", port=port, user=user, password=password, connect_timeout=TIMEOUT, **tls
    )
    try:
        cur = conn.cursor()
        cur.execute(QUERY)
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def _connector(port: int, user: str, password: str, ca: str | None, *, pure: bool) -> int:
    import mysql.connector

    tls: dict[str, Any] = {"ssl_ca": ca, "ssl_verify_cert": True} if ca else {"ssl_disabled": True}
    conn = mysql.connector.connect(
        host="127.0.0.1",
        port=port,
        user=user,
        password=password,
        use_pure=pure,
        connection_timeout=TIMEOUT,
        **tls,
    )
    try:
        cur = conn.cursor()
        cur.execute(QUERY)
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def _connector_pure(port: int, user: str, password: str, ca: str | None) -> int:
    return _connector(port, user, password, ca, pure=True)


def _connector_c(port: int, user: str, password: str, ca: str | None) -> int:
    return _connector(port, user, password, ca, pure=False)


def _mariadb_connector(port: int, user: str, password: str, ca: str | None) -> int:
    import mariadb

    tls: dict[str, Any] = {"ssl_ca": ca, "ssl_verify_cert": True} if ca else {"ssl": False}
    conn = mariadb.connect(
        host="127.0.0.1", port=port, user=user, password=password, connect_timeout=TIMEOUT, **tls
    )
    try:
        cur = conn.cursor()
        cur.execute(QUERY)
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def _aiomysql(port: int, user: str, password: str, ca: str | None) -> int:
    import aiomysql

    async def run() -> int:
        conn = await aiomysql.connect(
            host="127.0.0.1",
            port=port,
            user=user,
            password=password,
            ssl=_context(ca) if ca else None,
            connect_timeout=TIMEOUT,
        )
        try:
            async with conn.cursor() as cur:
                await cur.execute(QUERY)
                row = await cur.fetchone()
                return int(row[0])
        finally:
            conn.close()

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def _asyncmy(port: int, user: str, password: str, ca: str | None) -> int:
    import asyncmy

    async def run() -> int:
        conn = await asyncmy.connect(
            host="127.0.0.1",
            port=port,
            user=user,
            password=password,
            ssl=_context(ca) if ca else None,
            connect_timeout=TIMEOUT,
        )
        try:
            async with conn.cursor() as cur:
                await cur.execute(QUERY)
                row = await cur.fetchone()
                return int(row[0])
        finally:
            conn.close()

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


class ClientFailed(Exception):
    """The command-line client exited with an error (its message, errno parsed)."""


def _mariadb_cli(port: int, user: str, password: str, ca: str | None) -> int:
    binary = shutil.which("mariadb")
    if binary is None:
        raise ClientFailed("the mariadb client is not installed")
    command = [binary, "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", user]
    command.append(f"-p{password}")
    if ca:
        command += ["--ssl", f"--ssl-ca={ca}", "--ssl-verify-server-cert"]
    else:
        command.append("--skip-ssl")
    command += ["--batch", "--skip-column-names", "-e", QUERY]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        raise ClientFailed(done.stderr.strip())
    return int(done.stdout.strip())


_IN_PROCESS: dict[str, Callable[[int, str, str, str | None], int]] = {
    "pymysql": _pymysql,
    "mysqlclient": _mysqlclient,
    "connector-pure": _connector_pure,
    "connector-c": _connector_c,
    "mariadb-connector": _mariadb_connector,
    "aiomysql": _aiomysql,
    "asyncmy": _asyncmy,
    "mariadb-cli": _mariadb_cli,
}
#: Clients that must run in a fresh interpreter (see the module docstring).
_SUBPROCESS = frozenset({"connector-c"})


def _attempt(client: str, port: int, user: str, password: str, ca: str | None) -> Outcome:
    try:
        value = _IN_PROCESS[client](port, user, password, ca)
    except Exception as e:
        return Outcome(None, _errno(e), f"{type(e).__name__}: {e}")
    return Outcome(value, None, "")


def login(client: str, *, port: int, user: str, password: str, ca: Path | None) -> Outcome:
    """Log in through ``client`` (one of :data:`CLIENTS`) and run the query."""
    ca_text = str(ca) if ca is not None else None
    if client not in _SUBPROCESS:
        return _attempt(client, port, user, password, ca_text)
    args = json.dumps([client, port, user, password, ca_text])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("client_process.py")), args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        return Outcome(None, None, f"the client process failed: {done.stderr.strip()[-2000:]}")
    return Outcome(**json.loads(done.stdout))


def main(argv: list[str]) -> None:
    """The subprocess's side: one attempt from JSON arguments, its outcome as JSON."""
    client, port, user, password, ca = json.loads(argv[1])
    print(json.dumps(asdict(_attempt(client, port, user, password, ca))))
