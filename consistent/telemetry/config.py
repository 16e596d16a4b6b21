"""Telemetry configuration: one frozen value, read from the standard ``OTEL_*`` environment
variables where they exist, plus ours (``CONSISTENT_TRACE_*``).

Tracing is opt-in: a library must not write files nobody asked for.  With nothing set, no
exporter is configured and every span call is a no-op.  Setting ``CONSISTENT_TRACE_FILE`` or
``CONSISTENT_TRACE_DIR`` turns the default OTLP-JSON lines file exporter on;
``OTEL_TRACES_EXPORTER`` chooses exporters explicitly (``file``, ``otlp``, ``console``,
``none``, comma-separated).  ``OTEL_SDK_DISABLED=true`` turns everything off.

A malformed variable is logged and ignored (its default is used): telemetry must never stop
the application from reaching its database.

https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from consistent.errors import InterfaceError

__all__ = ["ENV", "TRACE_EXPORTERS", "TelemetryConfig"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Span exporters we know by name.
TRACE_EXPORTERS: Final = frozenset({"file", "otlp", "console"})
#: Metric exporters we know by name.
METRIC_EXPORTERS: Final = frozenset({"otlp", "console"})
SAMPLERS: Final = frozenset(
    {
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    }
)
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})
_MIB: Final = 1024 * 1024


class ENV:
    """The environment variables read by :meth:`TelemetryConfig.from_env`."""

    SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
    SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
    RESOURCE_ATTRIBUTES: Final = "OTEL_RESOURCE_ATTRIBUTES"
    TRACES_EXPORTER: Final = "OTEL_TRACES_EXPORTER"
    METRICS_EXPORTER: Final = "OTEL_METRICS_EXPORTER"
    OTLP_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
    OTLP_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    SAMPLER: Final = "OTEL_TRACES_SAMPLER"
    SAMPLER_ARG: Final = "OTEL_TRACES_SAMPLER_ARG"
    BSP_SCHEDULE_DELAY: Final = "OTEL_BSP_SCHEDULE_DELAY"
    BSP_MAX_QUEUE_SIZE: Final = "OTEL_BSP_MAX_QUEUE_SIZE"
    BSP_MAX_EXPORT_BATCH_SIZE: Final = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
    BSP_EXPORT_TIMEOUT: Final = "OTEL_BSP_EXPORT_TIMEOUT"
    METRIC_EXPORT_INTERVAL: Final = "OTEL_METRIC_EXPORT_INTERVAL"
    # ours
    TRACE_FILE: Final = "CONSISTENT_TRACE_FILE"
    TRACE_DIR: Final = "CONSISTENT_TRACE_DIR"
    ROTATE_BYTES: Final = "CONSISTENT_TRACE_ROTATE_BYTES"
    ROTATE_KEEP: Final = "CONSISTENT_TRACE_KEEP"
    QUERY_TEXT: Final = "CONSISTENT_TRACE_QUERY_TEXT"
    MAX_QUERY_CHARS: Final = "CONSISTENT_TRACE_MAX_QUERY_CHARS"
    MAX_GTID_CHARS: Final = "CONSISTENT_TRACE_MAX_GTID_CHARS"
    WRITER_QUEUE: Final = "CONSISTENT_TRACE_WRITER_QUEUE"


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """What to record and where to send it.  Build it with :meth:`from_env` or by keywords."""

    #: False turns everything off (``OTEL_SDK_DISABLED``).
    enabled: bool = True
    #: ``service.name`` of the resource (``OTEL_SERVICE_NAME``).
    service_name: str = "consistent"
    #: More resource attributes (``OTEL_RESOURCE_ATTRIBUTES``).
    resource_attributes: tuple[tuple[str, str], ...] = ()
    #: Span exporters: ``file``, ``otlp``, ``console`` (``OTEL_TRACES_EXPORTER``).
    traces_exporters: tuple[str, ...] = ()
    #: Metric exporters: ``otlp``, ``console`` (``OTEL_METRICS_EXPORTER``; none by default).
    metrics_exporters: tuple[str, ...] = ()
    #: The trace file (``CONSISTENT_TRACE_FILE``); rotated files sit next to it.
    trace_file: Path | None = None
    #: A directory for one file per process, ``consistent-<pid>.jsonl``
    #: (``CONSISTENT_TRACE_DIR``); used when ``trace_file`` is not set.
    trace_dir: Path | None = None
    #: Rotate the file when the next line would take it beyond this size.
    rotate_bytes: int = 64 * _MIB
    #: Rotated files to keep (oldest deleted first); 0 keeps them all.
    rotate_keep: int = 0
    #: Record ``db.query.text`` (literals masked).  Off by default: statements carry data.
    capture_query_text: bool = False
    #: ``db.query.text`` is cut to this many characters.
    max_query_chars: int = 2048
    #: GTID sets whose text is longer are recorded as a digest and a count.
    max_gtid_chars: int = 1024
    #: ``OTEL_TRACES_SAMPLER``.  ``always_on`` by default, not the SDK's
    #: ``parentbased_always_on``: the traces feed analytics, which need every statement.
    sampler: str = "always_on"
    #: The ratio of ``traceidratio`` samplers (``OTEL_TRACES_SAMPLER_ARG``).
    sampler_ratio: float = 1.0
    #: Finished records waiting for the exporter thread; beyond it records are dropped and
    #: counted (``OTEL_BSP_MAX_QUEUE_SIZE``).
    max_queue_size: int = 2048
    #: Records per exported batch, one OTLP request (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``).
    max_export_batch_size: int = 512
    #: Seconds between exports when fewer than a batch are waiting (``OTEL_BSP_SCHEDULE_DELAY``,
    #: given there in milliseconds).
    schedule_delay: float = 5.0
    #: Seconds an exporter may take per batch (``OTEL_BSP_EXPORT_TIMEOUT``, milliseconds).
    export_timeout: float = 30.0
    #: Batches waiting for one exporter's writer thread; beyond it batches are dropped (with
    #: several exporters: a single one is written by the batch thread itself).
    writer_queue_batches: int = 16
    #: OTLP/HTTP traces endpoint; ``None`` lets the exporter read its own variables.
    otlp_endpoint: str | None = None
    #: Seconds between metric exports (``OTEL_METRIC_EXPORT_INTERVAL``, milliseconds).
    metric_export_interval: float = 60.0
    #: Where the values came from (for diagnostics; not compared).
    source: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("rotate_bytes", "max_queue_size", "max_export_batch_size"):
            if getattr(self, name) < 1:
                raise InterfaceError(f"telemetry {name} must be at least 1")
        for name in ("max_query_chars", "max_gtid_chars", "writer_queue_batches"):
            if getattr(self, name) < 1:
                raise InterfaceError(f"telemetry {name} must be at least 1")
        if self.rotate_keep < 0:
            raise InterfaceError("telemetry rotate_keep must be 0 (keep all) or more")
        if not 0.0 <= self.sampler_ratio <= 1.0:
            raise InterfaceError("telemetry sampler_ratio must be within [0, 1]")
        if self.sampler not in SAMPLERS:
            raise InterfaceError(f"unknown sampler {self.sampler!r} (one of {sorted(SAMPLERS)})")
        unknown = set(self.traces_exporters) - TRACE_EXPORTERS
        if unknown:
            raise InterfaceError(f"unknown trace exporters {sorted(unknown)}")
        unknown = set(self.metrics_exporters) - METRIC_EXPORTERS
        if unknown:
            raise InterfaceError(f"unknown metric exporters {sorted(unknown)}")
        if self.schedule_delay <= 0 or self.export_timeout <= 0:
            raise InterfaceError("telemetry delays must be positive")

    # ------------------------------------------------------------------ derived

    @property
    def traces_on(self) -> bool:
        """Spans are recorded and exported somewhere."""
        return self.enabled and bool(self.traces_exporters) and self.sample_ratio > 0.0

    @property
    def metrics_on(self) -> bool:
        """Metrics are recorded by a meter provider this configuration builds."""
        return self.enabled and bool(self.metrics_exporters)

    @property
    def sample_ratio(self) -> float:
        """The share of root statements whose spans are kept."""
        if self.sampler.endswith("always_off"):
            return 0.0
        if self.sampler.endswith("traceidratio"):
            return self.sampler_ratio
        return 1.0

    @property
    def parent_based(self) -> bool:
        """A statement inside a sampled-out application span is not kept either."""
        return self.sampler.startswith("parentbased_")

    def trace_path(self, pid: int | None = None) -> Path:
        """The active trace file: ``trace_file``, else ``<trace_dir>/consistent-<pid>.jsonl``
        (the current directory's ``consistent-traces`` when neither is set)."""
        if self.trace_file is not None:
            return self.trace_file
        directory = self.trace_dir if self.trace_dir is not None else Path("consistent-traces")
        return directory / f"consistent-{os.getpid() if pid is None else pid}.jsonl"

    # ------------------------------------------------------------------ environment

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TelemetryConfig:
        """The configuration the environment describes (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        reader = _Reader(env)
        trace_file = reader.get(ENV.TRACE_FILE)
        trace_dir = reader.get(ENV.TRACE_DIR)
        default_exporters = "file" if trace_file or trace_dir else "none"
        defaults = cls()
        sampler = reader.get(ENV.SAMPLER, defaults.sampler).lower()
        if sampler not in SAMPLERS:
            logger.warning("ignoring %s=%r: unknown sampler", ENV.SAMPLER, sampler)
            sampler = defaults.sampler
        ratio = reader.number(ENV.SAMPLER_ARG, float, 1.0, 0.0, 1.0)
        resource = _resource_attributes(reader.get(ENV.RESOURCE_ATTRIBUTES))
        service_name = reader.get(ENV.SERVICE_NAME) or dict(resource).get(
            "service.name", defaults.service_name
        )
        return cls(
            enabled=not reader.flag(ENV.SDK_DISABLED, False),
            service_name=service_name,
            resource_attributes=tuple((k, v) for k, v in resource if k != "service.name"),
            traces_exporters=reader.names(ENV.TRACES_EXPORTER, default_exporters, TRACE_EXPORTERS),
            metrics_exporters=reader.names(ENV.METRICS_EXPORTER, "none", METRIC_EXPORTERS),
            trace_file=Path(trace_file) if trace_file else None,
            trace_dir=Path(trace_dir) if trace_dir else None,
            rotate_bytes=reader.number(ENV.ROTATE_BYTES, int, defaults.rotate_bytes, 1),
            rotate_keep=reader.number(ENV.ROTATE_KEEP, int, defaults.rotate_keep, 0),
            capture_query_text=reader.flag(ENV.QUERY_TEXT, False),
            max_query_chars=reader.number(ENV.MAX_QUERY_CHARS, int, defaults.max_query_chars, 1),
            max_gtid_chars=reader.number(ENV.MAX_GTID_CHARS, int, defaults.max_gtid_chars, 1),
            sampler=sampler,
            sampler_ratio=ratio,
            max_queue_size=reader.number(ENV.BSP_MAX_QUEUE_SIZE, int, defaults.max_queue_size, 1),
            max_export_batch_size=reader.number(
                ENV.BSP_MAX_EXPORT_BATCH_SIZE, int, defaults.max_export_batch_size, 1
            ),
            schedule_delay=reader.number(ENV.BSP_SCHEDULE_DELAY, float, 5000.0, 1.0) / 1000,
            export_timeout=reader.number(ENV.BSP_EXPORT_TIMEOUT, float, 30000.0, 1.0) / 1000,
            writer_queue_batches=reader.number(
                ENV.WRITER_QUEUE, int, defaults.writer_queue_batches, 1
            ),
            otlp_endpoint=_otlp_endpoint(reader),
            metric_export_interval=reader.number(ENV.METRIC_EXPORT_INTERVAL, float, 60000.0, 1.0)
            / 1000,
            source={k: v for k, v in env.items() if k.startswith(("OTEL_", "CONSISTENT_TRACE"))},
        )


class _Reader:
    """Typed access to environment variables; malformed values fall back with a warning."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def get(self, name: str, default: str = "") -> str:
        return self._env.get(name, default).strip() or default

    def flag(self, name: str, default: bool) -> bool:
        value = self.get(name).lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return default if value == "" else False
        logger.warning("ignoring %s=%r: not a boolean", name, value)
        return default

    def number(
        self,
        name: str,
        kind: Callable[[str], T],
        default: T,
        minimum: float,
        maximum: float | None = None,
    ) -> T:
        text = self.get(name)
        if not text:
            return default
        try:
            value = kind(text)
        except ValueError:
            logger.warning("ignoring %s=%r: not a number", name, text)
            return default
        number = float(value)  # type: ignore[arg-type]
        if number < minimum or (maximum is not None and number > maximum):
            logger.warning("ignoring %s=%r: out of range", name, text)
            return default
        return value

    def names(self, name: str, default: str, known: frozenset[str]) -> tuple[str, ...]:
        items = [item.strip().lower() for item in self.get(name, default).split(",")]
        chosen: list[str] = []
        for item in items:
            if item in ("", "none"):
                continue
            if item not in known:
                logger.warning("ignoring %s entry %r (known: %s)", name, item, sorted(known))
                continue
            if item not in chosen:
                chosen.append(item)
        return tuple(chosen)


def _resource_attributes(text: str) -> tuple[tuple[str, str], ...]:
    """``key=value,key2=value2`` with percent-encoded values (W3C Baggage octets)."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            logger.warning("ignoring malformed %s entry %r", ENV.RESOURCE_ATTRIBUTES, item)
            continue
        pairs.append((key.strip(), urllib.parse.unquote(value.strip())))
    return tuple(pairs)


def _otlp_endpoint(reader: _Reader) -> str | None:
    specific = reader.get(ENV.OTLP_TRACES_ENDPOINT)
    if specific:
        return specific
    base = reader.get(ENV.OTLP_ENDPOINT)
    if base:
        # The generic endpoint names the collector; the signal's path is appended (OTLP spec).
        return base.rstrip("/") + "/v1/traces"
    return None
