"""Seven client libraries and the ``mariadb`` command line log in through the proxy on real
MariaDB: each with a mysql_native_password user, a caching_sha2_password user (fast path, or
the fall-back to full authentication for clients whose scramble fails it) and a
caching_sha2_password user whose hash is not cached (full authentication every time), with and
without TLS; and each is refused with a wrong password.

The proxy offers ``mysql_native_password`` first (its default), so every caching_sha2 login
goes through an AuthSwitchRequest, the case where aiomysql and asyncmy hash the nonce with its
trailing NUL.  A combination the client itself cannot do is an expected failure whose reason
is the client's own (README "Client compatibility").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from consistent.testing.mariadb import MariaDBTopology
from proxy.config import parse
from proxy.testing import ProxyThread

from .clients import CLIENTS, login
from .conftest import self_signed, topology_config

#: plugin label -> (proxy user, password); ``caching_sha2_full`` empties the cache first.
PLUGINS = {
    "native": ("app", "app-secret"),
    "caching_sha2": ("sha", "sha-secret"),
    "caching_sha2_full": ("hashed", "hashed-secret"),
}
#: Clients whose caching_sha2 scramble after an AuthSwitchRequest fails the fast check: they
#: log in through full authentication.
WRONG_NONCE = frozenset({"aiomysql", "asyncmy"})

_CONNECTOR_CLEARTEXT = (
    "MySQL Connector/Python (pure) answers full authentication with the password in clear; "
    "without TLS a server takes only an RSA-encrypted password, and refuses it (1045)"
)
_CONNECTOR_C_RSA = (
    "MySQL Connector/Python's C extension (libmysqlclient) refuses full authentication "
    "without TLS unless told to fetch the server's RSA key (MYSQL_OPT_GET_SERVER_PUBLIC_KEY), "
    "which Connector/Python does not expose: 2061 'Authentication requires secure connection'"
)
#: (client, plugin, tls) -> the client's own reason it cannot log in.
IMPOSSIBLE = {
    ("connector-pure", "caching_sha2_full", False): _CONNECTOR_CLEARTEXT,
    ("connector-c", "caching_sha2_full", False): _CONNECTOR_C_RSA,
}
#: (client, plugin, tls) -> the error a wrong password gets when the client gives up before
#: the proxy's verdict (full authentication it cannot do, as above).
CLIENT_SIDE_REFUSAL = {
    ("connector-c", "caching_sha2", False): 2061,
    ("connector-c", "caching_sha2_full", False): 2061,
}


@pytest.fixture(scope="module")
def tls_proxy(
    mariadb_topology: MariaDBTopology, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ProxyThread, Path]]:
    """One proxy that offers TLS (without requiring it), and its certificate (the CA)."""
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    config = parse(topology_config(mariadb_topology, tls={"cert": str(cert), "key": str(key)}))
    with ProxyThread(config) as proxy:
        yield proxy, cert


def _cases() -> Iterator[object]:
    for client in CLIENTS:
        for plugin in PLUGINS:
            for tls in (False, True):
                reason = IMPOSSIBLE.get((client, plugin, tls))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                label = f"{client}-{plugin}-{'tls' if tls else 'plain'}"
                yield pytest.param(client, plugin, tls, id=label, marks=marks)


def _full_authentications(proxy: ProxyThread) -> int:
    return proxy.run(lambda: proxy.server.authenticator.full_authentications)


@pytest.mark.parametrize(("client", "plugin", "tls"), list(_cases()))
def test_client_logs_in(
    tls_proxy: tuple[ProxyThread, Path], client: str, plugin: str, tls: bool
) -> None:
    proxy, cert = tls_proxy
    user, password = PLUGINS[plugin]
    if plugin == "caching_sha2_full":
        proxy.run(proxy.server.authenticator.flush_cache)
    before = _full_authentications(proxy)
    tls_before = proxy.run(lambda: proxy.server.metrics.tls_sessions_total)
    outcome = login(client, port=proxy.port, user=user, password=password, ca=cert if tls else None)
    assert outcome.ok, outcome.message
    tls_sessions = proxy.run(lambda: proxy.server.metrics.tls_sessions_total) - tls_before
    assert tls_sessions == (1 if tls else 0)
    full = _full_authentications(proxy) - before
    if plugin == "caching_sha2_full":
        assert full == 1
    elif plugin == "caching_sha2":
        # The fast path, unless the client's scramble fails it: then full authentication.
        assert full == (1 if client in WRONG_NONCE else 0)
    else:
        assert full == 0


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("plugin", list(PLUGINS))
@pytest.mark.parametrize("client", CLIENTS)
def test_client_with_a_wrong_password_is_refused(
    tls_proxy: tuple[ProxyThread, Path], client: str, plugin: str, tls: bool
) -> None:
    proxy, cert = tls_proxy
    user, _password = PLUGINS[plugin]
    if plugin == "caching_sha2_full":
        proxy.run(proxy.server.authenticator.flush_cache)
    failures = proxy.run(lambda: proxy.server.metrics.auth_failures)
    outcome = login(client, port=proxy.port, user=user, password="wrong", ca=cert if tls else None)
    assert not outcome.ok
    assert outcome.errno == CLIENT_SIDE_REFUSAL.get((client, plugin, tls), 1045), outcome.message
    if outcome.errno == 1045:
        assert f"'{user}'@" in outcome.message
        assert proxy.run(lambda: proxy.server.metrics.auth_failures) == failures + 1
