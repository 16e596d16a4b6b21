"""``bench/suite.py``: figures to rows, failures to "failed: <reason>", the results file, and the
runner's handling of scripts that fail, hang or write nothing (tiny scripts, no benchmark)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

SUITE_PATH = Path(__file__).resolve().parents[2] / "bench" / "suite.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("consistent_bench_suite", SUITE_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


suite = _load()


# --- rows from each script's figures --------------------------------------------------------------


def test_gtid_rows_give_one_row_per_operation_in_the_suite_order_with_every_size() -> None:
    figures = {
        "mysql_replication": "1.0.9",
        "rows": [
            {"op": "union", "uuids": 1, "ours_ops": 500.0, "theirs_ops": 1000.0},
            {"op": "parse", "uuids": 1000, "ours_ops": 3000.0, "theirs_ops": 1000.0},
            {"op": "parse", "uuids": 1, "ours_ops": 200.0, "theirs_ops": 100.0},
        ],
    }
    rows = suite.gtid_rows(figures)
    assert [r.figure.split(":")[0] for r in rows] == ["parse", "union"]
    assert rows[0].area == "GTID ops vs mysql-replication 1.0.9"
    assert rows[0].result == "1: 2.00x  1,000: 3.00x"
    assert rows[0].detail == "at 1,000 UUIDs: 3,000/s vs 1,000/s"
    assert rows[1].result == "1: 0.50x"


def test_classify_rows_are_ours_over_sqlglot() -> None:
    part = {"statements": 510, "ours_per_s": 50000.0, "sqlglot_per_s": 4000.0}
    mix = {"statements": 10, "ours_per_s": 90000.0, "sqlglot_per_s": 2000.0}
    rows = suite.classify_rows({"sqlglot": "30.0", "corpus": part, "oltp_mix": mix})
    assert [(r.result, r.detail) for r in rows] == [
        ("12.50x", "50,000/s vs 4,000/s"),
        ("45.00x", "90,000/s vs 2,000/s"),
    ]
    assert "510 stmts" in rows[0].figure


def _dbapi_backend(c: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "name": "x",
        "a": {"ratio": 1.04, "ours_us": 520.0, "raw_us": 500.0, "statements": 4000},
        "b": {"ratio": 0.9, "row_us": 180.0, "eventual_us": 200.0, "row_waits": 0, "reads": 1500},
        "c": c,
    }


def test_aio_rows_group_overhead_then_read_cost_across_backends() -> None:
    backend = _dbapi_backend(None)
    del backend["c"]
    rows = suite.aio_rows({"backends": {"emulator": backend, "mariadb": backend}})
    assert [r.area for r in rows] == [
        "asyncio form overhead vs raw aiomysql",
        "asyncio form overhead vs raw aiomysql",
        "asyncio read_own_writes latency vs eventual",
        "asyncio read_own_writes latency vs eventual",
    ]
    assert "(MariaDB)" in rows[0].figure
    assert rows[0].result == "1.04x"
    assert rows[0].detail.startswith("520 vs 500 us/stmt")
    assert rows[3].detail == "180 vs 200 us (medians), 0 waits in 1,500 reads"
    with pytest.raises(suite.UnexpectedFigures):
        suite.aio_rows({"backends": {}})


def test_dbapi_rows_group_overhead_then_read_cost_then_lag_across_backends() -> None:
    lag = {
        "iterations": 1000,
        "replica_share": 0.987,
        "violations": 0,
        "row_ms_per_iteration": 5.2,
        "eventual_violations": 647,
        "eventual_replica_share": 1.0,
    }
    figures = {"backends": {"emulator": _dbapi_backend(None), "mariadb": _dbapi_backend(lag)}}
    rows = suite.dbapi_rows(figures)
    assert [r.area for r in rows] == [
        "wrapper overhead vs raw PyMySQL",
        "wrapper overhead vs raw PyMySQL",
        "read_own_writes latency vs eventual",
        "read_own_writes latency vs eventual",
        "offload and violations",
        "offload and violations",
    ]
    assert "(MariaDB)" in rows[0].figure
    assert "(emulator)" in rows[1].figure
    assert rows[0].result == "1.04x"
    assert rows[0].detail.startswith("520 vs 500 us/stmt")
    assert rows[2].result == "0.90x"
    assert rows[4].result == "98.7% on replicas, 0 violations"
    assert rows[4].detail.startswith("control, eventual: 647 stale of 1,000 (100% on replicas)")
    assert rows[5].result == "not run: no lag"


def test_tracing_rows_give_on_off_and_off_raw() -> None:
    figures = {
        "block": 500,
        "rounds": 30,
        "modes": {
            "pymysql": {"us_per_statement": 150.0},
            "off": {"us_per_statement": 160.0},
            "on": {"us_per_statement": 170.0},
        },
        "on_off_ratio": 1.031,
        "off_raw_ratio": 1.066,
        "thread_cpu_extra_us": -0.2,
        "dropped": 0,
    }
    on_off, off_raw = suite.tracing_rows(figures)
    assert on_off.result == "1.03x"
    assert (
        on_off.detail == "170 vs 160 us/stmt, 15,000 stmts each; -0.2 us CPU/stmt; 0 spans dropped"
    )
    assert off_raw.result == "1.07x"


def test_emulator_rows_are_emulator_over_mariadb() -> None:
    def workloads(qps: float) -> dict[str, Any]:
        return {w: {"qps": qps, "cpu_us_per_query": None} for w in ("select1", "point", "insert")}

    figures = {"backends": {"emulator": workloads(1000.0), "mariadb": workloads(4000.0)}}
    rows = suite.emulator_rows(figures)
    assert [r.result for r in rows] == ["0.25x"] * 3
    assert rows[0].detail == "1,000 vs 4,000 qps"


def test_emulator_rows_need_both_backends() -> None:
    with pytest.raises(suite.UnexpectedFigures):
        suite.emulator_rows({"backends": {"emulator": {}}})


def _target(qps: float, vs_direct: float, vs_forwarder: float | None) -> dict[str, Any]:
    return {
        "qps": qps,
        "vs_direct": vs_direct,
        "vs_uvloop_forwarder": vs_forwarder,
        "p50_ms": 0.7,
        "p95_ms": 2.5,
        "added_p50_ms": 0.5,
        "added_p95_ms": 2.0,
    }


def test_proxy_rows_are_ratios_to_direct_with_added_latency() -> None:
    figures = {
        "threads": 8,
        "targets": {
            "MariaDB directly": {**_target(40000.0, 1.0, 2.0), "p50_ms": 0.2, "p95_ms": 0.5},
            "uvloop forwarder": _target(20000.0, 0.5, 1.0),
            "our proxy (primary only)": _target(10000.0, 0.25, 0.5),
        },
    }
    direct, forwarder, ours = suite.proxy_rows(figures)[:3]
    assert direct.area == "proxy vs direct, sysbench oltp_point_select, 8 threads"
    assert direct.result == "40,000 QPS"
    assert direct.detail == "p50 0.20 ms, p95 0.50 ms"
    assert forwarder.result == "0.50x"
    assert "of the uvloop forwarder" not in forwarder.detail
    assert ours.figure == "our proxy (primary only) / direct QPS"
    assert ours.result == "0.25x"
    assert ours.detail == (
        "10,000 QPS, 0.50x of the uvloop forwarder; added p50 +0.50 ms, p95 +2.00 ms"
    )


def test_proxy_rows_end_with_the_proxy_over_the_forwarder_when_given() -> None:
    figures = {
        "targets": {"MariaDB directly": _target(1.0, 1.0, None)},
        "proxy_vs_uvloop_forwarder": 0.8,
        "proxy_vs_uvloop_forwarder_per_round": [0.7, 0.8, 0.9],
        "proxy_vs_uvloop_forwarder_target": 0.85,
    }
    last = suite.proxy_rows(figures)[-1]
    assert (
        last.figure
        == "our proxy (primary only) / uvloop forwarder QPS, median of rounds (target >= 0.85x)"
    )
    assert (last.result, last.detail) == ("0.80x", "rounds: 0.70x 0.80x 0.90x")


def test_proxy_rows_name_the_workload() -> None:
    figures = {
        "threads": 4,
        "workload": "oltp_read_write",
        "targets": {"MariaDB directly": _target(1.0, 1.0, None)},
    }
    (direct,) = suite.proxy_rows(figures)
    assert direct.area == "proxy vs direct, sysbench oltp_read_write, 4 threads"


def test_proxy_rows_need_the_direct_target() -> None:
    with pytest.raises(suite.UnexpectedFigures, match="no direct target"):
        suite.proxy_rows({"targets": {"uvloop forwarder": _target(1.0, 1.0, 1.0)}})


def test_proxy_load_rows_give_memory_per_connection() -> None:
    figures = {
        "clients": 2000,
        "seconds": 20,
        "rss_start_mb": 50.0,
        "rss_idle_mb": 90.0,
        "rss_idle_target_mb": 300,
        "rss_per_connection_kb": 20.5,
        "rss_peak_mb": 120.0,
        "queries": 50000,
        "errors": 0,
        "violations": 1,
        "leaked_backend_connections": 0,
    }
    memory, load = suite.proxy_load_rows(figures)
    assert memory.result == "20.5 KiB"
    assert memory.detail == ("RSS 50 MB at start, 90 MB with every client idle (target <= 300 MB)")
    assert load.result == "0 errors, 1 violations"


def test_proxy_pool_clients_rows_give_logins_errors_connections_and_rss() -> None:
    figures = {
        "logged_in": 5000,
        "login_errors": 0,
        "login_seconds": 1.53,
        "transactions": 15000,
        "transactions_per_second": 2050.0,
        "errors": 0,
        "wrong_reads": 0,
        "pool_max_connections": 100,
        "pool_size_peak": 100,
        "pool_waiting_peak": 4880,
        "pool_exhausted": 0,
        "rss_idle_mb": 115.0,
        "rss_peak_mb": 148.1,
        "clients": 5000,
        "server_max_connections": 151,
        "server_max_used_connections": 101,
        "rss_start_mb": 47.3,
        "rlimit_nofile": 20000,
        "load": [0.78, 1.37],
        "pass": True,
    }
    logins, connections, rss = suite.proxy_pool_clients_rows(figures)
    assert "5,000 of 5,000, 0 errors" in logins.result
    assert "max_connections 151" in logins.figure
    assert "load 0.8 -> 1.4" in logins.detail
    assert connections.result == "100 / 100"
    assert "Max_used_connections 101" in connections.detail
    assert rss.result == "47 / 115 / 148 MB"
    with pytest.raises(suite.UnexpectedFigures):
        suite.proxy_pool_clients_rows({**figures, "logged_in": None})


def test_proxy_connect_per_txn_rows_compare_both_proxies_with_direct() -> None:
    workload = {
        "tps": {"direct": 2830.0, "multiplexing": 1024.0, "no_multiplexing": 856.0},
        "multiplexing_over_direct": 0.362,
        "no_multiplexing_over_direct": 0.302,
    }
    figures = {"threads": 4, "load": [4.0, 4.59], "pymysql": workload, "pymysql_read": workload}
    write, read = suite.proxy_connect_per_txn_rows(figures)
    assert write.figure.startswith("pymysql:")
    assert read.figure.startswith("pymysql_read:")
    assert write.result == f"{suite.ratio(0.362)} / {suite.ratio(0.302)} of direct"
    assert "direct 2,830/s, pooled 1,024/s, multiplexing off 856/s" in write.detail
    assert suite.proxy_connect_per_txn_rows({"threads": 4}) == []


def test_proxy_bigpackets_and_bulk_rows() -> None:
    figures = {
        "size_mb": 60,
        "p99_target_ms": 50,
        "idle": {"p99_ms": 5.0},
        "loaded": {"p99_ms": 28.35, "max_ms": 91.7},
        "load_mb_per_second": 33.5,
        "monitor_max_staleness_s": 0.13,
        "rss_mb": {"before": 50.3, "peak": 56.8, "after": 56.8},
        "rss_clients_failed": 0,
        "token_set": {
            "bytes": 1097787,
            "seconds": 0.0069,
            "answer": "error 1772",
            "prober_max_ms": 6,
        },
    }
    latency, memory, token = suite.proxy_bigpackets_rows(figures)
    assert latency.result == "28.4 ms"
    assert memory.result == "50 / 57 / 57 MB"
    assert token.result == "6.9 ms"
    assert token.figure == "SET of a 1.1 MB token"
    (bulk,) = suite.proxy_bulk_rows(
        {"rows": 2000, "direct_seconds": 0.02, "proxy_seconds": 0.03, "proxy_over_direct": 1.5}
    )
    assert bulk.result == "1.50x"


def test_analytics_rows_are_records_per_second_by_size() -> None:
    figures = {
        "runs": [
            {"input": "traces", "records": 10_000_000, "seconds": 100.0},
            {"input": "synthetic", "records": 1_000_000, "seconds": 20.0, "load_average": [3, 4]},
        ]
    }
    rows = suite.analytics_rows({"master": "local[2]", **figures})
    assert [r.result for r in rows] == ["50,000 records/s", "100,000 records/s"]
    assert rows[0].area == "analytics scale (Spark local[2])"
    assert rows[1].detail == "100.0 s, the full job"
    assert rows[0].detail.endswith("input generated untimed; load 3.0 -> 4.0")


# --- failures -------------------------------------------------------------------------------------


def _script(name: str = "x", path: str = "bench/x.py", timeout: float = 30.0) -> Any:
    return suite.Script(name, path, (), timeout, suite.classify_rows, area="classification")


def test_faults_rows_give_latencies_rates_and_recovery_per_form() -> None:
    def latency(worst: float, p99: float) -> dict[str, float]:
        return {"worst_ms": worst, "p99_ms": p99, "reads": 500.0}

    form = {
        "black_hole": {"without": latency(12, 4.5), "with": latency(2004, 4.0)},
        "frozen": {"without": latency(50, 5.0), "with": latency(2003, 5.1)},
        "frozen_reads": {"without": latency(30, 3.0), "with": latency(9000, 4.3)},
        "stuck": {
            "without": {"reads_per_s": 610.0, "slow_reads": 0},
            "with": {"reads_per_s": 1100.0, "slow_reads": 0},
        },
        "restart": {"seconds_to_serve": 0.4, "monitor_interval": 0.2},
    }
    rows = suite.faults_rows({"bound_ms": 8000.0, "forms": {"proxy": form}})
    assert [r.area for r in rows] == ["server faults through the proxy"] * 5
    assert rows[0].result == "12 / 4.5 ms -> 2,004 / 4.0 ms"
    assert rows[0].detail == "bound 8,000 ms (within); 500 reads"
    assert rows[2].detail.startswith("bound 8,000 ms (EXCEEDED)")
    assert rows[3].result == "610/s -> 1,100/s"
    assert rows[4].result == "0.40 s"
    with pytest.raises(suite.UnexpectedFigures):
        suite.faults_rows({"bound_ms": 8000.0, "forms": {}})


def test_a_failed_script_is_one_failed_row_with_its_reason_and_no_figure() -> None:
    outcome = suite.Outcome("x", "python bench/x.py", 1.0, error="exit 1: boom")
    section = suite.summarize(_script(), outcome)
    assert not section.ok
    assert [r.result for r in section.rows] == ["failed: exit 1: boom"]
    assert section.figures is None


def test_a_script_that_failed_after_writing_figures_keeps_their_rows() -> None:
    figures = {
        "corpus": {"statements": 1, "ours_per_s": 2.0, "sqlglot_per_s": 1.0},
        "oltp_mix": {"statements": 1, "ours_per_s": 3.0, "sqlglot_per_s": 1.0},
    }
    outcome = suite.Outcome("x", "p", 1.0, figures=figures, error="exit 1: result: FAIL")
    section = suite.summarize(_script(), outcome)
    assert not section.ok
    assert [r.result for r in section.rows] == ["2.00x", "3.00x", "failed: exit 1: result: FAIL"]


def test_figures_without_what_the_table_needs_fail_the_script() -> None:
    outcome = suite.Outcome("x", "python", 1.0, figures={"corpus": {"ratio": 3.0}})
    section = suite.summarize(_script(), outcome)
    assert not section.ok
    assert section.error is not None
    assert "unexpected JSON" in section.error
    assert section.rows[0].result.startswith("failed: unexpected JSON")


def test_the_results_file_lists_failures_and_the_exit_status_follows() -> None:
    good = {
        "corpus": {"statements": 1, "ours_per_s": 2.0, "sqlglot_per_s": 1.0},
        "oltp_mix": {"statements": 1, "ours_per_s": 3.0, "sqlglot_per_s": 1.0},
    }
    ok = suite.summarize(_script("a"), suite.Outcome("a", "p", 1.0, figures=good))
    bad = suite.summarize(_script("b"), suite.Outcome("b", "p", 2.0, error="timed out"))
    doc = suite.document({"cores": 2}, [ok, bad], 3.0, False)
    assert doc["failed"] == ["b"]
    assert doc["benchmarks"]["a"]["status"] == "ok"
    assert doc["benchmarks"]["a"]["figures"] == good
    assert doc["benchmarks"]["b"] == {
        "status": "failed",
        "reason": "timed out",
        "command": "p",
        "seconds": 2.0,
        "figures": None,
        "rows": [
            {
                "area": "classification",
                "figure": "bench/x.py",
                "result": "failed: timed out",
                "detail": "",
            }
        ],
        "output": "",
    }
    assert suite.exit_status(doc) == 1
    assert suite.exit_status(suite.document({}, [ok], 1.0, False)) == 0
    json.dumps(doc)  # the file is JSON


def test_the_table_shows_figures_and_failures() -> None:
    good = {
        "corpus": {"statements": 510, "ours_per_s": 50000.0, "sqlglot_per_s": 4000.0},
        "oltp_mix": {"statements": 10, "ours_per_s": 9000.0, "sqlglot_per_s": 1000.0},
    }
    ok = suite.summarize(_script("a"), suite.Outcome("a", "p", 1.0, figures=good))
    bad = suite.summarize(
        _script("b", "bench/b.py"), suite.Outcome("b", "p", 0.0, error="missing bench/b.py")
    )
    machine = {"cpu": "Some CPU", "cores": 2, "ram_gb": 8.0, "python": "3.11.7"}
    console = Console(record=True, width=200)
    console.print(suite.table(suite.document(machine, [ok, bad], 60.0, False)))
    text = console.export_text()
    assert "12.50x" in text
    assert "9.00x" in text
    assert "failed: missing bench/b.py" in text
    assert "Some CPU, 2 cores, 8.0 GB RAM" in text


def test_failure_reason_prefers_the_last_line_of_stderr() -> None:
    assert suite.failure_reason(1, "out\n", "first\nlast\n\n") == "exit 1: last"
    assert suite.failure_reason(2, "only stdout\n", "") == "exit 2: only stdout"
    assert suite.failure_reason(3, "", "") == "exit 3"


def test_select_keeps_the_suite_order_and_rejects_unknown_names() -> None:
    scripts = [_script("a"), _script("b"), _script("c")]
    assert [s.name for s in suite.select(scripts, ["c", "a"])] == ["a", "c"]
    assert suite.select(scripts, None) == scripts
    with pytest.raises(ValueError, match="nope"):
        suite.select(scripts, ["a", "nope"])


def test_every_area_of_the_issue_has_a_script() -> None:
    names = {s.name for s in suite.SCRIPTS}
    assert names == {
        "gtid",
        "classify",
        "dbapi",
        "aio",
        "tracing",
        "emulator",
        "proxy",
        "proxy_rw",
        "proxy_load",
        "proxy_pool_clients",
        "proxy_connect_per_txn",
        "proxy_bigpackets",
        "proxy_bulk",
        "faults",
        "analytics",
    }
    for script in suite.SCRIPTS:
        command = script.command(Path("/tmp/f.json"), False)
        assert command[-2:] == ["--json", "/tmp/f.json"]


def test_the_results_name_the_command_that_reproduces_each_figure() -> None:
    script = suite.Script("x", "bench/x.py", ("--seconds", "3"), 1.0, suite.classify_rows)
    python = str(suite.ROOT / ".venv" / "bin" / "python")
    assert script.reproduce(False, python) == ".venv/bin/python bench/x.py --seconds 3"
    assert script.reproduce(False, "/usr/bin/python3") == "/usr/bin/python3 bench/x.py --seconds 3"


def test_full_runs_use_their_own_arguments() -> None:
    load = next(s for s in suite.SCRIPTS if s.name == "proxy_load")
    assert "180" not in load.command(Path("f"), False)
    assert "180" in load.command(Path("f"), True)
    assert load.time_limit(True) > load.time_limit(False)


def test_mariadb_version_from_the_servers_version_line() -> None:
    line = "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64"
    assert suite.mariadb_version(line) == "10.11.19-MariaDB-0+deb12u1"
    assert suite.mariadb_version(None) is None


# --- the runner, on tiny scripts ------------------------------------------------------------------


def _write(tmp_path: Path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


def test_run_script_reads_the_json_the_script_wrote_and_keeps_its_log(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import json, sys
        print("readable output")
        json.dump({"value": 42}, open(sys.argv[sys.argv.index("--json") + 1], "w"))
        """,
    )
    outcome = suite.run_script(_script("t", path), False, tmp_path / "logs")
    assert outcome.error is None
    assert outcome.figures == {"value": 42}
    assert "readable output" in outcome.output
    assert "readable output" in (tmp_path / "logs" / "t.log").read_text()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("import sys; sys.exit('boom')", "exit 1: boom"),
        ("import sys; sys.exit(sys.argv[-1])", "exit 1: PATH"),
        ("pass", "wrote no JSON"),
        (
            "import sys; open(sys.argv[sys.argv.index('--json') + 1], 'w').write('[1]')",
            "JSON is not an object",
        ),
        (
            "import argparse; argparse.ArgumentParser().parse_args()",
            "unrecognized arguments: --json",
        ),
    ],
)
def test_run_script_reports_why_a_script_gave_no_figures(
    tmp_path: Path, body: str, reason: str
) -> None:
    outcome = suite.run_script(_script("t", _write(tmp_path, body)), False, tmp_path)
    assert outcome.figures is None
    assert outcome.error is not None
    assert reason in outcome.error


def test_run_script_keeps_the_figures_of_a_script_that_then_fails(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import json, sys
        json.dump({"value": 1}, open(sys.argv[-1], "w"))
        sys.exit("result: FAIL")
        """,
    )
    outcome = suite.run_script(_script("t", path), False, tmp_path)
    assert outcome.figures == {"value": 1}
    assert outcome.error == "exit 1: result: FAIL"


def test_run_script_stops_a_script_past_its_time_limit(tmp_path: Path) -> None:
    path = _write(tmp_path, "import time; time.sleep(60)")
    outcome = suite.run_script(_script("t", path, timeout=1.0), False, tmp_path)
    assert outcome.error == "timed out after 1 s"
    assert outcome.seconds < 15


def test_run_script_reports_a_missing_script(tmp_path: Path) -> None:
    outcome = suite.run_script(_script("t", str(tmp_path / "absent.py")), False, tmp_path)
    assert outcome.error == f"missing {tmp_path / 'absent.py'}"
