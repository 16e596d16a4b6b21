"""What ``consistent.connect`` is told: servers, consistency settings, and driver options.

Three spellings reach the same :class:`ConnectConfig`:

* keywords: ``connect(primary="db1:3306", replicas=["db2:3306", {"host": "db3", "port":
  3307, "password": "other"}], level="read_own_writes", user="app", password="…")``; a
  server is ``"host"``, ``"host:port"``, ``"[v6addr]:port"`` or a dict whose keys other than
  ``host``/``port`` override the shared PyMySQL options for that server only;
* PyMySQL's own keywords (``host=…, port=…``) when ``primary`` is not given;
* a URL (DSN): ``mysql://user:pw@db1:3306/app?replica=db2:3306&replica=db3:3307&level=
  read_latest&wait_timeout=0.5&on_timeout=next_replica&flavor=mariadb&charset=utf8mb4``;
  ``read_only_functions=shop.price,fmt`` (comma-separated, or repeated) names user functions
  that only read, so that a read calling them may still go to a replica.
  Schemes ``mysql``, ``mariadb``, ``consistent`` and ``mysql+consistent`` are accepted; query
  parameters other than ours become PyMySQL options, converted to the type PyMySQL expects.
  Keywords given next to a URL override it.

Deadlines (:mod:`consistent.policy.deadlines`): PyMySQL's ``read_timeout`` is the primary's
read deadline, ``replica_read_timeout`` the replicas', ``write_timeout`` everyone's; each has a
default (``0`` or ``None``: no deadline), and a per-server dict may set its own.  Opening a
connection, the handshake and login included, is bounded by ``connect_timeout``
(``replica_connect_timeout`` at most for replicas).  ``monitor_interval`` is the background
monitor's period (``0``: no monitor; see :mod:`consistent.dbapi.monitor`).

Roles: with ``discover_roles`` (on by default) the monitors learn which server is the primary
from the servers themselves (``read_only``, replication sources), so the configured primary
is a starting hint; ``on_split_brain`` (``keep`` or ``refuse``) says what writes do while two
servers accept them (see :mod:`consistent.policy.roles`); ``discover_replicas`` (networks or
host names, comma-separated in a URL) lets replicas the primary lists join.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import parse_qsl, unquote, urlsplit

from consistent.classify import read_only_function_names
from consistent.dbapi._pymysql import PYMYSQL_OPTIONS
from consistent.errors import InterfaceError, ProgrammingError
from consistent.hostport import DEFAULT_PORT, join_host_port, split_host_port
from consistent.policy import Level, OnTimeout, PolicyConfig
from consistent.policy.deadlines import (
    DEFAULT_MONITOR_INTERVAL,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_REPLICA_READ_TIMEOUT,
    DEFAULT_WRITE_TIMEOUT,
    Deadlines,
    parse_deadline,
)
from consistent.policy.roles import AllowList, OnSplitBrain
from consistent.policy.states import FlavorName

__all__ = [
    "DEFAULT_PORT",
    "ConnectConfig",
    "ServerSpec",
    "build_config",
    "parse_boolean",
    "parse_number",
    "parse_url",
]

_SCHEMES: Final = frozenset({"mysql", "mariadb", "consistent", "mysql+consistent"})
_FLAVORS: Final[dict[str, FlavorName]] = {"mysql": "mysql", "mariadb": "mariadb"}

# PyMySQL options we manage ourselves: the caller may not set them (``client_flag`` may be
# set: SESSION_TRACK is added to it).
_RESERVED: Final = frozenset({"cursorclass", "defer_connect", "host", "port"})

# Our numeric options, in a URL.
_OUR_NUMBERS: Final = frozenset(
    {
        "wait_timeout",
        "max_lag",
        "replica_connect_timeout",
        "replica_read_timeout",
        "monitor_interval",
    }
)
# URL query parameters that are PyMySQL options, with their types.
_INT_OPTIONS: Final = frozenset({"connect_timeout", "max_allowed_packet"})
_FLOAT_OPTIONS: Final = frozenset({"read_timeout", "write_timeout"})
_BOOL_OPTIONS: Final = frozenset(
    {"local_infile", "ssl_verify_cert", "ssl_verify_identity", "defer_connect"}
)
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})

# Option names whose values are secrets: ``repr()`` shows them masked.
_SECRET: Final = frozenset({"password", "passwd", "ssl_key_password"})
# A host name as RFC 1123 spells one (labels of letters, digits and inner hyphens; ``_`` is
# tolerated, as resolvers do), or an IP literal (checked with ``ipaddress``).
_HOST_NAME: Final = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?"
)

#: Connecting to a replica gives up sooner than PyMySQL's default 10 s: a read that cannot
#: reach one replica goes to another.
DEFAULT_REPLICA_CONNECT_TIMEOUT: Final = 2.0


@runtime_checkable
class HasAddress(Protocol):
    """Anything that names a server by ``host`` and ``port``."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server: its address and the PyMySQL options that differ from the shared ones."""

    host: str
    port: int = DEFAULT_PORT
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_host(self.host)

    def __repr__(self) -> str:
        return (
            f"ServerSpec(host={self.host!r}, port={self.port!r}, options={_masked(self.options)})"
        )

    @property
    def name(self) -> str:
        """``host:port``: the server's name in decisions, traces and replica knowledge."""
        return join_host_port(self.host, self.port)

    @classmethod
    def parse(cls, value: str | Mapping[str, Any] | ServerSpec | HasAddress) -> ServerSpec:
        """A server from ``"host[:port]"``, ``"[v6]:port"``, a dict, a spec, or any object with
        ``host`` and ``port`` attributes (the endpoints of the emulator and test topologies)."""
        if isinstance(value, ServerSpec):
            return value
        if isinstance(value, HasAddress):
            return cls(value.host, _port(value.port, value))
        if isinstance(value, Mapping):
            options = dict(value)
            host = options.pop("host", None)
            if not isinstance(host, str) or not host:
                raise InterfaceError(f"a server needs a host: {value!r}")
            port = _port(options.pop("port", DEFAULT_PORT), value)
            bad = _RESERVED & options.keys()
            if bad:
                raise InterfaceError(f"options {sorted(bad)} cannot be set per server")
            _check_known(options)
            return cls(host, port, options)
        if not isinstance(value, str) or not value.strip():
            raise InterfaceError(f"a server is 'host[:port]' or a dict, not {value!r}")
        return cls(*split_host_port(value))


def _check_host(host: str) -> None:
    """:class:`InterfaceError` unless ``host`` is an IP address or spells a host name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_NAME.fullmatch(host):
            raise InterfaceError(
                f"bad server address {host!r}: not a host name or an IP address"
            ) from None


def _masked(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every secret replaced by ``'***'``, for ``repr()``."""
    return {k: "***" if k in _SECRET and v is not None else v for k, v in options.items()}


def _port(value: object, where: object) -> int:
    try:
        port = int(str(value))
    except (TypeError, ValueError):
        raise InterfaceError(f"bad port in {where!r}") from None
    if not 0 < port < 65536:
        raise InterfaceError(f"port out of range in {where!r}")
    return port


@dataclass(frozen=True, slots=True)
class ConnectConfig:
    """Everything a logical connection needs to open its servers."""

    primary: ServerSpec
    replicas: tuple[ServerSpec, ...] = ()
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    #: ``None``: detected from the primary's handshake.
    flavor: FlavorName | None = None
    #: The connection's initial autocommit mode (see ``consistent.dbapi.connect``); ``None``
    #: keeps the server's default, as PyMySQL's ``autocommit=None``.
    autocommit: bool | None = True
    #: PyMySQL options shared by every server (user, password, database, charset…).
    options: Mapping[str, Any] = field(default_factory=dict)
    replica_connect_timeout: float = DEFAULT_REPLICA_CONNECT_TIMEOUT
    #: User functions declared read-only (normalised, see
    #: :func:`consistent.classify.read_only_function_names`): a read may call them on a replica.
    read_only_functions: frozenset[str] = frozenset()
    #: Read and write deadlines of the server connections.
    deadlines: Deadlines = field(default_factory=Deadlines)
    #: Seconds between two polls of each server by the background monitor; ``None``: none.
    monitor_interval: float | None = DEFAULT_MONITOR_INTERVAL
    #: The monitors learn which server is the primary (see :mod:`consistent.policy.roles`).
    discover_roles: bool = True
    #: What writes do while two servers accept them.
    on_split_brain: OnSplitBrain = OnSplitBrain.KEEP
    #: Replicas the primary lists that may join (empty: replica discovery is off).
    discover_replicas: AllowList = field(default_factory=AllowList)

    @property
    def servers(self) -> tuple[ServerSpec, ...]:
        """The primary and the replicas."""
        return (self.primary, *self.replicas)

    def with_primary(self, address: str) -> ConnectConfig:
        """This configuration with the server at ``address`` (one of :attr:`servers`) as the
        primary and the primary so far as a replica."""
        servers = self.servers
        promoted = next(s for s in servers if s.name == address)
        return dataclasses.replace(
            self, primary=promoted, replicas=tuple(s for s in servers if s is not promoted)
        )

    def __repr__(self) -> str:
        # The shared options hold the password: show everything else as the dataclass would.
        return (
            f"ConnectConfig(primary={self.primary!r}, replicas={self.replicas!r}, "
            f"policy={self.policy!r}, flavor={self.flavor!r}, autocommit={self.autocommit!r}, "
            f"options={_masked(self.options)!r}, "
            f"replica_connect_timeout={self.replica_connect_timeout!r}, "
            f"deadlines={self.deadlines!r}, monitor_interval={self.monitor_interval!r}, "
            f"discover_roles={self.discover_roles!r}, on_split_brain={self.on_split_brain!r})"
        )

    def server_options(self, server: ServerSpec, *, replica: bool) -> dict[str, Any]:
        """The PyMySQL keyword arguments for ``server``, deadlines included."""
        options = dict(self.options)
        if replica and "connect_timeout" not in server.options:
            shared = options.get("connect_timeout")
            options["connect_timeout"] = min(
                float(shared) if shared is not None else math.inf, self.replica_connect_timeout
            )
        options["read_timeout"] = self.deadlines.read_for(replica=replica)
        options["write_timeout"] = self.deadlines.write
        options.update(server.options)
        for name in ("read_timeout", "write_timeout"):
            options[name] = parse_deadline(f"{server.name} {name}", options[name])
        options["host"] = server.host
        options["port"] = server.port
        return options


def parse_url(url: str) -> dict[str, Any]:
    """Keyword arguments for :func:`build_config` from a ``mysql://`` URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES:
        raise InterfaceError(f"unsupported URL scheme {parts.scheme!r} in {_redact(url)}")
    kwargs: dict[str, Any] = {}
    if parts.hostname:
        netloc_host = parts.netloc.rpartition("@")[2]
        kwargs["primary"] = ServerSpec.parse(unquote(netloc_host))
    if parts.username is not None:
        kwargs["user"] = unquote(parts.username)
    if parts.password is not None:
        kwargs["password"] = unquote(parts.password)
    database = unquote(parts.path.lstrip("/"))
    if database:
        kwargs["database"] = database
    replicas: list[ServerSpec] = []
    functions: list[str] = []
    allowed: list[str] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("replica", "replicas"):
            replicas.extend(ServerSpec.parse(v) for v in value.split(",") if v)
        elif key == "read_only_functions":
            functions.append(value)
        elif key == "discover_replicas":
            allowed.append(value)
        elif key in ("level", "on_timeout", "flavor", "on_split_brain"):
            kwargs[key] = value
        elif key in _OUR_NUMBERS:
            kwargs[key] = parse_number(key, value)
        elif key in ("autocommit", "retry_reads", "discover_roles"):
            kwargs[key] = parse_boolean(key, value)
        else:
            kwargs[key] = _option(key, value)
    if replicas:
        kwargs["replicas"] = replicas
    if functions:
        kwargs["read_only_functions"] = ",".join(functions)
    if allowed:
        kwargs["discover_replicas"] = ",".join(allowed)
    return kwargs


def parse_number(label: str, text: str) -> float:
    """The number an option's text spells; :class:`InterfaceError` naming ``label`` when it
    spells none."""
    try:
        return float(text)
    except ValueError:
        raise InterfaceError(f"{label} must be a number, not {text!r}") from None


def parse_boolean(label: str, text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); :class:`InterfaceError` naming
    ``label`` for anything else."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InterfaceError(f"{label} must be a boolean, not {text!r}")


def _check_known(options: Mapping[str, Any]) -> None:
    """:class:`ProgrammingError` naming the first option that neither ``consistent.connect``
    nor PyMySQL knows, with the closest known name when one is close."""
    for name in options:
        if name not in PYMYSQL_OPTIONS:
            known = sorted(PYMYSQL_OPTIONS | _OWN_OPTIONS)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProgrammingError(f"unknown connection option {name!r}{hint}")


def _option(key: str, value: str) -> Any:
    if key in _INT_OPTIONS:
        return int(parse_number(key, value))
    if key in _FLOAT_OPTIONS:
        return parse_number(key, value)
    if key in _BOOL_OPTIONS:
        return parse_boolean(key, value)
    return value


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _own_options() -> frozenset[str]:
    """The keywords ``consistent.connect`` takes itself (everything else goes to PyMySQL)."""
    named = inspect.signature(build_config).parameters.values()
    own = {p.name for p in named if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return frozenset(
        own | {"dsn", "knowledge", "cursorclass", "telemetry", "tracer_provider", "replica"}
    )


def build_config(
    *,
    primary: str | Mapping[str, Any] | ServerSpec | None = None,
    replicas: Iterable[str | Mapping[str, Any] | ServerSpec] | str | None = None,
    level: Level | str = Level.READ_OWN_WRITES,
    wait_timeout: float = 1.0,
    on_timeout: OnTimeout | str = OnTimeout.PRIMARY,
    max_lag: float | None = None,
    flavor: str | None = None,
    autocommit: bool | None = True,
    retry_reads: bool = True,
    replica_connect_timeout: float = DEFAULT_REPLICA_CONNECT_TIMEOUT,
    read_only_functions: str | Iterable[str] | None = None,
    replica_read_timeout: float | None = DEFAULT_REPLICA_READ_TIMEOUT,
    monitor_interval: float | None = DEFAULT_MONITOR_INTERVAL,
    discover_roles: bool = True,
    on_split_brain: OnSplitBrain | str = OnSplitBrain.KEEP,
    discover_replicas: str | Iterable[str] | None = None,
    **options: Any,
) -> ConnectConfig:
    """Validate and assemble a :class:`ConnectConfig` (``options`` are PyMySQL keywords;
    ``read_timeout`` and ``write_timeout`` among them get our defaults).

    ``autocommit`` is on by default, unlike PyMySQL (see ``consistent.dbapi``); ``False``
    gives PyMySQL's default and ``None`` the server's.  ``retry_reads=False`` makes a read
    whose replica connection died after it was sent raise, as PyMySQL does, instead of
    running again on another server."""
    if "db" in options and "database" not in options:
        options["database"] = options.pop("db")
    if "passwd" in options and "password" not in options:
        options["password"] = options.pop("passwd")
    host = options.pop("host", None)
    port = options.pop("port", None)
    if primary is None:
        if host is None:
            raise InterfaceError("connect() needs primary= (or host=) or a URL")
        primary = {"host": host, "port": port if port is not None else DEFAULT_PORT}
    elif host is not None or port is not None:
        raise InterfaceError("give either primary= or host=/port=, not both")
    bad = _RESERVED & options.keys()
    if bad:
        raise InterfaceError(f"options {sorted(bad)} are managed by consistent")
    _check_known(options)
    if isinstance(replicas, str):
        replicas = [r for r in replicas.split(",") if r.strip()]
    primary_spec = ServerSpec.parse(primary)
    replica_specs = tuple(ServerSpec.parse(r) for r in replicas or ())
    names = [primary_spec.name, *(r.name for r in replica_specs)]
    if len(set(names)) != len(names):
        raise InterfaceError(f"a server is listed twice: {names}")
    flavor_name: FlavorName | None = None
    if flavor is not None:
        flavor_name = _FLAVORS.get(str(flavor).strip().lower())
        if flavor_name is None:
            raise InterfaceError(f"flavor must be 'mysql' or 'mariadb', not {flavor!r}")
    deadlines = Deadlines(
        replica_read=replica_read_timeout,
        read=options.pop("read_timeout", DEFAULT_READ_TIMEOUT),
        write=options.pop("write_timeout", DEFAULT_WRITE_TIMEOUT),
    )
    policy = PolicyConfig(
        level=Level.parse(level),
        wait_timeout=wait_timeout,
        on_timeout=OnTimeout.parse(on_timeout),
        max_lag=max_lag,
        retry_reads=bool(retry_reads),
    )
    return ConnectConfig(
        primary=primary_spec,
        replicas=replica_specs,
        policy=policy,
        flavor=flavor_name,
        autocommit=None if autocommit is None else bool(autocommit),
        options=options,
        replica_connect_timeout=replica_connect_timeout,
        read_only_functions=read_only_function_names(read_only_functions),
        deadlines=deadlines,
        monitor_interval=parse_deadline("monitor_interval", monitor_interval),
        discover_roles=bool(discover_roles),
        on_split_brain=OnSplitBrain.parse(on_split_brain),
        discover_replicas=AllowList.parse(discover_replicas),
    )


_OWN_OPTIONS: Final = _own_options()
