"""The wrapper's deadline and monitoring options: defaults, the URL and keyword spellings,
per-server values, and refusals (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from consistent.dbapi.config import build_config, parse_url
from consistent.errors import InterfaceError
from consistent.policy.deadlines import (
    DEFAULT_MONITOR_INTERVAL,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_REPLICA_READ_TIMEOUT,
    DEFAULT_WRITE_TIMEOUT,
    Deadlines,
)


def config(**kwargs: Any) -> Any:
    return build_config(primary="db1:3306", replicas=["db2:3306"], **kwargs)


def test_defaults() -> None:
    c = config()
    assert c.deadlines == Deadlines(
        replica_read=DEFAULT_REPLICA_READ_TIMEOUT,
        read=DEFAULT_READ_TIMEOUT,
        write=DEFAULT_WRITE_TIMEOUT,
    )
    assert c.monitor_interval == DEFAULT_MONITOR_INTERVAL
    replica = c.server_options(c.replicas[0], replica=True)
    primary = c.server_options(c.primary, replica=False)
    assert (replica["read_timeout"], replica["write_timeout"]) == (5.0, 30.0)
    assert (primary["read_timeout"], primary["write_timeout"]) == (30.0, 30.0)
    assert replica["connect_timeout"] == 2.0
    assert "connect_timeout" not in primary  # PyMySQL's own default


def test_keywords_reach_each_server() -> None:
    c = config(replica_read_timeout=1.5, read_timeout=12, write_timeout=0, monitor_interval=0)
    assert c.deadlines == Deadlines(replica_read=1.5, read=12.0, write=None)
    assert c.monitor_interval is None
    assert c.server_options(c.replicas[0], replica=True)["read_timeout"] == 1.5
    assert c.server_options(c.primary, replica=False)["read_timeout"] == 12.0
    assert c.server_options(c.primary, replica=False)["write_timeout"] is None


def test_the_url_spells_them_too() -> None:
    kwargs = parse_url(
        "mysql://app:pw@db1:3306/shop?replica=db2:3306&replica_read_timeout=0.75"
        "&read_timeout=0&write_timeout=7&monitor_interval=0.5&replica_connect_timeout=1"
    )
    c = build_config(**kwargs)
    assert c.deadlines == Deadlines(replica_read=0.75, read=None, write=7.0)
    assert c.monitor_interval == 0.5
    assert c.replica_connect_timeout == 1.0


def test_a_server_may_have_its_own_deadline() -> None:
    c = build_config(
        primary={"host": "db1", "read_timeout": 600},
        replicas=[{"host": "db2", "read_timeout": 60}, "db3"],
    )
    assert c.server_options(c.primary, replica=False)["read_timeout"] == 600.0
    assert c.server_options(c.replicas[0], replica=True)["read_timeout"] == 60.0
    assert c.server_options(c.replicas[1], replica=True)["read_timeout"] == 5.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"replica_read_timeout": -1}, "replica_read_timeout"),
        ({"read_timeout": "soon"}, "read_timeout"),
        ({"write_timeout": float("inf")}, "write_timeout"),
        ({"monitor_interval": -0.1}, "monitor_interval"),
    ],
)
def test_bad_values_are_refused_naming_the_option(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(InterfaceError, match=name):
        config(**kwargs)


def test_the_configuration_repr_shows_the_deadlines() -> None:
    text = repr(config(replica_read_timeout=1.25, password="hunter2"))
    assert "replica_read=1.25" in text
    assert "monitor_interval=0.2" in text
    assert "hunter2" not in text
