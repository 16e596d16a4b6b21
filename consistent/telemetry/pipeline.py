"""The telemetry pipeline: a bounded queue, an exporter thread, one writer thread per exporter.

::

    statement thread           batch thread                     writer thread (one per exporter)
    span.__exit__ ─append─▶ [queue ≤ max_queue_size] ─batch─▶ [≤ writer_queue_batches] ─▶ encode,
                 (drop+count when full)    ids, metrics     (drop+count when full)       write

A statement never waits for the disk or the network: it appends to a bounded queue and, once
per full batch, wakes the batch thread.  When the queue is full the span is dropped and counted
(:attr:`Telemetry.dropped`), as the OpenTelemetry SDK's batch processor does.  The batch thread
draws the batch's random ids, feeds the metrics and hands the batch to every exporter's writer
thread, which turns the spans into OTLP JSON (the file) or records (SDK exporters) and sends
them; a slow collector never holds up the file.  With a single exporter (the default file),
the batch thread is its writer: one thread less to wake per batch and per flush.  Exporter
threads work in slices and offer the GIL between them, so a statement whose reply has arrived
does not wait for a whole batch to be encoded.

One :class:`Telemetry` serves a whole process (one trace file per process, DESIGN "Traces and
analytics"): :func:`default_telemetry` builds it from the environment on first use and flushes
it at exit.  Tests and applications that configure telemetry in code create their own and pass
it along.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import os
import queue
import secrets
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource as SdkResource
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from consistent.telemetry.config import TelemetryConfig
from consistent.telemetry.exporter import (
    Batch,
    Finished,
    JsonLinesFileExporter,
    SdkSpanExporter,
    SpanSink,
)
from consistent.telemetry.metrics import RoutingMetrics
from consistent.telemetry.records import Resource, SpanRecord
from consistent.telemetry.spanattrs import RouteParts
from consistent.telemetry.spans import NOOP_TRACER, Outbox, RecordingTracer, StatementTracer

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

__all__ = ["Telemetry", "default_telemetry"]

logger = logging.getLogger(__name__)

# Spans handled per slice before a telemetry thread offers the GIL back to statement threads.
_SLICE: Final = 16


@dataclass(frozen=True, slots=True)
class _Flush:
    done: threading.Event


_STOP: Final = object()


def _export(sink: SpanSink, direct: Callable[[Batch], None] | None, batch: Batch) -> None:
    if direct is not None:
        direct(batch)
        return
    records = batch.records()
    if records:
        sink.export(records)


class _InlineWriter:
    """The only exporter, fed by the batch thread itself: a flush or a batch then wakes one
    thread, not two (on a busy machine every wake-up waits for a CPU).  A slow exporter slows
    the batch thread, and the statements' queue drops and counts what does not fit."""

    def __init__(self, sink: SpanSink, on_drop: Callable[[int], None]) -> None:
        self.sink = sink
        self._direct: Callable[[Batch], None] | None = getattr(sink, "export_finished", None)
        self._on_drop = on_drop

    def restart_after_fork(self) -> None:
        return None

    def submit(self, batch: Batch) -> None:
        try:
            _export(self.sink, self._direct, batch)
        except Exception:
            logger.warning("telemetry exporter %s failed", type(self.sink).__name__, exc_info=True)
            self._on_drop(len(batch.spans))

    def flush(self, timeout: float) -> bool:
        try:
            self.sink.flush()
        except Exception:
            logger.warning("flushing telemetry exporter %s failed", type(self.sink).__name__)
        return True

    def close(self, timeout: float) -> None:
        try:
            self.sink.close()
        except Exception:
            logger.warning("closing telemetry exporter %s failed", type(self.sink).__name__)


class _Writer:
    """One of several exporters and its writer thread, fed through a bounded queue of
    batches: a slow collector never holds up the file."""

    def __init__(self, sink: SpanSink, max_batches: int, on_drop: Callable[[int], None]) -> None:
        self.sink = sink
        # Exporters that write finished spans without building records first (the file).
        self._direct: Callable[[Batch], None] | None = getattr(sink, "export_finished", None)
        self._max_batches = max_batches
        self._on_drop = on_drop
        self._queue: queue.Queue[object] = queue.Queue(max_batches)
        self._thread = self._start()

    def _start(self) -> threading.Thread:
        name = f"consistent-telemetry-{type(self.sink).__name__}"
        thread = threading.Thread(target=self._run, name=name, daemon=True)
        thread.start()
        return thread

    def restart_after_fork(self) -> None:
        self._queue = queue.Queue(self._max_batches)
        self._thread = self._start()

    def submit(self, batch: Batch) -> None:
        try:
            self._queue.put_nowait(batch)
        except queue.Full:
            self._on_drop(len(batch.spans))

    def flush(self, timeout: float) -> bool:
        done = threading.Event()
        try:
            self._queue.put(_Flush(done), timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def close(self, timeout: float) -> None:
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            logger.warning("telemetry writer %s did not drain in time", self._thread.name)
        self._thread.join(timeout)

    def _run(self) -> None:
        sink = self.sink
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            try:
                if isinstance(item, _Flush):
                    sink.flush()
                else:
                    _export(sink, self._direct, item)  # type: ignore[arg-type]
            except Exception:
                logger.warning("telemetry exporter %s failed", type(sink).__name__, exc_info=True)
                if isinstance(item, Batch):
                    self._on_drop(len(item.spans))
            finally:
                if isinstance(item, _Flush):
                    item.done.set()
        try:
            sink.close()
        except Exception:
            logger.warning("closing telemetry exporter %s failed", type(sink).__name__)


def _otlp_class(module: str, name: str) -> Any:
    """An exporter class of the optional ``otlp`` extra, or ``None`` (logged) without it."""
    try:
        found = importlib.import_module(f"opentelemetry.exporter.otlp.proto.http.{module}")
    except ImportError:
        logger.error("OTLP export needs the 'otlp' extra: pip install 'consistent[otlp]'")
        return None
    return getattr(found, name)


def new_session_id() -> str:
    """A random 64-bit session id, as 16 hex digits."""
    return secrets.token_hex(8)


class Telemetry:
    """The process's telemetry: exporters, metrics, the queue and the threads.

    ``exporters`` replaces the ones the configuration names (tests pass a
    :class:`~consistent.telemetry.exporter.MemoryExporter`); ``meter_provider`` replaces the
    one it would build (an application's own, or a test's in-memory reader).
    """

    def __init__(
        self,
        config: TelemetryConfig | None = None,
        *,
        exporters: Sequence[SpanSink] | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.config = config if config is not None else TelemetryConfig()
        enabled = self.config.enabled
        self.resource = Resource.for_process(
            self.config.service_name, self.config.resource_attributes
        )
        self._built_exporters = exporters is None
        sinks: list[SpanSink] = []
        if enabled:
            sinks = list(exporters) if exporters is not None else self._build_exporters()
        self._own_meter_provider: SdkMeterProvider | None = None
        if enabled and meter_provider is None and self.config.metrics_on:
            self._own_meter_provider = self._build_meter_provider()
            meter_provider = self._own_meter_provider
        self.metrics = RoutingMetrics(meter_provider) if enabled and meter_provider else None
        self._sinks = sinks
        # Route parts (which name ``server.address``) shared by the sessions that map their
        # targets to the same addresses; a switchover's new primary gets parts of its own.
        self._routes: dict[frozenset[tuple[str, tuple[str, int]]], RouteParts] = {}
        self._dropped = 0
        self._drop_lock = threading.Lock()
        self._queue: deque[Finished] = deque()
        self._max_queue = self.config.max_queue_size
        self._batch = self.config.max_export_batch_size
        self._wake = threading.Event()
        self._outbox = Outbox(self._queue, self._max_queue, self._batch, self._wake_up, self._drop)
        # Held while draining the queue into the exporters, by the batch thread or a flushing
        # caller: batches reach the exporters one at a time and in order.
        self._export_lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self.active = bool(sinks) or self.metrics is not None
        self._writers: list[_Writer | _InlineWriter] = []
        self._thread: threading.Thread | None = None
        if self.active:
            self._start()
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Telemetry:
        """Telemetry as the ``OTEL_*`` / ``CONSISTENT_TRACE_*`` variables describe it."""
        return cls(TelemetryConfig.from_env(environ))

    # ------------------------------------------------------------------ construction

    def _build_exporters(self) -> list[SpanSink]:
        config = self.config
        if not config.traces_on:
            return []
        sinks: list[SpanSink] = []
        for name in config.traces_exporters:
            if name == "file":
                sinks.append(
                    JsonLinesFileExporter(
                        config.trace_path(),
                        self.resource,
                        rotate_bytes=config.rotate_bytes,
                        keep=config.rotate_keep,
                    )
                )
            elif name == "console":
                sinks.append(SdkSpanExporter(ConsoleSpanExporter(), self.resource))
            elif name == "otlp":
                otlp_spans = _otlp_class("trace_exporter", "OTLPSpanExporter")
                if otlp_spans is None:
                    continue
                exporter = otlp_spans(endpoint=config.otlp_endpoint, timeout=config.export_timeout)
                sinks.append(SdkSpanExporter(exporter, self.resource))
        return sinks

    def _build_meter_provider(self) -> SdkMeterProvider | None:
        readers = []
        interval = self.config.metric_export_interval * 1000
        for name in self.config.metrics_exporters:
            exporter: MetricExporter
            if name == "console":
                exporter = ConsoleMetricExporter()
            else:
                otlp_metrics = _otlp_class("metric_exporter", "OTLPMetricExporter")
                if otlp_metrics is None:
                    continue
                exporter = otlp_metrics()
            readers.append(PeriodicExportingMetricReader(exporter, interval))
        if not readers:
            return None
        return SdkMeterProvider(
            metric_readers=readers, resource=SdkResource(dict(self.resource.attributes))
        )

    def _start(self) -> None:
        if len(self._sinks) == 1:
            self._writers = [_InlineWriter(self._sinks[0], self._drop)]
        else:
            self._writers = [
                _Writer(sink, self.config.writer_queue_batches, self._drop) for sink in self._sinks
            ]
        self._thread = threading.Thread(target=self._run, name="consistent-telemetry", daemon=True)
        self._thread.start()

    def _after_fork_in_child(self) -> None:
        # The same deque, emptied: the sessions' tracers hold it.
        self._queue.clear()
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._drop_lock = threading.Lock()
        if self._closed:
            return
        self.resource = Resource.for_process(
            self.config.service_name, self.config.resource_attributes
        )
        for writer in self._writers:
            sink = writer.sink
            if isinstance(sink, JsonLinesFileExporter):
                path = self.config.trace_path() if self._built_exporters else sink.path
                sink.after_fork(path, self.resource if self._built_exporters else None)
            writer.restart_after_fork()
        self._thread = threading.Thread(target=self._run, name="consistent-telemetry", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public

    @property
    def traces_on(self) -> bool:
        """Spans are exported somewhere."""
        return bool(self._sinks)

    @property
    def exporters(self) -> tuple[SpanSink, ...]:
        """The exporters records are written to."""
        return tuple(self._sinks)

    @property
    def dropped(self) -> int:
        """Spans dropped because a queue was full or an exporter failed."""
        return self._dropped

    def session(
        self,
        *,
        system: str,
        addresses: Mapping[str, tuple[str, int]] | None = None,
        session_id: str | None = None,
    ) -> StatementTracer:
        """A tracer for one logical session on ``system`` (``mysql``/``mariadb``).
        ``addresses`` maps target names (``"primary"``, replica names) to ``(host, port)``;
        a replica named ``host:port`` needs no entry.  The no-op tracer when inactive."""
        if not self.active or self._closed:
            return NOOP_TRACER
        mapped = addresses or {}
        key = frozenset(mapped.items())
        routes = self._routes.get(key)
        if routes is None:
            routes = self._routes[key] = RouteParts()
        return RecordingTracer(
            config=self.config,
            outbox=self._outbox,
            session_id=session_id or new_session_id(),
            system=system,
            addresses=mapped,
            keep_unsampled=self.metrics is not None,
            routes=routes,
        )

    def emit(self, record: SpanRecord) -> None:
        """Queue a ready record (a lag sample) into the same stream as the statements."""
        if self.active and not self._closed:
            self._enqueue(record)

    def flush(self, timeout: float = 30.0) -> bool:
        """Export everything queued so far and flush the exporters; False on timeout.

        The caller's thread does the work, as the OpenTelemetry SDK's batch processor does
        on ``force_flush``: waking the batch thread and being woken by it would add two
        waits for a CPU, which on a busy machine take longer than the export itself."""
        if not self.active or self._thread is None:
            return True
        deadline = time.monotonic() + timeout
        if not self._export_lock.acquire(timeout=timeout):
            return False
        try:
            if self._closed:
                return True
            self._drain()
            flushed = True
            for writer in self._writers:  # every one, even after one timed out
                flushed = writer.flush(max(0.0, deadline - time.monotonic())) and flushed
            if self._own_meter_provider is not None:
                self._own_meter_provider.force_flush()
            return flushed
        finally:
            self._export_lock.release()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Export what is queued, close the exporters and stop the threads.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        # Not while a flush is exporting (it would write to closed exporters).
        locked = self._export_lock.acquire(timeout=timeout)
        try:
            for writer in self._writers:
                writer.close(max(0.1, deadline - time.monotonic()))
        finally:
            if locked:
                self._export_lock.release()
        if self._own_meter_provider is not None:
            self._own_meter_provider.shutdown()
        if self._dropped:
            logger.warning(
                "telemetry dropped %d spans (queues full or exporter errors)", self._dropped
            )

    # ------------------------------------------------------------------ internals

    def _drop(self, count: int) -> None:
        with self._drop_lock:
            self._dropped += count

    def _wake_up(self) -> None:
        """A batch is ready (statement thread, once per batch)."""
        self._wake.set()

    def _enqueue(self, item: Any) -> None:
        """Queue a finished record (the statement spans append themselves, see
        :class:`~consistent.telemetry.spans.Outbox`)."""
        pending = self._queue
        if len(pending) >= self._max_queue:
            self._drop(1)
            return
        pending.append(item)
        if len(pending) == self._batch:
            self._wake.set()

    def _run(self) -> None:
        delay = self.config.schedule_delay
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            stopping = self._stopping
            with self._export_lock:
                self._drain()
            if stopping:
                break

    def _drain(self) -> None:
        pending = self._queue
        metrics = self.metrics
        writers = self._writers
        while pending:
            spans = [pending.popleft() for _ in range(min(len(pending), self._batch))]
            batch = Batch.of(spans)
            if metrics is not None:
                for count, item in enumerate(spans):
                    try:
                        item.observe(metrics)
                    except Exception:
                        logger.warning("telemetry could not record metrics", exc_info=True)
                    if count % _SLICE == _SLICE - 1:
                        time.sleep(0)  # let a statement thread that wants the GIL have it
            for writer in writers:
                writer.submit(batch)


def _after_fork(ref: weakref.ref[Telemetry]) -> None:
    telemetry = ref()
    if telemetry is not None and telemetry.active:
        telemetry._after_fork_in_child()


@functools.cache
def default_telemetry() -> Telemetry:
    """The process's telemetry, built from the environment on first use and flushed at exit.

    This is the one process-wide object of the package, on purpose: the design asks for one
    trace file per process, which one exporter thread and one queue per process give.
    """
    telemetry = Telemetry.from_env()
    if telemetry.active:
        atexit.register(telemetry.shutdown, 5.0)
    return telemetry
