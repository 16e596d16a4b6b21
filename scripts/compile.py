"""Compile the proxy's hot path to C extensions with mypyc, next to their sources.

    python scripts/compile.py           # build every module of consistent.native.COMPILED
    python scripts/compile.py --clean   # remove the compiled modules (run from source again)

The modules are ordinary typed Python; mypyc turns them into C extensions that CPython
imports instead of the ``.py`` files beside them.  ``consistent.native`` lists them and
refuses to import a compiled module older than its source (see its docstring).  Without a
C compiler the build fails with the compiler's message and everything still runs from source.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consistent.native import COMPILED, GROUP, compiled_files, source_path  # noqa: E402


def clean() -> list[Path]:
    """Remove every compiled module (and their shared library) from the tree."""
    removed = [*compiled_files(ROOT)]
    for path in removed:
        path.unlink()
    return removed


def build(jobs: int) -> None:
    """Compile :data:`COMPILED` in a scratch directory, then copy the extensions in place."""
    from mypyc.build import mypycify  # noqa: PLC0415 (a build-time dependency only)
    from setuptools import Distribution  # type: ignore[import-untyped]  # noqa: PLC0415

    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        raise SystemExit(f"cannot compile: {headers} is missing (Debian: install python3-dev)")
    sources = [str(source_path(ROOT, name).relative_to(ROOT)) for name in COMPILED]
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="consistent-mypyc-") as scratch:
        extensions = mypycify(
            sources,
            opt_level="3",
            separate=[(sources, GROUP)],
            target_dir=str(Path(scratch) / "c"),
        )
        distribution = Distribution({"name": "consistent-native", "ext_modules": extensions})
        distribution.verbose = False
        command = distribution.get_command_obj("build_ext")
        command.build_temp = str(Path(scratch) / "temp")
        command.build_lib = str(Path(scratch) / "lib")
        command.parallel = jobs
        distribution.run_command("build_ext")
        built = Path(scratch) / "lib"
        for path in built.rglob("*"):
            if path.is_file():
                target = ROOT / path.relative_to(built)
                shutil.copy2(path, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    removed = clean()
    if args.clean:
        print(f"removed {len(removed)} compiled module(s)")
        return 0
    build(args.jobs)
    print(f"compiled {len(COMPILED)} module(s): {', '.join(COMPILED)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
