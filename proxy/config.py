"""The proxy's configuration: a TOML file (stdlib ``tomllib``), overridden from the command line.

Example (every key but ``backends.primary`` and one user is optional)::

    listen = "127.0.0.1:6033"
    level = "read_own_writes"        # default consistency level of a session
    wait_timeout = 1.0               # seconds a replica may take to catch up, per wait
    on_timeout = "primary"           # primary | next_replica | error
    pipeline_waits = true            # send the wait and the read in one round trip
    backend_deprecate_eof = true     # false: match the client's CLIENT_DEPRECATE_EOF instead
    local_infile = false             # LOAD DATA LOCAL INFILE is refused unless true
    default_auth_plugin = "mysql_native_password"
    max_connections = 4096
    max_unauthenticated = 1024       # logins in progress at once (see proxy/admission.py)
    max_unauthenticated_per_address = 64
    connect_timeout = 10.0           # handshake deadline: accept to login OK, TLS included
    shutdown_timeout = 10.0
    read_only_functions = ["shop.price", "fmt"]   # user functions that only read
    tracer_provider = "global"       # statement spans to the process's OpenTelemetry provider

    [pool]                           # backend connections shared by the sessions
    multiplexing = true              # false: each session keeps connections of its own
    max_connections = 100            # per backend server and backend user
    wait_timeout = 5.0               # a session waits this long for one, then gets 1040
    idle_timeout = 60.0              # idle connections are closed after this long
    ping_after = 10.0                # an idle connection this old is pinged before use
    hold_prepared = 1.0              # a connection with a session's prepared statements stays
                                     # that session's this long after it comes back, while the
                                     # pool can open another

    [tls]                            # TLS to clients (optional)
    cert = "proxy.pem"
    key = "proxy.key"
    require = false

    [backends]
    primary = "127.0.0.1:3306"
    replicas = ["127.0.0.1:3307", "127.0.0.1:3308"]
    user = "app"                     # credentials the proxy uses towards the servers
    password = "..."
    flavor = "mariadb"               # mysql | mariadb; detected from the handshake if absent
    monitor_interval_ms = 200        # health, executed-state and lag polling
    discover_roles = true            # the primary is the server that says it is (read_only off,
                                     # replicating from none); false: as configured
    on_split_brain = "keep"          # two servers accept writes: keep writing to the last known
                                     # primary, or "refuse" (1290) until it resolves
    discover_replicas = []           # networks or host names (["10.1.0.0/16"]): replicas the
                                     # primary lists (SHOW SLAVE HOSTS) there join; []: off
    connect_timeout = 5.0            # opening a connection, greeting and login included
    replica_read_timeout = 5.0       # a replica silent this long: the read goes elsewhere once
    read_timeout = 30.0              # the primary silent this long: the client gets 2013
    write_timeout = 30.0             # bytes left unsent this long: the same (0: no deadline)
    tls = false                      # TLS to the servers
    tls_ca = "ca.pem"                # verify the servers' certificates against this CA

    [users.app]                      # who may connect to the proxy
    password = "..."                 # or password_hash = "*<40 hex>" (mysql_native_password)
    plugin = "caching_sha2_password"
    level = "read_own_writes"
    backend_user = "app"             # defaults to [backends] user/password
    backend_password = "..."

    [admin]                          # HTTP(S) /metrics and /status
    listen = "127.0.0.1:9033"        # another address exposes it beyond this machine
    token = "change-me-to-a-long-random-token"   # at least 8 characters, always required
    tls_cert = "admin.pem"           # HTTPS (optional; both or neither)
    tls_key = "admin.key"

Relative paths are relative to the file.  Every secret field is excluded from ``repr`` so that a
configuration can be logged.  :func:`load` builds the frozen :class:`ProxyConfig`;
``overrides`` (from the command line) are applied to the parsed TOML before validation, so that
a ``SIGHUP`` reload re-applies them to the new file.
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from consistent.classify import read_only_function_names
from consistent.errors import InterfaceError
from consistent.hostport import DEFAULT_PORT, join_host_port, split_host_port
from consistent.policy import Level, OnTimeout
from consistent.policy.deadlines import (
    DEFAULT_READ_TIMEOUT,
    DEFAULT_REPLICA_READ_TIMEOUT,
    DEFAULT_WRITE_TIMEOUT,
    Deadlines,
)
from consistent.policy.roles import AllowList, OnSplitBrain
from consistent.protocol import CACHING_SHA2_PASSWORD, MYSQL_NATIVE_PASSWORD

__all__ = [
    "AUTH_PLUGINS",
    "Address",
    "AdminConfig",
    "BackendsConfig",
    "ConfigError",
    "PoolConfig",
    "ProxyConfig",
    "TlsConfig",
    "UserConfig",
    "load",
    "parse",
]

AUTH_PLUGINS: Final = frozenset({MYSQL_NATIVE_PASSWORD, CACHING_SHA2_PASSWORD})
_FLAVORS: Final = frozenset({"mysql", "mariadb"})


class ConfigError(InterfaceError):
    """The configuration file or an override is invalid."""


@dataclass(frozen=True, slots=True)
class Address:
    """A TCP address; :attr:`name` (``host:port``) names a backend in routing and traces."""

    host: str
    port: int

    @property
    def name(self) -> str:
        return join_host_port(self.host, self.port)

    @property
    def is_loopback(self) -> bool:
        """True for 127.0.0.0/8, ::1 and ``localhost``."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @classmethod
    def parse(cls, text: object, default_port: int = DEFAULT_PORT) -> Address:
        """``host``, ``host:port`` or ``[v6]:port`` (:func:`consistent.hostport.split_host_port`);
        port 0 lets the system choose a listening port."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"not an address: {text!r}")
        try:
            host, port = split_host_port(text, default_port, lowest_port=0)
        except InterfaceError as e:
            raise ConfigError(e.msg) from None
        return cls(host, port)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS towards clients: certificate chain and private key files (PEM)."""

    cert: Path
    key: Path
    #: Refuse clients that do not upgrade to TLS.
    require: bool = False


@dataclass(frozen=True, slots=True)
class UserConfig:
    """An account clients authenticate as at the proxy (there is no open relay)."""

    name: str
    password: str | None = field(default=None, repr=False)
    #: ``*`` + 40 hex digits: SHA1(SHA1(password)), what mysqld stores for native passwords.
    password_hash: str | None = field(default=None, repr=False)
    plugin: str = MYSQL_NATIVE_PASSWORD
    level: Level | None = None
    backend_user: str | None = None
    backend_password: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class BackendsConfig:
    """The servers behind the proxy and how to reach them."""

    primary: Address
    replicas: tuple[Address, ...] = ()
    user: str = "root"
    password: str = field(default="", repr=False)
    flavor: str | None = None
    monitor_interval: float = 0.2
    connect_timeout: float = 5.0
    tls: bool = False
    tls_ca: Path | None = None
    tls_verify: bool = True
    #: Read and write deadlines of every backend connection.
    deadlines: Deadlines = field(default_factory=Deadlines)
    #: Learn which server is the primary from the servers (``read_only``, replication);
    #: False: the configured roles are the truth.
    discover_roles: bool = True
    #: Two servers accept writes: ``keep`` sending writes to the last known primary, or
    #: ``refuse`` them (1290) until the split brain resolves.
    on_split_brain: OnSplitBrain = OnSplitBrain.KEEP
    #: Replicas the primary lists (``SHOW SLAVE HOSTS`` / ``SHOW REPLICAS``) whose address is in
    #: one of these networks, or is one of these host names, join the replicas (empty: off).
    discover_replicas: AllowList = field(default_factory=AllowList)

    @property
    def replica_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.replicas)


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """The shared backend connections (:mod:`proxy.pool`)."""

    #: Sessions borrow a connection per statement or transaction (False: each session keeps
    #: connections of its own, opened when first needed).
    multiplexing: bool = True
    #: Connections per backend server and backend user.
    max_connections: int = 100
    #: Seconds a session waits for a connection of an exhausted pool before error 1040.
    wait_timeout: float = 5.0
    #: Seconds an idle connection is kept.
    idle_timeout: float = 60.0
    #: An idle connection unused this long is checked with COM_PING before it is lent.
    ping_after: float = 10.0
    #: Seconds a connection holding a session's prepared statements is kept for that session
    #: after it comes back, while the pool can open another (0: lent to any session at once).
    hold_prepared: float = 1.0


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """The admin HTTP endpoint: every request needs the token, wherever it listens; with a
    certificate and key it speaks HTTPS."""

    listen: Address
    token: str = field(repr=False)
    tls_cert: Path | None = None
    tls_key: Path | None = None


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Everything the proxy process runs with (immutable: a reload builds a new one)."""

    backends: BackendsConfig
    users: Mapping[str, UserConfig]
    listen: Address = Address("127.0.0.1", 6033)
    level: Level = Level.READ_OWN_WRITES
    wait_timeout: float = 1.0
    on_timeout: OnTimeout = OnTimeout.PRIMARY
    pipeline_waits: bool = True
    #: Ask backends for CLIENT_DEPRECATE_EOF whatever the client does, so that result-set
    #: terminators carry session state (the relay then translates EOFs for clients without
    #: it).  False matches the client's choice: bytes pass untouched, but a result set's
    #: terminator cannot report GTIDs (only a SELECT whose function commits produces any).
    backend_deprecate_eof: bool = True
    multi_statements_to_primary: bool = True
    local_infile: bool = False
    default_auth_plugin: str = MYSQL_NATIVE_PASSWORD
    max_connections: int = 4096
    #: Logins in progress at once, and from one client address (:mod:`proxy.admission`).
    max_unauthenticated: int = 1024
    max_unauthenticated_per_address: int = 64
    max_allowed_packet: int = 64 * 1024 * 1024
    #: The handshake deadline: from accept to the login's OK (TLS upgrade included).
    connect_timeout: float = 10.0
    shutdown_timeout: float = 10.0
    server_version: str | None = None
    tls: TlsConfig | None = None
    admin: AdminConfig | None = None
    pool: PoolConfig = PoolConfig()
    #: User functions declared read-only (normalised names, see
    #: :func:`consistent.classify.read_only_function_names`): reads calling them may use a
    #: replica; every other function that is not a side-effect-free built-in sends the
    #: statement to the primary.
    read_only_functions: frozenset[str] = frozenset()
    #: ``"global"``: statement spans go to the process's OpenTelemetry ``TracerProvider``
    #: (:mod:`consistent.telemetry.appspans`) instead of the trace file.
    tracer_provider: str | None = None
    #: Where the file was read from (reloads read it again).
    source: Path | None = None


# ----------------------------------------------------------------- parsing

_TOP_KEYS: Final = frozenset(
    {
        "listen",
        "level",
        "wait_timeout",
        "on_timeout",
        "pipeline_waits",
        "backend_deprecate_eof",
        "multi_statements_to_primary",
        "local_infile",
        "default_auth_plugin",
        "max_connections",
        "max_unauthenticated",
        "max_unauthenticated_per_address",
        "max_allowed_packet",
        "connect_timeout",
        "shutdown_timeout",
        "server_version",
        "read_only_functions",
        "tracer_provider",
        "tls",
        "pool",
        "backends",
        "users",
        "admin",
    }
)
_BACKEND_KEYS: Final = frozenset(
    {
        "primary",
        "replicas",
        "user",
        "password",
        "flavor",
        "monitor_interval_ms",
        "connect_timeout",
        "tls",
        "tls_ca",
        "tls_verify",
        "replica_read_timeout",
        "read_timeout",
        "write_timeout",
        "discover_roles",
        "on_split_brain",
        "discover_replicas",
    }
)
_USER_KEYS: Final = frozenset(
    {"password", "password_hash", "plugin", "level", "backend_user", "backend_password"}
)


def _table(data: Mapping[str, Any], key: str, allowed: frozenset[str]) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] must be a table")
    unknown = set(value) - allowed
    if unknown:
        raise ConfigError(f"unknown keys in [{key}]: {sorted(unknown)}")
    return dict(value)


def _number(value: object, name: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    if positive and not value > 0:
        raise ConfigError(f"{name} must be positive, not {value!r}")
    return float(value)


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    return value


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    return value


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string")
    return value


def _path(value: object, name: str, base: Path | None) -> Path:
    path = Path(_text(value, name)).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


def _plugin(value: object, name: str) -> str:
    plugin = _text(value, name)
    if plugin not in AUTH_PLUGINS:
        raise ConfigError(f"{name} must be one of {sorted(AUTH_PLUGINS)}, not {plugin!r}")
    return plugin


def _functions(value: object) -> frozenset[str]:
    if not isinstance(value, str | list) or any(not isinstance(v, str) for v in value):
        raise ConfigError("read_only_functions must be a list of function names")
    try:
        return read_only_function_names(value)
    except InterfaceError as e:
        raise ConfigError(str(e)) from None


def _level(value: object, name: str) -> Level:
    try:
        return Level.parse(_text(value, name))
    except InterfaceError as e:
        raise ConfigError(f"{name}: {e}") from None


def _backends(data: Mapping[str, Any], base: Path | None) -> BackendsConfig:
    b = _table(data, "backends", _BACKEND_KEYS)
    if "primary" not in b:
        raise ConfigError("[backends] needs a primary")
    replicas = b.get("replicas", [])
    if not isinstance(replicas, list):
        raise ConfigError("backends.replicas must be a list of addresses")
    primary = Address.parse(b["primary"])
    parsed = tuple(dict.fromkeys(Address.parse(r) for r in replicas))
    if primary in parsed:
        raise ConfigError(f"{primary} is both the primary and a replica")
    flavor = b.get("flavor")
    if flavor is not None and (not isinstance(flavor, str) or flavor.lower() not in _FLAVORS):
        raise ConfigError(f"backends.flavor must be one of {sorted(_FLAVORS)}")
    interval_ms = _number(b.get("monitor_interval_ms", 200), "backends.monitor_interval_ms")
    return BackendsConfig(
        primary=primary,
        replicas=parsed,
        user=_text(b.get("user", "root"), "backends.user"),
        password=_text(b.get("password", ""), "backends.password"),
        flavor=flavor.lower() if isinstance(flavor, str) else None,
        monitor_interval=interval_ms / 1000.0,
        connect_timeout=_number(b.get("connect_timeout", 5.0), "backends.connect_timeout"),
        tls=_flag(b.get("tls", False), "backends.tls"),
        tls_ca=_path(b["tls_ca"], "backends.tls_ca", base) if "tls_ca" in b else None,
        tls_verify=_flag(b.get("tls_verify", True), "backends.tls_verify"),
        deadlines=_deadlines(b),
        discover_roles=_flag(b.get("discover_roles", True), "backends.discover_roles"),
        on_split_brain=_split_brain(b.get("on_split_brain", "keep")),
        discover_replicas=_allow_list(b.get("discover_replicas", [])),
    )


def _allow_list(value: object) -> AllowList:
    """Networks (``10.1.0.0/16``, ``127.0.0.1``) or host names."""
    if not isinstance(value, list):
        raise ConfigError("backends.discover_replicas must be a list of networks or host names")
    try:
        return AllowList.parse(_text(item, "backends.discover_replicas") for item in value)
    except InterfaceError as e:
        raise ConfigError(f"backends.{e.args[-1]}") from None


def _split_brain(value: object) -> OnSplitBrain:
    try:
        return OnSplitBrain.parse(_text(value, "backends.on_split_brain"))
    except InterfaceError as e:
        raise ConfigError(f"backends.on_split_brain: {e.args[-1]}") from None


def _deadlines(b: Mapping[str, Any]) -> Deadlines:
    try:
        return Deadlines(
            replica_read=b.get("replica_read_timeout", DEFAULT_REPLICA_READ_TIMEOUT),
            read=b.get("read_timeout", DEFAULT_READ_TIMEOUT),
            write=b.get("write_timeout", DEFAULT_WRITE_TIMEOUT),
        )
    except InterfaceError as e:
        raise ConfigError(f"backends.{e}") from None


def _users(data: Mapping[str, Any]) -> dict[str, UserConfig]:
    raw = data.get("users", {})
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("at least one [users.NAME] table is needed (the proxy is no open relay)")
    users: dict[str, UserConfig] = {}
    for name, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"[users.{name}] must be a table")
        unknown = set(entry) - _USER_KEYS
        if unknown:
            raise ConfigError(f"unknown keys in [users.{name}]: {sorted(unknown)}")
        password = entry.get("password")
        password_hash = entry.get("password_hash")
        if password is None and password_hash is None:
            raise ConfigError(f"[users.{name}] needs a password or a password_hash")
        if password_hash is not None:
            text = _text(password_hash, f"users.{name}.password_hash")
            if len(text) != 41 or not text.startswith("*"):
                raise ConfigError(f"users.{name}.password_hash must be '*' + 40 hex digits")
            try:
                bytes.fromhex(text[1:])
            except ValueError:
                raise ConfigError(f"users.{name}.password_hash must be hex") from None
        users[name] = UserConfig(
            name=name,
            password=_text(password, f"users.{name}.password") if password is not None else None,
            password_hash=password_hash,
            plugin=_plugin(entry.get("plugin", MYSQL_NATIVE_PASSWORD), f"users.{name}.plugin"),
            level=_level(entry["level"], f"users.{name}.level") if "level" in entry else None,
            backend_user=(
                _text(entry["backend_user"], f"users.{name}.backend_user")
                if "backend_user" in entry
                else None
            ),
            backend_password=(
                _text(entry["backend_password"], f"users.{name}.backend_password")
                if "backend_password" in entry
                else None
            ),
        )
    return users


def _tls(data: Mapping[str, Any], base: Path | None) -> TlsConfig | None:
    if "tls" not in data:
        return None
    t = _table(data, "tls", frozenset({"cert", "key", "require"}))
    if "cert" not in t or "key" not in t:
        raise ConfigError("[tls] needs cert and key")
    return TlsConfig(
        cert=_path(t["cert"], "tls.cert", base),
        key=_path(t["key"], "tls.key", base),
        require=_flag(t.get("require", False), "tls.require"),
    )


_POOL_KEYS: Final = frozenset(
    {
        "multiplexing",
        "max_connections",
        "wait_timeout",
        "idle_timeout",
        "ping_after",
        "hold_prepared",
    }
)


def _pool(data: Mapping[str, Any]) -> PoolConfig:
    if "pool" not in data:
        return PoolConfig()
    p = _table(data, "pool", _POOL_KEYS)
    default = PoolConfig()
    size = _integer(p.get("max_connections", default.max_connections), "pool.max_connections")
    if size < 1:
        raise ConfigError("pool.max_connections must be at least 1")
    return PoolConfig(
        multiplexing=_flag(p.get("multiplexing", default.multiplexing), "pool.multiplexing"),
        max_connections=size,
        wait_timeout=_number(p.get("wait_timeout", default.wait_timeout), "pool.wait_timeout"),
        idle_timeout=_number(p.get("idle_timeout", default.idle_timeout), "pool.idle_timeout"),
        ping_after=_number(
            p.get("ping_after", default.ping_after), "pool.ping_after", positive=False
        ),
        hold_prepared=_number(
            p.get("hold_prepared", default.hold_prepared), "pool.hold_prepared", positive=False
        ),
    )


def _admin(data: Mapping[str, Any], base: Path | None) -> AdminConfig | None:
    if "admin" not in data:
        return None
    a = _table(data, "admin", frozenset({"listen", "token", "tls_cert", "tls_key"}))
    listen = Address.parse(a.get("listen", "127.0.0.1:9033"))
    token = _text(a.get("token", ""), "admin.token")
    if not listen.is_loopback and not token:
        raise ConfigError(
            f"admin.listen {listen.name} is not a loopback address: the admin endpoint "
            "needs admin.token (at least 8 characters) to listen there"
        )
    if len(token) < 8:
        raise ConfigError("admin.token must be at least 8 characters")
    if ("tls_cert" in a) != ("tls_key" in a):
        raise ConfigError("[admin] needs both tls_cert and tls_key for HTTPS, or neither")
    return AdminConfig(
        listen,
        token,
        tls_cert=_path(a["tls_cert"], "admin.tls_cert", base) if "tls_cert" in a else None,
        tls_key=_path(a["tls_key"], "admin.tls_key", base) if "tls_key" in a else None,
    )


def _tracer_provider(value: object) -> str | None:
    if value is None:
        return None
    if value != "global":
        raise ConfigError(
            'tracer_provider must be "global" (the OpenTelemetry provider of the process), '
            f"not {value!r}"
        )
    return "global"


def parse(data: Mapping[str, Any], *, source: Path | None = None) -> ProxyConfig:
    """Validate parsed TOML (a mapping) into a :class:`ProxyConfig`."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"unknown top-level keys: {sorted(unknown)}")
    base = source.parent if source is not None else None
    try:
        on_timeout = OnTimeout.parse(_text(data.get("on_timeout", "primary"), "on_timeout"))
    except InterfaceError as e:
        raise ConfigError(str(e)) from None
    server_version = data.get("server_version")
    return ProxyConfig(
        backends=_backends(data, base),
        users=_users(data),
        listen=Address.parse(data.get("listen", "127.0.0.1:6033")),
        level=_level(data.get("level", "read_own_writes"), "level"),
        wait_timeout=_number(data.get("wait_timeout", 1.0), "wait_timeout"),
        on_timeout=on_timeout,
        pipeline_waits=_flag(data.get("pipeline_waits", True), "pipeline_waits"),
        backend_deprecate_eof=_flag(
            data.get("backend_deprecate_eof", True), "backend_deprecate_eof"
        ),
        multi_statements_to_primary=_flag(
            data.get("multi_statements_to_primary", True), "multi_statements_to_primary"
        ),
        local_infile=_flag(data.get("local_infile", False), "local_infile"),
        default_auth_plugin=_plugin(
            data.get("default_auth_plugin", MYSQL_NATIVE_PASSWORD), "default_auth_plugin"
        ),
        max_connections=_integer(data.get("max_connections", 4096), "max_connections"),
        max_unauthenticated=_integer(data.get("max_unauthenticated", 1024), "max_unauthenticated"),
        max_unauthenticated_per_address=_integer(
            data.get("max_unauthenticated_per_address", 64), "max_unauthenticated_per_address"
        ),
        max_allowed_packet=_integer(
            data.get("max_allowed_packet", 64 * 1024 * 1024), "max_allowed_packet"
        ),
        connect_timeout=_number(data.get("connect_timeout", 10.0), "connect_timeout"),
        shutdown_timeout=_number(data.get("shutdown_timeout", 10.0), "shutdown_timeout"),
        server_version=(
            _text(server_version, "server_version") if server_version is not None else None
        ),
        tls=_tls(data, base),
        admin=_admin(data, base),
        pool=_pool(data),
        read_only_functions=_functions(data.get("read_only_functions", [])),
        tracer_provider=_tracer_provider(data.get("tracer_provider")),
        source=source,
    )


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, object]) -> dict[str, Any]:
    """A copy of ``data`` with dotted keys replaced (``{"backends.primary": "h:1"}``)."""
    result: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    for dotted, value in overrides.items():
        keys = dotted.split(".")
        target = result
        for key in keys[:-1]:
            nested = target.get(key)
            if not isinstance(nested, dict):
                nested = {} if nested is None else dict(nested)
                target[key] = nested
            target = nested
        target[keys[-1]] = value
    return result


def load(path: str | Path, overrides: Mapping[str, object] | None = None) -> ProxyConfig:
    """Read and validate a TOML file, with dotted-key ``overrides`` applied first."""
    source = Path(path).resolve()
    try:
        with source.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {source}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source} is not valid TOML: {e}") from None
    if overrides:
        data = apply_overrides(data, overrides)
    return parse(data, source=source)
