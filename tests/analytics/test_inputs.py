"""Inputs that are not traces are refused with a reason, before Spark reads them when the files
tell (their first bytes), and after ingest when only the records tell (no statement spans)."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analytics import storage
from analytics.jobs import ingest
from analytics.jobs.layout import Layout
from consistent.errors import InterfaceError

REQUEST = b'{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[]}]}\n'


def test_trace_lines_are_told_from_other_files(tmp_path: Path) -> None:
    cases = {
        "plain.jsonl": (REQUEST, True),
        "empty.jsonl": (b"", None),
        "blank.jsonl": (b"\n\n", None),
        "notes.txt": (b"hello\n", False),
        "other.json": (b'{"name": "not a trace"}\n', False),
        "csv.jsonl": (b"a,b\n1,2\n", False),
    }
    for name, (content, verdict) in cases.items():
        (tmp_path / name).write_bytes(content)
        assert storage.looks_like_traces(str(tmp_path / name)) is verdict, name
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(REQUEST))
    (tmp_path / "t.jsonl.bz2").write_bytes(bz2.compress(REQUEST))
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip")
    assert storage.looks_like_traces(str(tmp_path / "t.jsonl.gz")) is True
    assert storage.looks_like_traces(str(tmp_path / "t.jsonl.bz2")) is True
    assert storage.looks_like_traces(str(tmp_path / "broken.jsonl.gz")) is False
    assert storage.looks_like_traces("hdfs:///traces/a.jsonl") is None


def test_check_traces_names_the_file_that_is_not_one(tmp_path: Path) -> None:
    trace, notes, empty = tmp_path / "a.jsonl", tmp_path / "notes.txt", tmp_path / "e.jsonl"
    trace.write_bytes(REQUEST)
    notes.write_bytes(b"hello\n")
    empty.write_bytes(b"")
    storage.check_traces([str(trace), str(notes)])  # one trace among them is enough
    storage.check_traces(["s3a://bucket/traces/"])  # a URI: Spark will tell
    with pytest.raises(InterfaceError, match=f"{notes} is not a trace file"):
        storage.check_traces([str(empty), str(notes)])
    with pytest.raises(InterfaceError, match="the trace files are empty"):
        storage.check_traces([str(empty)])


def test_traces_without_statements_are_refused_after_ingest(
    spark: SparkSession, tmp_path: Path
) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_bytes(REQUEST)
    with pytest.raises(InterfaceError, match="hold no statement spans"):
        ingest.run(spark, [str(traces)], Layout(tmp_path / "out"))


def test_columns_written_without_a_dictionary(spark: SparkSession, tmp_path: Path) -> None:
    """The columns named are encoded plain even where a dictionary would pay (a few values
    repeated), the others as Parquet chooses; what is read back is what was written."""
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [(f"value{i % 3}", f"value{i % 3}") for i in range(100)]
    written = spark.createDataFrame(rows, "plain string, chosen string").coalesce(1)
    storage.write_parquet(written, tmp_path / "t", without_dictionary=("plain",))
    (path,) = (tmp_path / "t").glob("*.parquet")
    chunk = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {chunk.column(i).path_in_schema: chunk.column(i).encodings for i in range(2)}
    assert not any("DICTIONARY" in e for e in encodings["plain"])
    assert any("DICTIONARY" in e for e in encodings["chosen"])
    assert sorted(spark.read.parquet(str(tmp_path / "t")).collect()) == sorted(written.collect())
