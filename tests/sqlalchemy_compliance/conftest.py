"""Bootstraps the compliance run: the dialect is registered by name, as its entry point does
for an installed package.  SQLAlchemy's pytest plugin comes from ``compliance.ini`` (``-p``), so
this file stays inert when the project's own test run walks past it."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import registry

registry.register("mysql.consistent", "consistent.sqlalchemy", "ConsistentDialect")
registry.register("mariadb.consistent", "consistent.sqlalchemy", "ConsistentMariaDBDialect")

pytest.register_assert_rewrite("sqlalchemy.testing.assertions")
