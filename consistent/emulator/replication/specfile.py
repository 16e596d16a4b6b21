"""Topology specs from plain data: the TOML files of ``consistent emulate --spec``.

Either the shorthand keys (a primary and replicas, a chain, or multi-source)::

    replicas = 2
    lag = "20ms..800ms"        # network delay: fixed, a..b, exp(m), normal(m,s), lognormal(m,k)
    apply = "2ms"
    workers = 4
    delay = 0                  # SOURCE_DELAY of every replica
    delayed_replica = 30       # plus one replica 'delayed' with SOURCE_DELAY = 30
    seed = 7
    port = 3306                # the primary's port; the other servers on the next ones

or ``chain = 3`` / ``multi_source = 2`` instead of ``replicas``; or explicit tables::

    port = 3306                # optional: servers on 3306, 3307, … in this order

    [[server]]
    name = "primary"

    [[server]]
    name = "passive"
    port = 3310                # this server's own port (overrides the base above)
    log_bin = false
    compression_period = 10
    clock_skew = "-1.5s"
    version = "8.4"          # MySQL version emulated: 8.0 (default), 8.4, or x.y.z

    [[channel]]
    source = "primary"
    replica = "passive"
    name = ""                  # channel name (multi-source)
    delay = 0
    network = "exp(50ms)"
    transfer = "1ms"
    buffer = "0"
    apply = "5ms"
    apply_per_statement = "0"
    workers = 2
    preserve_commit_order = true
    seed = 1
    pauses = [{ stage = "applier", start = "10s", duration = "5s", every = "60s" }]
    bursts = [{ stage = "receiver", start = "30s", duration = "10s", extra = "1s..3s" }]
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from consistent.emulator.config import DEFAULT_VERSION, emulated_version
from consistent.emulator.replication.lagmodel import (
    Burst,
    Distribution,
    Fixed,
    LagModel,
    LagModelError,
    Pause,
    Stage,
    parse_distribution,
    parse_duration,
)
from consistent.emulator.replication.topology import (
    ChannelSpec,
    ServerSpec,
    TopologyError,
    TopologySpec,
)

__all__ = ["load_spec", "spec_from_mapping", "spec_from_options"]

_SHORTHAND: Final = frozenset(
    {
        "replicas",
        "chain",
        "multi_source",
        "lag",
        "apply",
        "workers",
        "delay",
        "delayed_replica",
        "seed",
        "port",
    }
)


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TopologyError(f"{what}: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return parse_duration(value)
    raise TopologyError(f"{what}: expected a duration, got {value!r}")


def _signed_seconds(value: Any, what: str) -> float:
    if isinstance(value, str) and value.strip().startswith("-"):
        return -_seconds(value.strip()[1:], what)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return _seconds(value, what)


def _distribution(value: Any, what: str) -> Distribution:
    if isinstance(value, str):
        return parse_distribution(value)
    return Fixed(_seconds(value, what))


def _pause(data: Mapping[str, Any]) -> Pause:
    every = data.get("every")
    return Pause(
        start=_seconds(data.get("start", 0), "pause start"),
        duration=_seconds(data["duration"], "pause duration"),
        every=None if every is None else _seconds(every, "pause every"),
        stage=Stage(data.get("stage", "applier")),
    )


def _burst(data: Mapping[str, Any]) -> Burst:
    every = data.get("every")
    return Burst(
        start=_seconds(data.get("start", 0), "burst start"),
        duration=_seconds(data["duration"], "burst duration"),
        every=None if every is None else _seconds(every, "burst every"),
        extra=_distribution(data["extra"], "burst extra"),
        stage=Stage(data.get("stage", "receiver")),
    )


def lag_model_from(data: Mapping[str, Any], base: LagModel | None = None) -> LagModel:
    """A :class:`LagModel` from a channel table (keys as in the module docstring)."""
    model = base or LagModel()
    changes: dict[str, Any] = {}
    for key in ("network", "transfer", "buffer", "apply", "apply_per_statement"):
        if key in data:
            changes[key] = _distribution(data[key], key)
    if "lag" in data:
        changes["network"] = _distribution(data["lag"], "lag")
    for key in ("workers", "seed"):
        if key in data:
            changes[key] = int(data[key])
    if "preserve_commit_order" in data:
        changes["preserve_commit_order"] = bool(data["preserve_commit_order"])
    if "pauses" in data:
        changes["pauses"] = tuple(_pause(p) for p in data["pauses"])
    if "bursts" in data:
        changes["bursts"] = tuple(_burst(b) for b in data["bursts"])
    return replace(model, **changes)


def spec_from_options(
    *,
    replicas: int | None = None,
    chain: int | None = None,
    multi_source: int | None = None,
    lag: LagModel | None = None,
    delay: int = 0,
    delayed_replica: int | None = None,
) -> TopologySpec:
    """The shapes of the command-line flags: a primary with replicas (default 2), a chain, or
    a multi-source replica; optionally one more replica ``delayed`` with ``SOURCE_DELAY``."""
    model = lag or LagModel()
    shapes = [x for x in (replicas, chain, multi_source) if x is not None]
    if len(shapes) > 1:
        raise TopologyError("choose one of replicas, chain and multi_source")
    if chain is not None:
        spec = TopologySpec.chain(chain, lag=model)
    elif multi_source is not None:
        spec = TopologySpec.multi_source(multi_source, lag=model)
    else:
        spec = TopologySpec.primary_with_replicas(
            2 if replicas is None else replicas, lag=model, delay=delay
        )
    if delayed_replica is not None:
        root = spec.roots[0]
        spec = TopologySpec(
            (*spec.servers, ServerSpec("delayed", server_id=len(spec.servers) + 1)),
            (*spec.channels, ChannelSpec(root, "delayed", lag=model, delay=delayed_replica)),
        )
    return spec


def spec_from_mapping(data: Mapping[str, Any]) -> TopologySpec:
    """A spec from parsed TOML (see the module docstring)."""
    spec = _servers_and_channels(data)
    if "port" not in data:
        return spec
    base = spec.with_ports(_integer(data["port"], "port"))
    own = {s.name: s.port for s in spec.servers if s.port is not None}
    return replace(
        base, servers=tuple(replace(s, port=own.get(s.name, s.port)) for s in base.servers)
    )


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{what}: expected an integer, got {value!r}")
    return value


def _servers_and_channels(data: Mapping[str, Any]) -> TopologySpec:
    if "server" not in data:
        unknown = set(data) - _SHORTHAND
        if unknown:
            raise TopologyError(f"unknown keys {sorted(unknown)}")
        return spec_from_options(
            replicas=data.get("replicas"),
            chain=data.get("chain"),
            multi_source=data.get("multi_source"),
            lag=lag_model_from(data),
            delay=int(data.get("delay", 0)),
            delayed_replica=data.get("delayed_replica"),
        )
    servers = []
    for index, item in enumerate(data["server"]):
        servers.append(
            ServerSpec(
                name=str(item["name"]),
                server_uuid=item.get("server_uuid"),
                server_id=int(item.get("server_id", index + 1)),
                log_bin=bool(item.get("log_bin", True)),
                log_replica_updates=bool(item.get("log_replica_updates", True)),
                gtid_executed_compression_period=int(item.get("compression_period", 0)),
                clock_skew=_signed_seconds(item.get("clock_skew", 0), "clock_skew"),
                version=emulated_version(str(item.get("version", DEFAULT_VERSION))),
                port=None if "port" not in item else _integer(item["port"], "server port"),
            )
        )
    channels = []
    for item in data.get("channel", ()):
        channels.append(
            ChannelSpec(
                source=str(item["source"]),
                replica=str(item["replica"]),
                name=str(item.get("name", "")),
                lag=lag_model_from(item),
                delay=int(item.get("delay", 0)),
                start=bool(item.get("start", True)),
            )
        )
    return TopologySpec(tuple(servers), tuple(channels))


def load_spec(path: str | Path) -> TopologySpec:
    """Read a TOML spec file."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise TopologyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: {exc}") from exc
    try:
        return spec_from_mapping(data)
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc.msg}") from exc
    except KeyError as exc:
        raise TopologyError(f"{path}: missing key {exc.args[0]!r}") from exc
    except (ValueError, TypeError, LagModelError) as exc:
        raise TopologyError(f"{path}: {exc}") from exc
