"""The facade the DB-API wrapper and the proxy call: one span per routed statement.

Per session, a :class:`StatementTracer` (from :meth:`Telemetry.session
<consistent.telemetry.pipeline.Telemetry.session>`); per statement, a context manager::

    with tracer.statement(sql) as span:
        decision = policy.route(stmt, sql)
        ...
        span.decision(decision)                   # every decision the policy gives
        span.wait(decision, outcome, seconds)     # after each wait on a replica
        span.produced(gtids)                      # GTIDs from the primary's OK packet
        ... run the statement ...

The statement's thread does as little as possible: it notes the start time and the ids, keeps
references to the (immutable) decisions, notes the end time and appends the span to the
pipeline's bounded queue.  Attribute names, GTID text, masking and metrics happen later, on the
exporter threads (:mod:`consistent.telemetry.spanattrs`).  With tracing off, ``statement()``
returns one shared no-op span whose methods do nothing: no allocation, no clock read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace as otel_trace

from consistent.telemetry import otlpjson
from consistent.telemetry.metrics import StatementFacts
from consistent.telemetry.records import SpanRecord, StatusCode, new_span_id, new_trace_id
from consistent.telemetry.spanattrs import (
    NO_WAIT,
    PRIMARY_TARGET,
    Part,
    RouteParts,
    error_part,
    gtid_part,
    query_part,
    role,
    route_from_decision,
    route_without_decision,
    session_part,
    split_address,
    wait_outcome_name,
    wait_part,
)
from consistent.trace import (
    GTID_PRODUCED,
    GTID_REQUIRED,
    REPLICA_KNOWN_EXECUTED,
    STATEMENT_SPAN,
    AttributeValue,
    SpanKind,
)

if TYPE_CHECKING:
    from consistent.gtid import GtidState
    from consistent.policy import Decision
    from consistent.telemetry.config import TelemetryConfig
    from consistent.telemetry.metrics import RoutingMetrics

__all__ = [
    "NOOP_SPAN",
    "NOOP_TRACER",
    "PRIMARY_TARGET",
    "RecordingTracer",
    "StatementSpan",
    "StatementTracer",
    "wait_outcome_name",
]

_NO_REPLICAS: Final = "no_replicas"
_MAX_STATUS_MESSAGE: Final = 256
_CLIENT: Final = int(SpanKind.CLIENT)
_STATEMENT_HEAD: Final = otlpjson.span_head(STATEMENT_SPAN, _CLIENT)
_DEFAULT_ROUTE: Final = (PRIMARY_TARGET, _NO_REPLICAS, None)


class StatementSpan:
    """A statement's span.  This base class records nothing: it is the disabled path, and
    :data:`NOOP_SPAN` is its one instance."""

    __slots__ = ()

    @property
    def recording(self) -> bool:
        """True when this span will be exported."""
        return False

    def __enter__(self) -> StatementSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def decision(self, decision: Decision) -> None:
        """A decision the policy gave for this statement (the last one describes the route;
        earlier ``WAIT`` ones are kept through :meth:`wait`)."""

    def wait(self, decision: Decision, outcome: object, duration: float) -> None:
        """The wait ``decision`` asked for ended with ``outcome`` after ``duration`` seconds."""

    def produced(self, gtids: GtidState) -> None:
        """The primary reported GTIDs this statement produced (merged when reported twice)."""

    def route(self, target: str, reason: str, detail: str | None = None) -> None:
        """Where the statement went when no policy decision was taken (a connection without
        replicas: ``route("primary", "no_replicas")`` is also the default)."""

    def fail(self, exc: BaseException) -> None:
        """The statement failed with ``exc`` without the exception leaving the ``with``."""


#: The shared span of the disabled path.
NOOP_SPAN: Final = StatementSpan()


class StatementTracer:
    """One session's tracer.  This base class is the disabled path (:data:`NOOP_TRACER`)."""

    __slots__ = ()

    @property
    def enabled(self) -> bool:
        """True when statements of this session are recorded."""
        return False

    @property
    def session_id(self) -> str:
        """The session's id in the traces (``""`` when disabled)."""
        return ""

    def statement(self, sql: str = "") -> StatementSpan:
        """The span of one statement; use it as a context manager around routing and
        execution."""
        return NOOP_SPAN


#: The shared tracer of the disabled path.
NOOP_TRACER: Final = StatementTracer()


def _merge(a: GtidState, b: GtidState) -> GtidState:
    try:
        return a | b  # type: ignore[operator]
    except TypeError:
        merge: Callable[[GtidState], GtidState] | None = getattr(a, "merge", None)
        return merge(b) if merge is not None else b


class RecordingTracer(StatementTracer):
    """A session's tracer that records its statements into a telemetry pipeline."""

    __slots__ = (
        "_addresses",
        "_enqueue",
        "_gtid_parts",
        "_keep_unsampled",
        "_session_id",
        "_system",
        "config",
        "pins_seen",
        "routes",
        "session_part",
    )

    def __init__(
        self,
        *,
        config: TelemetryConfig,
        enqueue: Callable[[Any], None],
        session_id: str,
        system: str,
        addresses: Mapping[str, tuple[str, int]],
        keep_unsampled: bool,
        routes: RouteParts | None = None,
    ) -> None:
        self.config = config
        self._enqueue = enqueue
        self._session_id = session_id
        self._system = system
        self._addresses = dict(addresses)
        # Statements whose span is sampled out still feed the metrics when these are on.
        self._keep_unsampled = keep_unsampled
        #: Route parts shared with the pipeline's other sessions.
        self.routes = routes if routes is not None else RouteParts()
        #: The attributes every statement of this session carries.
        self.session_part = session_part(system, session_id)
        # The last GTID part built per attribute name, by identity of the (immutable) state.
        self._gtid_parts: dict[str, tuple[GtidState, Part]] = {}
        #: Pin reasons this session has been seen with (exporter thread only).
        self.pins_seen: set[str] = set()

    @property
    def enabled(self) -> bool:
        return True

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def system(self) -> str:
        """``db.system.name`` of this session's servers."""
        return self._system

    def address(self, target: str) -> tuple[str, int]:
        """``(server.address, server.port)`` of a target."""
        found = self._addresses.get(target)
        if found is None:
            found = split_address(target)
            self._addresses[target] = found
        return found

    def gtid_part(self, name: str, state: GtidState) -> Part:
        """The part of GTID attribute ``name``; rebuilt only when the state changes."""
        cached = self._gtid_parts.get(name)
        if cached is not None and cached[0] is state:
            return cached[1]
        built = gtid_part(name, state, self.config.max_gtid_chars)
        self._gtid_parts[name] = (state, built)
        return built

    def statement(self, sql: str = "") -> StatementSpan:
        parent = otel_trace.get_current_span().get_span_context()
        config = self.config
        sampled = True
        if parent.is_valid and config.parent_based:
            sampled = parent.trace_flags.sampled
        elif config.sample_ratio < 1.0:
            sampled = random.random() < config.sample_ratio
        if not sampled and not self._keep_unsampled:
            return NOOP_SPAN
        return _RecordingSpan(self, sql, parent if parent.is_valid else None, sampled)


class _RecordingSpan(StatementSpan):
    """A statement's span being recorded (statement thread), then read by the exporter
    threads, which turn it into attributes."""

    __slots__ = (
        "_decision",
        "_end",
        "_error",
        "_parent_span_id",
        "_produced",
        "_route",
        "_sampled",
        "_span_id",
        "_sql",
        "_start",
        "_trace_id",
        "_tracer",
        "_wait",
    )

    def __init__(
        self,
        tracer: RecordingTracer,
        sql: str,
        parent: otel_trace.SpanContext | None,
        sampled: bool,
    ) -> None:
        self._tracer = tracer
        self._sql = sql
        self._sampled = sampled
        if parent is None:
            self._trace_id = new_trace_id()
            self._parent_span_id = 0
        else:
            self._trace_id = parent.trace_id
            self._parent_span_id = parent.span_id
        self._span_id = new_span_id()
        self._decision: Decision | None = None
        # (last WAIT decision, its outcome, number of waits, total nanoseconds)
        self._wait: tuple[Decision, object, int, int] | None = None
        self._produced: GtidState | None = None
        self._route: tuple[str, str, str | None] | None = None
        self._error: BaseException | None = None
        self._end = 0
        self._start = time.time_ns()

    @property
    def recording(self) -> bool:
        return self._sampled

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end = time.time_ns()
        if exc is not None:
            self._error = exc
        self._tracer._enqueue(self)

    def decision(self, decision: Decision) -> None:
        self._decision = decision

    def wait(self, decision: Decision, outcome: object, duration: float) -> None:
        previous = self._wait
        count, total = (previous[2], previous[3]) if previous is not None else (0, 0)
        self._wait = (decision, outcome, count + 1, total + int(duration * 1e9))

    def produced(self, gtids: GtidState) -> None:
        previous = self._produced
        self._produced = gtids if previous is None else _merge(previous, gtids)

    def route(self, target: str, reason: str, detail: str | None = None) -> None:
        self._route = (target, reason, detail)

    def fail(self, exc: BaseException) -> None:
        self._error = exc

    # ------------------------------------------------------------------ exporter threads

    def _where(self) -> tuple[str, str, str | None]:
        decision = self._decision
        if decision is not None:
            detail = decision.detail
            return (
                decision.target,
                str(decision.reason),
                None if detail is None else str(detail),
            )
        return self._route or _DEFAULT_ROUTE

    def facts(self) -> StatementFacts:
        """What this statement contributes to the metrics."""
        target, reason, detail = self._where()
        decision = self._decision
        new_pin = None
        if reason == "pinned" and detail is not None:
            seen = self._tracer.pins_seen
            if detail not in seen:
                seen.add(detail)
                new_pin = detail
        wait = self._wait
        return StatementFacts(
            target=target,
            role=role(target),
            reason=reason,
            detail=detail,
            is_read=decision is not None and decision.statement.kind.name == "READ",
            wait_count=wait[2] if wait is not None else 0,
            wait_outcome=wait_outcome_name(wait[1]) if wait is not None else "none",
            wait_seconds=wait[3] / 1e9 if wait is not None else 0.0,
            duration_seconds=(self._end - self._start) / 1e9,
            new_pin=new_pin,
        )

    def observe(self, metrics: RoutingMetrics) -> None:
        """Feed the metrics (exporter thread)."""
        metrics.record_statement(self.facts())

    def _parts(self) -> list[Part]:
        tracer = self._tracer
        config = tracer.config
        decision = self._decision
        parts = [tracer.session_part]
        known = None
        if decision is not None:
            parts.append(route_from_decision(tracer.routes, decision, tracer.address))
            if decision.required is not None:
                parts.append(tracer.gtid_part(GTID_REQUIRED, decision.required))
            known = decision.known
        else:
            where = self._route or _DEFAULT_ROUTE
            parts.append(route_without_decision(tracer.routes, where, self._sql, tracer.address))
        if config.capture_query_text and self._sql:
            parts.append(query_part(self._sql, config.max_query_chars))
        wait = self._wait
        if wait is None:
            parts.append(NO_WAIT)
        else:
            waited, outcome, count, total = wait
            parts.append(wait_part(waited, outcome, count, total, config.max_gtid_chars))
            if known is None:
                known = waited.known
        if known is not None:
            parts.append(tracer.gtid_part(REPLICA_KNOWN_EXECUTED, known))
        if self._produced is not None:
            parts.append(gtid_part(GTID_PRODUCED, self._produced, config.max_gtid_chars))
        if self._error is not None:
            parts.append(error_part(self._error))
        return parts

    def _status(self) -> tuple[StatusCode, str]:
        error = self._error
        if error is None:
            return StatusCode.UNSET, ""
        return StatusCode.ERROR, str(error)[:_MAX_STATUS_MESSAGE]

    def export(self) -> SpanRecord | None:
        """The finished span as a record (``None`` when sampled out)."""
        if not self._sampled:
            return None
        attributes: dict[str, AttributeValue] = {}
        for values, _ in self._parts():
            attributes.update(values)
        status, message = self._status()
        return SpanRecord(
            name=STATEMENT_SPAN,
            kind=SpanKind.CLIENT,
            trace_id=self._trace_id,
            span_id=self._span_id,
            start_ns=self._start,
            end_ns=self._end,
            attributes=attributes,
            parent_span_id=self._parent_span_id,
            status=status,
            status_message=message,
        )

    def span_json(self) -> str | None:
        """The finished span as an OTLP JSON ``Span`` (``None`` when sampled out)."""
        if not self._sampled:
            return None
        text = ",".join([text for _, text in self._parts() if text])
        if self._error is None:
            ids = (self._trace_id, self._span_id, self._parent_span_id)
            return otlpjson.span_fast(_STATEMENT_HEAD, ids, self._start, self._end, text)
        status, message = self._status()
        return otlpjson.span(
            name=STATEMENT_SPAN,
            kind=_CLIENT,
            trace_id=self._trace_id,
            span_id=self._span_id,
            parent_span_id=self._parent_span_id,
            start_ns=self._start,
            end_ns=self._end,
            attributes_text=text,
            status_code=int(status),
            status_message=message,
        )
