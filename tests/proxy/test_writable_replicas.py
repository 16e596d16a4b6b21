"""The proxy's monitor reports a replica that accepts writes: in ``/status`` (per backend) and
in the log, once, however many times it reads the state.  On real MariaDB (one replica made
writable for the test, then read-only again) and on the emulator (whose replicas start
writable, MySQL's ``super_read_only`` included)."""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from consistent.emulator import start_topology
from consistent.emulator.replication.threaded import TopologyThread
from consistent.testing.mariadb import MariaDBTopology
from proxy.backends import READ_ONLY_CHECK_INTERVAL
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import ADMIN_TOKEN, USERS, free_port

# A bound on waiting for the monitor, not a timing assertion: it reads the state at most once
# a second, so several reads fit well within it even on a loaded machine.
_PATIENCE = 20.0


def status(proxy: ProxyThread) -> dict[str, Any]:
    """``/status`` over HTTP, as an operator reads it."""
    port = proxy.admin_port
    assert port is not None
    request = urllib.request.Request(f"http://127.0.0.1:{port}/status")
    request.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as response:
        document: dict[str, Any] = json.loads(response.read())
    return document


def replicas_by_port(proxy: ProxyThread) -> dict[int, dict[str, Any]]:
    return {
        int(b["address"].rpartition(":")[2]): b
        for b in status(proxy)["backends"]
        if b["role"] == "replica"
    }


def wait_for(check: Callable[[], bool]) -> None:
    give_up = time.monotonic() + _PATIENCE
    while not check():
        assert time.monotonic() < give_up, "the monitor did not report in time"
        time.sleep(0.05)


def warnings_about(caplog: pytest.LogCaptureFixture, port: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and "accepts writes" in r.getMessage()
        and f":{port}" in r.getMessage()
    ]


@pytest.fixture
def one_writable_replica(mariadb_topology: MariaDBTopology) -> Iterator[int]:
    """The second replica with ``read_only`` off for the test (restored after); its port."""
    replica = mariadb_topology.replicas[1]
    replica.query("SET GLOBAL read_only = 0")
    try:
        yield replica.port
    finally:
        replica.query("SET GLOBAL read_only = 1")


def test_a_writable_mariadb_replica_is_reported_once(
    make_proxy: Callable[..., ProxyThread],
    mariadb_topology: MariaDBTopology,
    one_writable_replica: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.backends")
    proxy = make_proxy()
    read_only = mariadb_topology.replicas[0].port
    writable = one_writable_replica

    def both_known() -> bool:
        replicas = replicas_by_port(proxy)
        return all(
            replicas[p]["read_only"] is not None and replicas[p]["replicates_from"] is not None
            for p in (read_only, writable)
        )

    def primary_known() -> bool:
        primary = next(b for b in status(proxy)["backends"] if b["role"] == "primary")
        return primary["replicates_from"] is not None and primary["writable"] is not None

    wait_for(both_known)
    wait_for(primary_known)
    replicas = replicas_by_port(proxy)
    assert (replicas[writable]["writable"], replicas[writable]["read_only"]) == (True, False)
    assert (replicas[read_only]["writable"], replicas[read_only]["read_only"]) == (False, True)
    # MariaDB has no super_read_only.
    assert replicas[writable]["super_read_only"] is None
    primary = next(b for b in status(proxy)["backends"] if b["role"] == "primary")
    assert (primary["writable"], primary["replicates_from"]) == (True, [])
    assert replicas[writable]["replicates_from"] == [f"127.0.0.1:{mariadb_topology.primary.port}"]
    # A writable replica is a replica: role discovery keeps the primary, no split brain.
    assert status(proxy)["roles"]["split_brain"] is False
    assert status(proxy)["roles"]["writable"] == [f"127.0.0.1:{mariadb_topology.primary.port}"]
    # Several more reads of the state: still one warning.
    time.sleep(3 * READ_ONLY_CHECK_INTERVAL)
    assert len(warnings_about(caplog, writable)) == 1
    assert warnings_about(caplog, read_only) == []
    # Read-only again: reported, and said once.
    mariadb_topology.replicas[1].query("SET GLOBAL read_only = 1")
    wait_for(lambda: replicas_by_port(proxy)[writable]["writable"] is False)
    again = [r for r in caplog.records if "read-only again" in r.getMessage()]
    assert len(again) == 1


@pytest.fixture(scope="module")
def emulated() -> Iterator[TopologyThread]:
    with start_topology(replicas=2) as topology:
        yield topology


def test_writable_emulated_replicas_are_reported(
    emulated: TopologyThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.backends")
    params = emulated.connection_params()
    config = parse(
        {
            "listen": "127.0.0.1:0",
            "backends": {
                "primary": f"127.0.0.1:{emulated.primary.port}",
                "replicas": [f"127.0.0.1:{r.port}" for r in emulated.replicas],
                "user": params.user,
                "password": params.password,
                "monitor_interval_ms": 50,
            },
            "users": USERS,
            "admin": {"listen": f"127.0.0.1:{free_port()}", "token": ADMIN_TOKEN},
        }
    )
    with ProxyThread(config) as proxy:
        wait_for(lambda: all(r["writable"] is not None for r in replicas_by_port(proxy).values()))
        replicas = replicas_by_port(proxy)
        assert [r["writable"] for r in replicas.values()] == [True, True]
        assert [r["super_read_only"] for r in replicas.values()] == [False, False]
        time.sleep(2 * READ_ONLY_CHECK_INTERVAL)
        for port in replicas:
            assert len(warnings_about(caplog, port)) == 1
