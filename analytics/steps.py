"""Step functions of growing state, looked up in bulk with numpy.

An executed GTID set only grows, so "the highest GNO among the events at or before ``t``" is
a step function of ``t``: the events sorted by ``t`` with a running maximum.  Looking it up
for many queries at once is one binary search each (:func:`numpy.searchsorted`) over arrays
built once: no sort of the queries, no shuffle.  The same holds backwards ("the lowest value
among the events at or after ``t``": a running minimum from the end), and on any other
ordered axis (the GNO axis: "the earliest commit of a GNO above ``n``").  Per session, the
highest GNO its statements had produced before a given statement is one such function too,
along the session's order (:class:`SessionSteps`).

A missing value is :data:`MISSING` in both directions (integers have no NaN), and a null
in Arrow.  :func:`batch_lookup` applies the audit's look-ups to Arrow record batches (an
Arrow UDF).  The module needs numpy and pyarrow only, so that Spark ships it
to executors by value (:func:`analytics.audit.analyze_reads`): they need no copy of the
project.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

__all__ = [
    "MISSING",
    "Direction",
    "Int64s",
    "ReadLookups",
    "SessionSteps",
    "Step",
    "batch_lookup",
    "build",
    "build_sessions",
    "look_up_batch",
    "lookup_fields",
    "lookup_inputs",
]

Int64s = npt.NDArray[np.int64]
#: A missing value or order (a null).
MISSING: Final = np.iinfo(np.int64).min
Direction = Literal["past", "future"]


@dataclass(frozen=True, slots=True)
class Step:
    """A step function: ``keys`` ascending, and ``values[k]`` the largest value among the
    events ordered at or before ``keys[k]`` (``past``), or the smallest among those at or
    after it (``future``).  ``inclusive`` false: strictly before (after)."""

    keys: Int64s
    values: Int64s
    direction: Direction
    inclusive: bool = True

    def __call__(self, queries: Int64s) -> Int64s:
        """The function at each of ``queries`` (:data:`MISSING` where no event qualifies or
        the query is :data:`MISSING`)."""
        found = np.full(queries.shape, MISSING, dtype=np.int64)
        if self.keys.size == 0:
            return found
        past = self.direction == "past"
        # past: the last key at (before) the query; future: the first at (after) it.
        side: Literal["left", "right"] = "right" if past == self.inclusive else "left"
        index = np.searchsorted(self.keys, queries, side=side)
        if past:
            index = index - 1
        ok = (queries != MISSING) & (index >= 0) & (index < self.keys.size)
        found[ok] = self.values[index[ok]]
        return found


def build(keys: Int64s, values: Int64s, direction: Direction, *, inclusive: bool = True) -> Step:
    """The step function of events ``(keys[k], values[k])``; events whose key or value is
    :data:`MISSING` are left out."""
    keep = (keys != MISSING) & (values != MISSING)
    keys, values = keys[keep], values[keep]
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    if direction == "past":
        running = np.maximum.accumulate(values) if values.size else values
    else:
        running = np.minimum.accumulate(values[::-1])[::-1] if values.size else values
    # Equal keys: the past function at a key holds all of them (the last one's running
    # maximum); the future one the first one's running minimum.
    last = np.append(keys[1:] != keys[:-1], True) if keys.size else np.zeros(0, dtype=bool)
    first = np.insert(keys[1:] != keys[:-1], 0, True) if keys.size else np.zeros(0, dtype=bool)
    pick = last if direction == "past" else first
    keys, running = keys[pick], running[pick]
    # A point whose value equals the one before (past) or after (future) it changes nothing.
    if direction == "past":
        changes = np.insert(running[1:] != running[:-1], 0, True) if keys.size else pick[:0]
    else:
        changes = np.append(running[1:] != running[:-1], True) if keys.size else pick[:0]
    return Step(
        np.ascontiguousarray(keys[changes]),
        np.ascontiguousarray(running[changes]),
        direction,
        inclusive,
    )


# --- per session, along the session's order --------------------------------------------------

Bools = npt.NDArray[np.bool_]


def _whole(column: Any) -> Any:
    """An Arrow column as one array (a table's columns come in chunks)."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _order_key(column: Any) -> tuple[Bools, Int64s]:
    """An Arrow integer column as a sort key, nulls first: ``(known, value)`` with ``value``
    0 where unknown, so that two nulls compare equal."""
    known: Bools = pc.is_valid(column).to_numpy(zero_copy_only=False)
    value: Int64s = (
        pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    )
    return known, value


def _running_max_by_segment(values: Int64s, segments: Int64s) -> Int64s:
    """The running maximum of ``values`` restarted at each segment (``segments`` ascending),
    in one pass: each value is replaced by its rank, offset by its segment's number times the
    number of ranks, so that a segment's numbers all exceed the one before's."""
    if values.size == 0:
        return values
    distinct, rank = np.unique(values, return_inverse=True)
    width = np.int64(distinct.size)
    offset = segments * width
    running = np.maximum.accumulate(offset + rank.reshape(-1)) - offset
    highest: Int64s = distinct[running]
    return highest


def _before(
    known: Bools, value: Int64s, query_known: Bools, query_value: Int64s
) -> tuple[Bools, Bools]:
    """Per element, whether the key ``(known, value)`` sorts before the query's (nulls
    first), and whether it equals it."""
    same_known = known == query_known
    less = (known < query_known) | (same_known & (value < query_value))
    return less, same_known & (value == query_value)


def _text_before(left: str | None, right: str | None) -> bool:
    """Whether ``left`` sorts before ``right``, nulls first.  Python orders text by code
    point, which is the byte order of UTF-8 that Spark sorts strings by."""
    if left is None or right is None:
        return left is None and right is not None
    return left < right


@dataclass(frozen=True, slots=True)
class SessionSteps:
    """Per session, the highest GNO per source its statements had produced before a given
    statement, in the order Spark's ``Window.partitionBy(session_id).orderBy(start_ns,
    end_ns, span_id)`` gives (ascending, nulls first; a null session is a session too).

    The producing statements are sorted by session, then by that order; ``highs[i]`` is the
    running maximum of source ``i`` within the session.  A statement's look-up is a binary
    search within its session (``segments``: the session's first and past-last positions) for
    the statements strictly before it; the span ids, kept as Arrow text, are read only when
    the times tie."""

    segments: dict[str | None, tuple[int, int]]
    start_known: Bools
    start: Int64s
    end_known: Bools
    end: Int64s
    span: Any
    highs: tuple[Int64s, ...]

    def _earlier(self, batch: Any, first: Int64s, last: Int64s) -> Int64s:
        """Per statement of ``batch``, the position past the last producing statement of its
        session (between ``first`` and ``last``) that sorts strictly before it."""
        start_known, start = _order_key(batch.column("start_ns"))
        end_known, end = _order_key(batch.column("end_ns"))
        span = batch.column("span_id")
        low, high = first.copy(), last.copy()
        while True:
            active = np.flatnonzero(low < high)
            if active.size == 0:
                return low
            middle = (low[active] + high[active]) // 2
            less, same = _before(
                self.start_known[middle], self.start[middle],
                start_known[active], start[active],
            )  # fmt: skip
            less_end, same_end = _before(
                self.end_known[middle], self.end[middle], end_known[active], end[active]
            )
            less |= same & less_end
            for k in np.flatnonzero(same & same_end):
                written = self.span[int(middle[k])].as_py()
                less[k] = _text_before(written, span[int(active[k])].as_py())
            low[active] = np.where(less, middle + 1, low[active])
            high[active] = np.where(less, high[active], middle)

    def __call__(self, batch: Any) -> tuple[Int64s, ...]:
        """Per source, for each statement of ``batch`` (a ``pyarrow.RecordBatch`` with
        ``session_id``, ``start_ns``, ``end_ns`` and ``span_id``): the highest GNO its
        session had produced before it (:data:`MISSING`: none)."""
        sessions = pc.dictionary_encode(batch.column("session_id"), null_encoding="encode")
        bounds = [self.segments.get(s, (0, 0)) for s in sessions.dictionary.to_pylist()]
        table = np.array(bounds, dtype=np.int64).reshape(-1, 2)
        which = sessions.indices.to_numpy(zero_copy_only=False)
        first, last = table[which, 0], table[which, 1]
        after = self._earlier(batch, first, last)
        found = after > first
        index = np.where(found, after - 1, 0)
        return tuple(np.where(found, high[index], MISSING) for high in self.highs)


def _tied(keys: Sequence[Int64s | Bools]) -> Bools:
    """Per position of ``keys`` (sorted together), whether all of them equal their values at
    the position before or after."""
    size = len(keys[0]) if keys else 0
    same: Bools = np.ones(max(size - 1, 0), dtype=bool)
    for key in keys:
        same &= key[1:] == key[:-1]
    tied: Bools = np.zeros(size, dtype=bool)
    tied[:-1] |= same
    tied[1:] |= same
    return tied


def _session_order(
    segment: Int64s, start: tuple[Bools, Int64s], end: tuple[Bools, Int64s], span: Any
) -> Int64s:
    """The positions in session order: by ``segment``, then start, end and span id (nulls
    first).  The span ids order only the statements whose session and times tie, which are
    few: they are ranked among those alone (text orders as bytes in Arrow as in Spark)."""
    numeric = (end[1], end[0], start[1], start[0], segment)
    order = np.lexsort(numeric)
    tied = _tied([key[order] for key in numeric])
    if not tied.any():
        return order
    among = pa.array(order[tied])
    ids = span.take(among)
    known: Bools = np.zeros(len(order), dtype=bool)
    rank: Int64s = np.zeros(len(order), dtype=np.int64)
    known[among] = pc.is_valid(ids).to_numpy(zero_copy_only=False)
    rank[among] = pc.rank(pc.fill_null(ids, ""), tiebreaker="dense").to_numpy()
    return np.lexsort((rank, known, *numeric))


def build_sessions(
    session: Any, start: Any, end: Any, span: Any, produced: Sequence[Int64s]
) -> SessionSteps:
    """The :class:`SessionSteps` of statements (Arrow columns ``session``, ``start``,
    ``end``, ``span``) that produced ``produced[i]`` (per source, :data:`MISSING`: nothing);
    statements that produced nothing are left out."""
    keep = np.zeros(len(session), dtype=bool)
    for values in produced:
        keep |= values != MISSING
    chosen = pa.array(np.flatnonzero(keep))
    session, start, end, span = (_whole(c.take(chosen)) for c in (session, start, end, span))
    codes = pc.dictionary_encode(session, null_encoding="encode")
    segment = codes.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    start_known, start_value = _order_key(start)
    end_known, end_value = _order_key(end)
    order = _session_order(segment, (start_known, start_value), (end_known, end_value), span)
    segment = segment[order]
    counts = np.bincount(segment, minlength=len(codes.dictionary))
    ends = np.cumsum(counts)
    bounds = zip((ends - counts).tolist(), ends.tolist(), strict=True)
    return SessionSteps(
        segments=dict(zip(codes.dictionary.to_pylist(), bounds, strict=True)),
        start_known=np.ascontiguousarray(start_known[order]),
        start=np.ascontiguousarray(start_value[order]),
        end_known=np.ascontiguousarray(end_known[order]),
        end=np.ascontiguousarray(end_value[order]),
        span=span.take(pa.array(order)),
        highs=tuple(_running_max_by_segment(values[keep][order], segment) for values in produced),
    )


# --- the audit's look-ups over record batches -------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadLookups:
    """Everything the audit looks up per read, per source ``i`` (the step functions are
    small: one point per lag sample, per write and per primary-state record):

    * ``earlier``: what the read's session had produced before it;
    * ``evidence[replica][i]``: the replica's highest applied GNO by time (past, by the
      samples' ends);
    * ``observation[replica][i]``: its lowest applied GNO from a time on (future, by the
      samples' starts);
    * ``primary[i]``: the primary's highest GNO by time;
    * ``oldest[i]``: on the GNO axis, the earliest commit of a GNO strictly above a value.
    """

    earlier: SessionSteps
    evidence: dict[str, tuple[Step, ...]]
    observation: dict[str, tuple[Step, ...]]
    primary: tuple[Step, ...]
    oldest: tuple[Step, ...]

    def sources(self) -> int:
        return len(self.primary)

    def replicas(self) -> list[str]:
        """The sampled replicas, in the order of the ``replica_index`` column that
        :func:`look_up_batch` reads (:func:`lookup_inputs`)."""
        return sorted(self.evidence)


def lookup_fields(sources: int) -> list[str]:
    """The columns :func:`look_up_batch` adds, per source ``i``: ``req{i}`` (what the read
    required: the highest GNO its session had produced before it, or ``required{i}``, what its
    level required, whichever is higher), ``low{i}`` (what the replica had executed when the
    read began: the evidence, the read's own wait ``wait{i}``, or what the router knew
    ``known{i}`` unless a sample contradicts it, see :func:`look_up_batch`), ``high{i}`` (the
    observation after it ended), ``primary{i}`` and ``oldest{i}`` (when the first transaction
    above ``low{i}`` committed)."""
    return [
        f"{name}{i}" for i in range(sources) for name in ("req", "low", "high", "primary", "oldest")
    ]


def _longs(column: Any) -> Int64s:
    filled = pc.fill_null(column.cast(pa.int64()), pa.scalar(MISSING, pa.int64()))
    values: Int64s = filled.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values


def _arrow(values: Int64s) -> Any:
    return pa.array(values, type=pa.int64(), mask=values == MISSING)


def _credible_known(
    batch: Any, lookups: ReadLookups, masks: dict[str, Any], shape: tuple[int, ...]
) -> Any:
    """Per read, whether its ``known{i}`` (learnt at ``known_at_ns``) may be believed: no lag
    sample of its replica that began at or after ``known_at_ns`` shows less applied, for any
    source.  A record a later sample contradicts is false, and proves nothing."""
    at = _longs(batch.column("known_at_ns"))
    credible = np.ones(shape, dtype=bool)
    for i in range(lookups.sources()):
        known = _longs(batch.column(f"known{i}"))
        upper = np.full(shape, MISSING, dtype=np.int64)
        for name, mask in masks.items():
            if mask.any():
                upper[mask] = lookups.observation[name][i](at[mask])
        credible &= (known == MISSING) | (upper == MISSING) | (known <= upper)
    return credible


def lookup_inputs(sources: int) -> list[str]:
    """The columns :func:`look_up_batch` reads, in the order :func:`batch_lookup`'s function
    takes them.  The read's replica comes as ``replica_index``, its position in
    :meth:`ReadLookups.replicas` (any other number or null: a replica never sampled), so that
    a number crosses to Python instead of a name."""
    per_source = [f"{name}{i}" for name in ("required", "wait", "known") for i in range(sources)]
    return [
        "session_id", "span_id", "replica_index", "start_ns", "end_ns", *per_source, "known_at_ns"
    ]  # fmt: skip


def look_up_batch(batch: Any, lookups: ReadLookups) -> Any:
    """The :func:`lookup_fields` of each read of ``batch`` (a ``pyarrow.RecordBatch`` with the
    :func:`lookup_inputs` columns), as a ``pyarrow.StructArray``."""
    start = _longs(batch.column("start_ns"))
    end = _longs(batch.column("end_ns"))
    replica = _longs(batch.column("replica_index"))
    masks = {name: replica == index for index, name in enumerate(lookups.replicas())}
    credible = _credible_known(batch, lookups, masks, start.shape)
    earlier = lookups.earlier(batch)
    added: dict[str, Any] = {}
    for i in range(lookups.sources()):
        added[f"req{i}"] = np.maximum(earlier[i], _longs(batch.column(f"required{i}")))
        evidence = np.full(start.shape, MISSING, dtype=np.int64)
        observed = np.full(start.shape, MISSING, dtype=np.int64)
        for name, mask in masks.items():
            if mask.any():
                evidence[mask] = lookups.evidence[name][i](start[mask])
                observed[mask] = lookups.observation[name][i](end[mask])
        known = np.where(credible, _longs(batch.column(f"known{i}")), MISSING)
        # MISSING is the smallest integer: the maximum ignores it, as Spark's greatest does.
        low = np.maximum(np.maximum(evidence, _longs(batch.column(f"wait{i}"))), known)
        added[f"low{i}"] = low
        added[f"high{i}"] = observed
        added[f"primary{i}"] = lookups.primary[i](start)
        added[f"oldest{i}"] = lookups.oldest[i](low)
    names = lookup_fields(lookups.sources())
    return pa.StructArray.from_arrays([_arrow(added[n]) for n in names], names=names)


class _Holder(Protocol):
    """A Spark broadcast variable (or anything with its ``value``): the look-ups, or their
    pickle (see :func:`batch_lookup`)."""

    @property
    def value(self) -> ReadLookups | bytes: ...


def _loaded(holder: _Holder) -> ReadLookups:
    """The look-ups of ``holder``, unpickled once per Python worker (kept on the broadcast
    object, which a reused worker keeps from task to task)."""
    cached = getattr(holder, "_consistent_lookups", None)
    if isinstance(cached, ReadLookups):
        return cached
    value = holder.value
    lookups: ReadLookups = pickle.loads(value) if isinstance(value, bytes) else value
    with contextlib.suppress(AttributeError, TypeError):
        setattr(holder, "_consistent_lookups", lookups)  # noqa: B010 (not a declared field)
    return lookups


def batch_lookup(
    holder: _Holder, sources: int
) -> Callable[[Iterator[tuple[pa.Array, ...]]], Iterator[pa.Array]]:
    """The function of an Arrow UDF (``pyspark.sql.functions.arrow_udf``, its type told by
    the annotations): :func:`look_up_batch` on the :func:`lookup_inputs` columns of every
    batch, with the look-ups from a broadcast variable (read once per Python worker).  Only
    those columns travel to Python and only the looked-up ones back: Spark keeps the rest.

    Spark pickles a broadcast's value with the standard :mod:`pickle`, which names classes
    by module: broadcast as is, :class:`ReadLookups` would make the executors import this
    module from a copy of the project.  Broadcast as bytes pickled by ``cloudpickle`` with
    this module registered by value (:func:`analytics.audit.analyze_reads`), the classes
    travel with the data and the executors need numpy and pyarrow only."""
    names = lookup_inputs(sources)

    def look_up(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        lookups = _loaded(holder)
        for columns in batches:
            yield look_up_batch(pa.RecordBatch.from_arrays(list(columns), names=names), lookups)

    return look_up
