"""What the proxy benches share: a proxy in its own process, its memory, its admin status.

The benches import it as a sibling module (``python bench/X.py`` puts ``bench/`` first on the
path).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid``, in MB (0 when it is gone)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def admin_status(admin: int, token: str) -> dict[str, Any]:
    """The proxy's ``/status`` from its admin endpoint on ``admin``."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/status", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


@contextlib.contextmanager
def proxy_process(config: Path, port: int, root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m proxy --config config`` with the packages of ``root`` first on the path,
    once it accepts connections on ``port`` (20 s at most); stopped with SIGTERM on exit."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--config", str(config)],
        cwd=root,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)
