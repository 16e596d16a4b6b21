"""Set algebra on one transaction source's GNOs, held as a flat tuple of interval bounds.

:class:`~consistent.gtid.GtidSet` stores one such tuple per source; union, intersection,
difference, subset, single-GNO insertion and counting all work on them here, without knowing
about UUIDs, tags or text.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TypeAlias

# One source's intervals: (start0, stop0, start1, stop1, ...), half-open [start, stop), sorted,
# disjoint and never adjacent (stop_i < start_{i+1}).  A GNO g is in it iff
# bisect_right(flat, g) is odd.
_Flat: TypeAlias = tuple[int, ...]


def _normalise(pairs: list[tuple[int, int]]) -> _Flat:
    """Sorted, merged flat tuple from half-open ``(start, stop)`` pairs."""
    pairs.sort()
    out: list[int] = []
    for start, stop in pairs:
        if out and start <= out[-1]:
            out[-1] = max(out[-1], stop)
        else:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _flat_union(a: _Flat, b: _Flat) -> _Flat:
    if a[-1] < b[0]:
        return a + b
    if b[-1] < a[0]:
        return b + a
    out: list[int] = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na or j < nb:
        if j >= nb or (i < na and a[i] <= b[j]):
            start, stop = a[i], a[i + 1]
            i += 2
        else:
            start, stop = b[j], b[j + 1]
            j += 2
        if out and start <= out[-1]:
            out[-1] = max(out[-1], stop)
        else:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _flat_intersection(a: _Flat, b: _Flat) -> _Flat:
    out: list[int] = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        start = max(a[i], b[j])
        stop = min(a[i + 1], b[j + 1])
        if start < stop:
            out.append(start)
            out.append(stop)
        if a[i + 1] < b[j + 1]:
            i += 2
        else:
            j += 2
    return tuple(out)


def _flat_difference(a: _Flat, b: _Flat) -> _Flat:
    out: list[int] = []
    j = 0
    nb = len(b)
    for i in range(0, len(a), 2):
        start, stop = a[i], a[i + 1]
        while j < nb and b[j + 1] <= start:
            j += 2
        k = j
        while k < nb and b[k] < stop:
            if b[k] > start:
                out.append(start)
                out.append(b[k])
            start = b[k + 1]  # > start: b's intervals are sorted and never touch
            if start >= stop:
                break
            k += 2
        if start < stop:
            out.append(start)
            out.append(stop)
    return tuple(out)


def _flat_subset(a: _Flat, b: _Flat) -> bool:
    """Every interval of ``a`` lies inside one interval of ``b`` (binary search each)."""
    nb = len(b)
    lo = 0
    for i in range(0, len(a), 2):
        k = bisect_right(b, a[i], lo, nb)
        if not k & 1 or a[i + 1] > b[k]:
            return False
        lo = k - 1
    return True


def _flat_add(flat: _Flat, gno: int) -> _Flat:
    """``flat`` with one more GNO; the same object when it is already there."""
    i = bisect_right(flat, gno)
    if i & 1:
        return flat
    joins_left = i > 0 and flat[i - 1] == gno
    joins_right = i < len(flat) and flat[i] == gno + 1
    if joins_left and joins_right:
        return flat[: i - 1] + flat[i + 1 :]
    if joins_left:
        return (*flat[: i - 1], gno + 1, *flat[i:])
    if joins_right:
        return (*flat[:i], gno, *flat[i + 1 :])
    return (*flat[:i], gno, gno + 1, *flat[i:])


def _flat_len(flat: _Flat) -> int:
    return sum(flat[1::2]) - sum(flat[0::2])
