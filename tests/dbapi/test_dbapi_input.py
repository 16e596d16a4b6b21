"""Bad input to the DB-API gets a clear error, the same from the compiled build and from source.

The cases run against the emulator and real MariaDB where a server is needed; the last test
runs this whole file again on a copy of the packages without their compiled modules, so that a
check which the compiled build makes differently (mypyc checks argument types) cannot hide.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import consistent
import consistent.policy.session as policy_session
from consistent import errors
from consistent.dbapi.config import build_config, parse_url
from consistent.native import is_compiled
from consistent.testing.source_copy import source_tree

from .conftest import Backend

SECRET = "s3cr3t-Pa55"


def test_repr_of_the_configuration_masks_every_password() -> None:
    config = build_config(
        primary="db1:3306",
        replicas=["db2", {"host": "db3", "port": 3307, "password": SECRET + "-other"}],
        user="app",
        password=SECRET,
        ssl_key_password=SECRET + "-key",
    )
    text = repr(config)
    assert SECRET not in text
    assert "'***'" in text
    # Everything that is not a secret is still shown.
    for shown in ("'app'", "db3", "3307"):
        assert shown in text
    # The values themselves are intact.
    assert config.options["password"] == SECRET
    assert config.replicas[1].options["password"] == SECRET + "-other"


def test_repr_of_a_url_configuration_masks_the_password() -> None:
    config = build_config(**parse_url(f"mysql://app:{SECRET}@db1:3306/shop?replica=db2:3306"))
    assert SECRET not in repr(config)
    assert SECRET not in str(config)


@pytest.mark.parametrize(
    ("kwargs", "name", "suggestion"),
    [
        ({"levle": "eventual"}, "levle", "level"),
        ({"wait_timout": 1.0}, "wait_timout", "wait_timeout"),
        ({"pasword": "x"}, "pasword", "password"),
        ({"frobnicate": 1}, "frobnicate", None),
    ],
)
def test_an_unknown_option_is_a_programming_error_naming_it(
    kwargs: dict[str, Any], name: str, suggestion: str | None
) -> None:
    # Port 1 on loopback: were the option passed on, the error would be a failed connection.
    with pytest.raises(errors.ProgrammingError) as caught:
        consistent.connect(primary="127.0.0.1:1", **kwargs)
    message = str(caught.value)
    assert repr(name) in message
    if suggestion is not None:
        assert f"did you mean {suggestion!r}" in message
    assert "connect to the primary" not in message


def test_an_unknown_url_parameter_and_per_server_option_are_reported_too() -> None:
    with pytest.raises(errors.ProgrammingError, match="'levle'"):
        consistent.connect("mysql://u@127.0.0.1:1/db?levle=eventual")
    with pytest.raises(errors.ProgrammingError, match="'colour'"):
        consistent.connect(primary="127.0.0.1:1", replicas=[{"host": "h", "colour": "blue"}])


def test_pymysql_options_are_still_accepted() -> None:
    config = build_config(
        primary="db1", charset="utf8mb4", read_timeout=3.0, init_command="SET @a = 1", db="x"
    )
    assert config.options["charset"] == "utf8mb4"
    assert config.options["database"] == "x"


@pytest.mark.parametrize("endpoint", ["::::", "bad:port:x", "a..b", "host name", "-x", "db:"])
def test_a_malformed_replica_endpoint_is_rejected(endpoint: str) -> None:
    with pytest.raises(errors.InterfaceError, match=r"bad server address|bad port"):
        consistent.connect(primary="127.0.0.1:1", replicas=[endpoint])


def test_a_replica_whose_host_does_not_resolve_is_rejected_at_connect() -> None:
    # ``.invalid`` never resolves (RFC 2606); the check comes before the primary is contacted.
    with pytest.raises(errors.InterfaceError, match=r"replica garbage\.invalid:3306: unknown host"):
        consistent.connect(primary="127.0.0.1:1", replicas=["garbage.invalid"])


@pytest.mark.parametrize("endpoint", ["127.0.0.1:3307", "[::1]:3307", "::1", "localhost"])
def test_well_formed_endpoints_parse(endpoint: str) -> None:
    config = build_config(primary="127.0.0.1", replicas=[endpoint])
    assert config.replicas[0].port in (3306, 3307)


def test_token_and_require_on_a_closed_connection_raise_interface_error(
    backend: Backend,
) -> None:
    conn = backend.connect()
    token = conn.token
    conn.require(token)
    conn.close()
    with pytest.raises(errors.InterfaceError, match="closed"):
        _ = conn.token
    with pytest.raises(errors.InterfaceError, match="closed"):
        conn.require(token)


@pytest.mark.parametrize("token", [None, 7, b"abc", 1.5, ["x"]])
def test_require_of_a_non_text_token_is_1772(backend: Backend, token: object) -> None:
    conn = backend.connect()
    with pytest.raises(errors.MalformedGtidSet) as caught:
        conn.require(token)
    assert caught.value.errno == errors.ER_MALFORMED_GTID_SET_SPECIFICATION
    assert conn.token == ""  # nothing was merged


def test_require_of_malformed_text_is_1772(backend: Backend) -> None:
    conn = backend.connect()
    with pytest.raises(errors.MalformedGtidSet):
        conn.require("not a token")


def test_this_file_passes_from_source_too(tmp_path: Path) -> None:
    """The same cases on a copy of the packages without compiled modules (``make test``
    builds them, so the run above was the compiled one)."""
    if not is_compiled(policy_session):
        pytest.skip("already running from source: `make native` builds the other side")
    root = Path(__file__).resolve().parents[2]
    source = source_tree(tmp_path / "source", root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(root)])}
    here = Path(__file__).relative_to(root)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here),
         "-k", "not from_source"],
        check=False, cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed is not None, run.stdout[-2000:]
    assert int(passed.group(1)) > 10, run.stdout[-2000:]
