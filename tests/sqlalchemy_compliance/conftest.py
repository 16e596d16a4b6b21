"""Bootstraps the compliance run: the dialects are registered by name, as their entry points do
for an installed package.  SQLAlchemy's pytest plugin comes from ``compliance.ini`` (``-p``), so
this file stays inert when the project's own test run walks past it."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import registry

registry.register("mysql.consistent", "consistent.sqlalchemy", "ConsistentDialect")
registry.register("mariadb.consistent", "consistent.sqlalchemy", "ConsistentMariaDBDialect")
registry.register(
    "mysql.consistent_async", "consistent.sqlalchemy.async_dialect", "ConsistentAsyncDialect"
)
registry.register(
    "mariadb.consistent_async",
    "consistent.sqlalchemy.async_dialect",
    "ConsistentAsyncMariaDBDialect",
)

pytest.register_assert_rewrite("sqlalchemy.testing.assertions")
