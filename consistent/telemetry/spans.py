"""The facade the DB-API wrapper and the proxy call: one span per routed statement.

Per session, a :class:`StatementTracer` (from :meth:`Telemetry.session
<consistent.telemetry.pipeline.Telemetry.session>`); per statement, a context manager::

    with tracer.statement(sql) as span:
        decision = policy.route(stmt, sql)
        ...
        span.decision(decision)                   # every decision the policy gives
        span.wait(decision, outcome, seconds)     # after each wait on a replica
        span.produced(gtids)                      # the primary's GTIDs (text or parsed)
        ... run the statement ...

The span is the telemetry's :class:`~consistent.observe.Observer` of the statement: a front end
reports each event once, to the span or to a :class:`~consistent.observe.Fanout` that also
holds its own subscribers.

The statement's thread does as little as possible: it reads the clock, keeps references to
what it is given (the immutable decisions, the tracker's raw GTID text), reads the clock again
and appends the span to the pipeline's bounded queue (dropped and counted when full).  It draws
no ids, parses no GTIDs and builds no attributes: the exporter threads do, in batches
(:mod:`consistent.telemetry.spanattrs`, :mod:`consistent.telemetry.produced`), with one random
draw per batch for the ids.  The only OpenTelemetry call on the statement's thread is the read
of the current context, whose result is kept as long as the context stays the same object, so
that a statement inside an application's span joins its trace.  With tracing off,
``statement()`` returns one shared no-op span whose methods do nothing: no allocation, no
clock read.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from consistent.hostport import host_port_or_default
from consistent.observe import Observer
from consistent.telemetry import otlpjson
from consistent.telemetry.metrics import StatementFacts
from consistent.telemetry.produced import (
    Produced,
    add_produced,
    produced_attributes,
    produced_json,
)
from consistent.telemetry.records import IDS_WIDTH, TRACE_HEX, SpanRecord, StatusCode, ids_at
from consistent.telemetry.spanattrs import (
    NO_WAIT,
    PRIMARY_TARGET,
    Part,
    RouteParts,
    collection_of,
    error_part,
    gtid_part,
    learned_part,
    operation_of,
    part,
    query_part,
    role,
    route_from_decision,
    route_without_decision,
    session_part,
    target_part,
    wait_outcome_name,
    wait_part,
)
from consistent.trace import (
    GTID_LOST,
    GTID_REQUIRED,
    GTID_REQUIRED_ACKNOWLEDGED,
    GTID_REQUIRED_OWN,
    GTID_REQUIRED_SEEN,
    POOL_PIN_REASON,
    REPLICA_KNOWN_EXECUTED,
    AttributeValue,
    SpanKind,
    statement_span_name,
)

if TYPE_CHECKING:
    from consistent.gtid import GtidState
    from consistent.policy import Decision, Learned
    from consistent.telemetry.config import TelemetryConfig
    from consistent.telemetry.metrics import RoutingMetrics

__all__ = [
    "NOOP_SPAN",
    "NOOP_TRACER",
    "PRIMARY_TARGET",
    "Outbox",
    "RecordingTracer",
    "StatementSpan",
    "StatementTracer",
    "wait_outcome_name",
]

_NO_REPLICAS: Final = "no_replicas"
_MAX_STATUS_MESSAGE: Final = 256
_CLIENT: Final = int(SpanKind.CLIENT)
_DEFAULT_ROUTE: Final = (PRIMARY_TARGET, _NO_REPLICAS, None)
# Statement texts longer than this are not kept as cache keys (a bulk INSERT can be megabytes).
_MAX_CACHED_SQL: Final = 4096
_MAX_CACHED_PLAIN: Final = 1024
# The constant pieces of a statement span's OTLP JSON around its ids, times and attributes.
_JSON_HEAD: Final = '{"traceId":"'
_JSON_SPAN_ID: Final = '","spanId":"'
_JSON_START: Final = '"startTimeUnixNano":"'
_JSON_END: Final = '","endTimeUnixNano":"'
_JSON_ATTRIBUTES: Final = '","attributes":['
_JSON_TAIL: Final = '],"status":{}}'

_time_ns: Final = time.time_ns
_current_context: Final = otel_context.get_current


class StatementSpan(Observer):
    """A statement's span: the telemetry's :class:`~consistent.observe.Observer` of one
    statement, whose events become the span's attributes and, when exported, the routing
    metrics.  This base class records nothing: it is the disabled path, and
    :data:`NOOP_SPAN` is its one instance."""

    __slots__ = ()

    #: True when this span will be exported (a class attribute: the OK-packet observer reads
    #: it on every write).
    recording: ClassVar[bool] = False

    def __enter__(self) -> StatementSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def route(self, target: str, reason: str, detail: str | None = None) -> None:
        """Where the statement went when no policy decision was taken (a connection without
        replicas: ``route("primary", "no_replicas")`` is also the default)."""


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

    def set_namespace(self, schema: str | None) -> None:
        """The session now uses ``schema`` (``db.namespace`` of its next statements)."""

    def set_address(self, target: str, address: tuple[str, int]) -> None:
        """``target`` (``"primary"``) is now the server at ``address``: the
        ``server.address`` and ``server.port`` of the session's statements from now on."""


#: The shared tracer of the disabled path.
NOOP_TRACER: Final = StatementTracer()


@dataclass(frozen=True, slots=True)
class Outbox:
    """The pipeline's side of the statement thread's one contact with it: the bounded queue
    finished spans are appended to, its bound, the batch size at which the batch thread is
    woken, and the drop counter."""

    queue: deque[Any]
    limit: int
    batch: int
    wake: Callable[[], None]
    drop: Callable[[int], None]


class Where:
    """Where a session's statements go, as its spans name it: the route parts (shared with
    the sessions that map their targets alike), ``server.address`` per target, and the JSON of
    plain statements.  Replaced, never changed, when the primary moves, so that a span keeps
    the view current when it started."""

    __slots__ = ("addresses", "plain", "routes")

    def __init__(self, routes: RouteParts, addresses: Mapping[str, tuple[str, int]]) -> None:
        self.routes = routes
        self.addresses = dict(addresses)
        self.plain: dict[str | tuple[str, tuple[str, str, str | None]], str] = {}

    def address(self, target: str) -> tuple[str, int]:
        """``(server.address, server.port)`` of a target."""
        found = self.addresses.get(target)
        if found is None:
            found = host_port_or_default(target)
            self.addresses[target] = found
        return found


class RecordingTracer(StatementTracer):
    """A session's tracer that records its statements into a telemetry pipeline."""

    __slots__ = (
        "_always",
        "_gtid_parts",
        "_keep_unsampled",
        "_learned_part",
        "_names",
        "_parent_based",
        "_ratio",
        "_seen",
        "_session_id",
        "batch",
        "config",
        "drop",
        "limit",
        "max_gtid_chars",
        "namespace",
        "pins_seen",
        "queue",
        "session_part",
        "system_name",
        "targets",
        "wake",
        "where",
    )

    def __init__(
        self,
        *,
        config: TelemetryConfig,
        outbox: Outbox,
        session_id: str,
        system: str,
        addresses: Mapping[str, tuple[str, int]],
        keep_unsampled: bool,
        routes: RouteParts | None = None,
    ) -> None:
        self.config = config
        # The outbox's fields, one attribute read away from a closing span.
        self.queue = outbox.queue
        self.limit = outbox.limit
        self.batch = outbox.batch
        self.wake = outbox.wake
        self.drop = outbox.drop
        self._session_id = session_id
        #: ``db.system.name`` (also the flavour produced GTIDs are parsed in).
        self.system_name = system
        self.max_gtid_chars = config.max_gtid_chars
        # Statements whose span is sampled out still feed the metrics when these are on.
        self._keep_unsampled = keep_unsampled
        self._ratio = config.sample_ratio
        self._always = self._ratio >= 1.0
        self._parent_based = config.parent_based
        # The last OpenTelemetry context seen, its span context (None: no valid parent) and
        # the sampling verdict it implies (None: by ratio); contexts are immutable, so the
        # same object means the same answer.
        self._seen: tuple[object, otel_trace.SpanContext | None, bool | None] = (
            object(),
            None,
            None,
        )
        #: Route parts shared with the pipeline's other sessions.
        #: Route parts and addresses; the spans keep the one current when they start.
        self.where = Where(routes if routes is not None else RouteParts(), addresses)
        #: The attributes every statement of this session carries.
        self.session_part = session_part(system, session_id)
        # Exporter threads only: the last GTID part built per attribute name, by identity of
        # the (immutable) state.
        self._gtid_parts: dict[str, tuple[GtidState, Part]] = {}
        # Exporter threads only: the last part built of when a known state was learnt, by
        # identity of the (immutable) record.
        self._learned_part: tuple[Learned, Part] | None = None
        #: Exporter threads only: the attributes text of statements routed without a
        #: decision and that did not wait, by text (and route when one was given).
        #: Pin reasons this session has been seen with (exporter thread only).
        self.pins_seen: set[str] = set()
        #: The schema the session uses (``db.namespace``), read by each new span.
        self.namespace: str | None = None
        # Exporter threads only: statement text -> (span name, table); span name -> the
        # constant OTLP JSON around it; (namespace, table) -> their part.
        self._names: dict[str, tuple[str, str | None, str]] = {}
        self.targets: dict[tuple[str | None, str | None], tuple[Part, str]] = {}

    @property
    def enabled(self) -> bool:
        return True

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def system(self) -> str:
        """``db.system.name`` of this session's servers."""
        return self.system_name

    def set_namespace(self, schema: str | None) -> None:
        self.namespace = schema or None

    def statement(self, sql: str = "") -> StatementSpan:
        context = _current_context()
        seen = self._seen
        if context is not seen[0]:
            seen = self._seen = self._judge(context)
        _, parent, sampled = seen
        if sampled is None:
            sampled = self._always or random.random() < self._ratio
        if sampled:
            return _RecordingSpan(self, sql, parent)
        if self._keep_unsampled:
            return _UnsampledSpan(self, sql, parent)
        return NOOP_SPAN

    def _judge(
        self, context: otel_context.Context
    ) -> tuple[object, otel_trace.SpanContext | None, bool | None]:
        parent = otel_trace.get_current_span(context).get_span_context()
        if not parent.is_valid:
            return context, None, None
        sampled = parent.trace_flags.sampled if self._parent_based else None
        return context, parent, sampled

    # ------------------------------------------------------------------ exporter threads

    def name(self, operation: str, sql: str) -> tuple[str, str | None, str]:
        """The span name, the table (``db.collection.name``) of a statement and the OTLP JSON
        of the name and kind; cached by text and operation (the operation is the text's first
        keyword unless the classifier saw past a comment)."""
        key = operation + "\0" + sql if len(sql) <= _MAX_CACHED_SQL else ""
        found = self._names.get(key) if key else None
        if found is not None:
            return found
        collection = collection_of(sql)
        name = statement_span_name(operation, collection, self.system_name)
        named = (name, collection, '",' + otlpjson.span_head(name, _CLIENT) + _JSON_START)
        if key:
            if len(self._names) >= _MAX_CACHED_PLAIN:
                self._names.clear()
            self._names[key] = named
        return named

    def target(self, namespace: str | None, collection: str | None) -> tuple[Part, str]:
        """The part of ``db.namespace`` and ``db.collection.name``, and its JSON text with a
        leading comma (``""`` when both are unknown)."""
        key = (namespace, collection)
        found = self.targets.get(key)
        if found is None:
            if len(self.targets) >= _MAX_CACHED_PLAIN:
                self.targets.clear()
            built = target_part(namespace, collection)
            found = self.targets[key] = (built, "," + built[1] if built[1] else "")
        return found

    def address(self, target: str) -> tuple[str, int]:
        """``(server.address, server.port)`` of a target, as the session maps it now."""
        return self.where.address(target)

    def set_address(self, target: str, address: tuple[str, int]) -> None:
        if self.where.addresses.get(target) == address:
            return
        # A new view, not a changed one: spans that started before keep the old address.
        self.where = Where(RouteParts(), {**self.where.addresses, target: address})

    def gtid_part(self, name: str, state: GtidState) -> Part:
        """The part of GTID attribute ``name``; rebuilt only when the state changes."""
        cached = self._gtid_parts.get(name)
        if cached is not None and cached[0] is state:
            return cached[1]
        built = gtid_part(name, state, self.config.max_gtid_chars)
        self._gtid_parts[name] = (state, built)
        return built

    def learned_part(self, learned: Learned) -> Part:
        """The part of when and how a known state was learnt; rebuilt only when it changes."""
        cached = self._learned_part
        if cached is not None and cached[0] is learned:
            return cached[1]
        built = learned_part(learned)
        self._learned_part = (learned, built)
        return built

    def plain_parts(
        self, sql: str, route: tuple[str, str, str | None] | None, view: Where
    ) -> list[Part]:
        """The parts of a statement routed without a decision and that did not wait: the
        session's, the route's, the query text's when captured, the (absent) wait's."""
        where = route or _DEFAULT_ROUTE
        parts = [self.session_part, route_without_decision(view.routes, where, sql, view.address)]
        config = self.config
        if config.capture_query_text and sql:
            parts.append(query_part(sql, config.max_query_chars))
        parts.append(NO_WAIT)
        return parts

    def plain_text(self, sql: str, route: tuple[str, str, str | None] | None, view: Where) -> str:
        """:meth:`plain_parts` as OTLP JSON, cached by text and route in ``view``."""
        key: str | tuple[str, tuple[str, str, str | None]] = sql if route is None else (sql, route)
        plain = view.plain
        found = plain.get(key)
        if found is not None:
            return found
        text = ",".join([text for _, text in self.plain_parts(sql, route, view) if text])
        if len(sql) <= _MAX_CACHED_SQL:
            if len(plain) >= _MAX_CACHED_PLAIN:
                plain.clear()
            plain[key] = text
        return text


class _RecordingSpan(StatementSpan):
    """A statement's span being recorded (statement thread), then read by the exporter
    threads, which turn its raw facts into ids, attributes and JSON."""

    __slots__ = (
        "_decision",
        "_end",
        "_error",
        "_lost",
        "_namespace",
        "_parent",
        "_pin",
        "_produced",
        "_route",
        "_sql",
        "_start",
        "_tracer",
        "_view",
        "_wait",
    )

    recording: ClassVar[bool] = True

    def __init__(
        self, tracer: RecordingTracer, sql: str, parent: otel_trace.SpanContext | None
    ) -> None:
        self._tracer = tracer
        self._sql = sql
        self._parent = parent
        self._decision: Decision | None = None
        # (last WAIT decision, its outcome, number of waits, total nanoseconds)
        self._wait: tuple[Decision, object, int, int] | None = None
        self._produced: Produced | None = None
        self._route: tuple[str, str, str | None] | None = None
        self._error: BaseException | None = None
        self._namespace = tracer.namespace
        self._view = tracer.where
        self._pin: str | None = None
        self._lost: str | None = None
        self._end = 0
        self._start = _time_ns()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end = _time_ns()
        if exc is not None:
            self._error = exc
        tracer = self._tracer
        queue = tracer.queue
        if len(queue) < tracer.limit:
            queue.append(self)
            if len(queue) == tracer.batch:
                tracer.wake()
        else:
            tracer.drop(1)

    def decision(self, decision: Decision) -> None:
        self._decision = decision

    def wait(
        self, decision: Decision, outcome: object, duration: float, *, pipelined: bool = False
    ) -> None:
        previous = self._wait
        count, total = (previous[2], previous[3]) if previous is not None else (0, 0)
        self._wait = (decision, outcome, count + 1, total + int(duration * 1e9))

    def produced(self, gtids: GtidState | str) -> None:
        self._produced = add_produced(self._produced, gtids)

    def route(self, target: str, reason: str, detail: str | None = None) -> None:
        self._route = (target, reason, detail)

    def fail(self, exc: BaseException) -> None:
        self._error = exc

    def pin(self, reasons: str) -> None:
        self._pin = reasons

    def lost(self, gtids: str) -> None:
        self._lost = gtids

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

    def _naming(self) -> tuple[str, Part, str, str]:
        """The span's name, the part (and its JSON, with a leading comma) of its namespace
        and table, and the JSON of its name and kind."""
        tracer = self._tracer
        decision = self._decision
        sql = self._sql
        operation = decision.statement.first_keyword if decision is not None else operation_of(sql)
        name, collection, head = tracer.name(operation, sql)
        targets, text = tracer.target(self._namespace, collection)
        return name, targets, text, head

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
            lost=self._lost is not None,
        )

    def observe(self, metrics: RoutingMetrics) -> None:
        """Feed the metrics (exporter thread)."""
        metrics.record_statement(self.facts())

    def _parts(self) -> list[Part]:
        """Every part but the produced GTIDs and the failure, in the order they are written."""
        tracer = self._tracer
        decision = self._decision
        wait = self._wait
        if decision is None and wait is None:
            plain = tracer.plain_parts(self._sql, self._route, self._view)
            if self._lost is None:
                return plain
            return [*plain, part({GTID_LOST: self._lost})]
        config = tracer.config
        parts = [tracer.session_part]
        known = None
        learned = None
        if decision is not None:
            view = self._view
            parts.append(route_from_decision(view.routes, decision, view.address))
            if decision.required is not None:
                parts.append(tracer.gtid_part(GTID_REQUIRED, decision.required))
            sources = decision.sources
            if sources is not None:
                # read_all_writes: which part of the required set came from where.
                if sources.own is not None:
                    parts.append(tracer.gtid_part(GTID_REQUIRED_OWN, sources.own))
                if sources.seen is not None:
                    parts.append(tracer.gtid_part(GTID_REQUIRED_SEEN, sources.seen))
                if sources.acknowledged is not None:
                    parts.append(tracer.gtid_part(GTID_REQUIRED_ACKNOWLEDGED, sources.acknowledged))
            known = decision.known
            learned = decision.learned
        else:
            where = self._route or _DEFAULT_ROUTE
            view = self._view
            parts.append(route_without_decision(view.routes, where, self._sql, view.address))
        if config.capture_query_text and self._sql:
            parts.append(query_part(self._sql, config.max_query_chars))
        if wait is None:
            parts.append(NO_WAIT)
        else:
            waited, outcome, count, total = wait
            parts.append(wait_part(waited, outcome, count, total, config.max_gtid_chars))
            if known is None:
                known, learned = waited.known, waited.learned
        if known is not None:
            parts.append(tracer.gtid_part(REPLICA_KNOWN_EXECUTED, known))
            if learned is not None:
                parts.append(tracer.learned_part(learned))
        if self._pin is not None:
            parts.append(part({POOL_PIN_REASON: self._pin}))
        if self._lost is not None:
            parts.append(part({GTID_LOST: self._lost}))
        return parts

    def _status(self) -> tuple[StatusCode, str]:
        error = self._error
        if error is None:
            return StatusCode.UNSET, ""
        return StatusCode.ERROR, str(error)[:_MAX_STATUS_MESSAGE]

    def _ids(self, ids: str, at: int) -> tuple[int, int, int]:
        """Trace, span and parent span id: the parent's trace, else drawn from ``ids``."""
        trace_hex, span_hex = ids_at(ids, at)
        parent = self._parent
        if parent is None:
            return int(trace_hex, 16), int(span_hex, 16), 0
        return parent.trace_id, int(span_hex, 16), parent.span_id

    def export(self, ids: str, at: int) -> SpanRecord | None:
        """The finished span as a record, its ids taken from ``ids`` at ``at`` (an
        :func:`~consistent.telemetry.records.id_block`)."""
        tracer = self._tracer
        name, targets, _, _ = self._naming()
        attributes: dict[str, AttributeValue] = {}
        for values, _ in self._parts():
            attributes.update(values)
        attributes.update(targets[0])
        if self._produced is not None:
            max_chars = tracer.max_gtid_chars
            attributes.update(produced_attributes(self._produced, tracer.system_name, max_chars))
        if self._error is not None:
            attributes.update(error_part(self._error)[0])
        status, message = self._status()
        trace_id, span_id, parent_span_id = self._ids(ids, at)
        return SpanRecord(
            name=name,
            kind=SpanKind.CLIENT,
            trace_id=trace_id,
            span_id=span_id,
            start_ns=self._start,
            end_ns=self._end,
            attributes=attributes,
            parent_span_id=parent_span_id,
            status=status,
            status_message=message,
        )

    def json_pieces(self, ids: str, at: int) -> tuple[str, ...]:
        """The finished span as an OTLP JSON ``Span`` followed by a comma, in pieces, its
        ids taken from ``ids`` at ``at`` (see
        :meth:`~consistent.telemetry.exporter.Finished.json_pieces`)."""
        tracer = self._tracer
        if self._decision is None and self._wait is None and self._lost is None:
            route = self._route
            view = self._view
            found = view.plain.get(self._sql) if route is None else None
            text = found if found is not None else tracer.plain_text(self._sql, route, view)
        else:
            text = ",".join([text for _, text in self._parts() if text])
        _, _, targets, head = self._naming()
        produced = self._produced
        extra = (
            ""
            if produced is None
            else produced_json(produced, tracer.system_name, tracer.max_gtid_chars)
        )
        if self._error is None and self._parent is None:
            middle = at + TRACE_HEX
            return (
                _JSON_HEAD,
                ids[at:middle],
                _JSON_SPAN_ID,
                ids[middle : at + IDS_WIDTH],
                head,
                str(self._start),
                _JSON_END,
                str(self._end),
                _JSON_ATTRIBUTES,
                text,
                targets,
                extra,
                _JSON_TAIL,
                ",",
            )
        return self.span_json(ids, at), ","

    def span_json(self, ids: str, at: int) -> str:
        """The finished span as an OTLP JSON ``Span``, its ids taken from ``ids`` at ``at``."""
        tracer = self._tracer
        name, _, targets, _ = self._naming()
        text = ",".join([text for _, text in self._parts() if text]) + targets
        if self._produced is not None:
            max_chars = tracer.max_gtid_chars
            text += produced_json(self._produced, tracer.system_name, max_chars)
        if self._error is not None:
            text = f"{text},{error_part(self._error)[1]}"
        status, message = self._status()
        trace_id, span_id, parent_span_id = self._ids(ids, at)
        return otlpjson.span(
            name=name,
            kind=_CLIENT,
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            start_ns=self._start,
            end_ns=self._end,
            attributes_text=text,
            status_code=int(status),
            status_message=message,
        )


class _UnsampledSpan(_RecordingSpan):
    """A statement sampled out of the traces that still feeds the metrics."""

    __slots__ = ()

    recording: ClassVar[bool] = False

    def export(self, ids: str, at: int) -> SpanRecord | None:
        return None

    def json_pieces(self, ids: str, at: int) -> tuple[str, ...]:
        return ()
