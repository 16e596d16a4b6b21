"""Fixtures: a proxy in front of the real MariaDB topology (or of nothing, for login tests)."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.config import ProxyConfig, parse
from proxy.testing import ProxyThread

USERS = {
    "app": {"password": "app-secret"},
    "sha": {"password": "sha-secret", "plugin": "caching_sha2_password"},
    "hashed": {
        # SHA1(SHA1(password)), as mysqld stores it: the configuration holds no password.
        "password_hash": "*"
        + hashlib.sha1(hashlib.sha1(b"hashed-secret").digest()).hexdigest().upper(),
        "plugin": "caching_sha2_password",
    },
}
ADMIN_TOKEN = "admin-token-for-tests"


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files in ``tmp_path``); the
    certificate is its own CA."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = tmp_path / "proxy.pem"
    key_path = tmp_path / "proxy.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def topology_config(topology: MariaDBTopology, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "listen": "127.0.0.1:0",
        "wait_timeout": 1.0,
        "backends": {
            "primary": f"127.0.0.1:{topology.primary.port}",
            "replicas": [f"127.0.0.1:{r.port}" for r in topology.replicas],
            "user": topology.app_user,
            "password": topology.app_password,
            "monitor_interval_ms": 50,
            "connect_timeout": 2.0,
        },
        "users": USERS,
        "admin": {"listen": "127.0.0.1:0", "token": ADMIN_TOKEN},
    }
    for key, value in overrides.items():
        if key == "backends":
            data["backends"] = {**data["backends"], **value}
        else:
            data[key] = value
    return data


@pytest.fixture
def make_proxy(mariadb_topology: MariaDBTopology) -> Iterator[Callable[..., ProxyThread]]:
    """Start proxies in front of the topology (``overrides`` patch the configuration)."""
    started: list[ProxyThread] = []

    def make(**overrides: Any) -> ProxyThread:
        proxy = ProxyThread(parse(topology_config(mariadb_topology, **overrides)))
        proxy.start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def proxy(make_proxy: Callable[..., ProxyThread]) -> ProxyThread:
    return make_proxy()


def connect(
    proxy: ProxyThread, db: CleanDatabase | str | None = None, user: str = "app", **kwargs: Any
) -> Any:
    """A PyMySQL connection through the proxy (autocommit on unless told otherwise)."""
    name = db.name if isinstance(db, CleanDatabase) else db
    password = {"app": "app-secret", "sha": "sha-secret", "hashed": "hashed-secret"}[user]
    kwargs.setdefault("autocommit", True)
    return pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=user,
        password=password,
        database=name,
        connect_timeout=5,
        read_timeout=30,
        **kwargs,
    )


def standalone_config(**overrides: Any) -> ProxyConfig:
    """A proxy whose backends do not exist (for login tests): the flavour is given."""
    data: dict[str, Any] = {
        "listen": "127.0.0.1:0",
        "backends": {
            "primary": f"127.0.0.1:{free_port()}",
            "flavor": "mariadb",
            "connect_timeout": 0.5,
            "monitor_interval_ms": 1000,
        },
        "users": USERS,
    }
    data.update(overrides)
    return parse(data)


def level_replicas(proxy: ProxyThread) -> None:
    """Forget how long the replicas' waits took, so that the policy lets them take turns
    (it prefers a replica whose reads did not wait lately)."""

    def level() -> None:
        knowledge = proxy.server.knowledge
        for name in proxy.server.config.backends.replica_names:
            knowledge.record_lag(name, 0.0)

    proxy.run(level)


def mariadb_client(
    proxy: ProxyThread, script: str, database: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with the ``mariadb`` command-line client through the proxy, as ``app``, in
    batch mode without column names (skips the test when the client is not installed)."""
    binary = shutil.which("mariadb")
    if binary is None:
        pytest.skip("the mariadb client is not installed")
    command = [binary, "-h", "127.0.0.1", "-P", str(proxy.port), "-u", "app", "-papp-secret"]
    if database is not None:
        command += ["-D", database]
    command += ["--batch", "--skip-column-names", "-e", script]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
