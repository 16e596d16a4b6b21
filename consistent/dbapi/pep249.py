"""What the two connection modules (:mod:`consistent.dbapi`, :mod:`consistent.aio`) share:
PEP 249's module attributes and the reading of ``connect()``'s arguments."""

from __future__ import annotations

from typing import Any, Final

from consistent.dbapi.config import ConnectConfig, build_config, parse_url
from consistent.telemetry import Telemetry
from consistent.telemetry.appspans import chosen_telemetry

__all__ = ["apilevel", "connect_params", "paramstyle", "session_config", "threadsafety"]

#: PEP 249: the module speaks DB-API 2.0.
apilevel: Final = "2.0"
#: PEP 249: threads (or tasks) may share the module but not connections (a session is one
#: state machine).
threadsafety: Final = 1
#: PEP 249: ``%s`` and ``%(name)s`` placeholders, as PyMySQL and aiomysql.
paramstyle: Final = "pyformat"


def connect_params(dsn: str | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``connect()``'s settings: the URL's (when ``dsn`` is given), overridden by the
    keywords."""
    params: dict[str, Any] = parse_url(dsn) if dsn is not None else {}
    params.update(kwargs)
    return params


def session_config(
    params: dict[str, Any], telemetry: Telemetry | None
) -> tuple[ConnectConfig, Telemetry | None]:
    """The connection's configuration and telemetry pipeline from what is left of
    ``params`` once the form took its own keywords (``tracer_provider`` is taken here)."""
    telemetry = chosen_telemetry(telemetry, params.pop("tracer_provider", None))
    return build_config(**params), telemetry
