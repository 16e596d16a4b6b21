"""Every benchmark of ``bench/`` in one run: one JSON file of all figures and one table.

Run: ``.venv/bin/python bench/suite.py [--out PATH] [--only NAME ...] [--full] [--list]``.

Each script runs as its own subprocess (one failing or hanging does not stop the others), with
a timeout and with ``--json <file>``, the convention every ``bench/`` script follows: it writes
one JSON object of its figures there and keeps its readable output on stdout.  The suite
collects those objects under a header describing the machine (CPU, cores, RAM, Python, MariaDB,
date, load) into ``out/bench/results.json`` and prints one table.  Each script's output is kept
in ``out/bench/logs/NAME.log``.

Every figure in the table is a ratio measured side by side within one script's run, or an
absolute figure of the machine in the header.  A script that is missing, fails, times out or
writes no usable JSON shows as ``failed: <reason>``, with no figure, and the suite then exits
with status 1.

The default parameters keep the whole suite to about 15 minutes on a 2-core machine shared
with other work; ``--full`` runs the sizes the issues ask for (the proxy load for 3 minutes, the
analytics job at 1M and 10M records) and takes about twice as long.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from consistent.errors import Error

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "out" / "bench" / "results.json"
#: Seconds a script gets to exit after SIGTERM (MariaDB topologies clean up) before SIGKILL.
GRACE_SECONDS = 20.0
#: Lines of a script's stdout kept in the JSON file (the whole output is in its log).
OUTPUT_LINES = 200
#: Characters per line of the table when the output is not a terminal.
TABLE_WIDTH = 160

Figures = Mapping[str, Any]


class UnexpectedFigures(Error):
    """A script's JSON lacks a figure the table needs, or holds one of the wrong type."""


@dataclass(frozen=True)
class Row:
    """One line of the table: which comparison, which figure, the result and how it was got."""

    area: str
    figure: str
    result: str
    detail: str = ""


@dataclass(frozen=True)
class Script:
    """A ``bench/`` script as the suite runs it."""

    name: str
    path: str
    args: tuple[str, ...]
    timeout: float
    rows: Callable[[Figures], list[Row]]
    #: Arguments and timeout with ``--full`` (``None``: the same as without).
    full_args: tuple[str, ...] | None = None
    full_timeout: float | None = None
    #: The area its figures belong to, for the line that says it failed.
    area: str = ""

    def command(self, json_path: Path, full: bool, python: str = sys.executable) -> list[str]:
        args = self.full_args if full and self.full_args is not None else self.args
        return [python, str(ROOT / self.path), *args, "--json", str(json_path)]

    def reproduce(self, full: bool, python: str = sys.executable) -> str:
        """The command that reproduces this script's figures alone, as one would type it."""
        interpreter = Path(python)
        with contextlib.suppress(ValueError):
            interpreter = interpreter.relative_to(ROOT)
        args = self.full_args if full and self.full_args is not None else self.args
        return " ".join([str(interpreter), self.path, *args])

    def time_limit(self, full: bool) -> float:
        return self.full_timeout if full and self.full_timeout is not None else self.timeout


@dataclass(frozen=True)
class Outcome:
    """What running one script gave: its figures, or why there are none."""

    name: str
    command: str
    seconds: float
    figures: dict[str, Any] | None = None
    error: str | None = None
    output: str = ""


@dataclass(frozen=True)
class Section:
    """One script's part of the results: its rows, or the reason it failed."""

    name: str
    command: str
    seconds: float
    rows: list[Row]
    figures: dict[str, Any] | None
    error: str | None
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


# --- formatting -----------------------------------------------------------------------------------


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def rate(value: float, unit: str = "/s") -> str:
    """``54,749/s``-style: thousands separated, no decimals above 100."""
    return f"{value:,.0f}{unit}" if value >= 100 else f"{value:.1f}{unit}"


def number(figures: Figures, *keys: str) -> float:
    """The number at ``figures[k1][k2]...``; :class:`UnexpectedFigures` if absent or not one."""
    value: Any = figures
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            raise UnexpectedFigures(f"no {'.'.join(keys)!r} in the JSON")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnexpectedFigures(f"{'.'.join(keys)!r} is not a number: {value!r}")
    return float(value)


def mapping(figures: Figures, *keys: str) -> Mapping[str, Any]:
    value: Any = figures
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            raise UnexpectedFigures(f"no {'.'.join(keys)!r} in the JSON")
        value = value[key]
    if not isinstance(value, Mapping):
        raise UnexpectedFigures(f"{'.'.join(keys)!r} is not an object")
    return value


# --- rows of each script's figures ----------------------------------------------------------------

GTID_OPS = ("parse", "format", "union", "subset", "add", "contains")


def gtid_rows(figures: Figures) -> list[Row]:
    area = f"GTID ops vs mysql-replication {figures.get('mysql_replication', '')}".rstrip()
    by_op: dict[str, list[Mapping[str, Any]]] = {}
    rows = figures.get("rows")
    if not isinstance(rows, list) or not rows:
        raise UnexpectedFigures("no 'rows' list in the JSON")
    for row in rows:
        if not isinstance(row, Mapping) or not isinstance(row.get("op"), str):
            raise UnexpectedFigures(f"not a GTID row: {row!r}")
        by_op.setdefault(row["op"], []).append(row)
    out = []
    for op in sorted(by_op, key=lambda o: (GTID_OPS.index(o) if o in GTID_OPS else 99, o)):
        sized = sorted(by_op[op], key=lambda r: number(r, "uuids"))
        result = "  ".join(
            f"{number(r, 'uuids'):,.0f}: {ratio(number(r, 'ours_ops') / number(r, 'theirs_ops'))}"
            for r in sized
        )
        largest = sized[-1]
        detail = (
            f"at {number(largest, 'uuids'):,.0f} UUIDs: {rate(number(largest, 'ours_ops'))} vs "
            f"{rate(number(largest, 'theirs_ops'))}"
        )
        out.append(Row(area, f"{op}: ours / theirs ops/s, by UUIDs", result, detail))
    return out


def classify_rows(figures: Figures) -> list[Row]:
    area = f"classification vs sqlglot {figures.get('sqlglot', '')}".rstrip()
    out = []
    for key, label in (("corpus", "test corpus"), ("oltp_mix", "OLTP mix")):
        part = mapping(figures, key)
        ours, theirs = number(part, "ours_per_s"), number(part, "sqlglot_per_s")
        out.append(
            Row(
                area,
                f"{label} ({number(part, 'statements'):.0f} stmts): classify / parse_one",
                ratio(ours / theirs),
                f"{rate(ours)} vs {rate(theirs)}",
            )
        )
    return out


DBAPI_BACKENDS = (("mariadb", "MariaDB"), ("emulator", "emulator"))


def dbapi_rows(figures: Figures) -> list[Row]:
    backends = mapping(figures, "backends")
    if not backends:
        raise UnexpectedFigures("no backend measured")
    overhead, read_cost, lag = [], [], []
    for key, label in DBAPI_BACKENDS:
        if key not in backends:
            continue
        a, b = mapping(backends, key, "a"), mapping(backends, key, "b")
        overhead.append(
            Row(
                "wrapper overhead vs raw PyMySQL",
                f"no replicas / raw PyMySQL ({label})",
                ratio(number(a, "ratio")),
                f"{number(a, 'ours_us'):,.0f} vs {number(a, 'raw_us'):,.0f} us/stmt "
                f"(medians), {number(a, 'statements'):,.0f} stmts each",
            )
        )
        read_cost.append(
            Row(
                "read_own_writes latency vs eventual",
                f"caught-up replica read, read_own_writes / eventual ({label})",
                ratio(number(b, "ratio")),
                f"{number(b, 'row_us'):,.0f} vs {number(b, 'eventual_us'):,.0f} us (medians), "
                f"{number(b, 'row_waits'):.0f} waits in {number(b, 'reads'):,.0f} reads",
            )
        )
        c = backends[key].get("c") if isinstance(backends[key], Mapping) else None
        if c is None:
            lag.append(Row("offload and violations", f"under lag ({label})", "not run: no lag"))
            continue
        c = mapping(backends, key, "c")
        iterations = number(c, "iterations")
        lag.append(
            Row(
                "offload and violations",
                f"write-then-read under lag, read_own_writes ({label})",
                f"{number(c, 'replica_share'):.1%} on replicas, "
                f"{number(c, 'violations'):.0f} violations",
                f"control, eventual: {number(c, 'eventual_violations'):,.0f} stale of "
                f"{iterations:,.0f} ({number(c, 'eventual_replica_share'):.0%} on replicas); "
                f"{number(c, 'row_ms_per_iteration'):.2f} ms/iteration",
            )
        )
    return overhead + read_cost + lag


def aio_rows(figures: Figures) -> list[Row]:
    backends = mapping(figures, "backends")
    if not backends:
        raise UnexpectedFigures("no backend measured")
    overhead, read_cost = [], []
    for key, label in DBAPI_BACKENDS:
        if key not in backends:
            continue
        a, b = mapping(backends, key, "a"), mapping(backends, key, "b")
        overhead.append(
            Row(
                "asyncio form overhead vs raw aiomysql",
                f"no replicas / raw aiomysql ({label})",
                ratio(number(a, "ratio")),
                f"{number(a, 'ours_us'):,.0f} vs {number(a, 'raw_us'):,.0f} us/stmt "
                f"(medians), {number(a, 'statements'):,.0f} stmts each",
            )
        )
        read_cost.append(
            Row(
                "asyncio read_own_writes latency vs eventual",
                f"caught-up replica read, read_own_writes / eventual ({label})",
                ratio(number(b, "ratio")),
                f"{number(b, 'row_us'):,.0f} vs {number(b, 'eventual_us'):,.0f} us (medians), "
                f"{number(b, 'row_waits'):.0f} waits in {number(b, 'reads'):,.0f} reads",
            )
        )
    return overhead + read_cost


def tracing_rows(figures: Figures) -> list[Row]:
    area = "tracing overhead"
    on = number(figures, "modes", "on", "us_per_statement")
    off = number(figures, "modes", "off", "us_per_statement")
    raw = number(figures, "modes", "pymysql", "us_per_statement")
    statements = number(figures, "rounds") * number(figures, "block")
    return [
        Row(
            area,
            "tracing on / off, DB-API on MariaDB (median of rounds)",
            ratio(number(figures, "on_off_ratio")),
            f"{on:,.0f} vs {off:,.0f} us/stmt, {statements:,.0f} stmts each; "
            f"{number(figures, 'thread_cpu_extra_us'):+.1f} us CPU/stmt; "
            f"{number(figures, 'dropped'):.0f} spans dropped",
        ),
        Row(
            area,
            "tracing off / raw PyMySQL (median of rounds)",
            ratio(number(figures, "off_raw_ratio")),
            f"{off:,.0f} vs {raw:,.0f} us/stmt",
        ),
    ]


EMULATOR_WORKLOADS = (("select1", "SELECT 1"), ("point", "point SELECT"), ("insert", "INSERT"))


def emulator_rows(figures: Figures) -> list[Row]:
    area = "emulator speed vs MariaDB"
    backends = mapping(figures, "backends")
    names = list(backends)
    if len(names) != 2:
        raise UnexpectedFigures(f"needs the emulator and MariaDB, got {names}")
    emulator, mariadb = names
    out = []
    for key, label in EMULATOR_WORKLOADS:
        emu_qps = number(backends, emulator, key, "qps")
        real_qps = number(backends, mariadb, key, "qps")
        cpu = [backends[n][key].get("cpu_us_per_query") for n in (emulator, mariadb)]
        cpu_text = (
            f"; server CPU {cpu[0]:,.0f} vs {cpu[1]:,.0f} us/query"
            if all(isinstance(c, int | float) for c in cpu)
            else ""
        )
        out.append(
            Row(
                area,
                f"{label}: emulator / MariaDB queries/s",
                ratio(emu_qps / real_qps),
                f"{emu_qps:,.0f} vs {real_qps:,.0f} qps{cpu_text}",
            )
        )
    return out


def _targets(figures: Figures) -> dict[str, Mapping[str, Any]]:
    """``{label: {"qps", "vs_direct", ...}}``: the proxy bench's ``targets``, in its order."""
    targets = mapping(figures, "targets")
    return {str(k): v for k, v in targets.items() if isinstance(v, Mapping)}


def proxy_rows(figures: Figures) -> list[Row]:
    workload = figures.get("workload", "oltp_point_select")
    area = f"proxy vs direct, sysbench {workload}, {figures.get('threads', '?')} threads"
    targets = _targets(figures)
    direct_name = next((n for n in targets if "direct" in n.lower()), None)
    if direct_name is None:
        raise UnexpectedFigures(f"no direct target in {list(targets)}")
    direct = targets[direct_name]
    out = [
        Row(
            area,
            f"{direct_name} (absolute, this machine)",
            rate(number(direct, "qps"), " QPS"),
            f"p50 {number(direct, 'p50_ms'):.2f} ms, p95 {number(direct, 'p95_ms'):.2f} ms",
        )
    ]
    for name, target in targets.items():
        if name == direct_name:
            continue
        forwarder = target.get("vs_uvloop_forwarder")
        vs_forwarder = (
            f", {ratio(number(target, 'vs_uvloop_forwarder'))} of the uvloop forwarder"
            if forwarder is not None and "forwarder" not in name.lower()
            else ""
        )
        out.append(
            Row(
                area,
                f"{name.strip()} / direct QPS",
                ratio(number(target, "vs_direct")),
                f"{rate(number(target, 'qps'), ' QPS')}{vs_forwarder}; added p50 "
                f"{number(target, 'added_p50_ms'):+.2f} ms, p95 "
                f"{number(target, 'added_p95_ms'):+.2f} ms",
            )
        )
    headline = figures.get("proxy_vs_uvloop_forwarder")
    if headline is not None:
        rounds = figures.get("proxy_vs_uvloop_forwarder_per_round") or []
        goal = figures.get("proxy_vs_uvloop_forwarder_target")
        out.append(
            Row(
                area,
                "our proxy (primary only) / uvloop forwarder QPS, median of rounds"
                + (f" (target >= {goal}x)" if goal is not None else ""),
                ratio(number(figures, "proxy_vs_uvloop_forwarder")),
                "rounds: " + " ".join(ratio(float(r)) for r in rounds) if rounds else "",
            )
        )
    return out


def proxy_load_rows(figures: Figures) -> list[Row]:
    area = "proxy memory per connection"
    clients = number(figures, "clients")
    return [
        Row(
            area,
            f"RSS per idle client connection, {clients:,.0f} clients (absolute, this machine)",
            f"{number(figures, 'rss_per_connection_kb'):,.1f} KiB",
            f"RSS {number(figures, 'rss_start_mb'):,.0f} MB at start, "
            f"{number(figures, 'rss_idle_mb'):,.0f} MB with every client idle (target <= "
            f"{number(figures, 'rss_idle_target_mb'):,.0f} MB)",
        ),
        Row(
            area,
            f"{number(figures, 'seconds'):.0f} s of write-then-read by every client",
            f"{number(figures, 'errors'):.0f} errors, {number(figures, 'violations'):.0f} "
            "violations",
            f"{number(figures, 'queries'):,.0f} queries, peak RSS "
            f"{number(figures, 'rss_peak_mb'):,.0f} MB, "
            f"{number(figures, 'leaked_backend_connections'):.0f} backend connections leaked",
        ),
    ]


def proxy_pool_clients_rows(figures: Figures) -> list[Row]:
    area = "proxy pool at scale"
    clients = number(figures, "clients")
    return [
        Row(
            area,
            f"{clients:,.0f} clients through the pooled proxy, MariaDB max_connections "
            f"{number(figures, 'server_max_connections'):.0f}: logged in, errors",
            f"{number(figures, 'logged_in'):,.0f} of {clients:,.0f}, "
            f"{number(figures, 'errors'):.0f} errors",
            f"{number(figures, 'transactions'):,.0f} transactions, "
            f"{number(figures, 'wrong_reads'):.0f} wrong reads{_load_text(figures.get('load'))}",
        ),
        Row(
            area,
            "backend connections: the pool at most / its maximum (MariaDB's max used)",
            f"{number(figures, 'pool_size_peak'):.0f} / "
            f"{number(figures, 'pool_max_connections'):.0f}",
            f"Max_used_connections {number(figures, 'server_max_used_connections'):.0f}; "
            f"up to {number(figures, 'pool_waiting_peak'):,.0f} sessions queued",
        ),
        Row(
            area,
            "proxy RSS: start / every client idle / peak (absolute, this machine)",
            f"{number(figures, 'rss_start_mb'):.0f} / {number(figures, 'rss_idle_mb'):.0f} / "
            f"{number(figures, 'rss_peak_mb'):.0f} MB",
        ),
    ]


def proxy_connect_per_txn_rows(figures: Figures) -> list[Row]:
    area = "proxy connect per transaction"
    out = []
    for name in ("pymysql", "pymysql_read", "sysbench"):
        if name not in figures:
            continue
        tps = mapping(figures, name, "tps")
        out.append(
            Row(
                area,
                f"{name}: connect, one transaction, disconnect; pooled proxy / multiplexing off "
                "/ direct, transactions per second",
                f"{ratio(number(figures, name, 'multiplexing_over_direct'))} / "
                f"{ratio(number(figures, name, 'no_multiplexing_over_direct'))} of direct",
                f"direct {rate(number(tps, 'direct'))}, pooled {rate(number(tps, 'multiplexing'))},"
                f" multiplexing off {rate(number(tps, 'no_multiplexing'))}; "
                f"{number(figures, 'threads'):.0f} threads{_load_text(figures.get('load'))}",
            )
        )
    return out


def proxy_bigpackets_rows(figures: Figures) -> list[Row]:
    area = "proxy under large packets"
    loaded = mapping(figures, "loaded")
    idle = mapping(figures, "idle")
    rss = mapping(figures, "rss_mb")
    token = mapping(figures, "token_set")
    return [
        Row(
            area,
            f"p99 of SELECT 1 beside {number(figures, 'size_mb'):.0f} MB queries "
            f"(target <= {number(figures, 'p99_target_ms'):.0f} ms)",
            f"{number(loaded, 'p99_ms'):.1f} ms",
            f"alone {number(idle, 'p99_ms'):.1f} ms; max {number(loaded, 'max_ms'):.0f} ms; "
            f"load {number(figures, 'load_mb_per_second'):.1f} MB/s; monitor's last poll at "
            f"most {number(figures, 'monitor_max_staleness_s'):.2f} s old",
        ),
        Row(
            area,
            "proxy RSS, six parallel 50 MB queries: before / peak / after",
            f"{number(rss, 'before'):.0f} / {number(rss, 'peak'):.0f} / "
            f"{number(rss, 'after'):.0f} MB",
            f"{number(figures, 'rss_clients_failed'):.0f} clients failed",
        ),
        Row(
            area,
            f"SET of a {number(token, 'bytes') / 1e6:.1f} MB token",
            f"{number(token, 'seconds') * 1000:.1f} ms",
            f"{token.get('answer', '')}; other session's slowest SELECT 1 meanwhile "
            f"{number(token, 'prober_max_ms'):.0f} ms",
        ),
    ]


def proxy_bulk_rows(figures: Figures) -> list[Row]:
    area = "proxy bulk executemany"
    return [
        Row(
            area,
            f"MariaDB Connector/Python executemany of {number(figures, 'rows'):,.0f} rows: "
            "proxy / direct time",
            ratio(number(figures, "proxy_over_direct")),
            f"direct {number(figures, 'direct_seconds'):.3f} s, proxy "
            f"{number(figures, 'proxy_seconds'):.3f} s (bulk through the proxy: "
            f"{figures.get('bulk_proxy')})",
        )
    ]


def _load_text(load: object) -> str:
    """``; load 18.0 -> 7.5`` from a run's load average at its start and end, if given."""
    if isinstance(load, list) and len(load) == 2 and all(isinstance(x, int | float) for x in load):
        return f"; load {load[0]:.1f} -> {load[1]:.1f}"
    return ""


def analytics_rows(figures: Figures) -> list[Row]:
    area = f"analytics scale (Spark {figures.get('master', 'local[2]')})"
    runs = figures.get("runs")
    if not isinstance(runs, list) or not runs:
        raise UnexpectedFigures("no 'runs' list in the JSON")
    out = []
    for run in sorted(runs, key=lambda r: number(r, "records")):
        records, seconds = number(run, "records"), number(run, "seconds")
        timed = (
            "every job after ingest; input generated untimed"
            if run.get("input") == "synthetic"
            else "the full job"
        )
        out.append(
            Row(
                area,
                f"{records:,.0f} {run.get('input', '')} records (absolute, this machine)",
                rate(records / seconds, " records/s"),
                f"{seconds:,.1f} s, {timed}{_load_text(run.get('load_average'))}",
            )
        )
    return out


FAULT_LATENCIES = (
    ("black_hole", "black-hole replica"),
    ("frozen", "frozen replica"),
    ("frozen_reads", "frozen replica, reads only"),
)


def faults_rows(figures: Figures) -> list[Row]:
    forms = mapping(figures, "forms")
    if not forms:
        raise UnexpectedFigures("no form measured")
    bound = number(figures, "bound_ms")
    out = []
    for form in ("wrapper", "proxy"):
        if form not in forms:
            continue
        area = f"server faults through the {form}"
        for key, label in FAULT_LATENCIES:
            without, with_ = mapping(forms, form, key, "without"), mapping(forms, form, key, "with")
            worst = number(with_, "worst_ms")
            out.append(
                Row(
                    area,
                    f"{label}: worst / p99 read, without -> with the fault",
                    f"{number(without, 'worst_ms'):,.0f} / {number(without, 'p99_ms'):,.1f} ms"
                    f" -> {worst:,.0f} / {number(with_, 'p99_ms'):,.1f} ms",
                    f"bound {bound:,.0f} ms ({'within' if worst <= bound else 'EXCEEDED'}); "
                    f"{number(with_, 'reads'):,.0f} reads",
                )
            )
        without, with_ = (
            mapping(forms, form, "stuck", "without"),
            mapping(forms, form, "stuck", "with"),
        )
        out.append(
            Row(
                area,
                "the only replica behind wait_timeout: reads/s, without -> with",
                f"{rate(number(without, 'reads_per_s'))} -> {rate(number(with_, 'reads_per_s'))}",
                f"reads taking a full wait: {number(without, 'slow_reads'):.0f} -> "
                f"{number(with_, 'slow_reads'):.0f}",
            )
        )
        again = mapping(forms, form, "restart")
        out.append(
            Row(
                area,
                "a restarted replica serves reads again after",
                f"{number(again, 'seconds_to_serve'):.2f} s",
                f"monitor interval {number(again, 'monitor_interval'):.2f} s",
            )
        )
    return out


#: Every script, in the order they run (cheap and pure first), with its time limit in seconds.
SCRIPTS: tuple[Script, ...] = (
    Script("gtid", "bench/gtid.py", (), 240, gtid_rows, area="GTID ops"),
    Script("classify", "bench/classify.py", (), 240, classify_rows, area="classification"),
    Script("dbapi", "bench/dbapi.py", ("--scale", "2"), 600, dbapi_rows, area="DB-API wrapper"),
    Script("aio", "bench/aio.py", ("--scale", "2"), 600, aio_rows, area="asyncio form"),
    Script("tracing", "bench/tracing.py", (), 300, tracing_rows, area="tracing overhead"),
    Script("emulator", "bench/emulator.py", (), 300, emulator_rows, area="emulator speed"),
    Script(
        "proxy",
        "bench/proxy.py",
        ("--seconds", "6", "--rounds", "3"),
        600,
        proxy_rows,
        full_args=("--seconds", "10", "--rounds", "3"),
        full_timeout=900,
        area="proxy vs direct",
    ),
    Script(
        "proxy_rw",
        "bench/proxy.py",
        ("--workload", "oltp_read_write", "--seconds", "6", "--rounds", "2"),
        600,
        proxy_rows,
        full_args=("--workload", "oltp_read_write", "--seconds", "10", "--rounds", "3"),
        full_timeout=900,
        area="proxy vs direct, read/write",
    ),
    Script(
        "proxy_load",
        "bench/proxy_load.py",
        ("--clients", "2000", "--seconds", "20"),
        420,
        proxy_load_rows,
        full_args=("--clients", "2000", "--seconds", "180"),
        full_timeout=900,
        area="proxy memory per connection",
    ),
    Script(
        "proxy_pool_clients",
        "bench/proxy_pool_clients.py",
        ("--clients", "5000"),
        600,
        proxy_pool_clients_rows,
        area="proxy pool at scale",
    ),
    Script(
        "proxy_connect_per_txn",
        "bench/proxy_connect_per_txn.py",
        (),
        600,
        proxy_connect_per_txn_rows,
        area="proxy connect per transaction",
    ),
    Script("faults", "bench/faults.py", (), 900, faults_rows, area="server faults"),
    Script(
        "proxy_bigpackets",
        "bench/proxy_bigpackets.py",
        ("--seconds", "15"),
        600,
        proxy_bigpackets_rows,
        area="proxy under large packets",
    ),
    Script(
        "proxy_bulk", "bench/proxy_bulk.py", (), 300, proxy_bulk_rows, area="proxy bulk executemany"
    ),
    Script(
        "analytics",
        "bench/analytics.py",
        ("--records", "1000000"),
        900,
        analytics_rows,
        full_args=("--records", "1000000", "10000000"),
        full_timeout=1800,
        area="analytics scale",
    ),
)


# --- running --------------------------------------------------------------------------------------


def failure_reason(returncode: int, stdout: str, stderr: str) -> str:
    """Why a script that exited with ``returncode`` failed: its last words, stderr first."""
    for text in (stderr, stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return f"exit {returncode}: {lines[-1][:200]}"
    return f"exit {returncode}"


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the script's process group (it started in its own session), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_script(script: Script, full: bool, log_dir: Path, python: str = sys.executable) -> Outcome:
    """Run one script in its own process group, with its timeout, and read its JSON."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{script.name}-") as tmp:
        json_path = Path(tmp) / "figures.json"
        argv = script.command(json_path, full, python)
        command = script.reproduce(full, python)
        if not (ROOT / script.path).exists():
            return Outcome(script.name, command, 0.0, error=f"missing {script.path}")
        limit = script.time_limit(full)
        started = time.monotonic()
        with (
            tempfile.TemporaryFile("w+", encoding="utf-8") as out,
            tempfile.TemporaryFile("w+", encoding="utf-8") as err,
        ):
            proc = subprocess.Popen(
                argv, cwd=ROOT, stdout=out, stderr=err, text=True, start_new_session=True
            )
            error: str | None = None
            try:
                returncode = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                _stop_group(proc)
                returncode = proc.returncode
                error = f"timed out after {limit:.0f} s"
            except BaseException:
                _stop_group(proc)
                raise
            seconds = time.monotonic() - started
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"{script.name}.log").write_text(
            f"$ {' '.join(argv)}\n{stdout}\n--- stderr\n{stderr}", encoding="utf-8"
        )
        kept = "\n".join(stdout.splitlines()[-OUTPUT_LINES:])
        if error is None and returncode != 0:
            error = failure_reason(returncode, stdout, stderr).replace(str(json_path), "PATH")
        read = _read_figures(script.name, command, seconds, json_path, kept)
        if error is not None:  # the figures of a script that then failed are kept, as such
            return Outcome(script.name, command, seconds, read.figures, error, kept)
        return read


def _read_figures(name: str, command: str, seconds: float, path: Path, output: str) -> Outcome:
    if not path.exists():
        return Outcome(name, command, seconds, error="wrote no JSON", output=output)
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return Outcome(name, command, seconds, error=f"invalid JSON: {exc}", output=output)
    if not isinstance(figures, dict):
        return Outcome(name, command, seconds, error="JSON is not an object", output=output)
    return Outcome(name, command, seconds, figures=figures, output=output)


# --- collecting -----------------------------------------------------------------------------------


def summarize(script: Script, outcome: Outcome) -> Section:
    """The rows of a script's figures; a script whose figures cannot be read has failed.

    A script that wrote figures and then failed (a target it checks was missed) keeps their
    rows, followed by the line that says it failed."""
    error = outcome.error
    rows: list[Row] = []
    if outcome.figures is not None:
        try:
            rows = script.rows(outcome.figures)
        except UnexpectedFigures as exc:
            error = error or f"unexpected JSON: {exc}"
        except (ZeroDivisionError, KeyError, TypeError, ValueError) as exc:
            error = error or f"unexpected JSON: {type(exc).__name__}: {exc}"
    if error is not None:
        rows.append(Row(script.area or script.name, script.path, f"failed: {error}"))
    return Section(
        outcome.name,
        outcome.command,
        outcome.seconds,
        rows,
        outcome.figures,
        error,
        outcome.output,
    )


def select(scripts: Sequence[Script], only: Iterable[str] | None) -> list[Script]:
    """The scripts named in ``only`` (in the suite's order), or all of them."""
    if not only:
        return list(scripts)
    wanted = set(only)
    unknown = wanted - {s.name for s in scripts}
    if unknown:
        known = ", ".join(s.name for s in scripts)
        raise ValueError(f"unknown benchmark(s): {', '.join(sorted(unknown))} (known: {known})")
    return [s for s in scripts if s.name in wanted]


def document(
    machine: Mapping[str, Any], sections: Sequence[Section], seconds: float, full: bool
) -> dict[str, Any]:
    """The results file: the machine, then every script's status, figures and rows."""
    return {
        "machine": dict(machine),
        "full": full,
        "seconds": seconds,
        "failed": [s.name for s in sections if not s.ok],
        "benchmarks": {
            s.name: {
                "status": "ok" if s.ok else "failed",
                "reason": s.error,
                "command": s.command,
                "seconds": s.seconds,
                "figures": s.figures,
                "rows": [asdict(r) for r in s.rows],
                "output": s.output,
            }
            for s in sections
        },
    }


def exit_status(doc: Mapping[str, Any]) -> int:
    return 1 if doc["failed"] else 0


# --- the machine ----------------------------------------------------------------------------------


def _proc_field(path: str, key: str) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return None


def _version_of(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def mariadb_version(text: str | None) -> str | None:
    """``10.11.19-MariaDB-0+deb12u1`` from ``mariadbd --version``'s line."""
    if not text:
        return None
    found = re.search(r"\bVer\s+(\S+)", text)
    return found.group(1) if found else text


def _mariadb_version() -> str | None:
    try:
        from consistent.testing.mariadb import MariaDBBinaries
    except ImportError:
        return None
    binaries = MariaDBBinaries.find()
    return mariadb_version(_version_of([str(binaries.server), "--version"]) if binaries else None)


def machine() -> dict[str, Any]:
    """What the absolute figures depend on: hardware, software versions, date and load."""
    mem_kb = _proc_field("/proc/meminfo", "MemTotal")
    git = _version_of(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or None,
        "cores": os.cpu_count(),
        "ram_gb": round(int(mem_kb.split()[0]) / 1024**2, 1) if mem_kb else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "mariadb": _mariadb_version(),
        "sysbench": _version_of(["sysbench", "--version"]),
        "haproxy": _version_of(["haproxy", "-v"]),
        "commit": git,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def describe_machine(info: Mapping[str, Any]) -> str:
    parts = [
        f"{info.get('cpu') or 'unknown CPU'}, {info.get('cores')} cores, "
        f"{info.get('ram_gb')} GB RAM",
        f"Python {info.get('python')}",
        f"MariaDB {info['mariadb']}" if info.get("mariadb") else "MariaDB: not found",
        f"{info.get('date')}",
        f"load {' '.join(str(x) for x in info.get('load_average') or [])}",
    ]
    return " · ".join(p for p in parts if p)


# --- the table ------------------------------------------------------------------------------------


def table(doc: Mapping[str, Any]) -> Table:
    """One table of every row, grouped by the comparison it makes."""
    seconds = float(doc["seconds"])
    out = Table(
        title="consistent benchmarks" + (" (full)" if doc.get("full") else ""),
        caption=f"{describe_machine(doc['machine'])} · suite {seconds / 60:.1f} min",
        show_lines=False,
    )
    out.add_column("comparison", style="bold", max_width=28, overflow="fold")
    out.add_column("figure", overflow="fold")
    out.add_column("result", justify="right", overflow="fold")
    out.add_column("detail", style="dim", overflow="fold")
    previous = None
    for bench in doc["benchmarks"].values():
        for row in bench["rows"]:
            area = row["area"]
            if previous is not None and area != previous:
                out.add_section()
            result = row["result"]
            style = "red" if result.startswith("failed") else None
            out.add_row(
                area if area != previous else "",
                row["figure"],
                f"[{style}]{result}[/]" if style else result,
                row["detail"],
            )
            previous = area
    return out


# --- command line ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON file")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--full", action="store_true", help="the issues' full sizes (slow)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:  # a log or CI: wide enough for one line per row
        console = Console(width=TABLE_WIDTH)
    if args.list:
        for script in SCRIPTS:
            print(f"{script.name:<11} {script.reproduce(args.full)}")
        return 0
    try:
        scripts = select(SCRIPTS, args.only)
    except ValueError as exc:
        parser.error(str(exc))
    info = machine()
    console.print(describe_machine(info))
    log_dir = args.out.parent / "logs"
    started = time.monotonic()
    sections = []
    for script in scripts:
        with console.status(
            f"{script.name}: {script.path} (limit {script.time_limit(args.full):.0f} s)"
        ):
            outcome = run_script(script, args.full, log_dir)
        section = summarize(script, outcome)
        mark = "[green]ok[/]" if section.ok else f"[red]failed: {section.error}[/]"
        console.print(f"{script.name:<11} {outcome.seconds:6.1f} s  {mark}")
        sections.append(section)
    info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc = document(info, sections, time.monotonic() - started, args.full)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    console.print(table(doc))
    console.print(f"results: {args.out}; logs: {log_dir}/")
    return exit_status(doc)


if __name__ == "__main__":
    sys.exit(main())
