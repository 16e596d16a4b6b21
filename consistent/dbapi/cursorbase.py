"""What the blocking and the asyncio cursors share: the attributes read from the driver's
cursor that ran the last statement, and the choice of our class for a driver's cursor class.

:class:`CursorBase` holds ``_inner`` (the driver cursor that ran the last statement, ``None``
before one or after a deferred statement) and ``_deferred`` (the text of a statement the policy
deferred); its properties read them without I/O, so :class:`consistent.dbapi.cursor.Cursor` and
:class:`consistent.aio.cursor.Cursor` inherit them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from consistent import errors

__all__ = ["CursorBase", "class_for_driver", "driver_classes", "driver_kind"]

CursorT = TypeVar("CursorT", bound="CursorBase")
DriverT = TypeVar("DriverT")


class CursorBase:
    """Attributes over the driver's cursor of the last statement (PEP 249's and the driver's)."""

    #: Rows are streamed from the server instead of read at ``execute()``.
    unbuffered: ClassVar[bool] = False
    #: Rows are dicts keyed by column name.
    as_dict: ClassVar[bool] = False

    _inner: Any
    _deferred: str | None

    @property
    def description(self) -> tuple[tuple[Any, ...], ...] | None:
        """Seven-item column descriptions of the last result, or ``None``."""
        inner = self._inner
        return inner.description if inner is not None else None

    @property
    def rowcount(self) -> int:
        """Rows produced or affected by the last statement; -1 when not known."""
        inner = self._inner
        if inner is None:
            return -1
        count = inner.rowcount
        return -1 if count is None else int(count)

    @property
    def lastrowid(self) -> int | None:
        """``AUTO_INCREMENT`` value of the last ``INSERT``, as the driver reports it."""
        inner = self._inner
        return inner.lastrowid if inner is not None else None

    @property
    def rownumber(self) -> int:
        """Index of the next row in the result."""
        inner = self._inner
        return int(inner.rownumber) if inner is not None else 0

    @staticmethod
    def _inner_executed(inner: Any) -> str | bytes | bytearray | None:
        """The driver cursor's text of the statement it ran."""
        return inner._executed  # type: ignore[no-any-return]

    @property
    def _executed(self) -> str | bytes | bytearray | None:
        """The last statement as sent, parameters interpolated (the driver's attribute, which
        code written against it reads), or ``None`` before the first one."""
        inner = self._inner
        if inner is not None:
            return self._inner_executed(inner)
        return self._deferred


def class_for_driver(
    cls: type[Any],
    base: type[CursorT],
    by_kind: Mapping[tuple[bool, bool], type[CursorT]],
    *,
    driver_classes: Mapping[tuple[bool, bool], type[Any]],
    cursor_kind: Callable[[type[Any]], tuple[bool, bool] | None],
    attribute: str,
    module: str,
) -> type[CursorT]:
    """Our cursor class for the driver's ``cls``: ``cls`` itself when it is a ``base``; for
    the driver's four classes (``driver_classes``), ours of the same kind (``by_kind``); for a
    subclass of one of them, a subclass of ours of that kind, named after it, whose
    ``attribute`` is ``cls`` so that results are read through it."""
    if isinstance(cls, type) and issubclass(cls, base):
        return cls
    kind = cursor_kind(cls)
    if kind is None:
        raise errors.NotSupportedError(f"unsupported cursor class {cls!r}")
    ours = by_kind[kind]
    if cls is driver_classes[kind]:
        return ours
    return type(
        cls.__name__,
        (ours,),
        {attribute: cls, "__module__": module, "__doc__": ours.__doc__},
    )


def driver_classes(
    plain: type[DriverT], unbuffered: type[DriverT], as_dict: type[DriverT], both: type[DriverT]
) -> dict[tuple[bool, bool], type[DriverT]]:
    """A driver's four cursor classes by ``(unbuffered, as_dict)``."""
    return {
        (False, False): plain,
        (True, False): unbuffered,
        (False, True): as_dict,
        (True, True): both,
    }


def driver_kind(
    cls: object, base: type[Any], unbuffered: type[Any], dict_mixin: type[Any]
) -> tuple[bool, bool] | None:
    """``(unbuffered, as_dict)`` of a driver's cursor class or a subclass of one (as the
    drivers build them: unbuffered from their ``SSCursor``, dict rows from their dict mixin);
    ``None`` for anything that is no ``base``."""
    if not isinstance(cls, type) or not issubclass(cls, base):
        return None
    return (issubclass(cls, unbuffered), issubclass(cls, dict_mixin))
