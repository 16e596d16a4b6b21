"""The one ``host:port`` parser, and the three forms that read addresses through it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consistent.dbapi.config import ServerSpec
from consistent.errors import InterfaceError
from consistent.hostport import host_port_or_default, join_host_port, split_host_port
from consistent.telemetry.sampler import Endpoint
from proxy.config import Address, ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("db1", ("db1", 3306)),
        ("db1:3307", ("db1", 3307)),
        ("  db1:3307 ", ("db1", 3307)),
        ("[::1]:3308", ("::1", 3308)),
        ("[::1]", ("::1", 3306)),
        ("::1", ("::1", 3306)),
        ("fe80::1:2", ("fe80::1:2", 3306)),
    ],
)
def test_spellings(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("db:", "bad port in 'db:'"),
        ("db:abc", "bad port in 'db:abc'"),
        ("db:-1", "bad port in 'db:-1'"),
        ("db:٣٣٠٦", "bad port in"),
        ("db:70000", "port out of range in 'db:70000'"),
        ("db:0", "port out of range in 'db:0'"),
        ("[::1", "bad server address '[::1'"),
        ("[::1]x", "bad server address"),
        (":3306", "needs a host"),
        ("", "needs a host"),
    ],
)
def test_malformed_addresses_are_refused(text: str, message: str) -> None:
    with pytest.raises(InterfaceError, match=message.replace("[", r"\[")):
        split_host_port(text)


def test_port_zero_only_where_allowed() -> None:
    assert split_host_port("127.0.0.1:0", lowest_port=0) == ("127.0.0.1", 0)


hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
    st.ip_addresses().map(str),
)


@given(host=hosts, port=st.integers(1, 65535))
def test_join_then_split_gives_back_the_pair(host: str, port: int) -> None:
    assert split_host_port(join_host_port(host, port)) == (host, port)


@given(text=st.text(max_size=30))
def test_the_lenient_reader_never_raises(text: str) -> None:
    host, port = host_port_or_default(text)
    assert 0 <= port <= 65535
    assert isinstance(host, str)


@pytest.mark.parametrize("text", ["db1:3307", "[::1]:3308", "db1", "::1"])
def test_every_form_reads_an_address_the_same_way(text: str) -> None:
    expected = split_host_port(text)
    proxy_address = Address.parse(text)
    sampled = Endpoint.parse(text)
    server = ServerSpec.parse(text)
    assert (proxy_address.host, proxy_address.port) == expected
    assert (sampled.host, sampled.port) == expected
    assert (server.host, server.port) == expected
    assert proxy_address.name == sampled.name == join_host_port(*expected)


def test_the_proxy_reports_its_own_error_class() -> None:
    with pytest.raises(ConfigError, match="bad port"):
        Address.parse("db:x")
    assert Address.parse("127.0.0.1:0").port == 0
