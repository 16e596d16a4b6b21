"""MySQL functions SQLite lacks, registered as user functions on each session connection.

Time functions read the session's statement time (the injected clock, or ``@@timestamp`` when
set) in the session's ``time_zone``, so ``NOW()`` is constant within a statement and tests
control it.  An error a function raises (1772 from ``GTID_SUBSET``…) is kept in
:attr:`FunctionHost.error` because SQLite only reports "user-defined function raised
exception"; the engine re-raises the kept error.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import ipaddress
import math
import random
import re
import sqlite3
import uuid as uuidlib
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from consistent.emulator.errors import SqlError
from consistent.emulator.gtid_state import parse_gtid_set

__all__ = ["FunctionHost", "register_functions", "timezone_for"]

_MYSQL_FORMAT: Final = {
    "a": "%a",
    "b": "%b",
    "c": None,
    "D": None,
    "d": "%d",
    "e": None,
    "f": None,
    "H": "%H",
    "h": "%I",
    "I": "%I",
    "i": "%M",
    "j": "%j",
    "k": None,
    "l": None,
    "M": "%B",
    "m": "%m",
    "p": "%p",
    "r": "%I:%M:%S %p",
    "S": "%S",
    "s": "%S",
    "T": "%H:%M:%S",
    "U": "%U",
    "u": "%W",
    "W": "%A",
    "w": "%w",
    "Y": "%Y",
    "y": "%y",
    "%": "%",
}


def timezone_for(name: str, system: str = "UTC") -> dt.tzinfo | None:
    """A ``time_zone`` value as tzinfo (``SYSTEM``, ``+hh:mm``, ``UTC`` or an IANA name)."""
    if name.upper() == "SYSTEM":
        name = system
    match = re.fullmatch(r"([+-])(\d{1,2}):(\d{2})", name.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        delta = dt.timedelta(hours=int(match.group(2)), minutes=int(match.group(3)))
        if delta > dt.timedelta(hours=14):
            return None
        return dt.timezone(sign * delta)
    if name.upper() in ("UTC", "GMT"):
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _parse_dt(value: object) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        text = str(int(value))
        if len(text) == 8:
            return dt.datetime.strptime(text, "%Y%m%d")
        if len(text) == 14:
            return dt.datetime.strptime(text, "%Y%m%d%H%M%S")
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    text = text.strip().replace("T", " ")
    try:
        if len(text) <= 10:
            return dt.datetime.combine(dt.date.fromisoformat(text), dt.time())
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _fmt_dt(value: dt.datetime, fsp: int = 0) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if fsp:
        text += "." + f"{value.microsecond:06d}"[:fsp]
    return text


def _date_format(value: object, fmt: object) -> str | None:
    moment = _parse_dt(value)
    if moment is None or fmt is None:
        return None
    out: list[str] = []
    text = str(fmt)
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "%" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        spec = text[i + 1]
        i += 2
        mapped = _MYSQL_FORMAT.get(spec, spec)
        if mapped is not None:
            out.append(moment.strftime(mapped) if mapped != spec or spec == "%" else spec)
        elif spec == "c":
            out.append(str(moment.month))
        elif spec == "e":
            out.append(str(moment.day))
        elif spec == "f":
            out.append(f"{moment.microsecond:06d}")
        elif spec == "k":
            out.append(str(moment.hour))
        elif spec == "l":
            out.append(str((moment.hour - 1) % 12 + 1))
        elif spec == "D":
            day = moment.day
            suffix = (
                "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
            )
            out.append(f"{day}{suffix}")
    return "".join(out)


_UNITS: Final = {
    "MICROSECOND": dt.timedelta(microseconds=1),
    "SECOND": dt.timedelta(seconds=1),
    "MINUTE": dt.timedelta(minutes=1),
    "HOUR": dt.timedelta(hours=1),
    "DAY": dt.timedelta(days=1),
    "WEEK": dt.timedelta(weeks=1),
}


def _add_months(moment: dt.datetime, months: int) -> dt.datetime:
    total = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(total, 12)
    month += 1
    days = [
        31,
        29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28,
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ][month - 1]
    return moment.replace(year=year, month=month, day=min(moment.day, days))


def _date_add(value: object, amount: object, sign: int, unit: str) -> str | None:
    moment = _parse_dt(value)
    if moment is None or amount is None:
        return None
    try:
        number = float(str(amount))
    except ValueError:
        return None
    number *= sign
    unit = unit.upper()
    if unit in ("MONTH", "QUARTER", "YEAR"):
        factor = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}[unit]
        result = _add_months(moment, int(number) * factor)
    elif unit in _UNITS:
        result = moment + _UNITS[unit] * number
    else:
        return None
    date_only = (
        isinstance(value, str)
        and len(value.strip()) <= 10
        and unit in ("DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
    )
    if date_only:
        return result.date().isoformat()
    return _fmt_dt(result, 6 if result.microsecond else 0)


def _timestampdiff(unit: str, start: object, end: object) -> int | None:
    a, b = _parse_dt(start), _parse_dt(end)
    if a is None or b is None:
        return None
    unit = unit.upper()
    if unit in ("MONTH", "QUARTER", "YEAR"):
        months = (b.year - a.year) * 12 + b.month - a.month
        if (b.day, b.time()) < (a.day, a.time()) and months > 0:
            months -= 1
        return months // {"MONTH": 1, "QUARTER": 3, "YEAR": 12}[unit]
    step = _UNITS.get(unit)
    if step is None:
        return None
    return int((b - a) / step)


def _lpad(text: object, length: object, pad: object, *, left: bool) -> str | None:
    if text is None or length is None or pad is None:
        return None
    s, n, p = str(text), int(float(str(length))), str(pad)
    if n < 0:
        return None
    if len(s) >= n:
        return s[:n]
    if not p:
        return None
    fill = (p * n)[: n - len(s)]
    return fill + s if left else s + fill


def _field(needle: object, *haystack: object) -> int:
    if needle is None:
        return 0
    for index, item in enumerate(haystack, 1):
        if item is not None and str(item).lower() == str(needle).lower():
            return index
    return 0


def _find_in_set(needle: object, items: object) -> int | None:
    if needle is None or items is None:
        return None
    parts = str(items).split(",") if str(items) else []
    for index, item in enumerate(parts, 1):
        if item.lower() == str(needle).lower():
            return index
    return 0


def _hex_digest(name: str) -> Callable[[object], str | None]:
    def digest(value: object) -> str | None:
        if value is None:
            return None
        data = value if isinstance(value, bytes) else str(value).encode()
        return hashlib.new(name, data).hexdigest()

    return digest


def _sha2(value: object, bits: object) -> str | None:
    if value is None or bits is None:
        return None
    name = {0: "sha256", 224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}.get(
        int(str(bits))
    )
    if name is None:
        return None
    return _hex_digest(name)(value)


def _unhex(value: object) -> bytes | None:
    if value is None:
        return None
    try:
        return bytes.fromhex(str(value))
    except ValueError:
        return None


def _inet_aton(value: object) -> int | None:
    try:
        return int(ipaddress.IPv4Address(str(value)))
    except (ValueError, ipaddress.AddressValueError):
        return None


def _str_to_date(value: object, fmt: object) -> str | None:
    if value is None or fmt is None:
        return None
    pattern = "".join(
        (_MYSQL_FORMAT.get(part[1], part) or part) if part.startswith("%") else part
        for part in re.findall(r"%.|[^%]+", str(fmt))
    )
    try:
        moment = dt.datetime.strptime(str(value), pattern)
    except ValueError:
        return None
    if any(tok in str(fmt) for tok in ("%H", "%i", "%s", "%S", "%T", "%h", "%r")):
        return _fmt_dt(moment)
    return moment.date().isoformat()


def _part(getter: Callable[[dt.datetime], int]) -> Callable[[object], int | None]:
    def extract(value: object) -> int | None:
        moment = _parse_dt(value)
        return None if moment is None else getter(moment)

    return extract


def _truncate(value: object, digits: object) -> float | int | None:
    if value is None or digits is None:
        return None
    n = int(float(str(digits)))
    number = Decimal(str(value))
    quantum = Decimal(1).scaleb(-n)
    result = (
        number.quantize(quantum, rounding="ROUND_DOWN")
        if n >= 0
        else ((number / quantum).to_integral_value(rounding="ROUND_DOWN") * quantum)
    )
    return int(result) if n <= 0 else float(result)


def _format(value: object, digits: object) -> str | None:
    if value is None or digits is None:
        return None
    n = max(int(float(str(digits))), 0)
    return f"{Decimal(str(value)):,.{n}f}"


def _locate(sub: object, text: object, pos: object = 1) -> int | None:
    if sub is None or text is None or pos is None:
        return None
    start = int(float(str(pos)))
    if start < 1:
        return 0
    return str(text).lower().find(str(sub).lower(), start - 1) + 1


def _concat_ws(sep: object, *values: object) -> str | None:
    if sep is None:
        return None
    return str(sep).join(str(v) for v in values if v is not None)


def _math(fn: Callable[..., float]) -> Callable[..., float | None]:
    def call(*args: object) -> float | None:
        if any(a is None for a in args):
            return None
        try:
            return fn(*(float(str(a)) for a in args))
        except (ValueError, OverflowError, ZeroDivisionError):
            return None

    return call


class FunctionHost:
    """Per-session state the user functions read: clock, time zone, last error."""

    def __init__(
        self, now: Callable[[], float], tz: Callable[[], dt.tzinfo], *, gtid_tags: bool = True
    ) -> None:
        self._now = now
        self._tz = tz
        self.gtid_tags = gtid_tags
        """The server's GTID syntax: tags from 8.3 (``GTID_SUBSET``/``GTID_SUBTRACT``)."""
        self.wait_check: Callable[[tuple[object, ...]], object] | None = None
        """Per-row ``WAIT_FOR_EXECUTED_GTID_SET`` (column arguments), set by the session."""
        self.error: SqlError | None = None
        self._random = random.Random()

    def local_now(self) -> dt.datetime:
        """The statement time in the session time zone, naive (as MySQL shows it)."""
        return dt.datetime.fromtimestamp(self._now(), self._tz()).replace(tzinfo=None)

    def utc_now(self) -> dt.datetime:
        """The statement time in UTC, naive."""
        return dt.datetime.fromtimestamp(self._now(), dt.UTC).replace(tzinfo=None)

    def guard(self, fn: Callable[..., object]) -> Callable[..., Any]:
        """Wrap ``fn`` so a :class:`SqlError` survives SQLite's exception wrapping."""

        def call(*args: object) -> Any:
            try:
                return fn(*args)
            except SqlError as exc:
                self.error = exc
                raise

        return call

    def now(self, fsp: object = 0) -> str:
        """NOW([fsp])."""
        return _fmt_dt(self.local_now(), int(str(fsp or 0)))

    def utc_timestamp(self, fsp: object = 0) -> str:
        """UTC_TIMESTAMP([fsp])."""
        return _fmt_dt(self.utc_now(), int(str(fsp or 0)))

    def curtime(self, fsp: object = 0) -> str:
        """CURTIME([fsp])."""
        return _fmt_dt(self.local_now(), int(str(fsp or 0)))[11:]

    def unix_timestamp(self, value: object = None) -> object:
        """UNIX_TIMESTAMP([datetime])."""
        if value is None:
            return int(self._now())
        moment = _parse_dt(value)
        if moment is None:
            return None
        stamp = moment.replace(tzinfo=self._tz()).timestamp()
        return int(stamp) if stamp.is_integer() else stamp

    def from_unixtime(self, value: object) -> str | None:
        """FROM_UNIXTIME(seconds)."""
        if value is None:
            return None
        seconds = float(str(value))
        moment = dt.datetime.fromtimestamp(seconds, self._tz()).replace(tzinfo=None)
        return _fmt_dt(moment, 6 if not seconds.is_integer() else 0)

    def rand(self, seed: object = None) -> float:
        """RAND([seed])."""
        if seed is not None:
            return random.Random(int(float(str(seed)))).random()
        return self._random.random()


def _gtid_subset(host: FunctionHost, a: object, b: object) -> int | None:
    if a is None or b is None:
        return None
    tags = host.gtid_tags
    return int(parse_gtid_set(str(a), tags=tags).issubset(parse_gtid_set(str(b), tags=tags)))


def _gtid_subtract(host: FunctionHost, a: object, b: object) -> str | None:
    if a is None or b is None:
        return None
    tags = host.gtid_tags
    return str(parse_gtid_set(str(a), tags=tags) - parse_gtid_set(str(b), tags=tags))


def register_functions(conn: sqlite3.Connection, host: FunctionHost) -> None:
    """Create every emulator function on ``conn``."""
    table: list[tuple[str, int, Callable[..., object]]] = [
        ("MY_NOW", -1, host.now),
        ("MY_UTC_TIMESTAMP", -1, host.utc_timestamp),
        ("MY_CURDATE", 0, lambda: host.local_now().date().isoformat()),
        ("MY_UTC_DATE", 0, lambda: host.utc_now().date().isoformat()),
        ("MY_CURTIME", -1, host.curtime),
        ("MY_UUID", 0, lambda: str(uuidlib.uuid1())),
        ("MY_DATE_FORMAT", 2, _date_format),
        ("MY_DATE_ADD", 4, _date_add),
        ("MY_FROM_UNIXTIME", 1, host.from_unixtime),
        ("MY_UNIX_TIMESTAMP", -1, host.unix_timestamp),
        ("MY_TIMESTAMPDIFF", 3, _timestampdiff),
        ("MY_TRUNCATE", 2, _truncate),
        ("MY_FORMAT", 2, _format),
        ("MY_LOCATE", -1, _locate),
        ("MY_RAND", -1, host.rand),
        ("GTID_SUBSET", 2, functools.partial(_gtid_subset, host)),
        ("GTID_SUBTRACT", 2, functools.partial(_gtid_subtract, host)),
        ("YEAR", 1, _part(lambda m: m.year)),
        ("MONTH", 1, _part(lambda m: m.month)),
        ("DAY", 1, _part(lambda m: m.day)),
        ("DAYOFMONTH", 1, _part(lambda m: m.day)),
        ("HOUR", 1, _part(lambda m: m.hour)),
        ("MINUTE", 1, _part(lambda m: m.minute)),
        ("SECOND", 1, _part(lambda m: m.second)),
        ("DAYOFWEEK", 1, _part(lambda m: m.isoweekday() % 7 + 1)),
        ("WEEKDAY", 1, _part(lambda m: m.weekday())),
        ("DAYOFYEAR", 1, _part(lambda m: m.timetuple().tm_yday)),
        ("STR_TO_DATE", 2, _str_to_date),
        ("CONCAT_WS", -1, _concat_ws),
        ("LPAD", 3, lambda s, n, p: _lpad(s, n, p, left=True)),
        ("RPAD", 3, lambda s, n, p: _lpad(s, n, p, left=False)),
        ("LEFT", 2, lambda s, n: None if s is None or n is None else str(s)[: max(int(n), 0)]),
        (
            "RIGHT",
            2,
            lambda s, n: (
                None if s is None or n is None else (str(s)[-int(n) :] if int(n) > 0 else "")
            ),
        ),
        ("REPEAT", 2, lambda s, n: None if s is None or n is None else str(s) * max(int(n), 0)),
        ("REVERSE", 1, lambda s: None if s is None else str(s)[::-1]),
        ("ASCII", 1, lambda s: None if s is None else (ord(str(s)[0]) if str(s) else 0)),
        ("MD5", 1, _hex_digest("md5")),
        ("SHA", 1, _hex_digest("sha1")),
        ("SHA1", 1, _hex_digest("sha1")),
        ("SHA2", 2, _sha2),
        ("UNHEX", 1, _unhex),
        ("FIELD", -1, _field),
        ("FIND_IN_SET", 2, _find_in_set),
        ("INET_ATON", 1, _inet_aton),
        ("POWER", 2, _math(math.pow)),
        ("POW", 2, _math(math.pow)),
        ("SQRT", 1, _math(math.sqrt)),
        ("EXP", 1, _math(math.exp)),
        ("LN", 1, _math(math.log)),
        ("LOG10", 1, _math(math.log10)),
        ("LOG2", 1, _math(math.log2)),
        ("FLOOR", 1, lambda x: None if x is None else math.floor(float(x))),
        ("CEIL", 1, lambda x: None if x is None else math.ceil(float(x))),
        ("CEILING", 1, lambda x: None if x is None else math.ceil(float(x))),
        ("SIGN", 1, lambda x: None if x is None else (float(x) > 0) - (float(x) < 0)),
        ("PI", 0, lambda: math.pi),
        ("BIT_LENGTH", 1, lambda s: None if s is None else len(str(s).encode()) * 8),
        ("OCTET_LENGTH", 1, lambda s: None if s is None else len(str(s).encode())),
    ]
    for name, nargs, fn in table:
        conn.create_function(name, nargs, host.guard(fn), deterministic=False)
    conn.create_function(
        ROW_WAIT_FUNCTION, -1, host.guard(lambda *args: _row_wait(host, args)), deterministic=False
    )


#: The SQLite function a ``WAIT_FOR_EXECUTED_GTID_SET`` with column arguments becomes.
ROW_WAIT_FUNCTION: Final = "MY_WAIT_FOR_EXECUTED_GTID_SET"


def _row_wait(host: FunctionHost, args: tuple[object, ...]) -> object:
    if host.wait_check is None:
        return None
    return host.wait_check(args)
