"""A part of SQLAlchemy's dialect compliance suite in the normal run: the classes where a
DB-API that routes statements could differ from PyMySQL (connections, pings, errors,
isolation and autocommit, cursors, lastrowid, rowcount, DML).  Each pair runs the same
selection on the shared MariaDB topology; nothing may pass on ``mysql+pymysql`` and fail on
``mysql+consistent``, nor pass on ``mysql+aiomysql`` and fail on ``mysql+consistent_async``.
The whole suite is ``make test-sqlalchemy`` / ``make test-sqlalchemy-async``
(``tests/sqlalchemy_compliance/run.py``)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from consistent.testing.loading import load_module

RUNNER = Path(__file__).resolve().parents[1] / "sqlalchemy_compliance" / "run.py"
CLASSES = (
    "PingTest",
    "ExceptionTest",
    "IsolationLevelTest",
    "AutocommitIsolationTest",
    "EscapingTest",
    "DifficultParametersTest",
    "LastrowidTest",
    "InsertBehaviorTest",
    "RowCountTest",
    "RowFetchTest",
    "ServerSideCursorsTest",
    "SimpleUpdateDeleteTest",
)


def load_runner() -> ModuleType:
    return load_module("consistent_sqla_compliance_run", RUNNER)


@pytest.mark.slow
@pytest.mark.mariadb
@pytest.mark.parametrize("form", ["sync", "async"])
def test_the_dialect_sensitive_classes_pass_as_on_the_baseline(
    mariadb_topology: Any, tmp_path: Path, form: str
) -> None:
    runner = load_runner()
    baseline, ours_name = runner.FORMS[form]
    comparison = runner.compare(
        mariadb_topology,
        drivers=(baseline, ours_name),
        reports=tmp_path,
        pytest_args=["-k", " or ".join(CLASSES)],
        quiet=True,
    )
    theirs = comparison.counts(baseline)
    ours = comparison.counts(ours_name)
    assert theirs[runner.PASSED] > 100  # the selection did run
    assert comparison.regressions == []
    assert comparison.differences == []
    assert ours[runner.FAILED] == 0
