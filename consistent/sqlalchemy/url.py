"""From a ``mysql+consistent://`` URL to :func:`consistent.dbapi.connect` keywords (pure).

The primary is the URL's host and port; the replicas and the consistency settings are query
options, which may also come through ``create_engine(url, connect_args={...})``::

    mysql+consistent://app:pw@db1:3306/shop?replica=db2:3306&replica=db3:3306
        &level=read_own_writes&wait_timeout=0.5&on_timeout=primary
        &read_only_functions=shop.price,fmt

Every other query option is a PyMySQL option, converted exactly as ``mysql+pymysql`` converts
it (the dialect hands the rest of the URL to SQLAlchemy's own ``mysql+pymysql`` translation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from consistent.dbapi.config import parse_boolean, parse_number
from consistent.errors import InterfaceError

__all__ = [
    "CONSISTENCY_OPTIONS",
    "consistency_options",
    "normalize_connect_params",
    "split_query",
]

# Our query options and how their text becomes a value for ``consistent.dbapi.connect``.
_TEXT: Final = frozenset({"level", "on_timeout", "flavor", "tracer_provider", "on_split_brain"})
_NUMBERS: Final = frozenset(
    {
        "wait_timeout",
        "max_lag",
        "replica_connect_timeout",
        "replica_read_timeout",
        "monitor_interval",
    }
)
_BOOLEANS: Final = frozenset({"autocommit", "retry_reads", "discover_roles"})
_REPLICAS: Final = frozenset({"replica", "replicas"})
# Comma-separated lists that may also be repeated.
_LISTS: Final = frozenset({"read_only_functions", "discover_replicas"})
#: Query options the dialect consumes itself; the rest are PyMySQL's.
CONSISTENCY_OPTIONS: Final = _TEXT | _NUMBERS | _BOOLEANS | _REPLICAS | _LISTS


def split_query(
    query: Mapping[str, str | tuple[str, ...]],
) -> tuple[dict[str, str | tuple[str, ...]], dict[str, str | tuple[str, ...]]]:
    """``(ours, rest)``: the URL's query options split between the dialect and PyMySQL."""
    ours = {k: v for k, v in query.items() if k in CONSISTENCY_OPTIONS}
    rest = {k: v for k, v in query.items() if k not in CONSISTENCY_OPTIONS}
    return ours, rest


def _values(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _single(key: str, value: str | tuple[str, ...]) -> str:
    values = _values(value)
    if len(values) != 1:
        raise InterfaceError(f"URL option {key!r} is given {len(values)} times")
    return values[0]


def _replica_list(values: Iterable[str]) -> list[str]:
    """``replica=a:1&replica=b:2`` and ``replicas=a:1,b:2`` both give ``["a:1", "b:2"]``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def consistency_options(ours: Mapping[str, str | tuple[str, ...]]) -> dict[str, Any]:
    """Keywords for :func:`consistent.dbapi.connect` from the dialect's query options."""
    kwargs: dict[str, Any] = {}
    replicas: list[str] = []
    for key, value in ours.items():
        if key in _REPLICAS:
            replicas.extend(_replica_list(_values(value)))
        elif key in _NUMBERS:
            kwargs[key] = parse_number(f"URL option {key!r}", _single(key, value))
        elif key in _BOOLEANS:
            kwargs[key] = parse_boolean(f"URL option {key!r}", _single(key, value))
        elif key in _LISTS:
            kwargs[key] = ",".join(_values(value))
        else:
            kwargs[key] = _single(key, value)
    if replicas:
        kwargs["replicas"] = replicas
    return kwargs


def normalize_connect_params(cparams: Mapping[str, Any]) -> dict[str, Any]:
    """The final keywords for ``consistent.dbapi.connect`` once ``connect_args`` are merged
    in: ``replica`` is accepted for ``replicas``, and a ``primary`` given in ``connect_args``
    replaces the URL's host and port."""
    params = dict(cparams)
    if "replica" in params:
        extra = params.pop("replica")
        single = isinstance(extra, str | Mapping)
        given = [extra] if single else list(extra)
        existing = params.get("replicas")
        if isinstance(existing, str):
            existing = _replica_list([existing])
        params["replicas"] = [*(existing or ()), *given]
    if "primary" in params:
        params.pop("host", None)
        params.pop("port", None)
    return params
