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

import bz2
import glob
import gzip
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
    "check_traces",
    "input_bytes",
    "looks_like_traces",
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
#: Bytes read from the start of a file to tell whether it holds trace lines.
_SNIFF_BYTES: Final = 64 * 1024
_REQUEST_KEY: Final = b'"resourceSpans"'


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


def _head(path: Path) -> bytes:
    """The first bytes of ``path``, decompressed."""
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as compressed:
            return compressed.read(_SNIFF_BYTES)
    if path.suffix == ".bz2":
        with bz2.open(path, "rb") as packed:
            return packed.read(_SNIFF_BYTES)
    with path.open("rb") as plain:
        return plain.read(_SNIFF_BYTES)


def looks_like_traces(path: str) -> bool | None:
    """Whether a local file starts as OTLP-JSON trace lines do (a JSON object with
    ``resourceSpans``); ``None`` when it cannot tell (an empty file, a URI)."""
    if _is_uri(path):
        return None
    try:
        head = _head(Path(path)).lstrip()
    except (OSError, EOFError):
        return False
    if not head:
        return None
    return head.startswith(b"{") and _REQUEST_KEY in head


def check_traces(paths: Sequence[str]) -> None:
    """Raise :class:`~consistent.errors.InterfaceError` when none of ``paths`` (resolved
    already) holds trace lines, naming a file that is not a trace, before Spark reads them."""
    verdicts = {path: looks_like_traces(path) for path in paths}
    if any(verdicts.values()) or any(_is_uri(path) for path in paths):
        return
    wrong = [path for path, verdict in verdicts.items() if verdict is False]
    if not wrong:
        raise InterfaceError(f"the trace files are empty: {', '.join(paths[:3])}")
    raise InterfaceError(
        f"{wrong[0]} is not a trace file (OTLP-JSON lines, one ExportTraceServiceRequest "
        "per line, as consistent's exporter writes them)"
    )


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


def write_parquet(
    frame: DataFrame,
    path: str | Path,
    partition_by: Sequence[str] = (),
    *,
    without_dictionary: Sequence[str] = (),
) -> None:
    """Write ``frame`` as Parquet at ``path``, replacing what was there.  The columns named in
    ``without_dictionary`` are encoded plain: for values nearly all distinct (span ids) Parquet
    fills a dictionary page per column chunk only to give it up, and for very many (the
    session ids of a long trace) the dictionary saves a few percent of the file for more work
    than the rest of the column's encoding."""
    writer = frame.write.mode("overwrite").option("compression", "snappy")
    for name in without_dictionary:
        writer = writer.option(f"parquet.enable.dictionary#{name}", "false")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(path))


def read_parquet(spark: SparkSession, path: str | Path, schema: StructType) -> DataFrame:
    """A Parquet table written by :func:`write_parquet`, read with its explicit ``schema``."""
    return spark.read.schema(schema).parquet(str(path))
