"""The proxy as a client of its backends: TLS to backends, and caching_sha2_password's fast path,
its full authentication over TLS and over RSA, and AuthSwitchRequest — checked by putting one
proxy (the outer) in front of another (the inner), which authenticates it like a MySQL 8 server
would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from consistent.testing.mariadb import MariaDBTopology
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import USERS, connect, topology_config
from .test_login import self_signed


def outer_config(inner: ProxyThread, user: str, password: str, **backends: Any) -> Any:
    return parse(
        {
            "listen": "127.0.0.1:0",
            "backends": {
                "primary": f"127.0.0.1:{inner.port}",
                "user": user,
                "password": password,
                "connect_timeout": 3.0,
                **backends,
            },
            "users": USERS,
        }
    )


@pytest.mark.parametrize(
    ("user", "password", "tls"),
    [
        ("sha", "sha-secret", False),  # AuthSwitchRequest, then the fast path
        ("hashed", "hashed-secret", False),  # full authentication: RSA key requested
        ("hashed", "hashed-secret", True),  # full authentication: password over TLS
    ],
)
def test_logging_into_a_backend_that_asks_for_caching_sha2(
    mariadb_topology: MariaDBTopology, tmp_path: Path, user: str, password: str, tls: bool
) -> None:
    cert, key = self_signed(tmp_path)
    inner_data = topology_config(mariadb_topology)
    if tls:
        inner_data["tls"] = {"cert": str(cert), "key": str(key), "require": True}
    with ProxyThread(parse(inner_data)) as inner:
        extra: dict[str, Any] = {"tls": True, "tls_ca": str(cert)} if tls else {}
        with ProxyThread(outer_config(inner, user, password, **extra)) as outer:
            conn = connect(outer)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT @@port")
                    (port,) = cur.fetchone()
                assert port in {s.port for s in mariadb_topology.servers}
            finally:
                conn.close()
            status = inner.run(lambda: [s.status() for s in inner.server.sessions.values()])
            assert status, "the outer proxy's sessions reached the inner one"
            assert {s["user"] for s in status} == {user}
            assert {s["tls"] for s in status} == {tls}
