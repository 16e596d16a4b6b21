"""Servers may be given as endpoint objects, as the emulator and test topologies hand them out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from consistent.dbapi.config import ServerSpec
from consistent.errors import InterfaceError


@dataclass(frozen=True)
class _Endpoint:
    name: str
    host: str
    port: int


def test_an_object_with_host_and_port_is_a_server() -> None:
    spec = ServerSpec.parse(_Endpoint("replica1", "127.0.0.1", 40123))
    assert (spec.host, spec.port, spec.name) == ("127.0.0.1", 40123, "127.0.0.1:40123")


def test_an_endpoint_with_a_bad_port_is_refused() -> None:
    with pytest.raises(InterfaceError):
        ServerSpec.parse(_Endpoint("x", "127.0.0.1", 70000))
