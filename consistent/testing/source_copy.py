"""The packages copied without their compiled modules: the source build beside the compiled one.

``make native`` compiles the per-statement path with mypyc; the same code must behave the same
interpreted.  Tests and benches run the source side in a subprocess whose ``PYTHONPATH`` starts
with this copy (it comes before the editable install, so nothing compiled is imported).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["PACKAGES", "source_tree"]

#: The top-level packages that hold compiled modules, or import them.
PACKAGES = ("consistent", "proxy")


def source_tree(path: Path, root: Path) -> Path:
    """Copy :data:`PACKAGES` from the checkout ``root`` into ``path`` without compiled modules,
    and check that the copy imports none; returns ``path``."""
    skip = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
    for package in PACKAGES:
        shutil.copytree(root / package, path / package, ignore=skip)
    check = (
        "import proxy.session as m, consistent.policy.session as p, consistent.native as n;"
        "print(n.is_compiled(m) or n.is_compiled(p))"
    )
    env = {**os.environ, "PYTHONPATH": str(path)}
    answer = subprocess.run(
        [sys.executable, "-c", check], cwd=path, env=env, capture_output=True, text=True, check=True
    )
    if answer.stdout.strip() != "False":
        raise RuntimeError(f"the source copy in {path} still imports compiled modules")
    return path
