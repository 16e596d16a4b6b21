"""A statement span's attributes, built on an exporter thread from the span's raw facts.

Attributes come in groups ("parts"): the session's (kind, system, session id), the route's
(address, target, role, reason, level, statement kind, operation…), the required set, the
wait, the known state (and when it was learnt), the produced GTIDs, the failure.  Each part is
kept both as a dict (for :class:`~consistent.telemetry.records.SpanRecord` and the SDK
exporters) and as its OTLP JSON text (for the file), built from the dict, so the two can never
disagree.

Most statements of a process share a handful of routes and a session's required set changes
only on writes, so the route parts are cached per pipeline (keyed by the decision's shape) and
GTID parts per session (by the identity of the immutable state): a span then costs little more
than joining a few strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from consistent.telemetry import otlpjson
from consistent.telemetry.gtidattr import put_gtid_attributes
from consistent.telemetry.masking import mask_query
from consistent.trace import (
    DB_COLLECTION_NAME,
    DB_NAMESPACE,
    DB_OPERATION_NAME,
    DB_QUERY_TEXT,
    DB_RESPONSE_STATUS_CODE,
    DB_SYSTEM,
    DB_SYSTEM_NAME,
    ERROR_TYPE,
    LEVEL,
    RECORD_KIND,
    REPLICA_KNOWN_AT_NS,
    REPLICA_KNOWN_SOURCE,
    ROUTE_ACTION,
    ROUTE_DETAIL,
    ROUTE_PINNED_REASON,
    ROUTE_REASON,
    ROUTE_ROLE,
    ROUTE_TARGET,
    ROUTE_TRIED,
    SERVER_ADDRESS,
    SERVER_PORT,
    SESSION_ID,
    STATEMENT_KIND,
    WAIT_COUNT,
    WAIT_DURATION_MS,
    WAIT_OUTCOME,
    WAIT_SET,
    WAIT_TARGET,
    AttributeValue,
    RecordKind,
)

if TYPE_CHECKING:
    from consistent.gtid import GtidState
    from consistent.policy import Decision, Learned

__all__ = [
    "NO_WAIT",
    "PRIMARY_TARGET",
    "Part",
    "RouteParts",
    "collection_of",
    "error_part",
    "gtid_part",
    "learned_part",
    "operation_of",
    "part",
    "query_part",
    "role",
    "route_from_decision",
    "route_without_decision",
    "session_part",
    "target_part",
    "wait_outcome_name",
    "wait_part",
]

#: The primary's target name (``consistent.policy.PRIMARY``).
PRIMARY_TARGET: Final = "primary"
#: Attributes and their OTLP JSON text (``KeyValue`` objects joined by commas).
Part = tuple[Mapping[str, AttributeValue], str]

_MAX_ROUTES: Final = 4096
_FIRST_WORD: Final = re.compile(r"(?:\s|/\*.*?\*/|(?:--[ \t]|#)[^\n]*\n)*([A-Za-z]+)", re.DOTALL)
_IDENTIFIER: Final = r"(?:`[^`]+`|[A-Za-z_$][\w$]*)"
# The table right after the keyword that names it in the four statements that have one; the
# rest of the text must name no other (no comma list, join, subquery or union).
_TABLE: Final = re.compile(
    r"\s*(?:SELECT\b(?:(?!\bFROM\b).)*?\bFROM"
    r"|(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\s+INTO)?"
    r"|UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*"
    r"|DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM)"
    rf"\s+({_IDENTIFIER}(?:\s*\.\s*{_IDENTIFIER})?)"
    # Up to the clause after the table (an alias may come first): a comma there is a list.
    r"([^,(]*?)(?=\b(?:WHERE|GROUP|ORDER|LIMIT|HAVING|FOR|LOCK|SET|VALUES?|SELECT|PARTITION"
    r"|ON|USING|WINDOW|INTO)\b|[(;]|$)",
    re.IGNORECASE | re.DOTALL,
)
_ANOTHER_TABLE: Final = re.compile(r"\b(?:FROM|JOIN|SELECT|UNION)\b", re.IGNORECASE)

# Both the policy's and the flavours' wait outcomes, by value, to the contract's words.
_WAIT_OUTCOMES: Final[Mapping[str, str]] = {
    "reached": "satisfied",
    "satisfied": "satisfied",
    "timed_out": "timeout",
    "timeout": "timeout",
    "failed": "error",
    "error": "error",
    "unavailable": "error",
}


def wait_outcome_name(outcome: object) -> str:
    """The contract's word (``satisfied``, ``timeout``, ``error``) for a wait outcome given
    as ``consistent.policy.WaitOutcome`` or text."""
    value = getattr(outcome, "value", outcome)
    return _WAIT_OUTCOMES.get(str(value), "error")


def role(target: str) -> str:
    """``primary`` or ``replica``."""
    return "primary" if target == PRIMARY_TARGET else "replica"


def part(attributes: dict[str, AttributeValue]) -> Part:
    """A part from its attributes."""
    return MappingProxyType(attributes), otlpjson.attributes(attributes.items())


#: The wait part of a statement that did not wait.
NO_WAIT: Final = part({WAIT_COUNT: 0, WAIT_DURATION_MS: 0.0, WAIT_OUTCOME: "none"})


def session_part(system: str, session_id: str) -> Part:
    """What every statement of a session carries."""
    return part(
        {
            RECORD_KIND: RecordKind.STATEMENT.value,
            DB_SYSTEM_NAME: system,
            DB_SYSTEM: system,
            SESSION_ID: session_id,
        }
    )


def operation_of(sql: str) -> str:
    """The first keyword of ``sql``, upper-case (``""`` when there is none)."""
    match = _FIRST_WORD.match(sql)
    return match.group(1).upper() if match is not None else ""


def collection_of(sql: str) -> str | None:
    """The one table a ``SELECT``, ``INSERT``, ``REPLACE``, ``UPDATE`` or ``DELETE`` names,
    as written less its backquotes (``shop.orders``); ``None`` when it names none or several,
    or when the text is not that simple (the span is then named by its operation alone)."""
    match = _TABLE.match(sql)
    if match is None or _ANOTHER_TABLE.search(sql, match.end(1)):
        return None
    name = re.sub(r"\s+", "", match.group(1)).replace("`", "")
    return None if name.upper() == "DUAL" else name


def target_part(namespace: str | None, collection: str | None) -> Part:
    """``db.namespace`` and ``db.collection.name``, those known."""
    attributes: dict[str, AttributeValue] = {}
    if namespace:
        attributes[DB_NAMESPACE] = namespace
    if collection:
        attributes[DB_COLLECTION_NAME] = collection
    return part(attributes)


class RouteParts:
    """Route parts by the shape of the route, shared by the sessions of one pipeline."""

    def __init__(self) -> None:
        self._parts: dict[tuple[object, ...], Part] = {}
        #: The part for a key, or ``None`` (then :meth:`store` it).
        self.get = self._parts.get

    def store(self, key: tuple[object, ...], attributes: dict[str, AttributeValue]) -> Part:
        """Build and keep the part for ``key``."""
        if len(self._parts) >= _MAX_ROUTES:
            self._parts.clear()
        built = self._parts[key] = part(attributes)
        return built


def _route(
    address: tuple[str, int], target: str, reason: str, detail: str | None
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        SERVER_ADDRESS: address[0],
        SERVER_PORT: address[1],
        ROUTE_TARGET: target,
        ROUTE_ROLE: role(target),
        ROUTE_REASON: reason,
    }
    if detail is not None:
        attributes[ROUTE_DETAIL] = detail
        if reason == "pinned":
            attributes[ROUTE_PINNED_REASON] = detail
    return attributes


def route_from_decision(
    routes: RouteParts, decision: Decision, address: Callable[[str], tuple[str, int]]
) -> Part:
    """The route part of a policy decision."""
    statement = decision.statement
    key = (
        decision.target,
        decision.reason,
        decision.detail,
        decision.level,
        decision.action,
        statement.kind,
        statement.first_keyword,
        decision.tried,
    )
    found = routes.get(key)
    if found is not None:
        return found
    detail = decision.detail
    attributes = _route(
        address(decision.target),
        decision.target,
        str(decision.reason),
        None if detail is None else str(detail),
    )
    attributes[LEVEL] = str(decision.level)
    attributes[STATEMENT_KIND] = statement.kind.name.lower()
    attributes[ROUTE_ACTION] = str(decision.action)
    if statement.first_keyword:
        attributes[DB_OPERATION_NAME] = statement.first_keyword
    if decision.tried:
        attributes[ROUTE_TRIED] = ",".join(decision.tried)
    return routes.store(key, attributes)


def route_without_decision(
    routes: RouteParts,
    where: tuple[str, str, str | None],
    sql: str,
    address: Callable[[str], tuple[str, int]],
) -> Part:
    """The route part of a statement routed without the policy (no replicas)."""
    operation = operation_of(sql)
    key = (where, operation)
    found = routes.get(key)
    if found is not None:
        return found
    target, reason, detail = where
    attributes = _route(address(target), target, reason, detail)
    if operation:
        attributes[DB_OPERATION_NAME] = operation
    return routes.store(key, attributes)


def gtid_part(name: str, state: GtidState, max_chars: int) -> Part:
    """``name`` (or its digest) and its count."""
    attributes: dict[str, AttributeValue] = {}
    put_gtid_attributes(attributes, name, state, max_chars)
    return part(attributes)


def learned_part(learned: Learned) -> Part:
    """When the process learnt the replica's known state (wall clock, the spans' own clock),
    and what raised it last: a wait, its OK packets' tracker, the monitor."""
    return part({REPLICA_KNOWN_AT_NS: learned.at_ns, REPLICA_KNOWN_SOURCE: str(learned.source)})


def wait_part(
    decision: Decision, outcome: object, count: int, total_ns: int, max_chars: int
) -> Part:
    """The waits of a statement: the last one's set, replica and outcome; count and time of
    all."""
    attributes: dict[str, AttributeValue] = {
        WAIT_COUNT: count,
        WAIT_DURATION_MS: total_ns / 1e6,
        WAIT_OUTCOME: wait_outcome_name(outcome),
        WAIT_TARGET: decision.target,
    }
    if decision.wait_set is not None:
        put_gtid_attributes(attributes, WAIT_SET, decision.wait_set, max_chars)
    return part(attributes)


def query_part(sql: str, max_chars: int) -> Part:
    """``db.query.text``, masked."""
    return part({DB_QUERY_TEXT: mask_query(sql, max_chars)})


def error_part(error: BaseException) -> Part:
    """``error.type`` and, for a server error, ``db.response.status_code``."""
    cls = type(error)
    module = cls.__module__
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    attributes: dict[str, AttributeValue] = {ERROR_TYPE: name}
    errno = error.args[0] if error.args else None
    if isinstance(errno, int) and not isinstance(errno, bool):
        attributes[DB_RESPONSE_STATUS_CODE] = str(errno)
    return part(attributes)
