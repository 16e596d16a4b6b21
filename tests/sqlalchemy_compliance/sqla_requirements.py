"""What the suite may expect of MariaDB 10.11 through a MySQL dialect.

One class for both dialects, so the comparison runs one selection.  It opens what the server
and SQLAlchemy's MySQL dialect support (transactions and isolation levels above all, which
are where a routing DB-API could differ) and closes what MySQL cannot do.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.testing import exclusions
from sqlalchemy.testing.requirements import SuiteRequirements

_OPEN = exclusions.open
_CLOSED = exclusions.closed


class Requirements(SuiteRequirements):
    # --- transactions, isolation, connections ------------------------------------------
    @property
    def isolation_level(self) -> Any:
        return _OPEN()

    @property
    def autocommit(self) -> Any:
        return _OPEN()

    def get_isolation_levels(self, config: Any) -> dict[str, Any]:
        # In the dialect's own order: the suite compares its error message.
        levels = list(config.db.dialect.get_isolation_level_values(None))
        return {"default": "REPEATABLE READ", "supported": levels}

    @property
    def get_isolation_level_values(self) -> Any:
        return _OPEN()

    @property
    def savepoints(self) -> Any:
        return _OPEN()

    @property
    def two_phase_transactions(self) -> Any:
        return _OPEN()

    @property
    def dbapi_lastrowid(self) -> Any:
        return _OPEN()

    # --- SQL --------------------------------------------------------------------------
    @property
    def ctes(self) -> Any:
        return _OPEN()

    @property
    def window_functions(self) -> Any:
        return _OPEN()

    @property
    def intersect(self) -> Any:
        return _OPEN()

    @property
    def except_(self) -> Any:
        return _OPEN()

    @property
    def tuple_in(self) -> Any:
        return _OPEN()

    @property
    def update_from(self) -> Any:
        return _OPEN()

    @property
    def delete_from(self) -> Any:
        return _OPEN()

    @property
    def regexp_match(self) -> Any:
        return _OPEN()

    @property
    def regexp_replace(self) -> Any:
        return _OPEN()

    @property
    def mod_operator_as_percent_sign(self) -> Any:
        return _OPEN()

    @property
    def json_type(self) -> Any:
        return _OPEN()

    @property
    def computed_columns(self) -> Any:
        return _OPEN()

    @property
    def sql_expression_limit_offset(self) -> Any:
        return _CLOSED()  # LIMIT takes literals or placeholders only

    @property
    def unbounded_varchar(self) -> Any:
        return _CLOSED()  # VARCHAR needs a length

    # --- types ------------------------------------------------------------------------
    @property
    def datetime_microseconds(self) -> Any:
        return _CLOSED()  # DATETIME without a precision drops fractions

    @property
    def time_microseconds(self) -> Any:
        return _CLOSED()

    @property
    def datetime_implicit_bound(self) -> Any:
        return _CLOSED()  # a bare bound datetime comes back as a string

    @property
    def time_implicit_bound(self) -> Any:
        return _CLOSED()

    @property
    def date_implicit_bound(self) -> Any:
        return _CLOSED()

    @property
    def precision_generic_float_type(self) -> Any:
        return _CLOSED()

    # --- reflection ---------------------------------------------------------------------
    @property
    def views(self) -> Any:
        return _OPEN()

    @property
    def reflect_table_options(self) -> Any:
        return _OPEN()

    @property
    def unique_constraints_reflect_as_index(self) -> Any:
        return _OPEN()

    @property
    def foreign_keys_reflect_as_index(self) -> Any:
        return _OPEN()

    @property
    def unique_index_reflect_as_unique_constraints(self) -> Any:
        return _OPEN()

    @property
    def computed_columns_reflect_persisted(self) -> Any:
        return _OPEN()

    @property
    def comment_reflection(self) -> Any:
        return _OPEN()

    @property
    def check_constraint_reflection(self) -> Any:
        return _OPEN()

    @property
    def foreign_key_constraint_option_reflection_ondelete(self) -> Any:
        return _OPEN()

    @property
    def foreign_key_constraint_option_reflection_onupdate(self) -> Any:
        return _OPEN()
