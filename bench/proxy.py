"""sysbench oltp_point_select through four targets, side by side in one run.

    python bench/proxy.py [--seconds 10] [--threads 8] [--profile] [--pipeline]

Targets, all on this machine (client, server and forwarder share its cores):

* MariaDB directly;
* HAProxy in TCP mode (Debian's ``haproxy``: a C layer-4 forwarder that understands nothing);
* the plain uvloop byte forwarder of ``bench/forwarder.py``, the ceiling of any Python proxy;
* our proxy, primary only (like for like with the forwarders); again with backends asked for
  CLIENT_DEPRECATE_EOF only when the client does (sysbench's libmariadb does not, so the
  default configuration translates every result set's EOFs); then with two replicas (reads
  routed to them and tracked).

It prints QPS, the ratios to MariaDB directly and to the uvloop forwarder, the median and 95th
percentile latency and what each layer adds to them, and our proxy's CPU time per query.
``--profile`` samples our proxy with py-spy during one more run and prints where the time goes;
``--pipeline`` measures a write-then-read loop with the wait pipelined with the read and
without.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
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

from consistent.testing.mariadb import MariaDBTopology, start_topology  # noqa: E402

PYTHON = sys.executable
USER, PASSWORD = "bench", "bench-secret"


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


def sysbench(target: Target, args: argparse.Namespace, command: str = "run") -> str:
    cmd = [
        "sysbench",
        "oltp_point_select",
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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(target: Target, args: argparse.Namespace) -> Result:
    before = cpu_seconds(target.pid) if target.pid else 0.0
    out = sysbench(target, args)
    after = cpu_seconds(target.pid) if target.pid else 0.0
    queries = int(re.search(r"queries:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    qps = float(re.search(r"queries:\s+\d+\s+\(([0-9.]+) per sec", out).group(1))  # type: ignore[union-attr]
    p50, p95 = percentiles(out)
    errors = int(re.search(r"ignored errors:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    if errors:
        print(f"  ! {target.name}: {errors} ignored errors")
    cpu = (after - before) / queries * 1e6 if target.pid else None
    return Result(qps, p50, p95, cpu)


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


def profile(pid: int, seconds: int, target: Target, args: argparse.Namespace) -> None:
    if shutil.which("py-spy") is None and not Path(sys.executable).with_name("py-spy").exists():
        print("py-spy is not installed: no profile")
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
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
                "--nonblocking",
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
        return
    print(f"\nwhere our proxy's time goes (py-spy, {total} samples, wall time while running):")
    print("  self:")
    for name, n in own.most_common(12):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  inclusive:")
    for name, n in inclusive.most_common(30):
        if name.startswith(("<module>", "_run", "run (", "main", "command", "Runner")):
            continue
        print(f"    {100 * n / total:5.1f}%  {name}")


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
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--pipeline", action="store_true")
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
    results: dict[str, Result] = {}
    print(
        f"sysbench oltp_point_select, {args.threads} threads, {args.seconds} s per target, "
        f"{os.cpu_count()} cores shared by everything\n"
    )
    sysbench(direct, argparse.Namespace(**{**vars(args), "seconds": 2}))  # warm the buffer pool
    results["MariaDB directly"] = measure(direct, args)
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    if shutil.which("haproxy"):
        port = free_port()
        (tmp / "haproxy.cfg").write_text(haproxy_config(port, primary))
        with process(["haproxy", "-f", str(tmp / "haproxy.cfg"), "-db"], port) as proc:
            results["HAProxy (TCP mode)"] = measure(
                Target("haproxy", port, USER, PASSWORD, proc.pid), args
            )
    else:
        print("haproxy is not installed (apt-get install -y haproxy): skipped")
    port = free_port()
    with process(
        [PYTHON, str(ROOT / "bench" / "forwarder.py"), str(port), str(primary)], port
    ) as proc:
        results["uvloop forwarder"] = measure(
            Target("forwarder", port, USER, PASSWORD, proc.pid), args
        )
    variants: list[tuple[str, bool, dict[str, str]]] = [
        ("our proxy (primary only)", False, {}),
        ("  same, EOFs as the client's", False, {"backend_deprecate_eof": "false"}),
        ("our proxy (+2 replicas)", True, {}),
    ]
    for number, (label, replicas, extra) in enumerate(variants):
        port = free_port()
        config = tmp / f"proxy-{number}.toml"
        config.write_text(proxy_config(topology, port, replicas, **extra))
        with process([PYTHON, "-m", "proxy", "--config", str(config)], port, cwd=ROOT) as proc:
            target = Target(label, port, USER, PASSWORD, proc.pid)
            sysbench(target, argparse.Namespace(**{**vars(args), "seconds": 2}))  # warm up
            results[label] = measure(target, args)
            if args.profile and number == 0:
                profiled_target, profiled_pid = target, proc.pid
                profile(profiled_pid, min(args.seconds, 8), profiled_target, args)
    base = results["MariaDB directly"]
    ceiling = results.get("uvloop forwarder")
    print(
        f"\n{'target':28s} {'QPS':>9s} {'/direct':>8s} {'/uvloop':>8s} {'p50 ms':>7s} "
        f"{'p95 ms':>7s} {'+p50':>6s} {'+p95':>6s} {'cpu us/q':>8s}"
    )
    for name, r in results.items():
        fwd = f"{r.qps / ceiling.qps:7.2f}x" if ceiling else "       -"
        cpu = f"{r.cpu_us:8.1f}" if r.cpu_us is not None else "       -"
        print(
            f"{name:28s} {r.qps:9.0f} {r.qps / base.qps:7.2f}x {fwd} {r.p50:7.2f} {r.p95:7.2f} "
            f"{r.p50 - base.p50:+6.2f} {r.p95 - base.p95:+6.2f} {cpu}"
        )
    if ceiling is not None:
        ours = results["our proxy (primary only)"]
        print(f"\nour proxy / uvloop forwarder: {ours.qps / ceiling.qps:.2f}x (target >= 0.85x)")
    if args.pipeline:
        pipeline_gain(topology, 300)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
