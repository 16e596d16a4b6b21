"""Statement spans in the application's own OpenTelemetry ``TracerProvider``: with
``tracer_provider=`` they join the application's trace as children of its current span, named
as the database conventions say; without it the provider receives none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import consistent.dbapi as db
from consistent import trace
from consistent.dbapi.config import parse_url
from consistent.errors import InterfaceError, ProgrammingError
from consistent.telemetry import Telemetry, default_telemetry
from consistent.telemetry.appspans import provider_telemetry

if TYPE_CHECKING:
    from .conftest import Backend


def app_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def statements(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get(trace.RECORD_KIND) == "statement"
    ]


def test_statement_spans_join_the_applications_trace_when_opted_in(
    backend: Backend, table: str
) -> None:
    provider, exporter = app_provider()
    conn = backend.connect(tracer_provider=provider)
    app = provider.get_tracer("the-application")
    with app.start_as_current_span("handle request") as request:
        cur = conn.cursor()
        cur.execute(f"INSERT INTO {table} VALUES (1, 10)")
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
        assert cur.fetchall() == ((10,),)
        cur.execute("SELECT 1")
    outside = conn.cursor()
    outside.execute(f"SELECT v FROM {table} WHERE k = 1")
    conn.close()
    assert provider_telemetry(provider).flush(10)
    spans = statements(exporter)
    names = [f"INSERT {table}", f"SELECT {table}", "SELECT", f"SELECT {table}"]
    assert [s.name for s in spans] == names
    parent = request.get_span_context()
    for span in spans[:3]:
        assert span.parent is not None
        assert span.parent.span_id == parent.span_id
        assert span.context is not None
        assert span.context.trace_id == parent.trace_id
    # Outside the application's span: a trace of its own.
    assert spans[3].parent is None
    assert spans[3].context is not None
    assert spans[3].context.trace_id != parent.trace_id
    system = "mariadb" if backend.name == "mariadb" else "mysql"
    for span in spans:
        attributes = dict(span.attributes or {})
        assert span.kind is SpanKind.CLIENT
        assert trace.check_attributes(span.name, attributes) == ()
        assert attributes[trace.DB_NAMESPACE] == backend.database
        assert attributes[trace.DB_SYSTEM_NAME] == system
        assert attributes[trace.DB_SYSTEM] == system
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time
    assert dict(spans[0].attributes or {})[trace.DB_COLLECTION_NAME] == table
    assert trace.DB_COLLECTION_NAME not in dict(spans[2].attributes or {})
    # The application's span lasted as long as its statements.
    (app_span,) = [s for s in exporter.get_finished_spans() if s.name == "handle request"]
    assert app_span.start_time is not None
    assert app_span.end_time is not None
    for span in spans[:3]:
        assert span.start_time is not None
        assert span.end_time is not None
        assert app_span.start_time <= span.start_time <= span.end_time <= app_span.end_time


def test_without_opting_in_the_applications_provider_receives_nothing(
    backend: Backend, table: str
) -> None:
    provider, exporter = app_provider()
    conn = backend.connect()
    with provider.get_tracer("the-application").start_as_current_span("handle request"):
        cur = conn.cursor()
        cur.execute(f"SELECT v FROM {table} WHERE k = 1")
    conn.close()
    default_telemetry().flush(10)
    assert provider_telemetry(provider).flush(10)
    assert statements(exporter) == []
    assert [s.name for s in exporter.get_finished_spans()] == ["handle request"]


def test_the_setting_is_checked() -> None:
    assert parse_url("mysql://h/db?tracer_provider=global")["tracer_provider"] == "global"
    assert isinstance(provider_telemetry("global"), Telemetry)
    assert provider_telemetry("global") is provider_telemetry("GLOBAL")
    with pytest.raises(InterfaceError, match="tracer_provider must be 'global'"):
        provider_telemetry("mine")
    with pytest.raises(InterfaceError, match="not int"):
        provider_telemetry(3)  # type: ignore[arg-type]
    with pytest.raises(ProgrammingError, match="not both"):
        db.connect("mysql://h/db", tracer_provider="global", telemetry=provider_telemetry("global"))
