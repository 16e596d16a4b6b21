"""The report: one self-contained HTML page with PNG plots, and the same headline numbers for
the terminal.

Everything here works on :class:`ReportData`, plain Python values collected from the small
result tables, so rendering needs no Spark and no files: :func:`render_html` returns the page
and the images (the job entry point writes them), :func:`terminal_summary` returns a
``rich`` renderable.  Plots are drawn on ``matplotlib.figure.Figure`` objects directly (no
``pyplot`` global state).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

__all__ = [
    "LEVEL_ORDER",
    "UNPROVEN_REASONS",
    "Rendered",
    "ReportData",
    "audit_figure",
    "headline",
    "pinning_figure",
    "render_html",
    "terminal_summary",
    "waits_figure",
]

Row = Mapping[str, Any]

#: Levels from weakest to strongest, the order every table and plot uses.
LEVEL_ORDER: Final = ("eventual", "read_own_writes", "read_all_writes", "read_latest", "none")
_PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_LEVEL_COLORS: Final = {
    "eventual": "#9e9e9e",
    "read_own_writes": "#1f77b4",
    "read_all_writes": "#2ca02c",
    "read_latest": "#9467bd",
    "none": "#bdbdbd",
}
#: Why the audit could not decide a read (``analytics.audit.unproven_reason``).
UNPROVEN_REASONS: Final = {
    "no_sample_before": "no lag sample of the replica before the read (nor the read's own wait, "
    "nor what the router had learnt of the replica before it) shows the required source at all",
    "no_sample_after": "the last evidence before the read lacked the required GTID, and no lag "
    "sample of the replica after the read tells whether it was still missing",
    "applied_between": "the replica applied the required GTID between the last sample before "
    "the read and the first one after it: the traces cannot tell which came first",
    "digest_only": "the level's required set was recorded only as its digest (longer than the "
    "attribute limit), so it cannot be compared",
}
_STATUS_COLORS: Final = {"covered": "#2ca02c", "unproven": "#ffbf00", "stale": "#d62728"}
_DPI: Final = 110
_MAX_TABLE_ROWS: Final = 200


@dataclass(frozen=True, slots=True)
class ReportData:
    """What the report shows; every row is a mapping of column name to value."""

    #: Record counts and the time covered: statements, lag_samples, sessions, first_ns, last_ns.
    totals: Row
    #: ``metrics.lag_summary`` rows.
    lag_summary: Sequence[Row] = ()
    #: ``metrics.lag_windows`` rows, and the window width they use.
    lag_windows: Sequence[Row] = ()
    window_ns: int = 0
    #: ``metrics.cost_by_level`` rows.
    cost: Sequence[Row] = ()
    #: ``metrics.wait_histogram`` rows.
    wait_histogram: Sequence[Row] = ()
    #: ``metrics.read_summary`` rows (per level).
    reads: Sequence[Row] = ()
    #: ``metrics.pinning`` rows.
    pinning: Sequence[Row] = ()
    #: Proven violations: reads of guaranteed levels the audit showed ``stale``
    #: (``audit.VIOLATIONS`` rows), at most a few hundred, and how many there are in all.
    violations: Sequence[Row] = ()
    violation_count: int = 0
    #: Reads of guaranteed levels the audit could not decide: a few ``audit.VIOLATIONS`` rows
    #: (with ``why``, a key of ``audit.UNPROVEN_REASONS``), and ``(level, why, reads)`` counts
    #: over all of them.
    unproven: Sequence[Row] = ()
    unproven_reasons: Sequence[Row] = ()
    #: Replica names as the user gave them, by the ``host:port`` the traces route to.
    replica_names: Mapping[str, str] = field(default_factory=dict)
    #: Stale reads of ``eventual`` sessions (expected: that level promises nothing).
    eventual_stale: Sequence[Row] = ()
    #: Changes of primary role discovery recorded: ``start_ns``, ``role_previous``,
    #: ``role_primary`` (``host:port``), in time order.
    role_changes: Sequence[Row] = ()
    eventual_stale_count: int = 0
    #: Free-form notes shown under the headline (e.g. what could not be computed).
    notes: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Rendered:
    """The page and its images (PNG bytes by file name; the page embeds them too)."""

    html: str
    images: Mapping[str, bytes]


# --- numbers ------------------------------------------------------------------------------------


def _level_key(row: Row) -> int:
    level = row.get("level")
    return LEVEL_ORDER.index(level) if level in LEVEL_ORDER else len(LEVEL_ORDER)


def _sum(rows: Iterable[Row], name: str) -> int:
    return sum(int(row.get(name) or 0) for row in rows)


def _level_numbers(data: ReportData) -> dict[str, dict[str, Any]]:
    audit = {str(r.get("level")): r for r in data.reads}
    levels: dict[str, dict[str, Any]] = {}
    for row in sorted(data.cost, key=_level_key):
        level = str(row.get("level"))
        reads = int(row.get("reads") or 0)
        checked = audit.get(level, {})
        levels[level] = {
            "reads": reads,
            "replica_reads": int(row.get("replica_reads") or 0),
            "replica_share": int(row.get("replica_reads") or 0) / reads if reads else None,
            "violations": int(checked.get("stale") or 0),
            "unproven": int(checked.get("unproven") or 0),
            "waited": int(row.get("waited") or 0),
            "wait_p50_ms": row.get("wait_p50_ms"),
            "wait_p99_ms": row.get("wait_p99_ms"),
            "fallbacks": int(row.get("fallbacks") or 0),
            "timeouts": int(row.get("timeouts") or 0),
        }
    return levels


def headline(data: ReportData) -> dict[str, Any]:
    """The headline numbers: the terminal and the page show them, ``summary.json`` holds them
    under ``"headline"``.  A plain JSON-ready dict::

        {
          "statements": int, "lag_samples": int, "sessions": int,
          "reads": int, "replica_reads": int, "offload_ratio": float | None,
          "waits": int, "timeouts": int, "fallbacks": int,
          "worst_replica": str | None, "worst_lag_p99_ms": float | None,
          "audited_reads": int, "covered": int, "unproven": int, "stale": int,
          "guarantee_violations": int,   # stale reads of guaranteed levels
          "guarantee_unproven": int,
          "eventual_stale": int,         # stale reads of eventual sessions (no promise broken)
          "levels": {                    # per consistency level, weakest first
            "<level>": {
              "reads": int,              # reads (statement kind read) at that level
              "replica_reads": int,
              "replica_share": float | None,  # replica_reads / reads
              "violations": int,         # reads the audit proved stale (own writes missing)
              "unproven": int,           # replica reads the audit could not decide
              "waited": int,             # reads that waited for a replica
              "wait_p50_ms": float | None, "wait_p99_ms": float | None,  # over those reads
              "fallbacks": int,          # reads that wanted a replica and ran on the primary
              "timeouts": int,           # waits that timed out
            }, …
          }
        }

    ``violations`` of ``eventual`` are not broken promises (that level promises nothing):
    they are the reads that certainly missed the session's own earlier writes.
    """
    data = _named(data)
    reads = _sum(data.cost, "reads")
    replica_reads = _sum(data.cost, "replica_reads")
    guaranteed = [r for r in data.reads if r.get("level") not in ("eventual", "none", None)]
    worst_lag = max(
        (r for r in data.lag_summary if r.get("lag_p99_ms") is not None),
        key=lambda r: float(r["lag_p99_ms"]),
        default=None,
    )
    return {
        "statements": int(data.totals.get("statements") or 0),
        "lag_samples": int(data.totals.get("lag_samples") or 0),
        "sessions": int(data.totals.get("sessions") or 0),
        "reads": reads,
        "replica_reads": replica_reads,
        "offload_ratio": replica_reads / reads if reads else None,
        "waits": _sum(data.cost, "waited"),
        "timeouts": _sum(data.cost, "timeouts"),
        "fallbacks": _sum(data.cost, "fallbacks"),
        "worst_replica": worst_lag.get("replica") if worst_lag else None,
        "worst_lag_p99_ms": float(worst_lag["lag_p99_ms"]) if worst_lag else None,
        "audited_reads": _sum(data.reads, "replica_reads"),
        "covered": _sum(data.reads, "covered"),
        "unproven": _sum(data.reads, "unproven"),
        "stale": _sum(data.reads, "stale"),
        "guarantee_violations": _sum(guaranteed, "stale"),
        "guarantee_unproven": _sum(guaranteed, "unproven"),
        "eventual_stale": data.eventual_stale_count,
        "primary_changes": len(data.role_changes),
        "levels": _level_numbers(data),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * float(value):.1f} %"


def _when(ns: Any) -> str:
    if ns is None:
        return "—"
    moment = dt.datetime.fromtimestamp(int(ns) / 1e9, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(value: Any) -> str:
    if value is None:
        return "—"
    ms = float(value)
    return f"{ms / 1000:,.2f} s" if abs(ms) >= 1000 else f"{ms:,.1f} ms"


# --- plots --------------------------------------------------------------------------------------


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return buffer.getvalue()


def _style(axes: Any) -> None:
    axes.spines["top"].set_visible(False)
    axes.spines["right"].set_visible(False)
    axes.grid(axis="y", color="#e6e6e6", linewidth=0.8)
    axes.set_axisbelow(True)


def _time_scale(first_ns: int, last_ns: int) -> tuple[str, float]:
    """The unit of a time axis over ``first_ns..last_ns`` and its length in seconds."""
    span_s = max(1.0, (last_ns - first_ns) / 1e9)
    if span_s > 4 * 3600:
        return "h", 3600.0
    if span_s > 600:
        return "min", 60.0
    return "s", 1.0


def _lag_unit(rows: Sequence[Row]) -> tuple[str, float]:
    peak = max((float(r.get("lag_max_ms") or 0) for r in rows), default=0.0)
    return ("s", 1000.0) if peak >= 2000 else ("ms", 1.0)


def _series(
    rows: Sequence[Row], replica: str, prefix: str, first_ns: int, seconds: float
) -> list[tuple[float, float, float]]:
    points = []
    for row in rows:
        if row.get("replica") != replica or row.get(f"{prefix}_p50_ms") is None:
            continue
        x = (int(row["window_start_ns"]) - first_ns) / 1e9 / seconds
        points.append((x, float(row[f"{prefix}_p50_ms"]), float(row[f"{prefix}_p99_ms"])))
    return sorted(points)


def plot_lag(data: ReportData) -> bytes | None:
    """Lag over time per replica: end to end (top) and this hop only (bottom); the line is each
    window's median, the shaded band reaches its p99."""
    rows = data.lag_windows
    if not rows:
        return None
    replicas = sorted({str(r["replica"]) for r in rows})
    has_hop = any(r.get("hop_lag_p50_ms") is not None for r in rows)
    panels = [("lag", "end-to-end lag (applied − original commit)")]
    if has_hop:
        panels.append(("hop_lag", "per-hop lag (applied − immediate commit)"))
    unit, scale = _lag_unit(rows)
    figure = Figure(figsize=(10, 3.2 * len(panels)), layout="constrained")
    axes_list = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    first = min(int(r["window_start_ns"]) for r in rows)
    last = max(int(r["window_start_ns"]) for r in rows) + data.window_ns
    time_unit, seconds = _time_scale(first, last)
    for axes, (prefix, title) in zip(axes_list, panels, strict=True):
        for index, replica in enumerate(replicas):
            points = _series(rows, replica, prefix, first, seconds)
            if not points:
                continue
            color = _PALETTE[index % len(_PALETTE)]
            xs = [p[0] for p in points]
            medians = [p[1] / scale for p in points]
            axes.fill_between(
                xs, medians, [p[2] / scale for p in points], color=color, alpha=0.18,
                linewidth=0, step="post", label=f"{replica} median..p99",
            )  # fmt: skip
            axes.step(xs, medians, where="post", color=color, linewidth=1.8,
                      label=f"{replica} median")  # fmt: skip
        _style(axes)
        axes.set_title(title, loc="left", fontsize=11)
        axes.set_ylabel(f"lag ({unit})")
        axes.set_ylim(bottom=0)
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    for change in data.role_changes:
        x = (int(change["start_ns"]) - first) / 1e9 / seconds
        label = f"primary → {change['role_primary']}"
        for axes in axes_list:
            axes.axvline(x, color="#b91c1c", linestyle="--", linewidth=1.2)
        axes_list[0].annotate(
            label, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
            textcoords="offset points", fontsize=8, color="#b91c1c",
        )  # fmt: skip
    axes_list[-1].set_xlim(0, (last - first) / 1e9 / seconds)
    axes_list[-1].xaxis.set_major_locator(MaxNLocator(10))
    window_s = data.window_ns / 1e9
    axes_list[-1].set_xlabel(
        f"{time_unit} since {_when(first)[:19]} UTC  ·  each point: one {window_s:g} s window"
    )
    return _png(figure)


def _all_edges(found: set[float]) -> list[float]:
    """Every power-of-two bucket from the smallest found to the largest (empty ones too, so
    that the axis is a time scale), with the ``<1`` bucket when found."""
    powers = [e for e in found if e >= 1]
    edges = [0.0] if 0.0 in found else []
    if powers:
        edge = min(powers)
        while edge <= max(powers):
            edges.append(edge)
            edge *= 2
    return edges


def _bucket_label(edge: float) -> str:
    """A bucket's lower edge in ms, whatever its size (one unit on the axis)."""
    return "<1" if edge == 0 else f"{edge:,.0f}"


def waits_figure(data: ReportData) -> Figure | None:
    """How long reads waited for a replica, per level (power-of-two buckets; timeouts
    hatched)."""
    rows = data.wait_histogram
    if not rows:
        return None
    edges = _all_edges({float(r["bucket_ms"]) for r in rows})
    levels = sorted({str(r["level"]) for r in rows}, key=lambda lv: _level_key({"level": lv}))
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / max(1, len(levels))
    for li, level in enumerate(levels):
        xs = [i + (li - (len(levels) - 1) / 2) * width for i in range(len(edges))]
        bottom = [0] * len(edges)
        for outcome, hatch in (("satisfied", None), ("timeout", "///"), ("error", "xx")):
            counts = [
                sum(
                    int(r["waits"])
                    for r in rows
                    if r["level"] == level and float(r["bucket_ms"]) == edge
                    and r.get("outcome") == outcome
                )
                for edge in edges
            ]  # fmt: skip
            if not any(counts):
                continue
            label = level if outcome == "satisfied" else f"{level} ({outcome})"
            axes.bar(
                xs, counts, width=width, bottom=bottom,
                color=_LEVEL_COLORS.get(level, "#777777"), hatch=hatch,
                edgecolor="white" if hatch is None else "#333333", linewidth=0.5, label=label,
            )  # fmt: skip
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    axes.set_xticks(range(len(edges)), [_bucket_label(e) for e in edges])
    axes.set_xlabel("wait (ms, bucket lower edge)")
    counts = [int(r["waits"]) for r in rows if int(r["waits"]) > 0]
    if counts and max(counts) >= 100 * min(counts):  # a long tail: only a log scale shows it
        axes.set_yscale("log")
        axes.set_ylim(bottom=0.8)
        axes.set_ylabel("reads (log scale)")
    else:
        axes.set_ylabel("reads")
    axes.set_title("time reads waited for a replica to catch up", loc="left", fontsize=11)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    _style(axes)
    axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def plot_waits(data: ReportData) -> bytes | None:
    """:func:`waits_figure` as PNG."""
    figure = waits_figure(data)
    return None if figure is None else _png(figure)


def plot_offload(data: ReportData) -> bytes | None:
    """Per level, the share of reads served by replicas and why the others ran on the
    primary."""
    rows = sorted(data.cost, key=_level_key)
    if not rows:
        return None
    figure = Figure(figsize=(10, 0.6 + 0.55 * len(rows)), layout="constrained")
    axes = figure.subplots()
    labels = [str(r["level"]) for r in rows]
    parts: tuple[tuple[str, Callable[[Row], int], str], ...] = (
        ("replica", lambda r: int(r["replica_reads"]), "#2ca02c"),
        ("primary: fallback", lambda r: int(r["fallbacks"]) + int(r["timeout_errors"]), "#d62728"),
        (
            "primary: other reasons",
            lambda r: int(r["reads"]) - int(r["replica_reads"]) - int(r["fallbacks"])
            - int(r["timeout_errors"]),
            "#bdbdbd",
        ),
    )  # fmt: skip
    left = [0.0] * len(rows)
    for name, value, color in parts:
        shares = [value(r) / int(r["reads"]) * 100 if int(r["reads"]) else 0.0 for r in rows]
        axes.barh(labels, shares, left=left, color=color, label=name, height=0.6)
        for y, (share, start) in enumerate(zip(shares, left, strict=True)):
            if share >= 6:
                axes.text(
                    start + share / 2, y, f"{share:.0f}%", ha="center", va="center",
                    fontsize=9, color="white" if color != "#bdbdbd" else "#333333",
                )  # fmt: skip
        left = [a + b for a, b in zip(left, shares, strict=True)]
    axes.set_xlim(0, 100)
    axes.invert_yaxis()
    axes.set_xlabel("share of reads (%)")
    axes.set_title("offload: where reads ran, by consistency level", loc="left", fontsize=11)
    axes.legend(loc="upper left", bbox_to_anchor=(0.0, -0.25), fontsize=8, frameon=False, ncols=3)
    axes.spines["top"].set_visible(False)
    axes.spines["right"].set_visible(False)
    return _png(figure)


def audit_figure(data: ReportData) -> Figure | None:
    """Per level, the audit's verdicts on replica reads as shares of them (a linear axis), each
    bar labelled with its counts, so that a handful of stale reads among millions is read,
    not guessed from a bar's length."""
    rows = sorted(data.reads, key=_level_key)
    if not rows:
        return None
    figure = Figure(figsize=(10, 0.8 + 0.55 * len(rows)), layout="constrained")
    axes = figure.subplots()
    labels = [str(r["level"]) for r in rows]
    left = [0.0] * len(rows)
    for status in ("covered", "unproven", "stale"):
        values = [int(r.get(status) or 0) for r in rows]
        totals = [int(r.get("replica_reads") or 0) for r in rows]
        shares = [100 * v / t if t else 0.0 for v, t in zip(values, totals, strict=True)]
        axes.barh(labels, shares, left=left, color=_STATUS_COLORS[status], label=status,
                  height=0.6)  # fmt: skip
        left = [a + b for a, b in zip(left, shares, strict=True)]
    for y, row in enumerate(rows):
        counts = "  ".join(
            f"{status} {int(row.get(status) or 0):,}" for status in ("covered", "unproven", "stale")
        )
        axes.text(101, y, counts, va="center", fontsize=8)
    axes.set_xlim(0, 100)
    axes.invert_yaxis()
    axes.set_xlabel("share of the level's replica reads (%)")
    axes.set_title("read-your-writes audit of replica reads", loc="left", fontsize=11)
    axes.legend(loc="upper left", bbox_to_anchor=(0.0, -0.3), fontsize=8, frameon=False, ncols=3)
    axes.spines["top"].set_visible(False)
    axes.spines["right"].set_visible(False)
    return figure


def plot_audit(data: ReportData) -> bytes | None:
    """:func:`audit_figure` as PNG."""
    figure = audit_figure(data)
    return None if figure is None else _png(figure)


def _pins(data: ReportData) -> list[Row]:
    """The pinning rows of sessions pinned to the primary, by pin reason (the other reasons a
    read ran on the primary, fallbacks included, are the offload chart's)."""
    pinned = [r for r in data.pinning if r.get("reason") == "pinned"]
    return sorted(pinned, key=lambda r: (-int(r["reads"]), str(r.get("detail"))))


def pinning_figure(data: ReportData) -> Figure | None:
    """Why sessions were pinned to the primary, by pin reason."""
    rows = _pins(data)[:12]
    if not rows:
        return None
    figure = Figure(figsize=(10, 0.6 + 0.45 * len(rows)), layout="constrained")
    axes = figure.subplots()
    labels = [str(r.get("detail") or "unknown") for r in rows]
    reads = [int(r["reads"]) for r in rows]
    axes.barh(labels, reads, color="#8c564b", height=0.6)
    for y, (value, row) in enumerate(zip(reads, rows, strict=True)):
        axes.text(value, y, f" {value:,} reads, {int(row['sessions']):,} sessions", va="center",
                  fontsize=8)  # fmt: skip
    axes.invert_yaxis()
    axes.set_xlabel("reads of pinned sessions (run on the primary)")
    axes.set_title("why sessions were pinned to the primary", loc="left", fontsize=11)
    axes.spines["top"].set_visible(False)
    axes.spines["right"].set_visible(False)
    axes.set_xlim(0, max(reads) * 1.35)
    return figure


def plot_pinning(data: ReportData) -> bytes | None:
    """:func:`pinning_figure` as PNG."""
    figure = pinning_figure(data)
    return None if figure is None else _png(figure)


_PLOTS: Final[tuple[tuple[str, str, Callable[[ReportData], bytes | None]], ...]] = (
    ("lag.png", "Replica lag over time", plot_lag),
    ("offload.png", "Offload by level", plot_offload),
    ("waits.png", "Wait times", plot_waits),
    ("audit.png", "Audit", plot_audit),
    ("pinning.png", "Pinning: why sessions were pinned to the primary", plot_pinning),
)


# --- HTML -----------------------------------------------------------------------------------------

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1160px;margin:0 auto;padding:20px 24px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.sub{color:#666;margin-bottom:14px}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:8px}
.card{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:6px 12px}
.card .v{font-size:20px;font-weight:600} .card .k{color:#666;font-size:12px}
.ok .v{color:#2ca02c} .bad .v{color:#d62728} .warn .v{color:#b38600}
.verdict{margin:12px 0 0;font-weight:600} .verdict.bad{color:#d62728}
.verdict.ok{color:#2ca02c}
img{max-width:100%;background:#fff;border:1px solid #e3e3e3;border-radius:8px}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;background:#fff;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:right}
td{white-space:nowrap} td.w{white-space:normal;overflow-wrap:anywhere;min-width:9em}
th{background:#f3f3f3;position:sticky;top:0;vertical-align:bottom} td.l,th.l{text-align:left}
.note{color:#555;font-size:13px} .empty{color:#2ca02c;font-weight:600}
details{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:8px 12px}
summary{cursor:pointer;font-weight:600}
"""


def _card(label: str, value: str, tone: str = "") -> str:
    return (
        f'<div class="card {tone}"><div class="v">{html.escape(value)}</div>'
        f'<div class="k">{html.escape(label)}</div></div>'
    )


#: Columns whose values may wrap (long identifiers), so that tables fit the page.
_WRAPPED: Final = frozenset({"session_id", "why"})


def _table(rows: Sequence[Row], columns: Sequence[tuple[str, str, Callable[[Any], str]]]) -> str:
    head = "".join(
        f'<th class="{"l" if i == 0 else ""}">{html.escape(title)}</th>'
        for i, (_, title, _f) in enumerate(columns)
    )
    body = []
    for row in rows[:_MAX_TABLE_ROWS]:
        cells = "".join(
            f'<td class="{"l" if i == 0 else ""}{" w" if name in _WRAPPED else ""}">'
            f"{html.escape(fmt(row.get(name)))}</td>"
            for i, (name, _t, fmt) in enumerate(columns)
        )
        body.append(f"<tr>{cells}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _channel(value: Any) -> str:
    """A replication channel's name; the unnamed one is the default channel."""
    return "(default)" if value in (None, "") else str(value)


_VIOLATION_COLUMNS: Final = (
    ("start_ns", "read at (UTC)", _when),
    ("level", "level", _fmt),
    ("session_id", "session", _fmt),
    ("replica", "replica", _fmt),
    ("route_reason", "routed because", _fmt),
    ("source", "source", _fmt),
    ("required_high", "needed GNO", _fmt),
    ("executed_low", "replica had ≥", _fmt),
    ("executed_high", "replica had ≤", _fmt),
)

_UNPROVEN_COLUMNS: Final = (
    ("start_ns", "read at (UTC)", _when),
    ("level", "level", _fmt),
    ("session_id", "session", _fmt),
    ("replica", "replica", _fmt),
    ("why", "why undecided", _fmt),
    ("source", "source", _fmt),
    ("required_high", "needed GNO", _fmt),
    ("executed_low", "replica had ≥", _fmt),
    ("executed_high", "replica had ≤", _fmt),
)

_LAG_COLUMNS: Final = (
    ("replica", "replica", _fmt),
    ("channel", "channel", _channel),
    ("samples", "samples", _fmt),
    ("lag_p50_ms", "p50", _ms),
    ("lag_p95_ms", "p95", _ms),
    ("lag_p99_ms", "p99", _ms),
    ("lag_max_ms", "max", _ms),
    ("hop_lag_p50_ms", "hop p50", _ms),
    ("hop_lag_p95_ms", "hop p95", _ms),
    ("hop_lag_p99_ms", "hop p99", _ms),
    ("hop_lag_max_ms", "hop max", _ms),
)

_COST_COLUMNS: Final = (
    ("level", "level", _fmt),
    ("reads", "reads", _fmt),
    ("offload_ratio", "offload", _pct),
    ("waited", "waited", _fmt),
    ("wait_p50_ms", "wait p50", _ms),
    ("wait_p95_ms", "wait p95", _ms),
    ("wait_p99_ms", "wait p99", _ms),
    ("timeouts", "timeouts", _fmt),
    ("fallbacks", "fallbacks", _fmt),
    ("read_p50_ms", "read p50", _ms),
    ("read_p95_ms", "read p95", _ms),
    ("added_p50_ms", "+p50 vs eventual", _ms),
    ("added_p95_ms", "+p95 vs eventual", _ms),
)

_READ_COLUMNS: Final = (
    ("level", "level", _fmt),
    ("replica_reads", "replica reads", _fmt),
    ("covered", "covered", _fmt),
    ("unproven", "unproven", _fmt),
    ("stale", "stale", _fmt),
    ("behind_p50_ms", "behind p50", _ms),
    ("behind_p95_ms", "behind p95", _ms),
    ("behind_p99_ms", "behind p99", _ms),
    ("behind_max_ms", "behind max", _ms),
    ("behind_transactions_p95", "behind p95 (trx)", _fmt),
    ("behind_transactions_max", "behind max (trx)", _fmt),
)


def _cards(numbers: Mapping[str, Any]) -> str:
    violations = int(numbers["guarantee_violations"])
    unproven = int(numbers["guarantee_unproven"])
    return "".join(
        [
            _card("statements", _fmt(numbers["statements"])),
            _card("sessions", _fmt(numbers["sessions"])),
            _card("reads offloaded to replicas", _pct(numbers["offload_ratio"])),
            _card("reads that waited", _fmt(numbers["waits"])),
            _card(
                "wait timeouts", _fmt(numbers["timeouts"]), "warn" if numbers["timeouts"] else ""
            ),
            _card("fallbacks to primary", _fmt(numbers["fallbacks"])),
            _card(
                f"worst replica lag p99 ({numbers['worst_replica'] or '—'})",
                _ms(numbers["worst_lag_p99_ms"]),
            ),
            _card(
                "proven guarantee violations",
                _fmt(violations),
                "bad" if violations else "ok",
            ),
            _card("guaranteed reads unproven", _fmt(unproven), "warn" if unproven else "ok"),
            _card("stale eventual reads", _fmt(numbers["eventual_stale"])),
        ]
    )


def _named(data: ReportData) -> ReportData:
    """``data`` with every replica shown by the name the user gave it (when the traces
    carry one), not by the ``host:port`` routing uses."""
    names = data.replica_names
    if not names:
        return data

    def rename(rows: Sequence[Row]) -> list[Row]:
        return [
            {**row, "replica": names.get(str(row.get("replica")), row.get("replica"))}
            if "replica" in row
            else row
            for row in rows
        ]

    return replace(
        data,
        lag_summary=rename(data.lag_summary),
        lag_windows=rename(data.lag_windows),
        violations=rename(data.violations),
        unproven=rename(data.unproven),
        eventual_stale=rename(data.eventual_stale),
        role_changes=[
            {
                **row,
                "role_primary": names.get(str(row["role_primary"]), row["role_primary"]),
                "role_previous": names.get(str(row["role_previous"]), row["role_previous"]),
            }
            for row in data.role_changes
        ],
        replica_names={},
    )


def _role_changes_note(data: ReportData) -> str:
    """The changes of primary the chart marks (dashed red lines), with their times."""
    if not data.role_changes:
        return ""
    changes = "; ".join(
        f"{_when(int(c['start_ns']))[:23]} UTC: {c['role_previous']} → {c['role_primary']}"
        for c in data.role_changes
    )
    return f'<p class="note">The primary changed (dashed lines): {html.escape(changes)}.</p>'


def _figure(name: str, heading: str, png: bytes) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return (
        f'<h2 id="{name.removesuffix(".png")}">{html.escape(heading)}</h2>'
        f'<img alt="{html.escape(heading)}" src="data:image/png;base64,{encoded}">'
    )


def _verdict(data: ReportData, numbers: Mapping[str, Any]) -> str:
    """One line under the cards: proven violations point to their table, else the guarantee
    held as far as the traces show, with the undecided reads pointed to."""
    violations = int(numbers["guarantee_violations"])
    unproven = int(numbers["guarantee_unproven"])
    undecided = (
        f' {unproven:,} guaranteed replica reads could not be decided (<a href="#unproven">'
        "unproven reads</a>)."
        if unproven
        else ""
    )
    if violations:
        return (
            f'<p class="verdict bad">{violations:,} proven violations of the guarantee: reads '
            "a replica served while it still lacked a GTID the level required "
            f'(<a href="#violations">listed below</a>).{undecided}</p>'
        )
    return f'<p class="verdict ok">No proven violation of the guarantee.{undecided}</p>'


def _violations(data: ReportData) -> str:
    proven = [r for r in data.violations if r.get("status", "stale") == "stale"]
    shown = min(len(proven), _MAX_TABLE_ROWS)
    count = max(data.violation_count, len(proven))
    more = f", first {shown} shown" if count > shown else ""
    body = (
        _table(proven, _VIOLATION_COLUMNS)
        if proven
        else '<p class="empty">None: no replica read of a guaranteed level was shown to have '
        "missed a GTID its level required.</p>"
    )
    return (
        f'<h2 id="violations">Violations of the guarantee ({count:,}{more})</h2>'
        '<p class="note">Reads of a guaranteed level that a lag sample taken after them proves '
        "stale: the replica still lacked a GTID the session had written or its level "
        "required.</p>" + body
    )


def _unproven(data: ReportData) -> str:
    """The undecided reads, folded: counts per level and reason, what each reason means, and
    the first few reads."""
    counts = [r for r in data.unproven_reasons if int(r.get("reads") or 0)]
    total = sum(int(r["reads"]) for r in counts)
    if not total:
        return ""
    levels = sorted({str(r["level"]) for r in counts}, key=lambda lv: _level_key({"level": lv}))
    reasons = sorted({str(r["why"]) for r in counts}, key=lambda w: -sum(
        int(r["reads"]) for r in counts if r["why"] == w))  # fmt: skip
    head = "".join(f"<th>{html.escape(level)}</th>" for level in levels)
    lines = []
    for why in reasons:
        cells = "".join(
            f"<td>{_fmt(sum(int(r['reads']) for r in counts if r['why'] == why and r['level'] == level))}</td>"  # noqa: E501
            for level in levels
        )
        meaning = UNPROVEN_REASONS.get(why, "")
        lines.append(
            f'<tr><td class="l">{html.escape(why)}</td>{cells}'
            f'<td class="l w">{html.escape(meaning)}</td></tr>'
        )
    by_reason = (
        f'<div class="scroll"><table><thead><tr><th class="l">why</th>{head}'
        f'<th class="l">meaning</th></tr></thead><tbody>{"".join(lines)}</tbody></table></div>'
    )
    examples = (
        f'<p class="note">The first {min(len(data.unproven), _MAX_TABLE_ROWS):,}:</p>'
        + _table(data.unproven, _UNPROVEN_COLUMNS)
        if data.unproven
        else ""
    )
    return (
        f'<h2 id="unproven">Unproven reads of guaranteed levels ({total:,})</h2>'
        "<details><summary>Replica reads the audit could neither show covered nor prove stale, "
        "by level and why</summary>"
        '<p class="note">Not violations: the traces hold no lag sample, wait or replica state '
        "learnt before the read close enough to decide. Sampling the replicas more often "
        "decides more of them.</p>"
        f"{by_reason}{examples}</details>"
    )


def render_html(data: ReportData, title: str = "consistent — staleness report") -> Rendered:
    """The page (images embedded as data URIs) and the PNGs by file name.

    Order: the headline (cards and a one-line verdict), then the charts, each with its short
    per-replica or per-level table, then the long tables: proven violations, the unproven
    reads (folded) and the stale ``eventual`` reads."""
    data = _named(data)
    numbers = headline(data)
    images: dict[str, bytes] = {}
    sections: list[str] = []
    for name, heading, plot in _PLOTS:
        png = plot(data)
        if png is None:
            if name == "pinning.png":
                sections.append(
                    '<h2 id="pinning">Pinning</h2><p class="note">No session was pinned to the '
                    "primary.</p>"
                )
            continue
        images[name] = png
        sections.append(_figure(name, heading, png))
        if name == "lag.png":
            sections.append(_role_changes_note(data))
            sections.append(_table(sorted(data.lag_summary, key=lambda r: str(r["replica"])),
                                   _LAG_COLUMNS))  # fmt: skip
        elif name == "waits.png":
            sections.append(_table(sorted(data.cost, key=_level_key), _COST_COLUMNS))
        elif name == "audit.png":
            sections.append(_table(sorted(data.reads, key=_level_key), _READ_COLUMNS))
    eventual_html = (
        f'<h2 id="eventual">Stale reads of eventual sessions ({data.eventual_stale_count:,})</h2>'
        '<p class="note">Level <code>eventual</code> promises nothing; these are the reads that '
        "certainly missed the session's own earlier writes.</p>"
        + _table(data.eventual_stale, _VIOLATION_COLUMNS)
        if data.eventual_stale
        else ""
    )
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in data.notes)
    page = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{html.escape(title)}</h1>"
        f'<div class="sub">{_fmt(numbers["statements"])} statements and '
        f"{_fmt(numbers['lag_samples'])} lag samples from {_when(data.totals.get('first_ns'))} "
        f"to {_when(data.totals.get('last_ns'))} UTC</div>"
        f'<div class="cards">{_cards(numbers)}</div>{_verdict(data, numbers)}{notes}'
        f"{''.join(sections)}{_violations(data)}{_unproven(data)}{eventual_html}"
        "</main></body></html>"
    )
    return Rendered(page, images)


# --- terminal ----------------------------------------------------------------------------------


def terminal_summary(data: ReportData) -> RenderableType:
    """The headline numbers as a ``rich`` renderable."""
    data = _named(data)
    numbers = headline(data)
    top = Table.grid(padding=(0, 2))
    top.add_column(style="bold")
    top.add_column(justify="right")
    violations = int(numbers["guarantee_violations"])
    for label, value in (
        ("statements / sessions", f"{_fmt(numbers['statements'])} / {_fmt(numbers['sessions'])}"),
        ("reads offloaded", _pct(numbers["offload_ratio"])),
        ("waits / timeouts / fallbacks",
         f"{_fmt(numbers['waits'])} / {_fmt(numbers['timeouts'])} / "
         f"{_fmt(numbers['fallbacks'])}"),
        ("worst lag p99",
         f"{_ms(numbers['worst_lag_p99_ms'])} ({numbers['worst_replica'] or '—'})"),
        ("audited replica reads", _fmt(numbers["audited_reads"])),
    ):  # fmt: skip
        top.add_row(label, value)
    verdict = Text(
        f"guarantee violations: {violations:,}",
        style="bold red" if violations else "bold green",
    )
    verdict.append(
        f"   unproven: {numbers['guarantee_unproven']:,}   "
        f"stale eventual reads: {numbers['eventual_stale']:,}",
        style="default",
    )
    lag = Table(title="replica lag", title_justify="left", show_edge=False)
    for _, title, _f in _LAG_COLUMNS[:1] + _LAG_COLUMNS[3:]:
        lag.add_column(title, justify="right")
    for row in sorted(data.lag_summary, key=lambda r: str(r["replica"])):
        lag.add_row(*[f(row.get(n)) for n, _t, f in _LAG_COLUMNS[:1] + _LAG_COLUMNS[3:]])
    cost = Table(title="cost of consistency", title_justify="left", show_edge=False)
    chosen = [
        c for c in _COST_COLUMNS if c[0] not in ("read_p50_ms", "added_p50_ms", "wait_p99_ms")
    ]
    for _, title, _f in chosen:
        cost.add_column(title, justify="right")
    for row in sorted(data.cost, key=_level_key):
        cost.add_row(*[f(row.get(n)) for n, _t, f in chosen])
    reads = Table(title="audit and staleness at read time", title_justify="left", show_edge=False)
    for _, title, _f in _READ_COLUMNS:
        reads.add_column(title, justify="right")
    for row in sorted(data.reads, key=_level_key):
        reads.add_row(*[f(row.get(n)) for n, _t, f in _READ_COLUMNS])
    return Panel(Group(top, Text(), verdict, Text(), lag, Text(), cost, Text(), reads),
                 title="consistent analyze", expand=False)  # fmt: skip
