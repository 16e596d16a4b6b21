"""One SparkSession for every analytics test (starting Spark takes seconds; a session per test
would dominate the run).  Small data, two local cores, two shuffle partitions, no UI.

The frames are a few rows, so compiling code for them costs far more than running it: the
session evaluates expressions interpreted (no whole-stage or expression code generation), the
JVM's JIT stops at its quick first tier, and adaptive execution (which runs every shuffle
stage as a job of its own) is off."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import DataType, StructField, StructType  # noqa: E402

from analytics.spark import SparkSettings, build_session  # noqa: E402


@pytest.fixture(scope="session")
def synthetic() -> ModuleType:
    """``bench/_synthetic.py``, the trace generator the benchmarks use, loaded from its file:
    ``bench/`` is not put on the path, where its scripts would shadow the packages."""
    path = Path(__file__).resolve().parents[2] / "bench" / "_synthetic.py"
    spec = importlib.util.spec_from_file_location("bench_synthetic", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        SparkSettings(
            app_name="consistent-analytics-tests",
            master="local[2]",
            driver_memory="1g",
            shuffle_partitions=2,
            ui=False,
            extra={
                "spark.default.parallelism": "2",
                "spark.sql.adaptive.enabled": "false",
                "spark.sql.codegen.wholeStage": "false",
                "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            },
        )
    )
    try:
        yield session
    finally:
        session.stop()


def frame(spark: SparkSession, schema: StructType, rows: list[dict[str, Any]]) -> DataFrame:
    """A DataFrame of ``schema`` from dicts naming only the non-null columns (a name the
    schema lacks is an error, so a typo cannot silently become a null)."""
    names = [f.name for f in schema.fields]
    for row in rows:
        unknown = set(row) - set(names)
        assert not unknown, unknown
    return spark.createDataFrame([tuple(row.get(n) for n in names) for row in rows], schema)


def struct(*fields: tuple[str, DataType]) -> StructType:
    """A nullable StructType from ``(name, type)`` pairs."""
    return StructType([StructField(name, data_type) for name, data_type in fields])
