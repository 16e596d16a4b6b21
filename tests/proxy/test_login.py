"""Clients authenticate at the proxy against configured users: native and caching_sha2 (fast
path, full authentication over RSA and over TLS), refusals, TLS, and no open relay."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import connect, self_signed, standalone_config, topology_config
from .rawclient import RawClient, ServerError


def one(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


@pytest.mark.parametrize("user", ["app", "sha", "hashed"])
def test_users_of_both_plugins_log_in(proxy: ProxyThread, user: str) -> None:
    for _ in range(2):  # the second login of "hashed" takes caching_sha2's fast path
        conn = connect(proxy, user=user)
        try:
            assert one(conn, "SELECT 40 + 2") == 42
        finally:
            conn.close()


def test_wrong_password_and_unknown_user_are_refused(proxy: ProxyThread) -> None:
    for user, password in [("app", "nope"), ("sha", "nope"), ("ghost", "x")]:
        with pytest.raises(pymysql.err.OperationalError) as info:
            pymysql.connect(host="127.0.0.1", port=proxy.port, user=user, password=password)
        assert info.value.args[0] == 1045
        assert f"'{user}'@" in info.value.args[1]
    assert proxy.run(lambda: proxy.server.metrics.auth_failures) == 3


def test_backend_credentials_never_reach_clients(
    proxy: ProxyThread, mariadb_topology: MariaDBTopology
) -> None:
    # The backend account is not a proxy user: there is no open relay.
    with pytest.raises(pymysql.err.OperationalError) as info:
        pymysql.connect(
            host="127.0.0.1",
            port=proxy.port,
            user=mariadb_topology.app_user,
            password=mariadb_topology.app_password,
        )
    assert info.value.args[0] == 1045


def test_tls_to_clients_and_caching_sha2_full_auth_over_it(
    mariadb_topology: MariaDBTopology, tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path)
    config = parse(
        topology_config(mariadb_topology, tls={"cert": str(cert), "key": str(key), "require": True})
    )
    with ProxyThread(config) as proxy:
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        conn = pymysql.connect(
            host="127.0.0.1",
            port=proxy.port,
            user="hashed",
            password="hashed-secret",
            ssl=context,
        )
        try:
            assert one(conn, "SELECT 1") == 1
            sessions = proxy.run(lambda: [s.status() for s in proxy.server.sessions.values()])
            assert [s["tls"] for s in sessions] == [True]
        finally:
            conn.close()
        with pytest.raises(pymysql.err.OperationalError) as info:
            pymysql.connect(
                host="127.0.0.1",
                port=proxy.port,
                user="app",
                password="app-secret",
                ssl_disabled=True,
            )
        assert info.value.args[0] == 3159


def test_raw_login_checks_without_any_backend() -> None:
    with ProxyThread(standalone_config()) as proxy:
        with pytest.raises(ServerError) as info:
            RawClient(proxy.port, "app", "wrong")
        assert info.value.errno == 1045
        client = RawClient(proxy.port, "app", "app-secret")
        try:
            # The primary does not exist: a clear error, and the session survives it.
            with pytest.raises(ServerError) as err:
                client.query("INSERT INTO t VALUES (1)")
            assert err.value.errno == 2003
            assert client.scalar("SELECT @@consistent_level") == b"read_own_writes"
        finally:
            client.close()
