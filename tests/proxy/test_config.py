"""The configuration file: validation, defaults, overrides, secrets kept out of reprs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from consistent.policy import Level, OnTimeout
from proxy.config import Address, ConfigError, apply_overrides, load, parse


def minimal(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "backends": {"primary": "127.0.0.1:3306", "user": "app", "password": "backend-pw"},
        "users": {"alice": {"password": "alice-pw"}},
    }
    data.update(extra)
    return data


def test_defaults_and_addresses() -> None:
    config = parse(minimal())
    assert config.listen == Address("127.0.0.1", 6033)
    assert config.level is Level.READ_OWN_WRITES
    assert config.on_timeout is OnTimeout.PRIMARY
    assert config.pipeline_waits is True
    assert config.backend_deprecate_eof is True
    assert config.local_infile is False
    assert config.backends.replicas == ()
    assert config.backends.monitor_interval == pytest.approx(0.2)
    assert Address.parse("[::1]:3307") == Address("::1", 3307)
    assert Address.parse("db").port == 3306
    assert Address.parse("[::1]:3307").name == "[::1]:3307"
    assert Address("::1", 1).is_loopback
    assert not Address("10.0.0.1", 1).is_loopback


def test_read_only_functions() -> None:
    assert parse(minimal()).read_only_functions == frozenset()
    config = parse(minimal(read_only_functions=["shop.price", "`odd name`", "Fmt"]))
    assert config.read_only_functions == {"SHOP.PRICE", "ODD NAME", "FMT"}
    assert parse(minimal(read_only_functions="a, b.c")).read_only_functions == {"A", "B.C"}


def test_secrets_stay_out_of_reprs() -> None:
    config = parse(minimal(admin={"listen": "127.0.0.1:9000", "token": "admin-token-123"}))
    text = repr(config)
    for secret in ("backend-pw", "alice-pw", "admin-token-123"):
        assert secret not in text
    assert "alice" in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"backends": {"user": "x"}, "users": {"a": {"password": "p"}}}, "needs a primary"),
        ({"backends": {"primary": "h:1"}}, "no open relay"),
        (minimal(users={"a": {}}), "needs a password"),
        (minimal(users={"a": {"password_hash": "*XYZ"}}), "40 hex"),
        (minimal(users={"a": {"password": "p", "plugin": "ed25519"}}), "plugin"),
        (minimal(level="strong"), "unknown consistency level"),
        (minimal(on_timeout="panic"), "on_timeout"),
        (minimal(wait_timeout=0), "positive"),
        (minimal(surprise=1), "unknown top-level keys"),
        (
            minimal(admin={"listen": "0.0.0.0:9000"}),
            r"admin.listen 0.0.0.0:9000 is not a loopback address: .* needs admin.token",
        ),
        (
            minimal(admin={"listen": "192.0.2.7:9000", "token": ""}),
            "not a loopback address",
        ),
        (minimal(admin={"listen": "127.0.0.1:9000"}), "at least 8"),
        (
            minimal(admin={"token": "long-enough", "tls_cert": "admin.pem"}),
            "both tls_cert and tls_key",
        ),
        (minimal(admin={"token": "long-enough", "port": 1}), r"unknown keys"),
        (minimal(admin={"listen": "127.0.0.1:9000", "token": "short"}), "at least 8"),
        (minimal(tls={"cert": "c.pem"}), "cert and key"),
        (
            {
                "backends": {"primary": "h:1", "replicas": ["h:1"]},
                "users": {"a": {"password": "p"}},
            },
            "both the primary and a replica",
        ),
        ({"backends": {"primary": "h:99999"}, "users": {"a": {"password": "p"}}}, "port"),
        (minimal(read_only_functions=["a.b.c"]), "NAME or SCHEMA.NAME"),
        (minimal(read_only_functions=[1]), "list of function names"),
        (minimal(read_only_functions={"f": 1}), "list of function names"),
    ],
)
def test_invalid_configurations_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(data)


def test_the_admin_endpoint_may_listen_beyond_loopback_with_its_token(tmp_path: Path) -> None:
    config = parse(
        minimal(
            admin={
                "listen": "0.0.0.0:9000",
                "token": "long-enough",
                "tls_cert": str(tmp_path / "admin.pem"),
                "tls_key": str(tmp_path / "admin.key"),
            }
        )
    )
    admin = config.admin
    assert admin is not None
    assert not admin.listen.is_loopback
    assert admin.token == "long-enough"
    assert admin.tls_cert == tmp_path / "admin.pem"
    assert admin.tls_key == tmp_path / "admin.key"
    plain = parse(minimal(admin={"listen": "[::]:9000", "token": "long-enough"})).admin
    assert plain is not None
    assert plain.tls_cert is None


def test_overrides_apply_to_the_file_and_paths_are_relative_to_it(tmp_path: Path) -> None:
    path = tmp_path / "proxy.toml"
    path.write_text(
        'listen = "127.0.0.1:7000"\n'
        "[backends]\n"
        'primary = "127.0.0.1:3306"\n'
        'replicas = ["127.0.0.1:3307"]\n'
        "[tls]\n"
        'cert = "certs/proxy.pem"\n'
        'key = "certs/proxy.key"\n'
        "[users.bob]\n"
        'password_hash = "*' + "AB" * 20 + '"\n'
        'level = "eventual"\n'
    )
    config = load(
        path, {"backends.replicas": ["127.0.0.1:4000", "127.0.0.1:4001"], "level": "read_latest"}
    )
    assert config.listen.port == 7000
    assert config.backends.replica_names == ("127.0.0.1:4000", "127.0.0.1:4001")
    assert config.level is Level.READ_LATEST
    assert config.users["bob"].level is Level.EVENTUAL
    assert config.tls is not None
    assert config.tls.cert == tmp_path / "certs" / "proxy.pem"
    assert config.source == path.resolve()
    (tmp_path / "bad.toml").write_text("listen = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path / "bad.toml")


def test_apply_overrides_does_not_touch_the_original() -> None:
    original = minimal()
    changed = apply_overrides(original, {"backends.primary": "other:1", "admin.token": "x" * 8})
    assert original["backends"]["primary"] == "127.0.0.1:3306"
    assert changed["backends"]["primary"] == "other:1"
    assert changed["admin"] == {"token": "x" * 8}


def test_limits_on_logins_in_progress() -> None:
    config = parse(minimal())
    assert (config.max_unauthenticated, config.max_unauthenticated_per_address) == (1024, 64)
    assert config.connect_timeout == pytest.approx(10.0)
    config = parse(minimal(max_unauthenticated=10, max_unauthenticated_per_address=2))
    assert (config.max_unauthenticated, config.max_unauthenticated_per_address) == (10, 2)
    for key in ("max_unauthenticated", "max_unauthenticated_per_address"):
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ConfigError, match=key):
                parse(minimal(**{key: bad}))


def test_backend_deadlines_have_defaults_and_can_be_set_or_turned_off() -> None:
    defaults = parse(minimal()).backends.deadlines
    assert (defaults.replica_read, defaults.read, defaults.write) == (5.0, 30.0, 30.0)
    backends = dict(minimal()["backends"])
    backends.update(replica_read_timeout=0.5, read_timeout=0, write_timeout=12)
    deadlines = parse(minimal(backends=backends)).backends.deadlines
    assert (deadlines.replica_read, deadlines.read, deadlines.write) == (0.5, None, 12.0)


@pytest.mark.parametrize(
    ("key", "value"),
    [("replica_read_timeout", -1), ("read_timeout", "30s"), ("write_timeout", True)],
)
def test_bad_backend_deadlines_are_refused_by_name(key: str, value: object) -> None:
    backends = dict(minimal()["backends"])
    backends[key] = value
    with pytest.raises(ConfigError, match=f"backends.{key}"):
        parse(minimal(backends=backends))


def test_pool_settings_have_defaults_and_are_checked_by_name() -> None:
    pool = parse(minimal()).pool
    assert (pool.multiplexing, pool.max_connections, pool.hold_prepared) == (True, 100, 1.0)
    pool = parse(minimal(pool={"hold_prepared": 0, "max_connections": 8})).pool
    assert (pool.max_connections, pool.hold_prepared) == (8, 0.0)
    with pytest.raises(ConfigError, match=r"pool\.hold_prepared"):
        parse(minimal(pool={"hold_prepared": "1s"}))
    with pytest.raises(ConfigError, match="hold_prepare"):
        parse(minimal(pool={"hold_prepare": 1.0}))  # a misspelt key is named


def test_role_options() -> None:
    backends = minimal()["backends"]
    config = parse(minimal())
    assert str(config.backends.on_split_brain) == "keep"
    assert not config.backends.discover_replicas
    assert not config.backends.discover_replicas.allows("127.0.0.1")
    allowed = parse(
        minimal(
            backends={
                **backends,
                "on_split_brain": "Refuse",
                "discover_replicas": ["10.1.0.0/16", "DB9.example", "::1"],
            }
        )
    ).backends
    assert str(allowed.on_split_brain) == "refuse"
    assert allowed.discover_replicas.allows("10.1.2.3")
    assert not allowed.discover_replicas.allows("10.2.0.1")
    assert allowed.discover_replicas.allows("db9.example")
    assert allowed.discover_replicas.allows("::1")
    assert not allowed.discover_replicas.allows("127.0.0.1")
    for bad, message in (
        ({"on_split_brain": "panic"}, "on_split_brain must be 'keep' or 'refuse'"),
        ({"discover_replicas": "10.0.0.0/8"}, "must be a list"),
        ({"discover_replicas": ["10.0.0.0/99"]}, "neither a network nor a host name"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse(minimal(backends={**backends, **bad}))
