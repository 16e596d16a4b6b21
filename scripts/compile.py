"""Compile the per-statement path (routing policy, proxy, emulator) with mypyc, next to the sources.

    python scripts/compile.py           # build every module of consistent.native.COMPILED
    python scripts/compile.py --clean   # remove the compiled modules (run from source again)

The modules are ordinary typed Python; mypyc turns them into C extensions that CPython
imports instead of the ``.py`` files beside them.  ``consistent.native`` lists them and
refuses to import a compiled module older than its source (see its docstring).  Without a
C compiler the build fails with the compiler's message; with no compiled module there,
everything runs from source.
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

from consistent.native import COMPILED, GROUPS, compiled_files, source_path  # noqa: E402


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

    def relative(name: str) -> str:
        return str(source_path(ROOT, name).relative_to(ROOT))

    # One group per package: its modules call each other natively and share one library.
    groups = [
        ([relative(name) for name in COMPILED if name.startswith(package + ".")], group)
        for package, group in GROUPS.items()
    ]
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="consistent-mypyc-") as scratch:
        extensions = mypycify(
            [relative(name) for name in COMPILED],
            opt_level="3",
            separate=groups,
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
