"""Statement spans into the application's own OpenTelemetry ``TracerProvider``.

An application that set up OpenTelemetry itself (its ``TracerProvider``, processors and
exporters, perhaps through ``opentelemetry-instrument``) wants the database spans in its own
traces, through its own pipeline, beside its HTTP and queue spans.  Opted in (the
``tracer_provider`` setting of each form, see the README's "Tracing"), a session's statement
spans are handed to that provider instead of the trace file: the span a statement ran under
in the application's context is its parent, and the provider's sampler, processors and
exporters take it from there.

The spans are still recorded the cheap way (:mod:`consistent.telemetry.spans`): the
statement's thread only reads the clock and queues the span; :class:`ProviderSink`, on the
pipeline's writer thread, replays each finished record through the provider's tracer with its
real start and end times, name, kind, attributes and status.  The provider draws the span ids
(so they differ from the ids the same statement would have in a trace file); the trace id is
the parent's.

``"global"`` names the provider ``opentelemetry.trace.get_tracer_provider()`` returns when the
spans are exported, so one set after the connection was opened is used too.
"""

from __future__ import annotations

import atexit
import functools
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.trace.status import Status
from opentelemetry.trace.status import StatusCode as OtelStatus

from consistent import __version__
from consistent.errors import InterfaceError, ProgrammingError
from consistent.telemetry.config import TelemetryConfig
from consistent.telemetry.pipeline import Telemetry
from consistent.telemetry.records import SpanRecord, StatusCode
from consistent.trace import SCOPE_NAME, SpanKind

__all__ = [
    "GLOBAL_PROVIDER",
    "ProviderSink",
    "TracerProviderSetting",
    "chosen_telemetry",
    "provider_telemetry",
]

logger = logging.getLogger(__name__)

#: The setting's value naming the application's global provider.
GLOBAL_PROVIDER: Final = "global"
#: What ``tracer_provider`` may be: ``"global"`` or a provider object.
TracerProviderSetting = str | otel_trace.TracerProvider

_KINDS: Final = {
    SpanKind.INTERNAL: OtelKind.INTERNAL,
    SpanKind.SERVER: OtelKind.SERVER,
    SpanKind.CLIENT: OtelKind.CLIENT,
}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


class ProviderSink:
    """Replays statement records through a ``TracerProvider`` (the global one when
    ``provider`` is ``None``).  Lag samples are not the application's spans: they are left
    out."""

    def __init__(self, provider: otel_trace.TracerProvider | None = None) -> None:
        self._provider = provider

    def _tracer(self) -> otel_trace.Tracer:
        provider = self._provider or otel_trace.get_tracer_provider()
        return provider.get_tracer(SCOPE_NAME, __version__)

    def export(self, records: Sequence[SpanRecord]) -> None:
        tracer = self._tracer()
        for record in records:
            if record.kind is not SpanKind.CLIENT:
                continue
            if record.parent_span_id:
                parent = SpanContext(
                    record.trace_id, record.parent_span_id, is_remote=False, trace_flags=_SAMPLED
                )
                context = otel_trace.set_span_in_context(NonRecordingSpan(parent))
            else:
                # A root: not whatever context the writer thread happens to have.
                context = otel_context.Context()
            span = tracer.start_span(
                record.name,
                context=context,
                kind=_KINDS[record.kind],
                attributes=dict(record.attributes),
                start_time=record.start_ns,
            )
            if record.status is StatusCode.ERROR:
                span.set_status(Status(OtelStatus.ERROR, record.status_message or None))
            span.end(end_time=record.end_ns)

    def flush(self) -> None:
        provider = self._provider or otel_trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            force_flush()

    def close(self) -> None:
        """The provider is the application's: it shuts it down itself."""


def provider_telemetry(setting: TracerProviderSetting) -> Telemetry:
    """The pipeline of the sessions whose statement spans go to ``setting``'s provider
    (``"global"`` or a ``TracerProvider``), one per provider in the process.  Its sampling and
    queue settings are the environment's (``OTEL_*``, ``CONSISTENT_TRACE_*``); it writes no
    file and exports no metrics of its own (the process's pipeline does, when configured)."""
    if isinstance(setting, str):
        if setting.strip().lower() != GLOBAL_PROVIDER:
            raise InterfaceError(
                f"tracer_provider must be {GLOBAL_PROVIDER!r} or a TracerProvider, not {setting!r}"
            )
        return _telemetry(None)
    if not isinstance(setting, otel_trace.TracerProvider):
        raise InterfaceError(
            f"tracer_provider must be {GLOBAL_PROVIDER!r} or a TracerProvider, "
            f"not {type(setting).__name__}"
        )
    return _telemetry(setting)


def chosen_telemetry(telemetry: Telemetry | None, provider: object) -> Telemetry | None:
    """The pipeline a connection's ``telemetry`` and ``tracer_provider`` arguments choose
    (``None``: the process's default); giving both is a mistake."""
    if provider is None:
        return telemetry
    if telemetry is not None:
        raise ProgrammingError("give telemetry or tracer_provider, not both")
    return provider_telemetry(provider)  # type: ignore[arg-type]


@functools.cache
def _telemetry(provider: otel_trace.TracerProvider | None) -> Telemetry:
    config = replace(TelemetryConfig.from_env(), metrics_exporters=())
    telemetry = Telemetry(config, exporters=[ProviderSink(provider)])
    if telemetry.active:
        atexit.register(telemetry.shutdown, 5.0)
    return telemetry
