"""The only module that reads or writes data: OTLP-JSON lines in, Parquet out and back.

Traces are the files :mod:`consistent.telemetry.exporter` writes: one OTLP JSON
``ExportTraceServiceRequest`` per line (the OpenTelemetry Collector file exporter's format),
rotated as ``<stem>.<n><suffix>``, possibly compressed afterwards.  An input may be a file, a
glob or a directory (searched recursively for ``*.jsonl``, ``*.json``, ``*.ndjson``, each
optionally ``.gz`` / ``.bz2``); a URI with a scheme (``hdfs://``, ``s3a://``…) is handed to
Spark as it is, so the same command works on a cluster.  The reader always applies
:data:`analytics.schema.OTLP_REQUEST`: nothing is inferred, and a line that does not parse
yields no spans rather than failing the job.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from analytics.schema import OTLP_REQUEST
from analytics.transforms import explode_requests
from consistent.errors import InterfaceError

__all__ = [
    "TRACE_FILE",
    "input_bytes",
    "read_parquet",
    "read_requests",
    "read_spans",
    "resolve_inputs",
    "write_parquet",
]

logger = logging.getLogger(__name__)

#: Names of trace files inside a directory.
TRACE_FILE: Final = re.compile(r"[^.].*\.(?:jsonl|json|ndjson)(?:\.gz|\.bz2)?\Z")
_URI: Final = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB: Final = re.compile(r"[*?\[]")


def _is_uri(text: str) -> bool:
    return _URI.match(text) is not None and not text.startswith("file://")


def _directory_files(directory: Path) -> Iterable[Path]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if TRACE_FILE.match(name):
                yield Path(root) / name


def resolve_inputs(inputs: Sequence[str]) -> list[str]:
    """Files (absolute paths) and URIs to read, in a stable order, each once.  Raises
    :class:`~consistent.errors.InterfaceError` when an input matches nothing."""
    found: list[str] = []
    for text in inputs:
        if _is_uri(text):
            found.append(text)
            continue
        local = text.removeprefix("file://")
        if _GLOB.search(local):
            matches = [Path(m) for m in sorted(glob.glob(local, recursive=True))]
        else:
            matches = [Path(local)]
        paths: list[Path] = []
        for path in matches:
            if path.is_dir():
                paths.extend(_directory_files(path))
            elif path.is_file():
                paths.append(path)
        if not paths:
            raise InterfaceError(f"no trace files in {text!r}")
        found.extend(str(path.resolve()) for path in paths)
    return list(dict.fromkeys(found))


def input_bytes(paths: Sequence[str]) -> int:
    """Total size of the local files among ``paths`` (URIs count as nothing)."""
    total = 0
    for path in paths:
        if not _is_uri(path):
            try:
                total += Path(path).stat().st_size
            except OSError:
                logger.debug("cannot stat %s", path)
    return total


def read_requests(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The OTLP requests of ``paths`` (resolved already), one row per line, with the
    explicit :data:`~analytics.schema.OTLP_REQUEST` schema."""
    return (
        spark.read.schema(OTLP_REQUEST)
        .option("mode", "PERMISSIVE")
        .option("encoding", "UTF-8")
        .json(list(paths))
    )


def read_spans(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """One row per span (:data:`analytics.schema.SPAN`) of every trace file in ``inputs``
    (files, globs, directories, URIs)."""
    return explode_requests(read_requests(spark, resolve_inputs(inputs)))


def write_parquet(frame: DataFrame, path: str | Path, partition_by: Sequence[str] = ()) -> None:
    """Write ``frame`` as Parquet at ``path``, replacing what was there."""
    writer = frame.write.mode("overwrite").option("compression", "snappy")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(path))


def read_parquet(spark: SparkSession, path: str | Path, schema: StructType) -> DataFrame:
    """A Parquet table written by :func:`write_parquet`, read with its explicit ``schema``."""
    return spark.read.schema(schema).parquet(str(path))
