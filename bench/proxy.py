"""sysbench through the proxy and its peers, side by side in one run.

    python bench/proxy.py [--workload oltp_point_select|oltp_read_write] [--seconds 10]
                          [--threads 8] [--rounds 1] [--profile] [--pipeline] [--json PATH]

Targets, all on this machine (client, server and forwarder share its cores):

* MariaDB directly;
* HAProxy in TCP mode (Debian's ``haproxy``: a C layer-4 forwarder that understands nothing);
* the plain uvloop byte forwarder of ``bench/forwarder.py``, the ceiling of any Python proxy;
* our proxy, primary only (like for like with the forwarders); again with backends asked for
  CLIENT_DEPRECATE_EOF only when the client does (sysbench's libmariadb does not, so the
  default configuration translates every result set's EOFs); then with two replicas (reads
  routed to them and tracked); primary only and with two replicas again with multiplexing off
  (each session keeps backend connections of its own); and, when its modules are compiled
  (``make native``), primary only again from a copy of the sources without them, to show what
  compiling buys.

``--workload`` picks sysbench's test: ``oltp_point_select`` (the default: autocommit point
reads, each routed) or ``oltp_read_write`` (transactions of ten point reads, four range reads,
two updates, a delete and an insert: every statement of a transaction goes to the primary, and
the pool lends a connection per transaction).

Every forwarder and proxy is started once; each round measures every target in turn, so that
the ratios of one round are measured side by side (the machine is shared: compare ratios, not
absolute figures).  It prints QPS, the ratios to MariaDB directly and to the uvloop forwarder,
the median and 95th percentile latency and what each layer adds to them, and each forwarder's
CPU time per query (the round with the median QPS per target), then the headline: our proxy
over the uvloop forwarder, the median of the ratios measured within each round, primary only and
with two replicas (every read routed and tracked).
``--json PATH`` writes the same figures, per round too, as one JSON object.
``--profile`` samples our proxy with py-spy during one more run and prints where the time goes;
``--pipeline`` measures a write-then-read loop with the wait pipelined with the read and
without.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consistent.native import COMPILED, is_compiled  # noqa: E402
from consistent.testing.mariadb import MariaDBTopology, start_topology  # noqa: E402
from consistent.testing.source_copy import source_tree  # noqa: E402

PYTHON = sys.executable
USER, PASSWORD = "bench", "bench-secret"


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED` that run compiled here (``make native``)."""
    return [name for name in COMPILED if is_compiled(importlib.import_module(name))]


def proxy_build() -> str:
    """How the proxy's modules run here: compiled by mypyc (``make native``) or from source."""
    compiled = compiled_modules()
    if len(compiled) == len(COMPILED):
        return f"compiled with mypyc ({len(compiled)} modules)"
    if compiled:
        return f"partly compiled ({len(compiled)} of {len(COMPILED)} modules)"
    return "interpreted (run `make native` to compile)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


@dataclass
class Target:
    name: str
    port: int
    user: str
    password: str
    pid: int | None = None


@dataclass
class Result:
    qps: float
    p50: float
    p95: float
    cpu_us: float | None
    user_us: float | None


def sysbench(target: Target, args: argparse.Namespace, command: str = "run") -> str:
    cmd = [
        "sysbench",
        args.workload,
        "--db-driver=mysql",
        "--mysql-host=127.0.0.1",
        f"--mysql-port={target.port}",
        f"--mysql-user={target.user}",
        f"--mysql-password={target.password}",
        "--mysql-db=sbtest",
        "--tables=1",
        "--table-size=10000",
        f"--threads={args.threads}",
        f"--time={args.seconds}",
        "--histogram=on",
        command,
    ]
    done = subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=args.seconds + 120
    )
    if done.returncode != 0:
        raise RuntimeError(f"sysbench failed on {target.name}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def percentiles(output: str) -> tuple[float, float]:
    """p50 and p95 (ms) from sysbench's latency histogram."""
    buckets = []
    for line in output.splitlines():
        m = re.match(r"\s*([0-9.]+)\s+\|[*\s]*\s(\d+)\s*$", line)
        if m:
            buckets.append((float(m.group(1)), int(m.group(2))))
    total = sum(n for _, n in buckets)
    result = []
    for q in (0.50, 0.95):
        seen = 0
        for value, n in buckets:
            seen += n
            if seen >= q * total:
                result.append(value)
                break
    return result[0], result[1]


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def measure(target: Target, args: argparse.Namespace) -> Result:
    before = cpu_seconds(target.pid) if target.pid else (0.0, 0.0)
    out = sysbench(target, args)
    after = cpu_seconds(target.pid) if target.pid else (0.0, 0.0)
    queries = int(re.search(r"queries:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    qps = float(re.search(r"queries:\s+\d+\s+\(([0-9.]+) per sec", out).group(1))  # type: ignore[union-attr]
    p50, p95 = percentiles(out)
    errors = int(re.search(r"ignored errors:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    if errors:
        print(f"  ! {target.name}: {errors} ignored errors")
    if not target.pid:
        return Result(qps, p50, p95, None, None)
    user = (after[0] - before[0]) / queries * 1e6
    return Result(qps, p50, p95, user + (after[1] - before[1]) / queries * 1e6, user)


@contextlib.contextmanager
def process(cmd: list[str], port: int, **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    try:
        wait_port(port)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def proxy_config(topology: MariaDBTopology, port: int, replicas: bool, **extra: str) -> str:
    """The proxy's configuration; ``extra`` are top-level settings, and ``pool_*`` ones go
    to the ``[pool]`` section."""
    pool = {k.removeprefix("pool_"): v for k, v in extra.items() if k.startswith("pool_")}
    extra = {k: v for k, v in extra.items() if not k.startswith("pool_")}
    lines = [f'listen = "127.0.0.1:{port}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    lines += [
        "[backends]",
        f'primary = "127.0.0.1:{topology.primary.port}"',
        f'user = "{topology.app_user}"',
        f'password = "{topology.app_password}"',
    ]
    if replicas:
        names = ", ".join(f'"127.0.0.1:{r.port}"' for r in topology.replicas)
        lines.append(f"replicas = [{names}]")
    if pool:
        lines += ["[pool]", *(f"{k} = {v}" for k, v in pool.items())]
    lines += [f"[users.{USER}]", f'password = "{PASSWORD}"']
    return "\n".join(lines) + "\n"


def haproxy_config(port: int, target: int) -> str:
    return f"""global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
listen mysql
    bind 127.0.0.1:{port}
    server primary 127.0.0.1:{target}
"""


def profile(
    pid: int, seconds: int, target: Target, args: argparse.Namespace
) -> list[tuple[str, float]]:
    """Sample our proxy with py-spy during one more run; print and return the self-time
    share of each function.  Shares are of wall time while not idle: a write that the kernel
    preempts (it wakes the reader on loopback) counts as time in the write."""
    if shutil.which("py-spy") is None and not Path(sys.executable).with_name("py-spy").exists():
        print("py-spy is not installed: no profile")
        return []
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    native = bool(compiled_modules())
    with tempfile.NamedTemporaryFile(suffix=".txt") as raw:
        recorder = subprocess.Popen(
            [
                spy,
                "record",
                "-p",
                str(pid),
                "-d",
                str(seconds),
                "-r",
                "250",
                "-f",
                "raw",
                "-o",
                raw.name,
                # Compiled modules are C frames: py-spy sees them with --native, which
                # must pause the process for each sample (no --nonblocking).
                *(["--native"] if native else ["--nonblocking"]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sysbench(target, argparse.Namespace(**{**vars(args), "seconds": seconds}))
        recorder.wait(30)
        own: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        total = 0
        for line in Path(raw.name).read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack:
                continue
            n = int(count)
            total += n
            frames = [re.sub(r" \(.*?:(\d+)\)", "", f) for f in stack.split(";")]
            own[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    if not total:
        print("no samples")
        return []
    print(f"\nwhere our proxy's time goes (py-spy, {total} samples, wall time while running):")
    print("  self:")
    for name, n in own.most_common(12):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  inclusive:")
    for name, n in inclusive.most_common(30):
        if name.startswith(("<module>", "_run", "run (", "main", "command", "Runner")):
            continue
        print(f"    {100 * n / total:5.1f}%  {name}")
    return [(name, n / total) for name, n in own.most_common(25)]


def pipeline_gain(topology: MariaDBTopology, iterations: int) -> None:
    """Write-then-read latency with the wait pipelined with the read, and without."""
    import pymysql

    topology.primary.query("CREATE DATABASE IF NOT EXISTS pipe")
    topology.primary.query("CREATE TABLE IF NOT EXISTS pipe.kv (k INT PRIMARY KEY, v INT)")
    topology.primary.query("REPLACE INTO pipe.kv VALUES (1, 0)")
    topology.wait_for_all()
    print(f"\npipelined wait + read vs wait then read ({iterations} write-then-read pairs):")
    for pipelined in (True, False):
        port = free_port()
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(proxy_config(topology, port, True, pipeline_waits=str(pipelined).lower()))
        with process([PYTHON, "-m", "proxy", "--config", f.name], port, cwd=ROOT):
            conn = pymysql.connect(
                host="127.0.0.1",
                port=port,
                user=USER,
                password=PASSWORD,
                database="pipe",
                autocommit=True,
            )
            reads = []
            with conn.cursor() as cur:
                for i in range(iterations):
                    cur.execute("UPDATE kv SET v = %s WHERE k = 1", (i,))
                    start = time.perf_counter()
                    cur.execute("SELECT v FROM kv WHERE k = 1")
                    reads.append(time.perf_counter() - start)
                    assert cur.fetchone()[0] == i
            conn.close()
        os.unlink(f.name)
        reads.sort()
        print(
            f"  {'pipelined' if pipelined else 'sequential':10s} read latency: "
            f"mean {statistics.mean(reads) * 1e3:.3f} ms, "
            f"p50 {reads[len(reads) // 2] * 1e3:.3f} ms, "
            f"p95 {reads[int(len(reads) * 0.95)] * 1e3:.3f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workload", choices=("oltp_point_select", "oltp_read_write"), default="oltp_point_select"
    )
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--pipeline", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="measure every target N times")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    if shutil.which("sysbench") is None:
        print("sysbench is not installed (apt-get install -y sysbench)")
        return 2
    topology = start_topology(replicas=2, extra_server_args=("--max-connections=1000",))
    try:
        return run(topology, args)
    finally:
        topology.close()


def run(topology: MariaDBTopology, args: argparse.Namespace) -> int:
    primary = topology.primary.port
    topology.primary.query(
        f"CREATE USER IF NOT EXISTS {USER}@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"
    )
    topology.primary.query(f"GRANT ALL ON *.* TO {USER}@'127.0.0.1'")
    topology.primary.query("CREATE DATABASE IF NOT EXISTS sbtest")
    direct = Target("MariaDB directly", primary, USER, PASSWORD)
    sysbench(direct, args, "prepare")
    topology.wait_for_all(60)
    print(
        f"sysbench {args.workload}, {args.threads} threads, {args.seconds} s per target, "
        f"{args.rounds} round(s), {os.cpu_count()} cores shared by everything; "
        f"our proxy: {proxy_build()}\n"
    )
    sysbench(direct, argparse.Namespace(**{**vars(args), "seconds": 2}))  # warm the buffer pool
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    rounds: list[dict[str, Result]] = []
    profiled: list[tuple[str, float]] = []
    with contextlib.ExitStack() as stack:
        targets = [direct, *start_targets(stack, topology, tmp)]
        for target in targets[1:]:
            sysbench(target, argparse.Namespace(**{**vars(args), "seconds": 2}))  # warm up
        for number in range(args.rounds):
            if args.rounds > 1:
                print(f"round {number + 1}/{args.rounds}")
            results = {target.name: measure(target, args) for target in targets}
            rounds.append(results)
            if args.rounds > 1:
                print_ratio(results)
        if args.profile:
            ours = next(t for t in targets if t.name == OURS)
            assert ours.pid is not None
            profiled = profile(ours.pid, min(args.seconds, 8), ours, args)
    results = median_results(rounds)
    print_table(results)
    print()
    print_summary(rounds, results)
    if args.json is not None:
        write_json(args.json, args, rounds, results, profiled)
    if args.pipeline:
        pipeline_gain(topology, 300)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


OURS = "our proxy (primary only)"
#: Reads routed to two replicas and tracked: the same target against the forwarder.
ROUTED = "our proxy (+2 replicas)"
#: The same two with multiplexing off: each session keeps backend connections of its own.
OURS_UNSHARED = "  primary only, no multiplexing"
ROUTED_UNSHARED = "  +2 replicas, no multiplexing"
VARIANTS: list[tuple[str, bool, dict[str, str]]] = [
    (OURS, False, {}),
    ("  same, EOFs as the client's", False, {"backend_deprecate_eof": "false"}),
    (ROUTED, True, {}),
    (OURS_UNSHARED, False, {"pool_multiplexing": "false"}),
    (ROUTED_UNSHARED, True, {"pool_multiplexing": "false"}),
]
FROM_SOURCE = "  same, from source"


def start_targets(
    stack: contextlib.ExitStack, topology: MariaDBTopology, tmp: Path
) -> list[Target]:
    """Every forwarder and proxy, started once and left running for all rounds."""
    primary = topology.primary.port
    targets = []
    if shutil.which("haproxy"):
        port = free_port()
        (tmp / "haproxy.cfg").write_text(haproxy_config(port, primary))
        proc = stack.enter_context(
            process(["haproxy", "-f", str(tmp / "haproxy.cfg"), "-db"], port)
        )
        targets.append(Target("HAProxy (TCP mode)", port, USER, PASSWORD, proc.pid))
    else:
        print("haproxy is not installed (apt-get install -y haproxy): skipped")
    port = free_port()
    forwarder = [PYTHON, str(ROOT / "bench" / "forwarder.py"), str(port), str(primary)]
    proc = stack.enter_context(process(forwarder, port))
    targets.append(Target("uvloop forwarder", port, USER, PASSWORD, proc.pid))
    for number, (label, replicas, extra) in enumerate(VARIANTS):
        port = free_port()
        config = tmp / f"proxy-{number}.toml"
        config.write_text(proxy_config(topology, port, replicas, **extra))
        command = [PYTHON, "-m", "proxy", "--config", str(config)]
        proc = stack.enter_context(process(command, port, cwd=ROOT))
        targets.append(Target(label, port, USER, PASSWORD, proc.pid))
    if compiled_modules():
        port = free_port()
        config = tmp / "proxy-source.toml"
        config.write_text(proxy_config(topology, port, False))
        source = source_tree(tmp / "source", ROOT)
        command = [PYTHON, "-m", "proxy", "--config", str(config)]
        env = {**os.environ, "PYTHONPATH": str(source)}
        proc = stack.enter_context(process(command, port, cwd=source, env=env))
        targets.append(Target(FROM_SOURCE, port, USER, PASSWORD, proc.pid))
    return targets


def median_results(rounds: list[dict[str, Result]]) -> dict[str, Result]:
    """Per target, the round with the median QPS (the whole round's figures, not a mix)."""
    merged = {}
    for name in rounds[0]:
        ordered = sorted((r[name] for r in rounds), key=lambda r: r.qps)
        merged[name] = ordered[len(ordered) // 2]
    return merged


def ratio(results: dict[str, Result], name: str = OURS) -> float | None:
    ceiling = results.get("uvloop forwarder")
    ours = results.get(name)
    return ours.qps / ceiling.qps if ceiling and ours else None


def print_ratio(results: dict[str, Result]) -> None:
    value = ratio(results)
    if value is not None:
        print(f"our proxy / uvloop forwarder: {value:.2f}x (target >= 0.85x)")


def paired_ratio(rounds: list[dict[str, Result]], name: str = OURS) -> float | None:
    """The median over rounds of the ratio measured within each round (side by side): the
    machine's load moves between rounds, so a round's two figures belong together."""
    values = [v for v in (ratio(r, name) for r in rounds) if v is not None]
    return statistics.median(values) if values else None


def print_summary(rounds: list[dict[str, Result]], results: dict[str, Result]) -> None:
    value = paired_ratio(rounds)
    if value is None:
        return
    if len(rounds) == 1:
        print(f"our proxy / uvloop forwarder: {value:.2f}x (target >= 0.85x)")
    else:
        each = ", ".join(f"{v:.2f}" for v in (ratio(r) for r in rounds) if v is not None)
        of_medians = ratio(results)
        print(
            f"our proxy / uvloop forwarder: {value:.2f}x, the median of {len(rounds)} "
            f"side-by-side rounds ({each}; target >= 0.85x)"
        )
        if of_medians is not None:
            print(f"  (median QPS of each over the rounds: {of_medians:.2f}x)")
    routed = paired_ratio(rounds, ROUTED)
    if routed is not None:
        each = ", ".join(f"{v:.2f}" for v in (ratio(r, ROUTED) for r in rounds) if v is not None)
        print(f"with two replicas, routed: {routed:.2f}x ({each}; target >= 0.85x)")


def print_table(results: dict[str, Result]) -> None:
    base = results["MariaDB directly"]
    ceiling = results.get("uvloop forwarder")
    print(
        f"\n{'target':28s} {'QPS':>9s} {'/direct':>8s} {'/uvloop':>8s} {'p50 ms':>7s} "
        f"{'p95 ms':>7s} {'+p50':>6s} {'+p95':>6s} {'cpu us/q':>8s} {'(user)':>6s}"
    )
    for name, r in results.items():
        fwd = f"{r.qps / ceiling.qps:7.2f}x" if ceiling else "       -"
        cpu = f"{r.cpu_us:8.1f}" if r.cpu_us is not None else "       -"
        user = f"{r.user_us:6.1f}" if r.user_us is not None else "     -"
        print(
            f"{name:28s} {r.qps:9.0f} {r.qps / base.qps:7.2f}x {fwd} {r.p50:7.2f} {r.p95:7.2f} "
            f"{r.p50 - base.p50:+6.2f} {r.p95 - base.p95:+6.2f} {cpu} {user}"
        )


def figures(results: dict[str, Result]) -> dict[str, dict[str, float | None]]:
    base = results["MariaDB directly"]
    ceiling = results.get("uvloop forwarder")
    return {
        name: {
            "qps": round(r.qps, 1),
            "vs_direct": round(r.qps / base.qps, 3),
            "vs_uvloop_forwarder": round(r.qps / ceiling.qps, 3) if ceiling else None,
            "p50_ms": r.p50,
            "p95_ms": r.p95,
            "added_p50_ms": round(r.p50 - base.p50, 3),
            "added_p95_ms": round(r.p95 - base.p95, 3),
            "cpu_us_per_query": round(r.cpu_us, 1) if r.cpu_us is not None else None,
            "user_cpu_us_per_query": round(r.user_us, 1) if r.user_us is not None else None,
        }
        for name, r in results.items()
    }


def write_json(
    path: Path,
    args: argparse.Namespace,
    rounds: list[dict[str, Result]],
    results: dict[str, Result],
    profiled: list[tuple[str, float]],
) -> None:
    value = paired_ratio(rounds)
    of_medians = ratio(results)
    document = {
        "benchmark": f"sysbench {args.workload}",
        "workload": args.workload,
        "threads": args.threads,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "proxy_build": proxy_build(),
        "targets": figures(results),
        "proxy_vs_uvloop_forwarder": round(value, 3) if value is not None else None,
        "proxy_vs_uvloop_forwarder_per_round": [
            round(v, 3) for v in (ratio(r) for r in rounds) if v is not None
        ],
        "proxy_vs_uvloop_forwarder_of_median_qps": (
            round(of_medians, 3) if of_medians is not None else None
        ),
        "proxy_vs_uvloop_forwarder_target": 0.85,
        "routed_proxy_vs_uvloop_forwarder": (
            round(routed, 3) if (routed := paired_ratio(rounds, ROUTED)) is not None else None
        ),
        "routed_proxy_vs_uvloop_forwarder_per_round": [
            round(v, 3) for v in (ratio(r, ROUTED) for r in rounds) if v is not None
        ],
        "per_round": [figures(r) for r in rounds],
        "profile_self_share": [{"function": f, "share": round(s, 4)} for f, s in profiled],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"figures written to {path}")


if __name__ == "__main__":
    raise SystemExit(main())
