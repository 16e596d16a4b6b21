"""The live view of the workload: per level and path, what the sessions have done so far."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from consistent.demo.workload import LEVELS, PATHS, SessionTally, Totals, totals_by

__all__ = ["live_view", "pair_key"]


def pair_key(level: str, path: str) -> str:
    """The row name of a (level, path) pair."""
    return f"{level} · {path}"


def live_view(
    tallies: Sequence[SessionTally], started: float, seconds: float, now: float | None = None
) -> RenderableType:
    """A table of the sessions' counters so far, under a bar of the time elapsed."""
    elapsed = (time.monotonic() if now is None else now) - started
    summed = totals_by(tallies, lambda plan: pair_key(plan.level, plan.path))
    table = Table(title_justify="left", expand=False)
    table.add_column("level · path")
    for name in ("sessions", "statements", "reads", "on replicas", "stale reads seen", "errors"):
        table.add_column(name, justify="right")
    everything = Totals()
    for level in LEVELS:
        for path in PATHS:
            total = summed.get(pair_key(level, path))
            if total is None:
                continue
            everything = everything + total
            share = total.replica_share
            stale_style = "yellow" if level == "eventual" else "bold red"
            table.add_row(
                pair_key(level, path),
                f"{total.sessions}",
                f"{total.statements:,}",
                f"{total.reads:,}",
                f"{total.replica_reads:,} ({'—' if share is None else f'{100 * share:.0f} %'})",
                Text(f"{total.stale:,}", style=stale_style if total.stale else ""),
                Text(f"{total.errors:,}", style="red" if total.errors else ""),
            )
    rate = everything.statements / elapsed if elapsed > 0 else 0.0
    header = Text.assemble(
        ("workload ", "bold"),
        f"{min(elapsed, seconds):.0f}/{seconds:.0f} s · {everything.sessions} sessions · "
        f"{everything.statements:,} statements ({rate:,.0f}/s) · "
        f"{everything.replica_reads:,} reads on replicas · {everything.stale:,} stale",
    )
    bar = ProgressBar(total=seconds, completed=min(elapsed, seconds), width=60)
    return Group(header, bar, table)
