"""``analytics/schema.py`` says, field by field, what ``consistent/trace.py`` says as data: the
same attributes, in the same order, with the Spark type of each contract type.  A contract
change that the schema does not follow fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructType,
)

from analytics import schema
from consistent import trace
from consistent.telemetry.exporter import encode_request
from consistent.telemetry.records import Resource, SpanRecord, StatusCode

SPARK_TYPE: dict[trace.AttrType, DataType] = {
    trace.AttrType.STRING: StringType(),
    trace.AttrType.INT: LongType(),
    trace.AttrType.DOUBLE: DoubleType(),
    trace.AttrType.BOOL: BooleanType(),
}
BY_KIND = {
    trace.STATEMENT_SPAN: schema.STATEMENT,
    trace.LAG_SAMPLE_SPAN: schema.LAG_SAMPLE,
    trace.ROLE_CHANGE_SPAN: schema.ROLE_CHANGE,
}


def test_every_record_kind_has_a_schema() -> None:
    assert {span.name for span in trace.SPANS} == set(BY_KIND)


@pytest.mark.parametrize("span", trace.SPANS, ids=lambda s: s.name)
def test_schema_equals_the_contract(span: trace.SpanSpec) -> None:
    fields = schema.attribute_fields(BY_KIND[span.name])
    written = [(f.metadata[schema.ATTRIBUTE_KEY], f.dataType) for f in fields]
    contract = [(a.name, SPARK_TYPE[a.type]) for a in span.attributes]
    assert written == contract


@pytest.mark.parametrize("table", [schema.STATEMENT, schema.LAG_SAMPLE, schema.ROLE_CHANGE])
def test_columns_follow_the_naming_rule_and_are_unique(table: StructType) -> None:
    names = [f.name for f in table.fields]
    assert len(names) == len(set(names))
    for field in schema.attribute_fields(table):
        attribute = field.metadata[schema.ATTRIBUTE_KEY]
        assert field.name == attribute.removeprefix("consistent.").replace(".", "_")
        assert field.name.isidentifier()
    assert [f.name for f in table.fields[: len(schema.BASE_FIELDS)]] == [
        f.name for f in schema.BASE_FIELDS
    ]


def _keys(value: Any, path: str = "") -> set[str]:
    """Every field path of a JSON value (arrays are transparent)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(path + key)
            found |= _keys(inner, path + key + ".")
    elif isinstance(value, list):
        for inner in value:
            found |= _keys(inner, path)
    return found


def _schema_paths(data_type: DataType, path: str = "") -> set[str]:
    found: set[str] = set()
    if isinstance(data_type, ArrayType):
        return _schema_paths(data_type.elementType, path)
    if isinstance(data_type, StructType):
        for field in data_type.fields:
            found.add(path + field.name)
            found |= _schema_paths(field.dataType, path + field.name + ".")
    return found


def test_the_reader_schema_covers_every_field_the_exporter_writes() -> None:
    record = SpanRecord(
        name=trace.STATEMENT_SPAN,
        kind=trace.SpanKind.CLIENT,
        trace_id=1,
        span_id=2,
        parent_span_id=3,
        start_ns=10,
        end_ns=20,
        attributes={"a": "x", "b": 1, "c": 1.5, "d": True},
        status=StatusCode.ERROR,
        status_message="boom",
    )
    line = encode_request(Resource.for_process("test"), [record])
    assert _keys(json.loads(line)) <= _schema_paths(schema.OTLP_REQUEST)
