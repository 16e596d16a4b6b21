"""OTLP JSON text, assembled from pre-escaped pieces.

The OTLP JSON encoding (protobuf's JSON mapping with two exceptions): trace and span ids are
lower-case hex, not base64; enum values (span kind, status code) are integers; 64-bit integers
(times, ``intValue``) are decimal strings; field names are lowerCamelCase.  Attributes are
``{"key": …, "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue": …}}``.

Text is built with f-strings and the C string escaper instead of dicts and ``json.dumps``: the
exporter threads share the GIL with the statement threads, and this is several times cheaper.
Pieces are plain ``str`` so callers can cache and join them (see
:mod:`consistent.telemetry.spans`).

https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from consistent.trace import AttributeValue

__all__ = [
    "attribute",
    "attributes",
    "escape",
    "request",
    "request_parts",
    "span",
    "span_head",
]

#: JSON string literal of a ``str`` (quotes included), non-ASCII kept as is.
escape: Final[Callable[[str], str]] = json.encoder.encode_basestring

_NON_FINITE: Final = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _string(key: str, value: str) -> str:
    return f'{{"key":{key},"value":{{"stringValue":{escape(value)}}}}}'


def _int(key: str, value: int) -> str:
    return f'{{"key":{key},"value":{{"intValue":"{value}"}}}}'


def _double(key: str, value: float) -> str:
    if math.isfinite(value):
        return f'{{"key":{key},"value":{{"doubleValue":{value!r}}}}}'
    text = _NON_FINITE.get(value, "NaN")
    return f'{{"key":{key},"value":{{"doubleValue":"{text}"}}}}'


def _bool(key: str, value: bool) -> str:
    return f'{{"key":{key},"value":{{"boolValue":{"true" if value else "false"}}}}}'


_BY_TYPE: Final[Mapping[type, Callable[[str, Any], str]]] = {
    str: _string,
    int: _int,
    float: _double,
    bool: _bool,
}


def attribute(key: str, value: AttributeValue) -> str:
    """One ``KeyValue`` object."""
    encode = _BY_TYPE.get(type(value))
    if encode is not None:
        return encode(escape(key), value)
    # a subclass (an enum member): by its base type
    if isinstance(value, bool):
        return _bool(escape(key), value)
    if isinstance(value, int):
        return _int(escape(key), int(value))
    if isinstance(value, float):
        return _double(escape(key), float(value))
    return _string(escape(key), str(value))


def attributes(items: Iterable[tuple[str, AttributeValue]]) -> str:
    """``KeyValue`` objects separated by commas (no brackets), ready to join with others."""
    return ",".join([attribute(key, value) for key, value in items])


def span(
    *,
    name: str,
    kind: int,
    trace_id: int,
    span_id: int,
    parent_span_id: int,
    start_ns: int,
    end_ns: int,
    attributes_text: str,
    status_code: int,
    status_message: str,
) -> str:
    """One ``Span`` object; ``attributes_text`` is :func:`attributes`' output."""
    parent = f'"parentSpanId":"{parent_span_id:016x}",' if parent_span_id else ""
    if not status_code:
        status = "{}"
    elif status_message:
        status = f'{{"message":{escape(status_message)},"code":{status_code}}}'
    else:
        status = f'{{"code":{status_code}}}'
    return (
        f'{{"traceId":"{trace_id:032x}","spanId":"{span_id:016x}",{parent}'
        f'"name":{escape(name)},"kind":{kind},'
        f'"startTimeUnixNano":"{start_ns}","endTimeUnixNano":"{end_ns}",'
        f'"attributes":[{attributes_text}],"status":{status}}}'
    )


def span_head(name: str, kind: int) -> str:
    """The constant middle of every span with this name and kind (``"name":…,"kind":…,``),
    for writers that assemble spans from pre-encoded pieces."""
    return f'"name":{escape(name)},"kind":{kind},'


def request_parts(resource_attributes: str, scope_name: str, scope_version: str) -> tuple[str, str]:
    """What goes before and after the comma-separated ``Span`` objects of one
    ``ExportTraceServiceRequest``."""
    scope = f'{{"name":{escape(scope_name)},"version":{escape(scope_version)}}}'
    head = (
        f'{{"resourceSpans":[{{"resource":{{"attributes":[{resource_attributes}]}},'
        f'"scopeSpans":[{{"scope":{scope},"spans":['
    )
    return head, "]}]}]}"


def request(
    resource_attributes: str, scope_name: str, scope_version: str, spans: Sequence[str]
) -> str:
    """One ``ExportTraceServiceRequest`` on a single line (no newline)."""
    head, tail = request_parts(resource_attributes, scope_name, scope_version)
    return f"{head}{','.join(spans)}{tail}"
