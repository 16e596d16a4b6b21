"""What a translation asks the session, recorded and replayed.

A plan (:mod:`consistent.emulator.sql.stmtcache`) may be reused only while its statement would
translate the same way: :class:`Recorder` notes the table names a translation resolved, and
whether it asked anything else (a variable, ``NOW()``…: then no plan).  A recorder made with
``record_variables=True`` (SELECT's) also keeps the system variables it read, with their
values: a plan then holds while each still has that value (``SELECT v, @@port …``, the read
a replica-routing client sends most, is planned like any point select).  :class:`Replayer`
compiles a shape's template from that recording without touching the session, and
:func:`replay` checks a session still resolves the names to the very same tables and reads
the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from consistent.emulator.errors import SqlError
from consistent.emulator.sql.context import StatementContext
from consistent.emulator.sql.translate import TableRef
from consistent.errors import InternalError

__all__ = ["NotReplayable", "Recorder", "Replayer", "TableCall", "VariableCall", "replay"]


@dataclass(frozen=True, slots=True)
class TableCall:
    """One table name a handler resolved, and what it resolved to."""

    schema: str | None
    name: str
    ref: TableRef


@dataclass(frozen=True, slots=True)
class VariableCall:
    """One system variable a translation read (``@@[scope.]name``), and its value."""

    name: str
    scope: str | None
    value: object


class NotReplayable(InternalError):
    """Compiling a template asked the session something its recording does not hold."""


class Recorder:
    """A :class:`StatementContext` that forwards to the session and records table lookups;
    ``dynamic`` becomes true when anything else is asked (its answer may change)."""

    def __init__(self, ctx: StatementContext, *, record_variables: bool = False) -> None:
        self._ctx = ctx
        self._record_variables = record_variables
        self.calls: list[TableCall] = []
        self.variables: list[VariableCall] = []
        self.dynamic = False

    def resolve_table(self, schema: str | None, name: str) -> TableRef:
        """Resolve through the session and remember the answer."""
        ref = self._ctx.resolve_table(schema, name)
        self.calls.append(TableCall(schema, name, ref))
        return ref

    @property
    def database(self) -> str | None:
        """The default schema (makes the translation dynamic)."""
        self.dynamic = True
        return self._ctx.database

    @property
    def user_host(self) -> str:
        """``USER()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.user_host

    @property
    def connection_id(self) -> int:
        """``CONNECTION_ID()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.connection_id

    @property
    def last_insert_id(self) -> int:
        """``LAST_INSERT_ID()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.last_insert_id

    @property
    def row_count(self) -> int:
        """``ROW_COUNT()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.row_count

    @property
    def found_rows(self) -> int:
        """``FOUND_ROWS()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.found_rows

    @property
    def server_version(self) -> str:
        """``VERSION()`` (dynamic)."""
        self.dynamic = True
        return self._ctx.server_version

    def system_variable_value(self, name: str, scope: str | None) -> object:
        """``@@name``: recorded with its value, or dynamic (see the module docstring)."""
        value = self._ctx.system_variable_value(name, scope)
        if self._record_variables:
            self.variables.append(VariableCall(name, scope, value))
        else:
            self.dynamic = True
        return value

    def user_variable(self, name: str) -> object:
        """``@name`` (dynamic)."""
        self.dynamic = True
        return self._ctx.user_variable(name)


class Replayer:
    """A :class:`StatementContext` answering table lookups from a recording, in order, and
    nothing else (:class:`NotReplayable`); used to compile a shape's template without
    touching the session."""

    def __init__(self, calls: list[TableCall], variables: list[VariableCall] | None = None) -> None:
        self._calls = calls
        self._next = 0
        self._variables = variables or []
        self._next_variable = 0

    def resolve_table(self, schema: str | None, name: str) -> TableRef:
        """The recorded answer to the next lookup (which must be the same lookup)."""
        if self._next >= len(self._calls):
            raise NotReplayable(name)
        call = self._calls[self._next]
        if (call.schema, call.name) != (schema, name):
            raise NotReplayable(name)
        self._next += 1
        return call.ref

    @property
    def complete(self) -> bool:
        """Whether every recorded lookup was asked again."""
        return self._next == len(self._calls) and self._next_variable == len(self._variables)

    def _refuse(self) -> NotReplayable:
        return NotReplayable("the translation depends on the session")

    @property
    def database(self) -> str | None:
        """Not replayable."""
        raise self._refuse()

    @property
    def user_host(self) -> str:
        """Not replayable."""
        raise self._refuse()

    @property
    def connection_id(self) -> int:
        """Not replayable."""
        raise self._refuse()

    @property
    def last_insert_id(self) -> int:
        """Not replayable."""
        raise self._refuse()

    @property
    def row_count(self) -> int:
        """Not replayable."""
        raise self._refuse()

    @property
    def found_rows(self) -> int:
        """Not replayable."""
        raise self._refuse()

    @property
    def server_version(self) -> str:
        """Not replayable."""
        raise self._refuse()

    def system_variable_value(self, name: str, scope: str | None) -> object:
        """The recorded value of the next variable read (which must be the same read)."""
        if self._next_variable >= len(self._variables):
            raise self._refuse()
        call = self._variables[self._next_variable]
        if (call.name, call.scope) != (name, scope):
            raise self._refuse()
        self._next_variable += 1
        return call.value

    def user_variable(self, name: str) -> object:
        """Not replayable."""
        raise self._refuse()


def replay(
    ctx: StatementContext,
    calls: tuple[TableCall, ...],
    variables: tuple[VariableCall, ...] = (),
) -> bool:
    """Resolve the recorded table names again and read the recorded variables; True when each
    gives the same table and the same value.

    A lookup that now fails is reported as False too: the caller then runs the statement the
    long way, which raises the error where it belongs.
    """
    for index, call in enumerate(calls):
        if index and _asked_before(calls, index):
            continue  # the same name resolves to the same table within a statement
        try:
            ref = ctx.resolve_table(call.schema, call.name)
        except SqlError:
            return False
        if ref.table is not call.ref.table or ref.virtual != call.ref.virtual:
            return False
    for variable in variables:
        try:
            value = ctx.system_variable_value(variable.name, variable.scope)
        except SqlError:
            return False
        if type(value) is not type(variable.value) or value != variable.value:
            return False
    return True


def _asked_before(calls: tuple[TableCall, ...], index: int) -> bool:
    call = calls[index]
    return any(c.name == call.name and c.schema == call.schema for c in calls[:index])
